"""The datasheet tier of a CPU: what the host says about its CPU, read into a Device of kind "cpu".

    peak FLOP/s  = cores x clock x FLOP per cycle per core           (per dtype)
    FLOP / cycle = FMA units x SIMD lanes of the dtype x 2 FLOP       (hardware_specs/cpu/flop_per_cycle.csv,
                                                                       each row with its vendor manual)
    bandwidth    = populated DIMMs x configured MT/s x data width     (SMBIOS type 17, where readable)
                 else cores x DEFAULT_MEM_BYTES_PER_S_PER_CORE

Everything here is a pure function of the text the system gives (/proc/cpuinfo, /proc/meminfo, the cpufreq
maximum, the SMBIOS table), so fixtures test it; `read_host` alone reads files, and a file that is missing or
unreadable is taken as absent: each figure then falls back to the next source, and the Device's `source` line
names every fallback taken. Nothing here raises on odd text.

A CPU with a calibration profile of its own keeps it (Context.device: the measured tier); this is the tier of
every other CPU, including the catalog's Xeon and EPYC rows, whose peaks are these same products.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from planner.files import shipped_specs
from planner.hardware.catalog import Device
from planner.hardware.cells import read_rows

RULES_PATH = shipped_specs() / "cpu" / "flop_per_cycle.csv"
RULE_COLUMNS = ("vendor", "family", "models", "arm_part", "requires", "microarchitecture", "fp64_flop_per_cycle",
                "fp32_flop_per_cycle", "bf16_flop_per_cycle", "source", "date", "notes")

DEFAULT_MEM_BYTES_PER_S_PER_CORE = 4.8e9
"""DRAM bandwidth per core where the memory's channels and speed cannot be read (a VM, no root): the share of
one core in the AMD EPYC 9654's 460.8 GB/s (12 channels of DDR5-4800 x 8 bytes) over its 96 cores, the lower of
the two catalog CPUs (Xeon Platinum 8480+: 307.2 GB/s over 56 cores = 5.49 GB/s); both from their datasheets
(hardware_specs/devices.csv, 2026-11). A copy through PyTorch on the 2-vCPU Xeon VM of this workplace read
8.3 GB/s counting read plus written bytes (2026-11-29), within 15% of 2 x 4.8."""
DEFAULT_CLOCK_HZ = 2.0e9
"""Clock where the system gives none (no cpufreq, no "@ x.xxGHz" in the model name, no "cpu MHz": most Arm
hosts in a VM): the Xeon Platinum 8480+'s 2.0 GHz base clock (Intel ARK, via hardware_specs/devices.csv), the
lowest clock of the catalog CPUs."""
MAX_TEXT_CHARS = 4_000_000
"""Longest /proc/cpuinfo read (a 512-CPU host writes about 1.5 MB); the rest is ignored."""
MAX_CORES = 4096
MAX_DMI_BYTES = 1 << 20

X86_VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD", "HygonGenuine": "Hygon", "CentaurHauls": "Centaur"}
ARM_IMPLEMENTERS = {"0x41": "Arm", "0x42": "Broadcom", "0x43": "Cavium", "0x46": "Fujitsu", "0x48": "HiSilicon",
                    "0x4e": "NVIDIA", "0x51": "Qualcomm", "0x61": "Apple", "0xc0": "Ampere"}
"""Arm MIDR implementer codes (Arm Architecture Reference Manual DDI 0487, MIDR_EL1.Implementer), as lscpu
names them."""


@dataclass(frozen=True, slots=True)
class HostCpu:
    """What the system says about the local CPU, and where each figure came from."""

    vendor: str
    """"Intel", "AMD", "Arm" (implementer 0x41), another implementer's name, or "" when not read."""
    vendor_id: str
    """As /proc/cpuinfo writes it ("GenuineIntel"; "" on Arm): the calibration profile's id uses it."""
    model_name: str
    """"model name" (x86); "" when not read (Arm kernels write none: the Device is named by its table row)."""
    family: str
    """x86 "cpu family" ("" when not read)."""
    model: str
    """x86 "model" ("" when not read)."""
    arm_part: str
    """Arm "CPU part" in lower-case hex ("0xd0c"); "" on x86."""
    flags: frozenset[str]
    """x86 "flags" or Arm "Features"."""
    logical_cpus: int
    """Processors listed (count; at least 1)."""
    cores: int
    """Physical cores this process may use (count): distinct (physical id, core id) pairs, at most the CPUs it
    may run on."""
    clock_hz: float
    """Highest clock read (Hz): cpufreq's maximum, else the model name's, else "cpu MHz", else DEFAULT_CLOCK_HZ."""
    memory_bytes: float | None
    """MemTotal (bytes); None when not read."""
    mem_bytes_per_s: float
    """DRAM bandwidth (bytes/s): from the DIMMs where SMBIOS gives them, else cores x the per-core default."""
    notes: tuple[str, ...]
    """Where each figure came from, one phrase each."""

    @property
    def id(self) -> str:
        """The id a calibration profile of this CPU is filed under (planner calibrate's LocalDevice.id)."""
        return cpu_profile_id(self.vendor_id, self.model_name, self.family, self.model, self.logical_cpus)


