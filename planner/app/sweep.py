"""Sweep page: a `planner sweep` Parquet (or the example grid swept here) as a Pareto chart with filters."""

from __future__ import annotations

import hashlib
import os
from itertools import islice
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from planner.app.common import ROOT, purpose, shown

SWEEP_EXAMPLE = ROOT / "examples" / "sweeps" / "serving.yaml"
MAX_SWEEP_UPLOAD_BYTES = 200 * 2**20
"""Largest sweep Parquet accepted from the browser (.streamlit/config.toml maxUploadSize is as large)."""
DATA_ENV = "PLANNER_APP_DATA"
"""The environment variable naming the folder whose sweep files the page may open (read when the page is
drawn); without it, benchmarks/results in the repository."""
MAX_LISTED = 500
"""Sweep files listed from the data folder at most."""


def data_folder() -> Path:
    """The one folder on the server whose Parquet files the page reads: $PLANNER_APP_DATA as the server was
    started, else benchmarks/results. A path typed in a browser is never read."""
    return Path(os.environ.get(DATA_ENV) or ROOT / "benchmarks" / "results").resolve()


def data_files(folder: Path) -> list[str]:
    """The .parquet files under `folder` (its subfolders too), as paths relative to it; a file whose real
    path lies outside the folder (a link out of it) is left out."""
    if not folder.is_dir():
        return []
    found = []
    for path in islice(sorted(folder.rglob("*.parquet")), MAX_LISTED):
        try:
            real = path.resolve()
        except OSError:
            continue
        if real.is_file() and real.is_relative_to(folder):
            found.append(path.relative_to(folder).as_posix())
    return found


@st.cache_data(show_spinner="Sweeping the example grid (about 10 s)...")
def example_sweep() -> pd.DataFrame:
    """examples/sweeps/serving.yaml swept in this process, its rows with the sweep measures."""
    import tempfile

    from planner.sweep.grid import load_grid
    from planner.sweep.run import run_sweep
    from planner.sweep.summary import read_sweep
    with tempfile.TemporaryDirectory() as tmp:
        return read_sweep(str(run_sweep(load_grid(str(SWEEP_EXAMPLE)), Path(tmp) / "sweep.parquet").out))


@st.cache_data(show_spinner=False)
def sweep_rows(digest: str, _data: bytes) -> pd.DataFrame:
    """An uploaded sweep's rows, cached on the bytes' SHA-256 `digest`."""
    from planner.sweep.summary import read_sweep
    return read_sweep(_data)



