"""Published kernel measurements converted into profiles (planner/calibration/published.py), on a small
aiconfigurator-shaped folder written here, and the shipped profiles' tier rules."""

import json
import math

import pandas as pd
import pytest

from planner.calibration.published import (
    _GEMM_M,
    _GEMM_NK,
    KERNEL_OVERHEAD_S,
    convert,
    held_out,
    import_aiconfigurator,
)
from planner.cli import main
from planner.errors import ConfigError
from planner.hardware.catalog import load_catalog
from planner.hardware.efficiency import load_defaults, wave_efficiency
from planner.hardware.profile import PROFILE_ROOT, load_profiles, read_profile

H100 = load_catalog().device("h100-sxm")
ETA = 0.7


def _gemm_ms(m: int, n: int, k: int, width: float, peak: float) -> float:
    """A GEMM at η = 0.7 of its roofline after wave quantization, plus the 1.5 us per-kernel cost (ms)."""
    ideal = max(2 * m * n * k / peak, ((m * k + k * n) * width + 2 * m * n) / H100.mem_bytes_per_s)
    wave = wave_efficiency((1, m, n, k), load_defaults().kinds["gpu"], H100)
    return (ideal / (ETA * wave) + KERNEL_OVERHEAD_S) * 1e3


def _write(folder, framework: str, version: str, family: str, name: str, frame: pd.DataFrame) -> None:
    path = folder / family / framework / version
    path.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path / name)


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    """An h100_sxm folder: bf16 GEMMs (vLLM), fp8 GEMMs + quantize tables (TRT-LLM), attention, scale_matrix."""
    folder = tmp_path_factory.mktemp("data") / "h100_sxm"
    ms, nks = (1, 8, 64, 512, 4096, 32768), (64, 512, 4096)  # 6 x 3 x 3 = 54 points per dtype
    assert set(ms) <= set(_GEMM_M) and set(nks) <= set(_GEMM_NK)
    shapes = [(m, n, k) for m in ms for n in nks for k in nks]
    bf16 = pd.DataFrame([{"gemm_dtype": "bfloat16", "m": m, "n": n, "k": k,
                          "latency": _gemm_ms(m, n, k, 2, H100.peak("bf16"))} for m, n, k in shapes])
    _write(folder, "vllm", "0.24.0", "gemm", "gemm_perf.parquet", bf16)
    # TRT-LLM fp8 rows = GEMM + 0.010 ms computescale + 0.005 ms scale_matrix of its m x k input
    fp8 = pd.DataFrame([{"gemm_dtype": "fp8", "m": m, "n": n, "k": k,
                         "latency": _gemm_ms(m, n, k, 1, H100.peak("fp8")) + 0.015} for m, n, k in shapes])
    _write(folder, "trtllm", "1.3.0rc20", "gemm", "gemm_perf.parquet", fp8)
    mk = pd.DataFrame([{"m": m, "k": k} for m in ms for k in nks])
    _write(folder, "trtllm", "1.3.0rc20", "quantize", "computescale_perf.parquet", mk.assign(latency=0.010))
    _write(folder, "trtllm", "1.3.0rc20", "quantize", "scale_matrix_perf.parquet", mk.assign(latency=0.005))
    _write(folder, "vllm", "0.24.0", "quantize", "scale_matrix_perf.parquet",
           mk.assign(latency=[3 * m * k / (0.9 * H100.mem_bytes_per_s) * 1e3 for m, k in zip(mk.m, mk.k)]))
    ctx = pd.DataFrame([{"batch_size": b, "isl": s, "num_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                         "window_size": 0, "attn_dtype": "bfloat16", "kv_cache_dtype": "bfloat16", "step": 0,
                         "latency": 0.001 * b * s} for b in (1, 2, 4) for s in (128, 512, 2048)])
    _write(folder, "vllm", "0.24.0", "attention", "context_attention_perf.parquet", ctx)
    gen = ctx.assign(isl=1, step=ctx.isl - 1, kv_cache_dtype=["fp8"] * 3 + ["bfloat16"] * 6)
    _write(folder, "vllm", "0.24.0", "attention", "generation_attention_perf.parquet", gen)
    return folder


