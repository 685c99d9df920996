"""The op graph of a model's workload: inference prefill, a decode step with its KV cache, a forward
pass of a non-generative model, or a training step (forward, backward, AdamW update).

Everything runs on the meta device: building a 405B model allocates no weights.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from planner.errors import ConfigError, UnsupportedError
from planner.workload.capture import Capture, OpGraph, capture
from planner.workload.engines import check_engine, get_engine
from planner.workload.quant import precision, quantized_weights
from planner.workload.zoo import Model

MODES = ("inference", "prefill", "decode", "forward", "training")
_DEFAULT_TOKENS = {"decoder": 2048, "encoder": 128}

# Bounds on every size that drives work, checked before anything is built. They are far above any
# real deployment (a 10M-token context, a 4k-image batch) and keep every tensor's element count
# below 2**63 (tokens x vocabulary of the LM head: 2**32 x 2**22 = 2**54).
LIMITS = {"batch": 2**20, "seq_len": 2**24, "context_len": 2**24, "image_size": 8192}
MAX_TOKENS_PER_STEP = 2**32
"""batch x (sequence or context + 1) tokens in one step."""


@dataclass(frozen=True, slots=True)
class Workload:
    """What to run: mode and sizes. None means the model family's default."""

    mode: str = "inference"
    """"prefill", "decode", "forward", "training", or "inference" (prefill for LMs, forward otherwise)."""
    batch: int = 1
    """Sequences or images per step (the micro-batch in training)."""
    seq_len: int | None = None
    """Prompt length (prefill), sequence length (encoders, training)."""
    context_len: int | None = None
    """Decode: tokens already in the KV cache; the step adds one."""
    image_size: int | None = None
    """Vision: image side in pixels."""
    dtype: str = "bf16"
    """Precision: a dtype name (planner.workload.dtypes) or a quantization recipe or composition
    (planner.workload.quant: "w4a16", "weights=int4,kv=fp8")."""
    engine: str = "eager"
    """Execution engine (hardware_specs/engines): which fusions and CUDA graphs apply. The capture is
    the same for every engine; planner/workload/lowering.py rewrites it into the engine's kernels."""


@dataclass(frozen=True, slots=True)
class WorkloadGraph:
    """A captured workload."""

    model: Model
    workload: Workload
    """The workload with every default filled in."""
    graph: OpGraph
    params: int
    """Parameters of the model (tied weights once)."""
    active_params: int
    """Parameters one token uses (MoE: only the experts it is routed to)."""
    param_by_top: dict[str, int]
    """Parameters per top-level child module ("" for the root's own), tied weights once."""


