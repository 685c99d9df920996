"""Lower a captured aten graph to the kernels an engine runs: fused groups become one kernel.

A fused kernel's FLOP are the sum of its ops'; its bytes are its external inputs and outputs only:
a tensor produced and consumed inside the kernel stays on chip, a tensor two of its ops read is read
once, and a result nobody outside reads is never written. Its time is then one roofline and one
kernel overhead (planner/predict/roofline.py). Lowering never adds bytes or kernels and never
changes FLOP (tests/workload/test_lowering.py checks all three on every zoo model); the engine's rewrites
that are not fusions (planner/workload/kernel_rules.py: channel padding, channels-last convolutions, a
training batch norm's second read, a dynamic KV cache's concatenation) run on the result.

Conservation: a fused kernel reads every tensor that existed before it, once (views of one storage at
one offset count as the largest of them), and writes every tensor that outlives it. Only the bytes a
member op wrote can stay on chip: a buffer updated in place inside the
kernel and then read whole (a KV cache: copy_ writes one token's slice, attention reads every token)
is read from memory for its prior contents, read bytes - min(read bytes, bytes the member wrote
there). A write is dropped only when its storage was allocated inside the kernel (a fresh result of a
member, not an in-place update of a buffer that existed before: a cache, a weight, an input) and
every reader of it is a member. tests/workload/test_lowering.py checks both on every fusing engine.

Dataflow comes from storage identity (TensorMeta.storage): an op's reads bind to the latest write of
that storage before it, so views and in-place results link producer and consumer, and a storage
reused at the same address is a new version. Grouping is greedy in execution order: an op joins the
groups of the producers of its inputs when the engine has a rule for that pair (hardware_specs/engines,
RULES below), at most one group in the merge has a non-pointwise anchor, and the merge makes no cycle
(no op outside the group both depends on the group and feeds the op).

Rules (what joins what):
    bn_fold             inference batch norm -> the convolution it follows (its scale and shift fold
                        into the conv's weights and bias: the statistics are no longer read)
    conv_epilogue       elementwise (activation, residual add) -> a convolution's kernel
    gemm_epilogue       elementwise (bias, activation, gating) -> a GEMM's kernel
    pointwise           elementwise and copies -> a chain of elementwise ops
    norm_fusion         a norm -> the elementwise ops feeding it (residual add); elementwise -> a norm
    reduction_fusion    softmax/reductions/loss -> elementwise feeding them; elementwise -> them
    attention_prologue  attention -> the elementwise ops and cache writes feeding it (rotary, KV write)
    conv_pool           a max pooling -> the convolution (and its epilogue) it follows: the conv's tile is
                        pooled before it is stored, so only the pooled result is written
    dead_outputs        not a join: a secondary result no op reads (max pooling's indices at inference)
                        is not written; a graph compiler drops it (see _dead_written)
Groups never cross roles (first / layer / last of the folded graph) nor phases.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from planner.memo import IdentityMemo
from planner.workload import kernel_rules
from planner.workload.capture import COMMUTES_WITH_QUANTIZE as MAX_POOLS
from planner.workload.capture import QUANTIZE_PACKET, OpRecord, TensorMeta
from planner.workload.counting import OpCost, read_tensors, written_tensors
from planner.workload.engines import Engine
from planner.workload.kernel_rules import BATCH_NORM, batch_norm_training

WRITE_ONLY = {"aten.copy_": ("self",), "aten.copy": ("self",)}
"""Arguments an op writes without reading them (its cost formula does not count them as reads)."""
POINTWISE_CATEGORIES = frozenset({"elementwise", "copy"})
REDUCTION_CATEGORIES = frozenset({"softmax", "reduction", "loss"})
ANCHORS = frozenset({"conv", "matmul", "norm", "reduction", "attention"})
_JOIN = {
    # (kind of the joining op, anchor of the group it joins) -> rule
    ("pointwise", "pointwise"): "pointwise",
    ("pointwise", "conv"): "conv_epilogue",
    ("pointwise", "matmul"): "gemm_epilogue",
    ("pointwise", "norm"): "norm_fusion",
    ("pointwise", "reduction"): "reduction_fusion",
    ("bn", "conv"): "bn_fold",
    ("bn", "pointwise"): "pointwise",  # unfolded inference BN is a per-channel scale and shift
    ("norm", "pointwise"): "norm_fusion",
    ("reduction", "pointwise"): "reduction_fusion",
    ("attention", "pointwise"): "attention_prologue",
    ("pool", "conv"): "conv_pool",
}


@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel the engine launches: an aten op, or a fused group of them."""

    record: OpRecord
    """The op, or for a group its anchor's record renamed "fused.<op>+<op>..." (shapes of the anchor,
    so that efficiency lookups by GEMM or conv shape still apply)."""
    category: str
    """The anchor's category ("elementwise" for a pointwise group)."""
    cost: OpCost
    absorbed: int
    """Aten ops the kernel runs (1 when unfused)."""
    role: str
    padding_flop: float = 0.0
    """FLOP of the kernel's zero-padded input channels (Engine.conv_channel_multiple), included in
    cost.flop: work the device does on top of the model's."""


