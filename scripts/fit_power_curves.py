"""Fit device power against utilization from NVIDIA aiconfigurator's published NVML power columns.

Writes hardware_specs/energy/power_curves.csv (one fitted curve per device, with provenance and its
held-out error) and hardware_specs/energy/power_curve_checks.csv (the held-out binned medians the
tests compare the model against). planner never reads the source folder at run time: this script
is how the two files are regenerated.

Run:  .venv/bin/python scripts/fit_power_curves.py /work/shared/public_profiles/aiconfigurator [--out DIR]

The source folder is a copy of ai-dynamo/aiconfigurator's perf database (its SOURCE.md gives the
commit and license). Latency is in ms; `power` is the mean of NVML samples every 100 ms over a replay
loop stretched to >= 1 s (0.3 s for kernels under 0.1 ms); `power_limit` is the NVML limit in W.

Rows (per device, the framework versions that carry power):
  GEMM, bfloat16 only, C[m, n] = A[m, k] @ B[k, n]:
      FLOP  = 2·m·n·k
      bytes = (m·k + k·n)·2 + m·n·2          (bf16 in, bf16 out)
      u_c   = FLOP / latency / (the catalog's dense bf16 peak)
      u_m   = bytes / latency / (the catalog's HBM bandwidth)
  FP8 scale_matrix (quantize) on an m x k tensor, memory-bound:
      bytes = 3·m·k                           (bf16 read + fp8 written; SOURCE.md's reading)
      u_c   = 0, u_m as above
  Left out: fp8, fp8_block and nvfp4 GEMMs (their kernels also quantize activations and apply block
  scales, work that 2·m·n·k does not count; vLLM runs fp8_block eagerly and small nvfp4/fp8_block
  weights stay in L2), compute_scale (its implied bandwidth exceeds the HBM peak, so its bytes are
  not the 2·m·k assumed) and attention (KV bytes depend on paging and kernel: ambiguous); rows under
  0.1 ms (their power carries over from the preceding run, SOURCE.md).

Model, per device:  P = min(P_limit, P_idle + a·u_c + b·u_m)
  P_idle: the 1st percentile of every power reading in the tables read (all dtypes and latencies:
          the device at locked clocks doing almost nothing), fixed, not fitted (a free intercept
          trades off against b on this data and gives a negative memory slope);
  P_limit: the tables' power_limit (NVML), checked against the catalog TDP;
  a, b >= 0: weighted least squares (weight sqrt(rows)) on the median power of 0.05 x 0.05 bins of
          (u_c, u_m) with >= 5 rows, over the training rows.
Held out: every shape whose CRC-32 of "framework|table|shape" is 0 mod 5 (about a fifth). The error
columns and the check table are over those rows only, binned 0.1 x 0.1 (>= 5 rows per bin): the mean
absolute relative error of the model against each bin's median (plain, and weighted by the bin's rows),
the largest, and the median over single held-out rows.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import re
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from planner.hardware.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]

DATA = "aic-core/src/aiconfigurator_core/systems/data"
# catalog id -> (aiconfigurator system, [(framework, version)] of the tables with power columns)
DEVICES = {
    "h200-sxm": ("h200_sxm", [("vllm", "0.22.0")]),
    "b200": ("b200_sxm", [("vllm", "0.22.0"), ("trtllm", "1.3.0rc15")]),
}
MIN_LATENCY_MS = 0.1
FIT_BIN = 0.05
CHECK_BIN = 0.1
MIN_ROWS_PER_BIN = 5
HELD_OUT_FOLD, FOLDS = 0, 5
FLOOR_PERCENTILE = 1.0
REPOSITORY = "ai-dynamo/aiconfigurator"

CURVE_COLUMNS = ("device", "idle_w", "compute_range_w", "memory_range_w", "power_limit_w", "train_rows_count",
                 "train_bins_count", "heldout_rows_count", "heldout_bins_count", "heldout_bin_mape_fraction",
                 "heldout_bin_weighted_mape_fraction", "heldout_bin_max_ape_fraction", "heldout_row_median_ape_fraction", "framework", "tables",
                 "repository", "commit", "license", "data_date", "date", "source", "confidence", "notes")
CHECK_COLUMNS = ("device", "u_compute_low_fraction", "u_compute_high_fraction", "u_memory_low_fraction",
                 "u_memory_high_fraction", "u_compute_fraction", "u_memory_fraction", "median_power_w", "rows_count",
                 "date", "source")


def provenance(folder: Path) -> dict[str, str]:
    """Commit, its date and the license from the copy's SOURCE.md."""
    text = (folder / "SOURCE.md").read_text(encoding="utf-8")
    commit = re.search(r"Commit:\s*([0-9a-f]{40})\s*\(commit date (\d{4}-\d{2}-\d{2})", text)
    license_ = re.search(r"License:\s*([^\n(]+)", text)
    if not commit or not license_:
        raise SystemExit(f"{folder / 'SOURCE.md'}: no 'Commit: <sha> (commit date YYYY-MM-DD' or 'License:' line")
    name = license_.group(1).strip()
    return {"commit": commit.group(1), "data_date": commit.group(2),
            "license": "Apache-2.0" if "Apache License 2.0" in name else name}


