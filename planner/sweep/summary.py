"""What a sweep found: each row's cost per unit, latency and throughput on one scale, the Pareto
front of cost vs latency vs throughput, and the best point per device.

Rows are compared within one unit only (output tokens for LLM inference, samples otherwise: a token
and an image are not the same work), among rows that predict and fit in memory.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

THROUGHPUT = ("throughput_tokens_per_s", "throughput_samples_per_s", "tokens_per_s", "samples_per_s")
LATENCY = ("latency_s", "step_time_s")
USD_PER_UNIT = (("usd_per_million_output_tokens", 1e-6), ("usd_per_thousand_samples", 1e-3))


def measures(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with four columns added: `unit` ("output token" or "sample"), `throughput_per_s`, `latency_s_`
    (latency of a request, or a training step) and `usd_per_unit` (dollars per one unit), NaN where absent."""
    out = frame.copy()
    n = len(out)

    def first(columns) -> np.ndarray:
        values = np.full(n, np.nan)
        for c in columns:
            if c in out:
                col = pd.to_numeric(out[c], errors="coerce").to_numpy(dtype=float)
                values = np.where(np.isnan(values), col, values)
        return values

    tokens = out["throughput_tokens_per_s"].notna().to_numpy() if "throughput_tokens_per_s" in out \
        else np.zeros(n, dtype=bool)
    out["unit"] = np.where(tokens, "output token", "sample")
    out["throughput_per_s"] = first(THROUGHPUT)
    out["latency_s_"] = first(LATENCY)
    usd = np.full(n, np.nan)
    for column, scale in USD_PER_UNIT:
        if column in out:
            col = pd.to_numeric(out[column], errors="coerce").to_numpy(dtype=float) * scale
            usd = np.where(np.isnan(usd), col, usd)
    if "cost_usd_per_h" in out:  # a unit without a per-unit price column: $/h over units per hour
        per_h = pd.to_numeric(out["cost_usd_per_h"], errors="coerce").to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            usd = np.where(np.isnan(usd), per_h / (out["throughput_per_s"].to_numpy() * 3600), usd)
    out["usd_per_unit"] = usd
    return out


def usable(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows that predicted, fit in memory and have all three measures."""
    ok = pd.Series(True, index=frame.index)
    if "error" in frame:
        ok &= frame["error"].isna()
    if "fits" in frame:
        ok &= frame["fits"].fillna(False).astype(bool)
    for c in ("throughput_per_s", "latency_s_", "usd_per_unit"):
        ok &= np.isfinite(frame[c].to_numpy(dtype=float))
    return frame[ok]


def pareto_mask(cost: np.ndarray, latency: np.ndarray, throughput: np.ndarray) -> np.ndarray:
    """True for the points no other point beats: lower-or-equal cost and latency and higher-or-equal
    throughput, one of them strictly. Sorted by cost, each point is checked against the front so far
    (a point can only be dominated by one of no greater cost): O(n x front)."""
    order = np.lexsort((-throughput, latency, cost))
    front_lat: list[float] = []
    front_thr: list[float] = []
    front_cost: list[float] = []
    mask = np.zeros(len(cost), dtype=bool)
    for i in order:
        c, lat, thr = cost[i], latency[i], throughput[i]
        if front_lat:
            fl, ft, fc = np.asarray(front_lat), np.asarray(front_thr), np.asarray(front_cost)
            dominated = (fl <= lat) & (ft >= thr) & ((fl < lat) | (ft > thr) | (fc < c))
            if dominated.any():
                continue
        mask[i] = True
        front_lat.append(lat)
        front_thr.append(thr)
        front_cost.append(c)
    return mask


def pareto_front(frame: pd.DataFrame) -> pd.DataFrame:
    """The Pareto-optimal rows of each unit (cost per unit, latency: lower; throughput: higher), by cost."""
    rows = usable(measures(frame) if "usd_per_unit" not in frame else frame)
    fronts = []
    for _, group in rows.groupby("unit", sort=True):
        mask = pareto_mask(group["usd_per_unit"].to_numpy(float), group["latency_s_"].to_numpy(float),
                           group["throughput_per_s"].to_numpy(float))
        fronts.append(group[mask])
    if not fronts:
        return rows.iloc[:0]
    return pd.concat(fronts).sort_values(["unit", "usd_per_unit"])


def best_per_device(frame: pd.DataFrame) -> pd.DataFrame:
    """For each unit and device, the usable row of least cost per unit (ties: higher throughput)."""
    rows = usable(measures(frame) if "usd_per_unit" not in frame else frame)
    if rows.empty:
        return rows
    rows = rows.sort_values(["unit", "device", "usd_per_unit", "throughput_per_s"],
                            ascending=[True, True, True, False])
    return rows.groupby(["unit", "device"], sort=True).head(1).sort_values(["unit", "usd_per_unit"])


MAX_SWEEP_BYTES = 2 * 2**30
"""Largest sweep file read (2 GiB): far above the 100,000-point grid of benchmarks/sweep_speed.py (~30 MB)."""


def read_sweep(source) -> pd.DataFrame:
    """A sweep's rows from a Parquet path or bytes, with `measures` added; ConfigError when it is not a
    Parquet file, is over MAX_SWEEP_BYTES or lacks a sweep's id, in.model and in.device columns. Parquet holds
    data only: reading it runs nothing."""
    import io
    import os

    import pyarrow as pa

    from planner.errors import ConfigError

    size = len(source) if isinstance(source, (bytes, bytearray)) else os.path.getsize(source) \
        if os.path.isfile(source) else None
    if size is None:
        raise ConfigError(f"sweep file '{source}' does not exist; run planner sweep GRID.yaml --out FILE first")
    if size > MAX_SWEEP_BYTES:
        raise ConfigError(f"the sweep file is {size:,} bytes; the limit is {MAX_SWEEP_BYTES:,}")
    try:
        frame = pd.read_parquet(io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ConfigError(f"not a Parquet file planner can read: {' '.join(str(exc).split())[:200]}") from None
    missing = [c for c in ("id", "in.model", "in.device") if c not in frame]
    if missing:
        raise ConfigError(f"not a planner sweep: no column {', '.join(missing)} (planner sweep writes id, the "
                          "point's in.<key> columns and the prediction's keys)")
    return measures(frame)