def _kind(rec: OpRecord, category: str) -> str | None:
    if rec.phase == "optimizer":
        return None
    if rec.packet in BATCH_NORM:  # training BN computes statistics: a norm like any other
        return "norm" if batch_norm_training(rec) else "bn"
    if category in POINTWISE_CATEGORIES:
        return "pointwise"
    if category in REDUCTION_CATEGORIES:
        return "reduction"
    if category in ("conv", "matmul", "norm", "attention"):
        return category
    if rec.packet in MAX_POOLS and rec.phase == "forward":  # max commutes with the conv's tiles: conv_pool
        return "pool"
    return None


def _reads(rec: OpRecord) -> list[TensorMeta]:
    return read_tensors(rec, WRITE_ONLY.get(rec.packet, ()))


class _Group:
    __slots__ = ("members", "anchor", "kinds")

    def __init__(self, index: int, kind: str):
        self.members = [index]
        # a pool that follows no convolution is a kernel of its own: no rule joins anything to it
        self.anchor = kind if kind in ANCHORS or kind == "pool" else "pointwise"
        self.kinds = {index: kind}


def lower(records: tuple[OpRecord, ...], categories: Sequence[str], costs: Sequence[OpCost], roles: list[str],
          engine: Engine) -> list[Kernel]:
    """The kernels `engine` runs for `records` (in execution order, each with its category, cost and
    role), in the order of each kernel's first op. Views pass through as zero-cost kernels."""
    single = _unfused(records, categories, costs, roles)
    if not engine.fusions:
        # an engine without fusion rules (eager) runs every op as its own kernel: what the grouping
        # below returns for it, without the dataflow it would follow for nothing
        return kernel_rules.apply(list(single), records, categories, engine)
    n = len(records)
    # (rule, phase) of every fusion the engine applies: a set lookup per candidate, not Engine.fuses' scan
    fuses = {(rule, phase) for rule, phases in engine.fusions for phase in phases}
    producers, reads, consumers, origins = _dataflow(records, categories)
    group_of: list[_Group | None] = [None] * n

    def depends_on(start: int, group: _Group, lowest: int) -> bool:
        # does op `start` (outside `group`) depend on a member of `group`? Walk producers back, never
        # below the group's first op (nothing earlier can depend on it)
        members = set(group.members)
        stack, seen = [start], set()
        while stack:
            j = stack.pop()
            if j in seen or j < lowest:
                continue
            seen.add(j)
            if j in members:
                return True
            stack.extend(p for p in producers[j] if p is not None and p >= lowest)
        return False

    for i, rec in enumerate(records):
        if categories[i] == "view":  # half the records: a view joins nothing
            continue
        kind = _kind(rec, categories[i])
        if kind is None:
            continue
        candidates: list[_Group] = []
        for p in producers[i]:
            g = group_of[p] if p is not None else None
            if g is None or g in candidates or roles[g.members[0]] != roles[i]:
                continue
            if records[g.members[0]].phase != rec.phase:
                continue
            rule = _JOIN.get((kind, g.anchor))
            if rule is None or (rule, rec.phase) not in fuses:
                continue
            if rule == "bn_fold" and g.members != [p]:
                continue  # BN folds into the conv it directly follows, before any epilogue
            if rule in ("conv_epilogue", "gemm_epilogue") and \
                    not _epilogue(rec, reads[i], producers[i], g, records[g.members[0]]):
                continue
            candidates.append(g)
        if not candidates:  # most ops: a kernel of their own so far
            group_of[i] = _Group(i, kind)
            continue
        anchored = [g for g in candidates if g.anchor != "pointwise"]
        if kind in ANCHORS:
            candidates = [g for g in candidates if g.anchor == "pointwise"]
        elif anchored:
            # an epilogue joins one anchor, the latest (the kernel it directly follows); other inputs
            # are read by that kernel, not computed in it
            candidates = [max(anchored, key=lambda g: g.members[0])]
        legal = []
        for g in candidates:
            lowest = g.members[0]
            outside = [p for p in producers[i] if p is not None and group_of[p] is not g and p > lowest]
            if not any(depends_on(p, g, lowest) for p in outside):
                legal.append(g)
        if not legal:
            group_of[i] = _Group(i, kind)
            continue
        merged = legal[0]
        for g in legal[1:]:
            merged.members.extend(g.members)
            merged.kinds.update(g.kinds)
            if g.anchor != "pointwise":
                merged.anchor = g.anchor
            for j in g.members:
                group_of[j] = merged
        merged.members.append(i)
        merged.members.sort()
        merged.kinds[i] = kind
        if kind in ANCHORS:
            merged.anchor = kind
        group_of[i] = merged
    kernels = []
    done: set[int] = set()
    for i, rec in enumerate(records):
        g = group_of[i]
        single_op = g is None or len(g.members) == 1
        if not single_op:
            if id(g) in done:
                continue
            done.add(id(g))
        kernel = single[i] if single_op else _fused(g, records, categories, costs, reads, producers, consumers,
                                                    origins, roles[i])
        if ("dead_outputs", rec.phase) in fuses:
            # a BN member's saved statistics are bn_fold's to drop
            members = [i] if single_op else [j for j in g.members if g.kinds[j] != "bn"]
            if dead := _dead_written(members, records, consumers):
                kernel = replace(kernel, cost=replace(kernel.cost, bytes_written=max(kernel.cost.bytes_written - dead,
                                                                                     0.0)))
        kernels.append(kernel)
    return group_experts(kernel_rules.apply(kernels, records, categories, engine), engine)


