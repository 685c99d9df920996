"""Plans whose SLOs name a percentile: capacity from the serving simulator, the check re-simulates."""

import math
from dataclasses import replace
from pathlib import Path

import pytest

from planner.errors import ConfigError
from planner.plan.capacity import copy_load, copy_request, copy_slo, serving_capacity
from planner.plan.check import check
from planner.plan.scenario import parse
from planner.plan.solve import solve
from planner.serve.api import serve

ROOT = Path(__file__).resolve().parents[2]


def _scenario(slo: dict, demand: float = 10.0):
    return parse({"name": "s", "workloads": [{"name": "chat", "model": "llama-3.1-8b", "demand_rps": demand,
                                              "buckets": [{"input_len": 512, "output_len": 128, "share": 1.0}],
                                              "slo": slo}],
                  "candidates": {"cloud": {"instances": ["runpod:1x H100 SXM (community):community-cloud"],
                                           "pricing": ["on_demand"]}}})


def test_percentile_keys_parse_and_switch_to_simulation():
    w = _scenario({"ttft_p90_s": 0.5, "tpot_p99_s": 0.05}).workloads[0]
    assert (w.ttft_s, w.ttft_stat, w.tpot_s, w.tpot_stat) == (0.5, "p90", 0.05, "p99") and w.simulated
    w = _scenario({"ttft_p90_s": 0.5, "tpot_s": 0.05}).workloads[0]
    assert (w.ttft_stat, w.tpot_stat) == ("p90", "mean")  # the plain key is the mean under simulation
    w = _scenario({"ttft_s": 0.5, "tpot_s": 0.05}).workloads[0]
    assert not w.simulated  # plain keys only: batches back to back, as before


@pytest.mark.parametrize("slo", [{"ttft_s": 1, "ttft_p90_s": 1, "tpot_s": 1}, {"tpot_s": 1}, {"ttft_p42_s": 1,
                                                                                              "tpot_s": 1}])
def test_bad_slo_keys_name_the_problem(slo):
    with pytest.raises(ConfigError, match=r"scenario\.workloads\[0\]\.slo"):
        _scenario(slo)


@pytest.fixture(scope="module")
def planned():
    scenario = _scenario({"ttft_p90_s": 0.3, "tpot_p90_s": 0.03}, demand=100.0)
    return scenario, solve(scenario, extras=False)


def test_capacity_is_the_simulated_rate_and_meets_the_slo(planned):
    scenario, plan = planned
    [a] = plan.assignments
    w, b = scenario.workloads[0], scenario.workloads[0].buckets[0]
    assert a["batch"] == 0  # continuous batching
    # one copy at its capacity rate (an H100 instance holds one copy at tp 1) meets p90 TTFT and TPOT
    run = serve(copy_request(w, b, "h100-sxm", a["tp"]), copy_load(a["capacity_rps"]), slo=copy_slo(w)).metrics
    assert run.ttft_s.p90 <= 0.3 and run.tpot_s.p90 <= 0.03
    # units: ceil(100 requests/s / capacity per unit)
    assert plan.rows[0].units == math.ceil(100.0 / a["capacity_rps"] - 1e-9)


def test_check_passes_and_catches_an_overloaded_copy(planned):
    scenario, plan = planned
    assert check(plan, scenario) == []
    # claim one unit serves the whole 100 requests/s: its one copy is then re-simulated at 100 requests/s,
    # above the rate that met the SLO (the plan needed several units), and the check must say so
    assert plan.rows[0].units >= 2
    a = dict(plan.assignments[0], capacity_rps=100.0)
    rows = tuple(replace(r, units=1) for r in plan.rows)
    problems = check(replace(plan, assignments=(a,), rows=rows), scenario)
    assert any("simulated p90" in p for p in problems), problems


def test_example_chat_plans_on_simulated_capacity():
    from planner.plan.scenario import load

    scenario = load(ROOT / "examples" / "chat.yaml")
    assert all(w.simulated and w.ttft_stat == "p90" for w in scenario.workloads)


def test_unit_capacity_scales_with_copies():
    # a unit of 8 devices at tp 1 holds 8 copies: 8x the capacity of one (the same simulated copy)
    from planner.plan.capacity import Candidate
    from planner.predict.context import default_context

    scenario = _scenario({"ttft_p90_s": 0.3, "tpot_p90_s": 0.03})
    w, b = scenario.workloads[0], scenario.workloads[0].buckets[0]
    one = Candidate("x1", "cloud", "h100-sxm", 1, "on_demand", 1.0, 0.0, 0.0, None, "2026-01-01")
    eight = replace(one, key="x8", device_count=8)
    ctx = default_context()
    c1, c8 = serving_capacity(ctx, w, b, one), serving_capacity(ctx, w, b, eight)
    assert c1.tp == 1 and c8.rps >= 8 * c1.rps * (1 - 1e-9)