def test_gemm_points_keep_planner_counting_and_take_the_quantization_out_of_fp8(system):
    raw = convert(system, "h100-sxm", H100.name, H100.llc_bytes)
    gemm = {(p["dtype"], p["m"], p["n"], p["k"]): p for p in raw["measurements"] if p["kind"] == "gemm"}
    p = gemm[("bf16", 1, 4096, 4096)]
    # 2 m n k FLOP; bytes (m k + k n) x 2 + m n x 2 = (4096 + 16,777,216) x 2 + 8,192 = 33,570,816
    assert p["flop"] == 2 * 4096 * 4096 and p["bytes"] == 33_570_816
    q = gemm[("fp8", 1, 4096, 4096)]
    # the TRT-LLM row less 0.010 + 0.005 ms of quantization is the GEMM alone
    assert q["time_s"] == pytest.approx(_gemm_ms(1, 4096, 4096, 1, H100.peak("fp8")) * 1e-3, rel=1e-4)
    tables = {t["what"].split(" (")[0]: t for t in raw["source"]["tables"]}
    assert tables["gemm bf16"]["framework"] == "vllm" and tables["gemm fp8"]["framework"] == "trtllm"
    assert raw["tier"] == "published" and raw["source"]["license"] == "Apache-2.0"


def test_nvfp4_rows_are_the_gemm_less_the_input_quantization_they_time(tmp_path):
    # vLLM's nvfp4 rows time a W4A4 layer's forward on a bf16 input: scaled_fp4_quant of the m x k input, then the
    # FP4 GEMM. Rows of 0.020 ms with a 0.003 ms static quantization (scale_matrix, same vLLM version) of that input
    # are GEMMs of 0.017 ms; a quantization measured slower alone than the row leaves a quarter of the row
    from planner.calibration.published import gemm_points

    folder = tmp_path / "b200_sxm"
    rows = pd.DataFrame([{"gemm_dtype": "nvfp4", "m": m, "n": 4096, "k": k, "latency": 0.020}
                         for m in (1, 8) for k in (512, 4096)])
    _write(folder, "vllm", "0.24.0", "gemm", "gemm_perf.parquet", rows)
    quant = pd.DataFrame([{"m": m, "k": k, "latency": 0.003 if k == 512 else 0.030} for m in (1, 8) for k in (512, 4096)])
    _write(folder, "vllm", "0.24.0", "quantize", "scale_matrix_perf.parquet", quant)
    points, used = gemm_points(folder)
    times = {(p["m"], p["k"]): p["time_s"] for p in points if p["dtype"] == "fp4"}
    assert times[(1, 512)] == pytest.approx(0.017e-3) and times[(8, 512)] == pytest.approx(0.017e-3)
    assert times[(1, 4096)] == pytest.approx(0.005e-3)  # max(0.020 - 0.030, 0.25 x 0.020) ms
    assert used[0]["what"] == "gemm fp4 (less scale_matrix of the same version)"


def test_attention_points_are_prefill_causal_and_decode_with_bf16_kv_only(system):
    raw = convert(system, "h100-sxm", H100.name, H100.llc_bytes)
    att = [p for p in raw["measurements"] if p["kind"] == "attention"]
    decode = [p for p in att if p["sq"] == 1]
    assert len(att) - len(decode) == 9 and len(decode) == 6  # the 3 fp8-KV decode rows are left out
    p = next(p for p in att if p["causal"] and p["bh"] == 32 and p["sq"] == 512)
    # causal: 2 b h s s (d + d) / 2 = 2 x 32 x 512 x 512 x 256 / 2; group = 32 / 8 query heads per KV head
    assert p["flop"] == 2 * 32 * 512 * 512 * 256 / 2 and p["group"] == 4
    # bytes: Q and O (b h s d) + K and V (b hkv s d), 2 B each = 2 x (2 x 32 + 2 x 8) x 512 x 128
    assert p["bytes"] == 2 * (2 * 32 + 2 * 8) * 512 * 128