def _dead_written(members: list[int], records, consumers) -> float:
    """Bytes of the secondary results (outputs[1:]) of `members` that no op reads: max pooling's indices
    at inference (only its backward reads them). An engine that builds from an exported graph never
    computes them: torch.onnx exports max_pool2d as a MaxPool node with the one output its users read,
    and TensorRT builds its engine from that graph (hardware_specs/engines/tensorrt.json). (A batch
    norm's saved statistics are handled by bn_fold.) The first result is the op's value and stays."""
    return sum(t.bytes for j in members for t in records[j].outputs[1:]
               if t.storage and not consumers.get((j, t.storage)))


def _dataflow(records: tuple[OpRecord, ...], categories: Sequence[str]):
    """(producers, reads, consumers, origins) of `records`: the producer op of every read (None when it
    comes from outside the graph: weights, inputs, caches), the tensors each op reads, every consumer of
    every write by (producer op, storage), and for every write by (writer op, storage) the op that
    allocated that storage's current version (None: it existed before the graph)."""
    # dataflow: the producer op of every read (None when it comes from outside the graph: weights,
    # inputs), and every consumer of every write; the tensors each op reads, kept for the epilogue
    # and fused-kernel checks below
    producers: list[list[int | None]] = []
    reads: list[list[TensorMeta]] = []
    consumers: dict[tuple[int, int], list[int]] = {}  # (producer op, storage) -> consumer ops
    latest: dict[int, int] = {}
    # storage -> the op whose fresh result it is (its current version); absent for a storage that existed
    # before the graph (weights, inputs, caches) or is only ever updated in place
    born: dict[int, int] = {}
    origins: dict[tuple[int, int], int | None] = {}  # (writer op, storage) -> the op that allocated it
    for i, rec in enumerate(records):
        if categories[i] == "view":
            producers.append([])
            reads.append([])  # a view joins no kernel: its reads are never asked for
            continue
        found = []
        reads.append(read := _reads(rec))
        for t in read:
            p = latest.get(t.storage) if t.storage else None
            found.append(p)
            if p is not None:
                consumers.setdefault((p, t.storage), []).append(i)
        producers.append(found)
        argued = None
        for t in written_tensors(rec):
            if t.storage:
                latest[t.storage] = i
                if argued is None:
                    argued = _arg_storages(rec)
                if t.storage not in argued:  # a fresh result: a new version of this storage starts here
                    born[t.storage] = i
                origins[i, t.storage] = born.get(t.storage)
    return producers, reads, consumers, origins


