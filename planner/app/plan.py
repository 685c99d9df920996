"""Plan page: the instance mix and cluster size for a scenario (planner.plan)."""

from __future__ import annotations

import json

import altair as alt
import pandas as pd
import streamlit as st

from planner.app.common import ROOT, context, dated, hardware_key, purpose, shown, upload_text


@st.cache_data(show_spinner="Solving the plan (capacities from the predictor, then the MILP)...")
def solve_plan(hw: str, scenario_text: str) -> dict:
    from planner.plan.check import check
    from planner.plan.scenario import loads
    from planner.plan.solve import solve
    # An uploaded scenario is data from anyone: safe YAML with limits, zoo ids only (no code, and no
    # config.json paths, which would read files on the server).
    scenario = loads(scenario_text, "scenario", allow_model_files=False)
    plan = solve(scenario, context())
    return {"plan": plan.as_dict(), "problems": check(plan, scenario, context())}



def page() -> None:
    purpose("Plan: the instance mix and cluster size", "The cheapest (or least energy, least carbon) mix of cloud instances and on-prem servers that meets a scenario's demand, SLOs, budget and power, checked independently.")
    examples = sorted(p.name for p in (ROOT / "examples").glob("*.yaml"))
    source = st.radio("Scenario", ["Example", "Upload YAML"], horizontal=True, key="plan_source")
    text = None
    if source == "Example":
        name = st.selectbox("Example", examples, index=examples.index("mixed.yaml"), key="plan_example")
        text = (ROOT / "examples" / name).read_text()
    else:
        text = upload_text("Scenario YAML", ["yaml", "yml"], "scenario_upload")
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
    result = shown(solve_plan, hardware_key(), text)
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
                           "price_date"]].assign(price_date=rows["price_date"].map(dated)), hide_index=True)
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
