"""Serving page: one model on one deployment under a request rate, simulated with the engine's
continuous batching (planner.serve): the latency–throughput curve, the highest rate that meets the
SLOs, TTFT and TPOT CDFs at a chosen rate, and $ and J per 1M output tokens. The request lengths are
fixed, a preset of hardware_specs/serving/lengths.csv or a mix table; up to four deployments are drawn
side by side; the inputs are written to the page's address, which restores them (a shareable link).

Every number is a field of planner.serve's results (ServeResult, Capacity); the page only converts
seconds to milliseconds, applies the prediction's own band (planner.units.band) and draws.

This module holds the page's inputs, its cached calls into the library and its results; the charts and tables
are drawn by serving_charts, the deployments side by side by serving_compare, and the page's address is
written and read by serving_address."""

from __future__ import annotations

import re
from dataclasses import replace

import pandas as pd
import streamlit as st

from planner.app.common import band_text, context, dated, device_ids, fmt_s, hardware_key, purpose, shown
from planner.app.plan import FIRST_MIX, MIX_LABELS, mix_rows
from planner.app.serving_charts import (
    STATS,
    X_RATE,
    X_THROUGHPUT,
    cdf_chart,
    curve_frame,
    formats,
    latency_chart,
    ms,
    saturated_caption,
    scroll_hint,
    shown_table,
    side_by_side,
    whole,
)
from planner.app.wording import app_words
from planner.errors import ConfigError
from planner.serve.steady import DEFAULT_REQUESTS

DTYPES = ["bf16", "fp16", "fp8", "int8", "fp4", "fp32"]
NO_RECIPE = "(none)"
NO_ENGINE = "(default for the device)"
MAX_OUTPUT_TOKENS = 16384
"""Longest output simulated in the page (each decode step is an event: cost grows with the length)."""
MAX_INPUT_TOKENS = 131072
"""Longest input the page takes."""
FIXED, PRESET, MIX = "fixed", "preset", "mix"
LENGTH_MODES = {FIXED: "Fixed lengths", PRESET: "A preset (lengths.csv)", MIX: "A mix (table)"}
"""How the request lengths are given: value (also its word in the page's address) -> the radio's label."""
DEFAULTS = {"serve_model": "llama-3.1-8b", "serve_device": "h100-sxm", "serve_gpus": 1, "serve_tp": 1,
            "serve_engine": NO_ENGINE, "serve_dtype": "bf16", "serve_recipe": NO_RECIPE, "serve_length_mode": FIXED,
            "serve_input_len": 1024, "serve_output_len": 256, "serve_preset": "sharegpt", "serve_slo_ttft_ms": 2000.0,
            "serve_slo_tpot_ms": 100.0, "serve_slo_stat": "p90", "serve_rate_rps": 5.0,
            "serve_requests": DEFAULT_REQUESTS, "serve_points": 8, "serve_pricing": "on_demand", "serve_x": X_RATE,
            "serve_compare": False}
"""Every input's first value, set in session_state before the widgets are drawn (never as a widget
default), so that the Start page's preset may set any of them without a conflict. 1,000 requests, the
library's default (planner.serve.steady.DEFAULT_REQUESTS): with the seed and percentiles of
planner.serve.sweep.standard_load, each rate is run as a plan's capacity and its check run it
(planner.serve.sweep.run_at_rate); the saturation run lengthens itself to a steady state
(planner.serve.sweep.STEADY_WAVES)."""
USD_NOTE = ("Why this differs from the Workload page's $ per 1M tokens: there a fixed batch runs with every slot "
            "busy all the time (the best case, decode only). Here requests arrive at a rate: batches are partly "
            "full, prefill steps share the device, and the price of the idle time between arrivals is counted, so "
            "the figure is higher, and lower the closer the rate comes to the highest rate within the SLOs. To buy "
            "capacity, use this page's figure at the rate you will run (at most the highest rate within the SLOs); "
            "the Workload page's is a floor no real traffic reaches.")
"""Why the Workload page's and this page's $ per 1M output tokens differ, and which to buy on."""


# ------------------------------------------------------------------ cached calls into the library

def _request(model: str, device: str, gpus: int, tp: int, engine: str | None, dtype: str, input_len: int,
             output_len: int, pricing: str):
    from planner.predict import Request
    return Request(model, device, gpus=gpus, tp=tp, engine=engine, dtype=dtype, input_len=input_len,
                   output_len=output_len, pricing=pricing)