def _unfused(records: tuple[OpRecord, ...], categories: Sequence[str], costs: Sequence[OpCost],
             roles: list[str]) -> tuple[Kernel, ...]:
    """Each op as a kernel of its own (a view: 0 ops). Memoized by the identity of the arguments: a
    device graph lowers one capture, with its classification and roles, under each engine it is asked
    for (a cold `compare`: eager and vLLM), and the ops no fusion takes are the same kernels for all.
    (The role lists device_graph passes are its cached ones, never changed in place.)"""
    return _SINGLE.get((records, categories, costs, roles), (), lambda: tuple(
        [Kernel(rec, category, cost, 0 if category == "view" else 1, role)
         for rec, category, cost, role in zip(records, categories, costs, roles, strict=True)]))


_SINGLE = IdentityMemo(256)  # as many graphs as device_graph._captured keeps (it keeps them alive)


def clear_unfused() -> None:
    """Forget the memoized single-op kernels (for a benchmark that times the lowering)."""
    _SINGLE.clear()


_EXPERT = re.compile(r"^(.*)\.experts\.\d+(\..*)?$")


def group_experts(kernels: list[Kernel], engine: Engine) -> list[Kernel]:
    """`kernels` with a mixture-of-experts layer's per-expert kernels grouped, where `engine` has the rule
    moe_grouped for their phase: every kernel of expert i (module <moe>.experts.<i>.<part>) joins the
    same kernel of the other experts, and a kernel of the MoE block itself (<moe>: the gather of each
    expert's rows, the scatter back, the weighting) joins its repeats, as a fused MoE kernel runs each
    projection and step for all experts at once (vLLM's fused_moe, SGLang's, TensorRT-LLM's grouped GEMM).
    A group's cost is its members' sum; a grouped GEMM is looked up at all its rows (M = the sum of the
    experts' rows) with one expert's N and K. Kernels that run once stay as they are."""
    if not any(".experts." in k.record.module for k in kernels):  # what _EXPERT needs, tested first: cheaper
        return kernels
    moes = {m.group(1) for k in kernels if (m := _EXPERT.match(k.record.module))}
    if not moes:
        return kernels
    groups: dict[tuple, list[Kernel]] = {}
    order: list = []
    for k in kernels:
        m = _EXPERT.match(k.record.module)
        where = (m.group(1), m.group(2) or "") if m else ((k.record.module, "") if k.record.module in moes else None)
        if where is None or not engine.fuses("moe_grouped", k.record.phase):
            order.append(k)
            continue
        key = (*where, m is not None, k.record.op, k.category, k.record.phase, k.role)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(k)
    # (kernel, True for a forward kernel of the MoE block itself: its gather, weighting or scatter), a group of
    # one member included (top-1 routing at batch 1, one local expert under expert parallelism)
    marked = [(item, False) if isinstance(item, Kernel) else
              (_grouped(groups[item]), not item[2] and item[1] == "" and item[5] == "forward") for item in order]
    return _route(marked, engine)


_GATHER, _WEIGHT, _SCATTER = "aten.index_select", "aten.mul", "aten.index_add_"


