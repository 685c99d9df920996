"""The Serving page's side-by-side comparison of deployments: the deployments table (device, GPUs, tp, engine,
dtype), each deployment swept under the page's model, lengths and SLOs, their latency curves on one chart and
their highest rate within the SLOs, saturation and cost in one table."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from planner.app.common import device_ids, hardware_key
from planner.app.plan import _blank
from planner.app.serving import (
    DTYPES,
    NO_ENGINE,
    NO_RECIPE,
    USD_NOTE,
    cell_number,
    fit_message,
    memory_fit,
    rate_sweep,
    serving_engines,
    sweep_args,
)
from planner.app.serving_charts import SATURATED, X_RATE, axis_top, formats, ms, scroll_hint, side_by_side, whole
from planner.errors import ConfigError, PlannerError

MAX_COMPARE = 4
"""Most deployments compared side by side (each is a sweep: about ten simulations, a few seconds)."""
DEPLOY_LABELS = {"device": "device", "gpus": "GPUs", "tp": "tp", "engine": "engine", "dtype": "dtype"}
"""The columns of the deployments table and their headers."""


def _first_deployments(inp: dict) -> pd.DataFrame:
    """The deployments table's first rows: the page's deployment, and the same on the next larger device of the
    catalog's (an H200 beside an H100) or else the same at fp8."""
    ss = st.session_state
    dtype = ss["serve_dtype"] if ss["serve_recipe"] == NO_RECIPE else "bf16"
    here = {"device": inp["device"], "gpus": inp["gpus"], "tp": inp["tp"], "engine": ss["serve_engine"],
            "dtype": dtype}
    other = {**here, "device": "h200-sxm"} if inp["device"] != "h200-sxm" and "h200-sxm" in device_ids() else \
        {**here, "dtype": "fp8" if dtype != "fp8" else "bf16"}
    return pd.DataFrame([here, other], columns=list(DEPLOY_LABELS))


def deployments_of(frame: pd.DataFrame) -> list[dict]:
    """The deployments of the table (columns DEPLOY_LABELS): {"device", "gpus", "tp", "engine" (None: the
    device's default), "dtype"} each, rows left wholly empty skipped. ConfigError naming the row (from 1) for an
    empty or bad cell, or for more than MAX_COMPARE rows."""
    devices, engines = device_ids(), [NO_ENGINE, *serving_engines()]
    out = []
    for i, row in enumerate(frame.to_dict("records"), 1):
        cells = {k: row.get(k) for k in DEPLOY_LABELS}
        if all(_blank(v) for v in cells.values()):
            continue
        where = f"Deployments, row {i}"
        empty = [DEPLOY_LABELS[k] for k, v in cells.items() if _blank(v)]
        if empty:
            raise ConfigError(f"{where}: {' and '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty")
        for key, valid in (("device", devices), ("engine", engines), ("dtype", DTYPES)):
            if str(cells[key]) not in valid:
                raise ConfigError(f"{where}: {DEPLOY_LABELS[key]} '{str(cells[key])[:40]}' is not one of the page's "
                                  "choices")
        numbers = {}
        for key, high in (("gpus", 4096), ("tp", 64)):
            value = cell_number(cells[key])
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ConfigError(f"{where}: {DEPLOY_LABELS[key]} must be a whole number in [1, {high:,}], got "
                                  f"{str(cells[key])[:40]}")
            numbers[key] = value
        out.append({"device": str(cells["device"]), **numbers,
                    "engine": None if cells["engine"] == NO_ENGINE else str(cells["engine"]),
                    "dtype": str(cells["dtype"])})
    if len(out) > MAX_COMPARE:
        raise ConfigError(f"Deployments: {len(out)} rows; compare at most {MAX_COMPARE} (each is a sweep of its own)")
    if not out:
        raise ConfigError("Deployments: give at least one row of device, GPUs, tp, engine and dtype")
    return out


def _label(d: dict) -> str:
    return f"{d['gpus']} x {d['device']}, tp {d['tp']}, {d['engine'] or 'default engine'}, {d['dtype']}"


