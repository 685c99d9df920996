"""Every traced op beside its roofline on the device it ran on, and the step's time breakdown.

Which op carries the work. The profiler nests ops: aten::linear -> aten::t (a view) + aten::addmm,
whose CPU kernel first copies the bias into its output (aten::copy_) and then runs the GEMM itself;
aten::to -> aten::_to_copy -> aten::copy_. Counting each level would count a GEMM twice, and counting
the innermost would count addmm's bias copy instead of its GEMM, so an op is *counted* when the
registry has a formula that does work for it and none of its ancestors is counted (the outermost op
with a formula: linear, _to_copy, scaled_dot_product_attention). Its measured time is its whole subtree's:
the device time of every kernel it and its descendants launched on a GPU trace, its inclusive host
time on a CPU-only trace (the op runs on the host). Ops inside a counted op, and views, are listed
with their own times and no work of their own.

Attainable time: planner's roofline of that op on the device (planner/predict/roofline.py) with the
device's efficiency model (a calibration profile where there is one, else the datasheet tier), the
same function a prediction uses. ratio = measured / attainable; above FLAG_RATIO the op is flagged.

Breakdown of the step's wall time (the profiler's span):
- GPU trace: device-busy time split by what bounds each kernel's op (compute, memory, launch
  overhead), kernels planner does not count, exposed communication (NCCL kernels not overlapped by
  compute on another stream; the overlapped part is reported beside it), and device-idle time:
  from a host synchronization until the first kernel launched after it returns (host sync), under a DataLoader range (data loading), or otherwise
  waiting for the host to launch work (host-bound: dispatch, Python).
- CPU trace: host-busy time of counted ops by bound, framework time (self time of ops that do no
  counted work: dispatch, views, uncounted ops), and idle (between top-level ops: Python).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from planner.errors import ConfigError
from planner.hardware.catalog import Device
from planner.predict.context import Context, default_context
from planner.predict.roofline import op_time
from planner.trace.ops import count_op
from planner.trace.read import Trace
from planner.workload.engines import get_engine

FLAG_RATIO = 2.0
"""An op measured above this multiple of its attainable time is flagged."""
_FLOAT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@dataclass(frozen=True)
class TraceReport:
    """A trace read against a device's roofline. Times in s, rates per s."""

    trace: Trace
    device: Device
    tier: str
    """Efficiency tier of the attainable times: measured, published, transferred or datasheet."""
    source: str
    """Where the efficiencies come from (a profile's provenance), one line."""
    dtype: str
    """Compute dtype assumed for the roofline of 16-bit ops ("bf16", "fp16") or "fp32"."""
    ops: pd.DataFrame
    """One row per host op in trace order (columns: see OP_COLUMNS)."""
    breakdown: tuple[tuple[str, float], ...]
    """(part, seconds) summing to the wall time."""
    overlapped_comm_s: float
    """Communication hidden under compute (not part of the breakdown's sum)."""
    wall_s: float

    @property
    def counted(self) -> pd.DataFrame:
        """Rows of counted ops (the ones set beside the roofline)."""
        return self.ops[self.ops["counted"]]

    @property
    def gemm_abs_ln(self) -> tuple[float | None, int]:
        """(median |ln(attainable / measured)| over counted matmul ops with a measured time, their count)."""
        g = self.counted
        g = g[(g["category"] == "matmul") & (g["measured_s"] > 0) & (g["attainable_s"] > 0)]
        if g.empty:
            return None, 0
        return statistics.median(abs(math.log(a / m)) for a, m in zip(g["attainable_s"], g["measured_s"])), len(g)

    @property
    def uncovered(self) -> pd.DataFrame:
        """Ops doing work no formula covers: aten ops without a formula that are neither inside a counted op
        nor hold one, and (GPU trace) launch kernels of their own."""
        o = self.ops
        mask = o["category"].isin(["uncounted", "unsupported"]) & (o["inside"] < 0) & ~o["holds_counted"]
        if self.trace.has_device:
            mask &= o["device_s"] > 0
        return o[mask]

    @property
    def flagged(self) -> pd.DataFrame:
        """Counted ops measured above FLAG_RATIO x their attainable time, slowest first."""
        f = self.counted[self.counted["flagged"]]
        return f.sort_values("measured_s", ascending=False)

    def by_category(self) -> pd.DataFrame:
        """Counted ops summed per category, plus one row "uncounted" for the time no formula covers."""
        c = self.counted
        frame = c.groupby("category").agg(ops=("name", "size"), measured_s=("measured_s", "sum"),
                                          attainable_s=("attainable_s", "sum"), flop=("flop", "sum"),
                                          bytes=("bytes", "sum"))
        frame["gap_s"] = frame["measured_s"] - frame["attainable_s"]
        frame["achieved_flop_per_s"] = frame["flop"] / frame["measured_s"].where(frame["measured_s"] > 0)
        frame["achieved_bytes_per_s"] = frame["bytes"] / frame["measured_s"].where(frame["measured_s"] > 0)
        frame["ratio"] = frame["measured_s"] / frame["attainable_s"].where(frame["attainable_s"] > 0)
        return frame.sort_values("measured_s", ascending=False)

    def by_signature(self) -> pd.DataFrame:
        """Counted ops grouped by name and input shapes: calls, time, attainable, ratio; slowest first."""
        c = self.counted
        frame = c.groupby(["name", "shapes"], sort=False).agg(
            category=("category", "first"), bound=("bound", "first"), calls=("name", "size"),
            measured_s=("measured_s", "sum"), attainable_s=("attainable_s", "sum"), flop=("flop", "sum"),
            bytes=("bytes", "sum")).reset_index()
        frame["ratio"] = frame["measured_s"] / frame["attainable_s"].where(frame["attainable_s"] > 0)
        frame["achieved_flop_per_s"] = frame["flop"] / frame["measured_s"].where(frame["measured_s"] > 0)
        frame["achieved_bytes_per_s"] = frame["bytes"] / frame["measured_s"].where(frame["measured_s"] > 0)
        return frame.sort_values("measured_s", ascending=False).reset_index(drop=True)