def _route(kernels: list[tuple[Kernel, bool]], engine: Engine) -> list[Kernel]:
    """The grouped MoE block's data movement as the engine's fused MoE runs it. Per layer of T tokens, k
    experts each, hidden d, the capture (planner_models/moe.py) gathers each expert's rows (T·k·d read and
    written), weights them by the router (T·k·d read and written) and adds them into the output in place
    (T·k·d read twice, written once). A fused MoE instead
    - multiplies the router weights in the second GEMM's epilogue (vLLM, SGLang: MUL_ROUTED_WEIGHT) or in
      the finalize that combines the rows (TensorRT-LLM): no pass of its own;
    - sums each token's k rows once (moe_sum / finalize): reads the T·k·d rows, the weights and the prior
      output [T, d] (the shared expert's), writes [T, d];
    - gathers the rows inside the first grouped GEMM, which reads them through the sorted token index
      (moe_gather "in_gemm": its A operand is those T·k·d bytes; an activation quantization before it
      then runs on the T tokens, not the T·k rows), or in a permute kernel that writes them out first
      (moe_gather "kernel": kept as captured).
    A folded op's FLOP, aten count and the bytes only it read (the router weights, the sorted index) go to the
    kernel that runs it, so FLOP and ops are conserved and no input goes unread. Only forward kernels of the
    block are routed; the state is cleared at each layer's sum."""
    out: list[Kernel] = []
    gemm_flop, gemm_ops, gemm_read = 0.0, 0, 0.0  # the gather's, for the first grouped GEMM
    sum_flop, sum_ops, sum_read = 0.0, 0, 0.0  # the weighting's, for the sum
    per_token = 1.0  # under in_gemm, tokens / gathered rows (1/k) until the first GEMM
    for k, block in kernels:
        packet = k.record.packet
        extra = max(k.cost.bytes_read - k.cost.bytes_written, 0.0)  # what it reads besides the rows it rewrites
        if block and packet == _WEIGHT:  # the router weights of each row
            sum_flop, sum_ops, sum_read = sum_flop + k.cost.flop, sum_ops + k.absorbed, sum_read + extra
            continue
        if block and packet == _GATHER and engine.moe_gather == "in_gemm":  # the sorted index of the rows
            gemm_flop, gemm_ops, gemm_read = gemm_flop + k.cost.flop, gemm_ops + k.absorbed, gemm_read + extra
            source = k.record.arg("self")  # the [T, d] tokens the rows come from
            if isinstance(source, TensorMeta) and k.cost.bytes_written > 0:
                per_token = min(1.0, source.bytes / k.cost.bytes_written)
            continue
        if per_token < 1.0 and packet == QUANTIZE_PACKET and ".experts." in k.record.module:
            # vLLM's fused_experts quantizes the [T, d] tokens once (moe_kernel_quantize_input) before the GEMM
            # reads them by index, not the T·k gathered rows: its bytes are the tokens' (its FLOP kept)
            k = replace(k, cost=OpCost(k.cost.flop, k.cost.bytes_read * per_token, k.cost.bytes_written * per_token))
        if block and packet == _SCATTER:
            dest = k.record.arg("self")
            dest_bytes = dest.bytes if isinstance(dest, TensorMeta) else 0.0
            cost = OpCost(k.cost.flop + sum_flop, extra + sum_read + dest_bytes,  # the k rows and their index
                          min(dest_bytes, k.cost.bytes_written) if dest_bytes else k.cost.bytes_written)
            out.append(replace(k, cost=cost, absorbed=k.absorbed + sum_ops))
            gemm_flop, gemm_ops, gemm_read, sum_flop, sum_ops, sum_read, per_token = 0.0, 0, 0.0, 0.0, 0, 0.0, 1.0
            continue
        if gemm_ops and k.category == "matmul":  # the first grouped GEMM runs the gather
            k = replace(k, cost=OpCost(k.cost.flop + gemm_flop, k.cost.bytes_read + gemm_read, k.cost.bytes_written),
                        absorbed=k.absorbed + gemm_ops)
            gemm_flop, gemm_ops, gemm_read, per_token = 0.0, 0, 0.0, 1.0
        out.append(k)
    return out