def _deployments_input(inp: dict) -> list[dict] | None:
    """The deployments table: its rows checked (deployments_of), or None with the message shown."""
    ss = st.session_state
    if "serve_cmp" not in ss or "serve_cmp_base" not in ss:
        ss["serve_cmp_base"] = ss.get("serve_cmp_kept", _first_deployments(inp))
    st.markdown(f"**Deployments** to compare (2 to {MAX_COMPARE}), under this page's model, lengths, SLOs, simulated "
                "requests and pricing; add or delete rows in the table")
    frame = st.data_editor(
        ss["serve_cmp_base"], num_rows="dynamic", hide_index=True, key="serve_cmp",
        column_config={
            "device": st.column_config.SelectboxColumn(DEPLOY_LABELS["device"], options=device_ids(), required=True,
                                                       help="Catalog devices and your own"),
            "gpus": st.column_config.NumberColumn(DEPLOY_LABELS["gpus"], min_value=1, max_value=4096, step=1,
                                                  help="Devices in the deployment"),
            "tp": st.column_config.NumberColumn(DEPLOY_LABELS["tp"], min_value=1, max_value=64, step=1,
                                                help="Tensor-parallel size: devices one model copy is split over"),
            "engine": st.column_config.SelectboxColumn(DEPLOY_LABELS["engine"],
                                                       options=[NO_ENGINE, *serving_engines()],
                                                       help="Serving engine whose scheduler is simulated"),
            "dtype": st.column_config.SelectboxColumn(DEPLOY_LABELS["dtype"], options=DTYPES,
                                                      help="Every float at this dtype")})
    ss["serve_cmp_kept"] = frame
    try:
        return deployments_of(frame)
    except ConfigError as exc:
        st.error(str(exc))
        return None


def _compare_one(hw: str, inp: dict, d: dict) -> dict:
    """One deployment of the comparison: {"label", "swept" (rate_sweep's, or None), "note" (why not, or '')}."""
    run = {**inp, **d}
    deployment = (inp["model"], d["device"], d["gpus"], d["tp"], d["engine"], d["dtype"])
    try:
        fit = memory_fit(hw, *deployment, inp["input_len"], inp["output_len"])
        if not fit["fits"]:
            return {"label": _label(d), "swept": None, "note": fit_message(run, fit)}
        swept = rate_sweep(hw, *sweep_args(inp, deployment), inp["points"])
    except PlannerError as exc:
        return {"label": _label(d), "swept": None, "note": str(exc)}
    note = "" if swept["at_max"] is not None else "no rate meets the SLOs"
    return {"label": _label(d), "swept": swept, "note": note}


def _compare_chart(done: list[dict], name: str, slo_ms: float):
    """p50 and p90 of `name` (TTFT or TPOT) against the offered rate, a colour per deployment, a dash per
    statistic; the SLO as a horizontal rule; points past each one's saturation as triangles, the axis clipped
    (axis_top)."""
    rows = [{"deployment": c["label"], "statistic": s, "x": r["rate_rps"], "ms": ms(r[f"{name.lower()}_{s}_s"]),
             "saturated": bool(r.get("overloaded"))}
            for c in done for r in c["swept"]["curve"] for s in ("p50", "p90")]
    long = pd.DataFrame(rows).dropna()
    long = long[long["ms"] > 0] if not long.empty else long
    if long.empty:
        return None
    top = axis_top(list(long.loc[~long["saturated"], "ms"]), list(long["ms"]), slo_ms)
    scale = alt.Scale(type="log") if top is None else alt.Scale(type="log", domain=[float(long["ms"].min()), top],
                                                                   clamp=True)
    legend = alt.Legend(orient="bottom", direction="vertical", labelLimit=400)
    layers = [alt.Chart(long).mark_line(point=True, clip=True).encode(
        x=alt.X("x:Q", title=X_RATE), y=alt.Y("ms:Q", scale=scale, title=f"{name} (ms)"),
        color=alt.Color("deployment:N", title=None, legend=legend),
        strokeDash=alt.StrokeDash("statistic:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=["deployment:N", "statistic:N", alt.Tooltip("x:Q", title=X_RATE, format=",.2f"),
                 alt.Tooltip("ms:Q", title=f"{name} (ms)", format=",.1f")])]
    past = long[long["saturated"]].assign(label=SATURATED)
    if not past.empty:
        layers.append(alt.Chart(past).mark_point(shape="triangle-up", filled=True, size=90).encode(
            x="x:Q", y=alt.Y("ms:Q", scale=scale), color=alt.Color("deployment:N", legend=None),
            tooltip=["deployment:N", "label:N", alt.Tooltip("ms:Q", title=f"{name} of this run (ms)",
                                                            format=",.0f")]))
    if slo_ms > 0:
        layers.append(alt.Chart(pd.DataFrame({"ms": [slo_ms], "label": [f"SLO {name} {slo_ms:g} ms"]})).mark_rule(
            color="#d62728", strokeDash=[6, 3], size=2).encode(y="ms:Q", tooltip="label:N"))
    return alt.layer(*layers).properties(height=300)


