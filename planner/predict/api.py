"""The prediction API: predict one configuration, many configurations, or compare devices.

Every function returns frozen values (Prediction) or a DataFrame built from them; the CLI and the
app print what these return and compute nothing themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from planner.errors import ConfigError, PlannerError
from planner.files import finite
from planner.memo import IdentityMemo
from planner.predict.context import ALL_TIERS, Context, default_context
from planner.predict.inference import llm_fits, predict_inference
from planner.predict.prediction import CostOptions, Prediction
from planner.predict.training import predict_training
from planner.workload.engines import GENERIC_ENGINES, check_engine, default_engine, get_engine, known_vendor
from planner.workload.graphs import context_note
from planner.workload.parallelism import Parallelism
from planner.workload.quant import compose, on_device, precision, quantized_weights
from planner.workload.zoo import Model, resolve

MODES = ("inference", "training")
MAX_GPUS = 2**20
"""Largest deployment accepted (devices): far above any cluster built."""
MIN_UTILIZATION = 0.01
"""Lowest on-prem utilization accepted (as scenarios): fixed costs per useful hour grow as 1/utilization
and overflow to infinity near 5e-324."""
MAX_TRAIN_TOKENS = 1e16
"""Largest training run accepted (tokens): 1,000x the 15T tokens of Llama 3."""
COMPARE_COLUMNS = ("device", "vendor", "gpus", "tp", "dp", "engine", "fits", "tier", "profile", "batch", "ttft_s",
                   "tpot_s", "latency_s",
                   "throughput", "band_fraction", "usd_per_h", "usd_per_unit", "j_per_unit", "memory_gb_per_gpu",
                   "instance", "price_date", "price_stale", "note")
"""Columns of the compare table, present even when every device fails (then only `note` is filled)."""
PRECISION_KEYS = ("quant", "weights", "activations", "kv_cache")
"""--configs keys that compose the precision (planner/workload/quant.py compose) into `dtype`."""
SORT_KEYS = {"cost": ("usd_per_unit", True), "latency": ("latency_s", True), "throughput": ("throughput", False),
             "energy": ("j_per_unit", True)}


@dataclass(frozen=True, slots=True)
class Request:
    """One configuration to predict; field names are the CLI flags with underscores."""

    model: str
    device: str
    mode: str = "inference"
    gpus: int | None = None
    tp: int = 1
    pp: int = 1
    dp: int | None = None
    ep: int = 1
    zero: int = 0
    batch: int | str = 1
    input_len: int | None = None
    output_len: int = 256
    seq_len: int | None = None
    image_size: int | None = None
    global_batch: int | None = None
    micro_batch: int | None = None
    microbatches: int | None = None
    recompute: str = "none"
    mixed_precision: str = "auto"
    """Training at a 16-bit dtype: amp (torch.autocast, fp32 weights), master (16-bit weights, fp32 master
    in the optimizer), pure (all 16-bit), auto (the engine's; planner.workload.graphs.MIXED_PRECISION)."""
    optimizer: str = "auto"
    """Training: the AdamW implementation, fused, foreach or loop; auto: the engine's
    (planner.workload.graphs.OPTIMIZERS)."""
    dtype: str = "bf16"
    instance: str | None = None
    site: str | None = None
    pricing: str = "on_demand"
    utilization: float = 1.0
    overlap: float = 0.8
    train_tokens: float | None = None
    engine: str | None = None
    """Execution engine (hardware_specs/engines); None: the default for the workload (engine_for)."""
    scaleout_gbps: float | None = None
    """Scale-out network per device per direction in Gb/s (as NICs are sold: 200 for one HDR port per
    GPU); replaces the catalog's figure, or supplies one where the catalog has none sourced."""
    power_limit_w: float | None = None
    """A power limit below the device's TDP (as `nvidia-smi -pl` sets), W; None: run at TDP."""


MAX_SCALEOUT_GBPS = 1e5
"""Largest --scaleout-gbps accepted: 100 Tb/s per device, far above any NIC sold (800 Gb/s in 2026)."""


def scaleout_bytes_per_s(gbps) -> float:
    """--scaleout-gbps (Gb/s per device and direction) in bytes/s; ConfigError outside (0, MAX_SCALEOUT_GBPS]."""
    gbps = finite(gbps, "--scaleout-gbps")
    if not 0 < gbps <= MAX_SCALEOUT_GBPS:
        raise ConfigError(f"--scaleout-gbps must be in (0, {MAX_SCALEOUT_GBPS:,.0f}] Gb/s per device, got {gbps:g}")
    return gbps * 1e9 / 8


def target_of(req: Request, ctx: Context, engine: str | None = None):
    """The device's Target, its efficiency from the profiles `engine` runs the kernels of (every tier
    when None), with the scale-out bandwidth of --scaleout-gbps where given."""
    tiers = get_engine(engine).libraries if engine else ALL_TIERS
    gemm = _gemm_dtype(req.dtype) if engine else None
    target = ctx.target(req.device, tiers, gemm)
    if req.scaleout_gbps is None and req.power_limit_w is None:
        return target
    changes = {}
    if req.scaleout_gbps is not None:
        changes["scaleout_bytes_per_s"] = scaleout_bytes_per_s(req.scaleout_gbps)
    if req.power_limit_w is not None:
        changes["power_limit_w"] = _power_limit_w(req.power_limit_w, target.device, ctx)
    return ctx.target(replace(target.device, **changes), tiers, gemm)


def _power_limit_w(value, device, ctx: Context) -> float:
    """--power-limit-w checked against `device`: above its draw with no work and at most its TDP."""
    watts = finite(value, "--power-limit-w")
    if not device.tdp_w:
        raise ConfigError(f"--power-limit-w needs the device's TDP, and '{device.id}' has none sourced in the catalog")
    curve = ctx.power.curve_for(device)
    floor = curve.idle_w * device.tdp_w / curve.power_limit_w if curve else ctx.power.idle_w(device)
    if not floor < watts <= device.tdp_w:
        raise ConfigError(f"--power-limit-w must be above {device.id}'s draw with no work ({floor:.0f} W) and at most "
                          f"its TDP ({device.tdp_w:g} W), got {watts:g}")
    return watts


def _gemm_dtype(dtype: str | None) -> str | None:
    """The dtype a workload's GEMMs run at (its precision's `gemm`), None when the name is not one."""
    try:
        return precision(dtype or "bf16").gemm
    except PlannerError:
        return None


def _scaleout_note(req: Request, prediction: Prediction) -> Prediction:
    notes = []
    if req.scaleout_gbps is not None:
        notes.append(f"scale-out {req.scaleout_gbps:g} Gb/s per device per direction from --scaleout-gbps")
    if req.power_limit_w is not None:
        notes.append(f"power limit {req.power_limit_w:g} W from --power-limit-w: kernels that would draw more run "
                     "at the clocks it sustains")
    return replace(prediction, notes=(*prediction.notes, *notes)) if notes else prediction


def engine_for(req: Request, model: Model, device) -> tuple[str, str]:
    """(engine name, note for the output): the named engine after checking it can run this model, mode
    and device, or the default (engines.default_engine) with the reason it was chosen."""
    if req.engine is None:
        name = default_engine(model.family, req.mode, device.kind, _gemm_dtype(req.dtype), device.vendor)
        on = {"gpu": "a GPU", "tpu": "a TPU (vLLM's hardware plugin)",
              "accelerator": "an accelerator (vLLM's hardware plugin)"}.get(device.kind, f"a {device.kind}")
        why = {"vllm": f"the default for LLM inference on {on}",
               "tensorrt": "the default for INT8 or FP8 inference of a non-LLM on an NVIDIA GPU: eager PyTorch runs "
                           "no quantized operator on a GPU"}.get(name, "the default for training, non-LLM inference "
                                                                  "and CPUs")
        if name in GENERIC_ENGINES and not known_vendor(device.vendor):
            why = f"the default for a device of a vendor no engine file lists, {device.vendor}"
    else:
        if not isinstance(req.engine, str):
            raise ConfigError(f"--engine must be a name, got {req.engine!r}"[:200])
        # "vllm@0.11": a recorded release (checked by get_engine) selects a serving engine's scheduler defaults
        # (planner/serve/versions.py); its graph, fusions and kernels are the engine file's
        name, why = get_engine(req.engine).name, "from --engine"
    engine = get_engine(name)
    return name, _ENGINE_NOTES.get((engine,), (why, model.family, req.mode, device.kind, device.vendor),
                                   lambda: _engine_note_text(engine, why, model.family, req.mode, device))


_ENGINE_NOTES = IdentityMemo()  # every prediction checks and describes its engine: once per combination


def _engine_note_text(engine, why: str, family: str, mode: str, device) -> str:
    """Check that `engine` runs this family, mode and device (raise otherwise); the output's note."""
    check_engine(engine, family, mode, device.kind, device.vendor)
    rules = ", ".join(rule for rule, _ in engine.fusions) or "none (every aten op its own kernel)"
    graphs = {"none": "no CUDA graphs", "decode": "decode steps replayed as CUDA graphs",
              "all": "forward passes replayed as CUDA graphs",
              "training": "training steps' forward and backward replayed as CUDA graphs"}[engine.cuda_graphs]
    return f"engine {engine.name} ({why}; --engine to change): fusions {rules}; {graphs}"


def _engine_note(prediction: Prediction, note: str) -> Prediction:
    return replace(prediction, notes=(note, *prediction.notes))


def parallelism(req: Request) -> Parallelism:
    """The Parallelism of a request: dp from --gpus when not given, checked against it."""
    for name in ("tp", "pp", "ep"):
        value = getattr(req, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"--{name} must be a positive integer, got {value!r}")
    if req.gpus is not None and not isinstance(req.gpus, bool) and isinstance(req.gpus, int) and req.gpus > MAX_GPUS:
        raise ConfigError(f"--gpus {req.gpus:,} is above the limit of {MAX_GPUS:,}")
    per_copy = req.tp * req.pp
    dp = req.dp
    if req.gpus is not None:
        if isinstance(req.gpus, bool) or not isinstance(req.gpus, int) or req.gpus < 1:
            raise ConfigError(f"--gpus must be a positive integer, got {req.gpus!r}")
        if req.gpus % per_copy:
            raise ConfigError(f"--gpus {req.gpus} is not a multiple of tp x pp = {per_copy}")
        if dp is None:
            dp = req.gpus // per_copy
        elif dp * per_copy != req.gpus:
            raise ConfigError(f"--gpus {req.gpus} != tp x pp x dp = {per_copy * dp}")
    return Parallelism(tp=req.tp, pp=req.pp, dp=dp or 1, ep=req.ep, zero=req.zero, microbatches=req.microbatches,
                       overlap=req.overlap)


def predict(req: Request, ctx: Context | None = None, model: Model | None = None) -> Prediction:
    """Predict one configuration. The model and the device's Target are resolved here, once; what
    runs below takes plain values. `req.model` is a zoo id or a config.json path; to predict a
    `package.module:function` model, resolve it with allow_code=True and pass it as `model`."""
    _check_numbers(req)
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    device = ctx.device(req.device)  # the engine is chosen first: it decides which profiles the Target fits
    par = parallelism(req)
    cost = CostOptions(req.instance, req.site, req.pricing, req.utilization)
    if req.mode not in MODES:
        raise ConfigError(f"unknown mode '{req.mode}'; valid: {', '.join(MODES)}")
    req, dtype_note = on_device_request(req, device)
    engine, note = engine_for(req, model, device)
    _check_quantized_convolutions(req, model, device, engine)
    target = target_of(req, ctx, engine)
    if req.mode == "inference":
        p = predict_inference(target, model, par, req.batch, req.input_len, req.output_len, req.seq_len,
                              req.image_size, req.dtype, cost, engine)
    elif req.micro_batch is None and req.global_batch is not None:
        p = _auto_micro_batch(req, target, model, par, cost, engine)
    else:
        micro = req.micro_batch or (req.batch if isinstance(req.batch, int) else 1)
        p = predict_training(target, model, par, micro, req.global_batch, req.seq_len, req.image_size, req.dtype,
                             req.recompute, req.train_tokens, cost, engine, req.mixed_precision, req.optimizer)
    p = _context_note(model, _engine_note(_scaleout_note(req, p), note))
    vendor = vendor_note(device, engine)
    p = replace(p, notes=(*p.notes, vendor)) if vendor else p
    return replace(p, notes=(*p.notes, dtype_note)) if dtype_note else p


def vendor_note(device, engine: str) -> str | None:
    """The note of a device whose vendor no engine file lists (a user's own), predicted on plain PyTorch
    (engines.GENERIC_ENGINES); None otherwise."""
    if engine not in GENERIC_ENGINES or known_vendor(device.vendor):
        return None
    return (f"{device.vendor} is a vendor no engine file lists: {device.id} is assumed to run PyTorch {engine} through "
            f"{device.vendor}'s own PyTorch backend (out of tree, PyTorch's PrivateUse1 device key), every op its "
            "own kernel at eager's host cost per launch; other engines are refused on it")


def tier_note(tiers) -> str | None:
    """The note of a comparison whose devices are predicted on different tiers (measured, published,
    transferred, cross-library, datasheet): each tier has its own band; None when they share one."""
    found = sorted({t for t in tiers if isinstance(t, str) and t})
    if len(found) < 2:
        return None
    return (f"devices on different tiers ({', '.join(found)}): each time has its own tier's band; "
            "a difference inside the bands is not resolved")


def _check_quantized_convolutions(req: Request, model: Model, device, engine: str) -> None:
    """Refuse (one line) a recipe that quantizes convolutions (recipes.json `convolutions`) on eager PyTorch on a
    GPU: PyTorch has no INT8 or FP8 convolution there (its quantization backends are x86 and ARM CPUs; "(early
    prototype) support for NVidia GPU via TensorRT", pytorch.org/docs quantization.html); TensorRT runs them on
    NVIDIA GPUs, and no engine planner models does on other GPUs."""
    if engine != "eager" or device.kind != "gpu" or model.family == "decoder" or req.mode == "training":
        return
    p = precision(req.dtype or "bf16")
    if not p.convolutions:
        return
    import torch

    with torch.device("meta"):
        module = model.build()
    if not any(w.dim() > 2 for w in quantized_weights(module, p)):  # no convolution weight the recipe quantizes
        return
    valid = "--engine tensorrt" if (device.vendor or "").lower() == "nvidia" else "--dtype bf16 or fp16"
    raise ConfigError(f"eager PyTorch runs no {p.gemm.upper()} convolution on a GPU, so not {model.name} at {p.name} "
                      f"on {device.id}; valid: {valid}")


def on_device_request(req: Request, device) -> tuple[Request, str | None]:
    """`req` with its precision as `device` runs it (planner/workload/quant.py on_device: a recipe's BF16 parts in
    FP16 on a GPU without BF16; a recipe no kernel there runs is refused), and the note saying so or None."""
    dtype, note = on_device(req.dtype or "bf16", device.peak_flop_per_s, device.id)
    return (replace(req, dtype=dtype) if note else req), note


def _context_note(model: Model, p: Prediction) -> Prediction:
    """`p` with a note where its sequence (prompt + output, or a training sequence) is longer than the
    model's context window (graphs.context_note)."""
    m = p.metrics
    tokens = (m.get("input_len") or 0) + (m.get("output_len") or 0) if "output_len" in m else m.get("seq_len")
    what = "prompt + output" if "output_len" in m else "sequence"
    note = context_note(model, tokens, f"{tokens or 0:,} tokens ({what})", "predicted")
    return p if note is None else replace(p, notes=(*p.notes, note))


def _auto_micro_batch(req: Request, target, model: Model, par: Parallelism, cost: CostOptions,
                      engine: str = "eager") -> Prediction:
    """Training without --micro-batch: the largest micro-batch that divides the per-replica batch
    (global batch / dp) and fits in memory; the rest of the batch is gradient accumulation.

    Memory grows with the micro-batch (activations are linear in it), so the largest divisor that fits
    is found by bisection over the divisors: about log2(divisors) predictions. With pipeline stages
    the micro-batch also leaves at least pp micro-batches per step where it can (a pipeline with fewer
    micro-batches than stages is mostly bubble). When even 1 does not fit, the prediction at 1 is
    returned (it says by how much it does not fit)."""
    if req.global_batch % par.dp:
        raise ConfigError(f"--global-batch {req.global_batch} is not a multiple of dp = {par.dp}")
    per_replica = req.global_batch // par.dp
    divisors = sorted(d for d in _divisors(per_replica) if per_replica // d >= par.pp) or [1]

    def run(micro: int) -> Prediction:
        return predict_training(target, model, par, micro, req.global_batch, req.seq_len, req.image_size, req.dtype,
                                req.recompute, req.train_tokens, cost, engine, req.mixed_precision, req.optimizer)

    best = run(divisors[0])
    if not best.fits:
        return replace(best, notes=(*best.notes, "micro-batch 1 chosen: no micro-batch fits in memory"))
    lo, hi = 0, len(divisors) - 1  # divisors[lo] fits; find the largest index that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        trial = run(divisors[mid])
        if trial.fits:
            lo, best = mid, trial
        else:
            hi = mid - 1
    micro = divisors[lo]
    steps = per_replica // micro
    note = (f"micro-batch {micro} chosen (the largest that fits and divides the {per_replica:,} samples per replica); "
            f"{steps} accumulation step{'s' if steps != 1 else ''} per optimizer step; set --micro-batch to override")
    return replace(best, notes=(*best.notes, note))


def _divisors(n: int) -> list[int]:
    """Divisors of n in increasing order (trial division up to sqrt(n); n <= 2^53)."""
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def _check_numbers(req: Request) -> None:
    """Raise ConfigError for a float field that is not finite or out of its range."""
    utilization = finite(req.utilization, "--utilization")
    if not MIN_UTILIZATION <= utilization <= 1:
        raise ConfigError(f"--utilization must be in [{MIN_UTILIZATION:g}, 1] (share of hours doing useful work), "
                          f"got {utilization:g}")
    finite(req.overlap, "--overlap")
    from planner.workload.graphs import LIMITS
    # a prompt and its output become the prefill's sequence and the decode's context: name the flag given
    for flag, value in (("--input-len", req.input_len), ("--output-len", req.output_len)):
        if isinstance(value, int) and value > LIMITS["seq_len"]:
            raise ConfigError(f"{flag} {value:,} is above the limit of {LIMITS['seq_len']:,} tokens")
    if req.train_tokens is not None:
        tokens = finite(req.train_tokens, "--train-tokens")
        if not 0 < tokens <= MAX_TRAIN_TOKENS:
            raise ConfigError(f"--train-tokens must be in (0, {MAX_TRAIN_TOKENS:.0e}], got {req.train_tokens}")


_ROW_KEYS = frozenset(Request.__dataclass_fields__) | frozenset(PRECISION_KEYS) | {"id"}
_INT_KEYS = frozenset({"gpus", "tp", "pp", "dp", "ep", "zero", "input_len", "output_len", "seq_len", "image_size",
                       "global_batch", "micro_batch", "microbatches"})
_FLOAT_KEYS = frozenset({"utilization", "overlap", "train_tokens", "scaleout_gbps", "power_limit_w"})


def request_from_row(row: dict) -> Request:
    """A Request from a --configs row (keys are flag names with underscores; 'id' is ignored; quant,
    weights, activations and kv_cache compose the precision into `dtype`, as the flags do)."""
    unknown = sorted(set(row) - _ROW_KEYS)
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)}; valid keys: id, "
                          f"{', '.join(sorted(_ROW_KEYS - {'id'}))}")
    missing = [k for k in ("model", "device") if not row.get(k)]
    if missing:
        raise ConfigError(f"missing key(s) {', '.join(missing)}")
    values = {}
    ints, floats = _INT_KEYS, _FLOAT_KEYS
    parts = {}
    for key, value in row.items():
        if key == "id" or value is None or value == "":
            continue
        try:
            if key in PRECISION_KEYS:
                parts[key] = str(value)
            elif key in ints:
                values[key] = _int(value, key)
            elif key in floats:
                values[key] = finite(value, f"key '{key}'")
            elif key == "batch":
                values[key] = "auto" if str(value) == "auto" else _int(value, key)
            else:
                values[key] = str(value)
        except (ValueError, OverflowError):
            raise ConfigError(f"key '{key}': expected a number, got {value!r}") from None
    if parts:
        values["dtype"] = compose(values.get("dtype"), **parts)
    return Request(**values)