def _grouped(members: list[Kernel]) -> Kernel:
    first = members[0]
    if len(members) == 1:
        return first
    flop = sum(k.cost.flop for k in members)
    read = sum(k.cost.bytes_read for k in members)
    written = sum(k.cost.bytes_written for k in members)
    record = first.record
    if first.category == "matmul" and first.absorbed:
        record = _batched(record, members)
    if first.absorbed:
        record = replace(record, op=f"fused.experts:{record.op.removeprefix('fused.')}")
    return Kernel(record, first.category, OpCost(flop, read, written), sum(k.absorbed for k in members), first.role)


def _batched(rec: OpRecord, members: list[Kernel]) -> OpRecord:
    """The efficiency-lookup record of a grouped GEMM: a batched GEMM [E, m, K] x [E, K, N] over the E
    members, m the most rows any of them has (each expert's rows fill tiles of their own). The kernel's
    cost stays its members' sum; a GEMM that is not [m, K] x [K, N] keeps its first member's record."""
    a = rec.arg("mat1") or rec.arg("self")
    w = rec.arg("mat2")
    if not isinstance(a, TensorMeta) or not isinstance(w, TensorMeta) or len(a.shape) != 2 or len(w.shape) != 2 \
            or not rec.outputs or len(rec.outputs[0].shape) != 2:
        return rec
    m = max(k.record.outputs[0].shape[0] for k in members if k.record.outputs and k.record.outputs[0].shape)
    e, (k_dim, n) = len(members), w.shape
    out = rec.outputs[0]
    return replace(rec, packet="aten.bmm",
                   args=(("self", replace(a, shape=(e, m, k_dim), touched=e * m * k_dim)),
                         ("mat2", replace(w, shape=(e, k_dim, n), touched=e * k_dim * n))),
                   outputs=(replace(out, shape=(e, m, n), touched=e * m * n),))


def _epilogue(rec: OpRecord, reads: list[TensorMeta], producers: list[int | None], g: _Group, anchor: OpRecord) -> bool:
    """An op a GEMM or conv can run in its epilogue: it maps the anchor's output tile to a tile of the
    same size, reading besides it at most a bias (one value per output channel or column) or a
    residual of the tile's size (cuBLASLt and CUTLASS epilogues: bias, activation, beta x C)."""
    if not rec.outputs or not anchor.outputs:
        return False
    tile = anchor.outputs[0]
    size = tile.numel
    channels = tile.shape[1] if anchor.packet == "aten.convolution" and len(tile.shape) > 1 else tile.shape[-1]
    if rec.outputs[0].numel != size:
        return False
    for t, p in zip(reads, producers):
        if p is not None and p in g.members or t.touched <= 1:
            continue
        if t.touched not in (size, channels):
            return False
    return True


def _arg_storages(rec: OpRecord) -> set[int]:
    """Storages of every tensor argument of `rec`, written-only and `out` ones included: a result in one of
    them is an update in place, not a fresh allocation."""
    found = set()
    for _, value in rec.args:
        if isinstance(value, TensorMeta):
            found.add(value.storage)
        elif isinstance(value, tuple):
            found.update(v.storage for v in value if isinstance(v, TensorMeta))
    return found


def _written_to(rec: OpRecord, storage: int) -> float:
    """Bytes `rec` writes into `storage`."""
    return sum(t.bytes for t in written_tensors(rec) if t.storage == storage)


def _fused(g: _Group, records, categories, costs, reads, producers, consumers, origins, role: str) -> Kernel:
    flop, read, written = _external(g.members, records, costs, reads, producers, consumers, origins)
    anchor_index = next((j for j in g.members if g.kinds[j] in ANCHORS), g.members[0])
    anchor = records[anchor_index]
    if "bn" in g.kinds.values():
        read, written = _fold_batch_norm(g, records, read, written)
    names = "+".join(records[j].packet.removeprefix("aten.") for j in g.members)
    # the anchor renamed, built directly (dataclasses.replace costs twice as much)
    record = OpRecord(f"fused.{names}", anchor.packet, anchor.module, anchor.phase, anchor.args, anchor.outputs,
                      anchor.mutates, anchor.is_view)
    category = "elementwise" if g.anchor == "pointwise" else categories[anchor_index]
    return Kernel(record, category, OpCost(flop, max(read, 0.0), max(written, 0.0)), len(g.members), role)


