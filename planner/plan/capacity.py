"""Capacity from predictions: the candidates a scenario may buy or rent, what one unit of each
sustains for every serving bucket within its SLOs, and the training configurations that meet a
deadline. Computed from the predictor, not profiled.

Serving: a unit (cloud instance or on-prem server) of c devices runs c/tp replicas of a
tensor-parallel group; each replica serves batches of b requests back to back, one batch per
latency = TTFT + (O−1)·TPOT, so the unit sustains (c/tp)·b / latency requests per second. The
search takes tp in 1, 2, 4, 8 (dividing c and the heads) and b in powers of two, keeps the
configurations that fit in memory with TTFT and TPOT within the SLOs, and returns the best.

Simulated load (SLOs such as `ttft_p90_s`): one copy of tp devices is simulated under Poisson arrivals
of the bucket's requests with the engine's continuous batching (planner/serve), and its capacity is
the highest rate whose run meets the SLOs (bisection, planner/serve/sweep.py); a unit of c devices
serves c/tp times that. Each rate is run as the Serving page runs it and as the check (check.py)
re-runs the plan's rate (planner/serve/sweep.py run_at_rate on standard_load: 1,000 requests, seed 0,
np.percentile's linear percentiles), so a plan's rate per copy, put into the page, meets the SLOs
there. Cost: a saturation run and six bisection runs of 1,000 requests per (device, tp, bucket), plus
the step-time grid of each (device, tp), a few seconds; kept for the process.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.errors import PlannerError
from planner.plan.power import rated_w, unit_power
from planner.plan.scenario import Bucket, Scenario, ServingWorkload, TrainingJob
from planner.predict.api import Request, predict
from planner.predict.context import Context
from planner.workload.zoo import resolve

HOURS_PER_MONTH = 730.5
BATCHES = tuple(2**i for i in range(10))  # 1 .. 512


@dataclass(frozen=True, slots=True)
class Candidate:
    """A unit the plan can buy or rent."""

    key: str
    """"aws:p5.48xlarge:us-east-1:on_demand" or "onprem:dgx-h100@us-virginia-colo"."""
    kind: str
    """"cloud" or "onprem"."""
    device_id: str
    device_count: int
    pricing: str
    """A catalog pricing (planner.hardware.catalog.PRICINGS: on_demand, spot, reserved_1y, ...) or onprem."""
    usd_per_h: float
    """Cloud: the rental price; on-prem: what one server costs an hour whatever its load (capex over its
    life, colocation, operations: planner.predict.cost.onprem_fixed_usd_per_h); its electricity is
    billed on the energy the plan draws (`electricity_usd_per_kwh`)."""
    capex_usd: float
    """On-prem: purchase price of one server (0 in the cloud)."""
    power_kw: float
    """Facility power of one unit at its rating (on-prem, PUE applied), for the site's power cap."""
    kg_co2e_per_kwh: float | None
    price_date: str
    instance_key: str | None = None
    pue: float = 1.0
    """Facility power / IT power: the site's on-prem, the provider's fleet PUE in the cloud."""
    idle_kw: float | None = 0.0
    """Facility power of one unit carrying no load, kW: its devices at idle plus the rest of the server,
    x PUE (planner/plan/power.py); None when the device has no sourced TDP."""
    rest_w: float = 0.0
    """The rest of one unit besides its devices (CPUs, NICs, fans, supplies), W before PUE; 0 where not sourced."""
    rest_source: str | None = None
    """Where `rest_w` comes from; None where not sourced (energy then counts the devices only)."""
    electricity_usd_per_kwh: float = 0.0
    """On-prem: the site's price, billed on the plan's facility kWh (cloud: 0, in the rental price)."""

    @property
    def usd_per_month(self) -> float:
        return self.usd_per_h * HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class ServingCapacity:
    """What one unit of a candidate sustains on one bucket."""

    rps: float
    tp: int
    batch: int
    ttft_s: float
    tpot_s: float
    kw_per_unit: float | None
    """Average facility power of one unit serving at this capacity, kW: (devices x their average power
    + the rest of the server) x PUE; None when the device has no sourced TDP."""
    tier: str = ""
    """The efficiency tier the capacity was predicted on (measured, published, transferred, ...)."""
    band_fraction: float = 0.0
    """Relative half-width of its band (Target.band_fraction): the capacity may be off by 1 + f either way."""


