"""Advice for one configuration: changes ranked by their predicted gain, each re-predicted by planner.

Nothing is advised that the predictor cannot justify. A Change is a `predict` of the changed Request
that succeeds, fits, meets the SLOs given and beats the baseline on the objective by more than
MIN_GAIN (by more than the wider uncertainty band when the two predictions come from different tiers;
a precision that needs another engine must also beat that engine alone). When the baseline itself does
not fit or breaks an SLO, every change that fits and meets them is advice. `why` names the bound that
moves, summed from the predictor's own per-op rows (op_rows) of both, and the step figures that moved.

Candidates, only those valid for the mode and model. Inference: batches doubled while they fit and meet
the SLOs, up to the engine's max_num_seqs (the best and the largest shown); other engines that run the
model on the device and serve its precision; the quantization recipes, an FP8 KV cache, int4 weights
with an FP8 KV cache; tp 2/4/8 within a node; other catalog devices (the DEVICES_SHOWN best shown).
Training: recompute, ZeRO and more overlap (dp > 1), tp/pp/dp layouts on the same devices, larger
micro-batches, low-precision GEMM recipes, other engines and devices. Each Request is predicted once
per call: about 50 predictions, a few seconds including the graph captures.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from planner.errors import ConfigError, PlannerError
from planner.predict.api import Request, op_rows, predict, summary_row
from planner.predict.context import Context, default_context
from planner.predict.prediction import Prediction
from planner.units import json_safe, si
from planner.workload.engines import check_engine, engines, get_engine
from planner.workload.quant import precision, recipe_names
from planner.workload.zoo import Model, resolve

OBJECTIVES = ("throughput", "latency", "cost", "energy")
KINDS = ("batch", "engine", "precision", "kv-cache", "recompute", "parallel", "overlap", "device")
MIN_GAIN = 0.01
"""Smallest relative gain advised: below 1% a change is not worth the work of making it."""
MAX_BATCH = 2**16
"""Largest batch or micro-batch tried when the engine sets no max_num_seqs."""
DEVICES_SHOWN = 3
TP_DEGREES = (2, 4, 8)
LAYOUT_DEGREES = (1, 2, 4, 8)
RECOMPUTE = ("none", "selective", "full")
OVERLAP = 0.95
"""Data-parallel overlap tried: the last gradient bucket is reduced after the backward pass ends, so
some communication always stays exposed; 1.0 is a bound, not a setting."""
PER = {"decode": "output token", "prefill": "prompt", "forward": "sample", "step": "sample"}
"""What one sequence of a phase's batch produces."""
COUNTS = ("predicted", "advised", "not_shown", "failed", "not_fitting", "over_slo", "not_better", "within_band")


@dataclass(frozen=True, slots=True)
class Figures:
    """What one prediction says, in the units advice is ranked in."""

    request: Request
    prediction: Prediction
    gpus: int
    throughput_per_s: float
    """`throughput_unit` per s, whole deployment."""
    throughput_unit: str
    """"output tokens" (LLM serving), "tokens" (LLM training) or "samples"."""
    latency_s: float
    """One request end to end (inference) or one optimizer step (training), s."""
    ttft_s: float | None
    tpot_s: float | None
    usd_per_unit: float | None
    """USD per `cost_unit` ("1M output tokens", "1k samples", "1M tokens"); None without a price."""
    cost_unit: str
    j_per_unit: float | None
    """J per `energy_unit` ("output token", "sample", "token"); None without a sourced TDP."""
    energy_unit: str
    phase: str
    """The graph a sequence spends most predicted op time in: decode, prefill, forward or step."""
    bound: str
    """What bounds most of that phase's op time: compute, memory or overhead."""
    bound_share: float
    """Share of the phase's op time in `bound` ops, 0-1."""

    def as_dict(self) -> dict:
        p = self.prediction
        return {"request": asdict(self.request), "fits": p.fits, "engine": p.engine, "dtype": p.dtype, "tier": p.tier,
                "band_fraction": p.band_fraction, "memory_bytes_per_gpu": p.memory.total_bytes,
                **{k: getattr(self, k) for k in Figures.__dataclass_fields__ if k not in ("request", "prediction")}}


