"""Engine step times for the simulator: the predictor's passes on a grid, interpolated.

A continuous-batching step runs, in one forward pass, the prefill chunks of some requests and one
decode token of every running sequence. Its time is built from the predictor's own passes
(planner/predict/inference.py pass_time) of one model copy, split into the part that depends only
on the step's token count and the attention, which depends on each sequence's context:

    T = Σ q_i + B                                 tokens in the step: chunks q_i, B decodes
    step = L(T) + Σ_i [A(p_i + q_i) − A(p_i)] + D_attn(B, c̄)          (mixed or prefill-only step)
    step = D(B, c̄)                                                    (decode-only step)

    L(T)       a prefill pass of T tokens less its attention: GEMMs, norms, elementwise, TP all-reduce
               and host launches all scale with the tokens in the step, whichever request they are from
    A(S)       attention of a causal prefill of S tokens; a chunk of q tokens after p cached ones
               attends to p + q keys per query on average, so it costs A(p + q) − A(p) (exact for the
               FLOP term, which grows as S², and for the KV reads)
    D(B, c)    a decode pass of B sequences at context c: affine in c (attention reads c keys per
               sequence), so the mean context c̄ of the running sequences gives the exact step time
    D_attn     the attention of that decode pass, from the same graphs' breakdown

Grids. L and A are predicted at T, S in 1, 2, 3, 4, 6, 8, 12, ... (powers of two and the points
halfway between, in log), computed when a step first needs them and kept; L is interpolated
linearly in T, A as A(S)/S linearly in S (A/S is affine in S for causal attention). D is predicted
on the same grid of batches and at contexts 128·4^k, interpolated linearly in both (decode is nearly
affine in the context: attention reads c keys per sequence, so the mean context of the running
sequences gives the step time). Points the caller names (a fixed prompt length)
are added to the grid, so the closed forms hold exactly there. A batch of whole prompts run together
(static batching) uses the exact prefill pass of that batch instead (`batch_prefill`).

Energy. Each pass's energy for one model copy (devices busy and idle, planner/predict/inference.py
batch_energy) gives its average power; a step draws the prefill pass's power over its L and chunk
attention time and the decode pass's over its decode attention.
"""

from __future__ import annotations

import bisect
import math

from planner.errors import ConfigError
from planner.predict.context import Target
from planner.predict.inference import batch_energy, pass_time
from planner.predict.memory import kv_bytes_per_token, kv_capacity_tokens
from planner.predict.timing import stage_times
from planner.workload.device_graph import device_graph
from planner.workload.graphs import LIMITS, Workload
from planner.workload.parallelism import Parallelism
from planner.workload.zoo import Model

DECODE_CONTEXTS = tuple(128 * 4**i for i in range(9))
"""Contexts (tokens) at which decode batches are predicted (128 to 8M, x4), when a step needs them."""