@dataclass(frozen=True, slots=True)
class TrainingConfig:
    """One way to run a training job."""

    candidate: str
    units: int
    tp: int
    dp: int
    time_s: float
    cost_usd: float
    """Cloud: rental $ per unit-hour x units x hours. On-prem: the electricity of the run's energy above the
    units' idle draw (the units are held, and their fixed cost and idle draw billed, all horizon)."""
    energy_kwh: float | None
    """Facility kWh of the run: (device energy + the rest of each server over the run) x the candidate's
    PUE; None when the device has no sourced TDP."""
    kg_co2e: float | None
    """Of the energy the run adds (on-prem: above the units' idle draw); None when the energy or the region's
    grid intensity is unknown."""


def candidates(scenario: Scenario, ctx: Context) -> list[Candidate]:
    """Every candidate the scenario allows, priced."""
    c = scenario.candidates
    out: list[Candidate] = []
    wanted = {i.lower() for i in c.instances}
    for inst in ctx.catalog.instances:
        if c.providers and inst.provider.lower() not in {p.lower() for p in c.providers}:
            continue
        if c.regions and inst.region.lower() not in {r.lower() for r in c.regions}:
            continue
        if wanted and inst.key.lower() not in wanted and inst.instance.lower() not in wanted:
            continue
        if not c.pricing:
            continue
        device = ctx.device(inst.device_id)
        intensity = ctx.catalog.carbon_kg_per_kwh.get(f"{inst.provider}:{inst.region}".lower())
        row = ctx.power.cloud_pue(inst.provider)
        pue = row.pue if row is not None else 1.0
        power = unit_power(ctx, device, inst.device_count)
        for pricing in c.pricing:
            if pricing in inst.price_usd_per_h:
                out.append(Candidate(f"{inst.key}:{pricing}", "cloud", device.id, inst.device_count, pricing,
                                     inst.price_usd_per_h[pricing], 0.0, 0.0, intensity, inst.price_dates[pricing],
                                     inst.key, pue, _facility_kw(power.idle_w, pue), power.rest_w, power.rest_source))
    if c.site is not None:
        from planner.predict.cost import onprem_fixed_usd_per_h

        site = ctx.catalog.site(c.site)
        servers = [ctx.catalog.server(s) for s in c.servers] if c.servers else list(ctx.catalog.servers.values())
        for server in servers:
            device = ctx.device(server.device_id)
            rated = rated_w(ctx, server, device) / 1000  # the power cap must hold at the server's rating
            fixed, _ = onprem_fixed_usd_per_h(server, site, rated)
            power = unit_power(ctx, device, server.device_count, server)
            out.append(Candidate(f"onprem:{server.id}@{site.id}", "onprem", device.id, server.device_count, "onprem",
                                 fixed, server.capex_usd, rated * site.pue, site.carbon_kg_per_kwh, server.date,
                                 None, site.pue, _facility_kw(power.idle_w, site.pue), power.rest_w, power.rest_source,
                                 site.electricity_usd_per_kwh))
    return out


def _facility_kw(it_w: float | None, pue: float) -> float | None:
    return it_w * pue / 1000 if it_w is not None else None


def serving_kw(power_w_per_gpu: float | None, candidate: Candidate) -> float | None:
    """Facility kW of one unit of `candidate` serving at capacity, its devices drawing `power_w_per_gpu`
    on average: (devices x that + the rest of the server) x PUE; never below the unit's idle draw. None
    when the power is unknown (no sourced TDP)."""
    if power_w_per_gpu is None or power_w_per_gpu != power_w_per_gpu:
        return None
    kw = (power_w_per_gpu * candidate.device_count + candidate.rest_w) * candidate.pue / 1000
    return max(kw, candidate.idle_kw or 0.0)


def _tp_options(model_id: str, device_count: int) -> list[int]:
    model = resolve(model_id)
    if model.family != "decoder":
        return [1]
    heads, kv = model.config.num_heads, model.config.num_kv_heads
    return [t for t in (1, 2, 4, 8) if t <= device_count and device_count % t == 0 and heads % t == 0
            and (kv % t == 0 or t % kv == 0)]


