"""Sweep page: a `planner sweep` Parquet (or the example grid, or a grid defined in the page, swept here) as a
Pareto chart with filters."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
from itertools import islice
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from planner.app.common import ROOT, band_text, base_context, purpose, shown, zoo_ids
from planner.app.wording import app_words

SWEEP_EXAMPLE = ROOT / "examples" / "sweeps" / "serving.yaml"
MAX_SWEEP_UPLOAD_BYTES = 200 * 2**20
"""Largest sweep Parquet accepted from the browser (.streamlit/config.toml maxUploadSize is as large)."""
DATA_ENV = "PLANNER_APP_DATA"
"""The environment variable naming the folder whose sweep files the page may open (read when the page is
drawn); without it, benchmarks/results in the repository."""
MAX_LISTED = 500
"""Sweep files listed from the data folder at most."""
MAX_FORM_POINTS = 500
"""Most points a grid defined in the page may have (after its constraints): swept in the server's process
(about 100 points a second); a larger grid runs with `planner sweep`, from its YAML."""
MAX_FORM_SIZE = 100_000
"""Most points before the constraints that the page counts through."""
DEFINE = "Define a grid"
FORM_DEFAULTS = {"sg_mode": "inference", "sg_models": ["llama-3.1-8b"], "sg_devices": ["h100-sxm", "a100-sxm-80gb", "l40s"],
                 "sg_dtypes": ["bf16"], "sg_gpus": "1, 2, 4, 8", "sg_tp": "1, 2, 4, 8", "sg_batch": "1, 8, 64",
                 "sg_input_len": "1024", "sg_output_len": "256", "sg_seq_len": "2048", "sg_micro_batch": "1",
                 "sg_zero": "1", "sg_pricing": ["on_demand"], "sg_fits": True}
"""The grid form's first values (session_state keys)."""
NUMBER_AXES = {"inference": (("gpus", "sg_gpus", "GPU counts", 1, 4096), ("tp", "sg_tp", "TP sizes", 1, 64),
                             ("batch", "sg_batch", "Batch sizes", 1, 4096),
                             ("input_len", "sg_input_len", "Input tokens", 1, 131072),
                             ("output_len", "sg_output_len", "Output tokens", 1, 32768)),
               "training": (("gpus", "sg_gpus", "GPU counts", 1, 4096), ("tp", "sg_tp", "TP sizes", 1, 64),
                            ("seq_len", "sg_seq_len", "Sequence lengths", 1, 131072),
                            ("micro_batch", "sg_micro_batch", "Micro-batches", 1, 1024),
                            ("zero", "sg_zero", "ZeRO stages", 0, 3))}
"""Per mode, the form's number axes: (axis, session_state key, label, low, high)."""
AXIS_LABELS = {"model": "Models", "device": "Devices", "dtype": "Dtypes", "pricing": "Pricing", "mode": "Mode",
               **{axis: label for rows in NUMBER_AXES.values() for axis, _, label, _, _ in rows}}
"""What the form calls each axis (a grid's error names the field)."""


class FormError(ValueError):
    """A field of the grid form that cannot be read: its message names the field."""


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


def _numbers(label: str, text: str, low: int, high: int) -> list[int]:
    """The whole numbers of a field such as "1, 2, 4, 8"; FormError naming the field otherwise."""
    items = [t.strip() for t in str(text).replace(";", ",").split(",") if t.strip()]
    if not items:
        raise FormError(f"{label}: give at least one whole number, e.g. 1, 2, 4")
    values = []
    for item in items:
        if not re.fullmatch(r"[0-9]{1,9}", item) or not low <= int(item) <= high:
            raise FormError(f"{label}: '{item[:20]}' is not a whole number from {low:,} to {high:,}")
        value = int(item)
        if value in values:
            raise FormError(f"{label}: {value:,} is listed twice")
        values.append(value)
    return values


