"""Static batching: the model `planner predict` has always used, run under arrivals.

When the copy is free, up to `batch` waiting requests start together (all that are waiting, if
fewer; a real static server does not wait to fill a batch). Prompts are padded to the longest and
prefilled in one pass (the predictor's exact prefill of that batch); then the batch decodes until its
longest output is done, every step at the full batch (finished sequences keep their slots).

With k requests of prompt I and outputs up to O, decode step j (1 ≤ j ≤ O − 1) sees a context of
I + j − 1 tokens, and steps are affine in the context (a + b·c), so the end of step j is in closed form:
    T_j = T_prefill + j·a + b·(j·I + j(j − 1)/2)
and a request of o output tokens completes at T_(o−1) (at T_prefill when o = 1).
"""

from __future__ import annotations

import math
from array import array
from collections import deque

import numpy as np

from planner.serve.policies import Policy
from planner.serve.sim import Run
from planner.serve.steps import StepModel, blocks


def simulate_static(steps: StepModel, policy: Policy, kv_blocks: int, arrival_s, input_len, output_len,
                    clients: int = 0, think_s: float = 0.0) -> Run:
    """Serve the requests in static batches of up to `policy.max_seqs` (see the module docstring)."""
    n = len(input_len)
    inp, out = [int(x) for x in input_len], [int(x) for x in output_len]
    if clients:
        arrival = [0.0] * min(clients, n) + [math.inf] * max(0, n - clients)
    else:
        arrival = [float(x) for x in arrival_s]
    released = min(clients, n) if clients else n
    first, finish = [math.nan] * n, [math.nan] * n
    bs = policy.block_tokens
    waiting: deque[int] = deque()
    trace = [array("d") for _ in range(4)]
    state = {"next": 0, "in": 0, "integral": 0.0, "last": 0.0}
    t = busy = energy = idle = 0.0
    prefill_tokens = 0
    batches = 0

    def advance(when: float, delta: int) -> None:
        state["integral"] += state["in"] * (when - state["last"])
        state["last"], state["in"] = when, state["in"] + delta

    def absorb(until: float) -> None:
        while state["next"] < n and arrival[state["next"]] <= until:
            rid = state["next"]
            advance(arrival[rid], 1)
            if blocks(inp[rid] + out[rid], bs) > kv_blocks:
                advance(arrival[rid], -1)  # rejected: longer than the whole KV cache
                release(arrival[rid])
            else:
                waiting.append(rid)
            state["next"] += 1

    def release(when: float) -> None:
        nonlocal released
        if clients and released < n:
            arrival[released] = when + think_s
            released += 1

    while True:
        absorb(t)
        if not waiting:
            if state["next"] < n and arrival[state["next"]] < math.inf:
                if batches:
                    idle += arrival[state["next"]] - t
                t = arrival[state["next"]]
                continue
            break
        batch = [waiting.popleft()]
        while waiting and len(batch) < policy.max_seqs:
            longest = max(inp[r] for r in batch + [waiting[0]]) + max(out[r] for r in batch + [waiting[0]])
            if (len(batch) + 1) * blocks(longest, bs) > kv_blocks:
                break
            batch.append(waiting.popleft())
        k = len(batch)
        prompt, longest_out = max(inp[r] for r in batch), max(out[r] for r in batch)
        prefill_s, prefill_j = steps.batch_prefill(k, prompt)
        prefill_tokens += k * prompt
        a, b, ea, eb = steps.decode_line(k, prompt, prompt + longest_out - 1)

        def end_of(j: int) -> float:
            return t + prefill_s + j * a + b * (j * prompt + j * (j - 1) / 2)

        for rid in batch:
            first[rid] = t + prefill_s
        done = sorted(batch, key=lambda r: out[r])
        for rid in done:
            when = end_of(out[rid] - 1)
            absorb(when)
            finish[rid] = when
            advance(when, -1)
            release(when)
            for series, value in zip(trace, (when, k * blocks(prompt + longest_out, bs), k, len(waiting))):
                series.append(value)
        steps_j = longest_out - 1
        end = end_of(steps_j)
        energy += prefill_j + steps_j * ea + eb * (steps_j * prompt + steps_j * (steps_j - 1) / 2)
        busy += end - t
        t = end
        batches += 1
    f = lambda x: np.asarray(x, dtype=float)  # noqa: E731
    zeros = np.zeros(len(trace[0]))
    return Run(f(arrival), f(first), f(finish), np.asarray(inp), np.asarray(out), np.zeros(n, dtype=int),
               f(trace[0]), f(trace[1]), f(trace[2]), f(trace[3]), zeros, zeros, np.ones(len(trace[0])), kv_blocks, busy,
               energy + idle * steps.idle_power_w, state["integral"], prefill_tokens)
