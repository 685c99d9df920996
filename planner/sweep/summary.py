"""What a sweep found: each row's cost per unit, latency and throughput on one scale, the Pareto
front of cost vs latency vs throughput of each model, and its best point per device.

Rows are compared within one unit only (output tokens for LLM inference, the tokens of a training step
for LLM training, samples otherwise: a token and an image are not the same work), among rows that
predict and fit in memory.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

UNITS = ("output token", "training token", "sample")
"""The units rows are compared in: output tokens of LLM serving (`throughput_tokens_per_s`), tokens a
training step learns from (`tokens_per_s` of mode training), and samples (requests, images, sequences)."""
LATENCY = ("latency_s", "step_time_s")
# per unit: its throughput column(s), its price column and the price column's scale (None: $/h over units/h)
_OF_UNIT = {"output token": (("throughput_tokens_per_s",), ("usd_per_million_output_tokens", 1e-6)),
            "training token": (("tokens_per_s",), None),
            "sample": (("throughput_samples_per_s", "samples_per_s"), ("usd_per_thousand_samples", 1e-3))}


def measures(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with four columns added: `unit` (one of UNITS; None for a point that did not predict),
    `throughput_per_s` (units per second), `latency_s_` (latency of a request, or a training step) and
    `usd_per_unit` (dollars per one unit), NaN where absent. A training sweep of an LLM counts tokens;
    each row's throughput and price are read in its own unit, never one unit's figure under another's name."""
    out = frame.copy()
    n = len(out)

    def column(name: str) -> np.ndarray:
        return pd.to_numeric(out[name], errors="coerce").to_numpy(dtype=float) if name in out else np.full(n, np.nan)

    def first(columns) -> np.ndarray:
        values = np.full(n, np.nan)
        for c in columns:
            values = np.where(np.isnan(values), column(c), values)
        return values

    training = (out["mode"].astype(str) == "training").to_numpy() if "mode" in out else np.zeros(n, dtype=bool)
    failed = out["error"].notna().to_numpy() if "error" in out else np.zeros(n, dtype=bool)
    unit = np.where(~np.isnan(column("throughput_tokens_per_s")), "output token",
                    np.where(training & ~np.isnan(column("tokens_per_s")), "training token", "sample")).astype(object)
    unit[failed] = None
    out["unit"] = unit
    throughput, usd = np.full(n, np.nan), np.full(n, np.nan)
    per_h = column("cost_usd_per_h")
    for name, (rates, price) in _OF_UNIT.items():
        rows = unit == name
        rate = first(rates)
        throughput = np.where(rows, rate, throughput)
        priced = column(price[0]) * price[1] if price else np.full(n, np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):  # a unit without a price column: $/h over units/h
            priced = np.where(np.isnan(priced), per_h / (rate * 3600), priced)
        usd = np.where(rows, priced, usd)
    out["throughput_per_s"] = throughput
    out["latency_s_"] = first(LATENCY)
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


def _groups(rows: pd.DataFrame) -> list[str]:
    """What a front is drawn within: one unit of work and one model (a 3B model's cheaper token is not
    the same answer as a 70B one's)."""
    return ["unit"] + [c for c in ("in.model",) if c in rows]


def pareto_front(frame: pd.DataFrame) -> pd.DataFrame:
    """The Pareto-optimal rows of each unit and model (cost per unit, latency: lower; throughput:
    higher), by unit, model and cost."""
    rows = usable(measures(frame) if "usd_per_unit" not in frame else frame)
    fronts = []
    by = _groups(rows)
    for _, group in rows.groupby(by, sort=True):
        mask = pareto_mask(group["usd_per_unit"].to_numpy(float), group["latency_s_"].to_numpy(float),
                           group["throughput_per_s"].to_numpy(float))
        fronts.append(group[mask])
    if not fronts:
        return rows.iloc[:0]
    return pd.concat(fronts).sort_values([*by, "usd_per_unit"])


def best_per_device(frame: pd.DataFrame) -> pd.DataFrame:
    """For each unit, model and device, the usable row of least cost per unit (ties: higher throughput)."""
    rows = usable(measures(frame) if "usd_per_unit" not in frame else frame)
    if rows.empty:
        return rows
    by = _groups(rows)
    rows = rows.sort_values([*by, "device", "usd_per_unit", "throughput_per_s"],
                            ascending=[True] * len(by) + [True, True, False])
    return rows.groupby([*by, "device"], sort=True).head(1).sort_values([*by, "usd_per_unit"])


SWEEP_COLUMNS = ("id", "in.model", "in.device")
"""Columns every sweep's Parquet holds (planner/sweep/run.py writes them even when no row is kept)."""
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
    missing = [c for c in SWEEP_COLUMNS if c not in frame]
    if missing:
        raise ConfigError(f"not a planner sweep: no column {', '.join(missing)} (planner sweep writes id, the "
                          "point's in.<key> columns and the prediction's keys)")
    return measures(frame)