def _external(members_in_order: list[int], records, costs, reads, producers, consumers, origins
              ) -> tuple[float, float, float]:
    """(FLOP, bytes read, bytes written) of `members_in_order` run as one kernel: the module docstring's
    conservation rule applied to the sums of their single-op costs."""
    members = set(members_in_order)
    flop = read = written = 0.0
    for j in members_in_order:
        flop += costs[j].flop
        read += costs[j].bytes_read
        written += costs[j].bytes_written
    seen_reads: dict[tuple, float] = {}
    for j in members_in_order:
        rec = records[j]
        for t, p in zip(reads[j], producers[j]):
            if p is not None and p in members:
                # what the member wrote stays on chip; the rest of what is read here (the prior contents
                # of a buffer the member updated in place) comes from memory
                on_chip = min(t.bytes, _written_to(records[p], t.storage))
                read -= on_chip
                part, key = t.bytes - on_chip, ("prior", p, t.storage, t.offset)
            else:
                part, key = t.bytes, ((p, t.storage, t.offset) if t.storage else None)
            if key is None:
                continue
            seen = seen_reads.get(key)
            if seen is None:
                seen_reads[key] = part
            else:
                # views of one storage at one offset, read again (the same input; MLA's value, a prefix of
                # its key's latent cache): the larger is read once
                read -= min(seen, part)
                seen_reads[key] = max(seen, part)
        for t in written_tensors(rec):
            users = consumers.get((j, t.storage), []) if t.storage else []
            if users and all(u in members for u in users) and origins.get((j, t.storage)) in members:
                written -= t.bytes  # allocated and consumed only inside the kernel: never written
    return flop, read, written


def conserved(records: tuple[OpRecord, ...], categories: Sequence[str], costs: Sequence[OpCost],
              blocks: Sequence) -> dict:
    """The least any lowering of `records` can move, per block (`blocks` gives each record's: a role and
    layer, say): the FLOP of the block's ops and the bytes of all of them run as one kernel, which reads
    every tensor that existed before the block once and writes every tensor that outlives it once (a
    batch norm's statistics folded away, as bn_fold does). {block: OpCost}. No engine's kernels of a block
    move fewer bytes (tests/workload/test_lowering.py); planner/predict/physics.py turns it into the
    roofline floor of a step."""
    producers, reads, consumers, origins = _dataflow(records, categories)
    by_block: dict = {}
    for i, block in enumerate(blocks):
        if categories[i] != "view":
            by_block.setdefault(block, []).append(i)
    out = {}
    for block, members in by_block.items():
        flop, read, written = _external(members, records, costs, reads, producers, consumers, origins)
        for j in members:
            if _kind(records[j], categories[j]) == "bn":  # statistics folded into weights at build time
                bn = records[j]
                read -= sum(t.bytes for name in ("weight", "bias", "running_mean", "running_var")
                            if isinstance(t := bn.arg(name), TensorMeta))
                written -= sum(t.bytes for t in bn.outputs[1:])
            else:  # secondary results nobody reads are not computed (the dead_outputs rule)
                written -= _dead_written([j], records, consumers)
        out[block] = OpCost(flop, max(read, 0.0), max(written, 0.0))
    return out


def _fold_batch_norm(g: _Group, records, read: float, written: float) -> tuple[float, float]:
    # The batch norm's scale and shift fold into the conv's weights at build time: its four
    # [C] statistics are no longer read and its saved mean/invstd outputs are not written; the conv
    # gains a [C] bias unless it had one (y = conv(x, w·s) + (b - mean)·s + beta).
    for j in g.members:
        if g.kinds[j] != "bn":
            continue
        bn = records[j]
        for name in ("weight", "bias", "running_mean", "running_var"):
            t = bn.arg(name)
            if isinstance(t, TensorMeta):
                read -= t.bytes
        for t in bn.outputs[1:]:
            written -= t.bytes
        conv = records[g.members[g.members.index(j) - 1]] if g.members.index(j) else None
        weight = conv.arg("weight") if conv is not None else None
        if conv is not None and not isinstance(conv.arg("bias"), TensorMeta) and isinstance(weight, TensorMeta):
            read += weight.shape[0] * weight.bits / 8
    return read, written
