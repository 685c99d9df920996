"""The smallest deployment that fits: for a workload that does not fit as asked, the fewest devices, and
the layout on them, whose memory per device fits (the app's Workload page, `compare`'s users).

Device counts are tried 1, 2, 4, ... up to `max_gpus`. At each count the layouts are every tensor-
parallel size the model's heads allow within one node (the scale-up domain: tensor parallelism is
never split across nodes) times every pipeline depth that divides the count and not more than the
model's layers; the rest of the devices are data-parallel replicas. The user's other choices (ZeRO
stage, recompute, micro-batch, engine, precision) are kept: this searches where the model is placed,
not how it is trained.

A count is skipped after one prediction when its most-sharded layout (largest tp x pp) does not fit:
weights, gradients, optimizer states and activations per device shrink as tp and pp grow, so when
the most-sharded layout is over capacity every other layout of that count is too. Among the layouts
that fit at the smallest count, the one with the highest throughput is returned (tokens or samples per
second: step times alone are not comparable, since data parallelism changes the global batch).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.errors import PlannerError
from planner.predict.api import Request, predict, tp_candidates
from planner.predict.context import Context, default_context
from planner.predict.prediction import Prediction
from planner.workload.zoo import Model, resolve

MAX_SEARCH_GPUS = 4096
"""Largest deployment searched: 512 nodes of 8 (a 405B model trains on 16 nodes)."""
PP_DEPTHS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Fit:
    """A deployment that fits, and how many predictions the search made to find it."""

    request: Request
    """The request with gpus, tp and pp set."""
    prediction: Prediction
    tried: int
    """Predictions made (each layout tried, at each count)."""


def throughput_of(p: Prediction) -> float:
    """Tokens (or samples) per second of a prediction, 0 when it has none."""
    m = p.metrics
    return float(m.get("throughput_tokens_per_s") or m.get("throughput_samples_per_s") or m.get("tokens_per_s")
                 or m.get("samples_per_s") or 0.0)


def _layouts(ctx: Context, model: Model, req: Request, gpus: int) -> list[tuple[int, int]]:
    """(tp, pp) pairs for `gpus` devices, most sharded first."""
    device = ctx.device(req.device)
    layers = getattr(model.config, "num_layers", 1) if model.family == "decoder" else 1
    out = [(tp, pp) for tp in tp_candidates(ctx, model, device) for pp in PP_DEPTHS
           if tp * pp <= gpus and gpus % (tp * pp) == 0 and pp <= layers]
    return sorted(out, key=lambda layout: (-layout[0] * layout[1], -layout[0]))


def smallest_fit(req: Request, ctx: Context | None = None, model: Model | None = None,
                 max_gpus: int = MAX_SEARCH_GPUS) -> Fit | None:
    """The fewest devices of `req.device` (and the fastest layout on them) on which `req`'s workload fits
    in memory; None when nothing up to `max_gpus` fits. Raise PlannerError only for a request that is
    wrong whatever its layout (an unknown device, an impossible workload)."""
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    tried = 0
    gpus = 1
    while gpus <= max_gpus:
        found: list[tuple[Request, Prediction]] = []
        for i, (tp, pp) in enumerate(_layouts(ctx, model, req, gpus)):
            candidate = replace(req, gpus=gpus, tp=tp, pp=pp, dp=None, instance=None)
            try:
                p = predict(candidate, ctx, model)
            except PlannerError:
                if i == 0 and gpus == 1:
                    raise  # wrong on one device in the simplest layout: not a placement problem
                continue
            tried += 1
            if p.fits:
                found.append((candidate, p))
            elif i == 0:
                break  # the most-sharded layout is over capacity: so is every other (module docstring)
        if found:
            best_req, best = max(found, key=lambda f: throughput_of(f[1]))
            return Fit(best_req, best, tried)
        gpus *= 2
    return None


def filled(fit: Fit, ctx: Context | None = None, model: Model | None = None) -> Fit:
    """An inference deployment of `fit` replicated to fill the cheapest instance that holds one copy, so
    that no rented device sits idle while billed (as `compare` does): 2 devices of tp 2 on an 8-device
    instance become 4 copies. A training fit, an on-prem or instance-pinned request, or one that no
    catalog instance holds is returned as it is."""
    from planner.predict.cost import cheapest_instance
    ctx = ctx or default_context()
    model = model or resolve(fit.request.model)
    req = fit.request
    if req.mode == "training" or req.site is not None or req.instance is not None:
        return fit
    group = req.tp * req.pp
    instance = cheapest_instance(ctx.catalog, ctx.device(req.device), req.pricing, group, group)
    if instance is None or instance.device_count < 2 * req.gpus:
        return fit
    wider = replace(req, gpus=instance.device_count // group * group, instance=instance.key)
    try:
        return Fit(wider, predict(wider, ctx, model), fit.tried + 1)
    except PlannerError:  # replicas that cannot be timed: the single copy stands
        return fit