def page() -> None:
    purpose("Sweep: the Pareto front of cost, latency and throughput",
            "Millions of configurations at once: the rows `planner sweep GRID.yaml --out FILE` writes (docs/sweeps.md), "
            "one per configuration, on cost per unit of work over latency.")
    source = st.radio("Sweep", ["Example grid (examples/sweeps/serving.yaml)", "A file in the app's data folder",
                                "Upload"], horizontal=True, key="sweep_source",
                      help="The example grid is swept in this page (about 10 s); a larger sweep runs on the "
                           "command line, on one machine or a Dask or Ray cluster, and is opened here from the "
                           "app's data folder or uploaded")
    frame = None
    if source.startswith("Example"):
        frame = shown(example_sweep)
    elif source.startswith("A file"):
        folder = data_folder()
        files = data_files(folder)
        st.caption(f"The app opens sweep files from one folder on the machine that runs it, {folder}, chosen when "
                   f"the app was started (the {DATA_ENV} environment variable; without it, benchmarks/results in "
                   "the repository). A path typed in the browser is never read.")
        if not files:
            st.info(f"No sweep file (.parquet) in {folder}: write the sweep there, or upload it.")
            return
        name = st.selectbox("Sweep file", files, key="sweep_file",
                            help="The Parquet files planner sweep wrote into the app's data folder (its subfolders "
                                 f"too; {MAX_LISTED:,} listed at most)")
        from planner.sweep.summary import read_sweep
        frame = shown(read_sweep, str(folder / name))
    else:
        file = st.file_uploader("Sweep Parquet", type=["parquet"], key="sweep_upload",
                                max_upload_size=-(-MAX_SWEEP_UPLOAD_BYTES // 2**20),  # whole MiB, rounded up
                                help=f"At most {MAX_SWEEP_UPLOAD_BYTES // 2**20} MiB; read as data (columns "
                                     "checked, nothing run)")
        if file is not None:
            data = file.getvalue()
            if len(data) > MAX_SWEEP_UPLOAD_BYTES:
                st.error(f"{file.name[:80]} is {len(data):,} bytes; the limit is {MAX_SWEEP_UPLOAD_BYTES:,}")
            else:
                frame = shown(sweep_rows, hashlib.sha256(data).hexdigest(), data)
    if frame is None:
        return
    _sweep_view(frame)


def _sweep_view(frame: pd.DataFrame) -> None:
    from planner.sweep.summary import best_per_device, pareto_front, usable
    units = sorted(frame["unit"].dropna().unique())
    cols = st.columns(4)
    unit = cols[0].selectbox("Per", units, key="sweep_unit",
                             help="The unit of work costs are counted in: output tokens, training tokens or samples") \
        if units else None
    models = sorted(frame["in.model"].astype(str).unique())
    devices = sorted(frame["in.device"].astype(str).unique())
    pick_models = cols[1].multiselect("Models", models, default=models, key="sweep_models",
                                      help="Keep the points of these models")
    pick_devices = cols[2].multiselect("Devices", devices, default=devices, key="sweep_devices",
                                       help="Keep the points of these devices")
    fits = cols[3].checkbox("Fits in memory only", True, key="sweep_fits",
                            help="Hide configurations whose memory per device is over its capacity")
    rows = frame[frame["in.model"].astype(str).isin(pick_models) & frame["in.device"].astype(str).isin(pick_devices)]
    # a point that did not predict has no unit: counted before the rows of one unit are picked
    errors = int(rows["error"].notna().sum()) if "error" in rows else 0
    if unit is not None:
        rows = rows[rows["unit"] == unit]
    ok = usable(rows) if fits else rows[rows["error"].isna()] if "error" in rows else rows
    front = pareto_front(rows)
    c = st.columns(3)
    c[0].metric("Points", f"{len(rows):,}")
    c[1].metric("Predicted and fitting", f"{len(usable(rows)):,}")
    c[2].metric("Pareto-optimal", f"{len(front):,}")
    if errors:
        st.caption(f"{errors:,} points could not be predicted (their `error` column says why).")
    if ok.empty:
        st.info("No point to show: widen the filters.")
        return
    chart = ok.assign(pareto=ok["id"].isin(front["id"]), usd_per_million=ok["usd_per_unit"] * 1e6)
    fields = [f for f in ("id", "model", "device", "gpus", "tp", "batch", "in.pricing", "engine") if f in chart]
    st.altair_chart(alt.Chart(chart).mark_point(filled=True).encode(
        x=alt.X("latency_s_:Q", scale=alt.Scale(type="log"), title="latency (s)"),
        y=alt.Y("usd_per_million:Q", scale=alt.Scale(type="log"), title=f"$ per 1M {unit or 'unit'}s"),
        color="device:N", size=alt.Size("pareto:N", scale=alt.Scale(range=[20, 140]), title="Pareto-optimal"),
        tooltip=fields + ["throughput_per_s", "usd_per_million"]), width="stretch")
    st.subheader("Pareto front")
    st.dataframe(_with_units(front, fields, unit), hide_index=True)
    st.subheader("Best point per device (least cost)")
    st.dataframe(_with_units(best_per_device(rows), fields, unit), hide_index=True)


def _with_units(frame: pd.DataFrame, fields: list[str], unit: str | None) -> pd.DataFrame:
    """The rows to show, each number in a human unit named in its header (the Parquet keeps SI)."""
    unit = unit or "unit"
    out = frame[[f for f in fields if f in frame]].rename(columns={"in.pricing": "pricing"})
    columns = {f"$ per 1M {unit}s": ("usd_per_unit", 1e6), "latency (s)": ("latency_s_", 1.0),
               f"throughput ({unit}s/s)": ("throughput_per_s", 1.0), "memory per GPU (GB)": ("memory_bytes_per_gpu", 1e-9)}
    for name, (column, scale) in columns.items():
        if column in frame:
            out[name] = frame[column] * scale
    if "tier" in frame:
        out["tier"] = frame["tier"]
    return out

