"""Scheduler policies: how an engine forms each step from waiting and running requests.

Each policy is a small frozen class; the event loop (sim.py) asks it the questions that differ
between engines. Defaults come from the engine file's `scheduler` block (hardware_specs/engines/,
every value sourced); the user may override the step token budget, the sequence limit and the
prefix-cache hit rate.

    vllm    continuous batching; each step takes the running sequences first (one decode token each,
            then the next chunk of any partly prefilled prompt), then waiting requests FCFS, until the
            token budget or the sequence limit; prompts are chunked; KV blocks are allocated as tokens
            are computed and, when a running sequence cannot get one, the latest admitted is preempted
            and later recomputed (prefilled again)
    sglang  the same, but a step is either prefill or decode: while a prompt can be prefilled, prefill
            steps (chunked to the budget) run alone and the running decodes wait for them
    trtllm  continuous batching like vllm, but a request is admitted only when KV for its whole
            output can be reserved (GUARANTEED_NO_EVICT): no preemption, fewer sequences at once
    static  whole batches: up to `batch` waiting requests are prefilled together and decoded until
            the longest finishes before the next batch starts (Hugging Face generate; planner
            predict's model)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.errors import ConfigError
from planner.files import finite
from planner.workload.engines import Engine

MAX_PREFIX_HIT = 0.99


@dataclass(frozen=True, slots=True)
class Policy:
    """What the event loop needs to know about an engine's scheduler."""

    token_budget: int
    """Tokens per step (prefill chunk tokens + one per decode); 0: no budget (static batching)."""
    max_seqs: int
    """Sequences running at once (static: the batch)."""
    block_tokens: int
    """Tokens per KV-cache block."""
    chunked: bool = True
    """Prompts longer than the budget left in a step are split over steps."""
    mixed: bool = True
    """Prefill chunks share a step with the running decodes."""
    reserve_output: bool = False
    """Admission reserves KV blocks for the prompt and the whole output."""
    preempts: bool = True
    """A sequence that cannot get a KV block preempts the latest admitted one (recompute)."""
    prefix_hit_rate: float = 0.0
    """Share of each prompt found in the prefix cache (not prefilled again)."""

    name = "policy"

    def static(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class Vllm(Policy):
    """vLLM V1: mixed chunked-prefill steps, on-demand KV blocks, preemption by recompute."""

    name = "vllm"


@dataclass(frozen=True, slots=True)
class Sglang(Policy):
    """SGLang: prefill steps run alone and first; decodes wait while prompts are prefilled."""

    mixed: bool = False
    name = "sglang"


@dataclass(frozen=True, slots=True)
class Trtllm(Policy):
    """TensorRT-LLM: in-flight batching with KV reserved for the whole output at admission."""

    reserve_output: bool = True
    preempts: bool = False
    name = "trtllm"


@dataclass(frozen=True, slots=True)
class Static(Policy):
    """Static batching: whole batches, prefilled together, decoded to the longest output."""

    chunked: bool = False
    mixed: bool = False
    preempts: bool = False
    name = "static"

    def static(self) -> bool:
        return True


CLASSES = {"vllm": Vllm, "sglang": Sglang, "trtllm": Trtllm, "static": Static}


def policy_for(engine: Engine, max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
               prefix_hit_rate: float = 0.0, batch: int | None = None) -> tuple[Policy, tuple[float, str] | None]:
    """(the engine's policy with the user's overrides, (the share of memory it plans with, of "total" or
    "free" memory), or None for the defaults' share of the whole device).

    An engine without a `scheduler` block (eager PyTorch and the others) runs static batches of
    `batch` requests; `batch` also sets a static policy's batch when its file leaves it to the user."""
    spec = engine.scheduler
    hit = finite(prefix_hit_rate, "--prefix-hit-rate")
    if not 0 <= hit <= MAX_PREFIX_HIT:
        raise ConfigError(f"--prefix-hit-rate must be in [0, {MAX_PREFIX_HIT}], got {hit:g}")
    if spec is None:
        policy_cls, budget, seqs, block, fraction = Static, 0, 0, 1, None
        chunked = mixed = preempts = reserve = False
    else:
        policy_cls = CLASSES[spec.policy]
        budget, seqs, block = spec.max_num_batched_tokens, spec.max_num_seqs, spec.kv_block_tokens
        fraction = (spec.kv_memory_fraction, spec.kv_memory_basis)
        chunked, mixed = spec.chunked_prefill, spec.mixed_batches
        preempts, reserve = spec.preemption == "recompute", spec.admission == "reserve_output"
    if max_num_batched_tokens is not None:
        budget = _positive(max_num_batched_tokens, "--max-num-batched-tokens")
    if max_num_seqs is not None:
        seqs = _positive(max_num_seqs, "--max-num-seqs")
    if policy_cls is Static:
        seqs = _positive(batch, "--batch") if batch is not None and max_num_seqs is None else (seqs or 1)
        budget = 0
    elif not seqs:
        raise ConfigError(f"engine '{engine.name}' has no sequence limit in its scheduler block: give --max-num-seqs")
    policy = policy_cls(budget, seqs, block)
    policy = replace(policy, chunked=chunked, mixed=mixed if policy_cls is not Static else False,
                     preempts=preempts, reserve_output=reserve, prefix_hit_rate=hit)
    return policy, fraction


def _positive(value, flag: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{flag} must be a positive integer, got {value!r}")
    return value


def describe(policy: Policy) -> str:
    """One line: the policy and its settings, for notes."""
    if policy.static():
        return f"static batching, batch {policy.max_seqs}"
    parts = [f"{policy.name} scheduler: {policy.token_budget:,} tokens per step",
             f"{policy.max_seqs:,} sequences", f"KV blocks of {policy.block_tokens} tokens",
             "chunked prefill" if policy.chunked else "whole prompts",
             "prefill mixed with decodes" if policy.mixed else "prefill steps first, alone",
             "KV reserved for the whole output" if policy.reserve_output else "KV allocated on demand",
             "preemption by recompute" if policy.preempts else "no preemption"]
    if policy.prefix_hit_rate:
        parts.append(f"prefix-cache hit rate {policy.prefix_hit_rate:.0%}")
    return ", ".join(parts)


