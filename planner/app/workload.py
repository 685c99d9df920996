"""Workload page: one model on many devices, then one device in detail (planner.predict)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from planner.app.common import (
    context,
    dated,
    device_ids,
    fmt_s,
    hardware_key,
    model_of,
    purpose,
    shown,
    upload_text,
    zoo_ids,
)

DEFAULT_DEVICES = ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "mi300x", "l40s", "l4"]


@st.cache_data(show_spinner="Predicting on every device...")
def compare_table(hw: str, model_key: str, config_text: str | None, devices: tuple[str, ...], mode: str, batch, input_len: int,
                  output_len: int, seq_len: int | None, dtype: str) -> pd.DataFrame:
    from planner.predict import compare
    model = model_of(model_key, config_text)
    return compare(model, list(devices), mode, batch, input_len, output_len, seq_len, None, dtype, ctx=context())


@st.cache_data(show_spinner="Predicting...")
def prediction(hw: str, model_key: str, config_text: str | None, device: str, gpus: int, tp: int, mode: str, batch,
               input_len: int, output_len: int, seq_len: int | None, dtype: str) -> dict:
    from planner.predict import Request, op_rows, predict
    model = model_of(model_key, config_text)
    req = Request(model.name, device, mode, gpus=gpus, tp=tp, batch=batch, input_len=input_len, output_len=output_len,
                  seq_len=seq_len, dtype=dtype)
    p = predict(req, context(), model)
    rows = op_rows(req, context(), model)
    ops = pd.DataFrame([{"graph": g, "op": r.op, "role": r.role, "category": r.category, "count": r.count,
                         "flop": r.flop, "bytes": r.bytes, "time_s": r.time_s, "bound": r.bound}
                        for g, group in rows.items() for r in group])
    return {"prediction": p.as_dict(), "ops": ops}



def page() -> None:
    purpose("Workload: how fast, how big, how costly on each device", "One model under one workload on many devices, then one device in detail: parallel layout, engine, quantization, roofline and memory.")
    left, right = st.columns([1, 2])
    with left:
        source = st.radio("Model", ["Zoo", "Upload config.json"], horizontal=True, key="model_source")
        config_text = None
        if source == "Zoo":
            model_key = st.selectbox("Zoo model", zoo_ids(), index=zoo_ids().index("llama-3.1-8b"), key="model")
        else:
            config_text = upload_text("Hugging Face style config.json", ["json"], "config_upload")
            if config_text is None:
                st.info("Upload a config.json (model_type llama, mistral, mixtral, gpt2, gptj, bert, vit or resnet).")
                return
            model_key = "uploaded config.json"
        mode = st.radio("Mode", ["inference", "training"], horizontal=True, key="mode")
        batch = st.number_input("Batch", min_value=1, max_value=4096, value=8, key="batch")
        input_len = st.number_input("Input tokens", min_value=1, max_value=131072, value=1024, key="input_len")
        output_len = st.number_input("Output tokens", min_value=1, max_value=32768, value=256, key="output_len")
        seq_len = st.number_input("Training sequence length", min_value=1, max_value=131072, value=2048, key="seq_len")
        dtype = st.selectbox("Dtype", ["bf16", "fp16", "fp8", "fp32", "int8", "fp4"], key="dtype")
        devices = st.multiselect("Devices", device_ids(), default=DEFAULT_DEVICES, key="devices")
    with right:
        if not devices:
            st.info("Pick at least one device.")
            return
        table = shown(compare_table, hardware_key(), model_key, config_text, tuple(devices), mode, int(batch), int(input_len),
                       int(output_len), int(seq_len) if mode == "training" else None, dtype)
        if table is None:
            return
        cols = table[["device", "gpus", "fits", "tier", "band_fraction", "latency_s", "throughput", "usd_per_h",
                       "usd_per_unit", "j_per_unit", "memory_gb_per_gpu", "instance", "price_date", "note"]]
        cols = cols.assign(price_date=cols["price_date"].map(dated))
        st.dataframe(cols.rename(columns={"band_fraction": "band ±", "usd_per_unit": "$ per 1M tokens / 1k samples",
                                           "j_per_unit": "J per token / sample"}), hide_index=True)
        fitting = table[table["fits"] & table["latency_s"].notna()]
        if not fitting.empty:
            metric = st.radio("Chart", ["throughput", "latency_s", "usd_per_unit", "j_per_unit"], horizontal=True,
                              key="chart_metric")
            st.altair_chart(alt.Chart(fitting).mark_bar().encode(x=alt.X("device:N", sort="-y"), y=f"{metric}:Q",
                                                                 color="tier:N", tooltip=list(fitting.columns)[:10]),
                            width="stretch")
    st.subheader("One device in detail")
    options = list(table["device"]) if table is not None else devices
    device = st.selectbox("Device", options, key="detail_device")
    row = table[table["device"] == device].iloc[0] if table is not None and device in set(table["device"]) else None
    gpus = int(row["gpus"]) if row is not None and row["gpus"] == row["gpus"] and row["gpus"] else 1
    tp = int(row["tp"]) if row is not None and row["tp"] == row["tp"] and row["tp"] else 1
    detail = shown(prediction, hardware_key(), model_key, config_text, device, gpus, tp, mode, int(batch), int(input_len),
                    int(output_len), int(seq_len) if mode == "training" else None, dtype)
    if detail is None:
        return
    p = detail["prediction"]
    cols = st.columns(4)
    if mode == "inference" and p.get("ttft_s") is not None:
        cols[0].metric("TTFT", fmt_s(p["ttft_s"]))
        cols[1].metric("TPOT", fmt_s(p["tpot_s"]))
        cols[2].metric("tokens/s", f"{p['throughput_tokens_per_s']:,.0f}")
    elif mode == "inference":
        cols[0].metric("latency", fmt_s(p["latency_s"]))
        cols[1].metric("samples/s", f"{p['throughput_samples_per_s']:,.1f}")
    else:
        cols[0].metric("step time", fmt_s(p["step_time_s"]))
        cols[1].metric("tokens/s", f"{p['tokens_per_s']:,.0f}")
        cols[2].metric("MFU", f"{p['mfu']:.1%}")
    cols[3].metric("tier", p["tier"], f"band ±{p['band_fraction']:.0%}", delta_color="off")
    memory = pd.DataFrame([{"part": k.removesuffix("_bytes"), "GB": v / 1e9} for k, v in p["memory"].items()
                           if k.endswith("_bytes") and k not in ("total_bytes", "capacity_bytes", "shortfall_bytes")])
    st.caption(f"Memory per device: {p['memory']['total_bytes'] / 1e9:.1f} GB of "
               f"{p['memory']['capacity_bytes'] / 1e9:.1f} GB usable ({'fits' if p['fits'] else 'does not fit'})")
    st.altair_chart(alt.Chart(memory).mark_bar().encode(x="GB:Q", y=alt.Y("part:N", sort="-x")),
                    width="stretch")
    ops = detail["ops"]
    ops = ops[(ops["flop"] > 0) & (ops["bytes"] > 0) & (ops["time_s"] > 0)].assign(
        intensity=lambda d: d["flop"] / d["bytes"], flop_per_s=lambda d: d["flop"] / d["time_s"])
    st.caption("Roofline: every op of the model as a point (log-log)")
    st.altair_chart(alt.Chart(ops).mark_circle(size=60).encode(
        x=alt.X("intensity:Q", scale=alt.Scale(type="log"), title="FLOP per byte"),
        y=alt.Y("flop_per_s:Q", scale=alt.Scale(type="log"), title="FLOP/s"), color="bound:N",
        tooltip=["op", "graph", "category", "count", "bound"]), width="stretch")
    st.dataframe(detail["ops"].sort_values("time_s", ascending=False), hide_index=True)
