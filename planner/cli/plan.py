"""`planner plan`: the instance mix and cluster size for a scenario, checked independently."""

from __future__ import annotations

import argparse
import json

from planner.cli import progress
from planner.units import band_label


def add_plan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="recommend the instance mix and cluster size for a scenario",
                       description="Solve a procurement scenario (YAML) with a MILP over catalog instances and "
                                   "on-prem servers; capacities come from the predictor.")
    p.add_argument("scenario", help="scenario YAML (see examples/)")
    p.add_argument("--objective", choices=("cost", "energy", "carbon"), help="override the scenario's objective")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    progress.step("importing", of=4)
    from dataclasses import replace

    from planner.cli import imported
    from planner.hardware.catalog import dated
    from planner.plan.check import check
    from planner.plan.scenario import load
    from planner.plan.solve import format_objective, solve
    from planner.plan.tco import explain_breakeven
    from planner.units import json_safe

    imported()
    progress.step("reading the scenario")
    scenario = load(args.scenario)
    if args.objective:
        scenario = replace(scenario, objective=args.objective, weights=((args.objective, 1.0),))
    progress.step("solving: each candidate's capacity predicted, then the MILP, Pareto front and sensitivity")
    plan = solve(scenario)
    progress.step("checking the plan")
    problems = check(plan, scenario)
    progress.done()
    if args.json:
        out = plan.as_dict()
        out["check"] = {"passed": not problems, "problems": problems}
        print(json.dumps(json_safe(out), indent=2, default=str, allow_nan=False))
        return 0 if not problems else 1
    print(f"plan for '{plan.scenario}' (objective {plan.objective}, {scenario.horizon_months:g} months)")
    print(f"{'candidate':<58} {'units':>5} {'GPUs':>5} {'$/month':>10} {'capex':>10} {'kW':>6} {'util':>5}  serves")
    for r in plan.rows:
        serves = ", ".join(f"{f} {rps:.2f} req/s" for f, rps in r.serves) + (f" trains {', '.join(r.trains)}" if r.trains else "")
        print(f"{r.candidate[:58]:<58} {r.units:>5} {r.devices:>5} {r.usd_per_month:>10,.0f} {r.capex_usd:>10,.0f} "
              f"{r.power_kw:>6.1f} {r.utilization:>5.0%}  {serves}  (price of {dated(r.price_date)})")
        print(f"{'':<15}{r.hand_check}")
        tiers = sorted({(a["tier"], a["band_fraction"]) for a in plan.assignments
                        if a["candidate"] == r.candidate and a.get("tier")})
        if tiers:  # how far each capacity may be off: a cheap candidate on the datasheet tier is a guess
            print(f"{'':<15}capacity predicted on " + "; ".join(
                f"tier {t} (band {band_label(f)})" for t, f in tiers))
    for t in plan.training:
        print(f"training {t['job']}: {t['units']} x {t['candidate']} (tp {t['tp']}, dp {t['dp']}), "
              f"{t['days']:.2f} days, ${t['cost_usd']:,.0f}, {t['energy_kwh']:,.0f} kWh")
    print(f"total          ${plan.usd_per_month:,.0f}/month, ${plan.cost_over_horizon_usd:,.0f} over the horizon, "
          f"capex ${plan.capex_usd:,.0f}, on-prem power {plan.power_kw:.1f} kW")
    carbon = "carbon not sourced" if plan.carbon_kg is None else f"{plan.carbon_kg:,.0f} kg CO2e"
    print(f"energy         {plan.energy_kwh:,.0f} kWh, {carbon} over the horizon")
    if plan.best_single:
        b = plan.best_single
        print(f"best single    {b['device']}: {format_objective(b['value'], b['unit'])}; this plan saves "
              f"{format_objective(b['saving'], b['unit'])} ({b['saving_fraction']:.1%}) in its objective, {plan.objective}")
    for pt in plan.pareto:
        print(f"pareto         energy weight {pt['energy_weight']:.2f}: ${pt['cost_usd']:,.0f}, {pt['energy_kwh']:,.0f} kWh")
    for s in plan.sensitivity:
        if s.get("feasible"):
            print(f"prices x{s['price_factor']:.1f}     ${s['cost_usd']:,.0f}; mix {'changes' if s['plan_changed'] else 'unchanged'}")
    for b in plan.breakeven:  # a None break-even is said as what it means (planner.plan.tco.explain_breakeven)
        why = explain_breakeven(b["breakeven_months"], b["breakeven_utilization"], b.get("lifetime_months"),
                                b.get("onprem_usd_per_month_full_use"), b.get("cloud_usd_per_month_full_use"))
        at = "" if b.get("utilization") is None else \
            (f" at this plan's {b['utilization']:.0%} load" if b.get("utilization_from") == "plan"
             else f" at the scenario's {b['utilization']:.0%} utilization")
        print(f"break-even     {b['device']}: over the horizon{at}, owning one server costs "
              f"${b['onprem_over_horizon_usd']:,.0f} (capex ${b['capex_usd']:,.0f} + ${b['onprem_opex_usd_per_month']:,.0f}"
              f"/month) vs renting its devices ${b['cloud_over_horizon_usd']:,.0f} ({b['cloud_instance']}, price of "
              f"{dated(b['cloud_price_date'])}); {why}")
    for note in plan.notes:
        print(f"note           {note}")
    print("check          " + ("passed: every assignment re-predicted (or re-simulated) meets demand, SLOs, budget and power"
                               if not problems else "FAILED: " + "; ".join(problems)))
    return 0 if not problems else 1


