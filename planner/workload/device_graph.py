"""The graph one device runs, folded by layer: first part + num_layers x one layer + last part.

The transformer layers of a model are identical, so the graph of an L-layer model is the graph of
a 1-layer model with its layer part counted L times. This is exact, not sampled: tests compare it
with full captures. Models whose blocks differ (ResNet) or are unknown (custom) are captured whole.
Equal ops are merged into one signature with a count, so a prediction loops over ~100 distinct
ops instead of ~10,000.

Roles: "layer" (module layers.0.*), "first" (ops before the layers in forward and after them in
backward: embeddings, on the first pipeline stage), "last" (final norm, head, loss: last stage).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache

from planner.memo import IdentityMemo
from planner.workload.capture import OpRecord
from planner.workload.counting import OpCost, classified, clear_classified
from planner.workload.engines import get_engine
from planner.workload.graphs import Workload, clear_modules, resolve_workload
from planner.workload.lowering import Kernel, clear_unfused, conserved, lower
from planner.workload.parallelism import Parallelism, shard_config
from planner.workload.rebatch import (
    ANCHORS,
    TP_ANCHORS,
    NotAffine,
    clear_anchors,
    derivable,
    derive_record,
    derive_tp,
    derive_whole,
    graph_at,
    tp_derivable,
)
from planner.workload.zoo import Model

ROLES = ("first", "layer", "last")


@dataclass(frozen=True, slots=True)
class CostedOp:
    """A distinct op signature (module replaced by its role), its cost and how often it runs."""

    record: OpRecord
    category: str
    cost: OpCost
    count: int
    absorbed: int = 1
    """Aten ops this kernel runs (more than 1 for a fused kernel of the engine; 0 for a view)."""


@dataclass(frozen=True, slots=True)
class Part:
    """The ops, parameters and saved activations of one role."""

    ops: tuple[CostedOp, ...]
    params: int
    """Parameters stored on the device for this part."""
    saved_bytes: float
    """Activation bytes saved for backward (training), per micro-batch."""

    def total(self) -> OpCost:
        """Sum of the part's op costs, counts applied."""
        t = OpCost()
        for op in self.ops:
            t = t + OpCost(op.cost.flop * op.count, op.cost.bytes_read * op.count, op.cost.bytes_written * op.count)
        return t


@dataclass(frozen=True, slots=True)
class DeviceGraph:
    """What one device of a tp x ep shard runs for a workload."""

    model: Model
    workload: Workload
    parallelism: Parallelism
    config: object
    """The sharded architecture config (None for custom models)."""
    first: Part
    layer: Part
    last: Part
    num_layers: int
    """Layers of the whole model (0 when captured whole: everything is in `first`)."""
    dtype: str

    def layers_on_stage(self, stage: int) -> int:
        """Layers of pipeline stage `stage` (the first stages take the remainder)."""
        base, extra = divmod(self.num_layers, self.parallelism.pp)
        return base + (1 if stage < extra else 0)

    def stage_parts(self, stage: int) -> list[tuple[Part, int]]:
        """(part, multiplicity) run by pipeline stage `stage`."""
        parts = [(self.layer, self.layers_on_stage(stage))]
        if stage == 0:
            parts.append((self.first, 1))
        if stage == self.parallelism.pp - 1:
            parts.append((self.last, 1))
        return [(p, n) for p, n in parts if n]

    def launches(self) -> tuple[int, int]:
        """(ops that launch a kernel, views) of the whole shard per step: what the host dispatches."""
        kernels = views = 0
        for part, n in ((self.first, 1), (self.layer, self.num_layers), (self.last, 1)):
            for op in part.ops:
                if op.category == "view":
                    views += op.count * n
                else:
                    kernels += op.count * n
        return kernels, views

    def total(self) -> OpCost:
        """Cost of the whole tp x ep shard (all stages)."""
        layer = self.layer.total()
        return self.first.total() + self.last.total() + OpCost(layer.flop * self.num_layers,
                                                               layer.bytes_read * self.num_layers,
                                                               layer.bytes_written * self.num_layers)


def _foldable(model: Model) -> bool:
    return model.family in ("decoder", "encoder") or (model.family == "vision" and hasattr(model.config, "patch_size"))


def _roles(records: tuple[OpRecord, ...]) -> list[str]:
    roles, seen_forward_layer, seen_backward_layer = [], False, False
    first_modules: set[str] = set()
    for rec in records:
        top = rec.module.split(".")[0]
        if top == "layers":
            role = "layer"
            seen_forward_layer |= rec.phase == "forward"
            seen_backward_layer |= rec.phase == "backward"
        elif rec.phase == "forward":
            role = "last" if seen_forward_layer else "first"
            if role == "first" and top:
                first_modules.add(top)
        elif rec.phase == "backward":
            role = "first" if seen_backward_layer else "last"
        else:
            role = "first" if top in first_modules else "last"
        roles.append(role)
    return roles


