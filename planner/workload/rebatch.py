"""A workload's graph at a new batch size, derived from its graphs at batch 2 and 3.

Batch is the axis a sweep or `compare` varies most (10 batch sizes per shape and layout), and a
capture runs the model op by op through torch's meta kernels (about 10 ms for one folded decoder
layer). In the models derived here every number a graph holds is affine in the batch B: a shape
dimension is B x (a constant) or a constant, elements touched and storage offsets are products of
such dimensions with at most one factor of B, and the bytes autograd saves are sums of them. Two
captures at B = 2 and B = 3 therefore fix each number v(B) = v(2) + (v(3) - v(2)) x (B - 2); the graph
at any B > 3 is built from them record by record. A pair that differs in anything but a number (an op,
a module, a dtype, the count of records) is not derived: the caller captures instead.

Batch 1 is always captured: a dimension of size 1 changes strides and broadcasting, so it is not a
point on the line. Mixture-of-experts layers route B x S x k tokens over experts, a count that is not
affine once rounded; models with experts, and custom or library-built models whose code this module
has not been checked on, are captured at every batch. tests/workload/test_rebatch.py holds the derived
graphs equal to captured ones across the zoo's families, modes and quantization recipes."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from planner.workload.capture import OpGraph, OpRecord, TensorMeta
from planner.workload.graphs import Workload, WorkloadGraph, build_graph, resolve_workload
from planner.workload.zoo import Model

ANCHORS = (2, 3)
"""The batch sizes captured to derive every larger one."""
FAMILIES = ("decoder", "encoder", "vision")
"""Model families whose graphs are affine in the batch (zoo and config.json models)."""


class _NotAffine(Exception):
    """The two anchor graphs differ in something other than a number."""


def derivable(model: Model, workload: Workload) -> bool:
    """True when `workload`'s graph on `model` is derived from the anchors rather than captured."""
    return workload.batch > ANCHORS[-1] and _affine(model)


def _affine(model: Model) -> bool:
    return (model.family in FAMILIES and model.factory is None and not hasattr(model.config, "inputs")
            and not getattr(model.config, "num_experts", 0))


def graph_at(model: Model, workload: Workload) -> WorkloadGraph:
    """The graph of `workload` on `model`: derived from the batch-2 and batch-3 captures where
    `derivable` says so and the two agree in all but numbers, else captured (graphs.build_graph). At an
    anchor's own batch it is that anchor's capture (captured once, whichever asks first)."""
    if workload.batch in ANCHORS and _affine(model):
        return _anchor(model, workload)
    if not derivable(model, workload):
        return build_graph(model, workload)
    two = _anchor(model, replace(workload, batch=ANCHORS[0]))
    three = _anchor(model, replace(workload, batch=ANCHORS[1]))
    try:
        return derive(two, three, resolve_workload(model, workload))
    except _NotAffine:
        return build_graph(model, workload)


@lru_cache(maxsize=128)
def _anchor(model: Model, workload: Workload) -> WorkloadGraph:
    return build_graph(model, workload)


def clear_anchors() -> None:
    """Forget the anchor captures."""
    _anchor.cache_clear()


def derive(two: WorkloadGraph, three: WorkloadGraph, workload: Workload) -> WorkloadGraph:
    """The graph at `workload.batch` from the graphs at batch 2 (`two`) and 3 (`three`): each number
    extended along its line; storage identities (the dataflow the lowering follows) are batch 2's.
    Raises _NotAffine when the graphs differ in anything but numbers, or a number would go negative."""
    a, b = two.graph, three.graph
    if len(a.records) != len(b.records) or a.dtype != b.dtype or len(a.saved_bytes) != len(b.saved_bytes):
        raise _NotAffine
    steps = workload.batch - ANCHORS[0]
    records = tuple(_record(x, y, steps) for x, y in zip(a.records, b.records))
    saved = tuple((_same(m, n), _number(x, y, steps)) for (m, x), (n, y) in zip(a.saved_bytes, b.saved_bytes))
    _same((two.params, two.active_params, two.param_by_top, two.layer_params),
          (three.params, three.active_params, three.param_by_top, three.layer_params))
    return replace(two, workload=workload, graph=OpGraph(records, a.dtype, saved))


def _same(x, y):
    """x, when it equals y (a name, a module, a parameter count that must not change with the batch)."""
    if x != y:
        raise _NotAffine
    return x


def _number(x, y, steps: int):
    """x at batch 2 and y at batch 3, extended `steps` past batch 2."""
    if x == y:
        return x
    v = x + (y - x) * steps
    if v < 0:
        raise _NotAffine
    return v


def _record(x: OpRecord, y: OpRecord, steps: int) -> OpRecord:
    if x.op != y.op or x.module != y.module or x.phase != y.phase or len(x.args) != len(y.args) or \
            len(x.outputs) != len(y.outputs):
        raise _NotAffine
    args = tuple((_same(name, other), _value(v, w, steps)) for (name, v), (other, w) in zip(x.args, y.args))
    outputs = tuple(_tensor(v, w, steps) for v, w in zip(x.outputs, y.outputs))
    return replace(x, args=args, outputs=outputs)


def _value(v, w, steps: int):
    tv, tw = type(v), type(w)
    if tv is not tw:
        raise _NotAffine
    if tv is TensorMeta:
        return _tensor(v, w, steps)
    if tv is tuple:
        if len(v) != len(w):
            raise _NotAffine
        return tuple(_value(p, q, steps) for p, q in zip(v, w))
    if tv is int or tv is float:
        return _number(v, w, steps)
    if v != w:  # None, bool, str: a flag or a name that changes with the batch
        raise _NotAffine
    return v


def _tensor(v: TensorMeta, w: TensorMeta, steps: int) -> TensorMeta:
    if v.dtype != w.dtype or v.bits != w.bits or v.col_major != w.col_major or len(v.shape) != len(w.shape):
        raise _NotAffine
    if v.shape == w.shape and v.touched == w.touched and v.offset == w.offset:
        return v
    shape = tuple(_number(p, q, steps) for p, q in zip(v.shape, w.shape))
    return TensorMeta(shape, v.dtype, v.bits, _number(v.touched, w.touched, steps), v.col_major, v.storage,
                      _number(v.offset, w.offset, steps))
