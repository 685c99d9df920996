"""planner.serve.sweep.saturation: the closed-loop rate is a steady state, not the bunched completions
of one wave of requests (each client sends STEADY_WAVES requests at least)."""

from planner.predict import Request
from planner.serve.api import Load, serve
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
