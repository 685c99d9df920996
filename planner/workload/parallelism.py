"""Parallelism: how a model splits over devices, and the config of what one device runs.

Layout (Megatron-LM conventions): tensor parallel (tp) slices every attention layer by heads and
every MLP by its intermediate dimension, and the vocabulary of the embedding and LM head; pipeline
parallel (pp) gives each stage num_layers/pp layers; data parallel (dp) replicates the stage (or
shards its optimizer state, gradients and weights under ZeRO 1/2/3); expert parallel (ep) gives
each device num_experts/ep whole experts, tokens exchanged by all-to-all. devices = tp·pp·dp.

It lives with the workload because the per-device graph (device_graph.py) is captured from the
sharded config; what the collectives cost is planner/predict/parallel.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from planner.errors import ConfigError
from planner_models.decoder import DecoderConfig

MAX_DEGREE = 2**16
"""Largest tp, pp, dp, ep or micro-batch count accepted (65,536)."""


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
        if value > MAX_DEGREE:
            raise ConfigError(f"--{name} {value:,} is above the limit of {MAX_DEGREE:,}")
    if par.zero not in (0, 1, 2, 3):
        raise ConfigError(f"--zero must be 0, 1, 2 or 3, got {par.zero!r}")
    if not 0 <= par.overlap <= 1:
        raise ConfigError(f"overlap must be between 0 and 1, got {par.overlap}")
    if par.microbatches is not None and not 1 <= par.microbatches <= MAX_DEGREE:
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
        if 1 < par.ep < par.tp:
            raise ConfigError(f"--ep {par.ep} below --tp {par.tp} (experts split over ep and each sliced over tp/ep, "
                              "TensorRT-LLM's moe_tp_size) is not modelled: give --ep 1 (experts sliced over tp) or "
                              f"--ep {par.tp} or more (whole experts)")
        if (par.tp * par.dp) % par.ep:
            raise ConfigError(f"--ep {par.ep} must divide tp·dp = {par.tp * par.dp} (experts are spread over "
                              "the tensor- and data-parallel ranks)")


def shard_config(cfg: DecoderConfig, par: Parallelism) -> DecoderConfig:
    """The config of what one device runs: heads, KV heads, intermediate and vocabulary / tp; experts / ep.

    KV heads fewer than tp are replicated (one per device), as serving engines do. Without expert
    parallelism every expert is tensor-sliced like a dense MLP (vLLM's fused MoE under TP): its
    intermediate width (moe_intermediate_size where the model sets one) and a shared expert's are
    divided by tp too. With ep > 1 experts are whole (not tensor-sliced) and each device holds
    num_experts/ep of them, running the routed rows of its tokens' share (routed_rows_divisor, models/moe.py).
    """
    tp = par.tp
    kv = cfg.num_kv_heads // tp if cfg.num_kv_heads >= tp else 1
    sliced = not (cfg.num_experts and par.ep > 1)
    width = lambda n: math.ceil(n / tp) if sliced and n else n  # noqa: E731
    return replace(cfg, num_heads=cfg.num_heads // tp, num_kv_heads=kv, intermediate_size=width(cfg.intermediate_size),
                   moe_intermediate_size=width(cfg.moe_intermediate_size),
                   shared_intermediate_size=width(cfg.shared_intermediate_size),
                   vocab_size=math.ceil(cfg.vocab_size / tp),
                   local_experts=cfg.num_experts // par.ep if cfg.num_experts else 0,
                   routed_rows_divisor=min(tp, par.ep) if cfg.num_experts and par.ep > 1 else 1)