def _int(value, key: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(key)
    # every count is at least 1 (a 0 would silently mean "the default" further down), but a ZeRO stage
    least = 0 if key == "zero" else 1
    if value < least:
        raise ConfigError(f"key '{key}': expected a whole number of at least {least}, got {value}")
    return value


def compare(model: str | Model, devices: list[str] | None = None, mode: str = "inference", batch: int | str = 1,
            input_len: int | None = None, output_len: int = 256, seq_len: int | None = None,
            image_size: int | None = None, dtype: str = "bf16", pricing: str = "on_demand",
            sort: str = "cost", ctx: Context | None = None, gpus: int | None = None, **training) -> pd.DataFrame:
    """One row per device: the smallest tensor-parallel group (within a node) that fits, priced on the
    cheapest catalog instance. Devices that cannot run the workload get a row with the reason. `gpus`: the
    devices of each configuration (as predict's --gpus: tp x dp, the group a divisor of it) instead of one
    group replicated to fill its instance."""
    ctx = ctx or default_context()
    resolved = model if isinstance(model, Model) else resolve(model)
    if sort not in SORT_KEYS:
        raise ConfigError(f"--sort must be one of {', '.join(SORT_KEYS)}, got {sort!r}")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_GPUS):
        raise ConfigError(f"--gpus must be a whole number from 1 to {MAX_GPUS:,}, got {gpus!r}")
    if training.get("engine") is not None:
        get_engine(training["engine"])  # an unknown name fails once, not on every row
    ids = [ctx.device(d).id for d in devices] if devices else sorted(ctx.catalog.devices)
    rows = []
    for device_id in ids:
        device = ctx.device(device_id)
        rows.append(_best_row(ctx, resolved, device, mode, batch, input_len, output_len, seq_len, image_size,
                              dtype, pricing, training, gpus))
    mixed = tier_note(r.get("tier") for r in rows)
    if mixed:
        rows = [{**r, "note": f"{r['note']}; {mixed}" if r.get("note") else mixed} if r.get("tier") else r
                for r in rows]
    column, ascending = SORT_KEYS[sort]
    return pd.DataFrame(_sorted_rows(rows, column, ascending), columns=COMPARE_COLUMNS)