OP_COLUMNS = ("index", "name", "shapes", "phase", "depth", "parent", "category", "counted", "inside", "self_s",
              "total_s", "device_s", "device_total_s", "flop", "bytes", "measured_s", "attainable_s", "compute_s",
              "memory_s", "overhead_s", "bound", "ratio", "flagged", "holds_counted", "note")


def trace_device(trace: Trace, device: str | None, ctx: Context) -> Device:
    """The device to read `trace` against: `device` when given, else the GPU its metadata names, else
    (a CPU-only trace) this machine's CPU (Context.local_cpu: its profile's, else its datasheet figures)."""
    if device:
        return ctx.device(device)
    if trace.device_name:
        from planner.calibration.bench import catalog_id_for
        found = catalog_id_for(trace.device_name)
        if found is None:
            raise ConfigError(f"the trace ran on '{trace.device_name[:80]}', which is not in the catalog: give "
                              "--device (a catalog id or a profiled device)")
        return ctx.device(found)
    # this machine's CPU: its calibration profile's device (tier measured), else its datasheet figures read
    # from the system (tier datasheet; planner/hardware/cpu.py)
    return ctx.local_cpu()


def analyze(trace: Trace, device: str | None = None, *, engine: str = "eager", ctx: Context | None = None) -> TraceReport:
    """Read `trace` against the roofline of `device` (see trace_device) with the efficiency of the kernels
    `engine` runs (eager PyTorch for a plain profiler trace)."""
    ctx = ctx or default_context()
    dev = trace_device(trace, device, ctx)
    eff = ctx.efficiency(dev, get_engine(engine).libraries)
    dtype = _trace_dtype(trace)
    rows = _rows(trace, dev, eff, dtype)
    ops = pd.DataFrame(rows, columns=list(OP_COLUMNS))
    breakdown, overlapped = (_device_breakdown if trace.has_device else _host_breakdown)(trace, ops)
    return TraceReport(trace, dev, eff.tier, getattr(eff, "source", "") or f"{eff.tier} efficiencies", dtype, ops,
                       breakdown, overlapped, trace.span_ns / 1e9)