@lru_cache(maxsize=256)
def _captured(model: Model, workload: Workload, tp: int, ep: int):
    """The capture under (tp, ep), whatever the engine: (config, num_layers, captured, roles, fold)."""
    par = Parallelism(tp=tp, ep=ep)
    config = None
    num_layers = 0
    if model.family == "decoder":
        config = shard_config(model.config, par)
    elif model.config is not None:
        config = model.config
    fold = _foldable(model)
    weights: tuple[float, ...] = (1,)
    if fold:
        num_layers = config.num_layers
        kinds, weights = _layer_kinds(config)
        one = replace(config, num_layers=len(kinds), kinds=kinds) if kinds else replace(config, num_layers=1)
        captured = None
        if ep == 1 and tp_derivable(model, workload, tp):  # from the widths 1 and 2 (rebatch.py), each cached here
            try:
                captured = derive_tp(*(_captured(model, workload, t, ep)[2] for t in TP_ANCHORS),
                                     replace(model, config=one), tp)
            except NotAffine:
                pass
        if captured is None:
            captured = graph_at(replace(model, config=one), workload)
    elif config is not None:
        captured = graph_at(replace(model, config=config), workload)
    else:
        captured = graph_at(model, workload)
    records = captured.graph.records
    roles = _roles(records) if fold else ["first"] * len(records)
    return config, num_layers, captured, roles, fold, weights


