"""Plan page: the instance mix and cluster size for a scenario (planner.plan), with everything `planner plan`
prints. The scenario box is checked by the library's own loader as it is edited; a solved plan stays on
the page, through downloads and any other rerun, until the scenario text (or the session's hardware)
changes."""

from __future__ import annotations

import json

import altair as alt
import pandas as pd
import streamlit as st

from planner.app.common import ROOT, context, dated, hardware_key, purpose, shown, upload_text

DEFAULT_EXAMPLE = "mixed.yaml"
KEPT = {"plan_source": "Example", "plan_example": DEFAULT_EXAMPLE}
"""The Plan page's choices and their first values. Streamlit forgets a widget's value while its page is not
drawn, so each is also kept under "<key>_kept" and handed back when the page is opened again."""


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
    return {"plan": plan.as_dict(), "problems": check(plan, scenario, context()),
            "horizon_months": scenario.horizon_months, "buckets": buckets}


def _scenario_text() -> str | None:
    """The scenario box: an example or an upload, then edited freely. None when nothing is uploaded yet."""
    examples = sorted(p.name for p in (ROOT / "examples").glob("*.yaml"))
    for key, first in KEPT.items():
        if key not in st.session_state:  # first visit, or the page was left: Streamlit dropped the value
            st.session_state[key] = st.session_state.get(f"{key}_kept", first)
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


def page() -> None:
    purpose("Plan: the instance mix and cluster size", "The cheapest (or least energy, least carbon) mix of cloud "
            "instances and on-prem servers that meets a scenario's demand, SLOs, budget and power, checked independently.")
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


def _results(result: dict, text: str) -> None:
    """A solved plan (solve_plan's result), as `planner plan` prints it: totals, rows, assignments, training,
    best single type, Pareto front, price sensitivity, break-even, notes, the check; then the downloads."""
    from planner.plan.solve import format_objective
    from planner.units import json_safe

    plan, problems = result["plan"], result["problems"]
    totals = plan["totals"]
    st.subheader(f"Plan for '{plan['scenario']}'")
    st.caption(f"Objective {plan['objective']}, over {result['horizon_months']:g} months.")
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
            "tensor parallel (GPUs)": a["tp"], "batch (requests)": a["batch"],
            "capacity per unit (req/s)": round(a["capacity_rps"], 2)} for a in plan["assignments"]]))
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
        st.caption(f"Note: {note}.")
    if problems:
        st.error("Independent check failed: " + "; ".join(problems))
    else:
        st.caption("Independent check passed: every assignment re-predicted (or re-simulated) meets demand, SLOs, "
                   "budget and power.")

    out = json_safe({**plan, "check": {"passed": not problems, "problems": problems}})
    cols = st.columns(3)
    cols[0].download_button("Plan as CSV", rows.to_csv(index=False), "plan.csv", "text/csv", key="dl_csv",
                            on_click="ignore", help="The table of what to rent and buy, one row per candidate")
    cols[1].download_button("Plan as JSON", json.dumps(out, indent=2, default=str, allow_nan=False), "plan.json",
                            "application/json", key="dl_json", on_click="ignore",
                            help="Everything above, as `planner plan --json` writes it (with the check's result)")
    cols[2].download_button("Scenario as YAML", text, "scenario.yaml", "text/yaml", key="dl_yaml", on_click="ignore",
                            help="The scenario as solved, edits included: `planner plan scenario.yaml` solves it again")


def _table(frame: pd.DataFrame) -> None:
    """A table with every number shown with thousands separators (the values stay numbers: they sort)."""
    numeric = frame.select_dtypes("number").columns
    st.dataframe(frame, hide_index=True,
                 column_config={c: st.column_config.NumberColumn(format="localized") for c in numeric})


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
