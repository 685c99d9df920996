"""Memory per device: weights, KV cache, activations, gradients, optimizer state, workspace.

Serving (per device of the worst pipeline stage):
    weights     = stage parameters x bytes per element of the workload dtype (under a quantization
                  recipe: quantized Linear weights at the weight width plus their scales, the other
                  parameters at the compute width; planner/workload/quant.py)
    KV cache    = batch x (input + output tokens) x layers_on_stage·kv_cache_width·bytes (2·kv_heads·head_dim)
                  (the KV-cache width with its scales under a recipe)
    activations = 3 x the largest op output of the prefill (gate, up and their product of a gated MLP
                  are live at once), the transient peak of a forward pass
    workspace   = CUDA context and library workspaces (hardware_specs/efficiency/defaults.json)
Training (mixed precision, ZeRO per Rajbhandari et al. 2020), per parameter at bf16:
    master (Megatron): weights 2 B, gradients 2 B, optimizer 12 B (fp32 master, moments m and v);
    amp (torch.autocast): weights 4 B + its 2 B cast held through the backward, gradients 4 B,
    optimizer 8 B; pure: 2 + 2 + 4; fp32 training: 4 + 4 + 8. Under a quantization recipe the weights are at the recipe's widths as
    in serving, gradients at the compute dtype, and the optimizer as mixed precision. ZeRO-1 shards the optimizer over dp, ZeRO-2 also the gradients,
    ZeRO-3 also the weights. Activations are what autograd saves for backward (captured), per
    layer, times the micro-batches a 1F1B pipeline keeps in flight on the first stage (min(pp, M));
    full recompute keeps only each layer's input plus one layer's activations.
The device fits when the total is within the usable fraction of its memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import ConfigError
from planner.hardware.catalog import Device
from planner.hardware.efficiency import Defaults
from planner.memo import IdentityMemo
from planner.workload.device_graph import DeviceGraph
from planner.workload.quant import parameter_bits, precision


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Bytes per device, and whether they fit."""

    weights_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    gradient_bytes: float
    optimizer_bytes: float
    workspace_bytes: float
    capacity_bytes: float
    """Usable memory: device memory x usable fraction."""

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.kv_cache_bytes + self.activation_bytes + self.gradient_bytes
                + self.optimizer_bytes + self.workspace_bytes)

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def shortfall_bytes(self) -> float:
        """Bytes missing to fit (0 when it fits)."""
        return max(0.0, self.total_bytes - self.capacity_bytes)

    def as_dict(self) -> dict[str, float]:
        total = self.total_bytes
        return {"weights_bytes": self.weights_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "activation_bytes": self.activation_bytes, "gradient_bytes": self.gradient_bytes,
                "optimizer_bytes": self.optimizer_bytes, "workspace_bytes": self.workspace_bytes,
                "total_bytes": total, "capacity_bytes": self.capacity_bytes,
                "shortfall_bytes": max(0.0, total - self.capacity_bytes)}


def kv_bytes_per_token(dg: DeviceGraph, stage: int = 0) -> float:
    """KV-cache bytes one token takes on one device of `stage`: layers·(2·kv_heads·head_dim)·bytes, or
    layers·(kv_lora_rank + qk_rope_head_dim)·bytes under multi-head latent attention (the latent is not
    split by tensor parallelism: each device holds it whole). Sliding-window layers are counted as full
    ones (an upper bound: they hold at most sliding_window tokens per sequence)."""
    cfg = dg.config
    if dg.model.family != "decoder":
        return 0.0
    group = cfg.mla[1] if cfg.mla is not None else cfg.head_dim
    return dg.layers_on_stage(stage) * cfg.kv_cache_width * precision(dg.dtype).kv_bits(group) / 8


def stage_params(dg: DeviceGraph, stage: int) -> int:
    """Parameters stored on one device of pipeline stage `stage`."""
    return sum(part.params * n for part, n in dg.stage_parts(stage))


def weight_bytes(dg: DeviceGraph, stage: int) -> float:
    """Bytes of the parameters stored on one device of `stage`: every parameter at the workload dtype,
    or under a quantization recipe the quantized Linear weights at the weight width with their scales
    and the rest at the compute width (mean bits of a layer's and of the other parameters)."""
    p = precision(dg.dtype)
    if p.plain:
        return stage_params(dg, stage) * (p.bits / 8)
    layer_bits, other_bits = parameter_bits(dg.model, dg.config, dg.num_layers > 0, dg.dtype)
    return sum(part.params * n * (layer_bits if part is dg.layer else other_bits) / 8 for part, n in dg.stage_parts(stage))


_LARGEST = IdentityMemo()  # a sweep asks it of one graph often


def _largest_outputs(dg: DeviceGraph, k: int = 1) -> float:
    return _LARGEST.get((dg.first, dg.layer, dg.last), (k,), lambda: _largest(dg, k))


