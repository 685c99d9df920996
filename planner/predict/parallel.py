"""Collectives: what the communication of a parallel layout costs, per link tier.

The layout itself (Parallelism, the sharded config) is planner/workload/parallelism.py.
Where published measurements of the device exist (hardware_specs/collectives, read by
planner/predict/collectives.py), a collective's time is read off the measured curve of time against
message bytes: the same op, GPU count and node count, or the nearest GPU count scaled by the ring
step factor. An engine with its own all-reduce for small tensor-parallel messages (TensorRT-LLM,
vLLM, SGLang: hardware_specs/engines `tp_allreduce`) gets that curve where it is faster than NCCL.
Devices without curves (and ops a device's curves lack) use the alpha-beta model per link tier
(nccl-tests definitions), labelled as the datasheet tier:
    ring all-reduce        2(n-1)·α + 2(n-1)/n · M / B
    all-gather, reduce-scatter, all-to-all   (n-1)·α + (n-1)/n · M / B
    point-to-point         α + M / B
with B the per-direction bandwidth per device times an efficiency. A group larger than a node is
hierarchical: reduce-scatter inside the node, all-reduce of 1/g of the data across nodes over the
scale-out link, all-gather inside the node; the parts inside the node come from the measured curves
where they exist. A group measured across nodes as a whole (Vidur's two-node DGX A100 runs) reads
that curve; more nodes than measured add the scale-out formula's difference to the measured curve:
t(N nodes) = t_measured(2 nodes) + hierarchical(N) - hierarchical(2).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from planner.errors import ConfigError
from planner.hardware.catalog import Device
from planner.hardware.efficiency import Defaults
from planner.memo import IdentityMemo
from planner.predict import nccl_model
from planner.predict.collectives import DeviceCurves, band_fraction, device_curves
from planner.workload.device_graph import DeviceGraph
from planner.workload.engines import engines
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


@dataclass(frozen=True, slots=True)
class CollectiveTime:
    """A collective's predicted time and what it rests on."""

    time_s: float
    """Seconds."""
    tier: str
    """published (read off, or built from, measured curves of this device) or datasheet (alpha-beta formula)."""
    basis: str
    """One line: which curve, source and method, or the formula."""
    band_fraction: float | None
    """Held-out p90 |error| of the device's curves when the time was read straight off one measured curve;
    None otherwise (the caller applies the datasheet band)."""


def collective_time_s(kind: str, message_bytes: float, n: int, device: Device, defaults: Defaults,
                      per_node: int | None = None, engine: str | None = None) -> float:
    """Seconds for one collective of `message_bytes` (the full buffer) over `n` devices.

    Devices fill nodes of `per_node` (default: the device's scale-up domain); a group inside one
    node uses the scale-up link, a larger one is hierarchical over the scale-out link. `engine`: the
    engine running the all-reduce (its own all-reduce curve is used where faster than NCCL).
    """
    return collective_estimate(kind, message_bytes, n, device, defaults, per_node, engine).time_s


def collective_estimate(kind: str, message_bytes: float, n: int, device: Device, defaults: Defaults,
                        per_node: int | None = None, engine: str | None = None) -> CollectiveTime:
    """collective_time_s with its tier, basis and band (module docstring: curves first, then formulas).
    Memoized (planner/memo.py): a sweep asks the same collective of the same device thousands of times;
    the curves folder keys by its path."""
    return _ESTIMATES.get((device, defaults), (kind, message_bytes, n, per_node, engine,
                                               os.environ.get("PLANNER_HARDWARE_SPECS")),
                          lambda: _estimate(kind, message_bytes, n, device, defaults, per_node, engine))


_ESTIMATES = IdentityMemo(8192)


