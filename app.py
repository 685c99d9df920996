"""planner's Streamlit app for procurement planning. Every number comes from the library: this file
only collects inputs, calls planner, and draws what it returns.

Run: .venv/bin/streamlit run app.py   (or `make demo`)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

ROOT = Path(__file__).resolve().parent
MAX_UPLOAD_BYTES = 1_000_000
PAGES = ("Workload", "Cost", "Plan", "Calibration and accuracy")
DEFAULT_DEVICES = ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "mi300x", "l40s", "l4"]


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


@st.cache_data(show_spinner=False)
def validation_results() -> pd.DataFrame:
    rows = []
    for file in sorted((ROOT / "benchmarks" / "results").glob("validate_*.json")):
        data = json.loads(file.read_text())
        for case in data["cases"]:
            rows.append({"run": file.stem, **case})
    return pd.DataFrame(rows)


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
    _shown({"Workload": page_workload, "Cost": page_cost, "Plan": page_plan,
            "Calibration and accuracy": page_calibration}[page])


main()