def _load(requests: int, lengths: str | None, mix: tuple | None):
    """planner.serve.sweep.standard_load(requests) with the page's length preset or mix (None: fixed lengths)."""
    from planner.serve.sweep import standard_load
    return replace(standard_load(requests), lengths=lengths, mix=mix)


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


@st.cache_data(show_spinner=False)
def length_presets() -> dict[str, dict]:
    """planner.serve.load.presets() as plain data: name -> {"input", "output": {mean_tokens, std_tokens,
    min_tokens, max_tokens} (tokens), "source"}."""
    from planner.serve.load import presets
    side = lambda d: {"mean_tokens": d.mean_tokens, "std_tokens": d.std_tokens,
                      "min_tokens": d.min_tokens, "max_tokens": d.max_tokens}
    return {name: {"input": side(p.input), "output": side(p.output), "source": p.source}
            for name, p in presets().items()}


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
               output_len: int, lengths: str | None, mix: tuple | None, pricing: str, requests: int,
               slo_ttft_s: float, slo_tpot_s: float, slo_stat: str, points: int) -> dict:
    """planner.serve.sweep.sweep: {"curve": [_summary of each run, with "rate_rps"], "max_rate_rps",
    "saturation_rps", "at_max": _summary of the run at the highest rate within the SLOs, or None}. `lengths` a
    preset name or `mix` buckets (input tokens, output tokens, share) draw the lengths; both None: fixed."""
    from planner.serve.api import Scheduling, Slo
    from planner.serve.sweep import sweep
    req = _request(model, device, gpus, tp, engine, dtype, input_len, output_len, pricing)
    curve, capacity = sweep(req, _load(requests, lengths, mix), Scheduling(), Slo(slo_ttft_s, slo_tpot_s, slo_stat),
                            points, ctx=context())
    return {"curve": [{"rate_rps": rate, **_summary(run)} for rate, run in curve],
            "max_rate_rps": float(capacity.rate_rps), "saturation_rps": float(capacity.saturation_rps),
            "at_max": _summary(capacity.at_rate) if capacity.at_rate is not None else None}


@st.cache_data(show_spinner="Simulating at the chosen rate...", max_entries=256)
def rate_run(hw: str, model: str, device: str, gpus: int, tp: int, engine: str | None, dtype: str, input_len: int,
             output_len: int, lengths: str | None, mix: tuple | None, pricing: str, requests: int, slo_ttft_s: float,
             slo_tpot_s: float, slo_stat: str, rate_rps: float, saturation_rps: float | None = None) -> dict:
    """planner.serve.sweep.run_at_rate (the run a plan's capacity and its check make) at one Poisson rate:
    its _summary (with "overloaded" when `saturation_rps`, the sweep's, is given)."""
    from planner.serve.api import Scheduling, Slo
    from planner.serve.sweep import run_at_rate
    req = _request(model, device, gpus, tp, engine, dtype, input_len, output_len, pricing)
    return _summary(run_at_rate(req, rate_rps, _load(requests, lengths, mix), Scheduling(),
                                Slo(slo_ttft_s, slo_tpot_s, slo_stat), context(), saturation_rps=saturation_rps))


# ------------------------------------------------------------------ inputs

def _inputs() -> dict | None:
    """The page's inputs (SI units: seconds), or None when they do not make a request (message shown)."""
    from planner.app.serving_address import read_address  # here: it imports this module
    from planner.hardware.catalog import PRICINGS
    from planner.workload.quant import compose, recipe_names
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(key, value)
    read_address()
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
    lengths = _lengths_input()
    c = st.columns(2)
    ttft_ms = c[0].number_input("SLO: TTFT (ms)", 0.0, 1e6, key="serve_slo_ttft_ms", step=50.0, value=None,
                                placeholder="no target",
                                help="Time to first token the chosen statistic of the requests must stay within; "
                                     "empty: no TTFT target")
    tpot_ms = c[1].number_input("SLO: TPOT (ms)", 0.0, 1e6, key="serve_slo_tpot_ms", step=5.0, value=None,
                                placeholder="no target",
                                help="Time per output token after the first, which the statistic must stay within; "
                                     "empty: no TPOT target")
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
    if dtype is None or lengths is None:
        return None
    return {"model": model, "device": device, "gpus": gpus, "tp": tp,
            "engine": None if engine == NO_ENGINE else engine, "dtype": dtype, **lengths, "pricing": pricing,
            "requests": requests, "slo_ttft_s": slo_s(ttft_ms), "slo_tpot_s": slo_s(tpot_ms), "slo_stat": stat,
            "rate_rps": float(rate), "points": points}


