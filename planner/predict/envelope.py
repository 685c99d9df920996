"""The padding envelope: no op takes longer than the same op run at a larger size, and its time never
falls as a size a kernel can pad grows.

A GEMM of M rows can run as the GEMM of M' > M rows with the extra rows padded; decode attention over a
batch of B sequences and a context of S tokens can run as attention over more of either, the extra
masked. Engines do both: CUDA graphs are captured at padded batch sizes, paged KV caches are read in
whole blocks. Efficiencies are interpolated between measured sizes, and a larger shape can read a
higher efficiency than a smaller one: decode attention at 4,000 tokens read 14.4 us on the H100
profile where 1,000 tokens read 16.6 us, a 1-row GEMM on the B200 took 9.3 us where 32 rows took
4.8 us. Such a time is not what the hardware would do: its kernel would run the padded shape.

Which sizes pad. Decode attention's batch and context, and a GEMM's rows (a grouped expert GEMM's rows per
expert), in every step planner times as a whole (predict, serve, plan, sweep): a longer context, a larger
batch or a longer prompt is more work, and no step may get faster as it grows (issue 38's monotonicity law).
Serving engines do pad: CUDA graphs are captured at bucketed batch sizes with each bucket's kernels tuned.
Eager PyTorch calls cuBLAS at the shape it has, and cuBLAS's kernel choice is not monotone: our H100 eager
profile measured a 1 x 16,378 x 16,378 bf16 GEMM at 226 us and 16 rows at 217 us (hardware_specs/
calibration/h100-sxm/pytorch-eager.json); in a step the envelope gives the smaller size the larger one's
time, an optimistic departure no larger than such a dip (dev_validation moved by at most 0.7% on any row
when eager and prefill GEMMs joined the envelope). A single kernel set beside its own measurement
(`planner op`, trace analysis, calibration checks) is timed at its own shape (`rows_pad` False).

The rule, per op with a paddable size (GEMMs of M < GEMM_TOP rows where rows pad; decode attention, at
most DECODE_QUERY_TOKENS query tokens, with B < BATCH_TOP and S < CONTEXT_TOP):
    grid        powers of two g along each paddable size, from the largest at or below the op's size to
                the top: g_0 <= size < g_1 < ... <= top
    t(g)        the roofline time of the op's anchor resized to g: its cost by planner/workload/counting.py's
                formula and its efficiency at that shape, the same for every op of the shape family (a
                fused group's other work, or the bytes its fusion saves, would differ from op to op and
                the grids of two ops would not nest: it enters through the floor below)
    E(g)        min of t over every grid point at or above g in every size (the quadrant, for two
                sizes): what a kernel padding up to the grid can reach; non-decreasing in each size
    time        E interpolated between the grid points around the op's size, linear in log size and
                log time (bilinear for two sizes), and at least the op's own roofline
                max(FLOP / peak, bytes / bandwidth) of its whole (fused) cost
So time is non-decreasing in every padded size (a log-linear interpolation of a non-decreasing grid is
non-decreasing, and so is the roofline), equals E at the grid points, and never beats the roofline.
Sizes at or above the tops are timed as measured: large GEMMs are compute-bound and efficient.
tests/predict/test_envelope.py checks the closed forms and the monotonicity.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from planner.memo import IdentityMemo
from planner.workload.capture import OpRecord, TensorMeta
from planner.workload.counting import OpCost, classify

GEMM_TOP = 4096
"""GEMMs of fewer rows are timed on the envelope, up to this many rows."""
BATCH_TOP = 1024
"""Decode attention of a smaller batch is timed on the envelope, up to this batch: twice the largest batch
vLLM captures as a CUDA graph by default (max_cudagraph_capture_size, at most 512: hardware_specs/engines/
vllm.json, from vllm/config/compilation.py)."""
CONTEXT_TOP = 131072
"""Decode attention over a shorter context is timed on the envelope, up to this many tokens: the longest
context of the zoo's decoders (Llama 3.1's 131,072, models/configs/llama-3.1-8b.json)."""
DECODE_QUERY_TOKENS = 16
"""Attention with at most this many query tokens per sequence is decode attention."""

_ROWS = {"aten.mm": ("self",), "aten._scaled_mm": ("self",), "aten._int_mm": ("self",),
         "aten.addmm": ("mat1", "self"), "aten._addmm_activation": ("mat1", "self")}
"""The arguments whose dim 0 is a 2-D GEMM's M (addmm's bias, where it is [M, N])."""

Axis = tuple[tuple[str, ...], int, int, int]
"""(argument names, dimension, the op's size there, the grid's top)."""


def axes(rec: OpRecord, category: str, rows_pad: bool = False) -> list[Axis]:
    """The paddable sizes of `rec`: [] for an op timed as measured (not decode attention, nor a GEMM where
    `rows_pad` (in a step timed as a whole), or a size at or above its top)."""
    if category == "matmul" and rows_pad and rec.op.startswith("fused.experts:"):
        # a grouped expert GEMM's lookup record [E, m, K] x [E, K, N] (lowering._batched): m, the most rows
        # of any expert, pads; its result [E, m, N] with it
        a = rec.arg("self")
        if rec.packet != "aten.bmm" or not isinstance(a, TensorMeta) or len(a.shape) != 3:
            return []
        found = [(("self",), 1, a.shape[1], GEMM_TOP)]
    elif category == "matmul" and rows_pad:
        names = _ROWS.get(rec.packet)
        a = rec.arg(names[0]) if names else None
        if not isinstance(a, TensorMeta) or len(a.shape) != 2 or not rec.outputs or len(rec.outputs[0].shape) != 2:
            return []
        bias = rec.arg("self") if names[0] == "mat1" else None
        if not (isinstance(bias, TensorMeta) and len(bias.shape) == 2):  # a bias [N] keeps its size
            names = names[:1]
        found = [(names, 0, a.shape[0], GEMM_TOP)]
    elif category == "attention" and not rec.packet.endswith("_backward"):
        q, k = rec.arg("query"), rec.arg("key")
        if not isinstance(q, TensorMeta) or not isinstance(k, TensorMeta) or len(q.shape) != 4 or len(k.shape) != 4 \
                or q.shape[2] > DECODE_QUERY_TOKENS:
            return []
        found = [(("query", "key", "value"), 0, q.shape[0], BATCH_TOP), (("key", "value"), 2, k.shape[2], CONTEXT_TOP)]
    else:
        return []
    return found if all(0 < size < top for _, _, size, top in found) else []


def _grid(size: int, top: int) -> list[int]:
    """Powers of two from the largest at or below `size` up to `top` (at least two points)."""
    g = 1 << (size.bit_length() - 1)
    out = []
    while g <= top:
        out.append(g)
        g *= 2
    return out


def resized(rec: OpRecord, sizes: list[tuple[Axis, int]]) -> tuple[OpRecord, OpCost] | None:
    """`rec`'s anchor op with each axis's dimension set to its new size (arguments named by the axis, and
    results whose dimension had the op's size), and its cost there (planner/workload/counting.py's formula);
    None where it has no formula. The same for every op of a shape family, fused or not."""
    args, outputs = rec.args, rec.outputs
    for (names, dim, size, _), new in sizes:
        def grow(t, dim=dim, size=size, new=new):
            # a tensor along the axis has dimensions after it (a 1-D result of a few elements, an RNG seed
            # pair, is no batch however many it holds)
            if not isinstance(t, TensorMeta) or len(t.shape) <= dim + 1 or t.shape[dim] != size:
                return t
            # built directly: dataclasses.replace costs three times as much, and a grid builds thousands
            return TensorMeta(t.shape[:dim] + (new,) + t.shape[dim + 1:], t.dtype, t.bits, t.touched * new // size,
                              t.col_major, t.storage, t.offset)
        args = tuple((name, grow(value) if name in names else value) for name, value in args)
        outputs = tuple(grow(t) for t in outputs)
    # named as the anchor op, not "fused.": its efficiency is read at its own shape; a grouped expert GEMM
    # keeps its name (each expert's rows fill tiles of their own: profile_select reads its waves per expert)
    name = rec.op if rec.op.startswith("fused.experts:") else rec.packet
    out = OpRecord(name, rec.packet, rec.module, rec.phase, args, outputs, rec.mutates, rec.is_view)
    category, at = classify(out, False)
    return None if category == "unsupported" else (out, at)


def grid_ops(rec: OpRecord, category: str, rows_pad: bool = False
             ) -> tuple[list[Axis], list[list[int]], dict] | None:
    """(axes, grid per axis, {grid point (a tuple of sizes): (record, cost)}) of an op on the envelope, or None.
    Memoized by the identity of the record: the same op is timed on every device."""
    found = axes(rec, category, rows_pad)
    if not found:
        return None
    return _GRIDS.get((rec,), (category, rows_pad), lambda: _grid_ops(rec, found))


def _grid_ops(rec: OpRecord, found: list[Axis]):
    grids = [_grid(size, top) for _, _, size, top in found]
    points = {}
    for point in _product(grids):
        op = resized(rec, list(zip(found, point)))
        if op is None:
            return None
        if len(_INTERNED) >= 65536:
            _INTERNED.clear()
        # one object per distinct resized record: ops of one shape family share grid points, and a device's
        # lookups of them key by identity (planner/predict/timing.py)
        points[point] = (_INTERNED.setdefault(op[0], op[0]), op[1])
    return found, grids, points


_GRIDS = IdentityMemo(8192)
_INTERNED: dict[OpRecord, OpRecord] = {}


def _product(grids: list[list[int]]) -> list[tuple[int, ...]]:
    out = [()]
    for g in grids:
        out = [p + (x,) for p in out for x in g]
    return out


def envelope_s(rec: OpRecord, category: str, time_at: Callable[[OpRecord, OpCost], float], floor_s: float,
               rows_pad: bool = False) -> float | None:
    """The op's time on the envelope (module docstring), in seconds, given `time_at(record, cost)` (the
    roofline time of a resized op on the device) and the op's own roofline `floor_s`; `rows_pad`: a GEMM's
    rows pad (an op of a step timed as a whole). None for an op timed as measured."""
    plan = grid_ops(rec, category, rows_pad)
    if plan is None:
        return None
    found, grids, points = plan
    t = {point: time_at(*op) for point, op in points.items()}
    # E: the least time at or above each grid point in every size (suffix minimum, last point first)
    best: dict[tuple[int, ...], float] = {}
    for point in sorted(t, reverse=True):
        value = t[point]
        for i, g in enumerate(grids):
            j = g.index(point[i])
            if j + 1 < len(g):
                value = min(value, best[point[:i] + (g[j + 1],) + point[i + 1:]])
        best[point] = value
    # interpolate in log size and log time between the grid points around the op's sizes
    weights = []
    for (_, _, size, _), g in zip(found, grids):
        weights.append(math.log2(size / g[0]))  # in [0, 1): g[0] <= size < g[1]
    total = 0.0
    for corner in _product([[0, 1]] * len(found)):
        w = 1.0
        for u, c in zip(weights, corner):
            w *= u if c else 1 - u
        if w:
            total += w * math.log(best[tuple(g[c] for g, c in zip(grids, corner))])
    return max(math.exp(total), floor_s)
