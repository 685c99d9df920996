"""planner.plan.scenario: a serving workload's SLOs. Either the TTFT or the TPOT objective may be left out
(no target on it: the app's form leaves a field empty for that), never both.

No end-to-end latency SLO: the capacity search (planner/plan/capacity.py), the serving simulator's SLO check
(planner/serve/api.py Slo) and the plan's check judge TTFT and TPOT only, so a scenario key for it would be
read and then ignored."""

import pytest

from planner.errors import ConfigError
from planner.plan.capacity import candidates, serving_capacity
from planner.plan.scenario import NO_TARGET_S, SLO_S, parse
from planner.predict import default_context


def _scenario(slo: dict, model: str = "llama-3.1-8b") -> dict:
    return {"name": "slo", "workloads": [{"name": "chat", "model": model, "demand_rps": 2,
                                          "buckets": [{"input_len": 512, "output_len": 128, "share": 1}], "slo": slo}],
            "candidates": {"cloud": {"providers": ["lambda"], "pricing": ["on_demand"],
                                     "instances": ["lambda:gpu_1x_h100_sxm5:all"]}}}


@pytest.mark.parametrize("slo, ttft, tpot, stats, text", [
    ({"ttft_p90_s": 1.0, "tpot_p90_s": 0.1}, 1.0, 0.1, ("p90", "p90"), "TTFT 1.0 s and TPOT 0.1 s"),
    ({"ttft_p90_s": 1.0}, 1.0, NO_TARGET_S, ("p90", "mean"), "TTFT 1.0 s (no TPOT target)"),
    ({"tpot_p90_s": 0.1}, NO_TARGET_S, 0.1, ("mean", "p90"), "TPOT 0.1 s (no TTFT target)"),
    ({"ttft_s": 2.0}, 2.0, NO_TARGET_S, (None, None), "TTFT 2.0 s (no TPOT target)"),
])
def test_a_workload_may_leave_out_its_ttft_or_its_tpot_objective(slo, ttft, tpot, stats, text):
    [w] = parse(_scenario(slo)).workloads
    assert (w.ttft_s, w.tpot_s, (w.ttft_stat, w.tpot_stat), w.slo_text) == (ttft, tpot, stats, text)
    assert w.simulated == (stats != (None, None))
    assert NO_TARGET_S > SLO_S.high  # never a limit a scenario can give


@pytest.mark.parametrize("slo, message", [
    ({}, "scenario.workloads[0].slo: needs a TTFT objective, a TPOT objective or both"),
    (None, "scenario.workloads[0].slo: needs a TTFT objective, a TPOT objective or both"),
    ({"ttft_s": 1.0, "ttft_p90_s": 1.0, "tpot_s": 0.1}, "scenario.workloads[0].slo: at most one TTFT objective"),
    ({"ttft_p90_s": 0, "tpot_p90_s": 0.1}, "scenario.workloads[0].slo.ttft_p90_s: 0 is out of range"),
    ({"e2e_p90_s": 5.0}, "scenario.workloads[0].slo.e2e_p90_s: unknown key"),
])
def test_a_workload_needs_one_slo_at_least_and_one_per_metric_at_most(slo, message):
    with pytest.raises(ConfigError) as bad:
        parse(_scenario(slo))
    assert str(bad.value).startswith(message)


def test_no_tpot_target_never_serves_less_than_a_tpot_target():
    # batches back to back (plain keys, fast): without a TPOT target the batch grows until TTFT or memory binds
    ctx = default_context()
    capacity = {}
    for label, slo in (("tight", {"ttft_s": 1.0, "tpot_s": 0.008}), ("loose", {"ttft_s": 1.0, "tpot_s": 3600}),
                       ("none", {"ttft_s": 1.0})):
        scenario = parse(_scenario(slo))
        [candidate] = candidates(scenario, ctx)
        [w] = scenario.workloads
        found = serving_capacity(ctx, w, w.buckets[0], candidate)
        capacity[label] = 0.0 if found is None else found.rps
    assert capacity["none"] == capacity["loose"] > capacity["tight"]