def _trace_dtype(trace: Trace) -> str:
    """The most common float width of counted ops' inputs: the compute dtype of 16-bit ops."""
    seen: Counter[str] = Counter()
    for op in trace.ops:
        c = count_op(op)
        if c.counts and c.record is not None:
            for t in c.record.tensors():
                if t.dtype in _FLOAT_DTYPES:
                    seen[_FLOAT_DTYPES[t.dtype]] += 1
    half = [d for d, _ in seen.most_common() if d != "fp32"]
    return half[0] if half else "fp32"


def _phase(trace: Trace) -> list[str]:
    phases = []
    for op in trace.ops:
        parent = phases[op.parent] if op.parent is not None else "forward"
        if op.name.startswith("autograd::engine::evaluate_function") or op.name.endswith("Backward0"):
            phase = "backward"
        elif op.category == "user_annotation" and op.name.startswith("Optimizer."):
            phase = "optimizer"
        else:
            phase = parent
        phases.append(phase)
    return phases


def _shapes(op) -> str:
    dims = [str(list(i.dims)) if i.type != "TensorList" else f"{len(i.dims)} tensors" for i in op.inputs if i.dims]
    return ", ".join(dims)[:200]


def _rows(trace: Trace, dev: Device, eff, dtype: str) -> list[tuple]:
    n = len(trace.ops)
    counted_list = [count_op(op) for op in trace.ops]
    child_ns = [0] * n
    for op in trace.ops:
        if op.parent is not None:
            child_ns[op.parent] += op.dur_ns
    # parents come before their children (start order): one pass finds the outermost op with a formula
    is_counted = [False] * n
    inside = [-1] * n
    for i, op in enumerate(trace.ops):
        p = op.parent
        if p is not None:
            inside[i] = p if is_counted[p] else inside[p]
        is_counted[i] = counted_list[i].counts and inside[i] < 0
    above = [False] * n  # a counted op somewhere below: its work is counted there
    for i in range(n - 1, -1, -1):
        p = trace.ops[i].parent
        if p is not None and (above[i] or is_counted[i]):
            above[p] = True
    by_ext = {op.external_id: op.index for op in trace.ops if op.external_id is not None}
    own = [0] * n
    for ev in trace.device_events:
        k = by_ext.get(ev.external_id)
        if k is not None:
            own[k] += ev.dur_ns
    sub = list(own)
    for i in range(n - 1, -1, -1):
        p = trace.ops[i].parent
        if p is not None:
            sub[p] += sub[i]
    phases = _phase(trace)
    rows = []
    for i, op in enumerate(trace.ops):
        c = counted_list[i]
        cat = c.category if op.category == "cpu_op" else "annotation"
        if cat == "uncounted" and c.note == "not an aten op":
            cat = "framework"
        measured = attainable = compute = memory = overhead = ratio = math.nan
        bound = ""
        if is_counted[i]:
            measured = (sub[i] if trace.has_device else op.dur_ns) / 1e9
            t = op_time(c.record, c.category, c.cost, dtype, dev, eff)
            attainable, compute, memory, overhead, bound = t.time_s, t.compute_s, t.memory_s, t.overhead_s, t.bound
            ratio = measured / attainable if measured > 0 and attainable > 0 else math.nan
        rows.append((i, op.name, _shapes(op), phases[i], op.depth, -1 if op.parent is None else op.parent, cat,
                     is_counted[i], inside[i], max(0, op.dur_ns - child_ns[i]) / 1e9, op.dur_ns / 1e9, own[i] / 1e9,
                     sub[i] / 1e9, c.cost.flop if is_counted[i] else 0.0, c.cost.bytes if is_counted[i] else 0.0,
                     measured, attainable, compute, memory, overhead, bound, ratio,
                     bool(ratio > FLAG_RATIO) if not math.isnan(ratio) else False, above[i], c.note))
    return rows


# ---------------------------------------------------------------- breakdown

def union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Disjoint sorted intervals covering the same points as `intervals` ((start, end) pairs)."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(intervals: list[tuple[int, int]]) -> int:
    """Total length of disjoint intervals."""
    return sum(e - s for s, e in intervals)


def intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Intersection of two disjoint sorted interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def gaps(busy: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The parts of [start, end] not covered by disjoint sorted `busy`."""
    out, t = [], start
    for s, e in busy:
        if s > t:
            out.append((t, min(s, end)))
        t = max(t, e)
    if t < end:
        out.append((t, end))
    return [(s, e) for s, e in out if e > s]


def kernel_classes(trace: Trace, ops: pd.DataFrame) -> list[str]:
    """Per device event: "communication", the bound of the counted op it belongs to ("compute", "memory",
    "overhead"), or "uncounted"."""
    by_ext = {op.external_id: op.index for op in trace.ops if op.external_id is not None}
    counted = ops["counted"].to_numpy()
    inside = ops["inside"].to_numpy()
    bound = ops["bound"].to_numpy()
    out = []
    for ev in trace.device_events:
        if ev.is_collective:
            out.append("communication")
            continue
        k = by_ext.get(ev.external_id)
        owner = k if k is not None and counted[k] else (inside[k] if k is not None else -1)
        out.append(bound[owner] if owner >= 0 and bound[owner] in ("compute", "memory", "overhead") else "uncounted")
    return out


def _device_breakdown(trace: Trace, ops: pd.DataFrame) -> tuple[tuple[tuple[str, float], ...], float]:
    classes = kernel_classes(trace, ops)
    events = trace.device_events
    busy = union([(e.start_ns, e.end_ns) for e in events])
    comm = union([(e.start_ns, e.end_ns) for e, c in zip(events, classes) if c == "communication"])
    work = union([(e.start_ns, e.end_ns) for e, c in zip(events, classes) if c != "communication"])
    overlapped = length(intersect(comm, work))
    exposed = length(comm) - overlapped
    # device-busy time of work, shared among classes in proportion to their kernel time (streams overlap)
    sums: Counter[str] = Counter()
    for e, c in zip(events, classes):
        if c != "communication":
            sums[c] += e.dur_ns
    total = sum(sums.values()) or 1
    parts = [(f"{name} kernels", length(work) * sums[key] / total) for key, name in
             (("compute", "compute-bound"), ("memory", "memory-bound"), ("overhead", "launch-overhead-bound"),
              ("uncounted", "uncounted"))]
    parts.append(("communication (exposed)", exposed))
    idle = gaps(busy, 0, trace.span_ns)
    # a synchronization holds the host until the device drains, and then the host must launch again:
    # device idle from the call's start until the next device event after it returns is the sync's
    starts = [e.start_ns for e in events]  # events are in start order
    syncs = [(r.start_ns, starts[k] if (k := bisect.bisect_left(starts, r.end_ns)) < len(starts) else trace.span_ns)
             for r in trace.runtime if r.is_sync]
    loading = union([(o.start_ns, o.end_ns) for o in trace.ops if "dataloader" in o.name.lower()])
    sync_ns = length(intersect(idle, union(syncs)))
    load_ns = length(intersect(gaps(union(syncs), 0, trace.span_ns), intersect(idle, loading)))
    parts += [("idle: host sync", sync_ns), ("idle: data loading", load_ns),
              ("idle: host-bound (dispatch, Python)", length(idle) - sync_ns - load_ns)]
    return tuple((name, ns / 1e9) for name, ns in parts), overlapped / 1e9


def _host_breakdown(trace: Trace, ops: pd.DataFrame) -> tuple[tuple[tuple[str, float], ...], float]:
    top = union([(o.start_ns, o.end_ns) for o in trace.ops if o.parent is None])
    counted = ops[ops["counted"]]
    parts = []
    for key, name in (("compute", "compute-bound ops"), ("memory", "memory-bound ops"),
                      ("overhead", "overhead-bound ops")):
        parts.append((name, float(counted.loc[counted["bound"] == key, "total_s"].sum())))
    busy_s = length(top) / 1e9
    parts.append(("framework (dispatch, views, uncounted ops)", max(0.0, busy_s - sum(p[1] for p in parts))))
    parts.append(("idle: between ops (Python)", trace.span_ns / 1e9 - busy_s))
    return tuple(parts), 0.0
