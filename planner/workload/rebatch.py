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
graphs equal to captured ones across the zoo's families, modes and quantization recipes.

The same holds across tensor-parallel widths t (`derive_tp`, which device_graph.py calls). What one
device of a decoder runs is the model with heads, KV heads, intermediate size and vocabulary divided
by t (parallelism.shard_config). Where t divides all four, each number of the graph holds at most one
of them as a factor, so it is affine in 1/t: v(t) = v(1) + (v(2) - v(1)) x (2 - 2/t), from the graphs
at t = 1 and 2 (each itself captured or derived across the batch). A width that leaves a remainder,
replicates KV heads or leaves one head or KV head per device (a dimension of 1, as batch 1) is
captured, as are models with experts and precisions with block-wise scales (`tp_derivable`); a number
that comes out fractional or negative sends the graph to a capture too.
tests/workload/test_rebatch_tp.py holds derived widths equal to captured ones."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from functools import lru_cache
from operator import is_

from planner.workload.capture import OpGraph, OpRecord, TensorMeta
from planner.workload.graphs import Workload, WorkloadGraph, build_graph, resolve_workload
from planner.workload.quant import precision
from planner.workload.zoo import Model

ANCHORS = (2, 3)
"""The batch sizes captured to derive every larger one."""
FAMILIES = ("decoder", "encoder", "vision")
"""Model families whose graphs are affine in the batch (zoo and config.json models)."""


class NotAffine(Exception):
    """The two anchor graphs differ in something other than a number (the caller captures instead)."""


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
    except NotAffine:
        return build_graph(model, workload)


@lru_cache(maxsize=128)
def _anchor(model: Model, workload: Workload) -> WorkloadGraph:
    return build_graph(model, workload)


def clear_anchors() -> None:
    """Forget the anchor captures."""
    _anchor.cache_clear()


TP_ANCHORS = (1, 2)
"""The tensor-parallel widths whose graphs give every wider one."""


def tp_derivable(model: Model, workload: Workload, tp: int) -> bool:
    """True when the graph one device runs at tensor-parallel width `tp` (> 2) of `model` (unsharded) is
    derived from the widths 1 and 2: a decoder whose graphs are affine (no experts; `derivable`) whose
    heads, KV heads, intermediate size and vocabulary `tp` divides, leaving at least 2 heads and 2 KV heads
    per device (a dimension of 1 broadcasts differently, as batch 1 does), under a precision without
    block-wise scales (ceil(K / block) scales per row is not affine in 1/tp; per-channel scales differ
    between the widths 1 and 2 and are refused there)."""
    config = model.config
    if not (tp > TP_ANCHORS[-1] and model.family == "decoder" and _affine(model)):
        return False
    if not all(getattr(config, name, 0) and getattr(config, name) % tp == 0
               for name in ("num_heads", "num_kv_heads", "intermediate_size", "vocab_size")):
        return False
    p = precision(workload.dtype)
    blocks = any(s.granularity == "block" for s in (p.weight_scales, p.activation_scales, p.kv_scales))
    return config.num_kv_heads // tp >= 2 and config.num_heads // tp >= 2 and not blocks


def derive_tp(one: WorkloadGraph, two: WorkloadGraph, model: Model, tp: int) -> WorkloadGraph:
    """The graph of `model` (sharded at width `tp`) from its graphs at widths 1 (`one`) and 2 (`two`): each
    number v(1), v(2) extended to v(1) + (v(2) - v(1)) x (2 - 2/tp); parameter counts alike. Raises
    NotAffine where the graphs differ in anything but numbers or a number would be fractional or negative."""
    steps = Fraction(2 * (tp - 1), tp)
    graph = _derived_graph(one.graph, two.graph, steps)
    params = tuple(_number(x, y, steps) for x, y in ((one.params, two.params), (one.active_params, two.active_params)))
    if set(one.param_by_top) != set(two.param_by_top) or len(one.layer_params) != len(two.layer_params):
        raise NotAffine
    by_top = {k: _number(v, two.param_by_top[k], steps) for k, v in one.param_by_top.items()}
    layers = tuple(_number(x, y, steps) for x, y in zip(one.layer_params, two.layer_params))
    if one.workload != two.workload:
        raise NotAffine
    return replace(one, model=model, graph=graph, params=params[0], active_params=params[1], param_by_top=by_top,
                   layer_params=layers)


def derive(two: WorkloadGraph, three: WorkloadGraph, workload: Workload) -> WorkloadGraph:
    """The graph at `workload.batch` from the graphs at batch 2 (`two`) and 3 (`three`): each number
    extended along its line; storage identities (the dataflow the lowering follows) are batch 2's.
    Raises NotAffine when the graphs differ in anything but numbers, or a number would go negative."""
    _same((two.params, two.active_params, two.param_by_top, two.layer_params),
          (three.params, three.active_params, three.param_by_top, three.layer_params))
    return replace(two, workload=workload, graph=_derived_graph(two.graph, three.graph, workload.batch - ANCHORS[0]))


def _derived_graph(a: OpGraph, b: OpGraph, steps) -> OpGraph:
    """The op graph `steps` along the line from `a` to `b` (an int, or a Fraction across widths)."""
    if len(a.records) != len(b.records) or a.dtype != b.dtype or len(a.saved_bytes) != len(b.saved_bytes):
        raise NotAffine
    met: dict[tuple, tuple] = {}  # a tensor's numbers at both anchors -> along the line (see _tensor)
    records = tuple([_record(x, y, steps, met) for x, y in zip(a.records, b.records)])
    saved = tuple([(_same(m, n), _number(x, y, steps)) for (m, x), (n, y) in zip(a.saved_bytes, b.saved_bytes)])
    return OpGraph(records, a.dtype, saved)