@dataclass(frozen=True, slots=True)
class FlopRule:
    """One row of hardware_specs/cpu/flop_per_cycle.csv: the FLOP per cycle per core of CPUs that match it."""

    vendor: str
    """"Intel", "AMD", "Arm" or "*" (any)."""
    family: str
    """x86 cpu family ("" any)."""
    models: tuple[int, int] | None
    """x86 model range, both ends included (None: any)."""
    arm_part: str
    """Arm CPU part ("" any)."""
    requires: frozenset[str]
    """Flags the CPU must list, all of them."""
    microarchitecture: str
    flop_per_cycle: dict[str, float]
    """FLOP per cycle per core by dtype (fp64, fp32 and, where the row gives it, bf16)."""
    source: str
    date: str

    def matches(self, host: HostCpu) -> bool:
        """True when `host` is of this row's vendor, family, model range and part and lists its flags."""
        if self.vendor != "*" and self.vendor != host.vendor:
            return False
        if self.family and self.family != host.family:
            return False
        if self.models is not None:
            model = _int(host.model)
            if model is None or not self.models[0] <= model <= self.models[1]:
                return False
        if self.arm_part and self.arm_part != host.arm_part:
            return False
        return self.requires <= host.flags


def cpu_profile_id(vendor_id: str, model_name: str, family: str, model: str, logical_cpus: int) -> str:
    """The id `planner calibrate --device cpu` files a CPU's profile under: "cpu-<vendor>-<model name>-<family>-
    <model>-<logical CPUs>c" in lower-case letters, digits and dashes ("cpu-amd-epyc-25-17-2c")."""
    vendor = {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(vendor_id, _slug(vendor_id or "cpu"))
    name = _slug(model_name or "unknown").replace(vendor + "-", "", 1)
    return _slug(f"cpu-{vendor}-{name}-{family or 'x'}-{model or 'x'}-{logical_cpus}c")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _int(text: str) -> int | None:
    """A whole number written in decimal or 0x hex, else None."""
    text = text.strip().lower()
    try:
        return int(text, 16) if text.startswith("0x") else int(text)
    except ValueError:
        return None


def _positive(text: str) -> float | None:
    """A finite number above 0, else None (the text may hold anything)."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if 0 < value < float("inf") else None


# ------------------------------------------------------------------ the text the system gives

def parse_cpuinfo(text: str | None) -> list[dict[str, str]]:
    """The processor blocks of /proc/cpuinfo text, each a dict of key -> value (keys lower case, stripped);
    lines without a colon are skipped, text past MAX_TEXT_CHARS ignored. Arm kernels write one block per
    processor plus a trailing block of machine-wide keys; both are kept."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in (text or "")[:MAX_TEXT_CHARS].splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, colon, value = line.partition(":")
        if colon:
            current.setdefault(key.strip().lower(), value.strip())
    if current:
        blocks.append(current)
    return blocks


def _first(blocks: list[dict[str, str]], key: str) -> str:
    return next((b[key] for b in blocks if b.get(key)), "")


def clock_from(cpuinfo_blocks: list[dict[str, str]], model_name: str, max_freq_khz: str | None) -> tuple[float, str]:
    """(Hz, where it came from): cpufreq's cpuinfo_max_freq (kHz; what lscpu shows as "CPU max MHz"), else the
    "@ 2.00GHz" of an Intel model name, else the highest "cpu MHz" listed (a VM's nominal clock), else
    DEFAULT_CLOCK_HZ."""
    khz = _positive(max_freq_khz or "")
    if khz is not None and 1e5 <= khz <= 1e7:  # 100 MHz .. 10 GHz
        return khz * 1e3, "max clock from cpufreq"
    m = re.search(r"@\s*([0-9]+(?:\.[0-9]+)?)\s*GHz", model_name, re.IGNORECASE)
    if m and 0.1 <= float(m.group(1)) <= 10:
        return float(m.group(1)) * 1e9, "clock from the model name"
    mhz = [v for v in (_positive(b.get("cpu mhz", "")) for b in cpuinfo_blocks) if v is not None and 100 <= v <= 1e4]
    if mhz:
        return max(mhz) * 1e6, "clock from 'cpu MHz'"
    return DEFAULT_CLOCK_HZ, f"no clock read: {DEFAULT_CLOCK_HZ / 1e9:g} GHz assumed"


def cores_from(blocks: list[dict[str, str]], usable_cpus: int | None) -> tuple[int, int, str]:
    """(logical CPUs, physical cores usable, where the cores came from): the processors listed, the distinct
    (physical id, core id) pairs among them (each processor its own core where the kernel lists no core id,
    as on Arm), and at most `usable_cpus` (the CPUs this process may run on)."""
    processors = [b for b in blocks if "processor" in b and _int(b["processor"]) is not None]
    logical = max(1, min(len(processors), MAX_CORES))
    pairs = {(b.get("physical id", "0"), b["core id"]) for b in processors if "core id" in b}
    cores, how = (len(pairs), "cores from core ids") if pairs else (logical, "one core per processor listed")
    if not processors:
        cores, how = 1, "no processor listed: 1 core assumed"
    if usable_cpus is not None and 0 < usable_cpus < cores:
        cores, how = usable_cpus, f"{usable_cpus} CPUs usable by this process"
    return logical, max(1, min(cores, MAX_CORES)), how


def memory_total_bytes(meminfo: str | None) -> float | None:
    """MemTotal of /proc/meminfo text in bytes (the file writes kB = 1024 bytes), or None."""
    m = re.search(r"^MemTotal:\s+([0-9]{1,15})\s*kB", (meminfo or "")[:100_000], re.MULTILINE)
    return int(m.group(1)) * 1024.0 if m and int(m.group(1)) > 0 else None


def dimms_from_smbios(table: bytes | None) -> list[tuple[float, float]]:
    """(transfers per s, bytes per transfer) of each populated memory device in a raw SMBIOS table
    (/sys/firmware/dmi/tables/DMI): type 17 structures (DMTF DSP0134 3.x, "Memory Device"): Size at offset 0x0C
    (0: empty slot), Data Width in bits at 0x0A, Speed at 0x15 and Configured Memory Speed at 0x20 in MT/s
    (0xFFFF: the extended DWORDs at 0x54 and 0x58). The configured speed is taken where given, else the rated.
    A structure cut short or of unknown speed is left out; a malformed table gives what was read before it."""
    dimms: list[tuple[float, float]] = []
    data, at = (table or b"")[:MAX_DMI_BYTES], 0
    while at + 4 <= len(data):
        kind, length = data[at], data[at + 1]
        if length < 4 or at + length > len(data):
            break
        if kind == 127:  # end of table
            break
        body = data[at:at + length]
        if kind == 17 and length >= 0x17:
            size, width = _field(body, 0x0C, "<H"), _field(body, 0x0A, "<H")
            speed = _field(body, 0x20, "<H") or _field(body, 0x15, "<H")
            if speed == 0xFFFF:
                speed = _field(body, 0x58, "<I") or _field(body, 0x54, "<I")
            if size not in (0, 0xFFFF) and 0 < speed < 100_000:
                bits = width if width in (16, 32, 64, 72, 80, 128) else 64
                dimms.append((speed * 1e6, min(bits, 64) / 8))  # ECC bits (72) carry no data
        # the formatted area is followed by its strings, ended by two NULs
        end = data.find(b"\x00\x00", at + length)
        if end < 0:
            break
        at = end + 2
    return dimms


def _field(body: bytes, offset: int, layout: str) -> int:
    """The little-endian WORD ("<H") or DWORD ("<I") at `offset` of an SMBIOS structure; 0 past its end (an older
    SMBIOS version's shorter structure)."""
    size = struct.calcsize(layout)
    return struct.unpack_from(layout, body, offset)[0] if offset + size <= len(body) else 0


def parse_host(cpuinfo: str | None, meminfo: str | None = None, max_freq_khz: str | None = None,
               smbios: bytes | None = None, usable_cpus: int | None = None) -> HostCpu:
    """The HostCpu described by the given text (each None where it could not be read); never raises."""
    blocks = parse_cpuinfo(cpuinfo)
    notes: list[str] = []
    vendor_id = _first(blocks, "vendor_id")
    implementer = _first(blocks, "cpu implementer").lower()
    arm_part = _first(blocks, "cpu part").lower() if implementer else ""
    vendor = X86_VENDORS.get(vendor_id, vendor_id) if vendor_id else ARM_IMPLEMENTERS.get(implementer, implementer)
    flags = frozenset(_first(blocks, "flags").split() or _first(blocks, "features").split())
    model_name = _first(blocks, "model name")
    if not blocks:
        notes.append("/proc/cpuinfo not read")
    logical, cores, how = cores_from(blocks, usable_cpus)
    notes.append(how)
    clock, where = clock_from(blocks, model_name, max_freq_khz)
    notes.append(where)
    dimms = dimms_from_smbios(smbios)
    if dimms:
        bandwidth = sum(rate * width for rate, width in dimms)
        notes.append(f"memory bandwidth from {len(dimms)} DIMMs in SMBIOS (one per channel assumed)")
    else:
        bandwidth = cores * DEFAULT_MEM_BYTES_PER_S_PER_CORE
        notes.append(f"memory bandwidth {DEFAULT_MEM_BYTES_PER_S_PER_CORE / 1e9:g} GB/s per core assumed "
                     "(no DIMM speed readable)")
    return HostCpu(vendor, vendor_id, model_name, _first(blocks, "cpu family"), _first(blocks, "model"), arm_part,
                   flags, logical, cores, clock, memory_total_bytes(meminfo), bandwidth, tuple(notes))


def read_host() -> HostCpu:
    """The local CPU, read from /proc and /sys; what cannot be read is taken as absent (parse_host)."""

    def text(path: str) -> str | None:
        try:
            with open(path, "rb") as f:
                return f.read(MAX_TEXT_CHARS).decode("utf-8", "replace")
        except OSError:
            return None

    try:
        with open("/sys/firmware/dmi/tables/DMI", "rb") as f:
            smbios = f.read(MAX_DMI_BYTES)
    except OSError:
        smbios = None
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return parse_host(text("/proc/cpuinfo"), text("/proc/meminfo"),
                      text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"), smbios, usable)


# ------------------------------------------------------------------ FLOP per cycle and the Device

@lru_cache(maxsize=4)
def load_flop_rules(path: str | None = None) -> tuple[FlopRule, ...]:
    """The rows of hardware_specs/cpu/flop_per_cycle.csv (or `path`) in file order; CatalogError naming the
    row and column of a bad cell."""
    rules = []
    for row in read_rows(Path(path) if path else RULES_PATH, RULE_COLUMNS, rows_required=True):
        vendor = row.text("vendor")
        models = row.text("models", required=False)
        span = None
        if models:
            lo, dash, hi = models.partition("-")
            span = (_int(lo), _int(hi)) if dash else (_int(lo), _int(lo))
            if None in span or span[0] > span[1]:
                row.fail("models", "a model range lo-hi of whole numbers, lo <= hi (e.g. 48-255)")
        flop = {dtype: row.number(f"{dtype}_flop_per_cycle", 1, 1e5, required=dtype == "fp32")
                for dtype in ("fp64", "fp32", "bf16")}
        rules.append(FlopRule(vendor, row.text("family", required=False) or "", span,
                              (row.text("arm_part", required=False) or "").lower(),
                              frozenset((row.text("requires", required=False) or "").split()),
                              row.text("microarchitecture"), {k: v for k, v in flop.items() if v is not None},
                              row.text("source"), row.date()))
    return tuple(rules)


def flop_rule(host: HostCpu, rules: tuple[FlopRule, ...]) -> FlopRule | None:
    """The first row that `host` matches (the table runs from specific to generic), or None."""
    return next((rule for rule in rules if rule.matches(host)), None)


def peak_flop_per_s(cores: int, clock_hz: float, rule: FlopRule) -> dict[str, float]:
    """Dense peak FLOP/s per dtype: cores x clock_hz x FLOP per cycle per core. bf16 without a figure of its
    own is taken at the fp32 rate (the GEMM library converts bf16 to fp32 on such CPUs)."""
    per_cycle = dict(rule.flop_per_cycle)
    per_cycle.setdefault("bf16", per_cycle["fp32"])
    return {dtype: cores * clock_hz * flop for dtype, flop in per_cycle.items()}


def datasheet_device(host: HostCpu, rules: tuple[FlopRule, ...]) -> Device:
    """The Device of `host` from its datasheet figures (tier datasheet): peaks from the FLOP/cycle table, the
    bandwidth and memory read; the source names every figure's origin."""
    rule = flop_rule(host, rules) or FlopRule("*", "", None, "", frozenset(), "scalar", {"fp32": 2.0, "fp64": 2.0},
                                              "one scalar FMA per cycle", "2026-11")
    peaks = peak_flop_per_s(host.cores, host.clock_hz, rule)
    name = host.model_name or (f"{host.vendor} {rule.microarchitecture}" if host.vendor else "CPU")
    per_cycle = ", ".join(f"{k} {v:g}" for k, v in rule.flop_per_cycle.items())
    source = (f"read from this host ({'; '.join(host.notes)}): {host.cores} cores x {host.clock_hz / 1e9:.3g} GHz x "
              f"FLOP/cycle of {rule.microarchitecture} ({per_cycle}; hardware_specs/cpu/flop_per_cycle.csv)")
    return Device(id=host.id, name=name, vendor=host.vendor or "unknown",
                  generation=rule.microarchitecture.split(" (")[0].lower(), kind="cpu",
                  memory_bytes=host.memory_bytes, mem_bytes_per_s=host.mem_bytes_per_s, peak_flop_per_s=peaks,
                  llc_bytes=None, compute_units=host.cores, clock_hz=host.clock_hz, tdp_w=None, idle_w=None,
                  scaleup_bytes_per_s=None, devices_per_node=1, scaleout_bytes_per_s=None, pcie_bytes_per_s=None,
                  release_year=None, confidence="low", source=source, date=rule.date)


def host_device(host: HostCpu, rules: tuple[FlopRule, ...], profiles) -> Device:
    """The local CPU as a Device: its calibration profile's (measured ceilings) where `profiles` holds one
    under host.id with a GEMM rate and a copy bandwidth, else its datasheet figures (datasheet_device)."""
    if host.id in profiles:
        from planner.hardware.profile import profile_device
        device = profile_device(profiles[host.id])
        if device is not None:
            return device
    return datasheet_device(host, rules)
