"""Convert published kernel measurements into planner's own calibration profiles (tier `published`).

Source: NVIDIA's aiconfigurator performance database (github.com/ai-dynamo/aiconfigurator,
Apache-2.0): per-kernel latencies measured by its collector inside vLLM and TensorRT-LLM containers,
node owned exclusively, application clocks locked at the maximum, each op captured in a CUDA graph
and timed over replays with CUDA events (collector/helper.py). Units there: latency in ms.

What is converted, per device (one profile.json, planner's schema 1, with `tier: "published"`):
- GEMM `gemm_perf.parquet`: bf16 and nvfp4 rows of the newest vLLM table (the default serving
  engine; TensorRT-LLM's where vLLM has none), nvfp4 less the input quantization its rows include;
  fp8 (per-tensor scaled) from TensorRT-LLM less the activation quantization its rows include (see
  gemm_points). fp8_block rows of vLLM run eagerly: not
  used. The grid is subsampled to m in powers of two and n, k in {64 .. 16384} (see _GEMM_NK), about
  2,300 points per dtype of the 35,000.
- Attention `context_attention_perf.parquet` (prefill: Sq = Sk = isl, causal) and
  `generation_attention_perf.parquet` (decode: Sq = 1, Sk = step + 1), bf16 activations and KV,
  no sliding window, a seeded random sample of each table (_ATTN_SAMPLE rows).
- Memory-bound `quantize/scale_matrix_perf.parquet`: an fp8 quantization of an m x k bf16 tensor
  (reads 2 B, writes 1 B per element), kept as the `copy` curve of the profile: the bandwidth an
  elementwise kernel of that many bytes reaches (the profile's other memory-bound kinds use it).

FLOP and bytes follow planner's own counting, so the efficiency η = ideal / measured time carries
over to the ops of a graph: GEMM 2·m·n·k FLOP and bytes (m·k + k·n)·w + m·n·2 (w: 2, 1 or 0.5625 B
for bf16, fp8, nvfp4 with one fp8 scale per 16 values); attention counting.attention_flop and bytes
of Q, K, V read and O written once.

Bands: a seeded random 20% of the points of each op kind is held back, the model is fitted on the
rest and predicts them; the p90 |error| of the held-back points is the tier's band (`held_out`).
"""

from __future__ import annotations

import datetime
import math
import random
from pathlib import Path

from planner.errors import ConfigError
from planner.units import percent_or_na as pct
from planner.workload.counting import attention_flop

SCHEMA = 1
SOURCE = {
    "repository": "https://github.com/ai-dynamo/aiconfigurator",
    "commit": "095f58a51c4ca8e61b66ec108d86f223f8d559ce",
    "commit_date": "2026-08-21",
    "license": "Apache-2.0",
    "copied": "2026-11-23",
    "method": "aiconfigurator collector: node owned exclusively, application clocks locked at the maximum "
              "(nvidia-smi -ac), each op captured in a CUDA graph after warm-up and timed over replays with "
              "CUDA events; weights cycled over several copies to defeat L2 residency (collector/helper.py, "
              "collector/vllm/collect_gemm.py)",
}
SYSTEMS = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm", "b200": "b200_sxm", "a100-sxm-80gb": "a100_sxm",
           "l40s": "l40s"}