def _sorted_rows(rows: list[dict], column: str, ascending: bool) -> list[dict]:
    """`rows` with those that fit first, then by `column` (missing values last), ties in their order: what
    DataFrame.sort_values(["fits", column], na_position="last") gave, without building and sorting a
    frame first (the cached compare of benchmarks/predict_speed.py: 0.058 -> 0.044 s on a 2-core machine)."""
    def key(row: dict):
        value = row.get(column)
        missing = value is None or value != value  # None or NaN
        return (not row.get("fits"), missing, 0.0 if missing else (value if ascending else -value))
    return sorted(rows, key=key)


def tp_candidates(ctx: Context, model: Model, device) -> list[int]:
    """Tensor-parallel sizes of `model` on `device`: powers of two up to 16 within one node (the scale-up
    domain) that divide the query heads and divide, or are divided by, the KV heads; [1] for a model
    that is not a decoder."""
    if model.family != "decoder":
        return [1]
    limit = max(1, ctx.node_size(device))
    heads = model.config.num_heads
    return [t for t in (1, 2, 4, 8, 16) if t <= limit and heads % t == 0
            and (model.config.num_kv_heads % t == 0 or t % model.config.num_kv_heads == 0)]


def tp_that_fits(req: Request, ctx: Context | None = None, model: Model | None = None) -> int | None:
    """For a request whose memory does not fit: the smallest tensor-parallel degree above `req.tp` that fits
    on the same devices (a tp_candidates size for the model and device, dividing --gpus by tp x pp where
    --gpus is given; dp follows), or None when none does."""
    ctx = ctx or default_context()
    model = model or resolve(req.model)
    device = ctx.device(req.device)
    for tp in tp_candidates(ctx, model, device):
        if tp <= req.tp or (req.gpus is not None and req.gpus % (tp * req.pp)):
            continue
        wider = replace(req, tp=tp, dp=None) if req.gpus is not None else replace(req, tp=tp)
        fits = _fits(wider, ctx, model)
        if fits is None:  # not worked out from the graph alone: predict it
            try:
                fits = predict(wider, ctx, model).fits
            except PlannerError:
                fits = False
        if fits:
            return tp
    return None


