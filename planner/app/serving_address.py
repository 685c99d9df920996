"""The Serving page's address (a shareable link): its inputs, mix and deployments compared written to the query
parameters, and read back from them once a session (a bad value ignored, said in one line)."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from planner.app.common import device_ids
from planner.app.plan import MIX_LABELS
from planner.app.serving import (
    DTYPES,
    FIXED,
    LENGTH_MODES,
    MAX_INPUT_TOKENS,
    MAX_OUTPUT_TOKENS,
    NO_ENGINE,
    NO_RECIPE,
    PRESET,
    decoder_ids,
    length_presets,
    mix_buckets,
    serving_engines,
)
from planner.app.serving_compare import DEPLOY_LABELS, deployments_of
from planner.errors import ConfigError

ADDRESS = {"model": "serve_model", "device": "serve_device", "gpus": "serve_gpus", "tp": "serve_tp",
           "engine": "serve_engine", "dtype": "serve_dtype", "recipe": "serve_recipe", "lengths": "serve_length_mode",
           "input": "serve_input_len", "output": "serve_output_len", "preset": "serve_preset",
           "ttft_ms": "serve_slo_ttft_ms", "tpot_ms": "serve_slo_tpot_ms", "stat": "serve_slo_stat",
           "rate": "serve_rate_rps", "requests": "serve_requests", "points": "serve_points", "pricing": "serve_pricing"}
"""Query parameter -> the input (session_state key) it sets; besides these: page=Serving, mix (the mix table,
"512:128:0.7,1024:256:0.3") and compare (the deployments compared, "h100-sxm:1:1:default:bf16;...")."""
NO_TARGET_WORD = "none"
"""An SLO left empty (no target) in the address."""
DEFAULT_WORD = "default"
"""The default engine, and no recipe, in the address."""


def _address_choices() -> dict:
    """The values each text parameter may take, and the (low, high, whole) range of each number."""
    from planner.hardware.catalog import PRICINGS
    from planner.workload.quant import recipe_names
    return {"model": decoder_ids(), "device": device_ids(), "engine": [DEFAULT_WORD, *serving_engines()],
            "dtype": DTYPES, "recipe": [DEFAULT_WORD, *recipe_names()], "lengths": list(LENGTH_MODES),
            "preset": list(length_presets()), "stat": ["p50", "p90", "p99", "mean"], "pricing": list(PRICINGS),
            "gpus": (1, 4096, True), "tp": (1, 64, True), "input": (1, MAX_INPUT_TOKENS, True),
            "output": (1, MAX_OUTPUT_TOKENS, True), "ttft_ms": (0.0, 1e6, False), "tpot_ms": (0.0, 1e6, False),
            "rate": (0.0, 1e6, False), "requests": (100, 5000, True), "points": (2, 20, True)}


def _address_number(text: str, low: float, high: float, whole: bool):
    """The number in `text` within [low, high] (an int when `whole`), or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or not low <= value <= high or whole and not value.is_integer():
        return None
    return int(value) if whole else value


