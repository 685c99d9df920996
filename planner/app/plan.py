"""Plan page: the instance mix and cluster size for a scenario (planner.plan), with everything `planner plan`
prints. The first way in is a form (one serving workload: model, demand, length mix, SLOs, devices, clouds,
pricing, horizon, budget) that builds a scenario, checks it with the library's own parser, solves it and
offers it as YAML; the advanced way is the scenario YAML itself (an example or an upload), checked by the
library's loader as it is edited. A solved plan stays on the page, through downloads and any other rerun,
until the scenario (or the session's hardware) changes."""

from __future__ import annotations

import json
import re

import altair as alt
import pandas as pd
import streamlit as st

from planner.files import spreadsheet_csv

from planner.app.common import ROOT, band_text, context, dated, hardware_key, purpose, shown, upload_text
from planner.app.wording import app_words

DEFAULT_EXAMPLE = "mixed.yaml"
FORM, ADVANCED = "Form", "Scenario YAML (advanced)"
WIDE_COLUMNS = 7
"""Columns past which a table is wider than the page at 1,280 px (docs/app/plan_1280.png) and says it scrolls."""
KEPT = {"plan_mode": FORM, "plan_source": "Example", "plan_example": DEFAULT_EXAMPLE}
"""The Plan page's choices and their first values. Streamlit forgets a widget's value while its page is not
drawn, so each is also kept under "<key>_kept" and handed back when the page is opened again."""
FORM_FIRST = {"pf_model": "llama-3.1-8b", "pf_dtype": "bf16", "pf_demand": 10.0, "pf_ttft_ms": 1000.0,
              "pf_tpot_ms": 50.0, "pf_devices": ["h100-sxm", "l40s"], "pf_providers": [],
              "pf_pricing": ["on_demand"], "pf_horizon": 12, "pf_budget": None}
"""The form's fields and their first values (kept as KEPT's are). None: the field starts empty."""
FIRST_MIX = [{"input_len": 512, "output_len": 128, "share": 0.7}, {"input_len": 1024, "output_len": 256, "share": 0.3}]
"""The length mix the form starts with (a chat service's, as examples/chat.yaml)."""
MIX_LABELS = {"input_len": "input (tokens)", "output_len": "output (tokens)", "share": "share (0-1)"}
FORM_FIELDS = (("scenario.workloads[0].demand_rps", "Demand"), ("scenario.workloads[0].slo", "SLOs"),
               ("scenario.workloads[0].model", "Model"), ("scenario.workloads[0].dtype", "Precision"),
               ("scenario.workloads[0].buckets", "Length mix"), ("scenario.candidates.cloud.pricing", "Pricing"),
               ("scenario.candidates.cloud.providers", "Clouds"), ("scenario.candidates.cloud.instances", "Devices"),
               ("scenario.candidates", "Candidates"), ("scenario.horizon_months", "Horizon"),
               ("scenario.constraints.monthly_budget_usd", "Monthly budget"))
"""The scenario keys the form sets, by the form's label for them (a parser message names the field)."""


def _parse(text: str):
    """The scenario in `text`: safe YAML with limits, zoo ids only (no code, and no config.json paths, which
    would read files on the server): an uploaded or edited scenario is data from anyone."""
    from planner.plan.scenario import loads
    return loads(text, "scenario", allow_model_files=False)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + "s" * (n != 1)


@st.cache_data(show_spinner=False, max_entries=64)
def validate(hw: str, scenario_text: str) -> dict:
    """{"ok", "message"}: the scenario parsed and its candidates priced (what Solve starts from), or the
    library's one-line message naming the bad key."""
    from planner.errors import PlannerError
    from planner.plan.capacity import candidates
    try:
        scenario = _parse(scenario_text)
        found = candidates(scenario, context())
    except PlannerError as exc:
        return {"ok": False, "message": str(exc)}
    if not found:
        return {"ok": False, "message": "scenario.candidates: no catalog instance or server passes the filters"}
    jobs = f", {_plural(len(scenario.training), 'training job')}" if scenario.training else ""
    return {"ok": True, "message": f"valid: '{scenario.name}': {_plural(len(scenario.workloads), 'workload')}{jobs}, "
                                   f"{_plural(len(found), 'candidate')}; objective {scenario.objective}, "
                                   f"{scenario.horizon_months:g} months"}