def _serving(ctx: Context, model: str, dtype: str, input_len: int, output_len: int, ttft_slo: float,
             tpot_slo: float, device_id: str, device_count: int, pue: float,
             engine: str | None = None) -> ServingCapacity | None:
    known = ctx.cache("plan.serving")  # the capacity of each catalog device under these SLOs, per context
    key = (model, dtype, input_len, output_len, ttft_slo, tpot_slo, device_id, device_count, pue, engine)
    if key in known:
        return known[key]
    best = None
    for tp in _tp_options(model, device_count):
        for b in BATCHES:
            try:
                p = predict(Request(model, device_id, gpus=tp, tp=tp, batch=b, input_len=input_len,
                                    output_len=output_len, dtype=dtype, engine=engine), ctx)
            except PlannerError:
                break
            m = p.metrics
            if not p.fits or m["ttft_s"] > ttft_slo or m["tpot_s"] > tpot_slo:
                break  # larger batches only get slower and bigger
            rps = (device_count // tp) * b / m["latency_s"]
            power_w = m.get("average_power_w_per_gpu")
            kw = (power_w * device_count * pue / 1000) if power_w is not None and power_w == power_w else None
            if best is None or rps > best.rps:
                best = ServingCapacity(rps, tp, b, m["ttft_s"], m["tpot_s"], kw, p.tier, p.band_fraction)
    known[key] = best
    return best


PLAN_BISECTIONS = 6
"""Halvings of the rate interval: the capacity is within 1/64 of the saturation rate below the best."""


def copy_request(workload: ServingWorkload, bucket: Bucket, device_id: str, tp: int) -> Request:
    """The Request of one model copy of `tp` devices serving `bucket` (the simulator's unit)."""
    return Request(workload.model, device_id, gpus=tp, tp=tp, input_len=bucket.input_len,
                   output_len=bucket.output_len, dtype=workload.dtype, engine=workload.engine)


def copy_slo(workload: ServingWorkload):
    from planner.serve.api import Slo

    return Slo(workload.ttft_s, workload.tpot_s, workload.ttft_stat, workload.tpot_stat)


def _copy_capacity(ctx: Context, workload: ServingWorkload, bucket: Bucket, device_id: str, tp: int):
    """The highest Poisson rate one copy serves within the SLOs (planner/serve/sweep.py max_rate), each rate
    run as the Serving page and the check run it (sweep.run_at_rate on sweep.standard_load: the same requests,
    seed and percentiles), kept per (model, precision, bucket, SLOs, device, tp, engine): a unit's size only
    multiplies it."""
    from planner.serve.api import Scheduling
    from planner.serve.sweep import max_rate, standard_load

    known = ctx.cache("plan.copy")
    key = (workload.model, workload.dtype, bucket.input_len, bucket.output_len, workload.ttft_s,
           workload.tpot_s, workload.ttft_stat, workload.tpot_stat, device_id, tp, workload.engine)
    if key not in known:
        try:
            known[key] = max_rate(copy_request(workload, bucket, device_id, tp), standard_load(), Scheduling(),
                                  copy_slo(workload), ctx, bisections=PLAN_BISECTIONS)
        except PlannerError:
            known[key] = None
    return known[key]


def _simulated(ctx: Context, workload: ServingWorkload, bucket: Bucket, device_id: str, device_count: int,
               pue: float) -> ServingCapacity | None:
    """Capacity of a unit from simulation: copies of the smallest tensor-parallel group that serves any
    load within the SLOs, and of the next one (a larger group only pays where a copy is too slow)."""
    best, tried = None, 0
    for tp in _tp_options(workload.model, device_count):
        cap = _copy_capacity(ctx, workload, bucket, device_id, tp)
        if cap is None or cap.at_rate is None or cap.rate_rps <= 0:
            continue
        tried += 1
        copies = device_count // tp
        run = cap.at_rate
        power_w = run.average_power_w_per_gpu
        kw = power_w * device_count * pue / 1000 if power_w is not None else None
        m = run.metrics
        rps = copies * cap.rate_rps
        if best is None or rps > best.rps:
            best = ServingCapacity(rps, tp, 0, m.ttft_s.get(workload.ttft_stat), m.tpot_s.get(workload.tpot_stat), kw,
                                   run.tier, run.band_fraction)
        if tried == 2:
            break
    return best


def serving_capacity(ctx: Context, workload: ServingWorkload, bucket: Bucket, candidate: Candidate,
                     pue: float | None = None) -> ServingCapacity | None:
    """The best SLO-meeting configuration of one unit of `candidate` on one bucket, or None: under
    simulated load when the SLOs name a statistic (batch 0: continuous batching), else batches back
    to back. Its power is the unit's as a server draws it (serving_kw), at `pue` (default: the
    candidate's own)."""
    if workload.simulated:
        cap = _simulated(ctx, workload, bucket, candidate.device_id, candidate.device_count, 1.0)
    else:
        cap = _serving(ctx, workload.model, workload.dtype, bucket.input_len, bucket.output_len, workload.ttft_s,
                       workload.tpot_s, candidate.device_id, candidate.device_count, 1.0, workload.engine)
    if cap is None:
        return None
    if pue is not None and pue != candidate.pue:
        candidate = replace(candidate, pue=pue, idle_kw=None if candidate.idle_kw is None
                            else candidate.idle_kw / candidate.pue * pue)
    # the cached capacity holds the devices' average draw at PUE 1: kW x 1000 / devices = W per device
    per_gpu_w = cap.kw_per_unit * 1000 / candidate.device_count if cap.kw_per_unit is not None else None
    return replace(cap, kw_per_unit=serving_kw(per_gpu_w, candidate))


def training_configs(ctx: Context, job: TrainingJob, candidate: Candidate, max_units: int = 64,
                     pue: float | None = None) -> list[TrainingConfig]:
    """Configurations of `job` on 1, 2, 4, ... units of `candidate` that fit and meet the deadline
    (at most the two smallest: more units only cost more once the deadline is met).

    Several units are only combined when each is a whole node (its device count is the device's
    scale-up domain): the collectives model joins nodes over the scale-out link, and has no model of
    single-GPU cloud instances joined over a data-centre network."""
    from planner.predict.api import Request as R

    found: list[TrainingConfig] = []
    pue = candidate.pue if pue is None else pue
    node = ctx.device(candidate.device_id).devices_per_node
    if candidate.device_count < node:
        max_units = 1
    units = 1
    while units <= max_units and len(found) < 2:
        gpus = units * candidate.device_count
        for tp in _tp_options(job.model, candidate.device_count):
            dp = gpus // tp
            try:
                p = predict(R(job.model, candidate.device_id, "training", gpus=gpus, tp=tp, seq_len=job.seq_len,
                              micro_batch=1, global_batch=max(dp, 256 // dp * dp), zero=1, dtype=job.dtype,
                              train_tokens=job.tokens, recompute="full", engine=job.engine), ctx)
            except PlannerError:
                continue
            if not p.fits:
                continue
            time_s = p.metrics["time_to_train_s"]
            if time_s > job.deadline_s:
                continue
            hours = time_s / 3600
            # facility kWh: the devices' energy plus the rest of each server over the run, x PUE
            kwh = (p.metrics.get("energy_to_train_j", float("nan")) / 3.6e6
                   + units * candidate.rest_w / 1000 * hours) * pue
            kwh = kwh if kwh == kwh else None  # no sourced TDP: unknown, not zero
            intensity = candidate.kg_co2e_per_kwh
            if candidate.kind == "onprem":
                # the servers are held all horizon (capacity_held), their fixed cost and idle draw billed there:
                # the run adds the electricity and carbon of its energy above their idle draw
                added = None if kwh is None else max(0.0, kwh - units * (candidate.idle_kw or 0.0) * hours)
                usd = (added or 0.0) * candidate.electricity_usd_per_kwh
            else:
                added = kwh
                usd = hours * units * candidate.usd_per_h + (kwh or 0.0) * candidate.electricity_usd_per_kwh
            found.append(TrainingConfig(candidate.key, units, tp, dp, time_s, usd, kwh,
                                        added * intensity if added is not None and intensity is not None else None))
            break
        units *= 2
    return found


def demand(workload: ServingWorkload, bucket: Bucket) -> float:
    """Requests per second of one bucket."""
    return workload.demand_rps * bucket.share

