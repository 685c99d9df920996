"""What every page of the app shares: the library context (with the session's own hardware), cached
loaders, the error boundary, upload reading and formatting. Pages import from here; nothing here
computes a number the library does not give."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parents[2]
MAX_UPLOAD_BYTES = 1_000_000
"""Largest config.json or scenario YAML accepted from the browser."""
UPLOAD_MIB = 1
"""The browser's own limit on those uploads, MiB (Streamlit's unit): the smallest above MAX_UPLOAD_BYTES. The
server-wide maxUploadSize in .streamlit/config.toml is the largest page's (Sweep, 200 MiB); each page
checks its own limit on the bytes it receives, with a message naming it."""


@st.cache_resource
def base_context():
    """The shipped catalog, profiles and defaults (planner.predict.default_context)."""
    from planner.predict import default_context
    return default_context()


def context():
    """The context predictions use: the shipped one, plus the devices added on the Your hardware page
    for as long as this browser session lasts (planner/app/hardware.py)."""
    from planner.app.hardware import session_context
    return session_context(base_context())


def hardware_key() -> str:
    """A digest of the session's own hardware: part of every cached prediction's key."""
    from planner.app.hardware import session_digest
    return session_digest()


@st.cache_data(show_spinner=False)
def zoo_ids() -> list[str]:
    import planner_models
    return planner_models.zoo_ids()


def device_ids() -> list[str]:
    return sorted(context().catalog.devices)


def purpose(title: str, line: str) -> None:
    """A page's title and its one-line purpose."""
    st.header(title)
    st.caption(line)


def model_of(model_key: str, config_text: str | None):
    """The Model of a zoo id (never code) or of an uploaded config.json's text."""
    from planner.files import parse_json
    from planner.workload.zoo import from_config, resolve
    if config_text is None:
        return resolve(model_key)  # a zoo id from the select box: never code (allow_code stays False)
    return from_config(parse_json(config_text, "uploaded config.json"), model_key)


def dated(date):
    """A price's date as the library shows it ("2024-01, stale" when over 12 months old); blank stays blank."""
    from planner.hardware.catalog import dated as catalog_dated
    return catalog_dated(date) if isinstance(date, str) and date else date


def shown(fn, *args, **kwargs):
    """Run `fn`; return its result, or None after showing the error in a box: planner's own errors (bad
    input, impossible configuration) as their one-line message, anything else as an internal error to
    report. Never a stack trace, unless PLANNER_DEBUG=1 (then the exception propagates to Streamlit)."""
    from planner.app.wording import app_words
    from planner.errors import PlannerError
    try:
        return fn(*args, **kwargs)
    except PlannerError as exc:
        st.error(app_words(str(exc)))  # a message written for the command line, in the page's words
    except Exception as exc:  # noqa: BLE001 - the one boundary that turns any failure into a message
        if os.environ.get("PLANNER_DEBUG") == "1":
            raise
        st.error(f"internal error: {type(exc).__name__}: {str(exc)[:300]}. This is a bug in planner: please report "
                 "it with the inputs that caused it (set PLANNER_DEBUG=1 to see the traceback).")
    return None


def upload_text(label: str, types: list[str], key: str, help: str | None = None) -> str | None:
    """The UTF-8 text of an uploaded file, or None (nothing uploaded, or an error box shown)."""
    file = st.file_uploader(label, type=types, key=key, help=help, max_upload_size=UPLOAD_MIB)
    if file is None:
        return None
    data = file.getvalue()
    if len(data) > MAX_UPLOAD_BYTES:
        st.error(f"{file.name[:80]} is {len(data):,} bytes; the limit is {MAX_UPLOAD_BYTES:,}")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        st.error(f"{file.name[:80]} is not UTF-8 text")
        return None


def ms(seconds):
    """Seconds as milliseconds for a table (NaN stays NaN)."""
    return seconds * 1e3


