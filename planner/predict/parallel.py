"""Collectives: what the communication of a parallel layout costs, per link tier.

The layout itself (Parallelism, the sharded config) is planner/workload/parallelism.py.
Collectives use the alpha-beta model per link tier (nccl-tests definitions):
    ring all-reduce        2(n-1)·α + 2(n-1)/n · M / B
    all-gather, reduce-scatter, all-to-all   (n-1)·α + (n-1)/n · M / B
    point-to-point         α + M / B
with B the per-direction bandwidth per device times an efficiency. A group larger than a node is
hierarchical: reduce-scatter inside the node, all-reduce of 1/g of the data across nodes over the
scale-out link, all-gather inside the node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import ConfigError
from planner.hardware.catalog import Device
from planner.hardware.efficiency import Defaults
from planner.workload.device_graph import DeviceGraph
from planner.workload.quant import precision

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "p2p")


@dataclass(frozen=True, slots=True)
class Link:
    """One tier of interconnect as a collective sees it."""

    bytes_per_s: float
    """Per-direction bandwidth per device, efficiency applied."""
    latency_s: float
    """Per-step latency α."""


def links(device: Device, defaults: Defaults) -> tuple[Link, Link | None]:
    """(scale-up link, scale-out link or None where unsourced) of a device."""
    eff = defaults.collective_bandwidth_efficiency
    up = device.scaleup_bytes_per_s or device.pcie_bytes_per_s
    if not up:
        raise ConfigError(f"{device.id} has no sourced scale-up or PCIe bandwidth: multi-device deployments "
                          "cannot be timed")
    out = Link(device.scaleout_bytes_per_s * eff, defaults.scaleout_latency_s) if device.scaleout_bytes_per_s else None
    return Link(up * eff, defaults.scaleup_latency_s), out


def _flat(kind: str, message_bytes: float, n: int, link: Link) -> float:
    if n <= 1 or message_bytes <= 0:
        return 0.0
    if kind == "allreduce":
        return 2 * (n - 1) * link.latency_s + 2 * (n - 1) / n * message_bytes / link.bytes_per_s
    if kind == "p2p":
        return link.latency_s + message_bytes / link.bytes_per_s
    return (n - 1) * link.latency_s + (n - 1) / n * message_bytes / link.bytes_per_s


def collective_time_s(kind: str, message_bytes: float, n: int, device: Device, defaults: Defaults,
                      per_node: int | None = None) -> float:
    """Seconds for one collective of `message_bytes` (the full buffer) over `n` devices.

    Devices fill nodes of `per_node` (default: the device's scale-up domain); a group inside one
    node uses the scale-up link, a larger one is hierarchical over the scale-out link.
    """
    if kind not in COLLECTIVES:
        raise ConfigError(f"unknown collective '{kind}'; valid: {', '.join(COLLECTIVES)}")
    if n <= 1:
        return 0.0
    per_node = per_node or device.devices_per_node
    up, out = links(device, defaults)
    if n <= per_node:
        return _flat(kind, message_bytes, n, up)
    if out is None:
        raise ConfigError(f"{device.id} has no sourced scale-out bandwidth: a {n}-device group spans nodes of "
                          f"{per_node} and cannot be timed; give the network per device with --scaleout-gbps "
                          "(Gb/s per direction, e.g. 400 for one NDR InfiniBand port per device)")
    g, nodes = per_node, math.ceil(n / per_node)
    if kind == "p2p":
        return _flat("p2p", message_bytes, 2, out)
    if kind == "alltoall":
        # each device sends (n-1)/n of its buffer; the share bound for other nodes crosses scale-out
        inside = _flat("alltoall", message_bytes * g / n, g, up)
        across = (nodes - 1) * out.latency_s + message_bytes * (n - g) / n / out.bytes_per_s
        return inside + across
    inner_rs = _flat("reducescatter", message_bytes, g, up)
    inner_ag = _flat("allgather", message_bytes, g, up)
    cross = _flat(kind, message_bytes / g, nodes, out)
    if kind == "allreduce":
        return inner_rs + cross + inner_ag
    return cross + (inner_ag if kind == "allgather" else inner_rs)


def bus_bytes_per_s(kind: str, message_bytes: float, n: int, time_s: float) -> float:
    """Bus bandwidth in the nccl-tests definition: algbw x 2(n-1)/n (all-reduce), x (n-1)/n (others)."""
    if time_s <= 0:
        return 0.0
    algbw = message_bytes / time_s
    factor = {"allreduce": 2 * (n - 1) / n, "p2p": 1.0}.get(kind, (n - 1) / n)
    return algbw * factor


def activation_bytes(dg: DeviceGraph, tokens: int) -> float:
    """Bytes of a [tokens, hidden] activation in the workload's compute dtype (a TP all-reduce message:
    16-bit under a quantization recipe)."""
    return tokens * dg.config.hidden_size * precision(dg.dtype).bits / 8


def layer_comm_s(dg: DeviceGraph, stage: int, tokens: int, device: Device, defaults: Defaults, node: int,
                 passes: int = 1) -> float:
    """Tensor- and expert-parallel communication of one stage for `tokens` tokens, per pass.

    TP (Megatron): one all-reduce of [tokens, d] after attention and one after the MLP per layer
    (one per layer for a parallel block), one for the vocabulary-parallel embedding on the first
    stage. EP: an all-to-all to dispatch and one to combine the [tokens·k, d] routed rows per
    MoE layer. `node`: devices per server on the fast link. `passes`: 1 for a forward, 2 for forward
    and backward.
    """
    par, cfg = dg.parallelism, dg.config
    if dg.model.family != "decoder" or (par.tp == 1 and par.ep == 1):
        return 0.0
    layers = dg.layers_on_stage(stage)
    message = activation_bytes(dg, tokens)
    total = 0.0
    if par.tp > 1:
        per_layer = 1 if cfg.parallel_block else 2
        count = layers * per_layer + (1 if stage == 0 else 0)
        total += count * collective_time_s("allreduce", message, par.tp, device, defaults, node)
    if par.ep > 1 and cfg.num_experts:
        routed = message * cfg.experts_per_token
        per_node = max(1, node // par.pp)
        total += layers * 2 * collective_time_s("alltoall", routed, par.ep, device, defaults, per_node)
    return total * passes


def pipeline_hop_s(dg: DeviceGraph, tokens: int, device: Device, defaults: Defaults, node: int) -> float:
    """One point-to-point send of [tokens, d] between consecutive pipeline stages."""
    if dg.parallelism.pp == 1:
        return 0.0
    crosses = dg.parallelism.model_devices > node
    per_node = 1 if crosses else node
    return collective_time_s("p2p", activation_bytes(dg, tokens), 2, device, defaults, per_node)
