"""The plan's cost-versus-energy Pareto front: only non-dominated points, and the plan's own totals on it
(planner.plan.solve.pareto, solve's tie-break)."""

from dataclasses import replace
from pathlib import Path

import pytest

from planner.plan.capacity import HOURS_PER_MONTH, Candidate, ServingCapacity
from planner.plan.optimize import Problem
from planner.plan.scenario import Candidates, Constraints, Scenario, load
from planner.plan.solve import _solve_lex, pareto, solve, tie_break

ROOT = Path(__file__).resolve().parents[2]
H = HOURS_PER_MONTH  # a one-month horizon


def _problem():
    # three candidates serving 5 req/s per unit each, 18 req/s wanted (3.6 units of load, so 4 units):
    # A $10/h at 1 kW, B $10/h at 2 kW (as cheap as A, drawing twice as much), C $20/h at 0.5 kW
    cands = [Candidate(key, "cloud", "h100-sxm", 1, "on_demand", usd, 0.0, 0.0, 0.4, "2026-01")
             for key, usd in (("A", 10.0), ("B", 10.0), ("C", 20.0))]
    kw = {"A": 1.0, "B": 2.0, "C": 0.5}
    capacity = {("chat/0", c.key): ServingCapacity(5.0, 1, 8, 0.1, 0.01, kw[c.key]) for c in cands}
    scenario = Scenario("t", (), (), Candidates(), Constraints(), horizon_months=1)
    return Problem(scenario, tuple(cands), ("chat/0",), {"chat/0": 18.0}, capacity, (), {})


def _dominated(points):
    """The points with cost and energy both >= another point's, one of them strictly."""
    return [p for p in points if any(q["cost_usd"] <= p["cost_usd"] and q["energy_kwh"] <= p["energy_kwh"]
                                     and (q["cost_usd"] < p["cost_usd"] or q["energy_kwh"] < p["energy_kwh"])
                                     for q in points)]


def test_the_cheapest_plan_breaks_ties_by_energy():
    # every plan of 4 units of A or B costs 4 x $10/h; the least energy among them puts the whole
    # 3.6 units of load on A (1 kW): 3.6 x 1 kW x H kWh, not up to 3.6 x 2 kW on B
    m = _solve_lex(_problem(), tie_break({"cost": 1.0}), weights={"cost": 1.0})
    assert m._terms["cost"]() == pytest.approx(40 * H)
    assert m._terms["energy"]() == pytest.approx(3.6 * H)
    assert {c: round(m.units[c].value) for c in m.C if round(m.units[c].value)} == {"A": 4}


def test_the_front_in_closed_form():
    # with k units of C and 4 - k of A (B never helps): cost (40 + 10k)·H, energy (3.6 - 0.5·min(k, 3.6))·H;
    # k = 0: (40, 3.6), 3: (70, 2.1), 4: (80, 1.8) per hour. Normalized by the optima (40 and 1.8):
    # w = 0.25: 0.75(1 + k/4) + 0.25(2 - 0.2778k) grows with k -> k = 0
    # w = 0.5:  k = 3 scores 0.5·1.75 + 0.5·1.1667 = 1.458 < k = 4 (1.5) < k = 0 (1.5) -> k = 3
    # w = 0.75: k = 4 scores 0.25·2 + 0.75·1 = 1.25 < k = 3 (1.3125) -> k = 4
    front = pareto(_problem())
    got = [(pt["energy_weight"], pt["cost_usd"] / H, pt["energy_kwh"] / H) for pt in front]
    want = [(0.0, 40, 3.6), (0.25, 40, 3.6), (0.5, 70, 2.1), (0.75, 80, 1.8), (1.0, 80, 1.8)]
    assert [w for w, _, _ in got] == [w for w, _, _ in want]
    for (_, cost, energy), (_, c, e) in zip(got, want):
        assert cost == pytest.approx(c) and energy == pytest.approx(e)
    assert _dominated(front) == []