@dataclass(frozen=True, slots=True)
class Change:
    """One advised change; gains are relative and positive = better, None where a figure is unknown."""

    kind: str
    """One of KINDS."""
    title: str
    request: Request
    figures: Figures
    throughput_gain: float | None
    """Throughput per device, new / old - 1 (a change that adds devices is not credited for them)."""
    latency_gain: float | None
    """old / new - 1 of the latency (inference) or step time (training)."""
    usd_gain: float | None
    """old / new - 1 of USD per unit of work."""
    j_gain: float | None
    """old / new - 1 of J per unit of work."""
    gain: float
    """The gain on the objective ranked by."""
    why: str

    def as_dict(self) -> dict:
        return {**{k: getattr(self, k) for k in Change.__dataclass_fields__ if k not in ("request", "figures")},
                **self.figures.as_dict()}


@dataclass(frozen=True, slots=True)
class Advice:
    """The baseline and the changes ranked best first."""

    objective: str
    baseline: Figures
    changes: tuple[Change, ...]
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    max_latency_s: float | None
    baseline_ok: bool
    """The baseline fits and meets the SLOs."""
    counts: dict[str, int]
    """Changes predicted, and of those: advised, not shown (a better batch or device of the same kind, or
    past `top`), failed (PlannerError), not fitting, over an SLO, not better, or better by less than
    the uncertainty band of a prediction from another tier."""

    def as_dict(self) -> dict:
        """JSON-ready, SI units; an unknown number is None."""
        return json_safe({**{k: getattr(self, k) for k in Advice.__dataclass_fields__},
                          "baseline": self.baseline.as_dict(), "changes": [c.as_dict() for c in self.changes]})


def advise(req: Request, *, objective: str = "throughput", slo_ttft_s: float | None = None,
           slo_tpot_s: float | None = None, max_latency_s: float | None = None, ctx: Context | None = None,
           top: int | None = None, model: Model | None = None) -> Advice:
    """The changes to `req` the predictor says beat it on `objective`, best first (at most `top`). SLOs in
    s; `model`: a resolved model (for `package.module:function` ones). Bad input raises ConfigError or
    UnknownNameError from the baseline's own prediction."""
    if objective not in OBJECTIVES:
        raise ConfigError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {str(objective)[:40]!r}")
    slos = {"--slo-ttft": slo_ttft_s, "--slo-tpot": slo_tpot_s, "--max-latency": max_latency_s}
    for flag, value in slos.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value <= 0):
            raise ConfigError(f"{flag} must be a positive number of seconds, got {value!r}"[:200])
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
        raise ConfigError(f"--top must be a positive whole number, got {top!r}"[:200])
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    base_pred = predict(req, ctx, model)
    if req.mode == "inference" and req.batch == "auto":  # advise on the batch auto chose
        req = replace(req, batch=int(base_pred.metrics["batch"]))
    for flag, key in (("--slo-ttft", "ttft_s"), ("--slo-tpot", "tpot_s")):
        if slos[flag] is not None and key not in base_pred.metrics:
            raise ConfigError(f"{flag} applies to LLM serving (inference of a decoder model), not to this workload")
    cache = {req: base_pred}

    def run(r: Request) -> Prediction | None:
        if r not in cache:
            try:
                cache[r] = predict(r, ctx, model)
            except PlannerError:  # a change the predictor cannot make is not advice
                cache[r] = None
        return cache[r]

    def breaks(p: Prediction) -> str | None:
        """"not_fitting" or "over_slo" when `p` cannot be advised, None when it can."""
        if not p.fits:
            return "not_fitting"
        row = summary_row(p)  # latency_s: a request end to end, or a training step
        limits = (("ttft_s", slo_ttft_s), ("tpot_s", slo_tpot_s), ("latency_s", max_latency_s))
        return "over_slo" if any(limit is not None and row[key] is not None and row[key] > limit
                                 for key, limit in limits) else None

    base, baseline_ok = _numbers(base_pred), breaks(base_pred) is None
    where = _training if req.mode == "training" else _inference
    candidates = where(req, base_pred, model, ctx, run, breaks) + _devices(req, model, ctx)
    kept, counts, seen = [], dict.fromkeys(COUNTS, 0), {req}
    for kind, title, r, *alone in candidates:
        if r in seen:
            continue
        seen.add(r)
        p = run(r)
        reason = "failed" if p is None else breaks(p)
        gains = _gains(base, _numbers(p)) if not reason else {}
        gain = gains.get(objective)
        other = run(alone[0]) if alone and not reason else None
        if other is not None and not breaks(other) and (_gains(_numbers(other), _numbers(p))[objective] or 0) <= MIN_GAIN:
            gain = None  # the gain belongs to the engine the precision needs, advised on its own
        if not reason and (gain is None or baseline_ok and gain <= MIN_GAIN):
            reason = "not_better"
        elif not reason and baseline_ok and p.tier != base_pred.tier \
                and gain <= max(p.band_fraction, base_pred.band_fraction):
            # two tiers err independently: a gain inside the wider band is not one the predictor can tell
            # from its own error
            reason = "within_band"
        if reason:
            counts[reason] += 1
        else:
            kept.append((kind, title, r, p, gains))
    shown = _select(kept, objective)[:top]
    counts.update(predicted=len(seen) - 1, advised=len(shown), not_shown=len(kept) - len(shown))
    base_phases = _phases(req, base_pred, ctx, model)
    changes = []
    for kind, title, r, p, gains in shown:
        phases = _phases(r, p, ctx, model)
        changes.append(Change(kind, title, r, _figures(r, p, phases), gains["throughput"], gains["latency"],
                              gains["cost"], gains["energy"], gains[objective],
                              _why(base_pred, p, base_phases, phases, objective, baseline_ok)))
    return Advice(objective, _figures(req, base_pred, base_phases), tuple(changes), slo_ttft_s, slo_tpot_s,
                  max_latency_s, baseline_ok, counts)