def read_rows(folder: Path, system: str, framework: str, version: str, device) -> tuple[pd.DataFrame, np.ndarray,
                                                                                        list[str], float]:
    """(rows used with u_c, u_m, power, fold; every power reading of the tables; table paths; power limit)."""
    base = f"{DATA}/{system}"
    gemm_path = f"{base}/gemm/{framework}/{version}/gemm_perf.parquet"
    quant_path = f"{base}/quantize/{framework}/{version}/scale_matrix_perf.parquet"
    gemm = pd.read_parquet(folder / gemm_path)
    quant = pd.read_parquet(folder / quant_path)
    for name, table in ((gemm_path, gemm), (quant_path, quant)):
        if not {"power", "power_limit"} <= set(table.columns):
            raise SystemExit(f"{name}: no power columns")
        if set(table["version"].astype(str)) != {version}:
            raise SystemExit(f"{name}: version column {sorted(set(table['version']))}, expected {version}")
    readings = np.concatenate([gemm["power"].to_numpy(float), quant["power"].to_numpy(float)])
    limits = set(gemm["power_limit"]) | set(quant["power_limit"])
    if len(limits) != 1:
        raise SystemExit(f"{system} {framework} {version}: several power limits {sorted(limits)}")
    limit = float(limits.pop())

    g = gemm[gemm["gemm_dtype"] == "bfloat16"]
    m, n, k = (g[c].astype(float) for c in ("m", "n", "k"))
    seconds = g["latency"] / 1e3
    # C[m, n] = A[m, k] @ B[k, n]: 2·m·n·k FLOP; bytes = (m·k + k·n)·2 (bf16 in) + m·n·2 (bf16 out)
    rows = [pd.DataFrame({"u_c": 2 * m * n * k / seconds / device.peak("bf16"),
                          "u_m": ((m * k + k * n) * 2 + m * n * 2) / seconds / device.mem_bytes_per_s,
                          "power": g["power"], "latency_ms": g["latency"],
                          "key": f"{framework}|gemm|" + g["m"].astype(str) + "x" + g["n"].astype(str) + "x"
                                 + g["k"].astype(str)})]
    m, k, seconds = quant["m"].astype(float), quant["k"].astype(float), quant["latency"] / 1e3
    # scale_matrix: read m·k bf16 (2 B) and write m·k fp8 (1 B)
    rows.append(pd.DataFrame({"u_c": 0.0, "u_m": 3 * m * k / seconds / device.mem_bytes_per_s,
                              "power": quant["power"], "latency_ms": quant["latency"],
                              "key": f"{framework}|scale_matrix|" + quant["m"].astype(str) + "x"
                                     + quant["k"].astype(str)}))
    out = pd.concat(rows, ignore_index=True)
    out = out[(out["latency_ms"] >= MIN_LATENCY_MS) & (out["u_m"] <= 1.0)].copy()
    out["fold"] = [zlib.crc32(key.encode()) % FOLDS for key in out["key"]]
    return out, readings, [gemm_path + " (bfloat16 rows)", quant_path], limit


def bins(rows: pd.DataFrame, width: float) -> pd.DataFrame:
    """Median u_c, u_m and power of each width x width bin of (u_c, u_m) with enough rows."""
    rows = rows.assign(i=(rows["u_c"] / width).astype(int), j=(rows["u_m"] / width).astype(int))
    out = rows.groupby(["i", "j"]).agg(rows=("power", "size"), u_c=("u_c", "median"), u_m=("u_m", "median"),
                                       power=("power", "median")).reset_index()
    return out[out["rows"] >= MIN_ROWS_PER_BIN].reset_index(drop=True)


def model(idle: float, a: float, b: float, limit: float, u_c, u_m):
    return np.minimum(limit, idle + a * np.asarray(u_c) + b * np.asarray(u_m))


