"""Memory per device: weights, KV cache, activations, gradients, optimizer state, workspace.

Serving (per device of the worst pipeline stage):
    weights     = stage parameters x bytes per element of the workload dtype
    KV cache    = batch x (input + output tokens) x 2·layers_on_stage·kv_heads_on_device·head_dim·bytes
    activations = 3 x the largest op output of the prefill (gate, up and their product of a gated MLP
                  are live at once), the transient peak of a forward pass
    workspace   = CUDA context and library workspaces (hardware_specs/efficiency/defaults.json)
Training (mixed precision, ZeRO per Rajbhandari et al. 2020):
    weights 2 B, gradients 2 B, optimizer 12 B per parameter (fp32 master, moments m and v);
    fp32 training: 4 + 4 + 8. ZeRO-1 shards the optimizer over dp, ZeRO-2 also the gradients,
    ZeRO-3 also the weights. Activations are what autograd saves for backward (captured), per
    layer, times the micro-batches a 1F1B pipeline keeps in flight on the first stage (min(pp, M));
    full recompute keeps only each layer's input plus one layer's activations.
The device fits when the total is within the usable fraction of its memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import ConfigError
from planner.hardware.catalog import Device
from planner.hardware.efficiency import Defaults
from planner.workload.device_graph import DeviceGraph
from planner.workload.dtypes import get_dtype


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
        return {"weights_bytes": self.weights_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "activation_bytes": self.activation_bytes, "gradient_bytes": self.gradient_bytes,
                "optimizer_bytes": self.optimizer_bytes, "workspace_bytes": self.workspace_bytes,
                "total_bytes": self.total_bytes, "capacity_bytes": self.capacity_bytes,
                "shortfall_bytes": self.shortfall_bytes}


def kv_bytes_per_token(dg: DeviceGraph, stage: int = 0) -> float:
    """KV-cache bytes one token takes on one device of `stage`: 2·layers·kv_heads·head_dim·bytes."""
    cfg = dg.config
    if dg.model.family != "decoder":
        return 0.0
    return 2 * dg.layers_on_stage(stage) * cfg.num_kv_heads * cfg.head_dim * get_dtype(dg.dtype).bits / 8


def stage_params(dg: DeviceGraph, stage: int) -> int:
    """Parameters stored on one device of pipeline stage `stage`."""
    return sum(part.params * n for part, n in dg.stage_parts(stage))


def _largest_outputs(dg: DeviceGraph, k: int = 1) -> float:
    sizes = sorted((max((t.bytes for t in op.record.outputs), default=0.0)
                    for part in (dg.first, dg.layer, dg.last) for op in part.ops if op.category != "view"), reverse=True)
    return sum(sizes[:k])


def capacity(device: Device, defaults: Defaults) -> float:
    """Usable bytes of a device; raise when the catalog has no sourced memory capacity."""
    if not device.memory_bytes:
        raise ConfigError(f"{device.id} has no sourced memory capacity in hardware_specs/devices.csv: "
                          "memory fit cannot be predicted")
    return device.memory_bytes * defaults.memory_usable_fraction


def serving_memory(prefill: DeviceGraph, batch: int, tokens: int, device: Device, defaults: Defaults) -> MemoryBreakdown:
    """Memory per device to serve `batch` sequences of `tokens` (input + output) tokens; worst stage."""
    bytes_per_param = get_dtype(prefill.dtype).bits / 8
    worst = None
    for stage in range(prefill.parallelism.pp):
        m = MemoryBreakdown(
            weights_bytes=stage_params(prefill, stage) * bytes_per_param,
            kv_cache_bytes=batch * tokens * kv_bytes_per_token(prefill, stage),
            activation_bytes=3 * _largest_outputs(prefill),
            gradient_bytes=0.0, optimizer_bytes=0.0, workspace_bytes=defaults.workspace_bytes,
            capacity_bytes=capacity(device, defaults))
        if worst is None or m.total_bytes > worst.total_bytes:
            worst = m
    return worst


def training_memory(step: DeviceGraph, dp: int, zero: int, microbatches: int, recompute: str, device: Device,
                    defaults: Defaults) -> MemoryBreakdown:
    """Memory per device of a training step; worst pipeline stage."""
    dt = get_dtype(step.dtype)
    mixed = dt.bits < 32
    weight_b, grad_b = dt.bits / 8, dt.bits / 8
    optim_b = 12.0 if mixed else 8.0
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
        m = MemoryBreakdown(
            weights_bytes=params * weight_b / (dp if zero >= 3 else 1),
            kv_cache_bytes=0.0,
            activation_bytes=activations,
            gradient_bytes=params * grad_b / (dp if zero >= 2 else 1),
            optimizer_bytes=params * optim_b / (dp if zero >= 1 else 1),
            workspace_bytes=defaults.workspace_bytes,
            capacity_bytes=capacity(device, defaults))
        if worst is None or m.total_bytes > worst.total_bytes:
            worst = m
    return worst
