"""The Serving page's charts and tables: the latency curves against load, the latency CDFs, the TTFT and TPOT
charts side by side, and how their numbers are shown (milliseconds, column formats, whole units, the rows past
saturation). Pure drawing: every number comes from planner.serve's results, passed in."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import streamlit as st

from planner.plan.scenario import NO_TARGET_S

STATS = ("p50", "p90", "p99")
X_RATE, X_THROUGHPUT = "offered rate (requests/s)", "throughput (output tokens/s)"
SATURATED = "saturated (queue grows without bound)"
"""What a latency past the saturation rate reads in a table: there a finite run's number only measures the run."""
CLIP_SLO, CLIP_BELOW = 3.0, 2.0
"""A latency axis ends at CLIP_SLO x the SLO or CLIP_BELOW x the largest value below saturation, whichever is
higher, when a value past saturation lies above that (those points are drawn at the top edge)."""


def ms(seconds) -> float | None:
    return None if seconds is None else seconds * 1e3


def formats(frame: pd.DataFrame) -> dict:
    """Streamlit column formats by each header's unit (the values stay exact for a download)."""
    def fmt(header: str) -> str | None:
        if header.endswith(("(ms)", "(%)")):
            return "%.1f"
        if header.endswith("($/h)"):
            return "dollar"  # $1,234.57
        if "requests/s" in header:
            return "%.2f"
        if "tokens/s" in header or "(W per GPU)" in header:
            return "localized"  # thousands separators: 4,768
        if header.startswith("$") or "MJ" in header:
            return "%.3f"
        return None
    return {h: st.column_config.NumberColumn(format=f) for h in frame.columns if (f := fmt(h)) is not None
            and pd.api.types.is_numeric_dtype(frame[h])}


