"""The Workload page's shareable link: the inputs that made an estimate written to the page's query
(st.query_params), and read back from a link's query once a session before the widgets are drawn (a value
the page does not offer is ignored, with one warning naming it)."""

from __future__ import annotations

import math

import streamlit as st

from planner.app.common import device_ids, zoo_ids
from planner.app.workload import DEFAULTS, DTYPES, MAX_TRAIN_BTOKENS, NO_ENGINE, PART_DTYPES, SMALLEST

DEPLOY_WORDS = {"smallest": SMALLEST, "set": "Set GPUs and layout"}
"""The deployment choice as a link spells it."""


def _link_fields() -> list[tuple[str, str, str, object]]:
    """(query key, session_state key, kind, what it may be) of every input a link carries: kind "int" or
    "float" with (low, high) as the widget allows, "choice" with the options, "list" with the options each
    item must be one of, "deploy" (DEPLOY_WORDS)."""
    from planner.workload.engines import engines
    from planner.workload.quant import recipe_names
    return [("model", "model", "choice", zoo_ids()), ("mode", "mode", "choice", ["inference", "training"]),
            ("batch", "batch", "int", (1, 4096)), ("input_len", "input_len", "int", (1, 131072)),
            ("output_len", "output_len", "int", (1, 32768)), ("seq_len", "seq_len", "int", (1, 131072)),
            ("micro_batch", "wl_micro_batch", "int", (1, 1024)), ("global_batch", "wl_global_batch", "int", (0, 1_000_000)),
            ("zero", "wl_zero", "choice", [0, 1, 2, 3]), ("recompute", "wl_recompute", "choice", ["none", "selective", "full"]),
            ("mixed", "wl_mixed", "choice", ["auto", "amp", "master"]),
            ("train_btokens", "wl_train_btokens", "float", (0.0, MAX_TRAIN_BTOKENS)),
            ("dtype", "dtype", "choice", DTYPES), ("recipe", "wl_recipe", "choice", ["(none)", *recipe_names()]),
            ("weights", "wl_weights", "choice", PART_DTYPES), ("activations", "wl_activations", "choice", PART_DTYPES),
            ("kv_cache", "wl_kv_cache", "choice", PART_DTYPES), ("engine", "wl_engine", "choice", [NO_ENGINE, *sorted(engines())]),
            ("devices", "devices", "list", device_ids()), ("deploy", "wl_deploy", "deploy", DEPLOY_WORDS),
            ("gpus", "wl_gpus", "int", (1, 65536)), ("tp", "wl_tp", "int", (1, 64)), ("pp", "wl_pp", "int", (1, 128))]


def _link_value(kind: str, allowed, text: str):
    """The input's value of a link's `text`, or None when the page does not offer it."""
    if kind in ("int", "float"):
        try:
            value = int(text) if kind == "int" else float(text)
        except ValueError:
            return None
        return value if math.isfinite(value) and allowed[0] <= value <= allowed[1] else None
    if kind == "choice":
        return next((a for a in allowed if str(a) == text), None)
    if kind == "deploy":
        return allowed.get(text)
    items = [t.strip() for t in text.split(",") if t.strip()]
    return items if items and all(t in allowed for t in items) and len(set(items)) == len(items) else None


def restore_link() -> None:
    """Once a session: the inputs a link's query carries (st.query_params, as write_link wrote them) into
    session_state before the widgets are drawn; a value the page does not offer is ignored, with one warning
    naming it."""
    ss = st.session_state
    if ss.get("wl_link_read"):
        return
    ss["wl_link_read"] = True
    query = st.query_params
    if query.get("page", "Workload") != "Workload":  # another page's link
        return
    bad = []
    for qkey, key, kind, allowed in _link_fields():
        if qkey not in query:
            continue
        text = ",".join(query.get_all(qkey)) if kind == "list" else query.get(qkey, "")
        value = _link_value(kind, allowed, text)
        if value is None:
            bad.append(f"{qkey}={text[:40]}")
        else:
            ss[key] = value
    if "model" in query and "model" not in [b.split("=")[0] for b in bad]:
        ss["model_source"] = "Zoo"
    if bad:
        st.warning(f"Ignored from the link (not a value this page offers): {', '.join(bad)}.")


def write_link(args: dict) -> None:
    """The inputs that made this estimate into the URL's query (st.query_params), so that the address bar
    holds a link that opens the page with them (restore_link). An uploaded config.json is not carried."""
    ss = st.session_state
    training = args["mode"] == "training"
    keys = {"model", "mode", "dtype", "recipe", "weights", "activations", "kv_cache", "engine", "devices", "deploy"}
    keys |= {"seq_len", "micro_batch", "global_batch", "zero", "recompute", "mixed", "train_btokens"} if training \
        else {"batch", "input_len", "output_len"}
    if args["layout"]:
        keys |= {"gpus", "tp", "pp"}
    params = {"page": "Workload"}
    for qkey, key, kind, _ in _link_fields():
        if qkey not in keys:
            continue
        value = ss.get(key)
        if kind == "list":
            params[qkey] = ",".join(value or [])
        elif kind == "deploy":
            params[qkey] = next(k for k, v in DEPLOY_WORDS.items() if v == value)
        elif kind == "float":
            params[qkey] = f"{value:g}"
        else:
            params[qkey] = str(value)
    for qkey, key, _, _ in _link_fields():  # an input at its first value need not be carried
        if qkey in params and qkey not in ("model", "mode") and ss.get(key) == DEFAULTS.get(key):
            params.pop(qkey)
    if args["config_text"] is not None:
        params.pop("model")
    if dict(st.query_params) != params:
        st.query_params.from_dict(params)
