"""Parallelism: how a model splits over devices, and what its collectives cost.

Layout (Megatron-LM conventions): tensor parallel (tp) slices every attention layer by heads and
every MLP by its intermediate dimension, and the vocabulary of the embedding and LM head; pipeline
parallel (pp) gives each stage num_layers/pp layers; data parallel (dp) replicates the stage (or
shards its optimizer state, gradients and weights under ZeRO 1/2/3); expert parallel (ep) gives
each device num_experts/ep whole experts, tokens exchanged by all-to-all. devices = tp·pp·dp.

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
from dataclasses import dataclass, replace

from models.decoder import DecoderConfig
from planner.catalog import Device
from planner.efficiency import Defaults
from planner.errors import ConfigError

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "p2p")


@dataclass(frozen=True, slots=True)
class Parallelism:
    """How a deployment splits a model over devices."""

    tp: int = 1
    """Tensor-parallel degree."""
    pp: int = 1
    """Pipeline stages."""
    dp: int = 1
    """Data-parallel replicas (serving: independent replicas)."""
    ep: int = 1
    """Expert-parallel degree (MoE): each device holds num_experts/ep whole experts."""
    zero: int = 0
    """ZeRO stage 0-3 (FSDP = 3): what data-parallel ranks shard (optimizer, +gradients, +weights)."""
    microbatches: int | None = None
    """Pipeline micro-batches per step (training); None: 4·pp."""
    overlap: float = 0.8
    """Fraction of the data-parallel gradient communication hidden behind the backward pass."""

    @property
    def devices(self) -> int:
        """Devices of the deployment: tp·pp·dp."""
        return self.tp * self.pp * self.dp

    @property
    def model_devices(self) -> int:
        """Devices holding one copy of the model: tp·pp."""
        return self.tp * self.pp


def validate(par: Parallelism, family: str, config) -> None:
    """Raise ConfigError naming the bad degree and what would be valid."""
    for name in ("tp", "pp", "dp", "ep"):
        value = getattr(par, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"--{name} must be a positive integer, got {value!r}")
    if par.zero not in (0, 1, 2, 3):
        raise ConfigError(f"--zero must be 0, 1, 2 or 3, got {par.zero!r}")
    if not 0 <= par.overlap <= 1:
        raise ConfigError(f"overlap must be between 0 and 1, got {par.overlap}")
    if par.microbatches is not None and par.microbatches < 1:
        raise ConfigError(f"--micro-batches must be a positive integer, got {par.microbatches}")
    if family != "decoder":
        if par.tp > 1 or par.pp > 1 or par.ep > 1:
            raise ConfigError(f"tensor, pipeline and expert parallelism are modelled for decoder LMs; this is a "
                              f"{family} model: use --dp (replicas) only")
        return
    cfg: DecoderConfig = config
    if cfg.num_heads % par.tp:
        valid = [t for t in range(1, cfg.num_heads + 1) if cfg.num_heads % t == 0]
        raise ConfigError(f"--tp {par.tp} does not divide the {cfg.num_heads} attention heads; valid: {valid}")
    if cfg.num_kv_heads % par.tp and par.tp % cfg.num_kv_heads:
        raise ConfigError(f"--tp {par.tp} neither divides nor is a multiple of the {cfg.num_kv_heads} KV heads")
    if par.pp > cfg.num_layers:
        raise ConfigError(f"--pp {par.pp} exceeds the {cfg.num_layers} layers")
    if par.ep > 1:
        if not cfg.num_experts:
            raise ConfigError(f"--ep {par.ep} needs a mixture-of-experts model; this one has no experts")
        if cfg.num_experts % par.ep:
            raise ConfigError(f"--ep {par.ep} does not divide the {cfg.num_experts} experts")
        if (par.tp * par.dp) % par.ep:
            raise ConfigError(f"--ep {par.ep} must divide tp·dp = {par.tp * par.dp} (experts are spread over "
                              "the tensor- and data-parallel ranks)")


def shard_config(cfg: DecoderConfig, par: Parallelism) -> DecoderConfig:
    """The config of what one device runs: heads, KV heads, intermediate and vocabulary / tp; experts / ep.

    KV heads fewer than tp are replicated (one per device), as serving engines do. With ep > 1 experts
    are whole (not tensor-sliced) and each device holds num_experts/ep of them.
    """
    tp = par.tp
    kv = cfg.num_kv_heads // tp if cfg.num_kv_heads >= tp else 1
    intermediate = cfg.intermediate_size if (cfg.num_experts and par.ep > 1) else math.ceil(cfg.intermediate_size / tp)
    return replace(cfg, num_heads=cfg.num_heads // tp, num_kv_heads=kv, intermediate_size=intermediate,
                   vocab_size=math.ceil(cfg.vocab_size / tp),
                   local_experts=cfg.num_experts // par.ep if cfg.num_experts else 0)


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
                          f"{per_node} and cannot be timed")
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