def form_grid(values: dict) -> dict:
    """The grid mapping (what a GRID.yaml holds: planner/sweep/grid.py) of the form's `values` (its session_state
    keys); FormError naming the field that cannot be read. TP sizes are kept to those that divide the GPU count."""
    mode = values["sg_mode"]
    axes: dict = {}
    for key, label in (("sg_models", "Models"), ("sg_dtypes", "Dtypes")):
        if not values[key]:
            raise FormError(f"{label}: pick at least one")
    axes["model"] = list(values["sg_models"])
    axes["mode"] = mode
    axes["dtype"] = list(values["sg_dtypes"])
    for axis, key, label, low, high in NUMBER_AXES[mode]:
        if axis not in ("gpus", "tp"):
            axes[axis] = _numbers(label, values[key], low, high)
    axes["tp"] = _numbers("TP sizes", values["sg_tp"], 1, 64)
    if not values["sg_devices"]:
        raise FormError("Devices: pick at least one")
    axes["device"] = list(values["sg_devices"])
    if not values["sg_pricing"]:
        raise FormError("Pricing: pick at least one")
    axes["pricing"] = list(values["sg_pricing"])
    axes["gpus"] = _numbers("GPU counts", values["sg_gpus"], 1, 4096)
    grid = {"axes": {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in axes.items()},
            "where": ["tp <= gpus", "gpus % tp == 0"]}
    if values["sg_fits"]:
        grid["keep"] = {"fits": True}
    return grid


def grid_yaml(grid: dict) -> str:
    """The grid as the YAML file `planner sweep` reads."""
    import yaml
    return ("# Built by the Sweep page of planner's app: planner sweep grid.yaml --out sweep.parquet sweeps it again\n"
            + yaml.safe_dump(grid, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None))


def checked_grid(grid: dict):
    """The Grid of the form's mapping, checked as `planner sweep` checks a file (planner.sweep.grid.parse_grid and
    check_names); ConfigError with the field named as the form names it."""
    from planner.errors import ConfigError
    from planner.sweep.grid import check_names, parse_grid
    try:
        parsed = parse_grid(grid, "grid")
        check_names(parsed, "grid")
    except ConfigError as exc:
        text = " ".join(str(exc).split()).removeprefix("grid: ")
        text = re.sub(r"axis '(\w+)'", lambda m: f"{AXIS_LABELS.get(m[1], m[1])} (axis {m[1]})", text)
        raise ConfigError(app_words(text)) from None
    return parsed


def count_points(grid) -> int:
    """Points of `grid` after its constraints (every constraint evaluated, as run_sweep does first)."""
    return sum(1 for _ in grid.points())


@st.cache_data(show_spinner="Sweeping the grid...", max_entries=16)
def run_grid(text: str) -> bytes:
    """The grid file `text` swept in this process by the call `planner sweep` makes (planner.sweep.run.run_sweep,
    local backend); the Parquet it writes, as bytes."""
    import tempfile

    from planner.plan.safe_yaml import load_yaml
    from planner.sweep.grid import parse_grid
    from planner.sweep.run import run_sweep
    with tempfile.TemporaryDirectory() as tmp:
        out = run_sweep(parse_grid(load_yaml(text, "grid"), "grid"), Path(tmp) / "sweep.parquet").out
        return out.read_bytes()