def compare_frame(results: list[dict]) -> pd.DataFrame:
    """The comparison's table: per deployment its highest rate within the SLOs, saturation, throughput and $ per
    1M output tokens at that rate, $/h, tier, and a note (why a figure is missing)."""
    rows = []
    for c in results:
        swept = c["swept"] or {}
        at = swept.get("at_max")
        first = swept["curve"][0] if swept else {}
        note = c["note"] or ("" if not at or at["usd_per_million_output_tokens"] is not None else "not priced")
        rows.append({"deployment": c["label"],
                     "max rate within SLOs (requests/s)": swept.get("max_rate_rps") if at else None,
                     "saturation (requests/s)": swept.get("saturation_rps"),
                     "at max rate (output tokens/s)": at["output_tokens_per_s"] if at else None,
                     "$ per 1M output tokens at max rate": at["usd_per_million_output_tokens"] if at else None,
                     "deployment ($/h)": first.get("usd_per_h"), "tier": first.get("tier", ""), "note": note})
    frame = pd.DataFrame(rows)
    return frame.astype({c: float for c in frame.columns if c not in ("deployment", "tier", "note")})  # None: NaN


def compare_section(inp: dict) -> list[dict] | None:
    """The deployments side by side (when asked for): their curves on one chart and their table. Returns the
    deployments compared (for the page's address), or None."""
    st.subheader("Compare deployments")
    if not st.toggle("Compare deployments side by side", key="serve_compare",
                     help=f"Up to {MAX_COMPARE} deployments (device, GPUs, tp, engine, dtype) under the same model, "
                          "lengths and SLOs: their latency–throughput curves on one chart"):
        return None
    deployments = _deployments_input(inp)
    if deployments is None:
        return None
    if len(deployments) < 2:
        st.info("Add a second row to compare two deployments.")
    hw = hardware_key()
    with st.spinner(f"Simulating {len(deployments)} deployment{'s' * (len(deployments) != 1)}..."):
        results = [_compare_one(hw, inp, d) for d in deployments]
    done = [c for c in results if c["swept"] is not None]
    if done:
        side_by_side(inp, lambda name, slo_ms: _compare_chart(done, name, slo_ms), "No {} to draw.")
        st.caption("Colour: the deployment; solid: p50, dashed: p90 of the simulated requests at each offered rate "
                   "(log scale); red: the SLO; triangles: rates past that deployment's saturation, where the queue "
                   "grows without bound (the TTFT axis is clipped above them).")
    frame = compare_frame(results)
    st.dataframe(whole(frame), hide_index=True, column_config=formats(frame))
    scroll_hint(frame)
    st.caption("Max rate within SLOs: the highest Poisson rate whose run meets the SLOs (bisection up to "
               "saturation); $ per 1M output tokens at that rate, on the cheapest catalog instance holding each "
               "deployment at the page's pricing.", help=USD_NOTE)
    return deployments
