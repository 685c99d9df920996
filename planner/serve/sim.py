"""The event loop: one model copy serving requests step by step under a scheduler policy.

State. Requests wait (FCFS; a preempted one goes back to the front), run a prefill (whole or in
chunks), then decode one token per step until their output is complete. The clock advances by the
predicted time of each step (steps.py), or jumps to the next arrival when nothing runs.

Decoding sequences are not visited one by one per step (a run has millions of sequence-steps): with
g the number of decode steps so far, a sequence that joins at step g0 with c0 tokens in its KV cache
has c0 + (g − g0) after step g, so
    its last step is known when it joins: a heap keyed by g0 + remaining tokens,
    the sum of contexts grows by the number of sequences at every step,
    it needs a new KV block before step g when (c0 − g0 + g) mod block = 0: sequences are counted in
    `block` buckets by (c0 − g0) mod block, and bucket (−g) mod block is the number needing one.
A stretch of decode-only steps in which nothing can happen (no request waiting or prefilling, no
completion, no arrival, no KV shortage) is run at once in closed form (`decode_run`).
Preemption (recompute) takes the latest admitted running sequence, frees its blocks and puts it at the
front of the queue to be prefilled again over its prompt and the tokens it had generated.

Tokens. A prefill of a prompt's I tokens produces the first output token (TTFT); each decode step
then feeds the last token back (its KV is written) and produces the next, so a request of O output
tokens takes O − 1 decode steps and ends with I + O − 1 tokens in its cache.

Server settings (policies.py). Under SGLang's recv_interval N > 1 an arrival waits in an inbox until the
scheduler next takes new requests: at once when the copy is idle or after a step with a prefill (weight
1000), else after N decode steps; a stretch of decode steps stops at that point. Under TensorRT-LLM's batch
wait, a step with generation requests leaves the context requests out while their whole prompts plus one
token per generation request stay under r x the step budget, for at most T steps in a row.

Little's law is checked, not assumed: the number of requests in the system is integrated over time as
arrivals and completions happen (`in_system_s`), independently of each request's latency.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from planner.errors import ConfigError
from planner.serve.policies import Policy
from planner.serve.steps import StepModel, blocks

PREFILL_STEP_WEIGHT = 1000
"""Weight of a step with a prefill in SGLang's recv counter (SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DEFAULT);
a decode step and an idle loop weigh 1."""

MAX_STEPS = 50_000_000
"""Steps one run may take before it is stopped (a guard against a load that never drains)."""


@dataclass(frozen=True, slots=True)
class Run:
    """What one model copy did: per request, and per step."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    """Time of the first output token, s (NaN for a request rejected: too long for the KV cache)."""
    finish_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    preemptions: np.ndarray
    """Times each request was preempted."""
    step_end_s: np.ndarray
    """End of every step, s."""
    step_kv_blocks: np.ndarray
    """KV blocks in use after every step."""
    step_running: np.ndarray
    step_waiting: np.ndarray
    step_preemptions: np.ndarray
    """Preemptions so far, after every step."""
    step_decodes: np.ndarray
    """Decode tokens every step produced (0 for a prefill-only step)."""
    step_count: np.ndarray
    """Engine steps each entry stands for (decode-only stretches are run, and recorded, at once)."""
    kv_blocks: int
    """KV blocks of the model copy."""
    busy_s: float
    """Seconds the copy ran steps."""
    energy_j: float
    """Joules of the copy's devices from the first arrival to the last completion (steps + idle)."""
    in_system_s: float
    """∫ (requests in the system) dt from the first arrival to the last completion, request·s."""
    prefill_tokens: int
    """Prompt tokens prefilled, recomputation included."""