def _lengths_input() -> dict | None:
    """How long the requests are: {"length_mode", "input_len", "output_len", "lengths" (a preset name or None),
    "mix" (buckets or None)}, or None (a message shown). input_len and output_len are the fixed lengths, a
    preset's rounded means, or the mix's longest bucket: what the memory check and the request carry."""
    mode = st.radio("Request lengths", list(LENGTH_MODES), key="serve_length_mode", horizontal=True,
                    format_func=lambda k: LENGTH_MODES.get(k, k),  # a label (streamlit.testing's) as itself
                    help="Every request the same length; lengths drawn from a published distribution "
                         "(hardware_specs/serving/lengths.csv); or a mix of sizes with the share of requests of "
                         "each")
    if mode == PRESET:
        table = length_presets()
        if st.session_state["serve_preset"] not in table:
            st.session_state["serve_preset"] = next(iter(table))
        name = st.selectbox("Length preset", list(table), key="serve_preset",
                            help="Input and output lengths drawn per request (lognormal, clipped) from a published "
                                 "trace's statistics")
        p = table[name]
        sides = [f"{side} mean {p[side]['mean_tokens']:,.0f} tokens (std {p[side]['std_tokens']:,.0f}, "
                 f"{p[side]['min_tokens']:,} to {p[side]['max_tokens']:,})" for side in ("input", "output")]
        st.caption(f"{'; '.join(sides)}. Source: {p['source']}")
        return {"length_mode": mode, "input_len": max(1, round(p["input"]["mean_tokens"])),
                "output_len": max(1, round(p["output"]["mean_tokens"])), "lengths": name, "mix": None}
    if mode == MIX:
        mix = _mix_input()
        if mix is None:
            return None
        longest = max(mix, key=lambda b: b[0] + b[1])
        return {"length_mode": mode, "input_len": longest[0], "output_len": longest[1], "lengths": None, "mix": mix}
    c = st.columns(2)
    input_len = int(c[0].number_input("Input tokens", 1, MAX_INPUT_TOKENS, key="serve_input_len",
                                      help="Prompt length of every request"))
    output_len = int(c[1].number_input("Output tokens", 1, MAX_OUTPUT_TOKENS, key="serve_output_len",
                                       help="Tokens generated per request (up to 16k here: every decode step is "
                                            "simulated, so 16k tokens x 1,000 requests takes about 15 s; "
                                            "`planner serve` takes longer outputs)"))
    return {"length_mode": FIXED, "input_len": input_len, "output_len": output_len, "lengths": None, "mix": None}


def _mix_input() -> tuple | None:
    """The mix table (as the Plan page's Length mix): its buckets, or None with the message shown."""
    ss = st.session_state
    if "serve_mix" not in ss or "serve_mix_base" not in ss:  # the table starts from what it last held
        ss["serve_mix_base"] = ss.get("serve_mix_kept", pd.DataFrame(FIRST_MIX))
    st.markdown("**Length mix**: the request sizes of the traffic, one row each, with the share of requests "
                "(the shares add up to 1); add or delete rows in the table")
    frame = st.data_editor(
        ss["serve_mix_base"], num_rows="dynamic", hide_index=True, key="serve_mix",
        column_config={
            "input_len": st.column_config.NumberColumn(MIX_LABELS["input_len"], min_value=1,
                                                       max_value=MAX_INPUT_TOKENS, step=1, format="localized",
                                                       help="Prompt tokens of a request"),
            "output_len": st.column_config.NumberColumn(MIX_LABELS["output_len"], min_value=1,
                                                        max_value=MAX_OUTPUT_TOKENS, step=1, format="localized",
                                                        help="Generated tokens of a request"),
            "share": st.column_config.NumberColumn(MIX_LABELS["share"], min_value=0.0, max_value=1.0, step=0.01,
                                                   help="Fraction of the requests of this size")})
    ss["serve_mix_kept"] = frame
    try:
        return mix_buckets(frame)
    except ConfigError as exc:
        st.error(str(exc))
        return None