def _layer_kinds(config) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The distinct layer kinds of a decoder whose layers differ (DeepSeek-V3's dense prefix, Gemma 2's
    alternating sliding-window layers, Llama 4's NoPE layers) and the share of the layers each kind has:
    the folded layer is their weighted mean, so L x (folded layer) is the sum over all L layers exactly.
    ((), (1,)) when every layer is alike."""
    kinds = getattr(config, "kinds", ())
    if not kinds or len(set(kinds[:config.num_layers])) == 1:
        return (kinds[0],) if kinds else (), (1,)
    counts: dict[str, int] = {}
    for i in range(config.num_layers):
        tag = kinds[min(i, len(kinds) - 1)]
        counts[tag] = counts.get(tag, 0) + 1
    return tuple(counts), tuple(n / config.num_layers for n in counts.values())


def _layer_index(module: str) -> int:
    """Index of the block a module path lies in ("layers.3.attn" -> 3), 0 outside the layers."""
    parts = module.split(".")
    return int(parts[1]) if len(parts) > 1 and parts[0] == "layers" and parts[1].isdigit() else 0


def kernels(graph, roles: list[str], engine: str) -> list[Kernel]:
    """The kernels `engine` runs for a captured OpGraph (planner/workload/lowering.py), in order."""
    categories, costs = classified(graph)  # once per capture, whichever engine asks first
    return lower(graph.records, categories, costs, roles, get_engine(engine))


@lru_cache(maxsize=512)
def _device_graph(model: Model, workload: Workload, tp: int, ep: int) -> DeviceGraph:
    if derivable(model, workload):
        try:
            return _derived_device_graph(model, workload, tp, ep)
        except NotAffine:
            pass
    return _built_device_graph(model, workload, tp, ep)


def _derived_device_graph(model: Model, workload: Workload, tp: int, ep: int) -> DeviceGraph:
    """The device graph at `workload.batch` from the device graphs at the anchor batches 2 and 3, op by op:
    each lowered op's record and cost along the line between the anchors (rebatch.py: every number of these
    models' graphs is affine in the batch, and so are the FLOP and bytes counted from them and summed over a
    fused kernel's ops). What the lowering and the folding of the batch-B graph would give, without deriving
    its ~120 records, lowering them and interning the kernels: a cold `compare` derives a hundred device
    graphs. NotAffine where the anchors differ in anything but numbers (an op, its count or fusion, a
    parameter count), a count is not whole (quantized widths: the caller builds instead), or two ops would
    coincide. tests/workload/test_device_graph.py holds derived graphs equal to built ones."""
    # resolved at its own batch: the limits (batch, tokens per step) are checked as a built graph checks them
    resolved = replace(resolve_workload(model, replace(workload, engine="eager")), engine=workload.engine)
    two, three = (_device_graph(model, replace(workload, batch=b), tp, ep) for b in ANCHORS)
    if (two.config, two.num_layers, two.dtype, two.parallelism) != (three.config, three.num_layers, three.dtype,
                                                                   three.parallelism):
        raise NotAffine
    if replace(two.workload, batch=workload.batch) != resolved or replace(three.workload, batch=workload.batch) \
            != resolved:
        raise NotAffine
    steps, met, clears = workload.batch - ANCHORS[0], {}, _CLEARS[0]
    parts = [_derived_part(p, q, steps, met) for p, q in ((two.first, three.first), (two.layer, three.layer),
                                                          (two.last, three.last))]
    if _CLEARS[0] != clears:  # the interned ops were forgotten on the way: equal ops may be other objects
        raise NotAffine
    return DeviceGraph(model, resolved, two.parallelism, two.config, *parts, two.num_layers, two.dtype)


def _derived_part(p: Part, q: Part, steps: int, met: dict) -> Part:
    if len(p.ops) != len(q.ops) or p.params != q.params:
        raise NotAffine
    ops, seen = [], set()
    for x, y in zip(p.ops, q.ops):
        if x.category != y.category or x.count != y.count or x.absorbed != y.absorbed:
            raise NotAffine
        op = _along(x, y, steps, met)
        key = (id(op[0]), op[1], id(op[2]), x.absorbed)  # interned records and costs are one object per value
        if key in seen:  # two ops the built graph would count as one
            raise NotAffine
        seen.add(key)
        ops.append(CostedOp(*op, x.count, x.absorbed))
    return Part(tuple(ops), p.params, derive_whole(p.saved_bytes, q.saved_bytes, steps))


def _along(x: CostedOp, y: CostedOp, steps: int, met: dict) -> tuple[OpRecord, str, OpCost]:
    """The interned (record, category, cost) `steps` past op `x` on the line to op `y`. Memoized by the
    identity of the two anchors' interned ops: the device graphs of both decode contexts, of eager and
    vLLM, share most of their anchor ops, and each is then derived and hashed once per batch."""
    slot = (id(x.record), id(x.cost), id(y.record), id(y.cost), x.category, steps)
    found = _ALONG.get(slot)
    if found is None:
        a, b = x.cost, y.cost
        cost = a if a == b else OpCost(derive_whole(a.flop, b.flop, steps),
                                       derive_whole(a.bytes_read, b.bytes_read, steps),
                                       derive_whole(a.bytes_written, b.bytes_written, steps))
        record = derive_record(x.record, y.record, steps, met)
        # an op the batch does not change (a weight's transpose, the rotary table) is the anchor's own
        op = (x.record, x.category, x.cost) if record is x.record and cost is a else _interned(record, x.category, cost)
        if len(_ALONG) >= 200_000:
            _ALONG.clear()
        found = _ALONG[slot] = (op, x.record, x.cost, y.record, y.cost)  # the anchors kept: their ids stay theirs
    return found[0]


_ALONG: dict[tuple, tuple] = {}


def _built_device_graph(model: Model, workload: Workload, tp: int, ep: int) -> DeviceGraph:
    par = Parallelism(tp=tp, ep=ep)
    config, num_layers, captured, roles, fold, weights = _captured(model, replace(workload, engine="eager"), tp, ep)
    records = captured.graph.records
    # each kernel's (record renamed to its role, category, cost) interned first (one hash of the record),
    # then counted by the identity of what it interned to
    counters: dict[str, Counter] = {r: Counter() for r in ROLES}
    held: dict[int, tuple[OpRecord, str, OpCost]] = {}  # keeps each interned op, and so its id, alive here
    renamed = _RENAMED.get((captured.graph,), (), dict)  # engines that lower an op alike share its kernel record
    for k in kernels(captured.graph, roles, workload.engine):
        share = weights[_layer_index(k.record.module)] if k.role == "layer" and len(weights) > 1 else 1
        slot = (id(k.record), k.role, k.category, id(k.cost))
        op = renamed.get(slot)
        if op is None:
            op = renamed[slot] = _interned(k.record.in_module(k.role), k.category, k.cost)
            renamed[slot, "kept"] = (k.record, k.cost)  # their ids stay theirs while the slot is here
        held[id(op)] = op
        counters[k.role][(id(op), k.absorbed)] += share

    def part(role: str) -> Part:
        return Part(tuple(CostedOp(*held[op], n, absorbed) for (op, absorbed), n in counters[role].items()), 0, 0.0)

    parts = {r: part(r) for r in ROLES}
    # parameters and saved activations by role, from the module paths of the 1-layer capture
    first_tops = {rec.module.split(".")[0] for rec, role in zip(records, roles) if role == "first" and rec.module}
    saved = {r: 0.0 for r in ROLES}
    for module, nbytes in captured.graph.saved_bytes:
        top = module.split(".")[0]
        role = "layer" if top == "layers" else ("first" if top in first_tops or not fold else "last")
        saved[role] += nbytes
    layer_params = captured.params - _params_outside_layers(captured) if fold else 0
    if fold and len(weights) > 1:  # the mean layer of a model whose layers differ
        layer_params = sum(n * share for n, share in zip(captured.layer_params, weights))
    first_params = _params_of(captured, first_tops) if fold else captured.params
    in_layers = sum(captured.layer_params) if fold and len(weights) > 1 else layer_params
    params = {"layer": layer_params, "first": first_params, "last": captured.params - in_layers - first_params}
    parts = {r: replace(parts[r], params=params[r], saved_bytes=saved[r]) for r in ROLES}
    return DeviceGraph(model, replace(captured.workload, engine=workload.engine), par, config, parts["first"],
                       parts["layer"], parts["last"], num_layers, captured.graph.dtype)


def least_cost(model: Model, workload: Workload, parallelism: Parallelism = Parallelism()) -> OpCost:
    """The FLOP and bytes one device of the tp x ep shard must at least compute and move per step of
    `workload`, all its pipeline stages together (a pass runs them one after another): the capture's
    FLOP, and lowering.conserved's bytes of each block (first part, each distinct layer, last part) run
    as one kernel, the layer blocks counted as the folded graph counts them (num_layers x their weighted
    mean). Whatever the engine: no lowering moves fewer bytes (planner/predict/physics.py's floor)."""
    tp, ep = parallelism.tp, parallelism.ep
    _, num_layers, captured, roles, _, weights = _captured(model, replace(workload, engine="eager"), tp, ep)
    records = captured.graph.records
    categories, costs = classified(captured.graph)
    blocks = [(role, _layer_index(rec.module) if role == "layer" else 0) for rec, role in zip(records, roles)]
    found = conserved(records, categories, costs, blocks)
    total = OpCost(0.0, 0.0, 0.0)
    for (role, index), cost in found.items():
        n = num_layers * (weights[index] if len(weights) > 1 else 1) if role == "layer" else 1
        total = total + OpCost(cost.flop * n, cost.bytes_read * n, cost.bytes_written * n)
    return total


_RENAMED = IdentityMemo(256)
"""Per captured op graph: each kernel's interned (record renamed to its role, category, cost) by the identity
of its record, role, category and cost. Eager and vLLM lower a graph into mostly the same single-op kernels
(lowering.py shares their objects): two in five kernels of a cold `compare` are met again here."""

_OPS: dict[tuple[OpRecord, str, OpCost], tuple[OpRecord, str, OpCost]] = {}
"""Each (op record, category, cost) met so far, by value: the first objects that held it."""


def _interned(rec: OpRecord, category: str, cost: OpCost) -> tuple[OpRecord, str, OpCost]:
    """The (record, category, cost) objects of the first device graph that held an equal op. Graphs of
    other layouts and engines share most of their ops (a cold `compare` times 1,460 ops per device, 690
    of them distinct); with shared objects the timing memoizes an op per device by identity
    (planner/predict/timing.py), without hashing a record on every lookup."""
    key = (rec, category, cost)
    found = _OPS.get(key)
    if found is None:
        if len(_OPS) >= 200_000:  # start over, with what holds interned objects by identity
            _OPS.clear()
            _ALONG.clear()
            _RENAMED.clear()
            _CLEARS[0] += 1
        found = _OPS[key] = key
    return found


_CLEARS = [0]
"""How often _OPS started over: a derived device graph built across a clear is built again instead."""


def _params_outside_layers(captured) -> int:
    return sum(captured.param_by_top.get(top, 0) for top in captured.param_by_top if top != "layers")


def _params_of(captured, tops: set[str]) -> int:
    return sum(captured.param_by_top.get(top, 0) for top in tops)


def device_graph(model: Model, workload: Workload, parallelism: Parallelism = Parallelism()) -> DeviceGraph:
    """The folded per-device graph of `workload` under `parallelism` (cached by tp and ep, which shape
    the graph; pp, dp and ZeRO only decide how it is staged and replicated)."""
    return _STAGED.get((model,), (workload, parallelism), lambda: _staged(model, workload, parallelism))


_STAGED = IdentityMemo()  # by the model's identity: hashing a model's config on every call costs more


def _staged(model: Model, workload: Workload, parallelism: Parallelism) -> DeviceGraph:
    base = _device_graph(model, workload, parallelism.tp, parallelism.ep)
    return base if base.parallelism == parallelism else replace(base, parallelism=parallelism)


def clear_graph_caches() -> None:
    """Forget every lowered device graph (the captures stay): for a benchmark that times the lowering."""
    _STAGED.clear()
    _device_graph.cache_clear()


def clear_capture_caches() -> None:
    """Forget the captures too (planner/workload/rebatch.py's anchors included): for a benchmark or a test
    that times or compares capturing."""
    clear_graph_caches()
    _RENAMED.clear()
    _ALONG.clear()
    _captured.cache_clear()
    clear_anchors()
    clear_classified()  # classifications and single-op kernels of the captures, kept by their identity
    clear_unfused()
    clear_modules()
