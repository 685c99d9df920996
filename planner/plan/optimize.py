"""The procurement optimizer: a Pyomo MILP over instance counts, traffic assignment and training
configurations, solved with HiGHS. `build_problem` computes the data (capacities from the predictor),
`build_model` writes the MILP (pure), `solve` runs HiGHS and returns a Plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pyomo.environ as pyo

from planner.errors import ConfigError, PlannerError
from planner.plan.capacity import (
    HOURS_PER_MONTH,
    Candidate,
    ServingCapacity,
    TrainingConfig,
    candidates,
    demand,
    serving_capacity,
    training_configs,
)
from planner.plan.scenario import Scenario
from planner.predict.context import Context, default_context

FAMILIES = ("monthly_budget", "capex_cap", "power_cap", "availability", "spot_share", "onprem_share")


class InfeasibleError(PlannerError):
    """No plan meets every constraint; names the constraints that bind."""


@dataclass(frozen=True)
class Problem:
    """The data of one MILP."""

    scenario: Scenario
    candidates: tuple[Candidate, ...]
    flows: tuple[str, ...]
    """Serving flows "workload/bucket-index"."""
    demand_rps: dict[str, float]
    capacity: dict[tuple[str, str], ServingCapacity]
    """(flow, candidate key) -> what one unit sustains within the SLOs."""
    jobs: tuple[str, ...]
    configs: dict[tuple[str, int], TrainingConfig]
    """(job, index) -> a configuration meeting the deadline."""
    flow_labels: dict[str, str] = field(default_factory=dict)


def facility_pue(ctx: Context, candidate: Candidate, site_pue: float) -> float:
    """PUE of a candidate's facility: the scenario site's on-prem; in the cloud the provider's fleet PUE
    (hardware_specs/energy/cloud_pue.csv, else its default row; 1.0 where the file has neither)."""
    if candidate.kind == "onprem":
        return site_pue
    row = ctx.power.cloud_pue(ctx.catalog.instance(candidate.instance_key).provider)
    return row.pue if row is not None else 1.0


def build_problem(scenario: Scenario, ctx: Context | None = None) -> Problem:
    """Price the candidates and compute every capacity; raise naming a bucket or job nothing can serve."""
    ctx = ctx or default_context()
    cands = tuple(candidates(scenario, ctx))
    if not cands:
        raise ConfigError("scenario.candidates: no catalog instance or server passes the filters")
    flows, rps, cap, labels = [], {}, {}, {}
    for wi, w in enumerate(scenario.workloads):
        for bi, b in enumerate(w.buckets):
            flow = f"{w.name}/{bi}"
            flows.append(flow)
            rps[flow] = demand(w, b)
            labels[flow] = f"workloads[{wi}].buckets[{bi}] ({w.name}: {b.input_len} in, {b.output_len} out)"
            for c in cands:
                found = serving_capacity(ctx, w, b, c)
                if found is not None:
                    cap[(flow, c.key)] = found
            if not any(f == flow for f, _ in cap):
                raise InfeasibleError(f"{labels[flow]}: no candidate serves it within {w.slo_text} (or the model "
                                      "does not fit); relax the SLO or add candidates")
    configs = {}
    for ti, job in enumerate(scenario.training):
        k = 0
        for c in cands:
            for cfg in training_configs(ctx, job, c):
                configs[(job.name, k)] = cfg
                k += 1
        if k == 0:
            raise InfeasibleError(f"training[{ti}] ({job.name}): no candidate trains it within the "
                                  f"{job.deadline_s / 86400:g}-day deadline on up to 64 units")
    return Problem(scenario, cands, tuple(flows), rps, cap, tuple(j.name for j in scenario.training), configs, labels)


def candidate_energy(m, p: Problem) -> dict:
    """Facility kWh over the horizon of each candidate's serving units, as Pyomo expressions: every unit
    held draws its idle power every hour (its devices at idle and the rest of the server, x PUE), and
    each flow's load (in units) adds the rise from idle to the unit's power serving at capacity:

        E_c = H · (units[c]·P_idle,c + Σ_f load[f,c]·(P_f,c − P_idle,c)),  load[f,c] = share[f,c]·demand[f]/cap[f,c]

    A candidate whose device has no sourced TDP counts 0 (left out, and said so)."""
    horizon_h = p.scenario.horizon_months * HOURS_PER_MONTH
    by_key = {c.key: c for c in p.candidates}
    idle = {c.key: c.idle_kw or 0.0 for c in p.candidates}
    energy = {c: m.units[c] * idle[c] * horizon_h for c in by_key}
    for f, c in m.ARCS:
        kw = p.capacity[(f, c)].kw_per_unit
        if kw is not None:
            energy[c] = energy[c] + m.share[f, c] * p.demand_rps[f] / p.capacity[(f, c)].rps * (kw - idle[c]) * horizon_h
    return energy


def config_energy_kwh(cfg: TrainingConfig, candidate: Candidate) -> float:
    """The kWh a chosen training configuration adds: its run's energy, less, on-prem, the idle draw of the
    units it runs on over the run (already counted in candidate_energy: they are held all horizon)."""
    kwh = cfg.energy_kwh or 0.0
    if candidate.kind == "onprem" and cfg.energy_kwh is not None:
        kwh -= cfg.units * (candidate.idle_kw or 0.0) * cfg.time_s / 3600
    return kwh


def _objective_terms(m, p: Problem):
    by_key = {c.key: c for c in p.candidates}
    energy_c = candidate_energy(m, p)
    training = lambda value: sum(m.choose[j, k] * value(cfg) for (j, k), cfg in p.configs.items())
    cost = sum(m.units[c.key] * c.usd_per_month for c in p.candidates) * p.scenario.horizon_months \
        + sum(energy_c[c.key] * c.electricity_usd_per_kwh for c in p.candidates if c.electricity_usd_per_kwh) \
        + training(lambda cfg: cfg.cost_usd)
    energy = sum(energy_c.values()) + training(lambda cfg: config_energy_kwh(cfg, by_key[cfg.candidate]))
    carbon = sum(energy_c[c.key] * (c.kg_co2e_per_kwh or 0.0) for c in p.candidates) \
        + training(lambda cfg: cfg.kg_co2e or 0.0)
    m._energy_by_candidate = energy_c
    return {"cost": cost, "energy": energy, "carbon": carbon}


def build_model(p: Problem, weights: dict[str, float] | None = None, scales: dict[str, float] | None = None,
                drop: frozenset[str] = frozenset(), price_factor: float = 1.0,
                known_energy: bool = False) -> pyo.ConcreteModel:
    """The MILP, without solving it.

    Sets: candidates C, serving flows F (workload x bucket), arcs A ⊆ F x C where one unit of c
    serves f within its SLOs at cap[f,c] requests/s, training jobs T with configurations K_t.
    Variables: units[c] ∈ Z≥0; share[f,c] ∈ [0, 1] (the part of flow f's traffic served by c);
    choose[t,k] ∈ {0, 1}.

        demand_met[f]:        Σ_c share[f,c] = 1
        capacity_held[c]:     Σ_f share[f,c]·demand[f]/cap[f,c] + Σ_{t,k on-prem c} choose[t,k]·units_tk ≤ units[c]
        one_config[t]:        Σ_k choose[t,k] = 1
        monthly_budget:       Σ_c (units[c]·$/month_c + $/kWh_c·E_c / horizon) + Σ_{t,k} choose[t,k]·$_tk / horizon ≤ budget
        capex_cap:            Σ_{c on-prem} units[c]·capex_c ≤ cap
        power_cap:            Σ_{c on-prem} units[c]·kW_c ≤ cap
        availability[c]:      units[c] ≤ available_c
        spot_share:           Σ_{c spot} units[c]·devices_c ≤ s · Σ_c units[c]·devices_c
        onprem_share:         Σ_{c on-prem} units[c]·devices_c ≥ o · Σ_c units[c]·devices_c
    Objective: minimize Σ_i weight_i · term_i / scale_i over cost ($ over the horizon: rentals, on-prem
    servers at their fixed $ per unit-hour whatever their load plus the site's electricity on their
    kWh, training runs), energy (kWh, candidate_energy: every unit held at idle, plus the rise to
    serving power for the load it carries) and carbon (kg CO2e at each candidate's grid intensity). `drop` leaves constraint families out (to
    find the binding ones); `price_factor` scales every price (sensitivity).
    """
    s = p.scenario
    cons = s.constraints
    weights = weights or dict(s.weights)
    scales = scales or {}
    m = pyo.ConcreteModel(name=s.name)
    keys = [c.key for c in p.candidates]
    by_key = {c.key: c for c in p.candidates}
    if price_factor != 1.0:
        p = replace(p, candidates=tuple(replace(c, usd_per_h=c.usd_per_h * price_factor,
                                                electricity_usd_per_kwh=c.electricity_usd_per_kwh * price_factor)
                                        for c in p.candidates),
                    configs={k: replace(v, cost_usd=v.cost_usd * price_factor) for k, v in p.configs.items()})
        by_key = {c.key: c for c in p.candidates}
    m.C = pyo.Set(initialize=keys, ordered=True)
    m.F = pyo.Set(initialize=list(p.flows), ordered=True)
    m.ARCS = pyo.Set(initialize=sorted(p.capacity), dimen=2, ordered=True)
    m.K = pyo.Set(initialize=sorted(p.configs), dimen=2, ordered=True)
    m.T = pyo.Set(initialize=list(p.jobs), ordered=True)
    arcs_of_flow: dict[str, list[str]] = {}
    arcs_of_cand: dict[str, list[str]] = {}
    for f, c in sorted(p.capacity):
        arcs_of_flow.setdefault(f, []).append(c)
        arcs_of_cand.setdefault(c, []).append(f)
    onprem_jobs: dict[str, list] = {}
    for (j, k), cfg in p.configs.items():
        if by_key[cfg.candidate].kind == "onprem":
            onprem_jobs.setdefault(cfg.candidate, []).append((j, k, cfg.units))
    m.units = pyo.Var(m.C, domain=pyo.NonNegativeIntegers)
    m.share = pyo.Var(m.ARCS, bounds=(0, 1))
    m.choose = pyo.Var(m.K, domain=pyo.Binary)

    @m.Constraint(m.F)
    def demand_met(m, f):
        return sum(m.share[f, c] for c in arcs_of_flow.get(f, ())) == 1

    @m.Constraint(m.C)
    def capacity_held(m, c):
        serving = sum(m.share[f, c] * (p.demand_rps[f] / p.capacity[(f, c)].rps) for f in arcs_of_cand.get(c, ()))
        training = sum(m.choose[j, k] * units for j, k, units in onprem_jobs.get(c, ()))
        return serving + training <= m.units[c]

    # A candidate serves a share only if it has a unit. capacity_held implies it, but a tiny demand on a
    # fast candidate gives coefficients demand/capacity below HiGHS's feasibility tolerance (3.7e-7 for
    # gpt2 at 0.003 req/s), and the solver then accepts a share on 0 units. Here the coefficient is
    # 1/(number of flows the candidate can serve), never below 1/(flows x buckets).
    @m.Constraint(m.C)
    def share_needs_a_unit(m, c):
        flows = arcs_of_cand.get(c, ())
        if not flows:
            return pyo.Constraint.Skip
        return sum(m.share[f, c] for f in flows) <= len(flows) * m.units[c]

    if p.jobs:
        configs_of_job: dict[str, list] = {}
        for j, k in p.configs:
            configs_of_job.setdefault(j, []).append(k)

        @m.Constraint(m.T)
        def one_config(m, t):
            return sum(m.choose[t, k] for k in configs_of_job.get(t, ())) == 1

    devices = lambda keys_: sum(m.units[c] * by_key[c].device_count for c in keys_)
    onprem = [c for c in keys if by_key[c].kind == "onprem"]
    if cons.monthly_budget_usd is not None and "monthly_budget" not in drop:
        energy_c = candidate_energy(m, p)
        m.monthly_budget = pyo.Constraint(expr=sum(m.units[c] * by_key[c].usd_per_month for c in keys)
                                          + (sum(energy_c[c] * by_key[c].electricity_usd_per_kwh for c in keys
                                                 if by_key[c].electricity_usd_per_kwh)
                                             + sum(m.choose[j, k] * cfg.cost_usd for (j, k), cfg in p.configs.items()))
                                          / s.horizon_months <= cons.monthly_budget_usd)
    if cons.capex_cap_usd is not None and "capex_cap" not in drop and onprem:
        m.capex_cap = pyo.Constraint(expr=sum(m.units[c] * by_key[c].capex_usd for c in onprem) <= cons.capex_cap_usd)
    if cons.power_cap_kw is not None and "power_cap" not in drop and onprem:
        m.power_cap = pyo.Constraint(expr=sum(m.units[c] * by_key[c].power_kw for c in onprem) <= cons.power_cap_kw)
    limits = {k: v for k, v in cons.availability}
    capped = [c for c in keys if _limit(c, limits) is not None]
    if capped and "availability" not in drop:
        m.CAPPED = pyo.Set(initialize=capped, ordered=True)

        @m.Constraint(m.CAPPED)
        def availability(m, c):
            return m.units[c] <= _limit(c, limits)
    if cons.max_spot_share is not None and "spot_share" not in drop:
        m.spot_share = pyo.Constraint(expr=devices([c for c in keys if by_key[c].pricing == "spot"])
                                      <= cons.max_spot_share * devices(keys))
    if cons.min_onprem_share and "onprem_share" not in drop and keys:
        m.onprem_share = pyo.Constraint(expr=devices(onprem) >= cons.min_onprem_share * devices(keys))
    # a candidate whose energy (no sourced TDP) or carbon (no grid intensity) is unknown cannot be
    # ranked on that term: it is left out rather than counted as zero (also under `known_energy`: every
    # solve of a cost-energy front compares plans whose energy is whole)
    by_energy = known_energy or bool(weights.get("energy"))
    for f, c in m.ARCS:
        unknown_energy = p.capacity[(f, c)].kw_per_unit is None
        unknown_carbon = unknown_energy or by_key[c].kg_co2e_per_kwh is None
        if (by_energy and unknown_energy) or (weights.get("carbon") and unknown_carbon):
            m.share[f, c].fix(0)
    for j, k in m.K:
        cfg = p.configs[(j, k)]
        if (by_energy and cfg.energy_kwh is None) or (weights.get("carbon") and cfg.kg_co2e is None):
            m.choose[j, k].fix(0)
    terms = _objective_terms(m, p)
    m.objective = pyo.Objective(expr=sum(weights.get(k, 0.0) * terms[k] / scales.get(k, 1.0) for k in terms
                                         if weights.get(k, 0.0)), sense=pyo.minimize)
    m._terms = terms
    return m


def _limit(candidate_key: str, limits: dict[str, int]) -> int | None:
    """The availability cap naming this candidate: its key, its instance key (without the pricing),
    or its instance name ("aws:p5.48xlarge:us-east-1:spot" matches all three forms)."""
    parts = candidate_key.split(":")
    names = {candidate_key, ":".join(parts[:-1]), parts[1] if len(parts) > 1 else candidate_key}
    for name, value in limits.items():
        if name in names:
            return value
    return None


def _solver():
    from pyomo.contrib.appsi.solvers import Highs

    solver = Highs()
    if not solver.available():
        raise PlannerError("the HiGHS solver is not available: install highspy (pip install highspy)")
    solver.config.load_solution = False
    solver.config.time_limit = 60.0
    solver.config.mip_gap = 0.0
    return solver


def solve_model(m: pyo.ConcreteModel) -> bool:
    """Solve in place; True when an optimal solution was loaded, False when infeasible."""
    from pyomo.contrib.appsi.base import TerminationCondition

    results = _solver().solve(m)
    if results.termination_condition == TerminationCondition.optimal:
        results.solution_loader.load_vars()
        return True
    if results.termination_condition in (TerminationCondition.infeasible,
                                         TerminationCondition.infeasibleOrUnbounded):
        return False
    raise PlannerError(f"HiGHS stopped with {results.termination_condition}")


def binding_constraints(p: Problem) -> list[str]:
    """Constraint families whose removal alone makes the problem feasible (then pairs, if none alone)."""
    present = [f for f in FAMILIES if _present(p, f)]
    alone = [f for f in present if solve_model(build_model(p, drop=frozenset({f})))]
    if alone:
        return alone
    pairs = [f"{a} + {b}" for i, a in enumerate(present) for b in present[i + 1:]
             if solve_model(build_model(p, drop=frozenset({a, b})))]
    return pairs


def _present(p: Problem, family: str) -> bool:
    c = p.scenario.constraints
    return {"monthly_budget": c.monthly_budget_usd is not None, "capex_cap": c.capex_cap_usd is not None,
            "power_cap": c.power_cap_kw is not None, "availability": bool(c.availability),
            "spot_share": c.max_spot_share is not None, "onprem_share": bool(c.min_onprem_share)}[family]


_KEYS = {"monthly_budget": "constraints.monthly_budget_usd", "capex_cap": "constraints.capex_cap_usd",
         "power_cap": "constraints.power_cap_kw", "availability": "constraints.availability",
         "spot_share": "constraints.max_spot_share", "onprem_share": "constraints.min_onprem_share"}


def explain_infeasible(p: Problem) -> InfeasibleError:
    """An error naming the constraints that bind, with what the plan would need without each."""
    binding = binding_constraints(p)
    if not binding:
        return InfeasibleError("no plan meets the demand even without the budget, capex, power, availability and "
                               "share constraints")
    parts = []
    for fam in binding:
        if "+" in fam:
            parts.append(f"{' and '.join(_KEYS[f.strip()] for f in fam.split('+'))} together")
            continue
        m = build_model(p, drop=frozenset({fam}))
        solve_model(m)
        need = _needed(m, p, fam)
        parts.append(f"{_KEYS[fam]} ({need})" if need else _KEYS[fam])
    return InfeasibleError("no plan meets every constraint; relaxing any one of these makes it feasible: "
                           + "; ".join(parts))


def _needed(m, p: Problem, family: str) -> str:
    by_key = {c.key: c for c in p.candidates}
    units = {c: round(pyo.value(m.units[c])) for c in m.C}
    if family == "monthly_budget":
        total = sum(n * by_key[c].usd_per_month for c, n in units.items())
        return f"the cheapest plan without it costs ${total:,.0f}/month, limit ${p.scenario.constraints.monthly_budget_usd:,.0f}"
    if family == "capex_cap":
        return f"it needs ${sum(n * by_key[c].capex_usd for c, n in units.items()):,.0f} of capex"
    if family == "power_cap":
        return f"it needs {sum(n * by_key[c].power_kw for c, n in units.items() if by_key[c].kind == 'onprem'):,.1f} kW"
    return ""
