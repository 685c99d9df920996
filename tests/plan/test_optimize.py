"""The MILP on small cases with a hand-computed optimum, infeasibility naming, training monotonicity."""

import pytest

from planner.plan.capacity import HOURS_PER_MONTH, Candidate, ServingCapacity, TrainingConfig
from planner.plan.optimize import InfeasibleError, Problem, build_model, explain_infeasible, solve_model
from planner.plan.scenario import Candidates, Constraints, Scenario


def _cand(key, usd_per_h, devices=1, kind="cloud", pricing="on_demand", capex=0.0, kw=0.0):
    return Candidate(key, kind, "h100-sxm", devices, pricing, usd_per_h, capex, kw, 0.4, "2026-01")


def _problem(cands, caps, demand=18.0, constraints=Constraints(), configs=None, jobs=()):
    scenario = Scenario("t", (), (), Candidates(), constraints, horizon_months=1)
    capacity = {("chat/0", c.key): ServingCapacity(rps, 1, 8, 0.1, 0.01, 1.0) for c, rps in zip(cands, caps)}
    return Problem(scenario, tuple(cands), ("chat/0",), {"chat/0": demand}, capacity, tuple(jobs), configs or {})


def _units(m):
    return {c: round(m.units[c].value) for c in m.C if round(m.units[c].value)}


def test_cheapest_integer_mix():
    # A: $10/h serves 5 req/s; B: $16/h serves 10 req/s; 18 req/s needed.
    # 4A = $40/h (20 req/s); 1B + 2A = $36/h; 2B = $32/h; 1A + 1B = 15 req/s is too little -> 2B
    p = _problem([_cand("A", 10), _cand("B", 16)], [5, 10])
    m = build_model(p, weights={"cost": 1.0})
    assert solve_model(m)
    assert _units(m) == {"B": 2}
    assert m.objective() == pytest.approx(2 * 16 * HOURS_PER_MONTH)


def test_availability_forces_a_mix():
    # B capped at 1: 1B + 2A = $36/h (10 + 10 req/s) beats 4A = $40/h
    p = _problem([_cand("A", 10), _cand("B", 16)], [5, 10], constraints=Constraints(availability=(("B", 1),)))
    m = build_model(p, weights={"cost": 1.0})
    assert solve_model(m)
    assert _units(m) == {"A": 2, "B": 1}


def test_spot_share_limits_spot_devices():
    # spot S: $5/h, 10 req/s; on-demand B: $16/h, 10 req/s; 18 req/s; at most half the devices spot:
    # 1S + 1B = $21/h (2 devices, 1 spot = 50%)
    p = _problem([_cand("S", 5, pricing="spot"), _cand("B", 16)], [10, 10],
                 constraints=Constraints(max_spot_share=0.5))
    m = build_model(p, weights={"cost": 1.0})
    assert solve_model(m)
    assert _units(m) == {"S": 1, "B": 1}


def test_power_cap_and_onprem_share():
    # on-prem O: $8/h, 10 req/s, 10 kW each; cloud B: $16/h, 10 req/s; 25 req/s; 15 kW cap
    # without the cap: 3 O = $24/h; with it: 1 O (10 kW) + 2 B = $40/h
    cands = [_cand("O", 8, kind="onprem", pricing="onprem", kw=10.0, capex=1e5), _cand("B", 16)]
    p = _problem(cands, [10, 10], demand=25, constraints=Constraints(power_cap_kw=15))
    m = build_model(p, weights={"cost": 1.0})
    assert solve_model(m)
    assert _units(m) == {"O": 1, "B": 2}


def test_infeasible_budget_is_named_with_what_it_needs():
    # the cheapest plan is 2B = $32/h = $23,376/month against a $10,000 budget
    p = _problem([_cand("A", 10), _cand("B", 16)], [5, 10], constraints=Constraints(monthly_budget_usd=10_000))
    assert not solve_model(build_model(p, weights={"cost": 1.0}))
    err = explain_infeasible(p)
    assert isinstance(err, InfeasibleError)
    assert "constraints.monthly_budget_usd" in str(err) and "$23,376/month" in str(err)


def test_training_picks_exactly_one_config():
    # two configurations of one job: 4 units for $900 or 8 units for $1,000: the cheaper one
    configs = {("ft", 0): TrainingConfig("B", 4, 1, 4, 3 * 86400, 900.0, 10.0, 4.0),
               ("ft", 1): TrainingConfig("B", 8, 1, 8, 1.6 * 86400, 1000.0, 11.0, 4.4)}
    p = _problem([_cand("A", 10), _cand("B", 16)], [5, 10], configs=configs, jobs=("ft",))
    m = build_model(p, weights={"cost": 1.0})
    assert solve_model(m)
    assert m.choose["ft", 0].value > 0.5 and m.choose["ft", 1].value < 0.5