def _select(kept: list, objective: str) -> list:
    """Best first; of the batches the best and the largest, of the devices the DEVICES_SHOWN best."""
    kept = sorted(kept, key=lambda k: (-k[4][objective], KINDS.index(k[0]), k[1]))
    batches = [k for k in kept if k[0] == "batch"]
    largest = max(batches, key=lambda k: (k[2].batch, k[2].micro_batch or 0), default=None)
    devices = [k for k in kept if k[0] == "device"][:DEVICES_SHOWN]
    keep = {id(k) for k in batches[:1] + [largest] + devices if k}
    return [k for k in kept if k[0] not in ("batch", "device") or id(k) in keep]


# ---------------------------------------------------------------- candidates: (kind, title, request[, alone])


def _inference(req: Request, base: Prediction, model: Model, ctx: Context, run, breaks) -> list:
    """Every inference change valid for this model and device."""
    engine = get_engine(base.engine)
    limit = engine.scheduler.max_num_seqs if engine.scheduler and engine.scheduler.max_num_seqs else MAX_BATCH
    out = _doublings(req, "batch", req.batch, lambda b: b <= limit, run, breaks)
    par = base.parallelism
    node = ctx.node_size(ctx.device(req.device))
    out += [("parallel", f"tp {par.tp} -> {tp} ({tp * par.pp * par.dp} GPUs)",
             replace(req, tp=tp, dp=par.dp, gpus=tp * par.pp * par.dp))
            for tp in TP_DEGREES if tp > par.tp and tp * par.pp <= node and _tp_ok(model, tp)]
    return out + _engines(req, base, model, ctx) + _precisions(req, base, model, ctx)


