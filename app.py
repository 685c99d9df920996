"""planner's Streamlit app for procurement planning. Every number comes from the library: this file
only collects inputs, calls planner, and draws what it returns.

Run: .venv/bin/streamlit run app.py   (or `make demo`)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

ROOT = Path(__file__).resolve().parent
MAX_UPLOAD_BYTES = 1_000_000
PAGES = ("Workload", "Cost", "Plan", "Sweep", "Trace", "Calibration and accuracy")
DEFAULT_DEVICES = ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "mi300x", "l40s", "l4"]
TRACES = ROOT / "benchmarks" / "data" / "traces"
BUNDLED_TRACES = {
    "h100_llama1b_prefill_b1_s512_bf16.json.gz": "Llama-3.2-1B prefill, 512 tokens, batch 1, bf16 (H100)",
    "h100_resnet50_train_b32_amp_bf16.json.gz": "ResNet-50 training step, batch 32, autocast bf16 (H100)",
}
"""The measured traces shipped in benchmarks/data/traces/ (its README says how they were recorded)."""
MAX_TRACE_UPLOAD_BYTES = 50 * 2**20
"""Largest trace file accepted from the browser, as uploaded (gzipped or not)."""
MAX_TRACE_BYTES = 256 * 2**20
"""Largest trace parsed, once decompressed (a gzip bomb stops here)."""
FROM_TRACE = "(from the trace)"
WHATIF_DEVICES = ["h200-sxm", "b200", "mi300x"]
SWEEP_EXAMPLE = ROOT / "examples" / "sweeps" / "serving.yaml"
MAX_SWEEP_UPLOAD_BYTES = 200 * 2**20
"""Largest sweep Parquet accepted from the browser (Streamlit's own upload limit)."""


# ------------------------------------------------------------------ cached loaders over the library

@st.cache_resource
def context():
    from planner.predict import default_context
    return default_context()


@st.cache_data(show_spinner=False)
def zoo_ids() -> list[str]:
    import planner_models
    return planner_models.zoo_ids()


@st.cache_data(show_spinner=False)
def device_ids() -> list[str]:
    return sorted(context().catalog.devices)


@st.cache_data(show_spinner="Predicting on every device...")
def compare_table(model_key: str, config_text: str | None, devices: tuple[str, ...], mode: str, batch, input_len: int,
                  output_len: int, seq_len: int | None, dtype: str) -> pd.DataFrame:
    from planner.predict import compare
    model = _model(model_key, config_text)
    return compare(model, list(devices), mode, batch, input_len, output_len, seq_len, None, dtype, ctx=context())


@st.cache_data(show_spinner="Predicting...")
def prediction(model_key: str, config_text: str | None, device: str, gpus: int, tp: int, mode: str, batch,
               input_len: int, output_len: int, seq_len: int | None, dtype: str) -> dict:
    from planner.predict import Request, op_rows, predict
    model = _model(model_key, config_text)
    req = Request(model.name, device, mode, gpus=gpus, tp=tp, batch=batch, input_len=input_len, output_len=output_len,
                  seq_len=seq_len, dtype=dtype)
    p = predict(req, context(), model)
    rows = op_rows(req, context(), model)
    ops = pd.DataFrame([{"graph": g, "op": r.op, "role": r.role, "category": r.category, "count": r.count,
                         "flop": r.flop, "bytes": r.bytes, "time_s": r.time_s, "bound": r.bound}
                        for g, group in rows.items() for r in group])
    return {"prediction": p.as_dict(), "ops": ops}


@st.cache_data(show_spinner=False)
def tco(device: str, site: str, instance: str | None, months: int, utilization: float, price: float | None,
        discount: float, capex: float | None):
    from planner.plan.tco import compare_tco
    return compare_tco(device, site, instance, months, utilization, price, discount, capex, ctx=context())


@st.cache_data(show_spinner="Solving the plan (capacities from the predictor, then the MILP)...")
def solve_plan(scenario_text: str) -> dict:
    from planner.plan.check import check
    from planner.plan.scenario import loads
    from planner.plan.solve import solve
    # An uploaded scenario is data from anyone: safe YAML with limits, zoo ids only (no code, and no
    # config.json paths, which would read files on the server).
    scenario = loads(scenario_text, "scenario", allow_model_files=False)
    plan = solve(scenario, context())
    return {"plan": plan.as_dict(), "problems": check(plan, scenario, context())}


@st.cache_data(show_spinner="Sweeping the example grid (about 10 s)...")
def example_sweep() -> pd.DataFrame:
    """examples/sweeps/serving.yaml swept in this process, its rows with the sweep measures."""
    import tempfile

    from planner.sweep.grid import load_grid
    from planner.sweep.run import run_sweep
    from planner.sweep.summary import read_sweep
    with tempfile.TemporaryDirectory() as tmp:
        return read_sweep(str(run_sweep(load_grid(str(SWEEP_EXAMPLE)), Path(tmp) / "sweep.parquet").out))


@st.cache_data(show_spinner=False)
def sweep_rows(digest: str, _data: bytes) -> pd.DataFrame:
    """An uploaded sweep's rows, cached on the bytes' SHA-256 `digest`."""
    from planner.sweep.summary import read_sweep
    return read_sweep(_data)


@st.cache_data(show_spinner=False)
def validation_results() -> pd.DataFrame:
    rows = []
    for file in sorted((ROOT / "benchmarks" / "results").glob("validate_*.json")):
        data = json.loads(file.read_text())
        for case in data["cases"]:
            rows.append({"run": file.stem, **case})
    return pd.DataFrame(rows)


@st.cache_data(show_spinner="Reading the trace and setting each op beside its roofline...", max_entries=4)
def trace_analysis(digest: str, _data: bytes, name: str, device: str | None):
    """The TraceReport of trace bytes, cached on their SHA-256 `digest` (the bytes themselves are not
    hashed again) and the device. The bytes are parsed as data only: bounded JSON, no pickle, no code."""
    from planner.trace.analyze import analyze
    from planner.trace.read import parse_trace
    return analyze(parse_trace(_data, name, MAX_TRACE_BYTES), device, engine="eager", ctx=context())


@st.cache_data(show_spinner="Replaying the trace on other devices...", max_entries=16)
def trace_what_ifs(digest: str, device: str | None, devices: tuple[str, ...], host_scale: float, _report) -> dict:
    """What-if rows (one per device; an error message where a device cannot be predicted) and the findings."""
    from planner.errors import PlannerError
    from planner.trace.findings import findings
    from planner.trace.whatif import what_if
    rows, found = [], []
    for d in devices:
        try:
            w = what_if(_report, d, host_scale=host_scale, engine="eager", ctx=context())
        except PlannerError as exc:
            rows.append({"device": d, "note": str(exc)})
            continue
        found.append(w)
        rows.append({**w.as_dict(), "note": f"{w.unscaled_ops} ops kept as measured (no peak for their dtype)"
                     if w.unscaled_ops else ""})
    return {"rows": rows, "findings": [f.as_dict() for f in findings(_report, found)]}


def _model(model_key: str, config_text: str | None):
    from planner.files import parse_json
    from planner.workload.zoo import from_config, resolve
    if config_text is None:
        return resolve(model_key)  # a zoo id from the select box: never code (allow_code stays False)
    return from_config(parse_json(config_text, "uploaded config.json"), model_key)


# ------------------------------------------------------------------ helpers for the pages

def _dated(date):
    """A price's date as the library shows it ("2024-01, stale" when over 12 months old); blank stays blank."""
    from planner.hardware.catalog import dated
    return dated(date) if isinstance(date, str) and date else date


def _shown(fn, *args, **kwargs):
    """Run `fn`; return its result, or None after showing the error in a box: planner's own errors (bad
    input, impossible configuration) as their one-line message, anything else as an internal error to
    report. Never a stack trace, unless PLANNER_DEBUG=1 (then the exception propagates to Streamlit)."""
    from planner.errors import PlannerError
    try:
        return fn(*args, **kwargs)
    except PlannerError as exc:
        st.error(str(exc))
    except Exception as exc:  # noqa: BLE001 - the one boundary that turns any failure into a message
        if os.environ.get("PLANNER_DEBUG") == "1":
            raise
        st.error(f"internal error: {type(exc).__name__}: {str(exc)[:300]}. This is a bug in planner: please report "
                 "it with the inputs that caused it (set PLANNER_DEBUG=1 to see the traceback).")
    return None


def _upload_text(label: str, types: list[str], key: str) -> str | None:
    file = st.file_uploader(label, type=types, key=key)
    if file is None:
        return None
    data = file.getvalue()
    if len(data) > MAX_UPLOAD_BYTES:
        st.error(f"{file.name} is {len(data):,} bytes; the limit is {MAX_UPLOAD_BYTES:,}")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        st.error(f"{file.name} is not UTF-8 text")
        return None


def _trace_report(data: bytes, name: str, device: str | None, digest: str | None = None):
    """(TraceReport, None), or (None, the one-line message to show) for a file over the size limit or
    one planner cannot read (not JSON, not a profiler trace, an unknown device...). `digest`: the
    bytes' SHA-256 where the caller has it already."""
    from planner.errors import PlannerError
    if len(data) > MAX_TRACE_UPLOAD_BYTES:
        return None, (f"{name[:80]} is {len(data):,} bytes; the limit is {MAX_TRACE_UPLOAD_BYTES:,} bytes "
                      f"({MAX_TRACE_UPLOAD_BYTES // 2**20} MiB): profile fewer steps, or gzip the trace")
    try:
        return trace_analysis(digest or hashlib.sha256(data).hexdigest(), data, name, device), None
    except PlannerError as exc:
        return None, str(exc)


def _ms(seconds):
    """Seconds as milliseconds for a table (NaN stays NaN)."""
    return seconds * 1e3


def _fmt_s(seconds) -> str:
    if seconds is None or seconds != seconds:
        return "-"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


# ------------------------------------------------------------------ pages

def page_workload() -> None:
    st.header("Workload: how fast, how big, how costly on each device")
    left, right = st.columns([1, 2])
    with left:
        source = st.radio("Model", ["Zoo", "Upload config.json"], horizontal=True, key="model_source")
        config_text = None
        if source == "Zoo":
            model_key = st.selectbox("Zoo model", zoo_ids(), index=zoo_ids().index("llama-3.1-8b"), key="model")
        else:
            config_text = _upload_text("Hugging Face style config.json", ["json"], "config_upload")
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
        table = _shown(compare_table, model_key, config_text, tuple(devices), mode, int(batch), int(input_len),
                       int(output_len), int(seq_len) if mode == "training" else None, dtype)
        if table is None:
            return
        shown = table[["device", "gpus", "fits", "tier", "band_fraction", "latency_s", "throughput", "usd_per_h",
                       "usd_per_unit", "j_per_unit", "memory_gb_per_gpu", "instance", "price_date", "note"]]
        shown = shown.assign(price_date=shown["price_date"].map(_dated))
        st.dataframe(shown.rename(columns={"band_fraction": "band ±", "usd_per_unit": "$ per 1M tokens / 1k samples",
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
    detail = _shown(prediction, model_key, config_text, device, gpus, tp, mode, int(batch), int(input_len),
                    int(output_len), int(seq_len) if mode == "training" else None, dtype)
    if detail is None:
        return
    p = detail["prediction"]
    cols = st.columns(4)
    if mode == "inference" and p.get("ttft_s") is not None:
        cols[0].metric("TTFT", _fmt_s(p["ttft_s"]))
        cols[1].metric("TPOT", _fmt_s(p["tpot_s"]))
        cols[2].metric("tokens/s", f"{p['throughput_tokens_per_s']:,.0f}")
    elif mode == "inference":
        cols[0].metric("latency", _fmt_s(p["latency_s"]))
        cols[1].metric("samples/s", f"{p['throughput_samples_per_s']:,.1f}")
    else:
        cols[0].metric("step time", _fmt_s(p["step_time_s"]))
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


def page_cost() -> None:
    st.header("Cost: renting or owning")
    ctx = context()
    owned = sorted({s.device_id for s in ctx.catalog.servers.values()})
    device = st.selectbox("Device", owned, key="cost_device")
    site = st.selectbox("Site", sorted(ctx.catalog.sites), key="cost_site")
    offers = [i for i in ctx.catalog.instances_for(device) if "on_demand" in i.price_usd_per_h]
    labels = [f"{i.key}: ${i.price_usd_per_h['on_demand']:,.2f}/h (price of {_dated(i.price_dates['on_demand'])})"
              for i in offers]
    pick = st.selectbox("Cloud instance (on demand)", labels, key="cost_instance") if offers else None
    instance = offers[labels.index(pick)] if pick else None
    months = st.slider("Horizon (months)", 6, 72, 36, key="cost_months")
    utilization = st.slider("Utilization", 0.1, 1.0, 0.8, 0.05, key="cost_utilization")
    override = st.number_input("Override the instance price ($/h, 0 = catalog)", min_value=0.0, value=0.0,
                               key="cost_price")
    discount = st.slider("Committed-use discount", 0.0, 0.7, 0.0, 0.05, key="cost_discount")
    capex = st.number_input("Override the server capex ($, 0 = catalog)", min_value=0.0, value=0.0, key="cost_capex")
    result = _shown(tco, device, site, instance.key if instance else None, months, utilization, override or None,
                    discount, capex or None)
    if result is None:
        return
    cols = st.columns(3)
    cols[0].metric("Break-even", f"{result.breakeven_month:.1f} months" if result.breakeven_month else "never")
    cols[1].metric("Break-even utilization", f"{result.breakeven_utilization:.0%}")
    cols[2].metric("Cloud $/h for the server's devices", f"${result.cloud_usd_per_h:,.2f}")
    st.caption(f"Cloud price of {_dated(result.cloud_price_date)} ({result.instance}); server capex of "
               f"{_dated(result.capex_date)} "
               f"({result.server}, {result.devices} devices); on-prem opex ${result.onprem_opex_usd_per_month:,.0f}/month")
    long = result.table.melt("month", var_name="option", value_name="cumulative USD")
    st.altair_chart(alt.Chart(long).mark_line().encode(x="month:Q", y="cumulative USD:Q", color="option:N"),
                    width="stretch")


def page_plan() -> None:
    st.header("Plan: the instance mix and cluster size")
    examples = sorted(p.name for p in (ROOT / "examples").glob("*.yaml"))
    source = st.radio("Scenario", ["Example", "Upload YAML"], horizontal=True, key="plan_source")
    text = None
    if source == "Example":
        name = st.selectbox("Example", examples, index=examples.index("mixed.yaml"), key="plan_example")
        text = (ROOT / "examples" / name).read_text()
    else:
        text = _upload_text("Scenario YAML", ["yaml", "yml"], "scenario_upload")
        if text is None:
            st.info("Upload a scenario YAML (see examples/ in the repository for the keys).")
            return
    # A keyed text area keeps its edited value across reruns and ignores a new default: when another
    # example is picked or another file uploaded, start the box over from that file.
    if st.session_state.get("plan_text_from") != text:
        st.session_state["plan_text_from"] = text
        st.session_state["plan_text"] = text
    text = st.text_area("Scenario (edit freely)", height=260, key="plan_text")
    if not st.button("Solve", key="plan_solve", type="primary"):
        st.caption("Press Solve to run the optimizer.")
        return
    result = _shown(solve_plan, text)
    if result is None:
        return
    plan, problems = result["plan"], result["problems"]
    rows = pd.DataFrame(plan["rows"])
    totals = plan["totals"]
    cols = st.columns(4)
    cols[0].metric("$/month", f"${totals['usd_per_month']:,.0f}")
    cols[1].metric("over the horizon", f"${totals['cost_over_horizon_usd']:,.0f}")
    cols[2].metric("capex", f"${totals['capex_usd']:,.0f}")
    cols[3].metric("energy", f"{totals['energy_kwh']:,.0f} kWh")
    if not rows.empty:
        st.dataframe(rows[["candidate", "units", "devices", "usd_per_month", "capex_usd", "power_kw", "utilization",
                           "price_date"]].assign(price_date=rows["price_date"].map(_dated)), hide_index=True)
    for t in plan["training"]:
        st.write(f"Training {t['job']}: {t['units']} x {t['candidate']} (tp {t['tp']}, dp {t['dp']}), "
                 f"{t['days']:.2f} days, ${t['cost_usd']:,.0f}")
    best = plan["best_single"]
    if best:
        from planner.plan.solve import format_objective
        st.success(f"Best single type {best['device']}: {format_objective(best['value'], best['unit'])}; this plan "
                   f"saves {format_objective(best['saving'], best['unit'])} ({best['saving_fraction']:.1%}) in its "
                   f"objective, {plan['objective']}")
    if plan["pareto"]:
        st.caption("Cost versus energy (weights swept)")
        st.altair_chart(alt.Chart(pd.DataFrame(plan["pareto"])).mark_line(point=True).encode(
            x="energy_kwh:Q", y="cost_usd:Q", tooltip=["energy_weight", "cost_usd", "energy_kwh"]),
            width="stretch")
    if problems:
        st.error("Independent check failed: " + "; ".join(problems))
    else:
        st.caption("Independent check passed: every assignment re-predicted (or re-simulated) meets demand, SLOs, budget and power.")
    st.download_button("Plan as CSV", rows.to_csv(index=False), "plan.csv", "text/csv", key="dl_csv")
    st.download_button("Plan as JSON", json.dumps(plan, indent=2, default=str), "plan.json", "application/json",
                       key="dl_json")
    st.download_button("Scenario as YAML", text, "scenario.yaml", "text/yaml", key="dl_yaml")


def page_sweep() -> None:
    st.header("Sweep: the Pareto front of cost, latency and throughput")
    st.caption("Rows written by `planner sweep GRID.yaml --out FILE` (README, section Sweeps): one per configuration.")
    source = st.radio("Sweep", ["Example grid (examples/sweeps/serving.yaml)", "Parquet file on this machine",
                                "Upload"], horizontal=True, key="sweep_source")
    frame = None
    if source.startswith("Example"):
        frame = _shown(example_sweep)
    elif source.startswith("Parquet"):
        path = st.text_input("Path", "sweep.parquet", key="sweep_path")
        from planner.sweep.summary import read_sweep
        frame = _shown(read_sweep, path) if path else None
    else:
        file = st.file_uploader("Sweep Parquet", type=["parquet"], key="sweep_upload")
        if file is not None:
            data = file.getvalue()
            if len(data) > MAX_SWEEP_UPLOAD_BYTES:
                st.error(f"{file.name[:80]} is {len(data):,} bytes; the limit is {MAX_SWEEP_UPLOAD_BYTES:,}")
            else:
                frame = _shown(sweep_rows, hashlib.sha256(data).hexdigest(), data)
    if frame is None:
        return
    _sweep_view(frame)


def _sweep_view(frame: pd.DataFrame) -> None:
    from planner.sweep.summary import best_per_device, pareto_front, usable
    units = sorted(frame["unit"].dropna().unique())
    cols = st.columns(4)
    unit = cols[0].selectbox("Per", units, key="sweep_unit") if units else None
    models = sorted(frame["in.model"].astype(str).unique())
    devices = sorted(frame["in.device"].astype(str).unique())
    pick_models = cols[1].multiselect("Models", models, default=models, key="sweep_models")
    pick_devices = cols[2].multiselect("Devices", devices, default=devices, key="sweep_devices")
    fits = cols[3].checkbox("Fits in memory only", True, key="sweep_fits")
    rows = frame[frame["in.model"].astype(str).isin(pick_models) & frame["in.device"].astype(str).isin(pick_devices)]
    if unit is not None:
        rows = rows[rows["unit"] == unit]
    errors = int(rows["error"].notna().sum()) if "error" in rows else 0
    ok = usable(rows) if fits else rows[rows["error"].isna()] if "error" in rows else rows
    front = pareto_front(rows)
    c = st.columns(3)
    c[0].metric("Points", f"{len(rows):,}")
    c[1].metric("Predicted and fitting", f"{len(usable(rows)):,}")
    c[2].metric("Pareto-optimal", f"{len(front):,}")
    if errors:
        st.caption(f"{errors:,} points could not be predicted (their `error` column says why).")
    if ok.empty:
        st.info("No point to show: widen the filters.")
        return
    chart = ok.assign(pareto=ok["id"].isin(front["id"]), usd_per_million=ok["usd_per_unit"] * 1e6)
    fields = [f for f in ("id", "model", "device", "gpus", "tp", "batch", "in.pricing", "engine") if f in chart]
    st.altair_chart(alt.Chart(chart).mark_point(filled=True).encode(
        x=alt.X("latency_s_:Q", scale=alt.Scale(type="log"), title="latency (s)"),
        y=alt.Y("usd_per_million:Q", scale=alt.Scale(type="log"), title=f"$ per 1M {unit or 'unit'}s"),
        color="device:N", size=alt.Size("pareto:N", scale=alt.Scale(range=[20, 140]), title="Pareto-optimal"),
        tooltip=fields + ["throughput_per_s", "usd_per_million"]), width="stretch")
    shown = [f for f in fields + ["usd_per_unit", "latency_s_", "throughput_per_s", "memory_bytes_per_gpu", "tier"]
             if f in front]
    st.subheader("Pareto front")
    st.dataframe(front[shown], hide_index=True)
    st.subheader("Best point per device (least cost)")
    st.dataframe(best_per_device(rows)[shown], hide_index=True)


def page_trace() -> None:
    st.header("Trace: a measured run against its roofline")
    st.caption("Upload a PyTorch Profiler trace: each op beside its roofline on the device it ran on, the step's "
               "breakdown, and the same run predicted on other devices.")
    left, right = st.columns([1, 2])
    with left:
        source = st.radio("Trace", ["Bundled H100 trace", "Upload"], horizontal=True, key="trace_source",
                          help="A trace measured on an H100 that ships with planner (benchmarks/data/traces/), or "
                               "your own torch.profiler export_chrome_trace file")
        if source == "Bundled H100 trace":
            name = st.selectbox("Bundled trace", list(BUNDLED_TRACES), format_func=BUNDLED_TRACES.get,
                                key="trace_bundled",
                                help="Measured on one H100 SXM with torch.profiler(record_shapes=True) after 3 "
                                     "warm-up iterations; benchmarks/data/traces/README.md has the provenance")
            data = (TRACES / name).read_bytes()
        else:
            file = st.file_uploader("PyTorch Profiler trace (.json or .json.gz)", type=["json", "gz"],
                                    key="trace_upload",
                                    help="Chrome/Kineto JSON from torch.profiler.profile(record_shapes=True)"
                                         f".export_chrome_trace, gzipped or not; at most "
                                         f"{MAX_TRACE_UPLOAD_BYTES // 2**20} MiB. It is read as data only.")
            if file is None:
                st.info("Upload a trace, or pick a bundled one.")
                return
            name, data = file.name, file.getvalue()
        choices = [FROM_TRACE] + sorted(set(device_ids()) | set(context().profiles))
        picked = st.selectbox("Device it ran on", choices, key="trace_device",
                              help="Whose roofline the ops are set against. Default: the GPU named in the trace's "
                                   "metadata, or for a CPU-only trace this machine's calibrated CPU; pick one when "
                                   "the trace names none planner knows")
    device = None if picked == FROM_TRACE else picked
    digest = hashlib.sha256(data).hexdigest() if len(data) <= MAX_TRACE_UPLOAD_BYTES else ""
    report, error = _trace_report(data, name, device, digest)
    if error:
        with right:
            st.error(error)
            if device is None:
                st.caption("A trace that names no device planner knows (or a CPU trace from another machine) "
                           "needs one picked under 'Device it ran on'.")
        return
    tr = report.trace
    with right:
        cols = st.columns(5)
        cols[0].metric("wall time", _fmt_s(report.wall_s), help="The span the profiler covered")
        cols[1].metric("host ops", f"{len(tr.ops):,}", help="cpu_op and user_annotation events")
        cols[2].metric("kernels", f"{len(tr.device_events):,}", help="Device events: kernels, copies, memsets")
        cols[3].metric("device", report.device.id, help="The roofline the ops are set against")
        cols[4].metric("tier", report.tier, help="Where the device's efficiencies come from")
        ran = f"ran on {tr.device_name}" if tr.device_name else "CPU only"
        st.caption(f"{tr.source} ({ran}): {int(report.ops['counted'].sum()):,} counted ops carry the work; "
                   f"{report.dtype} ops at the {report.dtype} peak; efficiencies: {report.source}")
        st.subheader("Where the wall time went")
        breakdown = pd.DataFrame([{"part": part, "time (ms)": _ms(s), "share of wall (%)": 100 * s / report.wall_s}
                                  for part, s in report.breakdown])
        st.dataframe(breakdown, hide_index=True)
        st.altair_chart(alt.Chart(breakdown).mark_bar().encode(
            x=alt.X("time (ms):Q", title="time (ms)"), y=alt.Y("part:N", sort=None, title=None),
            tooltip=["part", alt.Tooltip("time (ms):Q", format=".3f"),
                     alt.Tooltip("share of wall (%):Q", format=".1f")]), width="stretch")
        if report.overlapped_comm_s:
            st.caption(f"Communication overlapped by compute (not in the sum): {_fmt_s(report.overlapped_comm_s)}")
    st.subheader("By category")
    st.caption("measured = " + ("device time of the op's kernels" if tr.has_device else "host time") +
               "; attainable = the roofline with the device's efficiency")
    cats = report.by_category().reset_index()
    st.dataframe(pd.DataFrame({
        "category": cats["category"], "ops": cats["ops"], "measured (ms)": _ms(cats["measured_s"]),
        "attainable (ms)": _ms(cats["attainable_s"]), "gap (ms)": _ms(cats["gap_s"]),
        "ratio (measured / attainable)": cats["ratio"], "achieved (TFLOP/s)": cats["achieved_flop_per_s"] / 1e12,
        "achieved (GB/s)": cats["achieved_bytes_per_s"] / 1e9, "work (GFLOP)": cats["flop"] / 1e9,
        "traffic (GB)": cats["bytes"] / 1e9}), hide_index=True)
    st.subheader("Slowest ops")
    sig = report.by_signature()
    top = st.slider("Ops shown", 5, 200, 20, key="trace_top",
                    help="The slowest op signatures (name and input shapes) by measured time")
    shown = sig.head(top)
    st.dataframe(pd.DataFrame({
        "op": shown["name"], "calls": shown["calls"], "measured (ms)": _ms(shown["measured_s"]),
        "attainable (ms)": _ms(shown["attainable_s"]), "ratio (measured / attainable)": shown["ratio"],
        "flagged (ratio > 2)": shown["ratio"] > 2, "bound": shown["bound"], "category": shown["category"],
        "achieved (TFLOP/s)": shown["achieved_flop_per_s"] / 1e12,
        "achieved (GB/s)": shown["achieved_bytes_per_s"] / 1e9, "shapes": shown["shapes"]}), hide_index=True)
    gemm, n = report.gemm_abs_ln
    if gemm is not None:
        st.write(f"GEMMs: median |ln(attainable / measured)| = {gemm:.3f} over {n} ops (attainable within "
                 f"{math.exp(gemm):.2f}x of measured, either way).")
    flagged = report.flagged
    st.write(f"Flagged: {len(flagged)} ops measured above 2x their attainable time, "
             f"{_fmt_s(float(flagged['measured_s'].sum()))} in all.")
    _trace_roofline(report, sig)
    st.subheader("The same run on other devices")
    options = sorted(set(device_ids()) | set(context().profiles))
    devices = st.multiselect("Devices", options, default=[d for d in WHATIF_DEVICES if d in options],
                             key="trace_whatif_devices",
                             help="Each counted op's measured time is scaled by its predicted time on the target "
                                  "over its predicted time here, and the trace replayed at its launch times")
    host_scale = st.slider("Host scale", 0.0, 2.0, 1.0, 0.1, key="trace_host_scale",
                           help="host time multiplied by this: 0 = never waits on the host, e.g. CUDA graphs")
    result = trace_what_ifs(digest, device, tuple(devices), float(host_scale), report)
    if result["rows"]:
        rows = pd.DataFrame(result["rows"]).reindex(columns=["device", "tier", "wall_s", "measured_wall_s", "speedup",
                                                             "note"])
        st.dataframe(pd.DataFrame({"device": rows["device"], "tier": rows["tier"],
                                   "predicted wall (ms)": _ms(rows["wall_s"].astype(float)),
                                   "measured wall (ms)": _ms(rows["measured_wall_s"].astype(float)),
                                   "speedup (x)": rows["speedup"].astype(float), "note": rows["note"]}),
                     hide_index=True)
    if result["findings"]:
        st.markdown("**What would gain most** (each re-predicted by replaying the trace)")
        st.markdown("\n".join(f"{k}. **{f['title']}**: {_fmt_s(f['wall_s'])} predicted wall "
                              f"({100 * f['throughput_gain']:+.0f}% throughput). {f['why']}"
                              for k, f in enumerate(result["findings"], 1)))
    else:
        st.caption("No change the model can price gains 2% or more.")


def _trace_roofline(report, sig: pd.DataFrame) -> None:
    """Each op signature at its achieved FLOP/s over its arithmetic intensity, under the device's roofs."""
    from planner.errors import PlannerError
    from planner.predict.roofline import vector_peak
    points = sig[(sig["flop"] > 0) & (sig["bytes"] > 0) & (sig["measured_s"] > 0)]
    if points.empty:
        return
    points = pd.DataFrame({"op": points["name"], "shapes": points["shapes"], "bound": points["bound"],
                           "calls": points["calls"], "intensity (FLOP/byte)": points["flop"] / points["bytes"],
                           "achieved (FLOP/s)": points["achieved_flop_per_s"],
                           "ratio (measured / attainable)": points["ratio"]})
    dev, bw = report.device, report.device.mem_bytes_per_s
    lo = min(points["intensity (FLOP/byte)"].min(), 1.0) / 2
    hi = max(points["intensity (FLOP/byte)"].max(), 1.0) * 2
    xs = [lo * (hi / lo) ** (k / 60) for k in range(61)]
    roofs = []
    for label, peak in ((f"{report.dtype} peak", lambda: dev.peak(report.dtype)),
                        ("vector peak", lambda: vector_peak(dev, report.dtype))):
        try:
            p = peak()
        except PlannerError:  # no sourced figure for this dtype: that roof is not drawn
            continue
        roofs += [{"roof": f"{label} ({p / 1e12:,.0f} TFLOP/s)", "intensity (FLOP/byte)": x,
                   "achieved (FLOP/s)": min(p, x * bw)} for x in xs]
    st.subheader("Roofline")
    st.caption(f"Each op signature on the {dev.id} roofline (log-log): {bw / 1e9:,.0f} GB/s of memory bandwidth "
               f"up to the datasheet {report.dtype} and vector peaks; an op's attainable time also applies the "
               "device's efficiencies, so most points sit below the roofs")
    x = alt.X("intensity (FLOP/byte):Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP/byte)")
    y = alt.Y("achieved (FLOP/s):Q", scale=alt.Scale(type="log"), title="achieved (FLOP/s)")
    chart = alt.Chart(points).mark_circle(size=60).encode(
        x=x, y=y, color=alt.Color("bound:N", title="bound"),
        tooltip=["op", "shapes", "bound", "calls", alt.Tooltip("ratio (measured / attainable):Q", format=".2f")])
    if roofs:
        chart = alt.Chart(pd.DataFrame(roofs)).mark_line(color="gray").encode(
            x=x, y=y, strokeDash=alt.StrokeDash("roof:N", title="roof")) + chart
    st.altair_chart(chart, width="stretch")


def page_calibration() -> None:
    st.header("Calibration and accuracy")
    ctx = context()
    if not ctx.profiles:
        st.info("No calibration profile yet: run `planner calibrate`.")
    for device_id, profile in sorted(ctx.profiles.items()):
        raw = profile.raw
        loo = raw.get("leave_one_out", {})
        st.subheader(device_id)
        st.write(f"{profile.device_name}, measured {raw.get('date', '?')} in {raw.get('duration_s', '?')} s: "
                 f"{raw.get('measured', len(profile.measurements))} measurements; torch "
                 f"{raw.get('versions', {}).get('torch', '?')}")
        st.json({"ceilings": raw.get("ceilings", {}), "leave_one_out": {k: v for k, v in loo.items() if k != "by_kind"}},
                expanded=False)
    results = validation_results()
    if results.empty:
        st.info("No validation results yet: run `planner validate --json > benchmarks/results/validate_<device>.json`.")
        return
    st.subheader("Predicted versus measured")
    st.dataframe(results, hide_index=True)
    summary = results.assign(abs_error=results["error"].abs()).groupby(["run", "tier", "kind"])["abs_error"].agg(
        ["median", "max", "count"]).reset_index()
    st.dataframe(summary, hide_index=True)


def main() -> None:
    st.set_page_config(page_title="planner", layout="wide")
    st.sidebar.title("planner")
    page = st.sidebar.radio("Page", PAGES, key="page")
    st.sidebar.caption("Predictions, prices and plans from the planner library; every price shows its date.")
    _shown({"Workload": page_workload, "Cost": page_cost, "Plan": page_plan, "Sweep": page_sweep, "Trace": page_trace,
            "Calibration and accuracy": page_calibration}[page])


main()
