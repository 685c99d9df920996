"""Solve a scenario into a Plan: what to buy or rent, what it serves, what it costs and draws, how it
compares with the best single device type, a cost/energy Pareto front, price sensitivity, and the
cloud-versus-on-prem break-even of the device types the scenario can both rent and buy."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyomo.environ as pyo

from planner.errors import PlannerError
from planner.plan.capacity import HOURS_PER_MONTH
from planner.plan.optimize import (
    InfeasibleError,
    Problem,
    build_model,
    build_problem,
    config_energy_kwh,
    explain_infeasible,
    solve_model,
)
from planner.plan.scenario import Scenario
from planner.predict.context import Context, default_context


@dataclass(frozen=True, slots=True)
class PlanRow:
    candidate: str
    kind: str
    device: str
    units: int
    devices: int
    usd_per_month: float
    capex_usd: float
    power_kw: float
    utilization: float
    """Load carried / units held (serving)."""
    serves: tuple[tuple[str, float], ...]
    """(flow, requests/s) this candidate serves."""
    trains: tuple[str, ...]
    price_date: str
    usd_per_unit_month: float = 0.0
    """Rental per unit-month (cloud), or the on-prem server's fixed cost per unit-month (capex over its
    life, colocation, operations), whatever its load."""
    electricity_usd_per_kwh: float = 0.0
    """On-prem: the site's electricity price, billed on energy_kwh (cloud: 0, in the rental)."""
    pue: float = 1.0
    idle_kw_per_unit: float | None = 0.0
    """Facility power of one unit carrying no load (devices at idle + the rest of the server, x PUE), kW."""
    load_kw: float = 0.0
    """Facility power the load adds above idle: Σ_f load_f x (serving kW_f - idle kW), kW."""
    average_kw: float = 0.0
    """units x idle_kw_per_unit + load_kw: the row's average facility power, kW."""
    energy_kwh: float = 0.0
    """average_kw x the horizon's hours (serving; training runs are listed apart)."""

    @property
    def hand_check(self) -> str:
        """The row's energy and cost from its own printed figures, in one line."""
        hours = self.energy_kwh / self.average_kw if self.average_kw else 0.0
        idle = "idle not sourced" if self.idle_kw_per_unit is None else \
            f"{self.units} x {self.idle_kw_per_unit:.3f} kW idle"
        text = (f"energy {idle} + {self.load_kw:.3f} kW load = {self.average_kw:.3f} kW x {hours:,.0f} h "
                f"= {self.energy_kwh:,.0f} kWh (PUE {self.pue:.2f} included); cost {self.units} x "
                f"${self.usd_per_unit_month:,.0f}/unit-month")
        if self.electricity_usd_per_kwh:
            months = hours / HOURS_PER_MONTH
            text += (f" + {self.energy_kwh:,.0f} kWh x ${self.electricity_usd_per_kwh:.4f}/kWh / {months:g} months")
        return text + f" = ${self.usd_per_month:,.0f}/month"


