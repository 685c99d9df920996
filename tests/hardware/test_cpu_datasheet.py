"""CPUs without a calibration profile: /proc/cpuinfo text read into a Device of kind "cpu" (the datasheet tier),
peaks in closed form, and predictions on it (planner/hardware/cpu.py)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from planner.hardware.cpu import (
    DEFAULT_CLOCK_HZ,
    DEFAULT_MEM_BYTES_PER_S_PER_CORE,
    datasheet_device,
    dimms_from_smbios,
    flop_rule,
    host_device,
    load_flop_rules,
    parse_host,
    read_host,
)
from planner.predict.context import Context, default_context

ROOT = Path(__file__).resolve().parents[2]
RULES = load_flop_rules()


def _x86(vendor: str, name: str, family: int, model: int, flags: str, sockets: int, cores: int, threads: int,
         mhz: float) -> str:
    """/proc/cpuinfo text of `sockets` x `cores` x `threads` processors, as Linux writes it on x86."""
    blocks, n = [], 0
    for socket in range(sockets):
        for thread in range(threads):
            for core in range(cores):
                blocks.append(f"processor\t: {n}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
                              f"model name\t: {name}\ncpu MHz\t\t: {mhz:.3f}\nphysical id\t: {socket}\n"
                              f"siblings\t: {cores * threads}\ncore id\t\t: {core}\ncpu cores\t: {cores}\n"
                              f"flags\t\t: {flags}\n")
                n += 1
    return "\n".join(blocks) + "\n"


XEON_FLAGS = "fpu sse sse2 avx fma avx2 avx512f avx512dq avx512bw avx512vl avx512_bf16 amx_bf16 amx_tile amx_int8"
# a 2-socket Xeon Platinum 8480+: 56 cores x 2 threads per socket, model name with its base clock
XEON = _x86("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+ @ 2.00GHz", 6, 143, XEON_FLAGS, 2, 56, 2, 2000.0)
# an EPYC 7763 (Zen 3, family 25): AVX2 only, 64 cores x 2 threads, no GHz in the name
EPYC = _x86("AuthenticAMD", "AMD EPYC 7763 64-Core Processor", 25, 1, "fpu sse sse2 avx fma avx2", 1, 64, 2, 2450.0)
# Graviton2 (Neoverse N1, implementer 0x41 part 0xd0c): no model name, no clock, no core id
NEOVERSE = "".join(f"processor\t: {i}\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 "
                   f"atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\nCPU implementer\t: 0x41\n"
                   f"CPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n"
                   for i in range(16))
MEMINFO = "MemTotal:       32768000 kB\nMemFree:         1000 kB\n"


def test_an_avx512_amx_xeon_reads_its_cores_clock_and_flags():
    host = parse_host(XEON, MEMINFO, max_freq_khz="3800000\n")
    # 2 sockets x 56 distinct core ids = 112 cores of 224 processors
    assert (host.vendor, host.logical_cpus, host.cores) == ("Intel", 224, 112)
    assert host.clock_hz == 3.8e9  # cpufreq's maximum (kHz) wins over the name's 2.00 GHz
    assert host.memory_bytes == 32768000 * 1024
    assert flop_rule(host, RULES).flop_per_cycle == {"fp64": 32, "fp32": 64, "bf16": 1024}
    device = datasheet_device(host, RULES)
    # 112 cores x 3.8e9 Hz x 64 FLOP/cycle (2 FMA x 16 fp32 lanes x 2 FLOP) = 27.2384e12
    assert device.peak("fp32") == pytest.approx(112 * 3.8e9 * 64) == pytest.approx(27.2384e12)
    # AMX: 112 x 3.8e9 x 1024 = 435.8144e12
    assert device.peak("bf16") == pytest.approx(435.8144e12)
    assert device.peak("fp64") == pytest.approx(112 * 3.8e9 * 32)
    # no DIMM readable: 112 cores x 4.8 GB/s = 537.6 GB/s
    assert device.mem_bytes_per_s == pytest.approx(112 * 4.8e9)
    assert device.kind == "cpu" and device.compute_units == 112 and device.id.startswith("cpu-intel-")
    assert "hardware_specs/cpu/flop_per_cycle.csv" in device.source


def test_the_clock_falls_back_to_the_model_name_then_cpu_mhz():
    assert parse_host(XEON).clock_hz == 2.0e9  # "@ 2.00GHz"
    assert parse_host(EPYC).clock_hz == pytest.approx(2.45e9)  # "cpu MHz: 2450.000"
    assert parse_host(NEOVERSE).clock_hz == DEFAULT_CLOCK_HZ  # nothing given
    assert parse_host(XEON, max_freq_khz="garbage").clock_hz == 2.0e9


def test_an_avx2_epyc_takes_the_zen3_row():
    host = parse_host(EPYC, usable_cpus=8)
    assert (host.vendor, host.family, host.logical_cpus) == ("AMD", "25", 128)
    assert host.cores == 8  # 64 physical cores, of which the process may use 8 CPUs
    rule = flop_rule(host, RULES)
    assert "Zen 3" in rule.microarchitecture and rule.flop_per_cycle["fp32"] == 32
    device = datasheet_device(host, RULES)
    # 8 cores x 2.45e9 x 32 (2 FMA x 8 fp32 lanes x 2 FLOP) = 627.2e9; bf16 at the fp32 rate
    assert device.peak("fp32") == pytest.approx(627.2e9)
    assert device.peak("bf16") == device.peak("fp32")
    assert device.mem_bytes_per_s == pytest.approx(8 * DEFAULT_MEM_BYTES_PER_S_PER_CORE)  # 38.4e9


def test_an_arm_neoverse_n1_reads_its_part():
    host = parse_host(NEOVERSE, MEMINFO)
    assert (host.vendor, host.arm_part, host.logical_cpus, host.cores) == ("Arm", "0xd0c", 16, 16)
    assert "asimd" in host.flags
    rule = flop_rule(host, RULES)
    assert rule.microarchitecture.startswith("Neoverse N1")
    device = datasheet_device(host, RULES)
    # 16 cores x 2.0e9 (assumed) x 16 (2 FMA x 4 fp32 lanes x 2 FLOP) = 512e9
    assert device.peak("fp32") == pytest.approx(512e9)
    assert device.name.startswith("Arm Neoverse N1")
    assert device.id == "cpu-cpu-unknown-x-x-16c"  # as planner calibrate files it: no vendor_id, no model name
    assert "assumed" in device.source


@pytest.mark.parametrize("text", [None, "", "\x00\xff garbage\nno colon here\n::::\nprocessor: x\n",
                                  "processor\t: 0\ncpu MHz: nan\ncore id: \nflags: \n", "x" * 10_000_000])
def test_garbled_or_missing_cpuinfo_falls_back_without_raising(text):
    host = parse_host(text, "MemTotal: lots", "-5", b"\x11\x02", usable_cpus=0)
    assert host.cores >= 1 and host.logical_cpus >= 1 and host.clock_hz == DEFAULT_CLOCK_HZ
    assert host.memory_bytes is None
    device = datasheet_device(host, RULES)
    # the catch-all row: one scalar FMA per core and cycle, 2 FLOP
    assert device.peak("fp32") == pytest.approx(host.cores * DEFAULT_CLOCK_HZ * 2)
    assert device.mem_bytes_per_s == pytest.approx(host.cores * DEFAULT_MEM_BYTES_PER_S_PER_CORE)


def _dimm(size_mb: int, speed: int, configured: int) -> bytes:
    body = bytearray(0x28)
    body[0], body[1] = 17, 0x28
    struct.pack_into("<H", body, 0x0A, 72)  # data width with ECC
    struct.pack_into("<H", body, 0x0C, size_mb)
    struct.pack_into("<H", body, 0x15, speed)
    struct.pack_into("<H", body, 0x20, configured)
    return bytes(body) + b"DIMM A1\x00\x00"


def test_dimms_from_smbios_give_the_bandwidth():
    table = _dimm(32768, 4800, 4400) * 8 + _dimm(0, 0, 0) * 4 + bytes([127, 4, 0, 0]) + b"\x00\x00"
    # 8 populated DIMMs at their configured 4400 MT/s x 8 data bytes (ECC bits carry none)
    assert dimms_from_smbios(table) == [(4400e6, 8.0)] * 8
    host = parse_host(XEON, smbios=table)
    assert host.mem_bytes_per_s == pytest.approx(8 * 4400e6 * 8)  # 281.6 GB/s
    assert dimms_from_smbios(table[:50]) == [(4400e6, 8.0)]  # cut short: what was read
    assert dimms_from_smbios(b"\xff" * 100) == []


def test_the_table_file_is_well_formed_and_ends_with_a_catch_all():
    assert RULES[-1].vendor == "*" and not RULES[-1].requires
    for rule in RULES:
        assert rule.source and rule.date and rule.flop_per_cycle["fp32"] >= 2
        if "fp64" in rule.flop_per_cycle:  # fp64 lanes are half as many as fp32's
            assert rule.flop_per_cycle["fp64"] * 2 == rule.flop_per_cycle["fp32"] or rule.flop_per_cycle["fp32"] == 2


def test_the_catalog_cpus_peaks_are_this_tables_products():
    ctx = default_context()
    xeon, epyc = ctx.device("xeon-8480"), ctx.device("epyc-9654")
    # 56 cores x 3.8 GHz (max turbo) x 64 = 13.6192e12; AMX 56 x 3.8e9 x 1024 = 217.9072e12
    assert xeon.peak("fp32") == pytest.approx(56 * 3.8e9 * 64) and xeon.peak("bf16") == pytest.approx(217.9072e12)
    # 96 cores x 3.7 GHz x 32 = 11.3664e12
    assert epyc.peak("fp32") == pytest.approx(96 * 3.7e9 * 32)


def test_a_catalog_cpu_predicts_on_the_datasheet_tier():
    from planner.api import predict

    p = predict("gpt2", "xeon-8480", dtype="fp32")
    assert p.tier == "datasheet" and p.metrics


def _context_with_host(text: str) -> Context:
    """The shipped context, except that the local CPU is read from `text` (a CPU no profile covers)."""
    ctx = default_context()
    return Context(ctx.catalog, ctx.defaults, ctx.power, ctx.profiles, bands=ctx.bands,
                   host=lambda: parse_host(text, MEMINFO))


def test_cpu_resolves_to_the_profiled_device_where_a_profile_exists():
    ctx = default_context()
    here = read_host()
    device = host_device(here, RULES, ctx.profiles)
    if here.id in ctx.profiles:
        assert device.source.startswith("calibration profile")
    else:
        assert device.source.startswith("read from this host")
    # a profile under the host's id is taken: the shipped profile's CPU (AMD EPYC, family 25 model 17, 2 CPUs)
    dev_cpu = ("processor: 0\nvendor_id: AuthenticAMD\ncpu family: 25\nmodel: 17\nmodel name: AMD EPYC\n"
               "core id: 0\nflags: avx2 fma avx512f\n\nprocessor: 1\nvendor_id: AuthenticAMD\ncpu family: 25\n"
               "model: 17\nmodel name: AMD EPYC\ncore id: 1\nflags: avx2 fma avx512f\n")
    profiled = _context_with_host(dev_cpu)
    assert profiled.device("cpu").id == "cpu-amd-epyc-25-17-2c"
    assert profiled.efficiency(profiled.device("cpu")).tier == "measured"


def _no_faster_than_the_roofline(out: dict, device) -> None:
    """TTFT and TPOT of a bf16 gpt2 prediction at or above their roofline floors on `device`."""
    weights = out["memory"]["weights_bytes"]  # 124.4M parameters x 2 bytes
    # every decode step reads every weight once: TPOT >= weight bytes / bandwidth
    assert out["tpot_s"] >= weights / device.mem_bytes_per_s
    # prefill: 2 FLOP per parameter per input token at the bf16 peak, or the weights read once
    params = weights / 2
    assert out["ttft_s"] >= max(2 * params * out["input_len"] / device.peak("bf16"), weights / device.mem_bytes_per_s)


def test_gpt2_on_a_cpu_no_profile_covers_is_datasheet_and_no_faster_than_its_roofline():
    from planner.api import predict

    ctx = _context_with_host(XEON)  # the Xeon of the fixture: no profile under its id
    device = ctx.device("cpu")
    assert device.id not in ctx.profiles and device.compute_units == 112
    p = predict("gpt2", "cpu", context=ctx)
    out = p.to_dict()
    assert out["tier"] == "datasheet" and out["device"] == device.id
    _no_faster_than_the_roofline(out, device)


@pytest.fixture(scope="module")
def specs_without_profiles(tmp_path_factory) -> Path:
    """A copy of hardware_specs/ without the calibration profiles: every CPU is one no profile covers."""
    root = tmp_path_factory.mktemp("specs") / "hardware_specs"
    shutil.copytree(ROOT / "hardware_specs", root, ignore=shutil.ignore_patterns("calibration"))
    (root / "calibration").mkdir()
    return root


def _cli(*args: str, specs: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner.cli", *args], check=False, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PLANNER_HARDWARE_SPECS": str(specs)}, timeout=300)


def test_cli_predict_on_the_local_cpu_without_a_profile(specs_without_profiles):
    result = _cli("predict", "gpt2", "--device", "cpu", "--json", specs=specs_without_profiles)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    device = datasheet_device(read_host(), RULES)
    assert out["tier"] == "datasheet" and out["device"] == device.id
    assert "datasheet tier" in out["band_basis"]
    _no_faster_than_the_roofline(out, device)
    text = _cli("predict", "gpt2", "--device", "cpu", specs=specs_without_profiles)
    assert text.returncode == 0 and "read from this host" in text.stdout


def test_cli_an_unknown_device_lists_cpu(specs_without_profiles):
    result = _cli("predict", "gpt2", "--device", "cpux", specs=specs_without_profiles)
    assert result.returncode == 2 and "Traceback" not in result.stderr and "cpu" in result.stderr


@pytest.mark.slow
def test_cli_validate_on_the_local_cpu_without_a_profile_reports_the_datasheet_error(specs_without_profiles):
    result = _cli("validate", "--device", "cpu", "--models", "gpt2:decode:b=1:c=32", "--budget-per-case-s", "0.3",
                  specs=specs_without_profiles)
    assert result.returncode == 0, result.stderr
    assert "no calibration profile" in result.stdout and "datasheet tier: median abs error" in result.stdout
    assert "| gemm 100x700x3000 fp32 | op | datasheet |" in result.stdout
