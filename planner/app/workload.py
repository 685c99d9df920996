"""Workload page: one model under one workload on many devices, then one device in detail. Each device
runs the deployment asked for (GPUs, tensor and pipeline parallel), or the smallest that fits
(planner.predict.search); a deployment that does not fit is shown greyed with its shortfall and the
smallest one that fits, never with headline numbers. The page's shareable link is written and read by
workload_address."""

from __future__ import annotations

import json
import math

import altair as alt
import pandas as pd
import streamlit as st

from planner.app.common import (
    band_text,
    context,
    dated,
    device_ids,
    fmt_s,
    hardware_key,
    model_of,
    purpose,
    roofline_chart,
    shown,
    tier_scale,
    upload_text,
    zoo_ids,
)
from planner.app.wording import app_words

DEFAULT_DEVICES = ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "mi300x", "l40s", "l4"]
DTYPES = ["bf16", "fp16", "fp8", "fp32", "int8", "fp4"]
PART_DTYPES = ["(as the base)", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
SMALLEST = "Smallest that fits"
GREY = "color: #9a9a9a"
NO_ENGINE = "(default for the workload)"
MAX_TRAIN_BTOKENS = 10_000_000.0
"""Largest training run offered, billions of tokens: the library's limit (planner.predict.api.MAX_TRAIN_TOKENS)."""
DEFAULTS = {"model_source": "Zoo", "model": "llama-3.1-8b", "mode": "inference", "batch": 8, "input_len": 1024,
            "output_len": 256, "seq_len": 2048, "wl_micro_batch": 1, "wl_global_batch": 0, "wl_zero": 1, "wl_recompute": "none",
            "wl_mixed": "auto", "dtype": "bf16", "wl_recipe": "(none)", "wl_weights": PART_DTYPES[0],
            "wl_activations": PART_DTYPES[0], "wl_kv_cache": PART_DTYPES[0], "wl_engine": NO_ENGINE,
            "devices": DEFAULT_DEVICES, "wl_deploy": SMALLEST, "wl_gpus": 8, "wl_tp": 1, "wl_pp": 1,
            "wl_train_btokens": 10.0}
"""Every input's first value. Set in session_state before the widgets are drawn (never as a widget
default), so that a preset from the Start page may set any of them without a conflict."""


# ------------------------------------------------------------------ cached calls into the library

def _request(model, device: str, mode: str, work: dict, layout: dict | None):
    from planner.predict import Request
    return Request(model.name, device, mode, **work, **(layout or {}))


@st.cache_data(show_spinner="Predicting...", max_entries=512)
def device_result(hw: str, model_key: str, config_text: str | None, device: str, mode: str, work_json: str,
                  layout_json: str | None) -> dict:
    """One device's row: the prediction of the deployment asked for (`layout_json`: gpus, tp, pp) or of
    the smallest that fits (None), and for one that does not fit, the smallest that does. Returns
    {"p": Prediction.as_dict() or None, "fit": the smallest fitting request's layout or None, "tried": n,
    "band": (fraction), "summary": compare-style row}."""
    from planner.errors import PlannerError
    model = model_of(model_key, config_text)
    work, layout = json.loads(work_json), json.loads(layout_json) if layout_json else None
    req = _request(model, device, mode, work, layout)
    ctx = context()
    try:
        return _result(req, ctx, model, layout)
    except PlannerError as exc:  # this device cannot run it (no link for a multi-node group...): its row says why
        return {"p": None, "error": str(exc), "fit": None, "summary": None, "tried": 0}


def _result(req, ctx, model, layout: dict | None) -> dict:
    from planner.predict.api import predict, summary_row
    from planner.predict.search import filled, smallest_fit
    if layout is None:
        found = smallest_fit(req, ctx, model)
        if found is None:
            return {"p": None, "fit": None, "summary": None, "tried": 0}
        found = filled(found, ctx, model)  # copies fill the instance rented for one: no idle device billed
        p, req = found.prediction, found.request
    else:
        p = predict(req, ctx, model)
    out = {"p": p.as_dict(), "summary": summary_row(p), "fit": None, "tried": 0,
           "layout": {"gpus": req.gpus, "tp": req.tp, "pp": req.pp}}
    if not p.fits:
        found = smallest_fit(req, ctx, model)
        out["tried"] = found.tried if found else 0
        out["fit"] = None if found is None else {"gpus": found.request.gpus, "tp": found.request.tp,
                                                 "pp": found.request.pp, "zero": found.request.zero}
    return out


@st.cache_data(show_spinner="Timing every op...", max_entries=64)
def op_table(hw: str, model_key: str, config_text: str | None, device: str, mode: str, work_json: str,
             layout_json: str) -> pd.DataFrame:
    """The distinct ops of the deployment's graphs with their predicted time on the device."""
    from planner.predict.api import op_rows
    model = model_of(model_key, config_text)
    req = _request(model, device, mode, json.loads(work_json), json.loads(layout_json))
    rows = op_rows(req, context(), model)
    return pd.DataFrame([{"graph": g, "op": r.op, "role": r.role, "category": r.category, "count": r.count,
                          "flop": r.flop, "bytes": r.bytes, "time_s": r.time_s, "bound": r.bound}
                         for g, group in rows.items() for r in group])


# ------------------------------------------------------------------ inputs

def _inputs() -> dict | None:
    """The page's inputs, or None when a model is still missing."""
    from planner.app.hardware import added_devices
    from planner.workload.engines import engines
    from planner.workload.quant import recipe_names
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(key, value + added_devices() if key == "devices" else value)
    source = st.radio("Model", ["Zoo", "Upload config.json"], horizontal=True, key="model_source",
                      help="A model of planner's zoo, or a Hugging Face config.json of your own (read as data)")
    config_text = None
    if source == "Zoo":
        ids = zoo_ids()
        model_key = st.selectbox("Zoo model", ids, key="model",
                                 help="Architectures with their published configs: parameter counts are exact")
    else:
        config_text = upload_text("Hugging Face style config.json", ["json"], "config_upload",
                                  help="model_type llama, mistral, mixtral, qwen2, gemma2, gpt2, gptj, bert, vit, resnet...")
        if config_text is None:
            st.info("Upload a config.json (model_type llama, mistral, mixtral, gpt2, gptj, bert, vit or resnet).")
            return None
        model_key = "uploaded config.json"
    mode = st.radio("Mode", ["inference", "training"], horizontal=True, key="mode",
                    help="Serving one batch (prefill then decode for a language model), or a training step")
    work: dict = {}
    if mode == "inference":
        work["batch"] = int(st.number_input("Batch", 1, 4096, key="batch", help="Requests (or images) per step"))
        work["input_len"] = int(st.number_input("Input tokens", 1, 131072, key="input_len",
                                                help="Prompt length per request (language models)"))
        work["output_len"] = int(st.number_input("Output tokens", 1, 32768, key="output_len",
                                                 help="Tokens generated per request (language models)"))
    else:
        work["seq_len"] = int(st.number_input("Sequence length (tokens)", 1, 131072, key="seq_len",
                                              help="Tokens per training sample"))
        work["micro_batch"] = int(st.number_input("Micro-batch", 1, 1024, key="wl_micro_batch",
                                                  help="Samples per device per forward-backward pass"))
        global_batch = int(st.number_input("Global batch (sequences per step, 0 = micro-batch x data parallel)",
                                           0, 1_000_000, key="wl_global_batch",
                                           help="Samples per optimizer step over all replicas; fixed, layouts "
                                                "compare at the same batch (0 lets it follow the layout)"))
        if global_batch:
            work["global_batch"] = global_batch
        work["zero"] = int(st.selectbox("ZeRO stage", [0, 1, 2, 3], key="wl_zero",
                                        help="0: replicated optimizer; 1: optimizer states sharded over data "
                                             "parallel; 2: and gradients; 3: and weights"))
        work["recompute"] = st.selectbox("Recompute", ["none", "selective", "full"], key="wl_recompute",
                                         help="Activation recomputation: full keeps only each layer's input")
        work["mixed_precision"] = st.selectbox("Mixed precision", ["auto", "amp", "master"], key="wl_mixed",
                                               help="amp: torch.autocast over fp32 weights (plain PyTorch); master: "
                                                    "16-bit weights with an fp32 master copy (Megatron, DeepSpeed); "
                                                    "auto: the engine's own")
        billions = float(st.number_input("Training run (billion tokens; 0 = no run total)", 0.0, MAX_TRAIN_BTOKENS,
                                         step=1.0, format="%.3f", key="wl_train_btokens",
                                         help="Tokens the whole run trains on (images, for a model without "
                                              "sequences): its steps x the step time gives the run's time, cost "
                                              "($/h of the deployment) and energy"))
        if billions > 0:
            work["train_tokens"] = billions * 1e9
    base = st.selectbox("Dtype", DTYPES, key="dtype", help="Every float at this dtype (the base precision)")
    recipes = ["(none)", *recipe_names()]
    recipe = st.selectbox("Quantization recipe", recipes, key="wl_recipe",
                          help="A recipe from hardware_specs/quant/recipes.json (fp8, w4a16, nvfp4...): it sets "
                               "weights, activations and KV cache together, with their scales")
    parts = {}
    for part, label in (("weights", "Weights"), ("activations", "Activations"), ("kv_cache", "KV cache")):
        value = st.selectbox(f"{label} dtype", PART_DTYPES, key=f"wl_{part}",
                             help=f"Override the {label.lower()} only (LLM-Viewer style split)")
        if value != PART_DTYPES[0]:
            parts[part] = value
    from planner.workload.quant import compose
    dtype = shown(compose, None if recipe != "(none)" else base, recipe if recipe != "(none)" else None, **parts)
    if dtype is None:
        return None
    work["dtype"] = dtype
    names = [NO_ENGINE, *sorted(engines())]
    engine = st.selectbox("Engine", names, key="wl_engine",
                          help="How the stack runs the graph: eager, torch.compile, TensorRT(-LLM), vLLM, SGLang, "
                               "Megatron (fusions, launches and kernel libraries: hardware_specs/engines)")
    if engine != names[0]:
        work["engine"] = engine
    st.session_state["devices"] = [d for d in st.session_state["devices"] if d in device_ids()]
    devices = st.multiselect("Devices", device_ids(), key="devices", help="Catalog devices and your own (Your hardware page)")
    how = st.radio("Deployment", [SMALLEST, "Set GPUs and layout"], key="wl_deploy", horizontal=True,
                   help="Smallest that fits: the fewest devices (and the fastest tensor x pipeline layout on them) "
                        "whose memory holds the workload. Or set the count and layout yourself")
    layout = None
    if how != SMALLEST:
        c = st.columns(3)
        layout = {"gpus": int(c[0].number_input("GPUs", 1, 65536, key="wl_gpus", help="Devices in all")),
                  "tp": int(c[1].number_input("TP", 1, 64, key="wl_tp",
                                              help="Tensor-parallel size (within one node)")),
                  "pp": int(c[2].number_input("PP", 1, 128, key="wl_pp", help="Pipeline stages"))}
    return {"model_key": model_key, "config_text": config_text, "mode": mode, "work": work, "devices": devices,
            "layout": layout}


# ------------------------------------------------------------------ the table of devices

def _range(lo, hi, scale: float = 1.0, digits: int = 1) -> str:
    if lo is None or hi is None:
        return ""
    return f"{lo * scale:,.{digits}f}–{hi * scale:,.{digits}f}"


def _layout_text(layout: dict | None) -> str:
    if not layout:
        return ""
    dp = max(1, layout["gpus"] // (layout["tp"] * layout["pp"]))
    return f"{layout['gpus']} GPU{'s' * (layout['gpus'] != 1)}: tp {layout['tp']} × pp {layout['pp']} × dp {dp}"


def _row(device: str, r: dict | None) -> dict:
    """The table row of one device's result: headline numbers only when the deployment fits."""
    from planner.units import band
    if r is None:
        return {"device": device, "fits": False, "note": "could not be predicted (the error is shown above)"}
    if r["p"] is None:
        return {"device": device, "fits": False, "note": r.get("error") or "nothing up to 4,096 devices fits"}
    p, s = r["p"], r["summary"]
    row = {"device": device, "fits": bool(p["fits"]), "deployment": _layout_text(r["layout"]), "tier": p["tier"],
           "memory per GPU (GB)": p["memory"]["total_bytes"] / 1e9,
           "capacity per GPU (GB)": p["memory"]["capacity_bytes"] / 1e9}
    if not p["fits"]:
        short = p["memory"]["shortfall_bytes"] / 1e9
        fit = f"smallest that fits: {_layout_text(r['fit'])}" if r["fit"] else "nothing up to 4,096 devices fits"
        return {**row, "note": f"does not fit: {short:,.1f} GB per GPU over capacity; {fit}"}
    frac = p["band_fraction"]
    lat, thr = s.get("latency_s"), s.get("throughput")
    lat_lo, lat_hi = band(lat, frac) if lat else (None, None)
    thr_lo, thr_hi = band(thr, frac, inverse=True) if thr else (None, None)
    per = s.get("usd_per_unit")
    per_lo, per_hi = band(per, frac) if per and per == per else (None, None)  # a cost per unit scales as a time
    run = {}
    if p.get("time_to_train_s"):  # a training run of the tokens asked for: its time, cost and energy
        run_cost = p.get("cost_to_train_usd")
        cost_lo, cost_hi = band(run_cost, frac) if run_cost else (None, None)  # steps x step time x $/h
        run = {"time to train (h)": p["time_to_train_s"] / 3600, "run cost ($)": run_cost,
               "run cost range ($)": _range(cost_lo, cost_hi, 1, 0),
               "run energy (kWh)": p["energy_to_train_j"] / 3.6e6 if p.get("energy_to_train_j") else None}
    return {**row, "latency (ms)": lat * 1e3 if lat else None, "latency range (ms)": _range(lat_lo, lat_hi, 1e3),
            "throughput (/s)": thr, "throughput range (/s)": _range(thr_lo, thr_hi, 1, 0),
            "throughput low (/s)": thr_lo, "throughput high (/s)": thr_hi,
            "$/h": s.get("usd_per_h"), "$ per unit": per,
            "$ per unit low": per_lo, "$ per unit high": per_hi, **run,
            "J per unit": s.get("j_per_unit"), "price date": dated(s.get("price_date")) or "",
            "note": app_words(s.get("note") or "")}


def _unit_names(mode: str, family: str, tokens: bool = True) -> tuple[str, str]:
    """(throughput unit, cost unit) for the table's headers. Training counts what summary_row counts: the
    tokens of a model of sequences (`tokens`: its predictions have tokens_per_s), else samples, its cost per
    unit the $/h over a million of them per hour."""
    if mode == "training":
        return ("tokens/s", "1M tokens") if tokens else ("samples/s", "1M samples")
    return ("output tokens/s", "1M output tokens") if family == "decoder" else ("samples/s", "1k samples")


RUN_COLUMNS = ["time to train (h)", "run cost ($)", "run cost range ($)", "run energy (kWh)"]
"""A training run's columns (training mode, when the run's tokens are given)."""


def _table(rows: list[dict], thr_unit: str, cost_unit: str, mode: str = "inference") -> None:
    frame = pd.DataFrame(rows)
    names = {"throughput (/s)": f"throughput ({thr_unit})", "throughput range (/s)": f"throughput range ({thr_unit})",
             "$ per unit": f"$ per {cost_unit}", "J per unit": f"J per {cost_unit.removeprefix('1M ').removeprefix('1k ').removesuffix('s')}"}
    if mode == "training":  # a training step's time is its step time, not a request's latency
        names.update({"latency (ms)": "step time (ms)", "latency range (ms)": "step time range (ms)"})
    run = [c for c in RUN_COLUMNS if c in frame] if mode == "training" else []
    order = ["device", "fits", "deployment", "tier", "latency (ms)", "latency range (ms)", "throughput (/s)",
             "throughput range (/s)", "$/h", "$ per unit", *run, "J per unit", "note", "memory per GPU (GB)",
             "capacity per GPU (GB)", "price date"]
    frame = frame.reindex(columns=order).rename(columns=names)
    # cells a row does not have (times of a deployment that cannot run): null, shown blank by the Styler's
    # na_rep (a "" in a number column would make Arrow refuse the column, and Streamlit log a traceback)
    frame = frame.astype(object).map(lambda v: None if v is None or v != v else v)
    styled = frame.style.apply(lambda r: [GREY if not r["fits"] else "" for _ in r], axis=1).format(
        precision=2, thousands=",", na_rep="")
    st.dataframe(styled, hide_index=True)
    scroll_hint(frame, "the ranges, cost, energy, memory and notes")


def scroll_hint(frame: pd.DataFrame, what: str = "all") -> None:
    """Say that a table wider than the page at 1,280 px scrolls (its last columns are off to the right), as the
    Serving page does."""
    if len(frame.columns) > 6:
        st.caption(f"{len(frame.columns)} columns: scroll the table sideways (or enlarge it, top right) for {what}.")


def price_basis(mode: str, family: str, batch: int | None = None) -> str:
    """What the page's cost per unit of work assumes (planner/predict/inference.py and training.py: the
    deployment's $/h over the units it delivers per hour), and where the price under a load is."""
    if mode == "training":
        return ("$ per 1M tokens (samples, for a model without sequences) here: the deployment's $/h over what it "
                "trains on per hour, steps back to back on every GPU rented.")
    unit = "1M output tokens" if family == "decoder" else "1k samples"
    what = (f"one fixed batch of {batch:,} requests per model copy, every slot busy, prefill and decode together, "
            "batch after batch; prompt tokens cost time but are not counted" if family == "decoder" else
            f"one fixed batch of {batch:,} samples per model copy, batch after batch") if batch else \
        "one fixed batch per model copy, every slot busy, batch after batch"
    return (f"$ per {unit} here: the deployment's $/h over its output per hour for {what}; every rented hour "
            "busy, no wait for requests. The Serving page gives the price under a load: requests arriving at a "
            "rate, batches as full as the load keeps them (often partly filled), queueing.")


def _chart(rows: list[dict], thr_unit: str, cost_unit: str) -> None:
    fitting = pd.DataFrame([r for r in rows if r.get("fits") and r.get("throughput (/s)")])
    if fitting.empty:
        return
    metric = st.radio("Chart", [f"throughput ({thr_unit})", f"$ per {cost_unit}"], horizontal=True,
                      key="chart_metric", help="Bars are the prediction; whiskers its band (the measured error of its tier on its device family)")
    if metric.startswith("throughput"):
        data = fitting.assign(value=fitting["throughput (/s)"], low=fitting["throughput low (/s)"],
                              high=fitting["throughput high (/s)"])
    else:
        data = fitting.dropna(subset=["$ per unit"]).assign(value=lambda d: d["$ per unit"],
                                                            low=lambda d: d["$ per unit low"],
                                                            high=lambda d: d["$ per unit high"])
        if data.empty:
            st.caption("No fitting device has a catalog price.")
            return
    order = "descending" if metric.startswith("throughput") else "ascending"  # best first
    base = alt.Chart(data).encode(x=alt.X("device:N", sort=alt.EncodingSortField("value", order=order),
                                          title="device"))
    bars = base.mark_bar().encode(y=alt.Y("value:Q", title=metric), color=alt.Color("tier:N", title="tier", scale=tier_scale()),
                                  tooltip=["device", "deployment", "tier", alt.Tooltip("value:Q", format=",.3g"),
                                           alt.Tooltip("low:Q", format=",.3g"), alt.Tooltip("high:Q", format=",.3g")])
    whiskers = base.mark_errorbar(ticks=True).encode(y=alt.Y("low:Q", title=metric), y2="high:Q")
    st.altair_chart(bars + whiskers, width="stretch")


# ------------------------------------------------------------------ one device in detail

def _metrics(p: dict) -> None:
    from planner.units import band
    frac = p["band_fraction"]
    cols = st.columns(4)

    def timed(col, label, seconds):
        lo, hi = band(seconds, frac)
        col.metric(label, fmt_s(seconds), f"{fmt_s(lo)} – {fmt_s(hi)}", delta_color="off", delta_arrow="off",
                   help=_band_help(p, frac))

    def rate(col, label, value, unit):
        lo, hi = band(value, frac, inverse=True)
        # the unit in the label: a value of 7 digits and its unit do not fit a quarter of the page's width
        col.metric(f"{label} ({unit})", f"{value:,.0f}", f"{lo:,.0f} – {hi:,.0f}", delta_color="off", delta_arrow="off",
                   help=_band_help(p, frac))

    if p["mode"] != "training" and p.get("ttft_s") is not None:
        timed(cols[0], "TTFT", p["ttft_s"])
        timed(cols[1], "TPOT", p["tpot_s"])
        rate(cols[2], "throughput", p["throughput_tokens_per_s"], "tokens/s")
    elif p["mode"] != "training":
        timed(cols[0], "latency", p["latency_s"])
        rate(cols[1], "throughput", p["throughput_samples_per_s"], "samples/s")
    else:
        timed(cols[0], "step time", p["step_time_s"])
        if p.get("tokens_per_s"):
            rate(cols[1], "throughput", p["tokens_per_s"], "tokens/s")
        elif p.get("samples_per_s"):
            rate(cols[1], "throughput", p["samples_per_s"], "samples/s")
        if p.get("mfu") is not None:
            cols[2].metric("MFU", f"{p['mfu']:.1%}", help="Model FLOP utilization: model FLOP per second over the "
                           "devices' dense peak at the compute dtype")
    cols[3].metric("tier", p["tier"], f"band {band_text(p['band_fraction'])}", delta_color="off", delta_arrow="off",
                   help="Where the efficiencies come from: measured, published, transferred or datasheet; the band "
                        "is how far the figures may be off either way: " + (p.get("band_basis") or "the kernels' error"))
    _cost_metrics(p, frac)


def money(usd) -> str:
    """Dollars for a metric: whole dollars from $100, cents from $1, three significant digits below."""
    if usd is None or math.isnan(usd):
        return "-"
    if usd >= 100:
        return f"${usd:,.0f}"
    if usd >= 1:
        return f"${usd:,.2f}"
    digits = min(8, 2 - math.floor(math.log10(usd))) if usd > 0 else 2
    return f"${usd:.{digits}f}"


def energy_text(joules: float) -> str:
    """Energy for a metric: kWh below 10 MWh, MWh above."""
    kwh = joules / 3.6e6
    return f"{kwh:,.0f} kWh" if kwh < 10_000 else f"{kwh / 1e3:,.1f} MWh"


def duration(seconds: float) -> str:
    """A run's length: hours up to two days, then days."""
    return f"{seconds / 3600:,.1f} h" if seconds < 2 * 86400 else f"{seconds / 86400:,.1f} days"


def _band_help(p: dict, frac: float) -> str:
    """The help of a figure's range: its tier's band and where the band comes from."""
    return f"Range: the {p['tier']} tier's band, {band_text(frac)} ({p.get('band_basis') or 'its kernels'})"


def _cost_metrics(p: dict, frac: float) -> None:
    """The second row: what a training run costs, takes and draws (training with its tokens given), or the
    price per unit of work with what it assumes (inference)."""
    from planner.units import band
    ranged = {"delta_color": "off", "delta_arrow": "off"}
    band_help = _band_help(p, frac)
    cols = st.columns(4)
    if p["mode"] == "training":
        if not p.get("time_to_train_s"):
            st.caption("Give the training run's tokens (left) for its time, cost and energy.")
            return
        lo, hi = band(p["time_to_train_s"], frac)
        tokens = f"{p['train_tokens']:,.0f} {p.get('train_unit') or 'tokens'}"
        cols[0].metric("time to train", duration(p["time_to_train_s"]), f"{duration(lo)} – {duration(hi)}", **ranged,
                       help=f"{tokens}: steps x the step time. {band_help}")
        cost = p.get("cost_to_train_usd")
        if cost:
            lo, hi = band(cost, frac)  # steps x step time x $/h: a cost scales as a time
            cols[1].metric("training run cost", money(cost), f"{money(lo)} – {money(hi)}", **ranged,
                           help=f"{tokens}: steps x step time x the deployment's ${p['cost_usd_per_h']:,.2f}/h "
                                f"({p.get('cost_basis')}, price of {dated(p.get('price_date'))}). {band_help}")
        else:
            cols[1].metric("training run cost", "-", help="No catalog price for this deployment (see the notes)")
        energy = p.get("energy_to_train_j")
        if energy:
            kwh = p.get("kwh_per_training_run")
            facility = f"; {energy_text(kwh * 3.6e6)} at the facility (PUE {p.get('pue', 1):g})" if kwh else ""
            cols[2].metric("training run energy", energy_text(energy),
                           help=f"The devices' draw over the run's steps{facility}")
        carbon = p.get("carbon_kg_per_training_run")
        if carbon:
            cols[3].metric("training run carbon", f"{carbon / 1e3:,.1f} t CO2e",
                           help="Facility energy at the region's grid carbon intensity")
        return
    per, unit = ((p.get("usd_per_million_output_tokens"), "1M output tokens") if p.get("ttft_s") is not None
                 else (p.get("usd_per_thousand_samples"), "1k samples"))
    if per:
        lo, hi = band(per, frac)
        cols[0].metric(f"$ per {unit}", money(per), f"{money(lo)} – {money(hi)}", **ranged,
                       help=price_basis(p["mode"], "decoder" if p.get("ttft_s") is not None else "",
                                        p.get("batch")) + f" {band_help}")


def _memory_chart(p: dict) -> None:
    mem = p["memory"]
    parts = pd.DataFrame([{"part": k.removesuffix("_bytes").replace("_", " "), "GB": v / 1e9}
                          for k, v in mem.items() if k.endswith("_bytes") and v
                          and k not in ("total_bytes", "capacity_bytes", "shortfall_bytes")])
    cap = mem["capacity_bytes"] / 1e9
    st.caption(f"Memory per device: {mem['total_bytes'] / 1e9:,.1f} GB of {cap:,.1f} GB usable "
               f"({'fits' if p['fits'] else 'does not fit'}); the red line is the capacity")
    if parts.empty:
        return
    bars = alt.Chart(parts).mark_bar().encode(x=alt.X("sum(GB):Q", title="GB per device"),
                                              color=alt.Color("part:N", title="part"),
                                              tooltip=["part", alt.Tooltip("GB:Q", format=",.2f")])
    rule = alt.Chart(pd.DataFrame({"GB": [cap], "label": [f"capacity {cap:,.1f} GB"]})).mark_rule(
        color="red", strokeWidth=2).encode(x="GB:Q", tooltip=[alt.Tooltip("label:N", title="capacity")])
    st.altair_chart((bars + rule).properties(height=90), width="stretch")


def _roofline(ops: pd.DataFrame, device_id: str, dtype: str) -> None:
    """Every op at its predicted FLOP/s over its arithmetic intensity, under the device's ceilings."""
    ops = ops[(ops["flop"] > 0) & (ops["bytes"] > 0) & (ops["time_s"] > 0)]
    if ops.empty:
        return
    points = ops.assign(**{"intensity (FLOP/byte)": ops["flop"] / ops["bytes"],
                           "achieved (FLOP/s)": ops["flop"] / ops["time_s"]})
    st.caption(f"Roofline of {device_id} (log-log): each op's predicted FLOP/s against its arithmetic intensity, "
               "under the datasheet ceilings; ops sit below them by the device's measured efficiency")
    st.altair_chart(roofline_chart(points, context().device(device_id), dtype, "predicted (FLOP/s)",
                                   ["op", "graph", "category", "count", "bound"]), width="stretch")


def _detail(args: dict, results: dict) -> None:
    st.subheader("One device in detail")
    device = st.selectbox("Device", args["devices"], key="detail_device",
                          help="Its metrics with their ranges, memory against capacity, and every op on its roofline")
    r = results.get(device)
    if r is None or r["p"] is None:
        st.warning(f"{device}: {(r or {}).get('error') or 'nothing to show (see its row above)'}")
        return
    p = r["p"]
    st.caption(f"{_layout_text(r['layout'])}; {p['precision']}; engine {p['engine']}; efficiencies: {p['tier']} "
               f"({p.get('profile') or 'datasheet'})")
    if not p["fits"]:
        short = p["memory"]["shortfall_bytes"] / 1e9
        fit = f"The smallest deployment that fits: {_layout_text(r['fit'])}." if r["fit"] else \
            "Nothing up to 4,096 devices fits."
        st.warning(f"Does not fit: {p['memory']['total_bytes'] / 1e9:,.1f} GB per device against "
                   f"{p['memory']['capacity_bytes'] / 1e9:,.1f} GB usable ({short:,.1f} GB short). {fit} Times are "
                   "not shown for a deployment that cannot run.")
        _memory_chart(p)
        return
    _metrics(p)
    notes = p.get("notes") or []
    if notes:
        with st.expander(f"Notes on this prediction ({len(notes)})"):
            st.markdown("\n".join(f"- {app_words(note)}" for note in notes))
    _memory_chart(p)
    ops = shown(op_table, hardware_key(), args["model_key"], args["config_text"], device, args["mode"],
                json.dumps(args["work"], sort_keys=True), json.dumps(r["layout"], sort_keys=True))
    if ops is None or ops.empty:
        return
    _roofline(ops, device, p["dtype"])
    table = ops.sort_values("time_s", ascending=False).assign(
        **{"time (ms)": lambda d: d["time_s"] * 1e3, "GFLOP": lambda d: d["flop"] / 1e9,
           "MB moved": lambda d: d["bytes"] / 1e6}).drop(columns=["time_s", "flop", "bytes"])
    st.dataframe(table.style.format(precision=2, thousands=","), hide_index=True)
    scroll_hint(table)


def page() -> None:
    from planner.app.workload_address import restore_link, write_link  # here: it imports this module
    purpose("Workload: how fast, how big, how costly on each device",
            "One model under one workload on many devices, then one device in detail: parallel layout, engine, "
            "quantization, roofline and memory.")
    restore_link()
    left, right = st.columns([1, 2])
    with left:
        args = _inputs()
    if args is None:
        return
    write_link(args)
    with left:
        st.caption("The address bar now holds these inputs: copy it to share this estimate"
                   + (" (an uploaded config.json is not carried: the link opens the default model)."
                      if args["config_text"] is not None else "."))
    if not args["devices"]:
        with right:
            st.info("Pick at least one device.")
        return
    model = shown(model_of, args["model_key"], args["config_text"])
    if model is None:
        return
    work_json = json.dumps(args["work"], sort_keys=True)
    layout_json = json.dumps(args["layout"], sort_keys=True) if args["layout"] else None
    results = {}
    with right:
        for device in args["devices"]:
            results[device] = shown(device_result, hardware_key(), args["model_key"], args["config_text"], device,
                                    args["mode"], work_json, layout_json)
        tokens = any(r and r["p"] and r["p"].get("tokens_per_s") for r in results.values())
        thr_unit, cost_unit = _unit_names(args["mode"], model.family, tokens)
        rows = [_row(d, results[d]) for d in args["devices"]]
        _table(rows, thr_unit, cost_unit, args["mode"])
        st.caption(price_basis(args["mode"], model.family, args["work"].get("batch")))
        st.caption("Greyed rows cannot run as asked: over the memory of the device (the note gives the shortfall and "
                   "the smallest deployment that fits) or not runnable there (the note says why). Ranges are each "
                   "prediction's band: the measured error of its tier on its device family (Calibration and accuracy "
                   "page).")
        from planner.predict.api import tier_note
        mixed = tier_note(r.get("tier") for r in rows)
        if mixed:
            st.caption(f"Note: {mixed}.")
        stale = [r["device"] for r in rows if str(r.get("price date", "")).endswith("stale")]
        if stale:
            st.warning(f"Stale price (over 12 months old) behind {', '.join(stale)}: the cheapest catalog offer is "
                       "used whatever its date; check it, or price it on the Cost page with an override.")
        _chart(rows, thr_unit, cost_unit)
    _detail(args, results)
