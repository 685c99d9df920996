"""The op graph of a model's workload: inference prefill, a decode step with its KV cache, a forward
pass of a non-generative model, or a training step (forward, backward, AdamW update).

Everything runs on the meta device: building a 405B model allocates no weights.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import lru_cache

import torch
import torch.nn.functional as F

from planner.errors import ConfigError, UnsupportedError
from planner.memo import IdentityMemo
from planner.workload.capture import Capture, OpGraph, capture
from planner.workload.engines import check_engine, get_engine
from planner.workload.quant import precision, quantized_weights
from planner.workload.user_model import check_batch
from planner.workload.zoo import Model

MODES = ("inference", "prefill", "decode", "forward", "training")
_DEFAULT_TOKENS = {"decoder": 2048, "encoder": 128}

# Bounds on every size that drives work, checked before anything is built. They are far above any
# real deployment (a 10M-token context, a 4k-image batch) and keep every tensor's element count
# below 2**63 (tokens x vocabulary of the LM head: 2**32 x 2**22 = 2**54).
LIMITS = {"batch": 2**20, "seq_len": 2**24, "context_len": 2**24, "image_size": 8192, "steps": 10000}
MAX_TOKENS_PER_STEP = 2**32
"""batch x (sequence or context + 1) tokens in one step."""


@dataclass(frozen=True, slots=True)
class Workload:
    """What to run: mode and sizes. None means the model family's default."""

    mode: str = "inference"
    """"prefill", "decode", "forward", "training", or "inference" (prefill for LMs, forward otherwise)."""
    batch: int = 1
    """Sequences or images per step (the micro-batch in training); a user's model: dim 0 of its example
    inputs scaled to this (planner/workload/user_model.py)."""
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
    mixed_precision: str = "auto"
    """Training at a 16-bit dtype (MIXED_PRECISION): "amp", "master" or "pure"; "auto" takes the
    engine's (hardware_specs/engines: eager and torch.compile amp, Megatron master); "none" otherwise."""
    optimizer: str = "auto"
    """Training: the AdamW implementation (OPTIMIZERS); "auto" takes the engine's (eager and
    torch.compile foreach, PyTorch's default on CUDA; Megatron fused); "none" outside training."""
    steps: int | None = None
    """Diffusion pipelines: denoising steps of one image (the model's default when None)."""


MIXED_PRECISION = {
    "amp": "torch.autocast over fp32 weights: each weight cast to the 16-bit dtype once per forward and its "
           "gradient cast back, norms, softmax and the loss in fp32, fp32 gradients and AdamW moments, no master copy "
           "(PyTorch's automatic mixed precision)",
    "master": "16-bit weights and gradients, an fp32 master copy of the weights and fp32 moments in the optimizer, "
              "the updated master cast back each step (Megatron-LM --bf16, FSDP MixedPrecision)",
    "pure": "everything at the 16-bit dtype: weights, gradients and AdamW moments (model.to(bfloat16))"}
"""How a training step at a 16-bit dtype keeps its weights, gradients and optimizer state."""


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
    layer_params: tuple[int, ...] = ()
    """Parameters of each block of `layers` (decoders), in order."""


