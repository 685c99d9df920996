"""Start page: what the app answers, and three starting points with presets (serve, train, plan)."""

from __future__ import annotations

import streamlit as st

from planner.app.common import purpose

PRESETS = {
    "serve": ("Serving", {"serve_model": "llama-3.1-70b", "serve_device": "h100-sxm", "serve_gpus": 8, "serve_tp": 8,
                          "serve_length_mode": "fixed", "serve_input_len": 1024, "serve_output_len": 256,
                          "serve_slo_ttft_ms": 2000.0, "serve_slo_tpot_ms": 100.0}),
    "train": ("Workload", {"model_source": "Zoo", "model": "llama-3.1-8b", "mode": "training", "seq_len": 8192,
                           "wl_micro_batch": 1, "wl_zero": 1, "wl_recompute": "full", "wl_engine": "megatron",
                           "wl_deploy": "Set GPUs and layout", "wl_gpus": 64, "wl_tp": 1, "wl_pp": 1}),
    "plan": ("Plan", {"plan_mode": "Scenario YAML (advanced)", "plan_source": "Example", "plan_example": "hybrid.yaml"}),
}
"""Each starting point: the page it opens and the inputs it sets there (session_state keys of that page)."""


def _go(name: str) -> None:
    page, values = PRESETS[name]
    st.session_state.update(values)
    st.session_state["page"] = page


def page() -> None:
    purpose("planner: what will it cost to run this model, and on what?",
            "Before you own a GPU: how fast a model runs on each device, under your load and serving or training "
            "stack; what that costs to rent or to own; how much energy it draws; and which mix of instances meets "
            "your demand at the least cost. Every number comes with its source, its date and an error band.")
    cols = st.columns(3)
    with cols[0]:
        st.subheader("Serve a model")
        st.write("Llama 3.1 70B on 8 H100s under an SLO of 2 s to the first token and 100 ms per token: the "
                 "latency–throughput curve, the highest request rate that meets the SLO, $ and J per 1M tokens.")
        st.button("Open Serving with this preset", key="start_serve", on_click=_go, args=("serve",), type="primary")
    with cols[1]:
        st.subheader("Train a model")
        st.write("Llama 3.1 8B on 64 GPUs with Megatron, 8k-token sequences, ZeRO-1: step time, MFU, memory per GPU against its "
                 "capacity, and the cost of the run on every device.")
        st.button("Open Workload with this preset", key="start_train", on_click=_go, args=("train",), type="primary")
    with cols[2]:
        st.subheader("Plan a fleet")
        st.write("A hybrid on-prem and cloud scenario: the instance mix that meets the demand at the least cost, "
                 "what each workload runs on, price sensitivity, break-even and carbon.")
        st.button("Open Plan with this preset", key="start_plan", on_click=_go, args=("plan",), type="primary")
    st.markdown(
        "**The pages.** *Workload*: one model on many devices, then one in detail (parallel layout, engine, "
        "quantization, roofline, memory). *Serving*: continuous batching under arrivals. *Cost*: renting against "
        "owning. *Plan*: the optimizer over a scenario. *Your hardware*: add a device the catalog lacks. *Sweep*: "
        "millions of configurations from `planner sweep`. *Trace*: a measured profiler trace against its roofline. "
        "*Calibration and accuracy*: where the efficiencies come from and how far predictions are from measurements.")
    st.caption("How accurate: each prediction carries its tier (measured, published, transferred or datasheet) and "
               "a band from the measured error of that tier on that device family; docs/accuracy.md gives the error against 250 published "
               "measurements and the command that measured it.")