"""planner device id -> aiconfigurator system folder."""
FRAMEWORKS = ("vllm", "trtllm")
"""Preference order of the measuring framework, per table."""
_DTYPES = {"bfloat16": ("bf16", 2.0), "fp8": ("fp8", 1.0), "nvfp4": ("fp4", 0.5 + 1 / 16)}
"""aiconfigurator gemm_dtype -> (planner dtype, bytes per input element incl. block scales)."""
_GEMM_M = tuple(2**i for i in range(16))
_GEMM_NK = (64, 128, 256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
_ATTN_SAMPLE = {False: 3000, True: 6000}
"""Rows kept per attention table (prefill, decode): decode times vary more with shape (fixed latency
against KV bytes) and need the denser sample to reach a held-back median under 12% on every device."""
HOLD_OUT = 0.2
SEED = 0
def _kernel_overhead_s() -> float:
    from planner.hardware.efficiency import load_defaults

    return load_defaults().kinds["gpu"].kernel_overhead_s


KERNEL_OVERHEAD_S = _kernel_overhead_s()
"""Per-kernel fixed GPU cost kept apart from η: the datasheet default, read from hardware_specs/
efficiency/defaults.json (kernel_overhead_s, 1.5 us); the smallest published GEMMs take 1.7-2.5 us per
replay, above it."""


def _tables(system_dir: Path, family: str, name: str) -> list[tuple[str, str, Path]]:
    """(framework, version, file) of every table `name` of `family`, preferred framework first, newest
    version first (a version folder without the file only points at another one: skipped)."""
    found = []
    for rank, framework in enumerate(FRAMEWORKS):
        base = system_dir / family / framework
        versions = [p for p in base.glob("*") if (p / name).is_file()] if base.is_dir() else []
        for p in sorted(versions, key=lambda p: _version_key(p.name), reverse=True):
            found.append((framework, p.name, p / name))
    return found


def _version_key(text: str) -> tuple:
    parts = []
    for token in text.replace("rc", ".-1.").split("."):
        parts.append(int(token) if token.lstrip("-").isdigit() else 0)
    return tuple(parts)


def _read(path: Path):
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except Exception as exc:  # a corrupt or foreign file: one line naming it
        raise ConfigError(f"published table '{path}' cannot be read as parquet ({type(exc).__name__}: "
                          f"{str(exc)[:100]})") from None


def gemm_points(system_dir: Path) -> tuple[list[dict], list[dict]]:
    """GEMM measurements (planner's schema) and the tables they came from.

    bf16 and nvfp4: the newest vLLM table (TensorRT-LLM where vLLM has none). fp8 (per-tensor scaled):
    the newest TensorRT-LLM table whose quantize tables were measured with the same version, less the
    activation quantization its rows include (collector/trtllm/collect_gemm.py: compute-scale, i.e.
    the amax reduction `computescale_perf` plus the quantization `scale_matrix_perf` of the m x k
    input, measured alone on the same grid); planner counts that quantization as its own op. vLLM's
    fp8 rows include it too (at 32768 x 256 x 768 they reach 58 TFLOP/s, 190 GB/s), without a
    matching measurement to take it out: they are not used. vLLM's nvfp4 rows time the layer's forward
    on a bf16 input (collector/vllm/collect_gemm.py: a CompressedTensors W4A4 RowParallelLinear with a
    static input global scale), which quantizes the m x k input to FP4 (scaled_fp4_quant) before the FP4
    GEMM: less the static quantization kernel of the same m x k timed alone with the same version
    (`scale_matrix`, static_scaled_fp8_quant: the same 2 B read per element, 1 B written against FP4's
    0.5625), the nearest measured kernel; no amax step runs under a static scale."""
    points, used, done = [], [], set()
    for framework, version, path in _tables(system_dir, "gemm", "gemm_perf.parquet"):
        table = _read(path)
        for raw, (dtype, width) in _DTYPES.items():
            if dtype in done or (raw == "fp8" and framework != "trtllm"):
                continue
            rows = table[(table.gemm_dtype == raw) & table.m.isin(_GEMM_M) & table.n.isin(_GEMM_NK)
                         & table.k.isin(_GEMM_NK) & (table.latency > 0)]
            if raw == "fp8":
                quant = _quant_ms(system_dir, framework, version)
            elif raw == "nvfp4" and framework == "vllm":
                quant = _quant_ms(system_dir, framework, version, ("scale_matrix_perf.parquet",))
            else:
                quant = {}
            if rows.empty or (raw == "fp8" or raw == "nvfp4" and framework == "vllm") and not quant:
                continue  # a row that times its quantization with no measurement to take it out
            done.add(dtype)
            less = "scale_matrix" if raw == "nvfp4" else "computescale + scale_matrix"
            what = f"gemm {dtype}" + (f" (less {less} of the same version)" if quant else
                                      " (its input's quantization included: no measurement to take it out)"
                                      if raw == "nvfp4" else "")
            used.append(_table_entry(framework, version, path, system_dir, len(rows), what))
            for m, n, k, ms in zip(rows.m, rows.n, rows.k, rows.latency):
                m, n, k = int(m), int(n), int(k)
                # never below a quarter of the row: a quantization measured slower alone than inside the row
                ms = max(float(ms) - quant.get((m, k), 0.0), 0.25 * float(ms)) if quant else float(ms)
                points.append({"kind": "gemm", "dtype": dtype, "layout": "nt", "m": m, "n": n, "k": k,
                               "time_s": ms * 1e-3, "flop": 2.0 * m * n * k,
                               "bytes": (m * k + k * n) * width + m * n * 2.0})
    return points, used


def _quant_ms(system_dir: Path, framework: str, version: str,
              names: tuple[str, ...] = ("computescale_perf.parquet", "scale_matrix_perf.parquet"),
              ) -> dict[tuple[int, int], float]:
    """(m, k) -> ms of the quantize tables `names` (default computescale + scale_matrix) measured with
    `framework` `version`, summed ({} if one is absent)."""
    parts = []
    for name in names:
        path = system_dir / "quantize" / framework / version / name
        if not path.is_file():
            return {}
        table = _read(path)
        parts.append({(int(m), int(k)): float(ms) for m, k, ms in zip(table.m, table.k, table.latency)})
    keys = set.intersection(*(set(part) for part in parts))
    return {key: sum(part[key] for part in parts) for key in keys}


def attention_points(system_dir: Path) -> tuple[list[dict], list[dict]]:
    """Prefill and decode attention measurements (bf16, no window), a seeded sample of each table."""
    points, used = [], []
    for name, decode in (("context_attention_perf.parquet", False), ("generation_attention_perf.parquet", True)):
        tables = _tables(system_dir, "attention", name)
        if not tables:
            continue
        framework, version, path = tables[0]
        table = _read(path)
        # older tables (A100) have no window or KV-dtype column: full attention with a bf16 cache
        window = table.window_size if "window_size" in table else 0
        kv = table.kv_cache_dtype if "kv_cache_dtype" in table else "bfloat16"
        rows = table[(table.attn_dtype == "bfloat16") & (kv == "bfloat16") & (window == 0) & (table.latency > 0)]
        keep = sorted(random.Random(SEED).sample(range(len(rows)), min(_ATTN_SAMPLE[decode], len(rows))))
        rows = rows.iloc[keep]
        used.append(_table_entry(framework, version, path, system_dir, len(rows),
                                 "attention decode" if decode else "attention prefill"))
        for b, isl, h, hkv, d, step, ms in zip(rows.batch_size, rows.isl, rows.num_heads, rows.num_key_value_heads,
                                               rows.head_dim, rows.step, rows.latency):
            b, h, hkv, d = int(b), int(h), int(hkv), int(d)
            sq, sk = (1, int(step) + 1) if decode else (int(isl), int(isl))
            causal = not decode
            flop = attention_flop((b, h, sq, d), (b, hkv, sk, d), (b, hkv, sk, d), causal)
            points.append({"kind": "attention", "dtype": "bf16", "bh": b * h, "sq": sq, "sk": sk, "d": d,
                           "causal": causal, "group": max(1, h // hkv), "time_s": float(ms) * 1e-3, "flop": flop,
                           "bytes": 2.0 * (2 * b * h * sq * d + 2 * b * hkv * sk * d)})
    return points, used


def memory_points(system_dir: Path) -> tuple[list[dict], list[dict]]:
    """The fp8 scale_matrix kernel as the profile's memory-bound curve: 3 bytes and 1 FLOP per element."""
    tables = _tables(system_dir, "quantize", "scale_matrix_perf.parquet")
    if not tables:
        return [], []
    framework, version, path = tables[0]
    table = _read(path)
    rows = table[table.k.isin(_GEMM_NK) & table.m.isin(_GEMM_M) & (table.latency > 0)]
    points = [{"kind": "copy", "warm": True, "bytes": 3.0 * int(m) * int(k), "flop": float(int(m) * int(k)),
               "time_s": float(ms) * 1e-3} for m, k, ms in zip(rows.m, rows.k, rows.latency)]
    return points, [_table_entry(framework, version, path, system_dir, len(points), "memory-bound (copy curve)")]


def _compact(m: dict) -> dict:
    """Whole numbers as ints and times to 5 significant digits (the published latencies carry 5 to 7):
    the shipped file stays small."""
    out = {}
    for key, value in m.items():
        if key == "time_s":
            value = float(f"{value:.5g}")
        elif isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            value = int(value)
        elif isinstance(value, float):
            value = float(f"{value:.6g}")
        out[key] = value
    return out


def _table_entry(framework: str, version: str, path: Path, system_dir: Path, rows: int, what: str) -> dict:
    root = system_dir.parent.parent  # .../systems/data/<system> -> .../systems
    return {"what": what, "framework": framework, "version": version, "rows_used": rows,
            "file": "aic-core/src/aiconfigurator_core/systems/" + str(path.relative_to(root.parent)).split(
                "systems/", 1)[-1]}


def convert(system_dir: str | Path, device_id: str, device_name: str, l2_bytes: float | None) -> dict:
    """A profile (dict, planner's schema 1, tier published) of `device_id` from the aiconfigurator
    data folder `system_dir` (.../systems/data/<system>). Raises ConfigError when it holds no GEMM."""
    folder = Path(system_dir)
    if not folder.is_dir():
        raise ConfigError(f"published data folder '{folder}' does not exist (expected .../systems/data/<system>)")
    gemm, used_g = gemm_points(folder)
    if not gemm:
        raise ConfigError(f"'{folder}' holds no bf16, fp8 or nvfp4 GEMM table (gemm/<framework>/<version>/"
                          "gemm_perf.parquet): nothing to convert")
    attention, used_a = attention_points(folder)
    memory, used_m = memory_points(folder)
    measurements = [_compact(m) for m in gemm + attention + memory]
    ceilings = {"launch_overhead_s": KERNEL_OVERHEAD_S, "view_overhead_s": 0.0}
    for m in gemm:
        key = f"gemm_{m['dtype']}_flop_per_s"
        ceilings[key] = max(ceilings.get(key, 0.0), m["flop"] / m["time_s"])
    cold = [m for m in memory if l2_bytes and m["bytes"] > 8 * l2_bytes]
    if cold:  # tensors of more than 8x L2 stream from HBM between replays
        ceilings["copy_bytes_per_s"] = max(m["bytes"] / m["time_s"] for m in cold)
    return {"schema": SCHEMA, "tier": "published", "device_id": device_id, "device_name": device_name,
            "kind": "gpu", "date": SOURCE["commit_date"], "source": {**SOURCE, "tables": used_g + used_a + used_m},
            "ceilings_notes": {"launch_overhead_s": "datasheet kernel_overhead_s (hardware_specs/efficiency/"
                               "defaults.json); views launch no kernel under CUDA graphs (0)",
                               "copy_bytes_per_s": "best scale_matrix rate over tensors above 8x L2"},
            "subsample": {"gemm_m": list(_GEMM_M), "gemm_n_k": list(_GEMM_NK),
                          "attention_rows_prefill_decode": [_ATTN_SAMPLE[False], _ATTN_SAMPLE[True]],
                          "seed": SEED},
            "measurements": measurements, "ceilings": ceilings}


def held_out(raw: dict, fraction: float = HOLD_OUT, seed: int = SEED) -> dict:
    """Hold back a seeded random `fraction` of each op kind's points, fit on the rest, predict them.

    Returns {"fraction", "seed", "n", "median_abs_error", "p90_abs_error", "by_kind": {kind: {...}}}:
    error = predicted time / measured time − 1 on the held-back points (time ∝ 1/η at equal overhead)."""
    from planner.hardware.efficiency import load_defaults
    from planner.hardware.profile import Profile, ProfileModel, _features, profile_device
    from planner.hardware.profile_table import measurement_rows

    measurements = measurement_rows(raw["measurements"])
    by_key: dict[str, list[int]] = {}
    for i, m in enumerate(measurements):
        by_key.setdefault(_features(m)[0], []).append(i)
    rng = random.Random(seed)
    test: set[int] = set()
    for key, idx in by_key.items():
        test.update(rng.sample(idx, math.floor(fraction * len(idx))))
    train = [m for i, m in enumerate(measurements) if i not in test]
    full = Profile(raw["device_id"], raw["device_name"], raw["kind"], {}, raw["ceilings"], tuple(measurements),
                   raw["date"], "(in memory)", raw)
    device = profile_device(full)
    if device is None:
        raise ConfigError(f"device '{raw['device_id']}' is not in the catalog: a published profile needs its peaks")
    fitted = Profile(raw["device_id"], raw["device_name"], raw["kind"], {}, raw["ceilings"], tuple(train),
                     raw["date"], "(in memory)", raw)
    model = ProfileModel(load_defaults().for_device(device)).fit(fitted, device)
    errors = _errors([measurements[i] for i in sorted(test)], model, model, device)
    every = [e for v in errors.values() for e in v]
    return {"fraction": fraction, "seed": seed, **_stats(every), "by_kind": {k: _stats(v) for k, v in errors.items()}}


def _errors(points: list[dict], own, predicting, device) -> dict[str, list[float]]:
    """Time errors by report kind of `points` on `device`: η measured through the model `own` (fitted
    to those points' device), η predicted by `predicting` (the same model for held-back points, a
    neighbour's for a transfer)."""
    from planner.hardware.profile import _features

    errors: dict[str, list[float]] = {}
    for m in points:
        key, feats, shape = _features(m)
        measured = own.efficiency_of(m, device)
        predicted = predicting.predict_eta(key, feats, shape, device)
        if measured is None or predicted is None:
            continue
        errors.setdefault(_report_kind(m), []).append(_time_error(m, measured, predicted, own, device))
    return errors


def _report_kind(m: dict) -> str:
    if m["kind"] == "gemm":
        return f"gemm:{m['dtype']}"
    if m["kind"] == "attention":
        return "attention:decode" if m["sq"] == 1 else "attention:prefill"
    return f"memory:{m['kind']}"


def _time_error(m: dict, measured_eta: float, predicted_eta: float, model, device) -> float:
    """Predicted / measured time − 1 of one point, its fixed overhead included on both sides."""
    from planner.hardware.efficiency import wave_efficiency
    from planner.hardware.profile import _features, _wave_shape

    key, _, shape = _features(m)
    wave = wave_efficiency(_wave_shape(key, shape), model.kind_defaults, device) if shape is not None else 1.0
    overhead = min(model.launch_s_, 0.5 * m["time_s"])
    core = m["time_s"] - overhead
    predicted = core * (measured_eta * wave) / predicted_eta + overhead
    return predicted / m["time_s"] - 1


def stamp(raw: dict) -> dict:
    """The profile with its held-back report and conversion date added (what `planner calibrate
    --import` writes)."""
    report = held_out(raw)
    return {**raw, "held_out": report, "converted": datetime.date.today().isoformat()}


def transfer_report(raws: list[dict]) -> dict:
    """Predict each profiled device from every other profiled device of its vendor and generation (the
    transferred tier) and compare with its own published points.

    Returns {"pairs": [{"from", "to", "n", "median_abs_error", "p90_abs_error", "by_kind"}], "n",
    "median_abs_error", "p90_abs_error"} (errors = predicted / published time − 1, pooled over pairs)."""
    from planner.hardware.efficiency import load_defaults
    from planner.hardware.profile import Profile, ProfileModel, profile_device
    from planner.hardware.profile_table import measurement_rows

    kind_defaults = load_defaults().kinds["gpu"]
    loaded = []
    for raw in raws:
        prof = Profile(raw["device_id"], raw["device_name"], raw["kind"], {}, raw["ceilings"],
                       measurement_rows(raw["measurements"]), raw["date"], "(in memory)", raw)
        loaded.append((prof, profile_device(prof)))
    pairs, pooled = [], []
    for src, src_dev in loaded:
        model = ProfileModel(kind_defaults).fit(src, src_dev)
        for dst, dst_dev in loaded:
            if dst is src or (src_dev.vendor, src_dev.generation) != (dst_dev.vendor, dst_dev.generation):
                continue
            own = ProfileModel(kind_defaults).fit(dst, dst_dev)
            errors = _errors(list(dst.measurements), own, model, dst_dev)
            every = [e for v in errors.values() for e in v]
            pooled += every
            pairs.append({"from": src.device_id, "to": dst.device_id, **_stats(every),
                          "by_kind": {k: _stats(v) for k, v in errors.items()}})
    return {"method": "each profiled device predicted from another of its vendor and generation (tier "
                      "transferred) against its own published points", "pairs": pairs, **_stats(pooled)}


def _stats(values: list[float]) -> dict:
    import numpy as np

    a = np.abs(np.asarray(values))
    return {"n": len(values), "median_abs_error": round(float(np.median(a)), 4) if len(a) else None,
            "p90_abs_error": round(float(np.percentile(a, 90)), 4) if len(a) else None}


def import_aiconfigurator(data_dir: str | Path, out_root: str | Path, devices: list[str] | None = None,
                          log=print) -> list[Path]:
    """Convert every system of `data_dir` (aiconfigurator's .../systems/data folder) that planner knows
    (SYSTEMS), or only `devices`, into `<out_root>/<device-id>/profile.json`; then write
    `<out_root>/transfer.json` from the profiles of one generation found there. Returns the paths
    written. Each file is written whole or not at all (atomic replace)."""
    import json

    from planner.calibration.resume import json_safe
    from planner.files import write_text_atomic
    from planner.hardware.catalog import load_catalog

    data, root = Path(data_dir), Path(out_root)
    if not data.is_dir():
        raise ConfigError(f"--from '{data}' is not a folder (give aiconfigurator's aic-core/src/"
                          "aiconfigurator_core/systems/data)")
    wanted = devices or list(SYSTEMS)
    unknown = [d for d in wanted if d not in SYSTEMS]
    if unknown:
        raise ConfigError(f"no published data is mapped for {', '.join(unknown)}; valid: {', '.join(SYSTEMS)}")
    catalog = load_catalog()
    written = []
    for device_id in wanted:
        folder = data / SYSTEMS[device_id]
        if not folder.is_dir():
            log(f"import: {folder} not found: {device_id} skipped")
            continue
        device = catalog.device(device_id)
        written.append(_write(stamp(convert(folder, device_id, device.name, device.llc_bytes)), root, log))
    published = []
    for path in sorted(root.glob("*/profile.json")):
        raw = json.loads(path.read_text())
        if raw.get("tier") == "published":
            published.append(raw)
    report = transfer_report(published)
    if report["n"]:
        target = root / "transfer.json"
        write_text_atomic(target, json.dumps(json_safe(report), indent=1) + "\n")
        log(f"import: wrote {target}: transfer median |error| {pct(report['median_abs_error'])}, "
            f"p90 {pct(report['p90_abs_error'])} over {len(report['pairs'])} pairs")
        written.append(target)
    return written


AITER_SOURCE = {
    "repository": "https://github.com/ROCm/aiter",
    "commit": "e4048607a535ace3a2b51ded31b1c8c2d45c0879",
    "commit_date": "2026-08-22",
    "license": "MIT",
    "copied": "2026-11-23",
    "method": "aiter GEMM tuner: for each shape the fastest of its candidate kernels (CK, ASM, Triton), timed "
              "with aiter's run_perftest (torch profiler kernel times, 101 iterations after 2 warm-ups); a "
              "best-of-N figure, so a bound on what a stack using aiter reaches, not default hipBLASLt",
}
_AITER_SAMPLE = 4000
_AITER_MIN_POINTS = 100
"""A dtype with fewer rows than this is left out of the profile (see convert_aiter)."""
_AITER_DEVICES = {"mi300x": ("gfx942", 304), "mi355x": ("gfx950", 256)}
"""planner device id -> (gfx target, compute units) of its rows in aiter's tables (aiter's own key: gfx942 with
304 CUs is the MI300X, gfx950 with 256 the MI350X / MI355X)."""

# aiter's tuned tables read, with what each holds: (file pattern under aiter/configs, what, batched);
# the dtype of a row is its q_dtype_w (int8 or fp8) or bf16 for the bf16 tables
_AITER_TABLES = (
    ("model_configs/a8w8_blockscale_tuned_gemm_*.csv", "gemm fp8 (1x128 / 128x128 block scales)", False),
    ("a8w8_bpreshuffle_tuned_gemm.csv", "gemm int8 / fp8 (per-token and per-channel scales, B pre-shuffled)", False),
    ("a8w8_tuned_gemm.csv", "gemm int8 / fp8 (per-token and per-channel scales)", False),
    ("a8w8_tuned_batched_gemm.csv", "batched gemm int8 (per-token and per-channel scales)", True),
    ("bf16_tuned_gemm.csv", "gemm bf16", False),
    ("bf16_tuned_batched_gemm.csv", "batched gemm bf16", True),
)


def _aiter_dtype(row, table_what: str) -> str | None:
    """planner's GEMM dtype of one aiter row (None: a dtype planner does not time)."""
    if "bf16" in table_what:
        return "bf16"
    q = str(getattr(row, "q_dtype_w", "")) if hasattr(row, "q_dtype_w") else ""
    if "float8" in q or "blockscale" in table_what or "fp8 (1x128" in table_what:
        return "fp8"
    if "int8" in q:
        return "int8"
    return None


def _aiter_bytes(m: int, n: int, k: int, batch: int, dtype: str, block_scales: bool, out_bytes: float) -> float:
    """Bytes one aiter GEMM moves at least: operands at their width, its scales, the output (`out_bytes` per
    element). Block-scaled fp8: one fp32 scale per 1x128 block of A and 128x128 block of B; per-token / per-channel
    int8 and fp8: one fp32 scale per row of A and column of B."""
    width = 2.0 if dtype == "bf16" else 1.0
    if block_scales:
        scales = 4.0 * (m * math.ceil(k / 128) + math.ceil(n / 128) * math.ceil(k / 128))
    elif dtype == "bf16":
        scales = 0.0
    else:
        scales = 4.0 * (m + n)
    return batch * (width * (m * k + k * n) + scales + out_bytes * m * n)


def convert_aiter(config_dir: str | Path, device_id: str, device_name: str) -> dict:
    """A profile (tier published) of an AMD device from aiter's tuned GEMM tables (_AITER_TABLES): its GEMMs
    by dtype (bf16, fp8 block-scaled and per-token, int8 per-token; batched GEMMs as `batch` problems), a
    seeded sample of at most _AITER_SAMPLE rows of the block-scaled tables (every row of the others). Raises
    ConfigError when the folder holds no row of the device."""
    import pandas as pd

    folder = Path(config_dir)
    gfx, units = _AITER_DEVICES[device_id]
    points, used, sampled = [], [], []
    for pattern, what, batched in _AITER_TABLES:
        for path in sorted(folder.glob(pattern)) if folder.is_dir() else []:
            try:
                table = pd.read_csv(path)
            except Exception as exc:
                raise ConfigError(f"published table '{path}' cannot be read as CSV ({type(exc).__name__})") from None
            if not {"gfx", "cu_num", "M", "N", "K", "us"} <= set(table.columns):
                raise ConfigError(f"published table '{path}' lacks aiter's gfx, cu_num, M, N, K, us columns")
            rows = table[(table.gfx == gfx) & (table.cu_num == units) & (table.us > 0)]
            if not len(rows):
                continue
            block = "block scales" in what
            if block:  # thousands of rows of a few N, K per model: a seeded sample keeps the profile small
                sampled.append(rows)
                continue
            kept: dict[str, int] = {}
            for r in rows.itertuples(index=False):
                dtype = _aiter_dtype(r, what)
                if dtype is None:
                    continue
                m, n, k, batch = int(r.M), int(r.N), int(r.K), int(getattr(r, "B", 1)) if batched else 1
                out = 4.0 if str(getattr(r, "outdtype", "")).endswith("float32") else 2.0
                # a batched GEMM as one GEMM of batch x N columns: the same FLOP, the same B-operand bytes (each
                # problem streams its own K x N matrix: what bounds the small-M rows) and the same output tiles
                point = {"kind": "gemm", "dtype": dtype, "layout": "nt", "m": m, "n": batch * n, "k": k,
                         "time_s": float(r.us) * 1e-6, "flop": 2.0 * batch * m * n * k,
                         "bytes": _aiter_bytes(m, n, k, batch, dtype, False, out)}
                points.append(_compact(point))
                kept[dtype] = kept.get(dtype, 0) + 1
            if kept:
                used.append({"what": what + (" (batch folded into N)" if batched else ""), "framework": "aiter tuner",
                             "version": AITER_SOURCE["commit"][:7], "by_dtype": kept,
                             "file": f"aiter/configs/{path.relative_to(folder)}"})
    if sampled:
        rows = pd.concat(sampled)
        keep = sorted(random.Random(SEED).sample(range(len(rows)), min(_AITER_SAMPLE, len(rows))))
        for r in rows.iloc[keep].itertuples(index=False):
            m, n, k = int(r.M), int(r.N), int(r.K)
            points.append(_compact({"kind": "gemm", "dtype": "fp8", "layout": "nt", "m": m, "n": n, "k": k,
                                    "time_s": float(r.us) * 1e-6, "flop": 2.0 * m * n * k,
                                    "bytes": _aiter_bytes(m, n, k, 1, "fp8", True, 2.0)}))
        used.append({"what": _AITER_TABLES[0][1], "framework": "aiter tuner", "version": AITER_SOURCE["commit"][:7],
                     "by_dtype": {"fp8": min(_AITER_SAMPLE, len(rows))}, "rows_in_tables": len(rows),
                     "file": "aiter/configs/" + _AITER_TABLES[0][0]})
    counts = {d: sum(p["dtype"] == d for p in points) for d in {p["dtype"] for p in points}}
    sparse = sorted(d for d, c in counts.items() if c < _AITER_MIN_POINTS)
    # a dtype of a few dozen shapes would be extrapolated far outside them (a bf16 GEMV predicted at a third of
    # the bandwidth its batched rows reach): it stays on the datasheet tier of the device's architecture
    points = [p for p in points if p["dtype"] not in sparse]
    for u in used:
        u["rows_used"] = sum(n for d, n in u.pop("by_dtype").items() if d not in sparse)
    used = [u for u in used if u["rows_used"]]
    if not points:
        raise ConfigError(f"'{folder}' holds no {gfx} ({units} CU) row in aiter's tuned GEMM tables: nothing to "
                          "convert")
    ceilings = {"launch_overhead_s": KERNEL_OVERHEAD_S, "view_overhead_s": 0.0}
    for dtype in sorted({p["dtype"] for p in points}):
        ceilings[f"gemm_{dtype}_flop_per_s"] = max(p["flop"] / p["time_s"] for p in points if p["dtype"] == dtype)
    return {"schema": SCHEMA, "tier": "published", "device_id": device_id, "device_name": device_name,
            "kind": "gpu", "date": AITER_SOURCE["commit_date"], "source": {**AITER_SOURCE, "tables": used},
            "ceilings_notes": {"launch_overhead_s": "datasheet kernel_overhead_s (hardware_specs/efficiency/"
                               "defaults.json)"},
            "subsample": {"gemm_rows": _AITER_SAMPLE, "seed": SEED},
            "left_out": {d: f"{counts[d]} rows, fewer than {_AITER_MIN_POINTS}: datasheet tier" for d in sparse},
            "measurements": points, "ceilings": ceilings}


def import_aiter(config_dir: str | Path, out_root: str | Path, log=print) -> list[Path]:
    """Convert aiter's rows of each device of _AITER_DEVICES in the catalog into `<out_root>/<id>/profile.json`;
    return the paths written."""

    from planner.hardware.catalog import load_catalog

    if not Path(config_dir).is_dir():
        raise ConfigError(f"--from '{config_dir}' is not a folder (give aiter's aiter/configs)")
    catalog = load_catalog()
    return [_write(stamp(convert_aiter(config_dir, device_id, catalog.device(device_id).name)), Path(out_root), log)
            for device_id in _AITER_DEVICES if device_id in catalog.devices]


def published_json(raw: dict) -> str:
    """The text of a published profile file: compact JSON, its measurements in the columns layout
    (planner/hardware/profile_table.py: the B200's 16,104 measurements parse and check in 17 ms, 40 ms as
    rows); a NaN in a measurement is refused (to_columns), not written as an absent key."""
    import json

    from planner.calibration.resume import json_safe
    from planner.hardware.profile_table import to_columns

    columns = {**raw, "measurements": to_columns(json_safe(raw["measurements"]))}
    return json.dumps(json_safe(columns), separators=(",", ":")) + "\n"


def _write(raw: dict, root: Path, log) -> Path:
    """Write a stamped profile to `root/<device-id>/profile.json` (whole or not at all, `published_json`), log
    its held-back report; return the path."""
    from planner.files import write_text_atomic

    target = root / raw["device_id"] / "profile.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(target, published_json(raw))
    held = raw["held_out"]
    log(f"import: wrote {target} ({len(raw['measurements'])} points); held-back 20%: median |error| "
        f"{pct(held['median_abs_error'])}, p90 {pct(held['p90_abs_error'])}")
    for kind, st in held["by_kind"].items():
        log(f"  {kind:<18} n={st['n']:>4}  median {pct(st['median_abs_error'])}  p90 {pct(st['p90_abs_error'])}")
    return target
