"""The latency–throughput curve of a deployment and the highest rate that meets latency SLOs.

Saturation. The most a deployment serves is measured, not guessed: a closed-loop run with as many
clients as the copies can run sequences at once (every copy full all the time) gives its requests/s,
counted in the steady middle of the run (between the 10th and 60th percentile completion: the drain
at the end, when fewer requests are left than slots, is left out). Each client sends at least
STEADY_WAVES requests: with one request per client every request starts at once and their completions
bunch together, so the middle of the run is no steady state (llama-3.1-70b on 8 H100s read 159.5
requests/s with 1,000 clients and 1,000 requests, against 15.4 with 4,000 requests and at most 15.6
delivered by any open-loop rate).
A sweep then runs open-loop Poisson loads from 5% to 110% of that rate. A rate above it overloads the
deployment: its queue grows without bound, so its row is marked and never counts as within the SLOs,
however short a run makes it look (each run, when the request count is left open, is as long as
planner/serve/steady.py needs to show the growth or to settle).

Highest rate within SLOs. A bisection over the rate, each point a simulation of the same requests (the
same seed: arrival gaps are the same unit draws scaled by 1/rate, so the points differ only in the
rate), until the interval is 1/2^8 of the saturation rate (within 0.4% of it). A run meets the SLOs when
the chosen statistic (p90 by default) of TTFT and of TPOT are within them and no request was rejected.
`max_rate` alone bisects from 0 to the saturation rate. A sweep bisects from its highest row that meets
the SLOs to the next row (or to the saturation rate), so its answer agrees with its table: no row above it
meets them, none below it that does is missed. Either answer is capped at the saturation rate: when
every rate tried up to it meets the SLOs, `Capacity.capped` says so. Cost: about ten simulations, each
under a second once step times are cached (the first also fills the step-time grid, a few seconds).

One run per rate. Every open-loop run at a rate (a sweep's rows, the bisection's points) is `run_at_rate`:
the load given, or `standard_load()` (DEFAULT_REQUESTS requests, seed DEFAULT_SEED, percentiles by
PERCENTILE_METHOD: planner/serve/steady.py). The Serving page runs its rates so, and so do a plan's
capacity and its check (planner/plan/capacity.py, check.py): a plan's rate per copy, put into the page,
gives the run the plan judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from planner.errors import ConfigError
from planner.predict.api import Request
from planner.predict.context import Context, default_context
from planner.serve.api import MAX_SIM_REQUESTS, Load, Scheduling, ServeResult, Slo, serve
from planner.serve.policies import policy_for
from planner.serve.steady import DEFAULT_REQUESTS, DEFAULT_SEED
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
    capped: bool = False
    """True when no rate tried up to the saturation rate missed the SLOs: the answer is the saturation
    rate's, not the SLOs' (above it the queue grows without bound)."""


def saturation(req: Request, load: Load, scheduling: Scheduling = Scheduling(), ctx: Context | None = None,
               model: Model | None = None) -> ServeResult:
    """The closed-loop run with enough clients to keep every copy full."""
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    device = ctx.device(req.device)
    from planner.predict.api import engine_for, parallelism
    from planner.serve.versions import engine_at, split

    engine, _ = engine_for(replace(req, mode="inference"), model, device)
    policy, _ = policy_for(engine_at(engine, split(req.engine)[1], device)[0], scheduling.max_num_seqs,
                           scheduling.max_num_batched_tokens,
                           scheduling.prefix_hit_rate, req.batch if isinstance(req.batch, int) else None)
    copies = parallelism(req).dp
    clients = min(policy.max_seqs * copies, MAX_SIM_REQUESTS // STEADY_WAVES)
    requests = max(load.requests or 0, STEADY_WAVES * clients)
    closed = replace(load, rate_rps=None, trace=None, concurrency=clients, arrival="poisson", requests=requests)
    return serve(req, closed, replace(scheduling, disagg=None), Slo(), ctx, model)


def saturation_rate(req: Request, load: Load, scheduling: Scheduling = Scheduling(), ctx: Context | None = None,
                    model: Model | None = None) -> float:
    """Requests/s of the deployment with every copy full: the steady middle of the `saturation` run."""
    return _rate(saturation(req, load, scheduling, ctx, model))


def _open(load: Load, rate: float) -> Load:
    return replace(load, rate_rps=rate, concurrency=None, trace=None)


def standard_load(requests: int = DEFAULT_REQUESTS) -> Load:
    """The load of a run at a rate when no other is asked for: `requests` Poisson arrivals of seed DEFAULT_SEED,
    the request's fixed lengths, planner's own client, its latencies read by PERCENTILE_METHOD (the three
    constants: planner/serve/steady.py). The Serving page's (its request count the user's, DEFAULT_REQUESTS
    unless changed), a plan's capacity's and its check's: a plan's rate, simulated as the page simulates it,
    is the same run."""
    return Load(requests=requests, seed=DEFAULT_SEED)


def run_at_rate(req: Request, rate_rps: float, load: Load | None = None, scheduling: Scheduling = Scheduling(),
                slo: Slo = Slo(), ctx: Context | None = None, model: Model | None = None,
                saturation_rps: float | None = None) -> ServeResult:
    """The simulation of `req`'s deployment at the Poisson rate `rate_rps`: `load` (default standard_load())
    at that rate. Every run at a rate goes through it: a sweep's rows, max_rate's bisection, the Serving
    page's chosen rate, a plan's capacity and its check."""
    load = standard_load() if load is None else load
    return serve(req, _open(load, rate_rps), scheduling, slo, ctx, model, saturation_rps=saturation_rps)


def sweep(req: Request, load: Load, scheduling: Scheduling = Scheduling(), slo: Slo = Slo(), points: int = 10,
          ctx: Context | None = None, model: Model | None = None) -> tuple[list[tuple[float, ServeResult]], Capacity]:
    """[(rate, run)] from 5% to 110% of the saturation rate, and the highest rate within the SLOs (module
    docstring; a Capacity of rate 0 without SLOs)."""
    if isinstance(points, bool) or not isinstance(points, int) or not 2 <= points <= MAX_POINTS:
        raise ConfigError(f"--sweep-rate takes 2 to {MAX_POINTS} points, got {points!r}")
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    top = saturation_rate(req, load, scheduling, ctx, model)
    rates = [top * (0.05 + (1.10 - 0.05) * i / (points - 1)) for i in range(points)]
    curve = [(r, run_at_rate(req, r, load, scheduling, slo, ctx, model, top)) for r in rates]
    if slo.ttft_s is None and slo.tpot_s is None:
        return curve, Capacity(0.0, top, None)
    met = [i for i, (r, run) in enumerate(curve) if r <= top and slo.met(run.metrics)]
    if met:
        lo, best = curve[met[-1]]
        hi = min(curve[met[-1] + 1][0], top) if met[-1] + 1 < len(curve) else top
    else:
        lo, best, hi = 0.0, None, min(curve[0][0], top)
    return curve, max_rate(req, load, scheduling, slo, ctx, model, top, start=(lo, hi, best))


def max_rate(req: Request, load: Load, scheduling: Scheduling, slo: Slo, ctx: Context | None = None,
             model: Model | None = None, saturation_rps: float | None = None, bisections: int = BISECTIONS,
             start: tuple[float, float, ServeResult | None] | None = None) -> Capacity:
    """The highest Poisson rate whose run meets `slo`: bisection until the interval is 1/2^`bisections` of the
    saturation rate, from 0 to the saturation rate, or from `start` = (a rate that meets the SLOs, a higher
    one that does not or the saturation rate, the run at the first or None); see the module docstring."""
    if slo.ttft_s is None and slo.tpot_s is None:
        raise ConfigError("the highest rate within SLOs needs --slo-ttft and/or --slo-tpot")
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    top = saturation_rps if saturation_rps is not None else saturation_rate(req, load, scheduling, ctx, model)
    if top <= 0:
        return Capacity(0.0, 0.0, None)
    lo, hi, best = start if start is not None else (0.0, top, None)
    hi = min(hi, top)
    capped = hi >= top
    # halvings that bring hi - lo to top / 2^bisections: (hi - lo) / 2^k <= top / 2^bisections
    halvings = max(0, math.ceil(math.log2(max(hi - lo, 1e-300) * 2**bisections / top) - 1e-9))
    for _ in range(halvings):
        mid = (lo + hi) / 2
        run = run_at_rate(req, mid, load, scheduling, slo, ctx, model, top)
        if slo.met(run.metrics):
            lo, best = mid, run
        else:
            hi, capped = mid, False
    return Capacity(lo, top, best, capped and best is not None)


def _rate(run: ServeResult) -> float:
    m = run.metrics
    return m.steady_requests_per_s or m.requests_per_s
