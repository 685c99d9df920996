"""planner.serve.sweep.saturation: the closed-loop rate is a steady state, not the bunched completions
of one wave of requests (each client sends STEADY_WAVES requests at least). A run whose request count is
left open goes on until its percentiles settle, or, above that rate, until its queue's growth shows
(planner/serve/steady.py; issue 38, item 6)."""

import pytest

from planner.predict import Request
from planner.serve.api import Load, Slo, serve
from planner.serve.sweep import STEADY_WAVES, _rate, saturation


def test_saturation_is_what_open_loop_runs_can_deliver():
    # 1,000 requests is fewer than STEADY_WAVES per client: the run is lengthened, and its rate is the most
    # any open-loop run delivers (within 5%), not the 10x figure one bunched wave gave
    req = Request("llama-3.1-70b", "h100-sxm", gpus=8, tp=8, input_len=1024, output_len=256)
    run = saturation(req, Load(requests=1000))
    top = _rate(run)
    assert run.metrics.requests > 1000 and run.metrics.requests >= STEADY_WAVES * run.metrics.mean_concurrency
    delivered = max(serve(req, Load(rate_rps=r, requests=4000)).metrics.requests_per_s for r in (0.8 * top, 1.2 * top, 2 * top))
    assert 0.95 * delivered <= top <= 1.05 * delivered


ISSUE_REQ = Request("llama-3.1-8b", "h100-sxm")  # 1,024 prompt + 256 output tokens under vLLM: issue 38's copy


def test_the_issues_overloaded_run_does_not_report_full_goodput():
    # issue 38: 20 requests/s with a 0.5 s TTFT SLO ran 1,000 requests and showed 100% within the SLO; 10,000
    # requests gave 61.9%: the rate is above saturation and the run ended before the queue showed it
    # (20 / 18.86 = 1.06 x saturation; the rate is taken relative to it, so the test outlives changes to the model)
    top = _rate(saturation(ISSUE_REQ, Load(requests=1000)))
    rate = round(1.06 * top, 2)
    run = serve(ISSUE_REQ, Load(rate_rps=rate), slo=Slo(ttft_s=0.5))
    assert run.metrics.requests > 1000 and run.metrics.slo_met_fraction < 1.0
    assert getattr(run, "overloaded", None) is True and run.saturation_rps == pytest.approx(top)
    assert any(w.startswith(f"overloaded: {rate:g} requests/s offered") for w in run.warnings)


def test_a_default_run_below_saturation_settles_to_what_a_long_run_shows():
    # at 90% of saturation 1,000 requests read p50 TTFT 13% below a 64,000-request run's (51.7 vs 59.8 ms):
    # the default run goes on until its quarters agree, and then agrees with the long run within 10% (or 1 ms)
    rate = 0.9 * _rate(saturation(ISSUE_REQ, Load(requests=1000)))
    run = serve(ISSUE_REQ, Load(rate_rps=rate))
    long = serve(ISSUE_REQ, Load(rate_rps=rate, requests=64000)).metrics
    for name in ("ttft_s", "tpot_s"):
        for stat in ("p50", "p90"):
            got, want = getattr(run.metrics, name).get(stat), getattr(long, name).get(stat)
            assert abs(got - want) <= max(0.10 * max(got, want), 1e-3), (name, stat, got, want)
    assert run.settled and not run.overloaded and not run.warnings
