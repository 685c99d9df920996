"""Serving entry points: simulate a deployment under a load, sweep the rate, find the highest rate
that meets latency SLOs. The CLI (`planner serve`), `--configs` rows, the planner and the app call
these; they print what is returned and compute nothing themselves.

A deployment is dp model copies of tp·pp devices (`Request`, as for `planner predict`). Open-loop
requests are spread over the copies round-robin; closed-loop clients are split evenly. Disaggregated
serving (`disagg="1p2d"`) runs x prefill copies and y decode copies: each prompt is prefilled on a
prefill copy (its first token is TTFT), its KV cache crosses to a decode copy (tp devices in
parallel, each its shard, over the scale-up link within a node or the scale-out link beyond), and
the decode copy batches it with the others until its output is complete.

How long a run is. A stated request count (`Load(requests=K)`: `--requests`, a benchmark's, the planner's)
is run as stated. Left open (None), the run is made in batches of 1,000, 2,000, ... up to 64,000 requests
until its latencies settle: the requests in arrival order are cut into quarters, the first (the warm-up)
is left out, and the p50 and p90 of TTFT and TPOT of successive quarters, and of the last quarter and the
whole run, agree within 10% (or 1 ms). An open-loop rate above the deployment's saturation (the
closed-loop rate with every copy full, planner/serve/sweep.py) has a queue that grows without bound: it
is run until that shows (the last quarter's p50 TTFT over twice the second's p90, and a TTFT SLO broken
there) and warned of. The rule and its constants are planner/serve/steady.py's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np

from planner.errors import ConfigError
from planner.files import finite
from planner.predict.api import Request, engine_for, on_device_request, parallelism, target_of
from planner.predict.context import Context, default_context
from planner.predict.inference import prompt_len
from planner.predict.prediction import CostOptions, price
from planner.serve import load as loads
from planner.serve import steady, versions
from planner.serve.clients import get_client
from planner.serve.metrics import ServeMetrics, summarize
from planner.serve.policies import Policy, describe, policy_for
from planner.serve.sim import Run, simulate
from planner.serve.steady import DEFAULT_REQUESTS, DEFAULT_SEED
from planner.serve.steps import StepModel
from planner.workload.graphs import context_note
from planner.workload.zoo import Model, resolve

MAX_SIM_REQUESTS = 200_000
STATS = ("mean", "p50", "p90", "p99")


@dataclass(frozen=True, slots=True)
class Load:
    """The load: exactly one of a rate (open loop), a number of clients (closed loop) or a trace."""

    rate_rps: float | None = None
    concurrency: int | None = None
    trace: str | None = None
    requests: int | None = None
    """Requests to simulate; None: run until the latencies settle or the queue is shown to grow
    (planner/serve/steady.py; a trace runs its own requests)."""
    arrival: str = "poisson"
    """"poisson" or "gamma" (bursty, with `cv`)."""
    cv: float = 1.0
    """Coefficient of variation of the gaps between arrivals (gamma)."""
    lengths: str | None = None
    """A length preset (hardware_specs/serving/lengths.csv); None: the request's fixed lengths (or `mix`)."""
    mix: tuple[tuple[int, int, float], ...] | None = None
    """A length mix: (input tokens, output tokens, share of the requests) of each bucket, the shares adding up to
    1 (planner.serve.load.mix_lengths); None: the request's fixed lengths (or `lengths`)."""
    think_s: float = 0.0
    """Closed loop: a client's pause between a completion and its next request, s."""
    seed: int = DEFAULT_SEED
    client: str | None = None
    """The benchmark client the run is measured as (planner/serve/clients.py): its request count where none is
    stated, its lengths, its ITL; None: planner's own (until steady, fixed lengths, pooled ITL)."""
    range_ratio: float | None = None
    """The client's --random-range-ratio (None: the client's default)."""