@dataclass(frozen=True)
class Plan:
    scenario: str
    objective: str
    rows: tuple[PlanRow, ...]
    usd_per_month: float
    cost_over_horizon_usd: float
    capex_usd: float
    power_kw: float
    energy_kwh: float
    carbon_kg: float | None
    """Over the horizon; None when no chosen candidate's region has a grid intensity (not sourced, not 0)."""
    training: tuple[dict, ...]
    assignments: tuple[dict, ...]
    """Every (flow, candidate, share, rps, tp, batch) used: what the independent check re-predicts."""
    best_single: dict | None = None
    pareto: tuple[dict, ...] = ()
    sensitivity: tuple[dict, ...] = ()
    breakeven: tuple[dict, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        return {"scenario": self.scenario, "objective": self.objective,
                "rows": [r.__dict__ if hasattr(r, "__dict__") else {f: getattr(r, f) for f in r.__dataclass_fields__}
                         for r in self.rows],
                "totals": {"usd_per_month": self.usd_per_month, "cost_over_horizon_usd": self.cost_over_horizon_usd,
                           "capex_usd": self.capex_usd, "power_kw": self.power_kw, "energy_kwh": self.energy_kwh,
                           "carbon_kg": self.carbon_kg},
                "training": list(self.training), "assignments": list(self.assignments),
                "best_single": self.best_single, "pareto": list(self.pareto), "sensitivity": list(self.sensitivity),
                "breakeven": list(self.breakeven), "notes": list(self.notes)}


def _extract(m, p: Problem) -> tuple[tuple[PlanRow, ...], tuple[dict, ...], tuple[dict, ...], dict]:
    by_key = {c.key: c for c in p.candidates}
    horizon_h = p.scenario.horizon_months * HOURS_PER_MONTH
    rows, assignments, training = [], [], []
    chosen_jobs = [(j, k) for j, k in m.K if pyo.value(m.choose[j, k]) > 0.5]
    for c in m.C:
        units = round(pyo.value(m.units[c]))
        if units <= 0:
            continue
        cand = by_key[c]
        serves, load = [], 0.0
        for f, cc in m.ARCS:
            if cc != c:
                continue
            share = pyo.value(m.share[f, c])
            if share > 1e-9:
                rps = share * p.demand_rps[f]
                cap = p.capacity[(f, c)]
                serves.append((f, rps))
                load += rps / cap.rps
                assignments.append({"flow": f, "candidate": c, "share": share, "rps": rps, "tp": cap.tp,
                                    "batch": cap.batch, "capacity_rps": cap.rps, "kw_at_capacity": cap.kw_per_unit,
                                    "tier": cap.tier, "band_fraction": cap.band_fraction})
        trains = tuple(j for j, k in chosen_jobs if p.configs[(j, k)].candidate == c)
        energy = pyo.value(m._energy_by_candidate[c])
        average = energy / horizon_h
        idle = units * (cand.idle_kw or 0.0)
        usd_month = units * cand.usd_per_month + energy * cand.electricity_usd_per_kwh / p.scenario.horizon_months
        rows.append(PlanRow(c, cand.kind, cand.device_id, units, units * cand.device_count, usd_month,
                            units * cand.capex_usd, units * cand.power_kw if cand.kind == "onprem" else 0.0,
                            load / units if units else 0.0, tuple(serves), trains, cand.price_date,
                            cand.usd_per_month, cand.electricity_usd_per_kwh, cand.pue, cand.idle_kw,
                            max(0.0, average - idle), average, energy))
    for j, k in chosen_jobs:
        cfg = p.configs[(j, k)]
        training.append({"job": j, "candidate": cfg.candidate, "units": cfg.units, "tp": cfg.tp, "dp": cfg.dp,
                         "days": cfg.time_s / 86400, "cost_usd": cfg.cost_usd, "energy_kwh": cfg.energy_kwh or 0.0,
                         "energy_known": cfg.energy_kwh is not None,
                         "energy_counted_kwh": config_energy_kwh(cfg, by_key[cfg.candidate])})
    terms = {k: pyo.value(v) for k, v in m._terms.items()}
    return tuple(rows), tuple(assignments), tuple(training), terms


def _solve(p: Problem, **kw):
    m = build_model(p, **kw)
    if not solve_model(m):
        return None
    return m


SAME_VALUE = 1e-6
"""Two solves' costs (or energies) closer than this share of either are the same value, apart in the
last digits of the solver's sums and its tolerances (HiGHS: 1e-7 per row, 1e-6 on integrality)."""


def tie_break(weights: dict[str, float]) -> str:
    """The term that breaks ties among plans equally good in the objective: energy for a pure-cost
    objective (of two equally cheap plans, the one drawing less), cost for any other (of two plans
    drawing the same energy or carbon, the cheaper)."""
    return "energy" if {k for k, v in weights.items() if v} == {"cost"} else "cost"


def _solve_lex(p: Problem, second: str, **kw):
    """Minimize the objective of build_model(p, **kw), then `second` (a term: cost, energy, carbon) among
    its optima: the objective is held at its optimum by a constraint (objective <= its optimum, within
    the solver's feasibility tolerance). The plan solved is then not dominated in (objective,
    second): no other feasible plan is as good in both and better in one. The second solution is
    kept only when it lowers `second` by more than SAME_VALUE (a real tie broken); otherwise the
    first is, to the last digit (the same plan re-solved differs only in the solver's noise). None
    when infeasible."""
    m = _solve(p, **kw)
    if m is None:
        return None
    first = [(v, v.value) for v in m.component_data_objects(pyo.Var)]
    before = pyo.value(m._terms[second])
    held = m.objective.expr <= pyo.value(m.objective)
    # an objective of zero weights is a constant: every plan holds it (Pyomo gives a bool, not a constraint)
    m.objective_held = pyo.Constraint(expr=pyo.Constraint.Feasible if isinstance(held, bool) else held)
    m.objective.deactivate()
    m.tie_break = pyo.Objective(expr=m._terms[second], sense=pyo.minimize)
    try:
        # the first solution is feasible here, so this fails only on the solver's numerics
        solved = solve_model(m)
    except PlannerError:
        solved = False
    if not solved or pyo.value(m._terms[second]) >= before - SAME_VALUE * max(1.0, abs(before)):
        for v, value in first:
            v.set_value(value, skip_validation=True)
    m.tie_break.deactivate()
    m.objective.activate()
    m.del_component(m.objective_held)
    return m


def solve(scenario: Scenario, ctx: Context | None = None, extras: bool = True) -> Plan:
    """Solve `scenario` (raise InfeasibleError naming the binding constraints); with `extras`, add the
    best single-type comparison, the Pareto front, price sensitivity and the break-even table."""
    ctx = ctx or default_context()
    p = build_problem(scenario, ctx)
    weights, scales = dict(scenario.weights), {}
    if scenario.objective == "weighted":
        # normalize each term by its own optimum, so that weights compare like with like
        for term in ("cost", "energy", "carbon"):
            if weights.get(term):
                alone = _solve(p, weights={term: 1.0})
                if alone is None:
                    raise explain_infeasible(p)
                scales[term] = max(pyo.value(alone._terms[term]), 1e-9)
    m = _solve_lex(p, tie_break(weights), weights=weights, scales=scales)
    if m is None:
        raise explain_infeasible(p)
    rows, assignments, training, terms = _extract(m, p)
    months = scenario.horizon_months
    usd_month = sum(r.usd_per_month for r in rows) + sum(t["cost_usd"] for t in training) / months
    notes = []
    by_key = {c.key: c for c in p.candidates}
    partial = any(p.capacity[(a["flow"], a["candidate"])].kw_per_unit is None for a in assignments) or \
        any(r.idle_kw_per_unit is None for r in rows)
    if partial:
        notes.append("energy excludes candidates with no sourced TDP; the cost-energy front (pareto) is over the "
                     "candidates with a sourced TDP only, so this plan is not one of its points")
    no_rest = sorted({r.device for r in rows if by_key[r.candidate].rest_source is None})
    if no_rest:
        notes.append(f"energy counts only the devices of {', '.join(no_rest)}: no sourced power for the rest of "
                     "their servers (hardware_specs/energy/server_power.csv)")
    sourced = [by_key[r.candidate].kg_co2e_per_kwh is not None for r in rows]
    if not any(sourced):  # nothing to sum: unknown, not zero
        notes.append("carbon not sourced: no chosen candidate's region has a grid intensity in carbon.csv")
    elif not all(sourced):
        notes.append("carbon excludes candidates whose region has no grid intensity in carbon.csv")
    plan = Plan(scenario.name, scenario.objective, rows, usd_month, terms["cost"], sum(r.capex_usd for r in rows),
                sum(r.power_kw for r in rows), terms["energy"], terms["carbon"] if any(sourced) else None, training,
                assignments, notes=tuple(notes))
    if not extras:
        return plan
    mixed = {k: pyo.value(v) for k, v in m._terms.items()}
    best = best_single(p, scenario.objective, weights, scales, mixed)
    positive = {k for k, v in weights.items() if v}
    partial = any("no sourced TDP" in n for n in plan.notes)  # its energy total leaves candidates out
    own = {} if partial else {0.0: (terms["cost"], terms["energy"])} if positive == {"cost"} else \
        {1.0: (terms["cost"], terms["energy"])} if positive == {"energy"} else {}
    return Plan(**{**plan.__dict__, "best_single": best, "pareto": pareto(p, own=own),
                   "sensitivity": sensitivity(p, terms["cost"], rows), "breakeven": breakeven(p, ctx, rows)})


SAVING_TOLERANCE = 1e-6
"""A saving smaller than this share of the objective is the solver's feasibility tolerance (HiGHS: 1e-7 per
constraint), reported as 0 rather than as "-$0"."""
OBJECTIVE_UNITS = {"cost": "USD", "energy": "kWh", "carbon": "kg CO2e", "weighted": "weighted score"}
"""The unit each objective is measured in: the best-single comparison is made in it."""


def objective_value(terms: dict[str, float], weights: dict[str, float], scales: dict[str, float]) -> float:
    """The objective as the solver scores it: sum of weight x term / scale (USD, kWh or kg CO2e for a
    single-term objective, where the weight is 1 and the scale 1; a unitless score for `weighted`)."""
    return sum(weights.get(k, 0.0) * v / scales.get(k, 1.0) for k, v in terms.items())


def format_objective(value: float, unit: str) -> str:
    """Human text of an objective value in its unit: '$1,234', '1,234 kWh', '1,234 kg CO2e', '0.812'."""
    if unit == "USD":
        return f"-${-value:,.0f}" if value < 0 else f"${value:,.0f}"
    if unit == "weighted score":
        return f"{value:.3f}"
    return f"{value:,.0f} {unit}"


def best_single(p: Problem, objective: str, weights: dict[str, float], scales: dict[str, float],
                mixed_terms: dict[str, float]) -> dict | None:
    """The best plan restricted to one device type under the scenario's own objective, and what the
    mixed plan saves against it in that objective's unit (`unit`): a carbon plan is compared in
    kg CO2e, never in dollars it was not asked to minimize. Returns None when no single type is
    feasible. `saving_fraction` is saving / the single type's value (0 when that value is 0)."""
    best = None
    for device in sorted({c.device_id for c in p.candidates}):
        keep = tuple(c for c in p.candidates if c.device_id == device)
        keys = {c.key for c in keep}
        sub = Problem(p.scenario, keep, p.flows, p.demand_rps, {k: v for k, v in p.capacity.items() if k[1] in keys},
                      p.jobs, {k: v for k, v in p.configs.items() if v.candidate in keys}, p.flow_labels)
        if any(not any(f == ff for ff, _ in sub.capacity) for f in sub.flows) or \
                any(not any(j == jj for jj, _ in sub.configs) for j in sub.jobs):
            continue
        m = _solve(sub, weights=weights, scales=scales)
        if m is None:
            continue
        terms = {k: pyo.value(v) for k, v in m._terms.items()}
        value = objective_value(terms, weights, scales)
        if best is None or value < best["value"]:
            best = {"device": device, "value": value, "cost_over_horizon_usd": terms["cost"],
                    "energy_kwh": terms["energy"], "carbon_kg": terms["carbon"]}
    if best is None:
        return None
    plan_value = objective_value(mixed_terms, weights, scales)
    saving = best["value"] - plan_value
    if abs(saving) <= SAVING_TOLERANCE * abs(best["value"]):
        saving = 0.0  # within the solver's tolerances both plans are equally good: no sign to report
    return {**best, "objective": objective, "unit": OBJECTIVE_UNITS[objective], "plan_value": plan_value,
            "saving": saving, "saving_fraction": saving / best["value"] if best["value"] else 0.0}


def pareto(p: Problem, steps: int = 5, own: dict[float, tuple[float, float]] | None = None) -> tuple[dict, ...]:
    """The cost-versus-energy Pareto front: the plans minimizing (1−w)·cost/cost* + w·energy/energy*
    for `steps` weights w from 0 to 1 (each term normalized by its own optimum), as points
    {energy_weight, cost_usd, energy_kwh}, with every dominated point left out. Every solve leaves out
    the candidates whose energy is unknown (no sourced TDP): counted as 0 kWh, a cheap plan on them would
    look as if it drew less than it does and hide the front.

    The ends are solved lexicographically: w=0 is the least energy among the cheapest plans, w=1
    the least cost among the least-energy plans; a pure-cost (or pure-energy) solve alone breaks
    ties among equally cheap plans arbitrarily and can return a dominated point. Between them,
    positive weights give non-dominated points. `own` maps a weight to the (cost, energy) of a plan
    already solved that way: solve() passes its own plan (w=0 for a pure-cost objective, w=1 for a
    pure-energy one, both solved with the same tie-break), so the front holds the plan's own totals
    exactly. Values closer than SAME_VALUE (relative) are one value apart in the last digits of the
    solver's sums, and are shown as the first one found (the plan's own first); then any point with
    cost and energy both >= another's, one of them strictly, is dropped. Equal points at several
    weights are all kept."""
    own = own or {}
    weights = [i / (steps - 1) for i in range(steps)]
    found: dict[float, tuple[float, float]] = dict(own)
    for w, first, second in ((0.0, "cost", "energy"), (1.0, "energy", "cost")):
        if w not in found:
            m = _solve_lex(p, second, weights={first: 1.0}, known_energy=True)
            if m is None:
                return ()
            found[w] = (pyo.value(m._terms["cost"]), pyo.value(m._terms["energy"]))
    ref = {"cost": max(found[0.0][0], 1e-9), "energy": max(found[1.0][1], 1e-9)}
    for w in weights:
        if w not in found:
            m = _solve(p, weights={"cost": 1 - w, "energy": w}, scales=ref, known_energy=True)
            if m is not None:
                found[w] = (pyo.value(m._terms["cost"]), pyo.value(m._terms["energy"]))
    order = sorted(found, key=lambda w: (w not in own, w))  # the plan's own values first
    costs = dict(zip(order, _snapped([found[w][0] for w in order])))
    energies = dict(zip(order, _snapped([found[w][1] for w in order])))
    points = [(w, costs[w], energies[w]) for w in sorted(found)]
    return tuple({"energy_weight": w, "cost_usd": c, "energy_kwh": e} for w, c, e in points
                 if not any(c2 <= c and e2 <= e and (c2 < c or e2 < e) for _, c2, e2 in points))


def _snapped(values: list[float]) -> list[float]:
    """Each value, or the first earlier one within SAME_VALUE (relative) of it."""
    out: list[float] = []
    for v in values:
        out.append(next((u for u in out if abs(u - v) <= SAME_VALUE * max(1.0, abs(u), abs(v))), v))
    return out


def sensitivity(p: Problem, base_cost: float, base_rows) -> tuple[dict, ...]:
    """The plan re-solved for cost with every price 20% lower and 20% higher (ties broken by energy, as
    solve() breaks a cost plan's): its cost and whether the mix changes."""
    base = {r.candidate: r.units for r in base_rows}
    out = []
    for factor in (0.8, 1.2):
        m = _solve_lex(p, "energy", weights={"cost": 1.0}, price_factor=factor)
        if m is None:
            out.append({"price_factor": factor, "feasible": False})
            continue
        units = {c: round(pyo.value(m.units[c])) for c in m.C if round(pyo.value(m.units[c])) > 0}
        out.append({"price_factor": factor, "feasible": True, "cost_usd": pyo.value(m._terms["cost"]),
                    "plan_changed": units != base, "units": units})
    return tuple(out)


def breakeven(p: Problem, ctx: Context, rows: tuple[PlanRow, ...] = ()) -> tuple[dict, ...]:
    """For each device both rentable (on demand) and buyable here: planner.plan.tco's comparison of one
    server's worth of devices over the horizon, counting the lines the plan bills (capex, colocation, the
    site's operations figure, power; not the Cost page's network, support, resale, storage and egress
    lines, which `planner tco` itemizes). A server the
    plan holds is compared as the plan runs it: at its row's utilization, drawing the row's idle
    power and, at full use, the serving power the plan predicts, so that owning it over the horizon
    costs what its row bills (row $/month x horizon when the horizon is the server's life). A server
    the plan does not hold is compared at the scenario's utilization and its rating.
    `breakeven_months` is None when buying never pays off within the server's life,
    `breakeven_utilization` None when renting is cheaper at any utilization; `breakeven_why` says
    both in words (planner.plan.tco.explain_breakeven)."""
    from planner.plan.tco import compare_tco

    held = {r.candidate: r for r in rows}
    out = []
    for server in (c for c in p.candidates if c.kind == "onprem"):
        cloud = [c for c in p.candidates if c.kind == "cloud" and c.device_id == server.device_id
                 and c.pricing == "on_demand"]
        if not cloud:
            continue
        best = min(cloud, key=lambda c: c.usd_per_h / c.device_count)
        months = max(1, round(p.scenario.horizon_months))
        row = held.get(server.key)
        u, power = p.scenario.utilization, {}
        if row is not None and row.utilization > 0 and row.idle_kw_per_unit is not None:
            u = min(1.0, row.utilization)
            idle_w = row.idle_kw_per_unit * 1000 / row.pue
            per_unit_w = row.average_kw / row.units * 1000 / row.pue
            power = {"idle_w": idle_w, "load_w": idle_w + (per_unit_w - idle_w) / u}
        site = ctx.catalog.site(p.scenario.candidates.site)
        # the lines the plan's rows bill (capex over the life, colocation, the site's operations figure, power);
        # the Cost page's and `planner tco`'s other lines (network, support, resale, storage, egress) are left out
        billed = {"network_fraction": 0.0, "support_fraction_per_year": 0.0, "residual_fraction": 0.0,
                  "staff_usd_per_server_per_year": site.ops_usd_per_server_per_year or 0.0}
        t = compare_tco(server.device_id, site.id, best.instance_key, months, u, ctx=ctx,
                        server=ctx.catalog.server(server.key.split(":", 1)[1].split("@", 1)[0]).id, **power, **billed)
        last = t.table.iloc[-1]
        out.append({"device": server.device_id, "server": server.key, "cloud_instance": best.key,
                    "cloud_price_date": t.cloud_price_date, "capex_date": t.capex_date,
                    "cloud_usd_per_month": t.cloud_usd_per_h * HOURS_PER_MONTH * u,
                    "onprem_opex_usd_per_month": t.onprem_opex_usd_per_month, "capex_usd": t.capex_usd,
                    "cloud_over_horizon_usd": float(last["cloud_usd"]),
                    "onprem_over_horizon_usd": float(last["onprem_usd"]),
                    "breakeven_months": t.breakeven_month, "breakeven_utilization": t.breakeven_utilization,
                    "lifetime_months": t.lifetime_months,
                    "onprem_usd_per_month_full_use": t.onprem_usd_per_month_full_use,
                    "cloud_usd_per_month_full_use": t.cloud_usd_per_month_full_use, "breakeven_why": t.breakeven_why,
                    "utilization": u, "utilization_from": "plan" if power else "scenario"})
    return tuple(out)


__all__ = ["Plan", "PlanRow", "solve", "InfeasibleError", "PlannerError"]