def _positive(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{name} must be a positive integer, got {_short(value)}")
    if value is not None and value > LIMITS[name]:
        raise ConfigError(f"{name} {value:,} is above the limit of {LIMITS[name]:,}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@lru_cache(maxsize=4096)
def context_note(model: Model, tokens: int | None, what: str, verb: str) -> str | None:
    """A note where a decoder is asked for more `tokens` than its context window (max_position_embeddings)
    holds: "<what> exceed <model>'s context window of <limit> (...): <verb> as if it ran them"; else None.
    The workload is still run as asked: a user may extend the window (RoPE scaling)."""
    limit = getattr(model.config, "max_position_embeddings", None) if model.family == "decoder" else None
    if not limit or not tokens or tokens <= limit:
        return None
    return (f"{what} exceed {model.name}'s context window of {limit:,} (max_position_embeddings): "
            f"{verb} as if it ran them")


def resolve_workload(model: Model, w: Workload) -> Workload:
    """Return `w` with the mode made concrete and defaults filled; raise on impossible sizes. Cached by the
    model's identity, the workload and the engines folder (a raise is not cached): every prediction
    resolves its workloads."""
    return _RESOLVED.get((model,), (w, os.environ.get("PLANNER_HARDWARE_SPECS")), lambda: _resolve_workload(model, w))


_RESOLVED = IdentityMemo()


def _resolve_workload(model: Model, w: Workload) -> Workload:
    precision(w.dtype)
    if w.mode not in MODES:
        raise ConfigError(f"unknown mode '{w.mode}'; valid modes: {', '.join(MODES)}")
    check_engine(get_engine(w.engine), model.family, w.mode)
    for name in ("batch", "seq_len", "context_len", "image_size", "steps"):
        _positive(name, getattr(w, name))
    check_batch(model, w.batch)  # a user's model whose batch dimension cannot be found runs only batch 1
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
    library = hasattr(cfg, "sizes")  # a library-built model (planner_models.library) sets its own sizes
    if library:
        try:
            sizes = cfg.sizes(replace(w, mode=mode))
        except ValueError as exc:
            raise ConfigError(f"{model.name}: {exc}") from None
        seq, image = sizes.get("seq_len"), sizes.get("image_size")
    elif model.family == "vision":
        image = image or cfg.image_size
        if hasattr(cfg, "patch_size") and image != cfg.image_size:
            raise ConfigError(f"{model.name} was built for {cfg.image_size}-pixel images (its position table is "
                              f"fixed); got image_size {image}")
        if image < 32:
            raise ConfigError(f"image_size must be at least 32 pixels, got {image}")
    mixed = w.mixed_precision
    if mixed not in ("auto", "none", *MIXED_PRECISION):
        raise ConfigError(f"--mixed-precision must be one of auto, {', '.join(MIXED_PRECISION)}; got {_short(mixed)}")
    dt = precision(w.dtype)
    if mode != "training" or dt.bits >= 32:
        mixed = "none"
    elif not dt.plain or dt.bits != 16:
        mixed = "master"  # a quantization recipe or an 8-bit dtype: fp32 master weights (autocast is 16-bit)
    elif mixed == "auto":
        mixed = get_engine(w.engine).mixed_precision or "master"
    optimizer = w.optimizer
    if optimizer not in ("auto", "none", *OPTIMIZERS):
        raise ConfigError(f"--optimizer must be one of auto, {', '.join(OPTIMIZERS)}; got {_short(optimizer)}")
    if mode != "training":
        optimizer = "none"
    elif optimizer == "auto":
        optimizer = get_engine(w.engine).optimizer or "fused"
    tokens = w.batch * max(seq or 1, (ctx or 0) + 1)
    if tokens > MAX_TOKENS_PER_STEP:
        raise ConfigError(f"batch x tokens = {tokens:,} in one step is above the limit of {MAX_TOKENS_PER_STEP:,}")
    return replace(w, mode=mode, seq_len=seq if model.family in _DEFAULT_TOKENS or library else None,
                   context_len=ctx if mode == "decode" else None,
                   image_size=image if model.family == "vision" or library else None, mixed_precision=mixed,
                   optimizer=optimizer, steps=sizes.get("steps") if library else None)


def _adamw_states(module: torch.nn.Module, mixed: str = "master"):
    """Optimizer state on meta, grouped by the top-level child owning each parameter.

    Returns [(owner, params, master or None, m, v, steps)]: fp32 moments, and fp32 master weights
    unless the weights already are fp32 (mixed precision "master" keeps both); under "pure" the
    moments are at the weights' dtype and there is no master.
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
            low = params[0].dtype != torch.float32
            state = params[0].dtype if mixed == "pure" else torch.float32
            f32 = lambda: [torch.empty(p.shape, dtype=torch.float32, device="meta") for p in params]
            moment = lambda: [torch.empty(p.shape, dtype=state, device="meta") for p in params]
            groups.append((owner if index is None else f"{owner}.{index}", params,
                           f32() if low and mixed != "pure" else None, moment(),
                           moment(), [torch.empty((), dtype=torch.float32, device="meta") for _ in params]))
    return groups


OPTIMIZERS = {
    "fused": "torch.optim.AdamW(fused=True): one kernel per parameter chunk reads the weight, gradient and "
             "both moments once and writes the weight and moments (Megatron's and Transformer Engine's fused Adam)",
    "foreach": "torch.optim.AdamW's default on CUDA: multi-tensor kernels, one pass per step of the update "
               "(weight decay, the two moments, the square root, its scale and epsilon, the update): about 3x "
               "the fused kernel's traffic",
    "loop": "torch.optim.AdamW(foreach=False): the same update one parameter at a time, 7 kernels each"}
"""AdamW implementations (pytorch.org/docs/stable/generated/torch.optim.AdamW.html: "we will try to use
foreach over the for-loop implementation on CUDA"; fused is opt-in)."""
_ADAMW = dict(lr=1e-4, beta1=0.9, beta2=0.95, weight_decay=0.1, eps=1e-8)


def _adamw_update(weights, grads, m, v, steps, optimizer: str) -> None:
    """One AdamW update of lists of tensors, as `optimizer` runs it (torch.optim's _multi_tensor_adamw and
    _single_tensor_adamw: decoupled weight decay, lerp for the first moment, addcmul for the second)."""
    h = _ADAMW
    if optimizer == "fused":
        torch._fused_adamw_(weights, grads, m, v, [], steps, lr=h["lr"], beta1=h["beta1"], beta2=h["beta2"],
                            weight_decay=h["weight_decay"], eps=h["eps"], amsgrad=False, maximize=False)
        return
    step_size, bc2_sqrt = h["lr"] / (1 - h["beta1"]), (1 - h["beta2"]) ** 0.5  # first step's corrections
    if optimizer == "foreach":
        torch._foreach_mul_(weights, 1 - h["lr"] * h["weight_decay"])
        torch._foreach_lerp_(m, grads, 1 - h["beta1"])
        torch._foreach_mul_(v, h["beta2"])
        torch._foreach_addcmul_(v, grads, grads, 1 - h["beta2"])
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, bc2_sqrt)
        torch._foreach_add_(denom, h["eps"])
        torch._foreach_addcdiv_(weights, m, denom, -step_size)
        return
    for w, g, m_, v_ in zip(weights, grads, m, v):  # loop: each parameter's kernels in turn
        w.mul_(1 - h["lr"] * h["weight_decay"])
        m_.lerp_(g, 1 - h["beta1"])
        v_.mul_(h["beta2"]).addcmul_(g, g, value=1 - h["beta2"])
        denom = (v_.sqrt() / bc2_sqrt).add_(h["eps"])
        w.addcdiv_(m_, denom, value=-step_size)


def _adamw_step(cap: Capture, groups, optimizer: str = "fused") -> None:
    # Mixed precision "master" (as Megatron and FSDP do it): grads are cast to fp32, AdamW updates the
    # fp32 master weights and moments, and the low-precision weights are copied back. One call per
    # layer (multi-tensor kernels run over parameter chunks).
    for owner, params, master, m, v, steps in groups:
        live = [i for i, p in enumerate(params) if p.grad is not None]
        if not live:
            continue
        with cap.module(owner):
            data = master if master is not None else [p.data for p in params]
            weights = [data[i] for i in live]
            grads = [params[i].grad if master is None else params[i].grad.float() for i in live]
            _adamw_update(weights, grads, [m[i] for i in live], [v[i] for i in live], [steps[i] for i in live],
                          optimizer)
            if master is not None:
                for i, w in zip(live, weights):
                    params[i].data.copy_(w)


LOSS_PACKETS = frozenset({"aten._log_softmax", "aten._log_softmax_backward_data", "aten.mse_loss",
                          "aten.mse_loss_backward", "aten.binary_cross_entropy_with_logits",
                          "aten.binary_cross_entropy_with_logits_backward"})
"""Ops a training objective decomposes into besides those counted in category "loss" (cross_entropy is
log_softmax + nll_loss; mse_loss and BCE-with-logits are elementwise kernels)."""


def loss_text(model: Model) -> str:
    """What objective a training step of `model` is built with (_loss below), in words."""
    if hasattr(model.config, "loss"):  # as _loss below decides
        own = model.config.loss
        doc = " ".join((own.__doc__ or "").split())
        return f"the model's own objective: {doc}" if doc else "the model's own objective"
    if model.family == "decoder":
        return ("next-token cross entropy at every position (log_softmax + nll_loss over the vocabulary), the "
                "logits cast to fp32 first")
    if model.family == "vision":
        return "cross entropy of the class logits in fp32 (log_softmax + nll_loss)"
    return ("the mean square of every floating-point output in fp32: a stand-in objective that gives every "
            "parameter feeding an output a gradient (no task head is modelled)")


def _loss(model: Model, out, labels: torch.Tensor | None) -> torch.Tensor:
    if hasattr(model.config, "loss"):  # a library-built model's own objective
        return model.config.loss(out, labels)
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


def _reusable(model: Model, w: Workload) -> bool:
    """True when one meta module of `model` serves every inference capture: a zoo decoder without experts
    (models/decoder.py keeps no state between forwards: the KV cache and positions are inputs), outside
    training (whose AMP path converts the module in place and whose optimizer reads its parameters)."""
    return (w.mode != "training" and model.family == "decoder" and model.factory is None
            and not hasattr(model.config, "inputs") and not getattr(model.config, "num_experts", 0))


@lru_cache(maxsize=32)
def _serving_module(model: Model, dtype: torch.dtype) -> torch.nn.Module:
    """`model` built once on meta in `dtype` and eval mode: building and initializing a Llama-2-7B layer's
    modules took a quarter of its decode capture (8.5 -> 6.3 ms, the median of 10 on a 2-core machine), and
    a cold `compare` captures 15 graphs of one model."""
    with torch.device("meta"):
        module = model.build()
    return module.to(device="meta", dtype=dtype).eval()


def clear_modules() -> None:
    """Forget the meta modules kept for captures (_serving_module)."""
    _serving_module.cache_clear()


def build_inputs(model: Model, workload: Workload, device: str = "meta", reuse: bool = False):
    """Build the module and its inputs for a resolved workload, on meta unless told otherwise; `reuse`: a
    capture's, which may share one meta module of a zoo decoder with the other inference captures
    (_serving_module: it must not be changed).

    Returns (module, args, kwargs, labels): the module in the workload's capture dtype and in
    train or eval mode; labels is None except for training decoders and vision models. On a real
    device, weights and inputs are random and token ids are valid.
    """
    w = workload
    dt = precision(w.dtype)
    if reuse and device == "meta" and _reusable(model, w):
        module, inputs = _serving_module(model, dt.capture), ()
    else:
        with torch.device(device):
            if model.factory is not None:  # a user's model: its inputs at the batch (user_model.py)
                module, inputs = model.made(w.batch)
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
    if hasattr(model.config, "inputs"):  # a library-built model (planner_models.library)
        args, kwargs, labels = model.config.inputs(module, w, device, dt.capture)
    elif model.family == "custom":
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
    module, args, kwargs, labels = build_inputs(model, w, reuse=True)
    training = w.mode == "training"
    amp = training and w.mixed_precision == "amp"
    if amp:  # fp32 weights and inputs; the forward casts as autocast does (planner/workload/amp.py)
        module = module.float()
        args = tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
    params = list(module.parameters())
    total = sum(p.numel() for p in params)
    active = total - module.inactive_params() if model.family == "decoder" else total
    states = _adamw_states(module, w.mixed_precision) if training else None

    if getattr(model.config, "repeats", False):
        kwargs = dict(kwargs, repeat=None)  # set to the capture's repeat below

    def run(cap: Capture) -> None:
        if "repeat" in kwargs:
            kwargs["repeat"] = cap.repeat
        for sub in module.modules():  # MoE layers count same-shaped experts once each (planner_models.moe)
            if hasattr(sub, "capture_repeat"):
                sub.capture_repeat = cap.repeat
        if not training:
            with torch.no_grad():
                module(*args, **kwargs)
            return
        if amp:
            from planner.workload.amp import Autocast
            with Autocast(dt.capture):  # the forward and the loss, as `with torch.autocast(...)` wraps them
                loss = _loss(model, module(*args, **kwargs), labels)
            loss.backward()
        else:
            _loss(model, module(*args, **kwargs), labels).backward()
        with cap.phase("optimizer"):
            _adamw_step(cap, states, w.optimizer)

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
    layers = getattr(module, "layers", None) if model.family == "decoder" else None
    per_layer = tuple(sum(p.numel() for p in layer.parameters()) for layer in layers) if layers is not None else ()
    return WorkloadGraph(model=model, workload=w, graph=graph, params=total, active_params=active, param_by_top=by_top,
                         layer_params=per_layer)