def _same(x, y):
    """x, when it equals y (a name, a module, a parameter count that must not change with the batch)."""
    if x != y:
        raise NotAffine
    return x


def _number(x, y, steps):
    """x at the first anchor and y at the second, extended `steps` (an int, or a Fraction) past the first;
    a whole number stays whole or the line is refused. x itself (the same object) where x == y."""
    if x == y:
        return x
    if type(steps) is Fraction and type(x) is int and type(y) is int:
        # the same number as the Fraction arithmetic below, in integers (Fraction's operators cost ~6 us
        # a call, and a graph derived across widths holds hundreds of changing numbers)
        den = steps.denominator
        v, rest = divmod(x * den + (y - x) * steps.numerator, den)
        if rest:
            raise NotAffine
        if v < 0:
            raise NotAffine
        return v
    v = x + (y - x) * steps
    if type(v) is Fraction:  # x, y whole and steps fractional: whole only if the line lands on one
        if v.denominator != 1:
            raise NotAffine
        v = int(v)
    if v < 0:
        raise NotAffine
    return v


# The functions below return their first argument itself (not a copy) where nothing in it changes
# along the line: a quarter of a decoder's records (the rotary tables, the weights' transposes: ops on
# what does not grow with the batch) are alike at every batch, and a derived graph then shares them
# with the first anchor's graph instead of building equal ones (a frozen dataclass costs about a
# microsecond to build). Equal by value either way, storage and offset included; callers test `is` to
# know whether anything changed.

def derive_record(x: OpRecord, y: OpRecord, steps: int, met: dict) -> OpRecord:
    """The record of a lowered op `steps` past `x` on the line from `x` (first anchor) to `y` (second): `x`
    itself where nothing changes; NotAffine where they differ in anything but numbers. Storage offsets are
    `x`'s: they matter to the lowering only, and a lowered op is interned by value, offsets aside, so the
    record of an anchor may hold another graph's offsets. `met` memoizes tensors across one graph."""
    return _record(x, y, steps, met, True)


def derive_whole(x: float, y: float, steps: int) -> float:
    """A count (FLOP, bytes) `steps` past `x` on the line to `y`, where both are whole numbers (exact in a
    float below 2^53); NotAffine otherwise (fractional bits of a quantized tensor) or where it goes negative."""
    if x == y:
        return x
    if not (float(x).is_integer() and float(y).is_integer()) or max(abs(x), abs(y)) * (steps + 1) >= 2**53:
        raise NotAffine
    return _number(x, y, steps)


def _record(x: OpRecord, y: OpRecord, steps, met: dict, keep_offsets: bool = False) -> OpRecord:
    if x.op != y.op or x.module != y.module or x.phase != y.phase or len(x.args) != len(y.args) or \
            len(x.outputs) != len(y.outputs):
        raise NotAffine
    changed = False
    args = []
    for pair, (other, w) in zip(x.args, y.args):
        name, v = pair
        if name != other:
            raise NotAffine
        d = _tensor(v, w, steps, met, keep_offsets) if type(v) is TensorMeta is type(w) else \
            _value(v, w, steps, met, keep_offsets)
        if d is v:
            args.append(pair)
        else:
            args.append((name, d))
            changed = True
    outputs = []
    for v, w in zip(x.outputs, y.outputs):
        d = _tensor(v, w, steps, met, keep_offsets)
        outputs.append(d)
        changed = changed or d is not v
    if not changed:
        return x
    # built directly: dataclasses.replace costs twice as much
    return OpRecord(x.op, x.packet, x.module, x.phase, tuple(args), tuple(outputs), x.mutates, x.is_view)


def _value(v, w, steps, met: dict, keep_offsets: bool = False):
    tv = type(v)
    if tv is not type(w):
        raise NotAffine
    if tv is TensorMeta:
        return _tensor(v, w, steps, met, keep_offsets)
    if tv is int or tv is float:
        return _number(v, w, steps)
    if tv is tuple:  # mostly sizes: equal whole numbers are kept without a call
        if len(v) != len(w):
            raise NotAffine
        items = [p if p == q and type(p) is int is type(q) else _value(p, q, steps, met, keep_offsets)
                 for p, q in zip(v, w)]
        return v if all(map(is_, items, v)) else tuple(items)
    if v != w:  # None, bool, str: a flag or a name that changes with the batch
        raise NotAffine
    return v


def _tensor(v: TensorMeta, w: TensorMeta, steps, met: dict, keep_offsets: bool = False) -> TensorMeta:
    shape, touched, offset = v.shape, v.touched, v.offset
    w_offset = offset if keep_offsets else w.offset
    if v.dtype != w.dtype or v.bits != w.bits or v.col_major != w.col_major or len(shape) != len(w.shape):
        raise NotAffine
    if shape == w.shape and touched == w.touched and offset == w_offset:
        return v
    # (shape, touched, offset) along the line, computed once per distinct pair of anchor values in the
    # graph: activations keep their shapes from op to op (of the tensors that change, seven in eight
    # repeat the numbers of one met before)
    key = (shape, w.shape, touched, w.touched, offset, w_offset)
    numbers = met.get(key)
    if numbers is None:
        numbers = met[key] = (tuple([p if p == q else _number(p, q, steps) for p, q in zip(shape, w.shape)]),
                              _number(touched, w.touched, steps), _number(offset, w_offset, steps))
    return TensorMeta(numbers[0], v.dtype, v.bits, numbers[1], v.col_major, v.storage, numbers[2])