def _estimate(kind: str, message_bytes: float, n: int, device: Device, defaults: Defaults,
              per_node: int | None, engine: str | None) -> CollectiveTime:
    if kind not in COLLECTIVES:
        raise ConfigError(f"unknown collective '{kind}'; valid: {', '.join(COLLECTIVES)}")
    if n <= 1 or message_bytes <= 0:
        return CollectiveTime(0.0, "datasheet", "one device or no data: nothing moves", None)
    curves = device_curves(device.id)
    per_node = per_node or device.devices_per_node
    if n <= per_node:
        return _inside(kind, message_bytes, n, device, defaults, curves, engine)
    g, nodes = per_node, math.ceil(n / per_node)
    measured = curves.find(kind, n, nodes) if curves else None
    model = _nccl(kind, message_bytes, n, device, per_node)
    if measured is not None and message_bytes <= measured.message_bytes[-1]:
        t = measured.time_at_s(message_bytes)
        if message_bytes < measured.message_bytes[0] and model is not None and model.time_s < t:
            return model  # below the measured sizes: the model, at most the smallest measured time
        return CollectiveTime(t, "published",
                              f"{device.id} {measured.label()} ({curves.source(measured.source)}), measured across "
                              "nodes", band_fraction(device.id))
    if model is not None:
        return model
    up, out = links(device, defaults)
    amd = _rccl(kind, message_bytes, n, device, up, nodes)
    if amd is not None and measured is None:
        return amd
    if measured is not None:
        return CollectiveTime(measured.time_at_s(message_bytes), "published",
                              f"{device.id} {measured.label()} ({curves.source(measured.source)}), measured across "
                              "nodes, above its largest size", None)
    if out is None:
        raise ConfigError(f"{device.id} has no sourced scale-out bandwidth: a {n}-device group spans nodes of "
                          f"{per_node} and cannot be timed; give the network per device with --scaleout-gbps "
                          "(Gb/s per direction, e.g. 400 for one NDR InfiniBand port per device)")
    if kind == "p2p":
        return CollectiveTime(_flat("p2p", message_bytes, 2, out), "datasheet",
                              "point-to-point over the scale-out link (alpha-beta formula)", None)
    t, inner_tier = _hierarchical(kind, message_bytes, n, g, device, defaults, curves, out)
    two = curves.find(kind, 2 * g, 2) if curves else None
    if two is not None and nodes > 2:
        t2, _ = _hierarchical(kind, message_bytes, 2 * g, g, device, defaults, curves, out)
        return CollectiveTime(two.time_at_s(message_bytes) + t - t2, "published",
                              f"{device.id} {two.label()} ({curves.source(two.source)}) plus the scale-out "
                              f"formula's difference from 2 to {nodes} nodes", None)
    basis = ("hierarchical: measured curves inside each node, alpha-beta formula across nodes"
             if inner_tier == "published" else "hierarchical alpha-beta formula (scale-up and scale-out links)")
    return CollectiveTime(t, inner_tier, basis, None)


def _inside(kind: str, message_bytes: float, n: int, device: Device, defaults: Defaults,
            curves: DeviceCurves | None, engine: str | None) -> CollectiveTime:
    """A collective inside one node: the measured curve (or the engine's own all-reduce where faster), else
    the formula over the scale-up link."""
    nccl = curves.lookup(kind, message_bytes, n) if curves else None
    model = _nccl(kind, message_bytes, n, device, n)
    if nccl is None or (model is not None and (nccl.side > 0 or (nccl.side < 0 and model.time_s < nccl.time_s))):
        # no curve, or outside its measured sizes: NCCL's model (below them at most the smallest measured time)
        if model is not None:
            best = model
        else:
            up, _ = links(device, defaults)
            best = _rccl(kind, message_bytes, n, device, up) or CollectiveTime(
                _flat(kind, message_bytes, n, up), "datasheet", "alpha-beta formula over the scale-up link", None)
    else:
        best = CollectiveTime(nccl.time_s, "published", nccl.basis,
                              band_fraction(device.id) if nccl.exact and nccl.side == 0 else None)
    if kind == "allreduce" and curves and engine and _engine_has_custom_allreduce(engine):
        own = curves.custom_lookup(engine, message_bytes, n)
        if own is not None and own.time_s < best.time_s:
            best = CollectiveTime(own.time_s, "published", own.basis,
                                  band_fraction(device.id) if own.exact else None)
    return best


def _nccl(kind: str, message_bytes: float, n: int, device: Device, per_node: int) -> CollectiveTime | None:
    """NCCL's own model (planner/predict/nccl_model.py) of an all-reduce, all-gather or reduce-scatter, with the
    algorithm and protocol it picks named in the basis; None where it does not apply (other ops, devices that
    are not NVIDIA GPUs of a known generation, nodes without a network)."""
    if kind not in nccl_model.MODELLED:
        return None
    topo = nccl_model.topology(device, n, per_node)
    if topo is None:
        return None
    choice = nccl_model.best(kind, message_bytes, topo)
    return CollectiveTime(choice.time_s, "datasheet", nccl_model.describe(choice, topo), None)


def _rccl(kind: str, message_bytes: float, n: int, device: Device, up: Link, nodes: int = 1) -> CollectiveTime | None:
    """RCCL on AMD Instinct GPUs (CDNA) over the Infinity Fabric links a group uses, across `nodes` over the scale-out
    link (nccl_model.rccl_best: the NIC at its raw rate, as RCCL's topology counts it); None for other
    devices and ops, and across nodes without a sourced scale-out link."""
    if (kind not in nccl_model.MODELLED or getattr(device, "vendor", "") != "AMD"
            or not str(getattr(device, "generation", "")).startswith("cdna") or not device.scaleup_bytes_per_s):
        return None
    if nodes > 1 and not device.scaleout_bytes_per_s:
        return None
    # Infinity Fabric joins the GPUs of a node in a full mesh: the scale-up figure is the sum of one GPU's
    # devices_per_node - 1 links, of which a group of p GPUs per node uses p - 1 (2 MI300X: one 64 GB/s link)
    links_per_gpu = max(1, device.devices_per_node - 1)
    used = min(links_per_gpu, max(1, math.ceil(n / nodes) - 1))
    bus = up.bytes_per_s * used / links_per_gpu
    choice = nccl_model.rccl_best(kind, message_bytes, n, bus, nodes, device.scaleout_bytes_per_s or 0.0)
    return CollectiveTime(choice.time_s, "datasheet", nccl_model.describe_rccl(choice, n, nodes), None)