def fit(device_id: str, folder: Path, catalog, today: str, source: dict) -> tuple[dict, list[dict]]:
    system, versions = DEVICES[device_id]
    device = catalog.device(device_id)
    parts = [read_rows(folder, system, fw, ver, device) for fw, ver in versions]
    rows = pd.concat([p[0] for p in parts], ignore_index=True)
    readings = np.concatenate([p[1] for p in parts])
    limits = {p[3] for p in parts}
    if len(limits) != 1 or limits != {device.tdp_w}:
        raise SystemExit(f"{device_id}: power limits {sorted(limits)} differ from the catalog TDP {device.tdp_w}")
    limit = limits.pop()
    idle = float(np.percentile(readings, FLOOR_PERCENTILE))
    train, held = rows[rows["fold"] != HELD_OUT_FOLD], rows[rows["fold"] == HELD_OUT_FOLD]
    tb = bins(train, FIT_BIN)
    weight = np.sqrt(tb["rows"].to_numpy(float))
    residual = lambda x: weight * (model(idle, x[0], x[1], limit, tb["u_c"], tb["u_m"]) - tb["power"].to_numpy())
    a, b = least_squares(residual, [limit, limit / 2], bounds=([0, 0], [np.inf, np.inf])).x
    hb = bins(held, CHECK_BIN)
    bin_err = np.abs(model(idle, a, b, limit, hb["u_c"], hb["u_m"]) / hb["power"] - 1)
    row_err = np.abs(model(idle, a, b, limit, held["u_c"], held["u_m"]) / held["power"] - 1)
    frameworks = "; ".join(f"{fw} {ver}" for fw, ver in versions)
    tables = "; ".join(t for p in parts for t in p[2])
    curve = {
        "device": device_id, "idle_w": f"{idle:.1f}", "compute_range_w": f"{a:.1f}", "memory_range_w": f"{b:.1f}",
        "power_limit_w": f"{limit:g}", "train_rows_count": len(train), "train_bins_count": len(tb),
        "heldout_rows_count": len(held), "heldout_bins_count": len(hb),
        "heldout_bin_mape_fraction": f"{bin_err.mean():.4f}",
        "heldout_bin_weighted_mape_fraction": f"{np.average(bin_err, weights=hb['rows']):.4f}",
        "heldout_bin_max_ape_fraction": f"{bin_err.max():.4f}",
        "heldout_row_median_ape_fraction": f"{np.median(row_err):.4f}", "framework": frameworks, "tables": tables,
        "repository": REPOSITORY, "commit": source["commit"], "license": source["license"],
        "data_date": source["data_date"], "date": today,
        "source": f"{REPOSITORY} @{source['commit'][:7]} ({source['license']}): NVML power of {frameworks} kernel "
                  "tables, fitted by scripts/fit_power_curves.py",
        "confidence": "medium",
        "notes": (f"P = min({limit:g}, {idle:.1f} + {a:.1f} u_c + {b:.1f} u_m); u_c = achieved FLOP/s / catalog dense "
                  f"bf16 peak, u_m = achieved bytes/s / catalog HBM bandwidth; bf16 GEMM + fp8 scale_matrix rows "
                  f">= {MIN_LATENCY_MS} ms; idle_w = {FLOOR_PERCENTILE:g}st percentile of all {len(readings)} "
                  f"readings (locked clocks); held out: shapes with CRC-32 = 0 mod {FOLDS}; NVML 100 ms sampling "
                  "over ~1 s loops: single rows are noisy (SOURCE.md), bins are medians"),
    }
    checks = [{"device": device_id,
               "u_compute_low_fraction": f"{r.i * CHECK_BIN:.2f}", "u_compute_high_fraction": f"{(r.i + 1) * CHECK_BIN:.2f}",
               "u_memory_low_fraction": f"{r.j * CHECK_BIN:.2f}", "u_memory_high_fraction": f"{(r.j + 1) * CHECK_BIN:.2f}",
               "u_compute_fraction": f"{r.u_c:.4f}", "u_memory_fraction": f"{r.u_m:.4f}",
               "median_power_w": f"{r.power:.1f}", "rows_count": int(r.rows), "date": today,
               "source": f"held-out rows of power_curves.csv:{device_id} ({REPOSITORY} @{source['commit'][:7]}, "
                         f"{source['license']}; {frameworks})"}
              for r in hb.itertuples()]
    print(f"{device_id}: P = min({limit:g}, {idle:.1f} + {a:.1f} u_c + {b:.1f} u_m)  train {len(train)} rows in "
          f"{len(tb)} bins; held out {len(held)} rows in {len(hb)} bins: bin MAPE {bin_err.mean():.1%} "
          f"(row-weighted {np.average(bin_err, weights=hb['rows']):.1%}, max {bin_err.max():.1%}), "
          f"row median APE {np.median(row_err):.1%}")
    return curve, checks


def write(path: Path, columns: tuple[str, ...], rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, columns, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", type=Path, help="the aiconfigurator copy (holds SOURCE.md and aic-core/)")
    p.add_argument("--out", type=Path, default=ROOT / "hardware_specs" / "energy", help="folder to write into")
    p.add_argument("--date", default=datetime.date.today().isoformat(), help="the date written in the rows")
    args = p.parse_args(argv)
    source = provenance(args.source)
    catalog = load_catalog()
    curves, checks = [], []
    for device_id in DEVICES:
        curve, check = fit(device_id, args.source, catalog, args.date, source)
        curves.append(curve)
        checks += check
    args.out.mkdir(parents=True, exist_ok=True)
    write(args.out / "power_curves.csv", CURVE_COLUMNS, curves)
    write(args.out / "power_curve_checks.csv", CHECK_COLUMNS, checks)
    print(f"wrote {args.out / 'power_curves.csv'} and {args.out / 'power_curve_checks.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