def mix_buckets(frame: pd.DataFrame) -> tuple[tuple[int, int, float], ...]:
    """The buckets (input tokens, output tokens, share) of a mix table (columns input_len, output_len, share),
    rows left wholly empty skipped; checked by planner.serve.load.mix_lengths. ConfigError in the Plan page's
    words, naming the table's row (from 1): "Length mix, row 2: share (0-1) is empty"."""
    from planner.serve.load import mix_lengths
    buckets, rows = [], []
    for i, cells in mix_rows(frame):
        values = [cell_number(cells[k]) for k in MIX_LABELS]
        if isinstance(values[1], (int, float)) and values[1] > MAX_OUTPUT_TOKENS:
            raise ConfigError(f"Length mix, row {i}: {MIX_LABELS['output_len']} is {values[1]:,}, above the page's "
                              f"{MAX_OUTPUT_TOKENS:,} (`planner serve` takes longer outputs)")
        buckets.append(tuple(values))
        rows.append(i)
    if not buckets:
        raise ConfigError("Length mix: give at least one row of input and output tokens with its share")
    try:
        return mix_lengths(buckets).buckets
    except ConfigError as exc:  # "length mix row k: input tokens must be ..." -> the table's row and header
        message = str(exc)
        found = re.match(r"length mix row (\d+): (input tokens|output tokens|share)?(.*)", message, re.DOTALL)
        if found is None:
            raise ConfigError(re.sub(r"^length mix", "Length mix", message)) from None
        k, column, rest = int(found.group(1)), found.group(2), found.group(3)
        header = {"input tokens": MIX_LABELS["input_len"], "output tokens": MIX_LABELS["output_len"],
                  "share": MIX_LABELS["share"]}.get(column, "")
        raise ConfigError(f"Length mix, row {rows[k - 1]}: {header}{rest}") from None


def cell_number(value):
    """A table cell as an int (a whole number), a float, or as given (text, which the library refuses by name)."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)  # numpy scalars
        except (TypeError, ValueError):
            return value
    value = float(value)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


# ------------------------------------------------------------------ what is shown

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


def slo_s(ms: float | None) -> float:
    """An SLO input (ms; None: empty, no target) as the simulator's Slo takes it: seconds, NO_TARGET_S for none."""
    from planner.plan.scenario import NO_TARGET_S
    return NO_TARGET_S if ms is None else ms / 1e3


def slo_text(seconds: float) -> str:
    """An SLO in words: "≤ 1,000 ms", or "no target"."""
    from planner.plan.scenario import NO_TARGET_S
    return "no target" if seconds >= NO_TARGET_S else f"≤ {seconds * 1e3:,.4g} ms"


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
    rows, saturated = [], []
    for label, rate, r in (("chosen rate", inp["rate_rps"], chosen), ("highest rate within SLOs", max_rate, at_max)):
        if r is None:
            continue
        usd = r["usd_per_million_output_tokens"]
        usd_band = _band_text(usd, r["band_fraction"], prefix="$").removeprefix("band ")
        rows.append({"run": label, X_RATE: rate, X_THROUGHPUT: r["output_tokens_per_s"],
                     f"TTFT {stat} (ms)": ms(r[f"ttft_{stat}_s"]), f"TPOT {stat} (ms)": ms(r[f"tpot_{stat}_s"]),
                     "$ per 1M output tokens": usd,
                     "$ per 1M output tokens, band": usd_band,
                     "energy (MJ per 1M output tokens)": r["j_per_output_token"],  # J per token = MJ per 1M tokens
                     "power (W per GPU)": r["average_power_w_per_gpu"], "deployment ($/h)": r["usd_per_h"]})
        saturated.append(bool(r.get("overloaded")))
    if not rows:
        return
    st.subheader("Cost and energy", help=USD_NOTE)
    frame = shown_table(pd.DataFrame(rows), saturated)
    st.dataframe(whole(frame), hide_index=True, column_config=formats(frame))
    scroll_hint(frame)
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
    st.caption(USD_NOTE)


def fit_message(inp: dict, fit: dict) -> str:
    return (f"{inp['model']} at {inp['dtype']} does not fit on {inp['gpus']} x {inp['device']} (tp {inp['tp']}): "
            f"one request needs {fit['total_bytes'] / 1e9:,.1f} GB per device of {fit['capacity_bytes'] / 1e9:,.1f} "
            f"GB usable, {fit['shortfall_bytes'] / 1e9:,.1f} GB short")