def _best_row(ctx, model, device, mode, batch, input_len, output_len, seq_len, image_size, dtype, pricing, training,
              gpus=None):
    """The smallest tensor-parallel group that fits, replicated to fill the cheapest instance that holds
    one group (so that no rented device sits idle); with `gpus`, the smallest group dividing it that fits,
    on `gpus` devices."""
    from planner.predict.cost import cheapest_instance

    base = {"device": device.id, "vendor": device.vendor, "gpus": None, "tp": None, "dp": None, "fits": False,
            "tier": None}
    last_error = None
    prediction = None
    candidates = [t for t in tp_candidates(ctx, model, device) if gpus is None or gpus % t == 0]
    # the groups tried so far, in order, with their predictions (None: skipped, as its memory does not fit
    # and a wider group follows; its prediction would be discarded)
    tried: list[tuple[Request, Prediction | None]] = []
    for tp in candidates:
        req = Request(model.name, device.id, mode, gpus=gpus or tp, tp=tp, batch=batch, input_len=input_len,
                      output_len=output_len, seq_len=seq_len, image_size=image_size, dtype=dtype, pricing=pricing,
                      **training)
        if tp != candidates[-1] and _fits(req, ctx, model) is False:
            tried.append((req, None))
            continue
        try:
            prediction = predict(req, ctx, model)
            tried.append((req, prediction))
        except PlannerError as exc:
            last_error = str(exc)
            prediction, last_error = _in_turn(tried, ctx, model, last_error)
            break
        if prediction.fits and gpus is not None:  # the devices asked for: nothing to fill
            break
        if prediction.fits:
            instance = cheapest_instance(ctx.catalog, device, pricing, tp, tp)
            if instance is not None and instance.device_count >= 2 * tp:
                filled = replace(req, gpus=instance.device_count // tp * tp, instance=instance.key)
                try:
                    prediction = predict(filled, ctx, model)
                except PlannerError as exc:
                    # replicas that cannot be timed (no sourced link): report one group, and why
                    prediction = replace(prediction, notes=prediction.notes + (
                        f"not filled to {filled.gpus} devices of {instance.key}: {exc}",))
            break
    if prediction is None:
        return {**base, "note": last_error}
    return {**base, **summary_row(prediction)}


def _in_turn(tried: list, ctx: Context, model: Model, error: str) -> tuple[Prediction | None, str]:
    """(prediction, error) of `_best_row` had it predicted each group in `tried` in turn before the one that
    raised `error`: the last prediction before the first error met, the skipped groups predicted now."""
    prediction = None
    for req, done in tried:
        if done is None:
            try:
                done = predict(req, ctx, model)
            except PlannerError as first:
                return prediction, str(first)
        prediction = done
    return prediction, error


def _fits(req: Request, ctx: Context, model: Model) -> bool | None:
    """Whether `req`'s memory fits its devices, from its graph without timing it: False lets `compare` skip a
    group whose prediction it would discard (132 of the 506 predictions of benchmarks/predict_speed.py's cold
    `compare`: Llama-2-7B on every device at batches up to 512). LLM serving at a fixed batch only; None where it is not worked out, or the request
    raises (its prediction then raises the same)."""
    if req.mode != "inference" or model.family != "decoder" or not isinstance(req.batch, int):
        return None
    try:
        _check_numbers(req)
        device = ctx.device(req.device)
        req, _ = on_device_request(req, device)
        engine, _ = engine_for(req, model, device)
        return llm_fits(target_of(req, ctx, engine), model, parallelism(req), req.batch, req.input_len or req.seq_len,
                        req.output_len, req.dtype, engine)
    except PlannerError:
        return None


def summary_row(p: Prediction) -> dict:
    """The compare-table row of a prediction: unit-neutral columns for sorting across modes."""
    m = p.metrics
    throughput = (m.get("throughput_tokens_per_s") or m.get("throughput_samples_per_s") or m.get("tokens_per_s")
                  or m.get("samples_per_s"))
    latency = m.get("latency_s") or m.get("step_time_s")
    per_unit = m.get("usd_per_million_output_tokens") or m.get("usd_per_thousand_samples")
    if per_unit is None and p.cost is not None and throughput:
        per_unit = p.cost.usd_per_h / (throughput * 3600) * 1e6
    j_per_unit = m.get("j_per_output_token") or m.get("j_per_sample")
    if j_per_unit is None and throughput:
        j_per_unit = p.energy_j / (m.get("tokens_per_s", throughput) * m.get("step_time_s", 1.0))
    return {"gpus": p.gpus, "tp": p.parallelism.tp, "dp": p.parallelism.dp, "engine": p.engine, "fits": p.fits,
            "tier": p.tier, "profile": p.profile, "batch": m.get("batch", m.get("micro_batch")),  # training: the micro-batch
            "ttft_s": m.get("ttft_s"), "tpot_s": m.get("tpot_s"), "latency_s": latency, "throughput": throughput,
            "band_fraction": p.band_fraction, "usd_per_h": p.cost.usd_per_h if p.cost else math.nan,
            "usd_per_unit": per_unit if per_unit is not None else math.nan, "j_per_unit": j_per_unit,
            "memory_gb_per_gpu": p.memory.total_bytes / 1e9, "instance": p.cost.what if p.cost else None,
            "price_date": p.cost.price_date if p.cost else None,
            "price_stale": p.cost.stale() if p.cost else None,
            "note": "; ".join(n for n in p.notes if not n.startswith("engine ")) or None}


def op_rows(req: Request, ctx: Context | None = None, model: Model | None = None) -> dict[str, list]:
    """The distinct ops of a request's graphs with predicted times on its device: {"prefill": rows,
    "decode": rows} for LLM serving (decode at the input length), {"forward": rows} or {"step": rows}."""
    from planner.predict.inference import prompt_len
    from planner.predict.timing import op_rows as rows_of
    from planner.workload.device_graph import device_graph
    from planner.workload.graphs import Workload

    ctx = ctx or default_context()
    model = model or resolve(req.model)
    par = parallelism(req)
    batch = req.batch if isinstance(req.batch, int) else 1
    device = ctx.device(req.device)
    req, _ = on_device_request(req, device)
    engine = engine_for(req, model, device)[0]
    target = target_of(req, ctx, engine)
    graphs = {}
    if req.mode == "training":
        graphs["step"] = Workload("training", req.micro_batch or batch, req.seq_len, image_size=req.image_size,
                                  dtype=req.dtype, engine=engine, mixed_precision=req.mixed_precision,
                                  optimizer=req.optimizer)
    elif model.family == "decoder":
        prompt = prompt_len(model, req.input_len or req.seq_len, req.output_len, req.dtype)
        graphs["prefill"] = Workload("prefill", batch, prompt, dtype=req.dtype, engine=engine)
        graphs["decode"] = Workload("decode", batch, context_len=prompt, dtype=req.dtype, engine=engine)
    else:
        graphs["forward"] = Workload("forward", batch, req.seq_len, image_size=req.image_size, dtype=req.dtype, engine=engine)
    return {name: rows_of(device_graph(model, w, par), target.device, target.efficiency, target.power)
            for name, w in graphs.items()}
