"""The latency–throughput curve of a deployment and the highest rate that meets latency SLOs.

Saturation. The most a deployment serves is measured, not guessed: a closed-loop run with as many
clients as the copies can run sequences at once (every copy full all the time) gives its requests/s,
counted in the steady middle of the run (between the 10th and 60th percentile completion: the drain
at the end, when fewer requests are left than slots, is left out). Each client sends at least
STEADY_WAVES requests: with one request per client every request starts at once and their completions
bunch together, so the middle of the run is no steady state (llama-3.1-70b on 8 H100s read 159.5
requests/s with 1,000 clients and 1,000 requests, against 15.4 with 4,000 requests and at most 15.6
delivered by any open-loop rate).
A sweep then runs open-loop Poisson loads from 5% to 110% of that rate.

Highest rate within SLOs. Bisection over the rate between 0 and the saturation rate (8 halvings: the
answer is within 0.4% of the saturation rate), each point a simulation of the same requests (the same
seed: arrival gaps are the same unit draws scaled by 1/rate, so the points differ only in the rate).
A run meets the SLOs when the chosen statistic (p90 by default) of TTFT and of TPOT are within them
and no request was rejected. Cost: about ten simulations, each under a second once step times are
cached (the first also fills the step-time grid, a few seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.errors import ConfigError
from planner.predict.api import Request
from planner.predict.context import Context, default_context
from planner.serve.api import MAX_SIM_REQUESTS, Load, Scheduling, ServeResult, Slo, serve
from planner.serve.policies import policy_for
from planner.workload.engines import get_engine
from planner.workload.zoo import Model, resolve

BISECTIONS = 8
MAX_POINTS = 100
STEADY_WAVES = 4
"""Requests per client in the saturation run, at least (module docstring)."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """The highest open-loop rate a deployment serves within SLOs."""

    rate_rps: float
    """Requests per second (0 when even the lowest rate tried misses the SLOs)."""
    saturation_rps: float
    """Requests per second with every copy full (closed loop)."""
    at_rate: ServeResult | None
    """The run at `rate_rps` (None when 0)."""


def saturation(req: Request, load: Load, scheduling: Scheduling = Scheduling(), ctx: Context | None = None,
               model: Model | None = None) -> ServeResult:
    """The closed-loop run with enough clients to keep every copy full."""
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    device = ctx.device(req.device)
    from planner.predict.api import engine_for, parallelism

    engine, _ = engine_for(replace(req, mode="inference"), model, device)
    policy, _ = policy_for(get_engine(engine), scheduling.max_num_seqs, scheduling.max_num_batched_tokens,
                           scheduling.prefix_hit_rate, req.batch if isinstance(req.batch, int) else None)
    copies = parallelism(req).dp
    clients = min(policy.max_seqs * copies, MAX_SIM_REQUESTS // STEADY_WAVES)
    requests = max(load.requests, STEADY_WAVES * clients)
    closed = replace(load, rate_rps=None, trace=None, concurrency=clients, arrival="poisson", requests=requests)
    return serve(req, closed, replace(scheduling, disagg=None), Slo(), ctx, model)


def _open(load: Load, rate: float) -> Load:
    return replace(load, rate_rps=rate, concurrency=None, trace=None)


def sweep(req: Request, load: Load, scheduling: Scheduling = Scheduling(), slo: Slo = Slo(), points: int = 10,
          ctx: Context | None = None, model: Model | None = None) -> tuple[list[tuple[float, ServeResult]], Capacity]:
    """[(rate, run)] from 5% to 110% of the saturation rate, and the highest rate within the SLOs."""
    if isinstance(points, bool) or not isinstance(points, int) or not 2 <= points <= MAX_POINTS:
        raise ConfigError(f"--sweep-rate takes 2 to {MAX_POINTS} points, got {points!r}")
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    top = _rate(saturation(req, load, scheduling, ctx, model))
    rates = [top * (0.05 + (1.10 - 0.05) * i / (points - 1)) for i in range(points)]
    curve = [(r, serve(req, _open(load, r), scheduling, slo, ctx, model)) for r in rates]
    return curve, max_rate(req, load, scheduling, slo, ctx, model, top)


def max_rate(req: Request, load: Load, scheduling: Scheduling, slo: Slo, ctx: Context | None = None,
             model: Model | None = None, saturation_rps: float | None = None, bisections: int = BISECTIONS) -> Capacity:
    """The highest Poisson rate whose run meets `slo` (bisection, `bisections` halvings of the interval
    from 0 to the saturation rate; see the module docstring)."""
    if slo.ttft_s is None and slo.tpot_s is None:
        raise ConfigError("the highest rate within SLOs needs --slo-ttft and/or --slo-tpot")
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    top = saturation_rps if saturation_rps is not None else _rate(saturation(req, load, scheduling, ctx, model))
    if top <= 0:
        return Capacity(0.0, 0.0, None)
    lo, hi, best = 0.0, top, None
    for _ in range(bisections):
        mid = (lo + hi) / 2
        run = serve(req, _open(load, mid), scheduling, slo, ctx, model)
        if slo.met(run.metrics):
            lo, best = mid, run
        else:
            hi = mid
    return Capacity(lo, top, best)


def _rate(run: ServeResult) -> float:
    m = run.metrics
    return m.steady_requests_per_s or m.requests_per_s