def _results(inp: dict) -> None:
    hw = hardware_key()
    deployment = (inp["model"], inp["device"], inp["gpus"], inp["tp"], inp["engine"], inp["dtype"])
    fit = shown(memory_fit, hw, *deployment, inp["input_len"], inp["output_len"])
    if fit is None:
        return
    if not fit["fits"]:
        st.error(f"{fit_message(inp, fit)}. Use a larger tensor-parallel size (more GPUs), a device with more "
                 "memory, or a smaller precision.")
        return
    args = sweep_args(inp, deployment)
    swept = shown(rate_sweep, hw, *args, inp["points"])
    if swept is None:
        return
    # None: a bad rate, its message shown; the curve stays
    chosen = shown(rate_run, hw, *args, inp["rate_rps"], swept["saturation_rps"])
    first, at_max, max_rate = swept["curve"][0], swept["at_max"], swept["max_rate_rps"]
    frac = first["band_fraction"]
    cols = [*st.columns(2), *st.columns(2)]  # two by two: four across truncate their labels at 1,280 px
    if at_max is None:
        _no_rate_meets(inp, first)
    else:
        slos = f"{inp['slo_stat']} TTFT {slo_text(inp['slo_ttft_s'])}, TPOT {slo_text(inp['slo_tpot_s'])}"
        cols[0].metric("Max rate in SLOs (requests/s)", f"{max_rate:,.2f}", slos,
                       delta_color="off", delta_arrow="off",
                       help="planner.serve.sweep.max_rate: bisection over Poisson rates up to saturation")
        cols[1].metric("At max rate (output tokens/s)", f"{at_max['output_tokens_per_s']:,.0f}",
                       _band_text(at_max["output_tokens_per_s"], frac, inverse=True), delta_color="off",
                       delta_arrow="off")
    cols[2].metric("Saturation (requests/s)", f"{swept['saturation_rps']:,.2f}",
                   help="Closed loop with every copy full: the most the deployment serves")
    cols[3].metric("Tier", first["tier"], f"band {band_text(frac)}", delta_color="off", delta_arrow="off",
                   help="Where the step times come from (measured, published, transferred or datasheet); the band "
                        "is how far they may be off either way: " + (first.get("band_basis") or "the kernels' error"))
    if at_max is not None:
        usd, joules = at_max["usd_per_million_output_tokens"], at_max["j_per_output_token"]
        parts = [text for value, text in ((usd, f"${usd or 0:,.3f}"), (joules, f"{(joules or 0) * 1e6:,.0f} J"))
                 if value is not None]
        if parts:  # a device of the user's without a price or a TDP has neither
            st.caption(f"At the highest rate within SLOs: {' and '.join(parts)} per 1M output tokens.",
                       help=USD_NOTE)
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
            st.write(f"- {app_words(note)}")  # the library's notes name CLI flags; the page names its inputs


def sweep_args(inp: dict, deployment: tuple) -> tuple:
    """The arguments of rate_sweep and rate_run after the hardware key: `deployment` (model, device, gpus, tp,
    engine, dtype), then the lengths, the pricing, the request count and the SLOs of `inp`."""
    return (*deployment, inp["input_len"], inp["output_len"], inp["lengths"], inp["mix"], inp["pricing"],
            inp["requests"], inp["slo_ttft_s"], inp["slo_tpot_s"], inp["slo_stat"])


def _curve_section(inp: dict, swept: dict, chosen: dict | None) -> None:
    st.subheader("Latency against load")
    x = st.radio("Against", [X_RATE, X_THROUGHPUT], horizontal=True, key="serve_x",
                 help="The offered Poisson rate, or the output tokens per second the deployment delivered at it")
    frame = curve_frame(swept["curve"])
    marks = []
    if swept["at_max"] is not None:
        at = swept["max_rate_rps"] if x == X_RATE else swept["at_max"]["output_tokens_per_s"]
        marks.append((at, f"highest rate within SLOs: {swept['max_rate_rps']:,.2f} requests/s", "#2ca02c"))
    if chosen is not None:
        at = inp["rate_rps"] if x == X_RATE else chosen["output_tokens_per_s"]
        marks.append((at, f"chosen rate: {inp['rate_rps']:g} requests/s", "#7f7f7f"))
    side_by_side(inp, lambda name, slo_ms: latency_chart(frame, name, x, slo_ms, marks),
                  "No request has a {} (one output token has no time per output token).")
    st.caption("Lines: the statistics of the simulated requests at each rate (log scale); red: the SLO; green: the "
               "highest rate within the SLOs; grey: the chosen rate.")
    saturated_caption(list(frame.loc[frame["saturated"], X_RATE]), swept["saturation_rps"])
    table = shown_table(frame, frame["saturated"])
    st.dataframe(whole(table), hide_index=True, column_config=formats(table))
    scroll_hint(table)