def test_a_dominated_point_is_left_out_and_the_plans_own_point_kept_exactly():
    # a w = 0 point as cheap as the true one but drawing more energy (what a pure-cost solve breaking
    # ties the other way returns) is dominated, so it is left out; the plan's own values are kept as given
    worse = pareto(_problem(), own={0.0: (40 * H, 7.2 * H)})
    assert 0.0 not in [pt["energy_weight"] for pt in worse] and _dominated(worse) == []
    own = (40 * H * (1 + 1e-9), 3.6 * H)  # within SAME_VALUE of the w = 0.25 solve: one value
    front = pareto(_problem(), own={0.0: own})
    assert (front[0]["cost_usd"], front[0]["energy_kwh"]) == own
    assert (front[1]["energy_weight"], front[1]["cost_usd"]) == (0.25, own[0])


@pytest.fixture(scope="module")
def plans():
    return {name: solve(load(ROOT / "examples" / f"{name}.yaml")) for name in ("mixed", "hybrid")}


@pytest.mark.parametrize("name", ["mixed", "hybrid"])
def test_example_fronts_hold_no_dominated_point_and_the_plans_own_totals(plans, name):
    plan = plans[name]
    assert plan.objective == "cost" and len(plan.pareto) >= 1
    assert _dominated(list(plan.pareto)) == []
    if any("no sourced TDP" in n for n in plan.notes):
        # the plan runs on a candidate whose power is not sourced: its kWh leave that candidate out, so it is
        # not a point of the front (every point's energy is whole), and the note says so
        assert any("is not one of its points" in n for n in plan.notes)
        return
    # a cost plan's weight-0 point IS the plan: the same dollars and kWh as its totals, to the last digit
    [zero] = [pt for pt in plan.pareto if pt["energy_weight"] == 0.0]
    assert (zero["cost_usd"], zero["energy_kwh"]) == (plan.cost_over_horizon_usd, plan.energy_kwh)
    # and the plan is on the front: nothing is as cheap and draws less, nor draws as little and costs less
    own = {"cost_usd": plan.cost_over_horizon_usd, "energy_kwh": plan.energy_kwh}
    assert _dominated([own, *plan.pareto]) == []


def test_an_energy_plan_is_the_fronts_weight_one_point():
    scenario = load(ROOT / "examples" / "hybrid.yaml")
    plan = solve(replace(scenario, objective="energy", weights=(("energy", 1.0),)))
    [one] = [pt for pt in plan.pareto if pt["energy_weight"] == 1.0]
    assert (one["cost_usd"], one["energy_kwh"]) == (plan.cost_over_horizon_usd, plan.energy_kwh)
    assert _dominated(list(plan.pareto)) == []


def test_with_no_tie_the_tie_break_keeps_the_first_solution_to_the_last_digit():
    # only A and C: the cheapest plan (4 A) is unique, so the second solve has nothing to break and the
    # plan is the first solve's, not the same plan re-solved with the solver's noise in the last digits
    from planner.plan.solve import _solve

    p = _problem()
    p = Problem(p.scenario, tuple(c for c in p.candidates if c.key != "B"), p.flows, p.demand_rps,
                {k: v for k, v in p.capacity.items() if k[1] != "B"}, (), {})
    plain, lex = _solve(p, weights={"cost": 1.0}), _solve_lex(p, "energy", weights={"cost": 1.0})
    assert {k: v() for k, v in lex._terms.items()} == {k: v() for k, v in plain._terms.items()}


def test_a_candidate_without_a_sourced_tdp_is_left_out_of_every_point_of_the_front(plans):
    """mixed.yaml's cheapest plan rents aws:inf2.xlarge, whose TDP is not sourced: counted as 0 kWh it would
    dominate the energy plan and collapse the front; every point of the front is solved without it."""
    plan = plans["mixed"]
    if not any(r.candidate.startswith("aws:inf2") for r in plan.rows):
        pytest.skip("the cheapest mix does not use inf2 under the current efficiencies")
    energy = solve(replace(load(ROOT / "examples" / "mixed.yaml"), objective="energy", weights=(("energy", 1.0),)))
    assert not any(r.candidate.startswith("aws:inf2") for r in energy.rows)
    [one] = [pt for pt in plan.pareto if pt["energy_weight"] == 1.0]
    assert (one["cost_usd"], one["energy_kwh"]) == pytest.approx((energy.cost_over_horizon_usd, energy.energy_kwh),
                                                                 rel=1e-6)