def _grid_form() -> pd.DataFrame | None:
    """The grid form, its point count, Run, and the downloads; the swept rows once run (None before, or after
    a change to the form until it is run again)."""
    from planner.errors import ConfigError
    from planner.hardware.catalog import PRICINGS
    ss = st.session_state
    for key, value in FORM_DEFAULTS.items():
        ss.setdefault(key, value)
    devices = sorted(base_context().catalog.devices)
    models = zoo_ids()
    for key, options in (("sg_models", models), ("sg_devices", devices)):
        ss[key] = [v for v in ss[key] if v in options]
    st.caption(f"Each axis takes one value or several; every combination is a point (TP sizes are kept to those that "
               f"divide the GPU count). At most {MAX_FORM_POINTS:,} points run here; download the grid as YAML for a "
               "larger one (`planner sweep grid.yaml`, on one machine or a cluster).")
    mode = st.radio("Mode", ["inference", "training"], horizontal=True, key="sg_mode",
                    help="Serving batches (prefill then decode for a language model), or training steps")
    cols = st.columns(3)
    cols[0].multiselect("Models", models, key="sg_models", help="Zoo models (axis model)")
    cols[1].multiselect("Devices", devices, key="sg_devices",
                        help="Catalog devices (axis device); a device of the Your hardware page is swept on the "
                             "command line, from a catalog row")
    cols[2].multiselect("Dtypes", ["bf16", "fp16", "fp8", "fp32", "int8", "fp4"], key="sg_dtypes",
                        help="Precisions (axis dtype)")
    fields = NUMBER_AXES[mode]
    cols = st.columns(len(fields))
    for col, (axis, key, label, low, high) in zip(cols, fields):
        col.text_input(label, key=key, help=f"Whole numbers from {low:,} to {high:,}, separated by commas (axis {axis})")
    cols = st.columns(2)
    cols[0].multiselect("Pricing", list(PRICINGS), key="sg_pricing",
                        help="How the instances are paid for (axis pricing); a device without a price at one is "
                             "swept without a cost")
    cols[1].checkbox("Keep only points that fit in memory", key="sg_fits",
                     help="keep: {fits: true}; a point that cannot be predicted is kept whatever this says")
    try:
        grid = form_grid({k: ss[k] for k in FORM_DEFAULTS})
        parsed = checked_grid(grid)
        if parsed.size > MAX_FORM_SIZE:
            raise FormError(f"{parsed.size:,} points before the constraints; the page runs at most {MAX_FORM_POINTS:,} "
                            "(give fewer values, or download the grid and run planner sweep)")
        points = count_points(parsed)
    except (FormError, ConfigError) as exc:
        st.error(str(exc))
        return None
    text = grid_yaml(grid)
    over = points > MAX_FORM_POINTS
    st.caption(f"{points:,} point{'s' * (points != 1)} ({parsed.size:,} before the constraints tp <= gpus and "
               f"gpus % tp == 0){f'; over the {MAX_FORM_POINTS:,} the page runs' if over else ''}.")
    cols = st.columns(2)
    run = cols[0].button("Run the grid", key="sg_run", type="primary", disabled=over or points == 0,
                         help=f"Predict every point here (about {max(1, points // 100):,} s); at most "
                              f"{MAX_FORM_POINTS:,} points")
    cols[1].download_button("Grid as YAML", text, "grid.yaml", "text/yaml", key="sg_yaml", on_click="ignore",
                            help="planner sweep grid.yaml --out sweep.parquet sweeps it again, on one machine or a "
                                 "cluster (--workers, --cluster)")
    if over:
        st.warning(f"{points:,} points: the page runs at most {MAX_FORM_POINTS:,}. Give fewer values, or download the "
                   "grid and run it with planner sweep.")
    if run:
        data = shown(run_grid, text)
        if data is not None:
            ss["sg_result"] = {"yaml": text, "parquet": data}
    kept = ss.get("sg_result")
    if not kept:
        return None
    if kept["yaml"] != text:
        st.info("The form changed since the grid was run: run it again for its front.")
        return None
    frame = shown(_rows_of, kept["parquet"])
    if frame is None:
        return None
    cols = st.columns(2)
    cols[0].download_button("Result as Parquet", kept["parquet"], "sweep.parquet", "application/octet-stream",
                            key="sg_parquet", on_click="ignore", help="The rows planner sweep writes, one per point")
    cols[1].download_button("Result as CSV", _csv_of(kept["parquet"]), "sweep.csv", "text/csv", key="sg_csv",
                            on_click="ignore", help="The same rows as CSV (planner sweep --out sweep.csv writes these)")
    return frame


@st.cache_data(show_spinner=False, max_entries=16)
def _rows_of(data: bytes) -> pd.DataFrame:
    from planner.sweep.summary import read_sweep
    return read_sweep(data)


@st.cache_data(show_spinner=False, max_entries=16)
def _csv_of(data: bytes) -> str:
    from planner.files import spreadsheet_csv

    return spreadsheet_csv(pd.read_parquet(io.BytesIO(data)))


def page() -> None:
    purpose("Sweep: the Pareto front of cost, latency and throughput",
            "Millions of configurations at once: the rows `planner sweep GRID.yaml --out FILE` writes (docs/sweeps.md), "
            "one per configuration, on cost per unit of work over latency.")
    source = st.radio("Sweep", ["Example grid (examples/sweeps/serving.yaml)", DEFINE,
                                "A file in the app's data folder", "Upload"], horizontal=True, key="sweep_source",
                      help="The example grid is swept in this page (about 10 s), and so is a grid you define "
                           f"(at most {MAX_FORM_POINTS:,} points); a larger sweep runs on the command line, on one "
                           "machine or a Dask or Ray cluster, and is opened here from the app's data folder or "
                           "uploaded")
    frame = None
    if source.startswith("Example"):
        frame = shown(example_sweep)
    elif source == DEFINE:
        frame = _grid_form()
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
    picked = rows
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
        _why_failed(picked)
    if ok.empty:
        st.info("No point to show: widen the filters.")
        return
    time_name = _time_name(unit)
    per = f"$ per 1M {unit or 'unit'}s"
    chart = ok.assign(pareto=ok["id"].isin(front["id"]), usd_per_million=ok["usd_per_unit"] * 1e6)
    fields = [f for f in ("id", "model", "device", "gpus", "tp", "batch", "in.pricing", "engine") if f in chart]
    st.altair_chart(alt.Chart(chart).mark_point(filled=True).encode(
        x=alt.X("latency_s_:Q", scale=alt.Scale(type="log"), title=time_name),
        y=alt.Y("usd_per_million:Q", scale=alt.Scale(type="log"), title=per),
        color="device:N", size=alt.Size("pareto:N", scale=alt.Scale(range=[20, 140]), title="Pareto-optimal"),
        tooltip=fields + [alt.Tooltip("latency_s_:Q", format=",.3g", title=time_name),
                          alt.Tooltip("throughput_per_s:Q", format=",.3g", title=f"throughput ({unit or 'unit'}s/s)"),
                          alt.Tooltip("usd_per_million:Q", format=",.3g", title=per)]), width="stretch")
    st.subheader("Pareto front")
    _shown_table(_with_units(front, fields, unit))
    st.subheader("Best point per device (least cost)")
    _shown_table(_with_units(best_per_device(rows), fields, unit))