@dataclass(frozen=True, slots=True)
class Scheduling:
    """Overrides of the engine's scheduler defaults."""

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    prefix_hit_rate: float = 0.0
    disagg: str | None = None
    """"xPyD": x prefill and y decode model copies; None: every copy does both."""
    recv_interval: int | None = None
    """SGLang --scheduler-recv-interval (planner/serve/policies.py); None: the engine's 1."""
    batch_wait_iters: int | None = None
    """TensorRT-LLM batch_wait_timeout_iters; None: off."""
    batch_wait_tokens_ratio: float | None = None
    """TensorRT-LLM batch_wait_max_tokens_ratio; None: off."""


@dataclass(frozen=True, slots=True)
class Slo:
    """Latency objectives: a request meets them when its TTFT and TPOT are within; a run meets them when
    the `stat` of each is."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    stat: str = "p90"
    tpot_stat: str | None = None
    """The statistic of TPOT when it differs from `stat`."""

    def met(self, m: ServeMetrics) -> bool:
        tpot_stat = self.tpot_stat or self.stat
        for limit, value in ((self.ttft_s, m.ttft_s.get(self.stat)), (self.tpot_s, m.tpot_s.get(tpot_stat))):
            if limit is not None and (value is None or value > limit):
                return False
        return m.rejected == 0


@dataclass(frozen=True, slots=True)
class ServeResult:
    """A simulated deployment under a load."""

    model: str
    device: str
    engine: str
    gpus: int
    tp: int
    copies: int
    policy: str
    """The scheduler and its settings, one line."""
    kv_blocks_per_copy: int
    kv_block_tokens: int
    load: str
    metrics: ServeMetrics
    tier: str
    band_fraction: float
    average_power_w_per_gpu: float | None
    j_per_output_token: float | None
    usd_per_h: float | None
    usd_per_million_output_tokens: float | None
    notes: tuple[str, ...]
    price_date: str | None = None
    """Date of the price behind usd_per_h (YYYY-MM[-DD], the catalog row's); None when unpriced."""
    saturation_rps: float | None = None
    """The deployment's saturation rate, requests/s, when it was measured or given (open-loop rates)."""
    settled: bool | None = None
    """Whether the latencies settled (planner/serve/steady.py); None for a trace."""
    overloaded: bool | None = None
    """Whether the offered rate is above `saturation_rps` (the queue grows without bound); None when unknown."""
    warnings: tuple[str, ...] = ()
    """What makes the figures less than a steady state: an overload, a run that did not settle."""
    band_basis: str = ""
    """Where band_fraction comes from (Target.band_basis, one line)."""

    def as_dict(self) -> dict:
        """Flat JSON-ready dict: the latencies as ttft_s (mean), ttft_p50_s, ... with SI units."""
        m = self.metrics
        out = {"model": self.model, "device": self.device, "engine": self.engine, "gpus": self.gpus, "tp": self.tp,
               "copies": self.copies, "policy": self.policy, "load": self.load, "tier": self.tier,
               "band_fraction": self.band_fraction, "band_basis": self.band_basis,
               "kv_blocks_per_copy": self.kv_blocks_per_copy,
               "kv_block_tokens": self.kv_block_tokens, "requests": m.requests, "completed": m.completed,
               "rejected": m.rejected, "duration_s": m.duration_s}
        for name in ("ttft", "tpot", "itl", "e2e"):
            p = getattr(m, f"{name}_s")
            out[f"{name}_s"] = p.mean
            for stat in STATS[1:]:
                out[f"{name}_{stat}_s"] = p.get(stat)
        out.update(output_tokens_per_s=m.output_tokens_per_s, total_tokens_per_s=m.total_tokens_per_s,
                   requests_per_s=m.requests_per_s, goodput_rps=m.goodput_rps, slo_met_fraction=m.slo_met_fraction,
                   preemptions=m.preemptions, mean_concurrency=m.mean_concurrency, little_error=m.little_error,
                   kv_mean_fraction=m.kv_mean_fraction, kv_peak_fraction=m.kv_peak_fraction,
                   average_power_w_per_gpu=self.average_power_w_per_gpu, j_per_output_token=self.j_per_output_token,
                   usd_per_h=self.usd_per_h, usd_per_million_output_tokens=self.usd_per_million_output_tokens,
                   price_date=self.price_date, saturation_rps=self.saturation_rps, settled=self.settled,
                   overloaded=self.overloaded, warnings=list(self.warnings), timeline=[list(p) for p in m.timeline],
                   notes=list(self.notes))
        return out


def _step_model(req: Request, ctx: Context, model: Model, engine: str, exact: tuple[int, ...],
                contexts: tuple[int, ...] = ()) -> StepModel:
    """The StepModel of one copy, kept across calls (its grid is the expensive part)."""
    par = parallelism(req)
    steps = ctx.cache("serve.steps")
    key = (model.name, req.device, par.tp, par.pp, par.ep, req.dtype, engine, req.power_limit_w,
           req.scaleout_gbps, exact, contexts)
    got = steps.get(key)
    if got is None:
        if len(steps) > 32:
            steps.clear()
        got = steps[key] = StepModel(target_of(req, ctx, engine), model, par, req.dtype, engine, exact, contexts)
    return got


def _arrivals(req: Request, load: Load, model: Model) -> tuple[loads.Arrivals, str]:
    """The requests of the load (closed loop: lengths only, arrival times unused) and its description."""
    given = [x is not None for x in (load.rate_rps, load.concurrency, load.trace)]
    if sum(given) != 1:
        raise ConfigError("serve needs exactly one of --rate, --concurrency or --trace")
    if load.trace is not None:
        arrivals = loads.read_trace(load.trace)
        return arrivals, f"trace {load.trace} ({len(arrivals):,} requests)"
    n = load.requests
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SIM_REQUESTS:
        raise ConfigError(f"--requests must be a whole number in [1, {MAX_SIM_REQUESTS:,}], got {n!r}")
    if load.lengths and load.mix is not None:
        raise ConfigError("a load takes a length preset (--lengths) or a length mix, not both")
    if load.lengths:
        lengths = loads.preset_lengths(load.lengths)
        what = f"lengths {load.lengths}"
    elif load.mix is not None:
        lengths = _mix(load.mix, req, model)
        what = "length mix " + ", ".join(f"{i:,} + {o:,} tokens x {share:.0%}" for i, o, share in lengths.buckets)
    else:
        prompt = prompt_len(model, req.input_len, req.output_len, req.dtype)
        lengths = loads.fixed_lengths(prompt, req.output_len)
        what = f"{prompt:,} prompt + {req.output_len:,} output tokens"
    if load.concurrency is not None:
        c = load.concurrency
        if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_SIM_REQUESTS:
            raise ConfigError(f"--concurrency must be a whole number in [1, {MAX_SIM_REQUESTS:,}], got {c!r}")
        arrivals = loads.poisson(1.0, n, lengths, load.seed)  # lengths only: clients send on completion
        return _client_lengths(arrivals, load), f"{c} concurrent clients, {n:,} requests, {what}"
    if load.arrival == "poisson":
        arrivals = loads.poisson(load.rate_rps, n, lengths, load.seed)
    elif load.arrival == "gamma":
        arrivals = loads.gamma(load.rate_rps, load.cv, n, lengths, load.seed)
    else:
        raise ConfigError(f"--arrival must be poisson or gamma, got {load.arrival!r}")
    bursty = f", gamma cv {load.cv:g}" if load.arrival == "gamma" else ", Poisson"
    return _client_lengths(arrivals, load), f"{load.rate_rps:g} requests/s{bursty}, {n:,} requests, {what}"


def _mix(mix, req: Request, model: Model) -> loads.Lengths:
    """The Lengths of a load's mix, each bucket's prompt as the fixed path has it (prompt_len: within the model's
    positions and the context limit); ConfigError names the row (from 1)."""
    lengths = loads.mix_lengths(mix)
    buckets = []
    for k, (i, o, share) in enumerate(lengths.buckets, 1):
        try:
            buckets.append((prompt_len(model, i, o, req.dtype), o, share))
        except ConfigError as exc:
            raise ConfigError(f"length mix row {k}: {exc}") from None
    return loads.mix_lengths(buckets)


def _client_lengths(arrivals: loads.Arrivals, load: Load) -> loads.Arrivals:
    """`arrivals` with the stated fixed lengths spread as the load's client spreads them (a length preset or a mix,
    or no client, keeps them); drawn from their own generator, so the arrival times stay those of the seed."""
    if load.client is None or load.lengths or load.mix is not None:
        return arrivals
    client = get_client(load.client)
    rng = np.random.default_rng([load.seed, 1])
    n = len(arrivals)
    return loads.Arrivals(arrivals.arrival_s, client.lengths(int(arrivals.input_len[0]), load.range_ratio, n, rng),
                          client.lengths(int(arrivals.output_len[0]), load.range_ratio, n, rng))


def _copies(req: Request, disagg: str | None) -> tuple[int, int]:
    """(prefill copies, decode copies); (0, dp) when every copy does both."""
    par = parallelism(req)
    if disagg is None:
        return 0, par.dp
    m = re.fullmatch(r"(\d{1,4})p(\d{1,4})d", str(disagg).strip().lower())
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise ConfigError(f"--disagg must look like 1p1d or 2p3d (prefill and decode copies), got {disagg!r}")
    x, y = int(m.group(1)), int(m.group(2))
    if req.gpus is not None and req.gpus != (x + y) * par.tp * par.pp:
        raise ConfigError(f"--gpus {req.gpus} != ({x} + {y}) copies x tp x pp = {(x + y) * par.tp * par.pp}")
    return x, y


def _kv_blocks(steps: StepModel, policy: Policy, fraction: tuple[float, str] | None, longest_prompt: int) -> int:
    """KV blocks of one copy: the memory model's room beside the weights and the activations of the
    largest step, with the engine's share of memory: of the whole device ("total": vLLM's
    gpu_memory_utilization), or of what is left free ("free": TensorRT-LLM's free_gpu_memory_fraction)."""
    budget = min(policy.token_budget or policy.max_seqs * longest_prompt, 2**24)
    if fraction is None:
        tokens = steps.kv_capacity_tokens(budget, steps.target.defaults.memory_usable_fraction)
    elif fraction[1] == "free":
        tokens = int(fraction[0] * steps.kv_capacity_tokens(budget, 1.0))
    else:
        tokens = steps.kv_capacity_tokens(budget, fraction[0])
    return tokens // policy.block_tokens


def _spread(arrivals: loads.Arrivals, parts: int) -> list[np.ndarray]:
    """Indices of the requests each of `parts` copies gets (round-robin in arrival order)."""
    order = np.argsort(arrivals.arrival_s, kind="stable")
    return [order[i::parts] for i in range(parts)]


def _run_copies(steps, policy, kv_blocks, arrivals: loads.Arrivals, parts: int, clients: int, think_s: float,
                prefilled: bool = False, outputs: np.ndarray | None = None,
                frontend_s: float = 0.0) -> list[tuple[np.ndarray, Run]]:
    out_len = arrivals.output_len if outputs is None else outputs
    runs = []
    parts = min(parts, clients) if clients else parts  # a copy with no client gets no requests
    for i, idx in enumerate(_spread(arrivals, parts)):
        share = clients // parts + (1 if i < clients % parts else 0) if clients else 0
        if idx.size == 0 or (clients and share == 0):
            continue
        runs.append((idx, simulate(steps, policy, kv_blocks, arrivals.arrival_s[idx], arrivals.input_len[idx],
                                   out_len[idx], share, think_s, prefilled, frontend_s)))
    return runs


def serve(req: Request, load: Load, scheduling: Scheduling = Scheduling(), slo: Slo = Slo(),
          ctx: Context | None = None, model: Model | None = None, saturation_rps: float | None = None) -> ServeResult:
    """Simulate `req`'s deployment under `load`; see the module docstring. `load.requests` None: run until the
    latencies settle or the queue is shown to grow (planner/serve/steady.py). `saturation_rps`: the
    deployment's saturation rate when the caller has it (else, when an open-loop rate is run until it
    settles, it is measured here); an offered rate above it is noted as an overload."""
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    if model.family != "decoder":
        raise ConfigError(f"serve simulates generative (decoder) models; {model.name} is {model.family}: "
                          "use planner predict")
    if slo.stat not in STATS or (slo.tpot_stat or slo.stat) not in STATS:
        raise ConfigError(f"--slo-stat must be one of {', '.join(STATS)}, got {slo.stat!r}")
    for value, flag in ((slo.ttft_s, "--slo-ttft"), (slo.tpot_s, "--slo-tpot")):
        # an objective of 0 s no request can meet: a positive number, or none (left out: no target)
        if value is not None and not 0 < finite(value, flag) <= 1e6:
            raise ConfigError(f"{flag} must be a positive number of seconds up to 1e6 (leave it out for no "
                              f"target), got {value!r}")
    if load.think_s is not None and not 0 <= finite(load.think_s, "--think-s") <= 1e6:
        raise ConfigError(f"--think-s must be seconds in [0, 1e6], got {load.think_s!r}")
    client, from_client = None, False
    if load.client is not None:
        client = get_client(load.client)
        if load.range_ratio is not None and not 0 <= finite(load.range_ratio, "--range-ratio") <= 1:
            raise ConfigError(f"--range-ratio must be in [0, 1], got {load.range_ratio!r}")
        if load.range_ratio is not None and (load.lengths or load.mix is not None or load.trace is not None):
            raise ConfigError("--range-ratio spreads fixed --input-len/--output-len; a --lengths preset, a length "
                              "mix or a --trace has lengths of its own")
        count = client.requests(load.concurrency)
        if load.requests is None and load.trace is None and count is not None:
            if count > MAX_SIM_REQUESTS:
                raise ConfigError(f"--client {client.id} runs {count:,} requests at --concurrency "
                                  f"{load.concurrency}, above the {MAX_SIM_REQUESTS:,} simulated at most: give "
                                  "--requests")
            load, from_client = replace(load, requests=count), True  # a client runs its own count
    elif load.range_ratio is not None:
        raise ConfigError("--range-ratio needs --client: which client's rule spreads the lengths")
    device = ctx.device(req.device)
    req, dtype_note = on_device_request(req, device)
    _, version = versions.split(req.engine)
    req = replace(req, engine=versions.split(req.engine)[0])
    engine, engine_note = engine_for(replace(req, mode="inference"), model, device)
    spec, named = versions.engine_at(engine, version, device)
    policy, fraction = policy_for(spec, scheduling.max_num_seqs, scheduling.max_num_batched_tokens,
                                  scheduling.prefix_hit_rate, req.batch if isinstance(req.batch, int) else None,
                                  scheduling.recv_interval, scheduling.batch_wait_iters,
                                  scheduling.batch_wait_tokens_ratio)
    prefill_copies, decode_copies = _copies(req, scheduling.disagg)
    stated = load.requests is not None or load.trace is not None
    open_rate = load.rate_rps is not None and load.trace is None and load.concurrency is None and not prefill_copies
    if saturation_rps is None and open_rate and (not stated or from_client):  # a client's count: still warned of
        from planner.serve.sweep import saturation_rate

        _arrivals(req, replace(load, requests=steady.FIRST_REQUESTS), model)  # bad input fails before the run
        saturation_rps = saturation_rate(req, load, scheduling, ctx, model)
    overloaded = bool(open_rate and saturation_rps and load.rate_rps > saturation_rps)
    frontend = versions.frontend_s(engine) if client is None or client.server else 0.0
    for n in ([None] if stated else steady.batches()):
        one = _one_run(req, replace(load, requests=n) if n else load, ctx, model, device, engine, policy, fraction,
                       prefill_copies, decode_copies, frontend)
        runs = one[0]
        cat = lambda name: np.concatenate([getattr(r, name) for r in runs])  # noqa: E731
        arrival, first, finish, out = cat("arrival_s"), cat("first_token_s"), cat("finish_s"), cat("output_len")
        tpot = np.where(out > 1, (finish - first) / np.maximum(1, out - 1), math.nan)
        state = steady.judge(arrival, first - arrival, tpot)
        finished = steady.done(state, overloaded, slo.ttft_s, slo.stat)
        if finished:
            break
    runs, arrivals, what, steps, kv_blocks, run_notes = one
    metrics = summarize(runs, slo.ttft_s, slo.tpot_s)
    if client is not None and client.itl == "per_request":
        metrics = replace(metrics, itl_s=metrics.tpot_s)  # the client's "ITL" is each request's TPOT
    par = parallelism(req)
    copies = prefill_copies + decode_copies
    gpus = copies * par.tp * par.pp
    notes = [engine_note, *run_notes, *([dtype_note] if dtype_note else [])]
    if named is not None:
        notes.append(f"scheduler: {named.describe()} on {device.id} (hardware_specs/serving/schedulers.json; "
                     f"--engine {engine}@VERSION for another of {', '.join(versions.known(engine))})")
    if frontend:
        notes.append(f"frontend: {frontend * 1e3:.1f} ms per request in {engine}'s HTTP server before the scheduler "
                     "sees it, in TTFT and E2E (hardware_specs/serving/schedulers.json frontend)")
    if client is not None and load.trace is None:
        notes.append(client.describe(load.concurrency, len(arrivals), load.range_ratio))
    elif load.trace is None:
        notes.append("client: planner's own (TTFT, TPOT and ITL as vllm bench serve defines them); --client to run "
                     "the load as a benchmark client does (its request count, lengths and ITL)")
    power = per_token = usd_h = usd_m = price_date = None
    if metrics.duration_s > 0 and device.tdp_w:
        power = metrics.energy_j / (gpus * metrics.duration_s)
        per_token = metrics.energy_j / max(1, metrics.output_tokens)
    basis = price(steps.target, gpus, CostOptions(req.instance, req.site, req.pricing, req.utilization),
                  power or 0.0, par.tp)
    if basis is not None:
        usd_h, price_date = basis.usd_per_h, basis.price_date
        if metrics.output_tokens:
            usd_m = usd_h * metrics.duration_s / 3600 / metrics.output_tokens * 1e6
        notes.append(f"priced on {basis.what}")
    if metrics.rejected:
        notes.append(f"{metrics.rejected:,} requests rejected: longer than a copy's whole KV cache")
    warnings = []
    if load.trace is None:
        warnings, more = steady.messages(state, overloaded, stated, load.rate_rps, saturation_rps, finished)
        notes += more
        if client is not None:  # a client's run is what it measures, settled or not: said, not warned of
            notes += [f"as {client.id} measures it: {w.removeprefix('not steady: ').split(' (leave out')[0]}, not a "
                      "steady state" for w in warnings if w.startswith("not steady")]
            warnings = [w for w in warnings if not w.startswith("not steady")]
    eff = steps.target.efficiency
    return ServeResult(model.name, device.id, engine, gpus, par.tp, copies, describe(policy), kv_blocks,
                       policy.block_tokens, what, metrics, eff.tier, steps.target.band_fraction, power, per_token, usd_h,
                       usd_m, tuple(notes), price_date, saturation_rps if open_rate else None,
                       None if load.trace is not None else state.settled, overloaded if open_rate else None,
                       tuple(warnings), steps.target.band_basis)


def _one_run(req: Request, load: Load, ctx: Context, model: Model, device, engine: str, policy: Policy, fraction,
             prefill_copies: int, decode_copies: int, frontend_s: float = 0.0):
    """One simulation of `load` (its stated request count): (runs, arrivals, description, StepModel, KV blocks per
    copy, notes)."""
    arrivals, what = _arrivals(req, load, model)
    # a fixed-length load puts its prompt and its first and last decode contexts on the grid: the closed
    # forms (one request at a time = predict's TTFT and TPOT) then hold exactly
    pairs = np.unique(np.stack([arrivals.input_len, arrivals.output_len]), axis=1)
    exact = tuple(sorted({int(i) for i in pairs[0]})) if pairs.shape[1] <= 4 else ()
    contexts = tuple(sorted({int(i + o - 1) for i, o in pairs.T} | set(exact))) if exact else ()
    steps = _step_model(req, ctx, model, engine, exact, contexts)
    kv_blocks = _kv_blocks(steps, policy, fraction, int(arrivals.input_len.max()))
    par = parallelism(req)
    if kv_blocks < 1:
        raise ConfigError(f"{model.name} leaves no memory for a KV cache on {par.tp * par.pp} x {device.id} "
                          f"(tp {par.tp}, pp {par.pp}): use a larger --tp, or a smaller step budget")
    clients = load.concurrency or 0
    notes = []
    longest = int((arrivals.input_len + arrivals.output_len).max()) if len(arrivals.input_len) else 0
    note = context_note(model, longest, f"requests of up to {longest:,} tokens (prompt + output)", "simulated")
    if note:
        notes.append(note)
    if prefill_copies:
        runs = [_disaggregated(steps, policy, kv_blocks, arrivals, prefill_copies, decode_copies, device, par, clients,
                               notes, frontend_s)]
    else:
        runs = [r for _, r in _run_copies(steps, policy, kv_blocks, arrivals, decode_copies, clients, load.think_s,
                                          frontend_s=frontend_s)]
    return runs, arrivals, what, steps, kv_blocks, notes


def _disaggregated(steps: StepModel, policy: Policy, kv_blocks: int, arrivals: loads.Arrivals, x: int, y: int,
                   device, par, clients: int, notes: list, frontend_s: float = 0.0) -> Run:
    """One Run over both pools: prefill copies (outputs of 1 token), the KV transfer, decode copies."""
    if clients:
        raise ConfigError("--disagg runs open-loop loads (--rate or --trace), not --concurrency")
    n = len(arrivals)
    first = np.full(n, math.nan)
    prefill_runs = _run_copies(steps, policy, kv_blocks, arrivals, x, 0, 0.0, outputs=np.ones(n, dtype=np.int64),
                               frontend_s=frontend_s)
    for idx, run in prefill_runs:
        first[idx] = run.first_token_s
    same_node = (x + y) * par.tp * par.pp <= max(1, device.devices_per_node)
    link = device.scaleup_bytes_per_s if same_node else device.scaleout_bytes_per_s
    if not link:
        raise ConfigError(f"{device.id} has no sourced {'scale-up' if same_node else 'scale-out'} bandwidth for the "
                          "KV transfer of disaggregated serving")
    transfer = arrivals.input_len * steps.kv_bytes_per_token / (par.tp * link)
    notes.append(f"disaggregated {x}p{y}d: KV cache moved over the {'scale-up' if same_node else 'scale-out'} link at "
                 f"{link / 1e9:.0f} GB/s per device; decode copies do not hold back prefills (no backpressure)")
    ok = np.isfinite(first)
    ready = (first + transfer)[ok]
    order = np.argsort(ready, kind="stable")
    back = np.flatnonzero(ok)[order]
    decode = loads.Arrivals(ready[order], arrivals.input_len[back], arrivals.output_len[back])
    finish = np.full(n, math.nan)
    decode_runs = _run_copies(steps, policy, kv_blocks, decode, y, 0, 0.0, prefilled=True)
    for idx, run in decode_runs:
        finish[back[idx]] = run.finish_s
    lead = decode_runs[0][1] if decode_runs else prefill_runs[0][1]
    in_system = (sum(r.in_system_s for _, r in prefill_runs) + float(transfer[ok].sum())
                 + sum(r.in_system_s for _, r in decode_runs))
    return Run(arrivals.arrival_s, first, finish, arrivals.input_len, arrivals.output_len,
               np.zeros(n, dtype=int), lead.step_end_s, lead.step_kv_blocks, lead.step_running, lead.step_waiting,
               lead.step_preemptions, lead.step_decodes, lead.step_count, kv_blocks,
               sum(r.busy_s for _, r in prefill_runs + decode_runs),
               sum(r.energy_j for _, r in prefill_runs + decode_runs), in_system,
               sum(r.prefill_tokens for _, r in prefill_runs))


SERVE_KEYS = ("concurrency", "arrival_rate_rps", "requests", "lengths", "arrival", "cv", "seed", "slo_ttft_s",
              "slo_tpot_s", "slo_stat", "max_num_seqs", "max_num_batched_tokens", "prefix_hit_rate", "disagg",
              "client", "range_ratio", "recv_interval", "batch_wait_iters", "batch_wait_tokens_ratio")
"""--configs keys that make a row a simulated serving run (with `concurrency` or `arrival_rate_rps`)."""


def is_serve_row(row: dict) -> bool:
    """True for a --configs row that names a load: `concurrency` or `arrival_rate_rps`."""
    return row.get("concurrency") not in (None, "") or row.get("arrival_rate_rps") not in (None, "")


def serve_row(row: dict, ctx: Context | None = None) -> dict:
    """Simulate one --configs row: the serving keys (SERVE_KEYS) set the load, the scheduler and the SLOs;
    the others are predict's (planner/predict/api.py request_from_row). Returns as_dict() without the
    timeline: ttft_s, tpot_s (means) and the percentile keys."""
    from planner.predict.api import _int, request_from_row

    rest = {k: v for k, v in row.items() if k not in SERVE_KEYS}
    req = request_from_row(rest)
    given = {k: row[k] for k in SERVE_KEYS if row.get(k) not in (None, "")}
    try:
        ints = {k: _int(given[k], k) for k in ("concurrency", "requests", "max_num_seqs", "max_num_batched_tokens",
                                                 "recv_interval", "batch_wait_iters") if k in given}
        floats = {k: finite(given[k], f"key '{k}'") for k in ("arrival_rate_rps", "cv", "slo_ttft_s", "slo_tpot_s",
                                                               "prefix_hit_rate", "range_ratio",
                                                               "batch_wait_tokens_ratio") if k in given}
        seed = int(given.get("seed", 0))
    except (ValueError, OverflowError):
        raise ConfigError("a serving key of the row is not a number") from None
    load = Load(rate_rps=floats.get("arrival_rate_rps"), concurrency=ints.get("concurrency"),
                requests=ints.get("requests", None if "client" in given else DEFAULT_REQUESTS), arrival=str(given.get("arrival", "poisson")),
                cv=floats.get("cv", 1.0), lengths=given.get("lengths"), seed=seed,
                client=str(given["client"]) if "client" in given else None, range_ratio=floats.get("range_ratio"))
    scheduling = Scheduling(ints.get("max_num_seqs"), ints.get("max_num_batched_tokens"),
                            floats.get("prefix_hit_rate", 0.0), given.get("disagg"), ints.get("recv_interval"),
                            ints.get("batch_wait_iters"), floats.get("batch_wait_tokens_ratio"))
    slo = Slo(floats.get("slo_ttft_s"), floats.get("slo_tpot_s"), str(given.get("slo_stat", "p90")))
    out = serve(req, load, scheduling, slo, ctx).as_dict()
    out.pop("timeline")
    return out