@st.cache_data(show_spinner="Solving the plan (capacities from the predictor, then the MILP)...")
def solve_plan(hw: str, scenario_text: str) -> dict:
    from planner.plan.check import check
    from planner.plan.solve import solve
    scenario = _parse(scenario_text)
    plan = solve(scenario, context())
    buckets = {f"{w.name}/{i}": f"{b.input_len:,} / {b.output_len:,}" for w in scenario.workloads
               for i, b in enumerate(w.buckets)}
    # what the Serving page needs to simulate a flow's deployment (serving_handoff)
    flows = {f"{w.name}/{i}": {"model": w.model, "dtype": w.dtype, "engine": w.engine, "input_len": b.input_len,
                               "output_len": b.output_len, "ttft_s": w.ttft_s, "tpot_s": w.tpot_s,
                               "stat": w.ttft_stat or w.tpot_stat or "mean"}
             for w in scenario.workloads for i, b in enumerate(w.buckets)}
    return {"plan": plan.as_dict(), "problems": check(plan, scenario, context()),
            "horizon_months": scenario.horizon_months, "buckets": buckets, "flows": flows}


def serving_handoff(result: dict, a: dict) -> dict:
    """The Serving page's inputs (its session_state keys) that simulate assignment `a` of a solved plan: the
    flow's model, lengths and SLOs on the candidate's device at the assignment's tp. A candidate that carries
    only this flow is simulated whole (its GPUs, the flow's rate spread over its copies); one that carries
    several flows, as one copy at the rate the plan loads each copy with (its capacity x the row's
    utilization), as the plan's own check does (planner/plan/check.py)."""
    from planner.app.serving import NO_ENGINE, NO_RECIPE
    from planner.workload.dtypes import DTYPES
    flow = result["flows"][a["flow"]]
    [row] = [r for r in result["plan"]["rows"] if r["candidate"] == a["candidate"]]
    alone = len(row["serves"]) == 1 and not row["trains"]
    copies_per_unit = max(1, row["devices"] // max(1, row["units"]) // a["tp"])
    gpus, rate = (row["devices"], a["rps"]) if alone else (
        a["tp"], a["capacity_rps"] / copies_per_unit * min(1.0, row["utilization"]))
    from planner.plan.scenario import NO_TARGET_S
    return {"serve_model": flow["model"], "serve_device": row["device"], "serve_gpus": int(gpus),
            "serve_tp": int(a["tp"]), "serve_engine": flow["engine"] or NO_ENGINE,
            "serve_dtype": flow["dtype"] if flow["dtype"] in DTYPES else "bf16",
            "serve_recipe": NO_RECIPE if flow["dtype"] in DTYPES else flow["dtype"],
            "serve_length_mode": "fixed", "serve_input_len": flow["input_len"], "serve_output_len": flow["output_len"],
            # a workload without a TTFT or a TPOT target: the Serving page's input left empty (no target)
            "serve_slo_ttft_ms": None if flow["ttft_s"] >= NO_TARGET_S else flow["ttft_s"] * 1e3,
            "serve_slo_tpot_ms": None if flow["tpot_s"] >= NO_TARGET_S else flow["tpot_s"] * 1e3,
            "serve_slo_stat": flow["stat"] if flow["stat"] in ("p50", "p90", "p99") else "mean",
            "serve_rate_rps": round(rate, 2)}


def _to_serving(values: dict) -> None:
    st.session_state.update(values)
    st.session_state["page"] = "Serving"


def _restore(firsts: dict) -> None:
    """Hand each widget its kept value (or its first) where Streamlit dropped it: first visit, or the page was
    left."""
    for key, first in firsts.items():
        if key not in st.session_state:
            st.session_state[key] = st.session_state.get(f"{key}_kept", first)


def _scenario_text() -> str | None:
    """The scenario box: an example or an upload, then edited freely. None when nothing is uploaded yet."""
    examples = sorted(p.name for p in (ROOT / "examples").glob("*.yaml"))
    _restore(KEPT)
    if st.session_state["plan_example"] not in examples:
        st.session_state["plan_example"] = DEFAULT_EXAMPLE if DEFAULT_EXAMPLE in examples else examples[0]
    source = st.radio("Scenario", ["Example", "Upload YAML"], horizontal=True, key="plan_source",
                      help="Start from one of the example scenarios in examples/, or upload your own YAML")
    st.session_state["plan_source_kept"] = source
    if source == "Example":
        name = st.selectbox("Example", examples, key="plan_example",
                            help="The scenarios shipped in examples/: chat, mixed (chat + summarization), hybrid "
                                 "(on-prem base + cloud), training")
        st.session_state["plan_example_kept"] = name
        origin = (ROOT / "examples" / name).read_text()
    else:
        origin = upload_text("Scenario YAML", ["yaml", "yml"], "scenario_upload",
                             help="A scenario file (at most 1 MB): workloads, training jobs, candidates, constraints; "
                                  "models are zoo ids only")
        if origin is None:
            st.info("Upload a scenario YAML (see examples/ in the repository for the keys).")
            return None
    # The box starts over from the file whenever another example is picked or another file uploaded; an
    # edit survives reruns (and leaving the page) until then.
    if st.session_state.get("plan_text_from") != origin:
        st.session_state["plan_text_from"] = origin
        st.session_state["plan_text"] = origin
    elif "plan_text" not in st.session_state:
        st.session_state["plan_text"] = st.session_state.get("plan_text_kept", origin)
    text = st.text_area("Scenario (edit freely)", height=260, key="plan_text",
                        help="The scenario YAML Solve uses; it is checked as you edit (press Ctrl+Enter or click "
                             "outside the box to apply an edit)")
    st.session_state["plan_text_kept"] = text
    return text


def _serving_models() -> list[str]:
    """The zoo's models that generate tokens (a serving workload's; planner.plan.scenario.SERVING_FAMILIES)."""
    from planner.app.common import zoo_ids
    from planner.plan.scenario import SERVING_FAMILIES
    from planner.workload.zoo import resolve
    return [m for m in zoo_ids() if resolve(m).family in SERVING_FAMILIES]


def _blank(value) -> bool:
    """An empty table cell: None, NaN or NA (a number column's empty cell) or blank text."""
    if isinstance(value, str):
        return not value.strip()
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def _number(value):
    """A table cell as a plain int (a whole number) or float, for the scenario and its YAML; text as given."""
    if isinstance(value, str):
        value = value.strip()
        try:
            value = float(value)
        except ValueError:
            return value
    value = float(value)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def mix_rows(frame: pd.DataFrame) -> list[tuple[int, dict]]:
    """(row number from 1, {column: cell}) of each filled row of a length-mix table (MIX_LABELS' columns), the
    rows left wholly empty skipped (a row added and not filled); ConfigError naming a row with some cells empty:
    "Length mix, row 2: share (0-1) is empty". The Plan form and the Serving page read their mixes through it."""
    from planner.errors import ConfigError
    filled = []
    for i, row in enumerate(frame.to_dict("records"), 1):
        cells = {k: row.get(k) for k in MIX_LABELS}
        if all(_blank(v) for v in cells.values()):
            continue
        empty = [MIX_LABELS[k] for k, v in cells.items() if _blank(v)]
        if empty:
            raise ConfigError(f"Length mix, row {i}: {' and '.join(empty)} {'is' if len(empty) == 1 else 'are'} "
                              "empty")
        filled.append((i, cells))
    return filled


def form_scenario(values: dict, mix: pd.DataFrame, catalog) -> tuple[dict, list[int]]:
    """The scenario mapping of the form's `values` (FORM_FIRST's keys) and length `mix` (input_len, output_len,
    share), for planner.plan.scenario.parse; and the table row (from 1) of each bucket. ConfigError, in the form's
    words, for what the form itself lacks (an empty cell, no SLO, no pricing, no device on the chosen clouds)."""
    from planner.errors import ConfigError
    buckets, rows = [], []
    for i, cells in mix_rows(mix):
        buckets.append({k: _number(v) for k, v in cells.items()})
        rows.append(i)
    if not buckets:
        raise ConfigError("Length mix: give at least one row of input and output tokens with its share")
    for label, key in (("Demand", "pf_demand"), ("Horizon", "pf_horizon")):
        if values[key] is None:
            raise ConfigError(f"{label}: empty; give a number")
    slo = {k: values[f] / 1000 for k, f in (("ttft_p90_s", "pf_ttft_ms"), ("tpot_p90_s", "pf_tpot_ms"))
           if values[f] is not None}
    if not slo:
        raise ConfigError("SLOs: give a p90 TTFT target, a p90 TPOT target or both (an empty field is no target)")
    if not values["pf_pricing"]:
        raise ConfigError("Pricing: pick at least one")
    cloud = {"providers": list(values["pf_providers"]), "pricing": list(values["pf_pricing"])}
    if not cloud["providers"]:
        del cloud["providers"]  # every cloud
    if values["pf_devices"]:
        cloud["instances"] = [i.key for i in catalog.instances if i.device_id in values["pf_devices"]
                              and (not values["pf_providers"] or i.provider in values["pf_providers"])]
        if not cloud["instances"]:
            raise ConfigError("Devices: none of the chosen devices is offered by the chosen clouds; pick more of "
                              "either")
    model, demand = values["pf_model"], float(values["pf_demand"])
    scenario = {"name": f"{model} at {demand:,.12g} requests/s", "horizon_months": int(values["pf_horizon"]),
                "objective": "cost",
                "workloads": [{"name": "serving", "model": model, "dtype": values["pf_dtype"], "demand_rps": demand,
                               "buckets": buckets, "slo": slo}],
                "candidates": {"cloud": cloud}}
    if values["pf_budget"] is not None:
        scenario["constraints"] = {"monthly_budget_usd": float(values["pf_budget"])}
    return scenario, rows


def form_message(message: str, rows: list[int]) -> str:
    """A parser message (it names the scenario key) in the form's words: the field's label, the table's row."""
    bucket = re.match(r"scenario\.workloads\[0\]\.buckets\[(\d+)\](?:\.(\w+))?(.*)", message, re.DOTALL)
    if bucket:
        index, column, rest = int(bucket.group(1)), bucket.group(2), bucket.group(3)
        row = rows[index] if index < len(rows) else index + 1
        return f"Length mix, row {row}" + (f", {MIX_LABELS.get(column, column)}" if column else "") + rest
    for key, label in FORM_FIELDS:
        if message.startswith(key):
            return label + message[len(key):].lstrip(".")
    return message


def scenario_yaml(scenario: dict) -> str:
    """The form's scenario as a YAML file `planner plan` reads (and the Advanced box, or an upload, takes)."""
    import yaml
    return ("# Built by the Plan page's form of planner's app: planner plan scenario.yaml solves it again\n"
            + yaml.safe_dump(scenario, sort_keys=False, allow_unicode=True, width=100))


def _form() -> None:
    """The fleet-sizing form: on Solve, the scenario it builds is parsed (a bad field is one line naming it),
    solved and kept with its YAML; the plan shows below until the form is solved again."""
    from planner.hardware.catalog import PRICINGS
    from planner.workload.dtypes import DTYPES
    ctx = context()
    models = _serving_models()
    devices = sorted({i.device_id for i in ctx.catalog.instances})
    providers = sorted({i.provider for i in ctx.catalog.instances})
    pricings = [p for p in PRICINGS if any(p in i.price_usd_per_h for i in ctx.catalog.instances)]
    _restore(FORM_FIRST)
    ss = st.session_state
    # a kept choice that is no longer offered (a device of the session removed) is dropped, not an error
    if ss["pf_model"] not in models:
        ss["pf_model"] = models[0]
    for key, options in (("pf_devices", devices), ("pf_providers", providers), ("pf_pricing", pricings)):
        if any(v not in options for v in ss[key]):
            ss[key] = [v for v in ss[key] if v in options]
    if "pf_mix" not in ss or "pf_mix_base" not in ss:  # the table starts from what was last submitted
        ss["pf_mix_base"] = ss.get("pf_mix_kept", pd.DataFrame(FIRST_MIX))
    with st.form("plan_form"):
        cols = st.columns(3)
        cols[0].selectbox("Model", models, key="pf_model",
                          help="A model of planner's zoo that generates tokens; a model of your own (its config.json) "
                               "is planned from the command line, where a scenario may name its file")
        cols[1].selectbox("Precision", list(DTYPES), key="pf_dtype",
                          help="The weights' and activations' number format the model is served in")
        cols[2].number_input("Demand (requests/s)", min_value=0.01, max_value=1e6, value=None, step=1.0,
                             format="%.2f", key="pf_demand", help="The request rate the fleet must sustain")
        st.markdown("**Length mix**: the request sizes of the traffic, one row each, with the share of requests "
                    "(the shares add up to 1); add or delete rows in the table")
        mix = st.data_editor(
            ss["pf_mix_base"], num_rows="dynamic", hide_index=True, key="pf_mix",
            column_config={
                "input_len": st.column_config.NumberColumn(MIX_LABELS["input_len"], min_value=1, max_value=2**20,
                                                           step=1, format="localized",
                                                           help="Prompt tokens of a request"),
                "output_len": st.column_config.NumberColumn(MIX_LABELS["output_len"], min_value=1,
                                                            max_value=2**20, step=1, format="localized",
                                                            help="Generated tokens of a request"),
                "share": st.column_config.NumberColumn(MIX_LABELS["share"], min_value=0.0, max_value=1.0, step=0.01,
                                                       help="Fraction of the requests of this size")})
        cols = st.columns(3)
        cols[0].number_input("p90 TTFT target (ms)", min_value=1.0, max_value=3_600_000.0, value=None, step=50.0,
                             format="%.1f", key="pf_ttft_ms", placeholder="no target",
                             help="Time to first token that 90% of requests must meet under the load; leave empty "
                                  "for no TTFT target")
        cols[1].number_input("p90 TPOT target (ms)", min_value=0.1, max_value=3_600_000.0, value=None, step=5.0,
                             format="%.1f", key="pf_tpot_ms", placeholder="no target",
                             help="Time per output token that 90% of requests must meet under the load; leave empty "
                                  "for no TPOT target")
        cols[2].caption("No end-to-end latency target: the capacity search and the check judge TTFT and TPOT only "
                        "(a request's end-to-end time is about TTFT + (output tokens - 1) x TPOT). Capacity comes "
                        "from the serving simulator under Poisson arrivals.")
        cols = st.columns(3)
        cols[0].multiselect("Devices", devices, key="pf_devices", placeholder="every device",
                            help="The accelerators the fleet may use (the cloud instances that carry them; your own "
                                 "devices from the Your hardware page too); none picked: every device. Each device "
                                 "adds a few seconds of simulation")
        cols[1].multiselect("Clouds", providers, key="pf_providers", placeholder="every cloud",
                            help="The providers whose instances may be rented; none picked: every provider")
        cols[2].multiselect("Pricing", pricings, key="pf_pricing",
                            help="How instances may be paid for: on demand, spot, reserved or committed for 1 or 3 "
                                 "years, savings plans (hardware_specs/discounts.csv); an instance is a candidate at "
                                 "each of its prices picked")
        cols = st.columns(3)
        cols[0].number_input("Horizon (months)", min_value=1, max_value=240, value=None, step=1, key="pf_horizon",
                             help="The term the plan is paid over: its total cost is for these months")
        cols[1].number_input("Monthly budget ($/month)", min_value=0.0, max_value=1e12, value=None, step=1000.0,
                             format="%.0f", key="pf_budget", placeholder="no budget",
                             help="The most the fleet may cost a month; leave empty for no budget")
        pressed = st.form_submit_button("Solve", key="plan_form_solve", type="primary",
                                        help="Build the scenario, check it, predict every candidate's capacity and "
                                             "solve for the cheapest mix (a few seconds per device)")
    values = {k: ss[k] for k in FORM_FIRST}
    for key, value in values.items():
        ss[f"{key}_kept"] = value
    ss["pf_mix_kept"] = mix
    if pressed:
        _submit(values, mix, ctx)
    if ss.get("plan_form_error"):
        st.error(ss["plan_form_error"])
    built = ss.get("plan_form_built")
    if not built:
        return
    st.download_button("Scenario as YAML", built["text"], "scenario.yaml", "text/yaml", key="plan_form_yaml",
                       on_click="ignore", help="The scenario the form built: open it under Scenario YAML (advanced) "
                                               "to edit what the form does not offer, or solve it with planner plan")
    saved = ss.get("plan_form_result")
    if saved and saved["hw"] == hardware_key() and saved["text"] == built["text"]:
        _results(saved["result"], built["text"], scenario_download=False)


def _submit(values: dict, mix: pd.DataFrame, ctx) -> None:
    """The form's Solve: build, parse, price the candidates, solve; the scenario and the plan (or the one-line
    message) kept in session_state."""
    from planner.errors import PlannerError
    from planner.plan.capacity import candidates
    from planner.plan.scenario import parse
    ss = st.session_state
    for key in ("plan_form_error", "plan_form_built", "plan_form_result"):
        ss.pop(key, None)
    rows: list[int] = []
    try:
        scenario, rows = form_scenario(values, mix, ctx.catalog)
        parsed = parse(scenario, "form", allow_model_files=False)
        if not candidates(parsed, ctx):
            raise PlannerError("Candidates: no instance of the chosen devices and clouds has the chosen pricing")
    except PlannerError as exc:
        ss["plan_form_error"] = form_message(str(exc), rows)
        return
    text = scenario_yaml(scenario)
    ss["plan_form_built"] = {"scenario": scenario, "text": text}
    hw = hardware_key()
    result = shown(solve_plan, hw, text)
    if result is not None:
        ss["plan_form_result"] = {"hw": hw, "text": text, "result": result}


def page() -> None:
    purpose("Plan: the instance mix and cluster size", "The cheapest (or least energy, least carbon) mix of cloud "
            "instances and on-prem servers that meets a scenario's demand, SLOs, budget and power, checked independently.")
    _restore({"plan_mode": KEPT["plan_mode"]})
    mode = st.radio("Describe the fleet with", [FORM, ADVANCED], horizontal=True, key="plan_mode",
                    help="The form: one serving workload on cloud instances, filled in here. The scenario YAML: "
                         "everything a scenario holds (several workloads, training jobs, on-prem servers, more "
                         "constraints), from an example or an upload, edited in the page")
    st.session_state["plan_mode_kept"] = mode
    if mode == FORM:
        _form()
        return
    text = _scenario_text()
    if text is None:
        return
    hw = hardware_key()
    verdict = shown(validate, hw, text)
    valid = bool(verdict and verdict["ok"])
    if verdict is not None:
        (st.caption if valid else st.error)(verdict["message"])
    pressed = st.button("Solve", key="plan_solve", type="primary", disabled=not valid,
                        help="Predict every candidate's capacity for each workload, then solve the MILP for the "
                             "mix that meets the scenario at the least objective (about 5-10 s an example)")
    if pressed and valid:
        result = shown(solve_plan, hw, text)
        st.session_state["plan_result"] = None if result is None else {"hw": hw, "text": text, "result": result}
    saved = st.session_state.get("plan_result")
    if not saved or saved["hw"] != hw or saved["text"] != text:
        if valid:
            st.caption("Press Solve to run the optimizer.")
        return
    _results(saved["result"], text)


def _results(result: dict, text: str, scenario_download: bool = True) -> None:
    """A solved plan (solve_plan's result), as `planner plan` prints it: totals, rows, assignments, training,
    best single type, Pareto front, price sensitivity, break-even, notes, the check; then the downloads (the
    scenario's too unless `scenario_download` is False: the form offers it above)."""
    from planner.plan.solve import format_objective
    from planner.units import json_safe

    plan, problems = result["plan"], result["problems"]
    totals = plan["totals"]
    months = result["horizon_months"]
    st.subheader(f"Plan for '{plan['scenario']}'")
    st.caption(f"Objective {plan['objective']}, over {months:,g} months.")
    st.markdown(f"**Total cost over the {months:,g}-month term: ${totals['cost_over_horizon_usd']:,.0f}** "
                f"(${totals['usd_per_month']:,.0f} a month)")
    cols = st.columns(3)
    cols[0].metric("$/month", f"${totals['usd_per_month']:,.0f}")
    cols[1].metric("over the horizon", f"${totals['cost_over_horizon_usd']:,.0f}")
    cols[2].metric("capex", f"${totals['capex_usd']:,.0f}")
    cols = st.columns(3)
    cols[0].metric("on-prem power", f"{totals['power_kw']:,.1f} kW")
    cols[1].metric("energy", f"{totals['energy_kwh']:,.0f} kWh")
    cols[2].metric("carbon", "not sourced" if totals["carbon_kg"] is None else f"{totals['carbon_kg']:,.0f} kg CO2e",
                   help="Over the horizon, at each region's grid intensity (hardware_specs/carbon.csv); not sourced "
                        "where no chosen region has one")

    rows = pd.DataFrame([{
        "candidate": r["candidate"], "kind": r["kind"], "device": r["device"], "units": r["units"],
        "GPUs": r["devices"], "$/month": round(r["usd_per_month"]), "capex ($)": round(r["capex_usd"]),
        "power (kW)": round(r["power_kw"], 1), "utilization (%)": round(100 * r["utilization"], 1),
        "serves (req/s)": ", ".join(f"{flow} {rps:.2f}" for flow, rps in r["serves"]),
        "trains": ", ".join(r["trains"]), "price date": dated(r["price_date"])} for r in plan["rows"]],
        columns=["candidate", "kind", "device", "units", "GPUs", "$/month", "capex ($)", "power (kW)",
                 "utilization (%)", "serves (req/s)", "trains", "price date"])
    st.markdown("**What to rent and buy**")
    _table(rows)

    if plan["assignments"]:
        st.markdown("**What each workload runs on**")
        _table(pd.DataFrame([{
            "workload": a["flow"].rsplit("/", 1)[0], "bucket (tokens in / out)": result["buckets"].get(a["flow"], ""),
            "candidate": a["candidate"], "share (%)": round(100 * a["share"], 1), "rate (req/s)": round(a["rps"], 2),
            "tensor parallel (GPUs)": a["tp"],
            "batch (requests)": f"{a['batch']:,}" if a["batch"] else "continuous",  # one type: Arrow takes it
            "capacity per unit (req/s)": round(a["capacity_rps"], 2),
            "tier": a.get("tier") or "", "band (either way)": band_text(a["band_fraction"]) if a.get("band_fraction") else "",
        } for a in plan["assignments"]]))
        st.caption("Tier: what each capacity was predicted from (measured or published kernel profiles, transferred "
                   "from a neighbour, or the datasheet alone); band: how far it may be off, either way, from the "
                   "measured error of that tier on that device family (the Calibration & accuracy page).")
    served = [a for a in plan["assignments"] if a["flow"] in result.get("flows", {})]
    if served:
        labels = {f"{a['flow']} on {a['candidate']} (tp {a['tp']}, {a['rps']:,.2f} req/s)": a for a in served}
        cols = st.columns([3, 1])
        pick = cols[0].selectbox("Simulate an assignment on the Serving page", list(labels), key="plan_handoff",
                                 help="Opens the Serving page with this assignment's model, lengths, SLOs, device, "
                                      "GPUs and rate, for the latency percentiles and curves of its deployment")
        cols[1].button("Open on the Serving page", key="plan_handoff_go", on_click=_to_serving,
                       args=(serving_handoff(result, labels[pick]),),
                       help="The Serving page simulates the deployment at the plan's rate: its latency percentiles "
                            "against the SLOs, its curve and its saturation rate")
    if plan["training"]:
        st.markdown("**Training jobs**")
        _table(pd.DataFrame([{
            "job": t["job"], "candidate": t["candidate"], "units": t["units"], "tensor parallel (GPUs)": t["tp"],
            "data parallel (replicas)": t["dp"], "time (days)": round(t["days"], 2), "cost ($)": round(t["cost_usd"]),
            "energy (kWh)": round(t["energy_kwh"]) if t["energy_known"] else None} for t in plan["training"]]))

    best = plan["best_single"]
    if best:
        st.success(f"Best single type {best['device']}: {format_objective(best['value'], best['unit'])}; this plan "
                   f"saves {format_objective(best['saving'], best['unit'])} ({best['saving_fraction']:.1%}) in its "
                   f"objective, {plan['objective']}")
    else:
        st.caption("No single device type meets the scenario on its own.")

    if plan["pareto"]:
        _pareto(plan["pareto"], totals, plan["objective"])

    if plan["sensitivity"]:
        st.markdown("**Price sensitivity** (every price 20% lower and higher, re-solved for cost)")
        _table(pd.DataFrame([{
            "prices (% of catalog)": round(100 * s["price_factor"]),
            "cost over the horizon ($)": round(s["cost_usd"]) if s.get("feasible") else None,
            "mix": ("changes" if s["plan_changed"] else "unchanged") if s.get("feasible") else "infeasible"}
            for s in plan["sensitivity"]]))

    if plan["breakeven"]:
        st.markdown("**Break-even, renting against owning** (one server's worth of devices, at the scenario's "
                    "utilization)")
        _table(pd.DataFrame([{
            "device": b["device"], "server": b["server"], "cloud instance": b["cloud_instance"],
            "cloud price date": dated(b["cloud_price_date"]), "capex ($)": round(b["capex_usd"]),
            "capex date": dated(b["capex_date"]), "renting ($/month)": round(b["cloud_usd_per_month"]),
            "owning opex ($/month)": round(b["onprem_opex_usd_per_month"]),
            "renting over the horizon ($)": round(b["cloud_over_horizon_usd"]),
            "owning over the horizon ($)": round(b["onprem_over_horizon_usd"]),
            "buying pays off after (months)": "never" if b["breakeven_months"] is None
            else f"{b['breakeven_months']:.1f}",
            "renting cheaper below (% utilization)": "at any utilization" if b["breakeven_utilization"] is None
            else f"{100 * b['breakeven_utilization']:.0f}"} for b in plan["breakeven"]]))
        for b in plan["breakeven"]:
            from planner.plan.tco import explain_breakeven
            why = b.get("breakeven_why") or explain_breakeven(
                b["breakeven_months"], b["breakeven_utilization"], b.get("lifetime_months"),
                b.get("onprem_usd_per_month_full_use"), b.get("cloud_usd_per_month_full_use"))
            st.caption(f"{b['device']}: {why}.")

    for note in plan["notes"]:
        st.caption(f"Note: {app_words(note)}.")
    if problems:
        st.error("Independent check failed: " + "; ".join(problems))
    else:
        st.caption("Independent check passed: every assignment re-predicted (or re-simulated) meets demand, SLOs, "
                   "budget and power.")

    out = json_safe({**plan, "check": {"passed": not problems, "problems": problems}})
    cols = st.columns(3 if scenario_download else 2)
    cols[0].download_button("Plan as CSV", spreadsheet_csv(rows), "plan.csv", "text/csv", key="dl_csv",
                            on_click="ignore", help="The table of what to rent and buy, one row per candidate")
    cols[1].download_button("Plan as JSON", json.dumps(out, indent=2, default=str, allow_nan=False), "plan.json",
                            "application/json", key="dl_json", on_click="ignore",
                            help="Everything above, as `planner plan --json` writes it (with the check's result)")
    if scenario_download:
        cols[2].download_button("Scenario as YAML", text, "scenario.yaml", "text/yaml", key="dl_yaml",
                                on_click="ignore", help="The scenario as solved, edits included: `planner plan "
                                                        "scenario.yaml` solves it again")


def _table(frame: pd.DataFrame) -> None:
    """A table with every number shown with thousands separators (the values stay numbers: they sort)."""
    numeric = frame.select_dtypes("number").columns
    st.dataframe(frame, hide_index=True,
                 column_config={c: st.column_config.NumberColumn(format="localized") for c in numeric})
    if len(frame.columns) > WIDE_COLUMNS:  # wider than a laptop's screen: its last columns are off to the right
        st.caption(f"{len(frame.columns)} columns: scroll the table sideways (or enlarge it, top right) for all.")


def pareto_frame(front, totals: dict) -> pd.DataFrame:
    """The front's points (planner.plan.solve.pareto: non-dominated only) for the chart and the table, each
    marked when it is this plan's own (the same cost and energy as its totals)."""
    return pd.DataFrame([{"energy_weight": pt["energy_weight"], "cost_usd": pt["cost_usd"],
                          "energy_kwh": pt["energy_kwh"],
                          "this_plan": (pt["cost_usd"], pt["energy_kwh"]) == (totals["cost_over_horizon_usd"],
                                                                               totals["energy_kwh"])}
                         for pt in front])


def _pareto(front, totals: dict, objective: str) -> None:
    points = pareto_frame(front, totals)
    own = pd.DataFrame([{"energy_kwh": totals["energy_kwh"], "cost_usd": totals["cost_over_horizon_usd"],
                         "label": "this plan"}])
    x = alt.X("energy_kwh:Q", title="energy over the horizon (kWh)", scale=alt.Scale(zero=False))
    y = alt.Y("cost_usd:Q", title="cost over the horizon ($)", scale=alt.Scale(zero=False))
    tooltip = [alt.Tooltip("energy_weight:Q", title="energy weight"),
               alt.Tooltip("cost_usd:Q", title="cost ($)", format=",.0f"),
               alt.Tooltip("energy_kwh:Q", title="energy (kWh)", format=",.0f")]
    line = alt.Chart(points).mark_line(point=True).encode(x=x, y=y, order="energy_kwh:Q", tooltip=tooltip)
    mark = alt.Chart(own).mark_point(shape="diamond", size=220, filled=True, color="#d62728").encode(x=x, y=y)
    label = alt.Chart(own).mark_text(dy=-16, color="#d62728").encode(x=x, y=y, text="label:N")
    st.markdown("**Cost versus energy** (the Pareto front: weights swept, each term normalized by its own optimum; "
                "dominated plans left out)")
    st.altair_chart(alt.layer(line, mark, label), width="stretch")
    on_front = bool(points["this_plan"].any())
    st.caption("The red diamond is this plan" + (", a point of the front." if on_front else
               f": minimizing {objective} puts it off the cost-energy front."))
    _table(points.assign(this_plan=points["this_plan"].map({True: "this plan", False: ""})).rename(columns={
        "energy_weight": "energy weight (0-1)", "cost_usd": "cost over the horizon ($)",
        "energy_kwh": "energy (kWh)", "this_plan": "plan"}).round({"cost over the horizon ($)": 0, "energy (kWh)": 0}))