def whole(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with its tokens/s and watt columns in whole units, as the page shows them ("localized":
    thousands separators, and no third decimal of a token)."""
    return frame.round({c: 0 for c in frame.columns if "tokens/s" in c or "(W per GPU)" in c})


def scroll_hint(frame: pd.DataFrame) -> None:
    """Say that a table wider than the page at 1,280 px scrolls (its last columns are off to the right)."""
    if len(frame.columns) > 6:
        st.caption(f"{len(frame.columns)} columns: scroll the table sideways (or enlarge it, top right) for all.")


def curve_frame(curve: list[dict]) -> pd.DataFrame:
    """The curve's table, its headers with their units (latencies in ms), and "saturated": whether the rate is
    past the saturation rate (the run's "overloaded")."""
    rows = []
    for r in curve:
        row = {X_RATE: r["rate_rps"], X_THROUGHPUT: r["output_tokens_per_s"],
               "throughput (requests/s)": r["requests_per_s"]}
        for name in ("ttft", "tpot"):
            for s in STATS:
                row[f"{name.upper()} {s} (ms)"] = ms(r[f"{name}_{s}_s"])
        row.update({"goodput (requests/s)": r["goodput_rps"],
                    "requests within SLOs (%)": None if r["slo_met_fraction"] is None else 100 * r["slo_met_fraction"],
                    "KV cache peak (%)": 100 * r["kv_peak_fraction"],
                    "$ per 1M output tokens": r["usd_per_million_output_tokens"],
                    "energy (MJ per 1M output tokens)": r["j_per_output_token"],  # J/token = MJ per 1M tokens
                    "saturated": bool(r.get("overloaded"))})
        rows.append(row)
    return pd.DataFrame(rows)


def _ms_text(value) -> str:
    """Milliseconds as the tables show them: one decimal, thousands separators; '' when unknown."""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:,.1f}"


def shown_table(frame: pd.DataFrame, saturated) -> pd.DataFrame:
    """`frame` as a table shows it: its TTFT columns as text, SATURATED in the rows past saturation (where a
    finite run's queue, not the deployment, sets the number), and without the "saturated" column."""
    out = frame.drop(columns=["saturated"], errors="ignore")
    for column in [c for c in out.columns if c.startswith("TTFT ")]:
        out[column] = [SATURATED if past else _ms_text(v) for v, past in zip(out[column], saturated, strict=True)]
    return out


def axis_top(below: list[float], values: list[float], slo_ms: float) -> float | None:
    """The top of a latency axis, in ms: None (no clip) when no value is above max(CLIP_SLO x the SLO, CLIP_BELOW
    x the largest value `below` saturation); else that bound."""
    top = max(CLIP_SLO * slo_ms, CLIP_BELOW * max(below, default=0.0))
    if top <= 0 or not values or max(values) <= top or min(values) >= top:
        return None
    return top


def saturated_caption(rates: list[float], saturation_rps: float) -> None:
    """Say that the points past saturation are clipped, and why."""
    if rates:
        st.caption(f"Triangles: rates past saturation ({saturation_rps:,.2f} requests/s), where the queue grows "
                   "without bound: TTFT there grows with the number of requests simulated and has no steady value, "
                   f"so the table reads \"{SATURATED}\" and the TTFT axis is clipped to {CLIP_SLO:g} x the SLO or "
                   f"{CLIP_BELOW:g} x the largest value below saturation (points above are drawn at its top edge).")


def latency_chart(frame: pd.DataFrame, name: str, x: str, slo_ms: float, marks: list[tuple[float, str, str]]):
    """`name` (TTFT or TPOT) at each statistic against `x` (log scale: past saturation the queue makes
    TTFT grow by orders of magnitude; the axis clipped by axis_top), the SLO as a horizontal rule, `marks`
    (x, label, colour) vertical, the points past saturation as triangles."""
    long = frame.melt(id_vars=[x, "saturated"], value_vars=[f"{name} {s} (ms)" for s in STATS],
                      var_name="statistic", value_name="ms").rename(columns={x: "x"}).dropna()
    long["statistic"] = long["statistic"].str.removeprefix(f"{name} ").str.removesuffix(" (ms)")
    long = long[long["ms"] > 0]
    if long.empty:
        return None
    top = axis_top(list(long.loc[~long["saturated"], "ms"]), list(long["ms"]), slo_ms)
    scale = alt.Scale(type="log") if top is None else alt.Scale(type="log", domain=[float(long["ms"].min()), top],
                                                                   clamp=True)
    layers = [alt.Chart(long).mark_line(point=True, clip=True).encode(
        x=alt.X("x:Q", title=x), y=alt.Y("ms:Q", scale=scale, title=f"{name} (ms)"),
        color=alt.Color("statistic:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=["statistic:N", alt.Tooltip("x:Q", title=x), alt.Tooltip("ms:Q", title=f"{name} (ms)", format=",.1f")])]
    past = long[long["saturated"]].assign(label=SATURATED)
    if not past.empty:
        layers.append(alt.Chart(past).mark_point(shape="triangle-up", filled=True, size=90, color="#000000").encode(
            x="x:Q", y=alt.Y("ms:Q", scale=scale),
            tooltip=["label:N", "statistic:N", alt.Tooltip("ms:Q", title=f"{name} of this run (ms)", format=",.0f")]))
    if slo_ms > 0:
        layers.append(alt.Chart(pd.DataFrame({"ms": [slo_ms], "label": [f"SLO {name} {slo_ms:g} ms"]})).mark_rule(
            color="#d62728", strokeDash=[6, 3], size=2).encode(y="ms:Q", tooltip="label:N"))
    for value, label, colour in marks:
        layers.append(alt.Chart(pd.DataFrame({"x": [value], "label": [label]})).mark_rule(
            color=colour, size=2).encode(x="x:Q", tooltip="label:N"))
    return alt.layer(*layers).properties(height=260)


def cdf_chart(runs: list[tuple[str, dict]], name: str, slo_ms: float, stat: str):
    """The CDF of `name` (ttft or tpot) of each (label, run summary); the SLO as a vertical rule and the
    SLO's percentile as a horizontal one: the SLO is met where the curve crosses that line left of the rule. A run
    past saturation does not stretch the axis (axis_top over the longest of the others)."""
    rows = [{"ms": v * 1e3, "share of requests": i / (len(cdf) - 1), "run": label}
            for label, run in runs for cdf in [run[f"{name}_cdf_s"]] for i, v in enumerate(cdf) if len(cdf) > 1]
    if not rows:
        return None
    title = f"{name.upper()} (ms)"
    below = [run[f"{name}_cdf_s"][-1] * 1e3 for _, run in runs if not run.get("overloaded") and run[f"{name}_cdf_s"]]
    top = axis_top(below, [r["ms"] for r in rows], slo_ms) if len(below) < len(runs) else None
    layers = [alt.Chart(pd.DataFrame(rows)).mark_line(clip=True).encode(
        x=alt.X("ms:Q", title=title, scale=alt.Scale() if top is None else alt.Scale(domain=[0, top], clamp=True)),
        y=alt.Y("share of requests:Q", scale=alt.Scale(domain=[0, 1]), title="share of requests"),
        color=alt.Color("run:N", title=None, legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=400)),
        tooltip=["run:N", alt.Tooltip("ms:Q", title=title, format=".1f"),
                 alt.Tooltip("share of requests:Q", format=".1%")])]
    if slo_ms > 0:
        layers.append(alt.Chart(pd.DataFrame({"ms": [slo_ms], "label": [f"SLO {slo_ms:g} ms"]})).mark_rule(
            color="#d62728", strokeDash=[6, 3], size=2).encode(x="ms:Q", tooltip="label:N"))
    if stat in STATS:
        share = int(stat[1:]) / 100
        layers.append(alt.Chart(pd.DataFrame({"share": [share], "label": [f"{stat}: {share:.0%} of requests"]}))
                      .mark_rule(color="#7f7f7f", strokeDash=[2, 2])
                      .encode(y=alt.Y("share:Q", title="share of requests"), tooltip="label:N"))
    return alt.layer(*layers).properties(height=240)


def side_by_side(inp: dict, chart_of, empty: str) -> None:
    """The TTFT and TPOT charts side by side: chart_of(name, SLO in ms) gives each, or None, shown as
    `empty` with the name."""
    cols = st.columns(2)
    for col, name, slo in ((cols[0], "TTFT", inp["slo_ttft_s"]), (cols[1], "TPOT", inp["slo_tpot_s"])):
        chart = chart_of(name, 0.0 if slo >= NO_TARGET_S else slo * 1e3)  # 0: no SLO line (no target)
        if chart is None:
            col.info(empty.format(name))
        else:
            col.altair_chart(chart, width="stretch")