def _positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{name} must be a positive integer, got {_short(value)}")
    if value is not None and value > LIMITS[name]:
        raise ConfigError(f"{name} {value:,} is above the limit of {LIMITS[name]:,}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def resolve_workload(model: Model, w: Workload) -> Workload:
    """Return `w` with the mode made concrete and defaults filled; raise on impossible sizes."""
    precision(w.dtype)
    if w.mode not in MODES:
        raise ConfigError(f"unknown mode '{w.mode}'; valid modes: {', '.join(MODES)}")
    check_engine(get_engine(w.engine), model.family, w.mode)
    for name in ("batch", "seq_len", "context_len", "image_size"):
        _positive(name, getattr(w, name))
    mode = w.mode
    if mode == "inference":
        mode = "prefill" if model.family == "decoder" else "forward"
    if model.family == "decoder" and mode == "forward":
        mode = "prefill"
    if model.family != "decoder" and mode in ("prefill", "decode"):
        raise UnsupportedError(f"mode '{mode}' needs a generative decoder; {model.name} is a {model.family} "
                               "model: use --mode inference or training")
    cfg = model.config
    seq, ctx, image = w.seq_len, w.context_len, w.image_size
    if model.family in _DEFAULT_TOKENS:
        limit = cfg.max_position_embeddings
        seq = seq or min(_DEFAULT_TOKENS[model.family], limit)
        if mode == "decode":
            ctx = ctx or min(_DEFAULT_TOKENS["decoder"], limit - 1)
        used = (ctx + 1) if mode == "decode" else seq
        # a learned position table is a hard limit; rotary positions extrapolate (at a quality cost)
        learned = model.family == "encoder" or cfg.position == "learned"
        if learned and used > limit:
            raise ConfigError(f"{model.name} has {limit} positions; this workload needs {used}")
    if model.family == "vision":
        image = image or cfg.image_size
        if hasattr(cfg, "patch_size") and image != cfg.image_size:
            raise ConfigError(f"{model.name} was built for {cfg.image_size}-pixel images (its position table is "
                              f"fixed); got image_size {image}")
        if image < 32:
            raise ConfigError(f"image_size must be at least 32 pixels, got {image}")
    tokens = w.batch * max(seq or 1, (ctx or 0) + 1)
    if tokens > MAX_TOKENS_PER_STEP:
        raise ConfigError(f"batch x tokens = {tokens:,} in one step is above the limit of {MAX_TOKENS_PER_STEP:,}")
    return replace(w, mode=mode, seq_len=seq if model.family in _DEFAULT_TOKENS else None,
                   context_len=ctx if mode == "decode" else None,
                   image_size=image if model.family == "vision" else None)


def _adamw_states(module: torch.nn.Module):
    """Optimizer state on meta, grouped by the top-level child owning each parameter.

    Returns [(owner, params, master or None, m, v, steps)]: fp32 moments, and fp32 master weights
    unless the weights already are fp32 (mixed precision keeps both).
    """
    groups = []
    seen: set[int] = set()
    owners = list(module.named_children()) or [("", module)]
    if next(module.parameters(recurse=False), None) is not None:
        owners.append(("", module))
    for owner, child in owners:
        children = child.named_children() if owner == "layers" else [(None, child)]
        for index, sub in children:
            params = [p for p in (sub.parameters() if owner else module.parameters(recurse=False)) if id(p) not in seen]
            seen.update(id(p) for p in params)
            if not params:
                continue
            mixed = params[0].dtype != torch.float32
            f32 = lambda: [torch.empty(p.shape, dtype=torch.float32, device="meta") for p in params]
            groups.append((owner if index is None else f"{owner}.{index}", params, f32() if mixed else None, f32(),
                           f32(), [torch.empty((), dtype=torch.float32, device="meta") for _ in params]))
    return groups


def _adamw_step(cap: Capture, groups) -> None:
    # Mixed precision (as Megatron and FSDP do it): grads are cast to fp32, the fused AdamW kernel
    # updates the fp32 master weights and moments, and the low-precision weights are copied back.
    # One fused call per layer (multi-tensor kernels run over parameter chunks).
    for owner, params, master, m, v, steps in groups:
        live = [i for i, p in enumerate(params) if p.grad is not None]
        if not live:
            continue
        with cap.module(owner):
            weights = [(master if master is not None else [p.data for p in params])[i] for i in live]
            grads = [params[i].grad if master is None else params[i].grad.float() for i in live]
            torch._fused_adamw_(weights, grads, [m[i] for i in live], [v[i] for i in live], [],
                                [steps[i] for i in live], lr=1e-4, beta1=0.9, beta2=0.95, weight_decay=0.1,
                                eps=1e-8, amsgrad=False, maximize=False)
            if master is not None:
                for i, w in zip(live, weights):
                    params[i].data.copy_(w)


def _loss(model: Model, out, labels: torch.Tensor | None) -> torch.Tensor:
    if model.family == "decoder":
        # next-token loss over every position, in fp32 as training code computes it
        return F.cross_entropy(out.float().flatten(0, 1), labels.flatten())
    if model.family == "vision":
        return F.cross_entropy(out.float(), labels)
    # encoders and custom models: a regression objective on every floating output, so that every
    # parameter that feeds an output gets a gradient
    outs = out if isinstance(out, (tuple, list)) else (out,)
    floats = [o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point()]
    if not floats:
        raise UnsupportedError(f"{model.name}: training needs a floating-point output to build a loss from")
    return sum(o.float().pow(2).mean() for o in floats)


def build_inputs(model: Model, workload: Workload, device: str = "meta"):
    """Build the module and its inputs for a resolved workload, on meta unless told otherwise.

    Returns (module, args, kwargs, labels): the module in the workload's capture dtype and in
    train or eval mode; labels is None except for training decoders and vision models. On a real
    device, weights and inputs are random and token ids are valid.
    """
    w = workload
    dt = precision(w.dtype)
    with torch.device(device):
        if model.factory is not None:
            module, inputs = model.factory()
        else:
            module, inputs = model.build(), ()
    module = module.to(device=device, dtype=dt.capture)
    module.train(w.mode == "training")
    b, meta = w.batch, device
    vocab = getattr(model.config, "vocab_size", 2)

    def ids(shape: tuple[int, ...], high: int = vocab) -> torch.Tensor:
        if device == "meta":
            return torch.empty(shape, dtype=torch.long, device=device)
        return torch.randint(0, high, shape, device=device)

    def floats(shape: tuple[int, ...]) -> torch.Tensor:
        return torch.empty(shape, dtype=dt.capture, device=device) if device == "meta" else torch.randn(shape, dtype=dt.capture, device=device)

    labels = None
    kwargs: dict = {}
    if model.family == "custom":
        args = tuple(x.to(meta) if isinstance(x, torch.Tensor) else x for x in inputs)
    elif model.family == "vision":
        args = (floats((b, 3, w.image_size, w.image_size)),)
        labels = ids((b,), model.config.num_labels)
    elif model.family == "encoder":
        args = (ids((b, w.seq_len)),)
    elif w.mode == "decode":
        # the cache holds the context and the new token: K, V [B, Hkv, C + 1, D] per layer
        args = (ids((b, 1)),)
        kwargs = dict(kv_cache=module.new_kv_cache(b, w.context_len + 1, dt.capture, meta),
                      position=w.context_len, all_logits=False)
    elif w.mode == "prefill":
        # prefill writes the prompt's keys and values into the cache and keeps the last logits
        args = (ids((b, w.seq_len)),)
        kwargs = dict(kv_cache=module.new_kv_cache(b, w.seq_len, dt.capture, meta), position=0, all_logits=False)
    else:  # decoder training: logits at every position
        args = (ids((b, w.seq_len)),)
        labels = ids((b, w.seq_len))
    return module, args, kwargs, labels


def build_graph(model: Model, workload: Workload) -> WorkloadGraph:
    """Capture the op graph of `workload` on `model` (meta tensors: nothing is allocated)."""
    w = resolve_workload(model, workload)
    dt = precision(w.dtype)
    module, args, kwargs, labels = build_inputs(model, w)
    training = w.mode == "training"
    params = list(module.parameters())
    total = sum(p.numel() for p in params)
    active = total
    if model.family == "decoder" and model.config.num_experts:
        expert = sum(p.numel() for p in module.layers[0].mlp.experts[0].parameters())
        active = total - model.config.num_layers * (model.config.num_experts - model.config.experts_per_token) * expert
    states = _adamw_states(module) if training else None

    def run(cap: Capture) -> None:
        if not training:
            with torch.no_grad():
                module(*args, **kwargs)
            return
        _loss(model, module(*args, **kwargs), labels).backward()
        with cap.phase("optimizer"):
            _adamw_step(cap, states)

    try:
        kv = tuple(t for pair in kwargs.get("kv_cache") or () for t in pair)  # KV-cache role (quant.py)
        graph = capture(run, dt.capture, dt.bits, dt.name, parameters=tuple(params), precision=dt,
                        weights=quantized_weights(module, dt), kv_cache=kv)
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
        raise UnsupportedError(f"{model.name}: the {w.mode} workload failed on meta tensors: {exc}") from None
    by_top: dict[str, int] = {}
    seen: set[int] = set()
    for top, child in list(module.named_children()) + [("", None)]:
        owned = child.parameters() if child is not None else module.parameters(recurse=False)
        for p in owned:
            if id(p) not in seen:
                seen.add(id(p))
                by_top[top] = by_top.get(top, 0) + p.numel()
    return WorkloadGraph(model=model, workload=w, graph=graph, params=total, active_params=active, param_by_top=by_top)