def _chosen_section(inp: dict, r: dict, at_max: dict | None, max_rate: float, saturation: float) -> None:
    stat = inp["slo_stat"] if inp["slo_stat"] in STATS else "p90"
    rate = inp["rate_rps"]
    st.subheader(f"At {rate:g} requests/s")
    past = rate > saturation
    if past:
        st.warning(f"{rate:g} requests/s is above the saturation rate ({saturation:,.2f}): the queue grows for as "
                   f"long as requests arrive, so TTFT has no steady value (this run's {stat} TTFT, "
                   f"{fmt_s(r[f'ttft_{stat}_s'])}, grows with the number simulated, {inp['requests']:,}).")
    if r["rejected"]:
        st.warning(f"{r['rejected']:,} of {r['requests']:,} requests were rejected: longer than a copy's whole KV "
                   "cache.")
    frac = r["band_fraction"]
    cols = [*st.columns(2), *st.columns(2)]
    if past:
        cols[0].metric(f"TTFT {stat}", "saturated", "queue grows without bound", delta_color="off", delta_arrow="off",
                       help=f"This finite run's {stat} is {fmt_s(r[f'ttft_{stat}_s'])}: past saturation it only "
                            "measures how long the run was")
    else:
        cols[0].metric(f"TTFT {stat}", fmt_s(r[f"ttft_{stat}_s"]), _band_text(ms(r[f"ttft_{stat}_s"]), frac, "ms"),
                       delta_color="off", delta_arrow="off")
    cols[1].metric(f"TPOT {stat}", fmt_s(r[f"tpot_{stat}_s"]), _band_text(ms(r[f"tpot_{stat}_s"]), frac, "ms"),
                   delta_color="off", delta_arrow="off")
    cols[2].metric("Throughput (output tokens/s)", f"{r['output_tokens_per_s']:,.0f}",
                   _band_text(r["output_tokens_per_s"], frac, inverse=True), delta_color="off", delta_arrow="off")
    met = r["slo_met_fraction"]
    cols[3].metric("Requests within SLOs", "-" if met is None else f"{met:.1%}",
                   None if r["goodput_rps"] is None else f"goodput {r['goodput_rps']:,.2f} requests/s",
                   delta_color="off", delta_arrow="off")
    runs = [(f"at {rate:g} requests/s" + (" (saturated)" if past else ""), r)]
    if at_max is not None:
        runs.append((f"at {max_rate:,.2f} requests/s (highest within SLOs)", at_max))
    side_by_side(inp, lambda name, slo_ms: cdf_chart(runs, name.lower(), slo_ms, inp["slo_stat"]),
                  "No {} to draw.")
    st.caption("Share of the simulated requests whose latency is at most x (201 quantiles of the per-request "
               "values); red: the SLO; dotted: the SLO's percentile."
               + (" The TTFT axis ends at the larger of 3 x the SLO and 2 x the longest TTFT of a run below "
                  "saturation: a saturated run's tail is drawn at its right edge." if past else ""))


def page() -> None:
    from planner.app.serving_address import write_address  # here: they import this module
    from planner.app.serving_compare import compare_section
    purpose("Serving: latency, throughput and cost under load",
            "One model on one deployment under a request rate, simulated step by step with the engine's continuous "
            "batching: the latency–throughput curve, the highest rate that meets your SLOs, latency CDFs, and $ "
            "and J per 1M output tokens.")
    left, right = st.columns([1, 3])
    with left:
        inp = _inputs()
    if inp is None:
        return
    with right:
        _results(inp)
        deployments = compare_section(inp)
    write_address(inp, deployments)