def _time_name(unit: str | None) -> str:
    """The time axis's header: a training row's time is its step time."""
    return "step time (s)" if unit == "training token" else "latency (s)"


def _why_failed(rows: pd.DataFrame) -> None:
    """The distinct reasons points could not be predicted, in the page's words, most frequent first."""
    if "error" not in rows:
        return
    reasons = rows["error"].dropna().astype(str).map(app_words).value_counts()
    if reasons.empty:
        return
    with st.expander(f"Why points could not be predicted ({len(reasons):,} reason{'s' * (len(reasons) != 1)})"):
        st.markdown("\n".join(f"- {count:,} point{'s' * (count != 1)}: {reason}"
                               for reason, count in reasons.head(10).items()))
        if len(reasons) > 10:
            st.caption(f"{len(reasons) - 10:,} more reasons in the rows' error column.")


def number_text(value) -> str:
    """A table's number: three significant digits at least, thousands separated, no exponent; blank when unknown."""
    if value is None or isinstance(value, str):
        return "" if value is None else value
    value = float(value)
    if not math.isfinite(value):
        return ""
    digits = 0 if value == 0 or abs(value) >= 100 else min(6, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{digits}f}"


def whole_text(value) -> str:
    """A whole number with thousands separated; blank when unknown."""
    return "" if value is None or not math.isfinite(float(value)) else f"{int(value):,}"


WHOLE = ("id", "gpus", "tp", "batch")
"""Columns of whole numbers."""


def _shown_table(frame: pd.DataFrame) -> None:
    """A table with its numbers formatted (whole numbers as such, others to three significant digits), and the
    scroll hint when it is wider than the page."""
    from planner.app.workload import scroll_hint
    formats = {c: whole_text if c in WHOLE else number_text for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c]) and frame[c].dtype != bool}
    st.dataframe(frame.style.format(formats), hide_index=True)
    scroll_hint(frame, "every column")


def price_note(notes) -> str:
    """What a row's notes say of its price, in the page's words: devices paid for but idle, no price, what the
    cost leaves out."""
    try:
        items = json.loads(notes) if isinstance(notes, str) else list(notes or [])
    except (ValueError, TypeError):
        return ""
    said = [app_words(n) for n in items
            if isinstance(n, str) and (n.startswith(("cost pays for", "cost excludes")) or "no cost" in n)]
    return "; ".join(said)


def _with_units(frame: pd.DataFrame, fields: list[str], unit: str | None) -> pd.DataFrame:
    """The rows to show, each number in a human unit named in its header (the Parquet keeps SI)."""
    unit = unit or "unit"
    out = frame[[f for f in fields if f in frame]].rename(columns={"in.pricing": "pricing"})
    columns = {f"$ per 1M {unit}s": ("usd_per_unit", 1e6), _time_name(unit): ("latency_s_", 1.0),
               f"throughput ({unit}s/s)": ("throughput_per_s", 1.0), "memory per GPU (GB)": ("memory_bytes_per_gpu", 1e-9)}
    for name, (column, scale) in columns.items():
        if column in frame:
            out[name] = frame[column] * scale
    if "tier" in frame:
        out["tier"] = frame["tier"]
    if "band_fraction" in frame:  # how far each figure may be off, either way (planner/hardware/measured_bands.py)
        out["band (either way)"] = frame["band_fraction"].map(lambda f: band_text(f) if f == f and f is not None else "")
    if "notes" in frame:
        out["price note"] = frame["notes"].map(price_note)
    return out

