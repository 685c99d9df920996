"""Serving page: one model on one deployment under a request rate, simulated with the engine's
continuous batching (planner.serve): the latency–throughput curve, the highest rate that meets the
SLOs, TTFT and TPOT CDFs at a chosen rate, and $ and J per 1M output tokens.

Every number is a field of planner.serve's results (ServeResult, Capacity); the page only converts
seconds to milliseconds, applies the prediction's own band (planner.units.band) and draws."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from planner.app.common import context, dated, device_ids, fmt_s, hardware_key, purpose, shown
from planner.serve.steady import DEFAULT_REQUESTS

DTYPES = ["bf16", "fp16", "fp8", "int8", "fp4", "fp32"]
NO_RECIPE = "(none)"
NO_ENGINE = "(default for the device)"
STATS = ("p50", "p90", "p99")
MAX_OUTPUT_TOKENS = 16384
"""Longest output simulated in the page (each decode step is an event: cost grows with the length)."""
X_RATE, X_THROUGHPUT = "offered rate (requests/s)", "throughput (output tokens/s)"
DEFAULTS = {"serve_model": "llama-3.1-8b", "serve_device": "h100-sxm", "serve_gpus": 1, "serve_tp": 1,
            "serve_engine": NO_ENGINE, "serve_dtype": "bf16", "serve_recipe": NO_RECIPE, "serve_input_len": 1024,
            "serve_output_len": 256, "serve_slo_ttft_ms": 2000.0, "serve_slo_tpot_ms": 100.0, "serve_slo_stat": "p90",
            "serve_rate_rps": 5.0, "serve_requests": DEFAULT_REQUESTS, "serve_points": 8, "serve_pricing": "on_demand",
            "serve_x": X_RATE}
"""Every input's first value, set in session_state before the widgets are drawn (never as a widget
default), so that the Start page's preset may set any of them without a conflict. 1,000 requests, the
library's default (planner.serve.steady.DEFAULT_REQUESTS): with the seed and percentiles of
planner.serve.sweep.standard_load, each rate is run as a plan's capacity and its check run it
(planner.serve.sweep.run_at_rate); the saturation run lengthens itself to a steady state
(planner.serve.sweep.STEADY_WAVES)."""


# ------------------------------------------------------------------ cached calls into the library

def _request(model: str, device: str, gpus: int, tp: int, engine: str | None, dtype: str, input_len: int,
             output_len: int, pricing: str):
    from planner.predict import Request
    return Request(model, device, gpus=gpus, tp=tp, engine=engine, dtype=dtype, input_len=input_len,
                   output_len=output_len, pricing=pricing)


def _summary(run) -> dict:
    """A ServeResult as plain data: as_dict() without the KV timeline, plus the TTFT and TPOT CDFs (s)."""
    out = run.as_dict()
    out.pop("timeline")
    out["ttft_cdf_s"], out["tpot_cdf_s"] = list(run.metrics.ttft_quantiles_s), list(run.metrics.tpot_quantiles_s)
    return out


@st.cache_data(show_spinner=False)
def decoder_ids() -> list[str]:
    """Zoo ids of generative (decoder) models: the only ones the serving simulator runs."""
    import planner_models
    from planner.workload.zoo import resolve
    return [i for i in planner_models.zoo_ids() if resolve(i).family == "decoder"]


def serving_engines() -> list[str]:
    """Engines that batch decoder requests continuously (a scheduler other than static batches)."""
    from planner.workload.engines import engines
    return sorted(e.name for e in engines().values() if "inference" in e.modes and "decoder" in e.families
                  and e.scheduler is not None and e.scheduler.policy != "static")


@st.cache_data(show_spinner="Checking memory...", max_entries=256)
def memory_fit(hw: str, model: str, device: str, gpus: int, tp: int, engine: str | None, dtype: str,
               input_len: int, output_len: int) -> dict:
    """planner.predict's memory of one request on the deployment (batch 1): Prediction.as_dict()["memory"]
    (bytes per device: total_bytes, capacity_bytes, shortfall_bytes) plus "fits"."""
    from planner.predict import predict
    p = predict(_request(model, device, gpus, tp, engine, dtype, input_len, output_len, "on_demand"), context())
    return {"fits": bool(p.fits), **p.as_dict()["memory"]}


@st.cache_data(show_spinner="Simulating the latency–throughput curve...", max_entries=128)
def rate_sweep(hw: str, model: str, device: str, gpus: int, tp: int, engine: str | None, dtype: str, input_len: int,
               output_len: int, pricing: str, requests: int, slo_ttft_s: float, slo_tpot_s: float, slo_stat: str,
               points: int) -> dict:
    """planner.serve.sweep.sweep: {"curve": [_summary of each run, with "rate_rps"], "max_rate_rps",
    "saturation_rps", "at_max": _summary of the run at the highest rate within the SLOs, or None}."""
    from planner.serve.api import Scheduling, Slo
    from planner.serve.sweep import standard_load, sweep
    req = _request(model, device, gpus, tp, engine, dtype, input_len, output_len, pricing)
    curve, capacity = sweep(req, standard_load(requests), Scheduling(), Slo(slo_ttft_s, slo_tpot_s, slo_stat),
                            points, ctx=context())
    return {"curve": [{"rate_rps": rate, **_summary(run)} for rate, run in curve],
            "max_rate_rps": float(capacity.rate_rps), "saturation_rps": float(capacity.saturation_rps),
            "at_max": _summary(capacity.at_rate) if capacity.at_rate is not None else None}


@st.cache_data(show_spinner="Simulating at the chosen rate...", max_entries=256)
def rate_run(hw: str, model: str, device: str, gpus: int, tp: int, engine: str | None, dtype: str, input_len: int,
             output_len: int, pricing: str, requests: int, slo_ttft_s: float, slo_tpot_s: float, slo_stat: str,
             rate_rps: float) -> dict:
    """planner.serve.sweep.run_at_rate (the run a plan's capacity and its check make) at one Poisson rate:
    its _summary."""
    from planner.serve.api import Scheduling, Slo
    from planner.serve.sweep import run_at_rate, standard_load
    req = _request(model, device, gpus, tp, engine, dtype, input_len, output_len, pricing)
    return _summary(run_at_rate(req, rate_rps, standard_load(requests), Scheduling(),
                                Slo(slo_ttft_s, slo_tpot_s, slo_stat), context()))


# ------------------------------------------------------------------ inputs

def _inputs() -> dict | None:
    """The page's inputs (SI units: seconds), or None when they do not make a request (message shown)."""
    from planner.hardware.catalog import PRICINGS
    from planner.workload.quant import compose, recipe_names
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(key, value)
    models, devices = decoder_ids(), device_ids()
    if st.session_state["serve_model"] not in models:  # a preset or an old session naming a model no longer there
        st.session_state["serve_model"] = DEFAULTS["serve_model"]
    if st.session_state["serve_device"] not in devices:  # a device of the Your hardware page since removed
        st.session_state["serve_device"] = DEFAULTS["serve_device"]
    model = st.selectbox("Model", models, key="serve_model",
                         help="A generative model of planner's zoo (the simulator serves decoder LMs only)")
    device = st.selectbox("Device", devices, key="serve_device",
                          help="Catalog devices and your own (added on the Your hardware page)")
    c = st.columns(2)
    gpus = int(c[0].number_input("GPUs", 1, 4096, key="serve_gpus",
                                 help="Devices in the deployment: GPUs / TP model copies share the requests "
                                      "round-robin"))
    tp = int(c[1].number_input("Tensor-parallel size", 1, 64, key="serve_tp",
                               help="Devices one model copy is split over (within one node); must divide GPUs"))
    names = [NO_ENGINE, *serving_engines()]
    engine = st.selectbox("Engine", names, key="serve_engine",
                          help="Serving engine whose scheduler is simulated (step budget, sequence limit, KV "
                               "blocks, chunked prefill: hardware_specs/engines); default: vLLM where it runs "
                               "(GPUs, TPUs, Gaudi, Trainium/Inferentia), else eager")
    c = st.columns(2)
    base = c[0].selectbox("Dtype", DTYPES, key="serve_dtype", help="Every float at this dtype (weights, "
                                                                   "activations, KV cache)")
    recipe = c[1].selectbox("Quantization recipe", [NO_RECIPE, *recipe_names()], key="serve_recipe",
                            help="Instead of the dtype: a recipe from hardware_specs/quant/recipes.json that sets "
                                 "weights, GEMM inputs and KV cache together, with their scales")
    c = st.columns(2)
    input_len = int(c[0].number_input("Input tokens", 1, 131072, key="serve_input_len",
                                      help="Prompt length of every request"))
    output_len = int(c[1].number_input("Output tokens", 1, MAX_OUTPUT_TOKENS, key="serve_output_len",
                                       help="Tokens generated per request (up to 16k here: every decode step is "
                                            "simulated, so 16k tokens x 1,000 requests takes about 15 s; "
                                            "`planner serve` takes longer outputs)"))
    c = st.columns(2)
    ttft_ms = c[0].number_input("SLO: TTFT (ms)", 0.0, 1e6, key="serve_slo_ttft_ms", step=50.0,
                                help="Time to first token the chosen statistic of the requests must stay within")
    tpot_ms = c[1].number_input("SLO: TPOT (ms)", 0.0, 1e6, key="serve_slo_tpot_ms", step=5.0,
                                help="Time per output token after the first, which the statistic must stay within")
    stat = st.selectbox("SLO statistic", ["p50", "p90", "p99", "mean"], key="serve_slo_stat",
                        help="A run meets the SLOs when this statistic of TTFT and of TPOT is within them and no "
                             "request is rejected (planner.serve.api.Slo)")
    rate = st.number_input("Request rate to inspect (requests/s)", 0.0, 1e6, key="serve_rate_rps", step=0.5,
                           format="%.2f", help="Poisson arrivals at this mean rate: the CDFs and the cost at this "
                                               "rate")
    c = st.columns(2)
    requests = int(c[0].number_input("Simulated requests", 100, 5000, key="serve_requests", step=100,
                                     help="Requests per simulated run: more give steadier tails, and take longer"))
    points = int(c[1].number_input("Curve points", 2, 20, key="serve_points",
                                   help="Rates on the curve, from 5% to 110% of the saturation rate"))
    pricing = st.selectbox("Pricing", list(PRICINGS), key="serve_pricing",
                           help="Price kind of the cheapest catalog instance holding the deployment")
    dtype = shown(compose, None if recipe != NO_RECIPE else base, recipe if recipe != NO_RECIPE else None)
    if dtype is None:
        return None
    return {"model": model, "device": device, "gpus": gpus, "tp": tp,
            "engine": None if engine == NO_ENGINE else engine, "dtype": dtype, "input_len": input_len,
            "output_len": output_len, "pricing": pricing, "requests": requests, "slo_ttft_s": ttft_ms / 1e3,
            "slo_tpot_s": tpot_ms / 1e3, "slo_stat": stat, "rate_rps": float(rate), "points": points}


# ------------------------------------------------------------------ what is shown

def _ms(seconds) -> float | None:
    return None if seconds is None else seconds * 1e3


def _num(x: float) -> str:
    """A number for the page: whole from 100 up, else three significant digits."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _band_text(value, fraction: float, unit: str = "", inverse: bool = False, prefix: str = "") -> str:
    """'band low–high unit' of `value` (a time; `inverse`: a rate) under the prediction's band
    (planner.units.band); '' when there is no value."""
    from planner.units import band
    if value is None:
        return ""
    lo, hi = band(value, fraction, inverse)
    return f"band {prefix}{_num(lo)}–{prefix}{_num(hi)}{' ' + unit if unit else ''}"


def _formats(frame: pd.DataFrame) -> dict:
    """Streamlit column formats by each header's unit (the values stay exact for a download)."""
    def fmt(header: str) -> str | None:
        if header.endswith("(ms)") or header.endswith("(%)"):
            return "%.1f"
        if "requests/s" in header:
            return "%.2f"
        if "tokens/s" in header or "(W per GPU)" in header:
            return "localized"  # thousands separators: 4,768
        if header.startswith("$") or "MJ" in header:
            return "%.3f"
        return None
    return {h: st.column_config.NumberColumn(format=f) for h in frame.columns if (f := fmt(h)) is not None
            and pd.api.types.is_numeric_dtype(frame[h])}


def _whole(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with its tokens/s and watt columns in whole units, as the page shows them ("localized":
    thousands separators, and no third decimal of a token)."""
    return frame.round({c: 0 for c in frame.columns if "tokens/s" in c or "(W per GPU)" in c})


def _scroll_hint(frame: pd.DataFrame) -> None:
    """Say that a table wider than the page at 1,280 px scrolls (its last columns are off to the right)."""
    if len(frame.columns) > 6:
        st.caption(f"{len(frame.columns)} columns: scroll the table sideways (or enlarge it, top right) for all.")


def _curve_frame(curve: list[dict]) -> pd.DataFrame:
    """The curve's table, its headers with their units (latencies in ms)."""
    rows = []
    for r in curve:
        row = {X_RATE: r["rate_rps"], X_THROUGHPUT: r["output_tokens_per_s"],
               "throughput (requests/s)": r["requests_per_s"]}
        for name in ("ttft", "tpot"):
            for s in STATS:
                row[f"{name.upper()} {s} (ms)"] = _ms(r[f"{name}_{s}_s"])
        row.update({"goodput (requests/s)": r["goodput_rps"],
                    "requests within SLOs (%)": None if r["slo_met_fraction"] is None else 100 * r["slo_met_fraction"],
                    "KV cache peak (%)": 100 * r["kv_peak_fraction"],
                    "$ per 1M output tokens": r["usd_per_million_output_tokens"],
                    "energy (MJ per 1M output tokens)": r["j_per_output_token"]})  # J/token = MJ per 1M tokens
        rows.append(row)
    return pd.DataFrame(rows)


def _latency_chart(frame: pd.DataFrame, name: str, x: str, slo_ms: float, marks: list[tuple[float, str, str]]):
    """`name` (TTFT or TPOT) at each statistic against `x` (log scale: past saturation the queue makes
    TTFT grow by orders of magnitude), the SLO as a horizontal rule, `marks` (x, label, colour) vertical."""
    long = frame.melt(id_vars=[x], value_vars=[f"{name} {s} (ms)" for s in STATS], var_name="statistic",
                      value_name="ms").rename(columns={x: "x"}).dropna()
    long["statistic"] = long["statistic"].str.removeprefix(f"{name} ").str.removesuffix(" (ms)")
    long = long[long["ms"] > 0]
    if long.empty:
        return None
    layers = [alt.Chart(long).mark_line(point=True).encode(
        x=alt.X("x:Q", title=x), y=alt.Y("ms:Q", scale=alt.Scale(type="log"), title=f"{name} (ms)"),
        color=alt.Color("statistic:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=["statistic:N", alt.Tooltip("x:Q", title=x), alt.Tooltip("ms:Q", title=f"{name} (ms)")])]
    if slo_ms > 0:
        layers.append(alt.Chart(pd.DataFrame({"ms": [slo_ms], "label": [f"SLO {name} {slo_ms:g} ms"]})).mark_rule(
            color="#d62728", strokeDash=[6, 3], size=2).encode(y="ms:Q", tooltip="label:N"))
    for value, label, colour in marks:
        layers.append(alt.Chart(pd.DataFrame({"x": [value], "label": [label]})).mark_rule(
            color=colour, size=2).encode(x="x:Q", tooltip="label:N"))
    return alt.layer(*layers).properties(height=260)


def _cdf_chart(runs: list[tuple[str, dict]], name: str, slo_ms: float, stat: str):
    """The CDF of `name` (ttft or tpot) of each (label, run summary); the SLO as a vertical rule and the
    SLO's percentile as a horizontal one: the SLO is met where the curve crosses that line left of the rule."""
    rows = [{"ms": v * 1e3, "share of requests": i / (len(cdf) - 1), "run": label}
            for label, run in runs for cdf in [run[f"{name}_cdf_s"]] for i, v in enumerate(cdf) if len(cdf) > 1]
    if not rows:
        return None
    title = f"{name.upper()} (ms)"
    layers = [alt.Chart(pd.DataFrame(rows)).mark_line().encode(
        x=alt.X("ms:Q", title=title),
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


def _no_rate_meets(inp: dict, first: dict) -> None:
    """The message for SLOs that no simulated rate meets, with how far the lowest-rate run misses each."""
    stat = inp["slo_stat"]
    misses = []
    for name, limit in (("TTFT", inp["slo_ttft_s"]), ("TPOT", inp["slo_tpot_s"])):
        value = first[f"{name.lower()}_s"] if stat == "mean" else first[f"{name.lower()}_{stat}_s"]
        if value is not None and value > limit:
            misses.append(f"{stat} {name} is {fmt_s(value)} against {fmt_s(limit)} ({fmt_s(value - limit)} over)")
    if first["rejected"]:
        misses.append(f"{first['rejected']:,} requests are rejected (longer than a copy's whole KV cache)")
    st.error(f"No request rate meets the SLOs. At the lowest rate on the curve ({first['rate_rps']:.3g} requests/s, "
             f"5% of saturation) {'; '.join(misses) or 'the SLOs are missed'}. Loosen the SLOs, use a faster "
             "device, a larger tensor-parallel size or a smaller precision.")


def _cost_table(inp: dict, chosen: dict | None, at_max: dict | None, max_rate: float) -> None:
    """$ and J per 1M output tokens at the chosen rate and at the highest rate within the SLOs."""
    stat = inp["slo_stat"] if inp["slo_stat"] in STATS else "p90"
    rows = []
    for label, rate, r in (("chosen rate", inp["rate_rps"], chosen), ("highest rate within SLOs", max_rate, at_max)):
        if r is None:
            continue
        usd = r["usd_per_million_output_tokens"]
        usd_band = _band_text(usd, r["band_fraction"], prefix="$").removeprefix("band ")
        rows.append({"run": label, X_RATE: rate, X_THROUGHPUT: r["output_tokens_per_s"],
                     f"TTFT {stat} (ms)": _ms(r[f"ttft_{stat}_s"]), f"TPOT {stat} (ms)": _ms(r[f"tpot_{stat}_s"]),
                     "$ per 1M output tokens": usd,
                     "$ per 1M output tokens, band": usd_band,
                     "energy (MJ per 1M output tokens)": r["j_per_output_token"],  # J per token = MJ per 1M tokens
                     "power (W per GPU)": r["average_power_w_per_gpu"], "deployment ($/h)": r["usd_per_h"]})
    if not rows:
        return
    st.subheader("Cost and energy")
    frame = pd.DataFrame(rows)
    st.dataframe(_whole(frame), hide_index=True, column_config=_formats(frame))
    _scroll_hint(frame)
    r = chosen or at_max
    basis = next((n.removeprefix("priced on ") for n in r["notes"] if n.startswith("priced on ")), None)
    if r["usd_per_h"] is None or basis is None:
        st.caption(f"Not priced: the catalog has no instance holding {r['gpus']} x {r['device']} at {inp['pricing']} "
                   "prices. Energy is the devices' draw over the run.")
    else:
        st.caption(f"Priced on {basis}, ${r['usd_per_h']:,.2f}/h, price of {dated(r['price_date'])} (the cheapest "
                   f"catalog instance holding the deployment). $ per 1M output tokens: $/h x the run's span / its "
                   "output tokens. Energy: the devices' draw from the first arrival to the last completion (steps at "
                   "their predicted power, idle between), per output token.")


def _results(inp: dict) -> None:
    hw = hardware_key()
    work = (inp["model"], inp["device"], inp["gpus"], inp["tp"], inp["engine"], inp["dtype"], inp["input_len"],
            inp["output_len"])
    fit = shown(memory_fit, hw, *work)
    if fit is None:
        return
    if not fit["fits"]:
        st.error(f"{inp['model']} at {inp['dtype']} does not fit on {inp['gpus']} x {inp['device']} (tp {inp['tp']}): "
                 f"one request needs {fit['total_bytes'] / 1e9:,.1f} GB per device of "
                 f"{fit['capacity_bytes'] / 1e9:,.1f} GB usable, {fit['shortfall_bytes'] / 1e9:,.1f} GB short. Use a "
                 "larger tensor-parallel size (more GPUs), a device with more memory, or a smaller precision.")
        return
    args = (*work, inp["pricing"], inp["requests"], inp["slo_ttft_s"], inp["slo_tpot_s"], inp["slo_stat"])
    swept = shown(rate_sweep, hw, *args, inp["points"])
    if swept is None:
        return
    chosen = shown(rate_run, hw, *args, inp["rate_rps"])  # None: a bad rate, its message shown; the curve stays
    first, at_max, max_rate = swept["curve"][0], swept["at_max"], swept["max_rate_rps"]
    frac = first["band_fraction"]
    cols = [*st.columns(2), *st.columns(2)]  # two by two: four across truncate their labels at 1,280 px
    if at_max is None:
        _no_rate_meets(inp, first)
    else:
        slos = f"{inp['slo_stat']} ≤ {inp['slo_ttft_s'] * 1e3:g} ms / {inp['slo_tpot_s'] * 1e3:g} ms"  # TTFT / TPOT
        cols[0].metric("Max rate in SLOs (requests/s)", f"{max_rate:,.2f}", slos,
                       delta_color="off", delta_arrow="off",
                       help="planner.serve.sweep.max_rate: bisection over Poisson rates up to saturation")
        cols[1].metric("At max rate (output tokens/s)", f"{at_max['output_tokens_per_s']:,.0f}",
                       _band_text(at_max["output_tokens_per_s"], frac, inverse=True), delta_color="off",
                       delta_arrow="off")
    cols[2].metric("Saturation (requests/s)", f"{swept['saturation_rps']:,.2f}",
                   help="Closed loop with every copy full: the most the deployment serves")
    cols[3].metric("Tier", first["tier"], f"band ±{frac:.0%}", delta_color="off", delta_arrow="off",
                   help="Where the step times come from (measured, published, transferred or datasheet) and the "
                        "held-out error of that tier")
    if at_max is not None:
        usd, joules = at_max["usd_per_million_output_tokens"], at_max["j_per_output_token"]
        parts = [text for value, text in ((usd, f"${usd or 0:,.3f}"), (joules, f"{(joules or 0) * 1e6:,.0f} J"))
                 if value is not None]
        if parts:  # a device of the user's without a price or a TDP has neither
            st.caption(f"At the highest rate within SLOs: {' and '.join(parts)} per 1M output tokens.")
    _curve_section(inp, swept, chosen)
    if chosen is not None:
        _chosen_section(inp, chosen, at_max, max_rate, swept["saturation_rps"])
    _cost_table(inp, chosen, at_max, max_rate)
    with st.expander("Scheduler, load and notes"):
        r = chosen or first
        st.write(f"**Deployment** {r['gpus']} x {r['device']}, tp {r['tp']}, {r['copies']} model "
                 f"cop{'y' if r['copies'] == 1 else 'ies'}, engine {r['engine']}")
        st.write(f"**Scheduler** {r['policy']}; KV cache of {r['kv_blocks_per_copy']:,} blocks of "
                 f"{r['kv_block_tokens']} tokens per copy")
        st.write(f"**Load** {r['load']}")
        for note in r["notes"]:
            st.write(f"- {note}")



def _curve_section(inp: dict, swept: dict, chosen: dict | None) -> None:
    st.subheader("Latency against load")
    x = st.radio("Against", [X_RATE, X_THROUGHPUT], horizontal=True, key="serve_x",
                 help="The offered Poisson rate, or the output tokens per second the deployment delivered at it")
    frame = _curve_frame(swept["curve"])
    marks = []
    if swept["at_max"] is not None:
        at = swept["max_rate_rps"] if x == X_RATE else swept["at_max"]["output_tokens_per_s"]
        marks.append((at, f"highest rate within SLOs: {swept['max_rate_rps']:,.2f} requests/s", "#2ca02c"))
    if chosen is not None:
        at = inp["rate_rps"] if x == X_RATE else chosen["output_tokens_per_s"]
        marks.append((at, f"chosen rate: {inp['rate_rps']:g} requests/s", "#7f7f7f"))
    _side_by_side(inp, lambda name, slo_ms: _latency_chart(frame, name, x, slo_ms, marks),
                  "No request has a {} (one output token has no time per output token).")
    st.caption("Lines: the statistics of the simulated requests at each rate (log scale); red: the SLO; green: the "
               "highest rate within the SLOs; grey: the chosen rate.")
    st.dataframe(_whole(frame), hide_index=True, column_config=_formats(frame))
    _scroll_hint(frame)


def _side_by_side(inp: dict, chart_of, empty: str) -> None:
    """The TTFT and TPOT charts side by side: chart_of(name, SLO in ms) gives each, or None, shown as
    `empty` with the name."""
    cols = st.columns(2)
    for col, name, slo in ((cols[0], "TTFT", inp["slo_ttft_s"]), (cols[1], "TPOT", inp["slo_tpot_s"])):
        chart = chart_of(name, slo * 1e3)
        if chart is None:
            col.info(empty.format(name))
        else:
            col.altair_chart(chart, width="stretch")


def _chosen_section(inp: dict, r: dict, at_max: dict | None, max_rate: float, saturation: float) -> None:
    stat = inp["slo_stat"] if inp["slo_stat"] in STATS else "p90"
    rate = inp["rate_rps"]
    st.subheader(f"At {rate:g} requests/s")
    if rate > saturation:
        st.warning(f"{rate:g} requests/s is above the saturation rate ({saturation:,.2f}): the queue grows for as "
                   f"long as requests arrive, so the latencies below grow with the number simulated "
                   f"({inp['requests']:,}).")
    if r["rejected"]:
        st.warning(f"{r['rejected']:,} of {r['requests']:,} requests were rejected: longer than a copy's whole KV "
                   "cache.")
    frac = r["band_fraction"]
    cols = [*st.columns(2), *st.columns(2)]
    cols[0].metric(f"TTFT {stat}", fmt_s(r[f"ttft_{stat}_s"]), _band_text(_ms(r[f"ttft_{stat}_s"]), frac, "ms"),
                   delta_color="off", delta_arrow="off")
    cols[1].metric(f"TPOT {stat}", fmt_s(r[f"tpot_{stat}_s"]), _band_text(_ms(r[f"tpot_{stat}_s"]), frac, "ms"),
                   delta_color="off", delta_arrow="off")
    cols[2].metric("Throughput (output tokens/s)", f"{r['output_tokens_per_s']:,.0f}",
                   _band_text(r["output_tokens_per_s"], frac, inverse=True), delta_color="off", delta_arrow="off")
    met = r["slo_met_fraction"]
    cols[3].metric("Requests within SLOs", "-" if met is None else f"{met:.1%}",
                   None if r["goodput_rps"] is None else f"goodput {r['goodput_rps']:,.2f} requests/s",
                   delta_color="off", delta_arrow="off")
    runs = [(f"at {rate:g} requests/s", r)]
    if at_max is not None:
        runs.append((f"at {max_rate:,.2f} requests/s (highest within SLOs)", at_max))
    _side_by_side(inp, lambda name, slo_ms: _cdf_chart(runs, name.lower(), slo_ms, inp["slo_stat"]),
                  "No {} to draw.")
    st.caption("Share of the simulated requests whose latency is at most x (201 quantiles of the per-request "
               "values); red: the SLO; dotted: the SLO's percentile.")


def page() -> None:
    purpose("Serving: latency, throughput and cost under load",
            "One model on one deployment under a request rate, simulated step by step with the engine's continuous "
            "batching: the latency–throughput curve, the highest rate that meets your SLOs, latency CDFs, and $ and "
            "J per 1M output tokens.")
    left, right = st.columns([1, 3])
    with left:
        inp = _inputs()
    if inp is None:
        return
    with right:
        _results(inp)