def _engine_has_custom_allreduce(engine: str) -> bool:
    """True when hardware_specs/engines says the engine all-reduces with a kernel of its own (not only NCCL)."""
    e = engines().get(engine)
    return e is not None and "custom" in e.tp_allreduce.lower()


def _hierarchical(kind: str, message_bytes: float, n: int, g: int, device: Device, defaults: Defaults,
                  curves: DeviceCurves | None, out: Link) -> tuple[float, str]:
    """(seconds, tier) of a group of n over nodes of g: the parts inside a node from _inside, across
    nodes over the scale-out link `out`."""
    nodes = math.ceil(n / g)

    def inside(op: str, nbytes: float) -> CollectiveTime:
        if g <= 1:
            return CollectiveTime(0.0, "datasheet", "", None)
        return _inside(op, nbytes, g, device, defaults, curves, None)

    if kind == "alltoall":
        # each device sends (n-1)/n of its buffer; the share bound for other nodes crosses scale-out
        part = inside("alltoall", message_bytes * g / n)
        across = (nodes - 1) * out.latency_s + message_bytes * (n - g) / n / out.bytes_per_s
        return part.time_s + across, part.tier
    parts = [inside("reducescatter", message_bytes)] if kind in ("allreduce", "reducescatter") else []
    parts += [inside("allgather", message_bytes)] if kind in ("allreduce", "allgather") else []
    cross = _flat(kind, message_bytes / g, nodes, out)
    tier = "published" if any(p.tier == "published" for p in parts) else "datasheet"
    return cross + sum(p.time_s for p in parts), tier


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
    stage. EP across data-parallel replicas (ep > tp): an all-to-all to dispatch and one to combine the
    [tokens·k, d] routed rows per MoE layer; EP within the TP group moves no rows (models/moe.py). `node`: devices per server on the fast link. `passes`: 1 for a forward, 2 for forward
    and backward.
    """
    par, cfg = dg.parallelism, dg.config
    allreduces, alltoalls = _layer_counts(dg, stage)
    if not allreduces and not alltoalls:
        return 0.0
    message = activation_bytes(dg, tokens)
    total = 0.0
    if allreduces:
        total += allreduces * collective_time_s("allreduce", message, par.tp, device, defaults, node,
                                                engine=dg.workload.engine)
    if alltoalls:
        routed = message * cfg.experts_per_token
        per_node = max(1, node // par.pp)
        total += alltoalls * collective_time_s("alltoall", routed, par.ep, device, defaults, per_node)
    return total * passes


def layer_collectives(dg: DeviceGraph, stage: int, passes: int = 1) -> dict[str, int]:
    """The collectives layer_comm_s times for one stage, by kind: {"tensor-parallel all-reduce": n,
    "expert-parallel all-to-all": n} (kinds with none left out)."""
    allreduces, alltoalls = _layer_counts(dg, stage)
    counts = {"tensor-parallel all-reduce": allreduces * passes, "expert-parallel all-to-all": alltoalls * passes}
    return {kind: n for kind, n in counts.items() if n}


def _layer_counts(dg: DeviceGraph, stage: int) -> tuple[int, int]:
    """(TP all-reduces, EP all-to-alls) of one stage per pass (layer_comm_s's docstring)."""
    par, cfg = dg.parallelism, dg.config
    if dg.model.family != "decoder" or (par.tp == 1 and par.ep == 1):
        return 0, 0
    layers = dg.layers_on_stage(stage)
    allreduces = layers * (1 if cfg.parallel_block else 2) + (1 if stage == 0 else 0) if par.tp > 1 else 0
    # EP within a TP group (ep ≤ tp): every rank holds the group's tokens, so no rows move; the partial expert
    # outputs are summed by the MLP's all-reduce already counted. Across replicas (ep > tp): dispatch + combine.
    alltoalls = layers * 2 if par.ep > par.tp and cfg.num_experts else 0
    return allreduces, alltoalls


def pipeline_hop_s(dg: DeviceGraph, tokens: int, device: Device, defaults: Defaults, node: int) -> float:
    """One point-to-point send of [tokens, d] between consecutive pipeline stages."""
    if dg.parallelism.pp == 1:
        return 0.0
    crosses = dg.parallelism.model_devices > node
    per_node = 1 if crosses else node
    return collective_time_s("p2p", activation_bytes(dg, tokens), 2, device, defaults, per_node)
