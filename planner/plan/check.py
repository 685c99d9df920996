"""An independent check of a Plan: re-predict every assignment from scratch and verify demand,
SLOs, capacity, budget, capex and power. It uses the predictor directly (not the optimizer's
capacity table) and the catalog's prices, so an error in either path shows up as a failure."""

from __future__ import annotations

from planner.plan.capacity import HOURS_PER_MONTH, candidates
from planner.plan.scenario import Scenario
from planner.plan.solve import Plan
from planner.predict.api import Request, predict
from planner.predict.context import Context, default_context

TOLERANCE = 1e-6


def check(plan: Plan, scenario: Scenario, ctx: Context | None = None) -> list[str]:
    """Problems found (empty when the plan passes)."""
    ctx = ctx or default_context()
    problems: list[str] = []
    by_key = {c.key: c for c in candidates(scenario, ctx)}
    units = {r.candidate: r.units for r in plan.rows}
    load: dict[str, float] = {}
    served: dict[str, float] = {}
    workloads = {w.name: w for w in scenario.workloads}
    simulated = []
    for a in plan.assignments:
        name, index = a["flow"].rsplit("/", 1)
        w = workloads[name]
        b = w.buckets[int(index)]
        cand = by_key.get(a["candidate"])
        if cand is None:
            problems.append(f"{a['candidate']}: not a candidate of this scenario")
            continue
        if w.simulated:
            # load in units from the plan's recorded capacity; the SLOs are re-simulated below at the
            # rate each copy then carries
            load[cand.key] = load.get(cand.key, 0.0) + a["rps"] / a["capacity_rps"]
            served[a["flow"]] = served.get(a["flow"], 0.0) + a["rps"]
            simulated.append((a, w, b, cand))
            continue
        p = predict(Request(w.model, cand.device_id, gpus=a["tp"], tp=a["tp"], batch=a["batch"],
                            input_len=b.input_len, output_len=b.output_len, dtype=w.dtype, engine=w.engine), ctx)
        m = p.metrics
        if not p.fits:
            problems.append(f"{a['flow']} on {cand.key}: tp {a['tp']} batch {a['batch']} does not fit in memory")
        if m["ttft_s"] > w.ttft_s * (1 + TOLERANCE):
            problems.append(f"{a['flow']} on {cand.key}: TTFT {m['ttft_s']:.3f} s over the {w.ttft_s} s SLO")
        if m["tpot_s"] > w.tpot_s * (1 + TOLERANCE):
            problems.append(f"{a['flow']} on {cand.key}: TPOT {m['tpot_s']:.4f} s over the {w.tpot_s} s SLO")
        rps_per_unit = (cand.device_count // a["tp"]) * a["batch"] / m["latency_s"]
        load[cand.key] = load.get(cand.key, 0.0) + a["rps"] / rps_per_unit
        served[a["flow"]] = served.get(a["flow"], 0.0) + a["rps"]
    for a, w, b, cand in simulated:
        problems += _resimulate(a, w, b, cand, load[cand.key] / max(1, units.get(cand.key, 0)), ctx)
    for wi, w in enumerate(scenario.workloads):
        for bi, b in enumerate(w.buckets):
            flow = f"{w.name}/{bi}"
            need = w.demand_rps * b.share
            if served.get(flow, 0.0) < need * (1 - TOLERANCE):
                problems.append(f"{flow}: serves {served.get(flow, 0.0):.3f} of {need:.3f} requests/s")
    for key, used in load.items():
        if used > units.get(key, 0) * (1 + 1e-6) + 1e-9:
            problems.append(f"{key}: carries {used:.3f} units of load on {units.get(key, 0)} units")
    c = scenario.constraints
    monthly = sum(by_key[r.candidate].usd_per_h * HOURS_PER_MONTH * r.units for r in plan.rows if r.candidate in by_key)
    # on-prem electricity at the site's catalog price, on the energy the plan draws
    monthly += sum(by_key[r.candidate].electricity_usd_per_kwh * r.energy_kwh for r in plan.rows
                   if r.candidate in by_key) / scenario.horizon_months
    monthly += sum(t["cost_usd"] for t in plan.training) / scenario.horizon_months
    if c.monthly_budget_usd is not None and monthly > c.monthly_budget_usd * (1 + 1e-6):
        problems.append(f"costs ${monthly:,.0f}/month over the ${c.monthly_budget_usd:,.0f} budget")
    capex = sum(by_key[r.candidate].capex_usd * r.units for r in plan.rows if r.candidate in by_key)
    if c.capex_cap_usd is not None and capex > c.capex_cap_usd * (1 + 1e-6):
        problems.append(f"capex ${capex:,.0f} over the ${c.capex_cap_usd:,.0f} cap")
    power = sum(by_key[r.candidate].power_kw * r.units for r in plan.rows
                if r.candidate in by_key and by_key[r.candidate].kind == "onprem")
    if c.power_cap_kw is not None and power > c.power_cap_kw * (1 + 1e-6):
        problems.append(f"on-prem power {power:.1f} kW over the {c.power_cap_kw} kW cap")
    return problems


def _resimulate(a: dict, w, b, cand, utilization: float, ctx: Context) -> list[str]:
    """Simulate one copy of the assignment at the rate it carries in the plan: its share of the
    candidate's units, loaded as the plan loads them (utilization x the copy's capacity), and check the
    SLO statistics of that run: the Serving page's run at that rate (planner/serve/sweep.py run_at_rate)."""
    from planner.plan.capacity import copy_request, copy_slo
    from planner.serve.sweep import run_at_rate

    copies = cand.device_count // a["tp"]
    rate = a["capacity_rps"] / copies * min(1.0, utilization)
    run = run_at_rate(copy_request(w, b, cand.device_id, a["tp"]), rate, slo=copy_slo(w), ctx=ctx)
    m = run.metrics
    out = []
    for metric, limit, stat, values in (("TTFT", w.ttft_s, w.ttft_stat, m.ttft_s), ("TPOT", w.tpot_s, w.tpot_stat,
                                                                                  m.tpot_s)):
        value = values.get(stat)
        if value is None or value > limit * (1 + TOLERANCE):
            shown = "none" if value is None else f"{value:.4f} s"
            out.append(f"{a['flow']} on {cand.key}: simulated {stat} {metric} {shown} at {rate:.2f} requests/s per "
                       f"copy, over the {limit} s SLO")
    if m.rejected:
        out.append(f"{a['flow']} on {cand.key}: {m.rejected} requests longer than a copy's KV cache")
    return out