def fmt_s(seconds) -> str:
    """Seconds for a metric: '12.3 ms' under a second, '1.23 s' above; '-' when unknown."""
    if seconds is None or seconds != seconds:
        return "-"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def roofline_chart(points, device, dtype: str, y_title: str, tooltip: list):
    """An altair chart of `points` (columns "intensity (FLOP/byte)" and "achieved (FLOP/s)", plus
    "bound" and the `tooltip` fields) on log-log axes under the device's ceilings: min(peak,
    intensity x memory bandwidth) for the peak the dtype's GEMMs run at (a recipe's, as
    planner/plot.py draws it) and the vector peak. A peak with no sourced figure is not drawn."""
    import altair as alt
    import pandas as pd

    from planner.errors import PlannerError
    from planner.predict.roofline import vector_peak
    from planner.workload.quant import precision
    bw = device.mem_bytes_per_s
    lo = min(points["intensity (FLOP/byte)"].min(), 1.0) / 2
    hi = max(points["intensity (FLOP/byte)"].max(), 1.0) * 2
    xs = [lo * (hi / lo) ** (k / 60) for k in range(61)]  # 61 points evenly spaced in log
    gemm = precision(dtype).gemm
    roofs = []
    for label, peak in ((f"{gemm} peak", lambda: device.peak(gemm)), ("vector peak", lambda: vector_peak(device, dtype))):
        try:
            top = peak()
        except PlannerError:
            continue
        roofs += [{"ceiling": f"{label} ({top / 1e12:,.0f} TFLOP/s), {bw / 1e9:,.0f} GB/s",
                   "intensity (FLOP/byte)": x, "achieved (FLOP/s)": min(top, x * bw)} for x in xs]
    x = alt.X("intensity (FLOP/byte):Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP/byte)")
    # SI prefixes on the FLOP/s axis (100T, 1P), not 1e+14 next to 100,000,000,000
    y = alt.Y("achieved (FLOP/s):Q", scale=alt.Scale(type="log"), title=y_title, axis=alt.Axis(format="~s"))
    chart = alt.Chart(points).mark_circle(size=60).encode(x=x, y=y, color=alt.Color("bound:N", title="bound"),
                                                          tooltip=tooltip)
    if roofs:
        chart = alt.Chart(pd.DataFrame(roofs)).mark_line(color="gray").encode(
            x=x, y=y, strokeDash=alt.StrokeDash("ceiling:N", title="ceiling")) + chart
    return chart


TIER_COLORS = {"measured": "#1a7f37", "published": "#0b6bcb", "transferred": "#6f42c1", "cross-library": "#9a6700",
               "datasheet": "#8a8f98"}
"""Each tier's colour in charts: none red (red marks an SLO or a limit on these pages), datasheet grey."""


def tier_scale():
    """The altair colour scale of the tiers (TIER_COLORS)."""
    import altair as alt
    return alt.Scale(domain=list(TIER_COLORS), range=list(TIER_COLORS.values()))


def band_text(fraction: float) -> str:
    """A band as the pages show it: "×1.61 either way" (planner.units.band: the factor a figure may be off by)."""
    return f"×{1 + fraction:.2f} either way"


def unit_formats(frame) -> dict:
    """Streamlit column formats of a table by the unit each header names ("time (ms)", "share (%)", "(x)",
    "|ln ...|"), whole numbers with thousands separators; the values stay exact for a download. A header
    with no unit it knows keeps Streamlit's own format."""
    import pandas as pd

    def fmt(header: str, column) -> str | None:
        if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
            return None
        if pd.api.types.is_integer_dtype(column):
            return "localized"  # 10,447
        rules = (("(ms)", "%.3f"), ("(s)", "%.3f"), ("(%)", "%.1f"), ("(x)", "%.2f"), ("ratio", "%.2f"),
                 ("|ln", "%.3f"), ("ln(", "%.3f"), ("(TFLOP/s)", "%.1f"), ("(GFLOP)", "%.2f"), ("(GB)", "%.3f"),
                 ("(GB/s)", "localized"), ("(kWh)", "localized"))
        return next((f for key, f in rules if key in header), None)
    return {h: st.column_config.NumberColumn(format=f) for h in frame.columns if (f := fmt(h, frame[h])) is not None}


WIDE_TABLE_COLUMNS = 6
"""Columns from which a table is wider than the page at 1,280 px (its last columns off to the right)."""


def table(frame, **kwargs) -> None:
    """st.dataframe of `frame` without its index, its numbers formatted by unit (unit_formats); a table of more
    than WIDE_TABLE_COLUMNS columns says that it scrolls sideways."""
    st.dataframe(frame, hide_index=True, column_config=unit_formats(frame), **kwargs)
    if len(frame.columns) > WIDE_TABLE_COLUMNS:
        st.caption(f"{len(frame.columns)} columns: scroll the table sideways (or enlarge it, top right) for all.")