def from_address(params: dict[str, str]) -> tuple[dict, list[str]]:
    """The inputs a page address sets: ({session_state key: value}, ["name=value (why)" of each parameter
    ignored]). Unknown parameters are left alone (the address may carry others'); a bad value is ignored."""
    choices, values, bad = _address_choices(), {}, []
    for name, key in ADDRESS.items():
        if name not in params:
            continue
        text, valid = str(params[name]).strip(), choices[name]
        if name in ("ttft_ms", "tpot_ms") and text == NO_TARGET_WORD:
            values[key] = None  # the input left empty: no target
            continue
        if isinstance(valid, tuple):
            value = _address_number(text, *valid)
            why = f"not a {'whole ' if valid[2] else ''}number in [{valid[0]:,}, {valid[1]:,}]"
        else:
            value = text if text in valid else None
            why = "not one of the page's choices"
        if value is None:
            bad.append(f"{name}={text[:40]} ({why})")
            continue
        values[key] = {"engine": NO_ENGINE, "recipe": NO_RECIPE}[name] if (
            name in ("engine", "recipe") and value == DEFAULT_WORD) else value
    if "mix" in params:
        try:
            frame = pd.DataFrame([dict(zip(MIX_LABELS, part.split(":"), strict=True))
                                  for part in str(params["mix"]).split(",")], columns=list(MIX_LABELS))
            mix = mix_buckets(frame)
            values["serve_mix_base"] = pd.DataFrame([dict(zip(MIX_LABELS, b, strict=True)) for b in mix])
        except (ConfigError, ValueError) as exc:
            why = str(exc) if isinstance(exc, ConfigError) else "not input:output:share rows separated by commas"
            bad.append(f"mix={str(params['mix'])[:40]} ({why})")
    if "compare" in params:
        try:
            frame = pd.DataFrame([dict(zip(DEPLOY_LABELS, part.split(":"), strict=True))
                                  for part in str(params["compare"]).split(";")], columns=list(DEPLOY_LABELS))
            frame["engine"] = frame["engine"].replace(DEFAULT_WORD, NO_ENGINE)
            checked = deployments_of(frame)  # as the table's rows are
            values["serve_cmp_base"] = pd.DataFrame([{**d, "engine": d["engine"] or NO_ENGINE} for d in checked],
                                                    columns=list(DEPLOY_LABELS))
            values["serve_compare"] = True
        except (ConfigError, ValueError) as exc:
            why = str(exc) if isinstance(exc, ConfigError) else "not device:gpus:tp:engine:dtype rows separated by ;"
            bad.append(f"compare={str(params['compare'])[:40]} ({why})")
    return values, bad


def read_address() -> None:
    """Once a session, before the widgets are drawn: the inputs in the page's address set the page's (a bad value
    is ignored, said in one line)."""
    ss = st.session_state
    if ss.get("serve_address_read"):
        return
    ss["serve_address_read"] = True
    params = {k: st.query_params[k] for k in st.query_params}
    if params.get("page", "Serving") != "Serving" or not set(params) & {*ADDRESS, "mix", "compare"}:
        return
    values, bad = from_address(params)
    for base, kept in (("serve_mix_base", "serve_mix_kept"), ("serve_cmp_base", "serve_cmp_kept")):
        if base in values:
            values[kept] = values[base]
    for key in ("serve_mix", "serve_cmp"):  # the tables start again from the address's rows
        ss.pop(key, None)
    ss.update(values)
    if bad:
        st.warning(f"Ignored from the page's address: {'; '.join(bad)}.")


def to_address(inp: dict, deployments: list[dict] | None) -> dict[str, str]:
    """The query parameters that restore the page's inputs `inp` (from serving._inputs) and the deployments compared."""
    ss = st.session_state
    params = {"page": "Serving"}
    for name, key in ADDRESS.items():
        value = ss.get(key)
        if value is None and name in ("ttft_ms", "tpot_ms"):
            params[name] = NO_TARGET_WORD
            continue
        if value is None or name in ("input", "output") and inp["length_mode"] != FIXED or \
                name == "preset" and inp["length_mode"] != PRESET:
            continue
        if value in (NO_ENGINE, NO_RECIPE):
            value = DEFAULT_WORD
        params[name] = format(value, ".12g") if isinstance(value, float) else str(value)
    if inp["mix"] is not None:
        params["mix"] = ",".join(f"{i}:{o}:{share:.12g}" for i, o, share in inp["mix"])
    if deployments:
        params["compare"] = ";".join(f"{d['device']}:{d['gpus']}:{d['tp']}:{d['engine'] or DEFAULT_WORD}:{d['dtype']}"
                                     for d in deployments)
    return params


def write_address(inp: dict, deployments: list[dict] | None) -> None:
    params = to_address(inp, deployments)
    if {k: st.query_params[k] for k in st.query_params} != params:
        st.query_params.from_dict(params)