def test_held_back_points_of_a_constant_efficiency_are_predicted_exactly(system):
    raw = convert(system, "h100-sxm", H100.name, H100.llc_bytes)
    report = held_out(raw)
    gemm = report["by_kind"]["gemm:bf16"]
    # η constant after the wave factor: any interpolation of log η recovers it. GEMMs under 3 us (the
    # smallest of the grid) are excepted: their fixed cost is taken as half their time, not 1.5 us
    assert gemm["n"] == math.floor(0.2 * 54) and gemm["median_abs_error"] < 1e-3


def test_import_writes_a_profile_planner_reads_in_the_published_tier(system, tmp_path, capsys):
    out = tmp_path / "cal"
    assert main(["calibrate", "--import", "aiconfigurator", "--from", str(system.parent), "--out", str(out),
                 "--devices", "h100-sxm"]) == 0
    profile = read_profile(out / "h100-sxm" / "profile.json")
    assert profile.tier == "published" and "held-back" in capsys.readouterr().err
    assert load_profiles(str(out)).tier_of("h100-sxm") == "published"


def test_import_refusals_are_one_line(tmp_path, capsys):
    assert main(["calibrate", "--import", "aiconfigurator", "--out", str(tmp_path)]) == 2
    assert main(["calibrate", "--import", "aiconfigurator", "--from", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "--import, --from" in err and "is not a folder" in err
    with pytest.raises(ConfigError, match="no published data is mapped for tpu-v5e"):
        import_aiconfigurator(tmp_path, tmp_path / "out", ["tpu-v5e"])
    bad = tmp_path / "h100_sxm" / "gemm" / "vllm" / "1.0"
    bad.mkdir(parents=True)
    (bad / "gemm_perf.parquet").write_text("not parquet")
    with pytest.raises(ConfigError, match="cannot be read as parquet"):
        convert(tmp_path / "h100_sxm", "h100-sxm", H100.name, H100.llc_bytes)


def test_each_engine_uses_the_profile_of_its_own_kernel_library(capsys):
    from planner.predict.api import Request, predict

    served = predict(Request("llama-3.1-8b", "h100-sxm", mode="inference", batch=1, input_len=128, output_len=8))
    eager = predict(Request("llama-3.1-8b", "h100-sxm", mode="inference", batch=1, input_len=128, output_len=8,
                            engine="eager"))
    assert (served.engine, served.tier) == ("vllm", "published")
    # eager runs what planner calibrate timed through PyTorch: the pytorch-eager profile, tier measured
    assert (eager.engine, eager.tier) == ("eager", "measured")
    assert any("h100-sxm/pytorch-eager.json" in n for n in eager.notes)
    # on a device with only the serving tables, eager takes them as another library's kernels
    b200 = predict(Request("llama-3.1-8b", "b200", mode="inference", batch=1, input_len=128, output_len=8,
                           engine="eager"))
    assert b200.tier == "cross-library"
    assert any(n.startswith("tier published: https://github.com/ai-dynamo/aiconfigurator") for n in served.notes)


def test_transfer_stays_within_a_generation_and_widens_the_band():
    from planner.predict.context import default_context

    ctx = default_context()
    pcie = ctx.efficiency(ctx.device("h100-pcie"))
    own = ctx.efficiency(ctx.device("h200-sxm"))
    assert pcie.tier == "transferred" and pcie.profile.device_id in ("h100-sxm", "h200-sxm")
    transfer = json.loads((PROFILE_ROOT / "transfer.json").read_text())
    band = min(ctx.defaults.datasheet_band_fraction,
               ctx.profiles[pcie.profile.device_id].raw["held_out"]["p90_abs_error"] + transfer["p90_abs_error"])
    assert pcie.band_fraction == pytest.approx(band) and pcie.band_fraction > own.band_fraction
    # no cross-vendor transfer: a Hopper profile never predicts an MI300X or a TPU
    assert ctx.efficiency(ctx.device("mi300x")).profile.device_id == "mi300x"
    assert ctx.efficiency(ctx.device("tpu-v5e")).tier == "datasheet"


def test_profiles_are_read_only_when_used(monkeypatch):
    import planner.hardware.profile as prof

    calls = []
    monkeypatch.setattr(prof, "read_profile", lambda path: calls.append(path) or pytest.fail("read too early"))
    index = prof.ProfileIndex({"h100-sxm": prof.PROFILE_ROOT / "h100-sxm" / "profile.json"})
    assert "h100-sxm" in index and len(index) == 1 and index.tier_of("h100-sxm") == "published"
    assert calls == []


def test_a_published_profile_serves_only_the_gemm_dtypes_it_measured():
    from planner.predict.api import Request, predict

    # the MI300X profile holds fp8 block-scale GEMMs only: bf16 serving is datasheet, fp8 published,
    # and its band stays the datasheet's (no attention or memory-bound curves to bound those ops)
    bf16 = predict(Request("llama-3.1-8b", "mi300x", mode="inference", batch=1, input_len=128, output_len=8))
    fp8 = predict(Request("llama-3.1-8b", "mi300x", mode="inference", batch=1, input_len=128, output_len=8,
                          dtype="quant=fp8"))
    assert (bf16.tier, fp8.tier) == ("datasheet", "published")
    # each tier's measured end-to-end error (wider than the kernels' datasheet 0.4): exp(p90 |ln|) - 1 of the
    # rows of that tier on AMD CDNA3, or on every family where CDNA3 has fewer than the minimum
    # (hardware_specs/efficiency/measured_bands.json)
    import math

    from planner.predict.context import default_context
    ctx = default_context()
    mi300x = ctx.device("mi300x")
    assert ctx.bands.group("published", mi300x).family == "amd cdna3"
    for p in (bf16, fp8):
        group = ctx.bands.group(p.tier, mi300x)
        assert group.family in ("amd cdna3", "*") and group.rows >= ctx.bands.min_rows
        assert p.band_fraction == max(math.expm1(group.p90_abs_ln), 0.4)


def test_transfer_error_falls_back_to_ten_percent_without_a_measurement(tmp_path):
    from planner.hardware.profile import transfer_error

    (tmp_path / "dev").mkdir()
    assert transfer_error(str(tmp_path / "dev" / "profile.json")) == 0.10  # no transfer.json beside
    (tmp_path / "transfer.json").write_text('{"p90_abs_error": 0.3}')
    assert transfer_error(str(tmp_path / "dev" / "profile.json")) == 0.3
    (tmp_path / "transfer.json").write_text('{"p90_abs_error": -1}')
    assert transfer_error(str(tmp_path / "dev" / "profile.json")) == 0.10


def test_refit_reads_and_writes_a_published_profile_of_columns(tmp_path):
    # `planner calibrate --refit` on a shipped published profile (stored by columns): the held-back report is
    # recomputed from the same measurements, and the file stays in columns, its rows equal
    import shutil

    from planner.calibration.calibrate import refit
    from planner.hardware.profile_table import measurement_rows

    src = PROFILE_ROOT / "mi300x" / "profile.json"
    target = tmp_path / "mi300x" / "profile.json"
    target.parent.mkdir()
    shutil.copy(src, target)
    before = json.loads(src.read_text())
    report = refit(target, log=lambda _: None)
    after = json.loads(target.read_text())
    assert isinstance(after["measurements"], dict)
    assert list(measurement_rows(after["measurements"])) == list(measurement_rows(before["measurements"]))
    assert report["n"] == before["held_out"]["n"]
    assert report["median_abs_error"] == pytest.approx(before["held_out"]["median_abs_error"], rel=1e-9)