def _largest(dg: DeviceGraph, k: int) -> float:
    sizes = sorted((max((t.bytes for t in op.record.outputs), default=0.0)
                    for part in (dg.first, dg.layer, dg.last) for op in part.ops if op.category != "view"), reverse=True)
    return sum(sizes[:k])


def capacity(device: Device, defaults: Defaults) -> float:
    """Usable bytes of a device; raise when the catalog has no sourced memory capacity."""
    if not device.memory_bytes:
        raise ConfigError(f"{device.id} has no sourced memory capacity in hardware_specs/devices.csv: "
                          "memory fit cannot be predicted")
    return device.memory_bytes * defaults.memory_usable_fraction


_STAGE_BYTES = IdentityMemo()  # a sweep asks them of one graph under many batches, prices and layouts


def _stage_bytes(dg: DeviceGraph) -> tuple[tuple[float, float], ...]:
    """(weight bytes, KV bytes per token) of one device of each pipeline stage of `dg`."""
    return _STAGE_BYTES.get((dg.first, dg.layer, dg.last), (dg.parallelism.pp, dg.num_layers, dg.dtype),
                            lambda: tuple((weight_bytes(dg, s), kv_bytes_per_token(dg, s))
                                          for s in range(dg.parallelism.pp)))


def serving_memory(prefill: DeviceGraph, batch: int, tokens: int, device: Device, defaults: Defaults) -> MemoryBreakdown:
    """Memory per device to serve `batch` sequences of `tokens` (input + output) tokens; worst stage."""
    worst = None
    activations = 3 * _largest_outputs(prefill)
    for weights, per_token in _stage_bytes(prefill):
        m = MemoryBreakdown(
            weights_bytes=weights, kv_cache_bytes=batch * tokens * per_token, activation_bytes=activations,
            gradient_bytes=0.0, optimizer_bytes=0.0, workspace_bytes=defaults.workspace_bytes,
            capacity_bytes=capacity(device, defaults))
        if worst is None or m.total_bytes > worst.total_bytes:
            worst = m
    return worst


def kv_capacity_tokens(prefill: DeviceGraph, device: Device, defaults: Defaults) -> int | None:
    """Tokens of KV cache that fit on one model copy beside the weights, the prefill's activations and
    the workspace (each device holds its share of every token): the worst stage's
    floor((usable − weights − activations − workspace) / KV bytes per token), 0 when nothing is left;
    None for a model without a KV cache."""
    fewest = None
    for weights, per_token in _stage_bytes(prefill):
        if not per_token:
            continue
        free = capacity(device, defaults) - weights - 3 * _largest_outputs(prefill) - defaults.workspace_bytes
        tokens = max(0, math.floor(free / per_token))
        fewest = tokens if fewest is None else min(fewest, tokens)
    return fewest


def training_memory(step: DeviceGraph, dp: int, zero: int, microbatches: int, recompute: str, device: Device,
                    defaults: Defaults) -> MemoryBreakdown:
    """Memory per device of a training step; worst pipeline stage."""
    dt = precision(step.dtype)
    mixed = dt.bits < 32
    weight_b, grad_b = dt.bits / 8, dt.bits / 8
    optim_b = 12.0 if mixed else 8.0
    mode = step.workload.mixed_precision
    if mode == "amp":
        # fp32 weights, and autocast's 16-bit copy of each weight held from its first use in the forward
        # until the backward is done; fp32 gradients; fp32 moments m and v, no master copy
        weight_b, grad_b, optim_b = 4.0 + dt.bits / 8, 4.0, 8.0
    elif mode == "pure":
        optim_b = 2 * dt.bits / 8  # moments m and v at the weights' dtype
    pp = step.parallelism.pp
    in_flight = min(pp, microbatches)
    cfg = step.config
    worst = None
    for stage in range(pp):
        params = stage_params(step, stage)
        layers = step.layers_on_stage(stage)
        if recompute == "full" and cfg is not None and hasattr(cfg, "hidden_size"):
            # each layer keeps its input [B, S, d]; one layer's activations live during recompute
            tokens = step.workload.batch * (step.workload.seq_len or 1)
            per_layer = tokens * cfg.hidden_size * dt.bits / 8
            activations = in_flight * layers * per_layer + step.layer.saved_bytes
        else:
            activations = in_flight * layers * step.layer.saved_bytes
        if stage == 0:
            activations += in_flight * step.first.saved_bytes
        if stage == pp - 1:
            activations += step.last.saved_bytes
        weights = params * weight_b if dt.plain else weight_bytes(step, stage)
        m = MemoryBreakdown(
            weights_bytes=weights / (dp if zero >= 3 else 1),
            kv_cache_bytes=0.0,
            activation_bytes=activations,
            gradient_bytes=params * grad_b / (dp if zero >= 2 else 1),
            optimizer_bytes=params * optim_b / (dp if zero >= 1 else 1),
            workspace_bytes=defaults.workspace_bytes,
            capacity_bytes=capacity(device, defaults))
        if worst is None or m.total_bytes > worst.total_bytes:
            worst = m
    return worst
