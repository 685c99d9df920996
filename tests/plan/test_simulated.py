"""Plans whose SLOs name a percentile: capacity from the serving simulator, the check re-simulates."""

import math
from dataclasses import replace
from pathlib import Path

import pytest

from planner.app import serving as page
from planner.errors import ConfigError
from planner.plan.capacity import copy_request, copy_slo, serving_capacity
from planner.plan.check import check
from planner.plan.scenario import parse
from planner.plan.solve import solve
from planner.predict.api import Request
from planner.serve.api import Load, Scheduling, Slo, serve
from planner.serve.sweep import standard_load

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


# a lone TTFT or TPOT target is valid (tests/plan/test_scenario.py); none at all is not
@pytest.mark.parametrize("slo", [{"ttft_s": 1, "ttft_p90_s": 1, "tpot_s": 1}, {}, {"ttft_p42_s": 1, "tpot_s": 1}])
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
    run = serve(copy_request(w, b, "h100-sxm", a["tp"]), replace(standard_load(), rate_rps=a["capacity_rps"]),
                slo=copy_slo(w)).metrics
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


# Issue 43, item 2: llama-3.1-70b on single-GPU MI325X instances at 10 requests/s, p90 TTFT 1 s and p90 TPOT
# 100 ms, 1,024 + 256 tokens, MI325X alone. The plan found 3.70 requests/s per GPU on runs of 300 requests (the
# engine mostly filling from empty), planned 3 GPUs (3.33 each) and its check, on the same 300, passed; the Serving
# page, on 1,000 requests, gives at most 3.12, and p90 TPOT 0.12 s at 3.33.
MI325X = "tensorwave:MI325X (per GPU):unrecorded"
PAGE_SLO_S = {"ttft": 1.0, "tpot": 0.1}


@pytest.fixture(scope="module")
def mi325x_plan():
    scenario = parse({"name": "s", "workloads": [{"name": "chat", "model": "llama-3.1-70b", "demand_rps": 10.0,
                                                  "buckets": [{"input_len": 1024, "output_len": 256, "share": 1.0}],
                                                  "slo": {"ttft_p90_s": 1.0, "tpot_p90_s": 0.1}}],
                      "candidates": {"cloud": {"instances": [MI325X], "pricing": ["on_demand"]}}})
    return scenario, solve(scenario, extras=False)


def _as_the_serving_page_runs(rate_rps: float, tp: int):
    """The Serving page's run of the deployment at `rate_rps` with its own settings (planner/app/serving.py
    DEFAULTS: request count, SLO statistic; the library's seed, Scheduling and percentiles), called through
    planner.serve.api.serve, not through the plan's code."""
    req = Request("llama-3.1-70b", "mi325x", gpus=tp, tp=tp, input_len=1024, output_len=256, dtype="bf16",
                  pricing=page.DEFAULTS["serve_pricing"])
    slo = Slo(PAGE_SLO_S["ttft"], PAGE_SLO_S["tpot"], page.DEFAULTS["serve_slo_stat"])
    return serve(req, Load(rate_rps=rate_rps, requests=page.DEFAULTS["serve_requests"]), Scheduling(), slo).metrics


def test_a_plans_rate_per_gpu_meets_the_slos_as_the_serving_page_simulates_it(mi325x_plan):
    scenario, plan = mi325x_plan
    [a], [row] = plan.assignments, plan.rows
    assert a["tp"] == 1 and a["rps"] == pytest.approx(10.0)  # 70B bf16 fits on one 256 GB MI325X: a copy per unit
    assert row.units == math.ceil(10.0 / a["capacity_rps"] - 1e-9)  # units: demand / capacity per unit, rounded up
    per_gpu = 10.0 / row.units  # the rate each copy carries: demand spread over the copies
    for rate in (per_gpu, a["capacity_rps"]):  # the rate carried, and the capacity itself (100% utilization)
        m = _as_the_serving_page_runs(rate, a["tp"])
        assert m.ttft_s.p90 <= PAGE_SLO_S["ttft"] and m.tpot_s.p90 <= PAGE_SLO_S["tpot"], (rate, m.tpot_s.p90)
        assert m.rejected == 0
    assert check(plan, scenario) == []


def test_the_check_fails_a_rate_per_gpu_that_misses_the_slos_on_the_serving_pages_run(mi325x_plan):
    scenario, plan = mi325x_plan
    [a], [row] = plan.assignments, plan.rows
    # the plan of the issue: 3 units, each carrying 10 / 3 = 3.33 requests/s at 100% of a capacity of that
    # much (the 300-request runs met the SLOs there); this plan takes more units
    units, over = 3, 10.0 / 3
    assert row.units > units
    m = _as_the_serving_page_runs(over, a["tp"])
    assert m.tpot_s.p90 > PAGE_SLO_S["tpot"] or m.ttft_s.p90 > PAGE_SLO_S["ttft"]  # the page: SLOs missed there
    claimed = replace(plan, assignments=(dict(a, capacity_rps=over),), rows=(replace(row, units=units),))
    problems = check(claimed, scenario)
    assert any("simulated p90" in p and f"at {over:.2f} requests/s per copy" in p for p in problems), problems