def grid_points(upto: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, 16, ... up to the first point ≥ `upto`."""
    points, p = [1, 2], 2
    while points[-1] < upto:
        points += [p * 3 // 2, p * 2]
        p *= 2
    return sorted(set(points))


class StepModel:
    """Step times and energies of one model copy (tp·pp devices) of `model` under an engine.

    A cache, not a value: grid points are predicted when a step first needs them (each is one graph
    capture and roofline, about 40 ms) and kept for the life of the object."""

    def __init__(self, target: Target, model: Model, par: Parallelism, dtype: str, engine: str,
                 exact_tokens: tuple[int, ...] = (), exact_contexts: tuple[int, ...] = ()):
        if model.family != "decoder":
            raise ConfigError(f"serving simulation needs a generative (decoder) model; {model.name} is "
                              f"{model.family}")
        self.target, self.model, self.dtype, self.engine = target, model, dtype, engine
        self.par = Parallelism(tp=par.tp, pp=par.pp, dp=1, ep=par.ep)
        self.devices = self.par.tp * self.par.pp
        self._grid = grid_points(LIMITS["context_len"] * 2)
        for t in exact_tokens:
            if t not in self._grid:
                bisect.insort(self._grid, t)
        self._prefill: dict[int, tuple[float, float, float]] = {}  # T -> (L s, A s, power W)
        self._contexts = sorted(set(DECODE_CONTEXTS) | set(exact_contexts))
        self._decode: dict[tuple[int, int], tuple[float, float, float]] = {}  # (B, c) -> (wall, attention, J)
        self._lines: dict[tuple[int, int], tuple[float, ...]] = {}  # (B, context segment) -> affine coefficients
        self._batch: dict[tuple[int, int], tuple[float, float]] = {}
        first = device_graph(model, self._workload("prefill", 1, 1), self.par)
        self.kv_bytes_per_token = sum(kv_bytes_per_token(first, s) for s in range(self.par.pp)) * self.par.tp
        """KV-cache bytes of one token over the whole model copy."""
        power = target.power
        self.idle_power_w = power.idle_w(target.device) * self.devices
        """Draw of the model copy's devices with no work, W."""

    def _workload(self, mode: str, batch: int, tokens: int) -> Workload:
        if mode == "prefill":
            return Workload("prefill", batch, tokens, dtype=self.dtype, engine=self.engine)
        return Workload("decode", batch, context_len=tokens, dtype=self.dtype, engine=self.engine)

    def _pass(self, mode: str, batch: int, tokens: int) -> tuple[float, float, float]:
        """(wall s, attention s, copy energy J) of one pass. A prefill step of more tokens than a learned position
        table holds (gpt2's 1,024) is several requests' prompts: it runs as that many sequences of at most the
        table's length each, not as one sequence the model could not take."""
        limit = self._learned_positions()
        if mode == "prefill" and limit and tokens > limit:
            parts = math.ceil(tokens / limit)
            batch, tokens = batch * parts, math.ceil(tokens / parts)
        dg = device_graph(self.model, self._workload(mode, batch, tokens), self.par)
        stages = stage_times(dg, self.target.device, self.target.efficiency, self.target.power)
        wall, busy, energy = pass_time(self.target, dg, batch * tokens if mode == "prefill" else batch, stages)
        attention = sum(t for st in stages for (_, cat), t in st.breakdown_s.items() if cat == "attention")
        return wall, attention, batch_energy(self.target, self.par, wall, busy, energy)

    def _learned_positions(self) -> int | None:
        """The length of the model's learned position table, or None where positions are rotary (no hard limit)."""
        cfg = self.model.config
        if getattr(cfg, "position", None) == "learned":
            return getattr(cfg, "max_position_embeddings", None)
        return None

    def kv_capacity_tokens(self, budget_tokens: int, memory_fraction: float) -> int:
        """KV tokens that fit on the model copy beside the weights and the activations of a step of
        `budget_tokens` tokens, with `memory_fraction` of each device's memory usable."""
        from dataclasses import replace

        budget, batch = max(1, budget_tokens), 1
        limit = self._learned_positions()
        if limit and budget > limit:  # as in _pass: the step's prompts as sequences the position table holds
            batch = math.ceil(budget / limit)
            budget = math.ceil(budget / batch)
        dg = device_graph(self.model, self._workload("prefill", batch, budget), self.par)
        defaults = replace(self.target.defaults, memory_usable_fraction=memory_fraction)
        tokens = kv_capacity_tokens(dg, self.target.device, defaults)
        return 0 if tokens is None else tokens

    # ------------------------------------------------------------------ grid values
    def _prefill_point(self, t: int) -> tuple[float, float, float]:
        got = self._prefill.get(t)
        if got is None:
            wall, attention, energy = self._pass("prefill", 1, t)
            got = self._prefill[t] = (wall - attention, attention, energy / wall)
        return got

    def _bracket(self, x: float) -> tuple[int, int, float]:
        """Grid points lo ≤ x ≤ hi and the weight of hi."""
        i = bisect.bisect_left(self._grid, x)
        if i < len(self._grid) and self._grid[i] == x:
            return self._grid[i], self._grid[i], 0.0
        if i == 0 or i >= len(self._grid):
            raise ConfigError(f"a step of {x:g} tokens is outside the step-time grid (1 to {self._grid[-1]:,})")
        lo, hi = self._grid[i - 1], self._grid[i]
        return lo, hi, (x - lo) / (hi - lo)

    def linear_s(self, tokens: float) -> float:
        """L(T): seconds of a step's token-proportional part for T tokens."""
        lo, hi, w = self._bracket(tokens)
        a = self._prefill_point(lo)[0]
        return a if w == 0 else a + w * (self._prefill_point(hi)[0] - a)

    def prefill_power_w(self, tokens: float) -> float:
        lo, hi, w = self._bracket(tokens)
        a = self._prefill_point(lo)[2]
        return a if w == 0 else a + w * (self._prefill_point(hi)[2] - a)

    def attention_s(self, seq: float) -> float:
        """A(S): attention seconds of a causal prefill of S tokens (0 at S = 0)."""
        if seq <= 0:
            return 0.0
        lo, hi, w = self._bracket(seq)
        a = self._prefill_point(lo)[1] / lo
        if w == 0:
            return a * seq
        return seq * (a + w * (self._prefill_point(hi)[1] / hi - a))

    def chunk_attention_s(self, new: int, prior: int) -> float:
        """Attention seconds of a chunk of `new` tokens after `prior` cached ones."""
        return self.attention_s(prior + new) - self.attention_s(prior)

    def _decode_point(self, b: int, c: int) -> tuple[float, float, float]:
        got = self._decode.get((b, c))
        if got is None:
            got = self._decode[(b, c)] = self._pass("decode", b, c)
        return got

    def _line(self, batch: int, i: int) -> tuple[float, ...]:
        """(context c0, wall at c0 s, wall per token s, attention at c0 s, per token s, energy at c0 J, per
        token J) of decode steps of `batch` sequences between context grid points i − 1 and i."""
        lo, hi = self._contexts[i - 1], self._contexts[i]
        blo, bhi, bw = self._bracket(batch)
        ends = []
        for c in (lo, hi):
            row = self._decode_point(blo, c)
            if bw:
                row = tuple(x + bw * (y - x) for x, y in zip(row, self._decode_point(bhi, c)))
            ends.append(row)
        (w0, a0, e0), (w1, a1, e1) = ends
        span = hi - lo
        return lo, w0, (w1 - w0) / span, a0, (a1 - a0) / span, e0, (e1 - e0) / span

    def decode(self, batch: int, context: float) -> tuple[float, float, float]:
        """(wall s, attention s, energy J) of a decode step of `batch` sequences at mean context `context`:
        interpolated linearly in the batch and in the context between grid points (below the first
        context point, extrapolated along the first segment)."""
        i = bisect.bisect_right(self._contexts, context)
        if i >= len(self._contexts):
            if context > self._contexts[-1]:
                raise ConfigError(f"a context of {context:g} tokens is beyond the step-time grid "
                                  f"({self._contexts[-1]:,})")
            i = len(self._contexts) - 1
        key = (batch, i or 1)
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = self._line(batch, i or 1)
        c0, w, ws, a, as_, e, es = line
        d = context - c0
        return w + ws * d, a + as_ * d, e + es * d

    def decode_segment(self, batch: int, context: float) -> tuple[float, float, float, float, float]:
        """(tokens of context left in this grid segment, wall s at `context`, wall per context token s,
        energy J at `context`, energy per token J) of decode steps of `batch` sequences."""
        i = min(max(1, bisect.bisect_right(self._contexts, context)), len(self._contexts) - 1)
        key = (batch, i)
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = self._line(batch, i)
        c0, w, ws, _, _, e, es = line
        d = context - c0
        return self._contexts[i] - context, w + ws * d, ws, e + es * d, es

    # ------------------------------------------------------------------ steps
    def step(self, chunks: list[tuple[int, int]], decodes: int, mean_context: float) -> tuple[float, float]:
        """(seconds, joules) of one engine step: `chunks` as (new tokens, prior tokens) per prefilling
        request, `decodes` running sequences at `mean_context` tokens of context on average."""
        if not chunks:
            wall, _, energy = self.decode(decodes, mean_context)
            return wall, energy
        tokens = sum(q for q, _ in chunks) + decodes
        prefill_s = self.linear_s(tokens) + sum(self.chunk_attention_s(q, p) for q, p in chunks)
        energy = prefill_s * self.prefill_power_w(tokens)
        if decodes:
            wall, attention, joules = self.decode(decodes, mean_context)
            prefill_s += attention
            energy += attention * joules / wall
        return prefill_s, energy

    def batch_prefill(self, batch: int, seq: int) -> tuple[float, float]:
        """(seconds, joules) of one prefill pass of `batch` prompts of `seq` tokens each, run as the
        predictor runs it (static batching)."""
        got = self._batch.get((batch, seq))
        if got is None:
            wall, _, energy = self._pass("prefill", batch, seq)
            got = self._batch[(batch, seq)] = (wall, energy)
        return got

    def decode_line(self, batch: int, first: int, last: int) -> tuple[float, float, float, float]:
        """(wall at context 0 s, wall per context token s, energy at 0 J, energy per token J) of decode
        steps of exactly `batch` sequences, through the passes predicted at contexts `first` and `last`
        (static batching: the batch's first and last decode steps)."""
        (w0, _, e0), (w1, _, e1) = self._decode_point(batch, first), self._decode_point(batch, max(last, first))
        span = max(1, last - first)
        sw, se = (w1 - w0) / span, (e1 - e0) / span
        return w0 - sw * first, sw, e0 - se * first, se


def check_budget(tokens: int) -> int:
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= LIMITS["context_len"]:
        raise ConfigError(f"a step token budget must be a whole number in [1, {LIMITS['context_len']:,}], got {tokens!r}")
    return tokens


def blocks(tokens: int, block_tokens: int) -> int:
    """KV blocks that hold `tokens` tokens."""
    return -(-tokens // block_tokens) if tokens > 0 else 0