def _training(req: Request, base: Prediction, model: Model, ctx: Context, run, breaks) -> list:
    """Every training change valid for this model and layout."""
    par, gpus = base.parallelism, base.gpus
    out = [("recompute", f"recompute {req.recompute} -> {rc}", replace(req, recompute=rc))
           for rc in RECOMPUTE if rc != req.recompute]
    if par.dp > 1:  # ZeRO shards over, and overlap hides, data-parallel replicas
        out += [("parallel", f"ZeRO {par.zero} -> {z}", replace(req, zero=z)) for z in range(4) if z != par.zero]
        if req.overlap < OVERLAP:
            out.append(("overlap", f"overlap {req.overlap:g} -> {OVERLAP:g}", replace(req, overlap=OVERLAP)))
    node = ctx.node_size(ctx.device(req.device))
    out += [("parallel", f"tp {par.tp}, pp {par.pp}, dp {par.dp} -> tp {tp}, pp {pp}, dp {gpus // (tp * pp)}",
             replace(req, tp=tp, pp=pp, dp=gpus // (tp * pp), gpus=gpus))
            for tp in LAYOUT_DEGREES for pp in LAYOUT_DEGREES
            if (tp, pp) != (par.tp, par.pp) and gpus % (tp * pp) == 0 and tp <= node and _tp_ok(model, tp)
            and pp <= getattr(model.config, "num_layers", 1)]
    per_replica = req.global_batch // par.dp if req.global_batch else None
    out += _doublings(req, "micro_batch", int(base.metrics["micro_batch"]),
                      lambda m: per_replica is None or per_replica % m == 0, run, breaks)
    return out + _engines(req, base, model, ctx) + _precisions(req, base, model, ctx)


def _doublings(req: Request, field: str, start: int, valid, run, breaks) -> list:
    """`field` doubled from `start` while `valid`, up to MAX_BATCH; memory, TTFT and TPOT grow with the
    batch, so the first that fails, does not fit or breaks an SLO is the last tried."""
    out, size = [], start
    while size * 2 <= MAX_BATCH and valid(size * 2):
        size *= 2
        r = replace(req, **{field: size})
        out.append(("batch", f"{field.replace('_', '-')} {start} -> {size}", r))
        if run(r) is None or breaks(run(r)):
            break
    return out


def _engines(req: Request, base: Prediction, model: Model, ctx: Context) -> list:
    """Every other engine that runs this model, mode and device and serves the baseline's precision."""
    device = ctx.device(req.device)
    return [("engine", f"engine {base.engine} -> {name}", replace(req, engine=name)) for name in sorted(engines())
            if name != base.engine and _runs(name, model, req.mode, device) and _serves(name, base.dtype)]


def _precisions(req: Request, base: Prediction, model: Model, ctx: Context) -> list:
    """Every quantization recipe, and for LLM serving an FP8 KV cache (alone and with int4 weights), on
    the baseline's engine when it serves it, else on the first engine that runs the workload and does."""
    texts = [("precision", f"quant={name}") for name in recipe_names()]
    if req.mode == "inference" and model.family == "decoder":
        texts += [("kv-cache", f"{base.dtype},kv=fp8"), ("precision", "w4a16,kv=fp8")]
    device, out = ctx.device(req.device), []
    for kind, text in texts:
        try:
            name = precision(text).name
        except PlannerError:  # e.g. the baseline's precision already sets the KV cache
            continue
        if req.mode == "training" and precision(name).gemm == precision(name).compute:
            continue  # a weight-only recipe stores frozen weights; training updates them
        engine = next((e for e in [base.engine, *sorted(engines())] if _runs(e, model, req.mode, device)
                       and _serves(e, name)), None)
        if engine is None or name == precision(base.dtype).name:
            continue
        if engine == base.engine:
            out.append((kind, f"precision {base.dtype} -> {name}", replace(req, dtype=name)))
        else:
            out.append((kind, f"precision {base.dtype} -> {name} on {engine}", replace(req, dtype=name, engine=engine),
                        replace(req, engine=engine)))
    return out


def _devices(req: Request, model: Model, ctx: Context) -> list:
    """The request on every other catalog device, on the engine named if it runs there (else the default),
    with no instance or power limit (both belong to the baseline's device)."""
    own = ctx.device(req.device).id
    return [("device", f"device {own} -> {d}", replace(
        req, device=d, instance=None, power_limit_w=None,
        engine=req.engine if req.engine and _runs(req.engine, model, req.mode, ctx.device(d)) else None))
        for d in sorted(ctx.catalog.devices) if d != own]


def _runs(name: str, model: Model, mode: str, device) -> bool:
    try:
        check_engine(get_engine(name), model.family, mode, device.kind, device.vendor)
    except PlannerError:
        return False
    return True


def _serves(name: str, dtype: str) -> bool:
    """Whether engine `name` lists the precision's recipe and every dtype of its parts (int4 weights
    through its w4a16 recipe)."""
    engine, p = get_engine(name), precision(dtype)
    if p.recipe is not None and p.recipe not in engine.recipes:
        return False
    return all(d in engine.dtypes or (d == "int4" and "w4a16" in engine.recipes)
               for d in {p.compute, p.weights, p.activations, p.kv_cache})


def _tp_ok(model: Model, tp: int) -> bool:
    """Tensor parallelism splits the attention heads: the query heads, and the KV heads or their copies."""
    if tp == 1:
        return True
    if model.family not in ("decoder", "encoder") or model.config is None:
        return False
    heads = model.config.num_heads
    kv = getattr(model.config, "num_kv_heads", heads)
    return heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)


# ---------------------------------------------------------------- figures, gains and why


def _numbers(p: Prediction) -> dict:
    """The figures ranked on: throughput per device, latency, USD and J per unit (None when unknown)."""
    row = summary_row(p)

    def known(v):
        return v if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None

    return {"throughput": known(row["throughput"] and row["throughput"] / p.gpus), "latency": known(row["latency_s"]),
            "cost": known(row["usd_per_unit"]), "energy": known(row["j_per_unit"])}


def _gains(old: dict, new: dict) -> dict:
    """Relative gains, positive = better: new / old - 1 for throughput, old / new - 1 for the rest."""
    return {k: None if old[k] is None or new[k] is None else
            (new[k] / old[k] - 1 if k == "throughput" else old[k] / new[k] - 1) for k in OBJECTIVES}


def _phases(req: Request, p: Prediction, ctx: Context, model: Model) -> dict[str, dict]:
    """{phase: {batch, repeat (runs per sequence), time_s by bound, bytes, flop}}: the predictor's per-op
    rows on one device, at the batch (micro-batch) the prediction ran; times in s per step."""
    field = "micro_batch" if req.mode == "training" else "batch"
    batch = int(p.metrics[field])
    out = {}
    for phase, rows in op_rows(replace(req, **{field: batch}), ctx, model).items():
        time = {}
        for r in rows:
            time[r.bound] = time.get(r.bound, 0.0) + r.time_s * r.count
        out[phase] = {"batch": batch, "repeat": p.metrics.get("output_len", 1) if phase == "decode" else 1,
                      "time_s": time, "bytes": sum(r.bytes * r.count for r in rows),
                      "flop": sum(r.flop * r.count for r in rows)}
    return out


def _per_sequence(ph: dict, bound: str | None = None) -> float:
    """Op time one sequence spends in a phase (in `bound` ops only when given), s."""
    time = ph["time_s"].get(bound, 0.0) if bound else sum(ph["time_s"].values())
    return time / ph["batch"] * ph["repeat"]


def _main_bound(ph: dict) -> tuple[str, float]:
    """(bound, share of the phase's op time) of the bound most of its time is in."""
    bound = max(ph["time_s"], key=ph["time_s"].get)
    return bound, ph["time_s"][bound] / (sum(ph["time_s"].values()) or 1.0)


def _figures(req: Request, p: Prediction, phases: dict) -> Figures:
    m, row, num = p.metrics, summary_row(p), _numbers(p)
    if "throughput_tokens_per_s" in m:
        units = ("output tokens", "1M output tokens", "output token")
    elif "throughput_samples_per_s" in m:
        units = ("samples", "1k samples", "sample")
    else:  # training: summary_row's $ per 1M and J per one of what it counts
        units = ("tokens", "1M tokens", "token") if m.get("tokens_per_s") else ("samples", "1M samples", "sample")
    phase = max(phases, key=lambda name: _per_sequence(phases[name]))
    bound, share = _main_bound(phases[phase])
    return Figures(req, p, p.gpus, row["throughput"], units[0], row["latency_s"], m.get("ttft_s"), m.get("tpot_s"),
                   num["cost"], units[1], num["energy"], units[2], phase, bound, share)


def _why(base: Prediction, new: Prediction, old_ph: dict, new_ph: dict, objective: str, baseline_ok: bool) -> str:
    """One line: what makes the change feasible where the baseline is not, the (phase, bound) whose op
    time per sequence moves most, and the step figures that moved."""
    parts = []
    if not base.fits:
        parts.append(f"fits: {new.memory.total_bytes / 1e9:.1f} GB per device (baseline short by "
                     f"{base.memory.shortfall_bytes / 1e9:.1f} GB)")
    elif not baseline_ok:
        parts.append("meets the SLOs the baseline breaks")
    moves = [(abs(_per_sequence(old_ph[ph], b) - _per_sequence(new_ph[ph], b)), ph, b)
             for ph in old_ph.keys() & new_ph.keys() for b in old_ph[ph]["time_s"].keys() | new_ph[ph]["time_s"].keys()]
    if moves and max(moves)[0] > MIN_GAIN * sum(_per_sequence(ph) for ph in old_ph.values()):
        _, phase, bound = max(moves)
        a, b, unit = old_ph[phase], new_ph[phase], PER.get(phase, "sample")
        text = (f"{phase} {bound}-bound time {_t(a['time_s'].get(bound, 0) / a['batch'])} -> "
                f"{_t(b['time_s'].get(bound, 0) / b['batch'])} per {unit}")
        key, symbol, verb = {"memory": ("bytes", "B", "moved"), "compute": ("flop", "FLOP", "computed")}.get(
            bound, (None, "", ""))
        if key and _moved(a[key] / a["batch"], b[key] / b["batch"]):
            text += f" ({si(a[key] / a['batch'], symbol)} -> {si(b[key] / b['batch'], symbol)} {verb} per {unit})"
        (was, was_share), (now, now_share) = _main_bound(a), _main_bound(b)
        parts.append(text + (f"; {phase} moves from {was}- to {now}-bound" if was != now else
                             f"; {phase} stays {now}-bound ({was_share:.0%} -> {now_share:.0%} of its op time)"))
    else:
        parts.append("per-op times unchanged")
    mo, mn = base.metrics, new.metrics
    for key, label in (("dp_comm_exposed_s", "exposed data-parallel communication"), ("optimizer_s", "optimizer")):
        if key in mo and key in mn and abs(mo[key] - mn[key]) > MIN_GAIN * mo["step_time_s"]:
            parts.append(f"{label} {_t(mo[key])} -> {_t(mn[key])} per step")
    if _moved(mo.get("pipeline_bubble_fraction"), mn.get("pipeline_bubble_fraction")):
        parts.append(f"pipeline bubble {mo['pipeline_bubble_fraction']:.0%} -> {mn['pipeline_bubble_fraction']:.0%}")
    if objective == "cost" and base.cost and new.cost and _moved(base.cost.usd_per_h, new.cost.usd_per_h):
        parts.append(f"price ${base.cost.usd_per_h:,.2f}/h -> ${new.cost.usd_per_h:,.2f}/h")
    watts = "average_power_w_per_gpu"
    if objective == "energy" and _moved(mo.get(watts), mn.get(watts)):
        parts.append(f"average power {mo[watts]:.0f} W -> {mn[watts]:.0f} W per device")
    return "; ".join(parts)


def _moved(a, b) -> bool:
    """Whether two figures differ by more than MIN_GAIN of the first."""
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or not math.isfinite(a + b):
        return False
    return abs(a - b) > MIN_GAIN * abs(a) if a else b != 0


def _t(seconds: float) -> str:
    """A time for the why line: 3 significant digits in s, ms or us."""
    scale, unit = next((s, u) for s, u in ((1, "s"), (1e-3, "ms"), (0, "us")) if seconds >= s)
    return f"{seconds / (scale or 1e-6):.3g} {unit}"