class _Loop:
    """Mutable state of one run; `run()` returns the frozen Run."""

    def __init__(self, steps: StepModel, policy: Policy, kv_blocks: int, arrival, input_len, output_len,
                 clients: int, think_s: float, prefilled: bool):
        self.steps, self.policy, self.total = steps, policy, kv_blocks
        self.n = n = len(input_len)
        self.inp = [int(x) for x in input_len]
        self.out = [int(x) for x in output_len]
        if clients:
            self.arrival = [0.0] * min(clients, n) + [math.inf] * max(0, n - clients)
        else:
            self.arrival = [float(x) for x in arrival]
        self.clients, self.think_s, self.prefilled = clients, think_s, prefilled
        self.released = min(clients, n) if clients else n
        nan = math.nan
        self.first, self.finish = [nan] * n, [nan] * n
        self.preempted = [0] * n
        self.target, self.done, self.prior, self.generated = [0] * n, [0] * n, [0] * n, [0] * n
        self.held, self.join, self.stored0, self.epoch = [0] * n, [0] * n, [0] * n, [0] * n
        self.waiting: deque[int] = deque()
        self.inbox: deque[int] = deque()  # arrived, not yet taken by the scheduler (recv_interval > 1)
        self.recv_weight = 0  # SGLang's recv counter: step weight since new requests were last taken
        self.held_steps = 0  # TensorRT-LLM's batch_wait_iters_count: steps new prompts have been held back
        self.running: dict[int, bool] = {}  # rid -> decoding?  (insertion order = admission order)
        self.prefilling: list[int] = []
        self.heap: list[tuple[int, int, int]] = []
        self.bucket = [0] * policy.block_tokens
        self.g = 0
        self.decoding = 0
        self.context_sum = 0
        self.used = 0
        self.t = 0.0
        self.next_arrival = 0
        self.in_system = 0
        self.integral = 0.0
        self.last_event = 0.0
        self.busy = self.energy = 0.0
        self.preemptions = 0
        self._step_preemptions = 0
        self.prefill_tokens = 0
        self.trace = [array("d") for _ in range(7)]

    # ------------------------------------------------------------------ bookkeeping
    def _advance(self, when: float, delta: int) -> None:
        self.integral += self.in_system * (when - self.last_event)
        self.last_event = when
        self.in_system += delta

    def _absorb(self, until: float) -> None:
        arrival = self.arrival
        inbox = self.inbox if self.policy.recv_interval > 1 else None
        while self.next_arrival < self.n and arrival[self.next_arrival] <= until:
            rid = self.next_arrival
            self._advance(arrival[rid], 1)
            if inbox is None:
                self._queue(rid)
            else:
                inbox.append(rid)
            self.next_arrival += 1

    def _receive(self) -> None:
        """SGLang's recv: the inbox joins the queue when the counter has reached the interval, or at once
        when nothing runs (an idle loop takes a few microseconds and weighs 1)."""
        if self.recv_weight >= self.policy.recv_interval or (self.inbox and not (self.running or self.waiting)):
            while self.inbox:  # a take at the interval resets the counter whether or not anything came
                self._queue(self.inbox.popleft())
            self.recv_weight = 0

    def _hold_prompts(self, decodes: int) -> bool:
        """TensorRT-LLM's batch wait: True when this step's context requests are held back (the step runs the
        decodes alone). The context requests are those the step would schedule: running prefills, then
        waiting requests FCFS within the sequence limit and the budget left by the decodes; each counts its
        whole prompt (`get_tokens(0)`), each decode one token."""
        policy = self.policy
        if not (policy.batch_wait_iters and policy.batch_wait_tokens_ratio):
            return False
        if not decodes or not (self.prefilling or self.waiting):
            self.held_steps = 0
            return False
        budget = policy.token_budget - decodes
        tokens, seats, contexts = decodes, policy.max_seqs - len(self.running), len(self.prefilling)
        for rid in self.prefilling:
            tokens += self.inp[rid]
            budget -= self.target[rid] - self.done[rid]
        free = self.total - self.used
        for rid in self.waiting:
            left = self.target[rid] - self.done[rid]
            if budget <= 0 or seats <= 0 or (left > budget and not policy.chunked):
                break
            need = self._kv_needed(rid, self.prior[rid] + min(left, budget))
            if need > free:
                break
            tokens += self.inp[rid]
            budget -= left
            seats -= 1
            free -= need
            contexts += 1
        if not contexts:  # nothing the scheduler would schedule: TensorRT-LLM does not call its wait (nor count)
            return False
        if self.held_steps >= policy.batch_wait_iters or tokens >= policy.batch_wait_tokens_ratio * policy.token_budget:
            self.held_steps = 0
            return False
        self.held_steps += 1
        return True

    def _queue(self, rid: int) -> None:
        """A new request enters the queue, or is rejected when its whole sequence exceeds the KV cache."""
        if blocks(self.inp[rid] + self.out[rid], self.policy.block_tokens) > self.total:
            self._complete(rid, self.arrival[rid], rejected=True)
            return
        if self.prefilled:  # disaggregated decode: the KV arrives with the request, first token already out
            self.generated[rid] = 1
            self.first[rid] = self.arrival[rid]
            self.target[rid] = self.done[rid] = 0
            self.prior[rid] = self.inp[rid]
        else:
            hit = int(self.policy.prefix_hit_rate * self.inp[rid])
            self.prior[rid] = min(hit, self.inp[rid] - 1)
            self.target[rid] = self.inp[rid] - self.prior[rid]
        self.waiting.append(rid)

    def _complete(self, rid: int, when: float, rejected: bool = False) -> None:
        self.finish[rid] = math.nan if rejected else when
        self._advance(when, -1)
        if self.clients and self.released < self.n:
            nxt = self.released
            self.arrival[nxt] = when + self.think_s
            self.released += 1

    def _kv_needed(self, rid: int, tokens: int) -> int:
        """Blocks `rid` must add to hold `tokens` tokens (all reserved up front under reserve_output)."""
        if self.policy.reserve_output:
            want = blocks(self.inp[rid] + self.out[rid], self.policy.block_tokens)
        else:
            want = blocks(tokens, self.policy.block_tokens)
        return max(0, want - self.held[rid])

    def _stored(self, rid: int) -> int:
        return self.stored0[rid] + self.g - self.join[rid]

    def _preempt(self) -> None:
        """Preempt the latest admitted running request (recompute: it will be prefilled again)."""
        rid, decoding = self.running.popitem()
        bs = self.policy.block_tokens
        stored = self._stored(rid) if decoding else 0
        if decoding:
            self.generated[rid] += self.g - self.join[rid]
            self.context_sum -= stored
            self.bucket[(self.stored0[rid] - self.join[rid]) % bs] -= 1
            self.decoding -= 1
            self.epoch[rid] += 1
            self.prior[rid], self.target[rid] = 0, stored
        else:
            self.prefilling.remove(rid)
            self.target[rid] += self.prior[rid]
            self.prior[rid] = 0
        self.done[rid] = 0
        self.used -= blocks(stored, bs) if decoding and not self.policy.reserve_output else self.held[rid]
        self.held[rid] = 0
        self.preempted[rid] += 1
        self.preemptions += 1
        self.waiting.appendleft(rid)

    # ------------------------------------------------------------------ one step
    def _decode_blocks(self) -> int:
        if not self.decoding or self.policy.reserve_output:
            return 0
        return self.bucket[(-self.g) % self.policy.block_tokens]

    def _plan_prefill(self, budget: int, chunks: list, may_preempt: bool) -> int:
        """Add (rid, new tokens) to `chunks`: running prefills first, then waiting requests FCFS. A
        running prefill short of KV blocks preempts later admitted requests when `may_preempt` (not in a
        mixed step, whose decodes are already counted)."""
        policy = self.policy
        preempted_before = self._step_preemptions
        for rid in list(self.prefilling):
            if budget <= 0:
                return budget
            if rid not in self.running:  # preempted by an earlier prefill of this step
                continue
            q = min(self.target[rid] - self.done[rid], budget)
            need = self._kv_needed(rid, self.prior[rid] + self.done[rid] + q)
            while self.used + need > self.total and may_preempt and policy.preempts and \
                    next(reversed(self.running)) != rid:
                self._preempt()
            if self.used + need > self.total:
                return budget
            self.used += need
            self.held[rid] += need
            chunks.append((rid, q))
            budget -= q
        # vLLM V1 admits no waiting request in a step that preempted one (scheduler.py: `if not
        # preempted_reqs`): taking new work right after freeing blocks for running work would thrash
        while self.waiting and (budget > 0 or self.prefilled) and len(self.running) < policy.max_seqs and \
                self.preemptions == preempted_before:
            rid = self.waiting[0]
            left = self.target[rid] - self.done[rid]
            if left > budget and not policy.chunked:
                break
            q = min(left, budget)
            need = self._kv_needed(rid, self.prior[rid] + q)
            if self.used + need > self.total:
                break
            self.waiting.popleft()
            self.used += need
            self.held[rid] += need
            if q == 0:  # arrives prefilled (disaggregated decode): straight to decoding
                self.running[rid] = True
                self._join(rid, self.prior[rid])
                continue
            self.running[rid] = False
            self.prefilling.append(rid)
            chunks.append((rid, q))
            budget -= q
        return budget

    def _join(self, rid: int, stored: int) -> None:
        """`rid` starts decoding with `stored` tokens in its KV cache."""
        remaining = self.out[rid] - self.generated[rid]
        self.stored0[rid], self.join[rid] = stored, self.g
        self.context_sum += stored
        self.bucket[(stored - self.g) % self.policy.block_tokens] += 1
        self.decoding += 1
        self.running[rid] = True
        heapq.heappush(self.heap, (self.g + remaining, self.epoch[rid], rid))

    def step(self) -> bool:
        """Form and run one step; False when nothing could be scheduled."""
        policy = self.policy
        chunks: list[tuple[int, int]] = []
        decodes = 0
        self._step_preemptions = self.preemptions
        if self.prefilled and self.waiting:
            # disaggregated decode: arrivals bring their KV and join the decodes of this step
            self._plan_prefill(0, chunks, False)
        if not policy.mixed and (self.prefilling or self.waiting):
            self._plan_prefill(policy.token_budget, chunks, True)
        if not chunks:
            need = self._decode_blocks()
            while self.decoding and self.used + need > self.total and policy.preempts:
                self._preempt()
                need = self._decode_blocks()
            decodes = self.decoding
            self.used += need
            if policy.mixed and not self._hold_prompts(decodes):
                self._plan_prefill(policy.token_budget - decodes, chunks, False)
        if not chunks and not decodes:
            return False
        mean_context = self.context_sum / decodes if decodes else 0.0
        dt, joules = self.steps.step([(q, self.prior[rid] + self.done[rid]) for rid, q in chunks], decodes,
                                     mean_context)
        end = self.t + dt
        self.busy += dt
        self.energy += joules
        self._absorb(end)
        self.t = end
        if decodes:
            self.g += 1
            self.context_sum += decodes
            self._finish_decodes(end)
        for rid, q in chunks:
            self.done[rid] += q
            self.prefill_tokens += q
            if self.done[rid] < self.target[rid]:
                continue
            self.prefilling.remove(rid)
            if self.generated[rid] == 0:
                self.generated[rid] = 1
                self.first[rid] = end
            if self.generated[rid] >= self.out[rid]:
                del self.running[rid]
                self.used -= self.held[rid]
                self.held[rid] = 0
                self._complete(rid, end)
            else:
                self._join(rid, self.prior[rid] + self.target[rid])
        self.recv_weight += PREFILL_STEP_WEIGHT if chunks else 1
        self._record(end, decodes, 1)
        return True

    def _record(self, end: float, decodes: int, steps: int) -> None:
        for series, value in zip(self.trace, (end, self.used, len(self.running), len(self.waiting),
                                              self.preemptions, decodes, steps)):
            series.append(value)

    def _finish_decodes(self, end: float) -> None:
        """Complete the sequences whose last decode step was step g."""
        policy, heap = self.policy, self.heap
        while heap and heap[0][0] <= self.g:
            _, epoch, rid = heapq.heappop(heap)
            if epoch != self.epoch[rid] or not self.running.get(rid, False):
                continue
            stored = self._stored(rid)
            del self.running[rid]
            self.generated[rid] = self.out[rid]
            self.context_sum -= stored
            self.bucket[(self.stored0[rid] - self.join[rid]) % policy.block_tokens] -= 1
            self.decoding -= 1
            self.used -= self.held[rid] if policy.reserve_output else blocks(stored, policy.block_tokens)
            self.held[rid] = 0
            self._complete(rid, end)

    def decode_run(self) -> bool:
        """Run k ≥ 2 decode-only steps at once when nothing else can happen in between; False otherwise.

        Nothing waits and nothing is prefilling, so the batch B stays the same until the next completion
        (k ≤ the heap's next last step − g), the KV cache cannot run out (k steps add at most ⌈k/block⌉
        blocks per sequence: k ≤ block·⌊free/B⌋, then counted exactly from the buckets), the mean
        context grows by 1 a step within one segment of the step-time grid, where a step costs
        w + w'·j at step j, so k steps take k·w + w'·k(k − 1)/2, and the run stops at the step during
        which the next request arrives (as single steps would)."""
        if self.waiting or self.prefilling or not self.decoding or not self.heap:
            return False
        batch = self.decoding
        k = self.heap[0][0] - self.g
        room, w, ws, e, es = self.steps.decode_segment(batch, self.context_sum / batch)
        k = min(k, int(room) + 1)
        bs = self.policy.block_tokens
        if not self.policy.reserve_output:
            k = min(k, bs * ((self.total - self.used) // batch))
        if k < 2:
            return False
        arrival = self.arrival[self.next_arrival] if self.next_arrival < self.n else math.inf
        span = lambda j: j * w + ws * j * (j - 1) / 2  # noqa: E731
        if self.policy.recv_interval > 1:
            # arrivals wait in the inbox: the stretch runs to the next take of new requests, not to the arrival
            if self.inbox or arrival < math.inf:
                k = min(k, self.policy.recv_interval - self.recv_weight)
            arrival = math.inf
            if k < 2:
                return False
        if self.t + span(k) > arrival:  # the smallest k whose end reaches the arrival
            lo, hi = 1, k
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if self.t + span(mid) >= arrival else (mid + 1, hi)
            k = lo
            if k < 2:
                return False
        if not self.policy.reserve_output:
            g = self.g
            self.used += sum(n * (0 if j0 >= k else 1 + (k - 1 - j0) // bs)
                             for n, j0 in ((self.bucket[b], (-b - g) % bs) for b in range(bs)) if n)
        dt = span(k)
        end = self.t + dt
        self.busy += dt
        self.energy += k * e + es * k * (k - 1) / 2
        self._absorb(end)
        self.t = end
        self.g += k
        self.context_sum += batch * k
        self._finish_decodes(end)
        n = self.policy.recv_interval
        # SGLang's counter runs on through the stretch, taking (nothing) and restarting each time it reaches n:
        # its phase after k steps is (w + k) mod n, n when a take is due at the next step
        self.recv_weight = (self.recv_weight + k - 1) % n + 1 if n > 1 else self.recv_weight + k
        self._record(end, batch * k, k)
        return True

    def run(self) -> Run:
        steps = 0
        idle = 0.0
        while True:
            self._absorb(self.t)
            self._receive()
            if not self.running and not self.waiting:
                if self.next_arrival < self.n and self.arrival[self.next_arrival] < math.inf:
                    if steps:
                        idle += self.arrival[self.next_arrival] - self.t
                    self.t = self.arrival[self.next_arrival]
                    continue
                break
            if not self.decode_run() and not self.step():
                rid = self.waiting[0] if self.waiting else next(iter(self.running))
                raise ConfigError(f"request {rid} ({self.inp[rid]:,} + {self.out[rid]:,} tokens) cannot be scheduled: "
                                  f"{self.total:,} KV blocks of {self.policy.block_tokens} tokens and a step budget of "
                                  f"{self.policy.token_budget:,} tokens")
            steps += 1
            if steps > MAX_STEPS:
                raise ConfigError(f"the run passed {MAX_STEPS:,} steps: fewer requests, or a lower rate")
        energy = self.energy + idle * self.steps.idle_power_w
        f = lambda x: np.asarray(x, dtype=float)  # noqa: E731
        return Run(f(self.arrival), f(self.first), f(self.finish), np.asarray(self.inp), np.asarray(self.out),
                   np.asarray(self.preempted), *(f(s) for s in self.trace), self.total,
                   self.busy, energy, self.integral, self.prefill_tokens)


def simulate(steps: StepModel, policy: Policy, kv_blocks: int, arrival_s, input_len, output_len, clients: int = 0,
             think_s: float = 0.0, prefilled: bool = False, frontend_s: float = 0.0) -> Run:
    """Serve the requests on one model copy with `kv_blocks` KV blocks under `policy`.

    Open loop: `arrival_s` (sorted, s). Closed loop (`clients` > 0): the first `clients` requests are
    sent at 0 and each completion sends the next request `think_s` later; `arrival_s` is ignored.
    `prefilled`: requests arrive with their prompt's KV cache and first token (disaggregated decode).
    `frontend_s`: each request reaches the scheduler that long after it is sent (the engine's HTTP server);
    the Run's arrival_s are the send times, so TTFT and E2E include it and Little's law counts it in the
    system: the engine sees arrival_s + f (closed loop: the first clients' requests are sent at -f so that
    the engine sees them at 0, and a completion's next request arrives f later than think_s), and each
    completed request's f is added to in_system_s (a rejected one counts in neither E2E nor L)."""
    if frontend_s:
        arrival_s = np.asarray(arrival_s, dtype=float) + frontend_s
        run = simulate(steps, policy, kv_blocks, arrival_s, input_len, output_len, clients, think_s + frontend_s,
                       prefilled)
        done = int(np.isfinite(run.finish_s).sum())
        return replace(run, arrival_s=run.arrival_s - frontend_s, in_system_s=run.in_system_s + frontend_s * done)
    if policy.static():
        from planner.serve.static import simulate_static

        return simulate_static(steps, policy, kv_blocks, arrival_s, input_len, output_len, clients, think_s)
    return _Loop(steps, policy, kv_blocks, arrival_s, input_len, output_len, clients, think_s, prefilled).run()
