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

Two server settings that published runs change and engines leave off by default:
    recv_interval    SGLang --scheduler-recv-interval N (default 1): the scheduler takes new requests from
                     its queue only when the weights of the steps since it last did reach N; a decode step
                     (and an idle loop) weighs 1, a step with any prefill 1000 (sglang/srt/managers/
                     scheduler_recv_skipper.py, weights from SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_* in
                     sglang/srt/environ.py: DECODE 1, NONE 1, DEFAULT 1000). While decodes run, a new request
                     waits up to N decode steps before it can be prefilled.
    batch wait       TensorRT-LLM batch_wait_timeout_iters T and batch_wait_max_tokens_ratio r (default 0, 0:
                     off): while generation requests run, new context requests are held back until the
                     scheduled tokens (each context request's whole prompt + one per generation request)
                     reach r x max_num_tokens or T steps have waited (tensorrt_llm/_torch/pyexecutor/
                     py_executor.py `_waiting_requests`, called from `_schedule` only when both kinds are
                     scheduled and attention DP is off; defaults from llmapi/llm_args.py).
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
    recv_interval: int = 1
    """SGLang --scheduler-recv-interval: step weight between takes of new requests (1: every step)."""
    batch_wait_iters: int = 0
    """TensorRT-LLM batch_wait_timeout_iters: steps new context requests may be held back (0: off)."""
    batch_wait_tokens_ratio: float = 0.0
    """TensorRT-LLM batch_wait_max_tokens_ratio: scheduled tokens, as a share of the step budget, that end the
    wait (0 ends it at once: no wait)."""

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


RECV_INTERVAL_MAX = 1000
"""The largest --recv-interval simulated: a prefill step weighs 1000, so above it a step with a prefill would no
longer be followed by a take of new requests (a setting no engine run uses)."""


def policy_for(engine: Engine, max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
               prefix_hit_rate: float = 0.0, batch: int | None = None, recv_interval: int | None = None,
               batch_wait_iters: int | None = None,
               batch_wait_tokens_ratio: float | None = None) -> tuple[Policy, tuple[float, str] | None]:
    """(the engine's policy with the user's overrides, (the share of memory it plans with, of "total" or
    "free" memory), or None for the defaults' share of the whole device).

    An engine without a `scheduler` block (eager PyTorch and the others) runs static batches of
    `batch` requests; `batch` also sets a static policy's batch when its file leaves it to the user.
    `recv_interval` is SGLang's, `batch_wait_*` TensorRT-LLM's (see the module docstring); naming one for
    another engine is an error."""
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
    if recv_interval is not None:
        if policy_cls is not Sglang:
            raise ConfigError(f"--recv-interval is SGLang's --scheduler-recv-interval; engine '{engine.name}' takes "
                              "new requests at every step")
        value = _positive(recv_interval, "--recv-interval")
        if value > RECV_INTERVAL_MAX:
            raise ConfigError(f"--recv-interval must be in [1, {RECV_INTERVAL_MAX}], got {value}")
        policy = replace(policy, recv_interval=value)
    if batch_wait_iters is not None or batch_wait_tokens_ratio is not None:
        if policy_cls is not Trtllm:
            raise ConfigError(f"--batch-wait-iters and --batch-wait-tokens-ratio are TensorRT-LLM's "
                              f"batch_wait_timeout_iters and batch_wait_max_tokens_ratio; engine '{engine.name}' "
                              "does not hold back new requests")
        iters = 0 if batch_wait_iters is None else batch_wait_iters
        if isinstance(iters, bool) or not isinstance(iters, int) or not 0 <= iters <= 100_000:
            raise ConfigError(f"--batch-wait-iters must be a whole number of steps in [0, 100000], got {iters!r}")
        ratio = finite(0.0 if batch_wait_tokens_ratio is None else batch_wait_tokens_ratio,
                       "--batch-wait-tokens-ratio")
        if not 0 <= ratio <= 1:
            raise ConfigError(f"--batch-wait-tokens-ratio must be in [0, 1], got {ratio:g}")
        policy = replace(policy, batch_wait_iters=iters, batch_wait_tokens_ratio=ratio)
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
    if policy.recv_interval > 1:
        parts.append(f"new requests taken every {policy.recv_interval} decode steps")
    if policy.batch_wait_iters and policy.batch_wait_tokens_ratio:
        parts.append(f"new prompts held up to {policy.batch_wait_iters} steps until "
                     f"{policy.batch_wait_tokens_ratio:.0%} of the budget is scheduled")
    return ", ".join(parts)


