"""Time and energy of a device graph's pipeline stages on one device.

Each distinct kernel is timed by the roofline (planner/predict/roofline.py) and drawn power by the
energy model (planner/predict/energy.py); a stage is the sum of its parts, counts applied. No
communication here: planner/predict/inference.py and planner/predict/training.py add collectives.

Host dispatch. Kernels are launched asynchronously: the host issues them while the device runs earlier
ones, so a phase takes max(device time, kernels x host cost per kernel op + views x host cost per view).
The host costs are measured: an engine running its own library's profile that measured its dispatch
(eager PyTorch on a GPU with a pytorch-eager profile: host time per aten op in model code, about 22 us
on planner's H100 and H200 hosts) uses the profile's; otherwise the engine's (hardware_specs/engines).
A step the engine replays as a CUDA graph costs no per-kernel launch. Views launch no kernel and cost
the device nothing. On CPUs the dispatch cost is the calibrated per-op overhead already, so no separate
floor applies. The time a phase waits on the host is reported as ("<phase>", "launch") in the
breakdown and as the "launch" bound: such a phase is host-bound.

Power limit. Profiles and datasheet efficiencies describe kernels timed in short bursts; a workload
runs for seconds to days, and a kernel that would draw more than the device's power limit runs at the
lower clocks that limit sustains (PowerModel.sustained). The seconds this adds are `power_limited_s`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.hardware.catalog import Device
from planner.hardware.efficiency import EfficiencyModel
from planner.memo import IdentityMemo
from planner.predict.energy import PowerModel
from planner.predict.envelope import envelope_s
from planner.predict.roofline import (
    MATRIX_CATEGORIES,
    matrix_peak,
    op_dtype,
    op_time,
    roofline_s,
    vector_peak,
)
from planner.workload.device_graph import DeviceGraph, Part
from planner.workload.engines import get_engine


@dataclass(frozen=True, slots=True)
class StageTime:
    """Compute time and energy of one pipeline stage on one device, per step of its graph."""

    time_s: float
    """Sum of op times."""
    energy_j: float
    """Device energy over those ops (not including idle time while waiting on others)."""
    flop: float
    bytes: float
    """Bytes read plus written."""
    bound_s: dict[str, float]
    """Seconds of ops bound by compute, memory and overhead, and seconds waiting on host launches."""
    breakdown_s: dict[tuple[str, str], float]
    """Seconds by (phase, category), e.g. ("forward", "attention")."""
    phase_energy_j: dict[str, float]
    """Joules by phase."""
    power_limited_s: float = 0.0
    """Seconds of `time_s` added by the power limit (kernels slowed from their burst clocks)."""
    cells_s: dict[tuple[str, str, str], float] = field(default_factory=dict)
    """Seconds of ops by (phase, category, roofline bound): breakdown_s and bound_s are its sums (less the
    launch wait), read by planner/predict/diagnosis.py."""

    def phase_s(self, phase: str) -> float:
        """Seconds of the ops of one phase ("forward", "backward", "optimizer")."""
        return sum(t for (p, _), t in self.breakdown_s.items() if p == phase)


@dataclass(frozen=True, slots=True)
class OpRow:
    """One distinct op of a device graph with its predicted time: the --ops table."""

    role: str
    op: str
    category: str
    count: int
    flop: float
    bytes: float
    time_s: float
    """Per call."""
    bound: str
    energy_j: float
    """Per call."""


def host_dispatch_s(dg: DeviceGraph, device: Device, efficiency: EfficiencyModel | None = None) -> tuple[float, float]:
    """(host seconds per kernel op, per view) of `dg`'s engine on `device`: (0, 0) when the step is
    replayed as a CUDA graph or the device is a CPU; the profile's measured dispatch when the engine runs
    that profile's library on its own device (tier measured); else the engine's host_launch_s and
    host_view_s (hardware_specs/engines; views free where the engine gives none)."""
    engine = get_engine(dg.workload.engine)
    if device.kind == "cpu" or engine.replays(dg.workload.mode):
        return 0.0, 0.0
    profile = getattr(efficiency, "profile", None)
    dispatch = getattr(efficiency, "dispatch", None) or {}
    if dispatch and getattr(efficiency, "tier", "") == "measured" and profile.library in engine.profile_libraries:
        return float(dispatch["host_per_op_s"]), float(dispatch.get("view_host_s", 0.0))
    return engine.host_launch_s, engine.host_view_s


def host_launch_s(dg: DeviceGraph, device: Device, efficiency: EfficiencyModel | None = None) -> float:
    """Host seconds per kernel launch of `dg`'s engine on `device` (host_dispatch_s's first term)."""
    return host_dispatch_s(dg, device, efficiency)[0]


def _part_time(part: Part, dg: DeviceGraph, device: Device, efficiency: EfficiencyModel, power: PowerModel,
               with_rows: bool = False):
    """The part's totals on `device` (time, energy, FLOP, bytes, bound, rows, breakdown, phase energy,
    launches, time added by the power limit); rows (OpRow per op) only `with_rows` (the --ops table),
    else empty: a compare or sweep times each new part on each device and never reads them."""
    time = energy = limited = 0.0
    bound: dict[str, float] = {"compute": 0.0, "memory": 0.0, "overhead": 0.0}
    launches: dict[str, int] = {}
    breakdown: dict[tuple[str, str], float] = {}
    cells: dict[tuple[str, str, str], float] = {}
    phase_energy: dict[str, float] = {}
    rows = []
    # a GEMM's rows pad in every step timed as a whole (planner/predict/envelope.py: no step faster at a
    # larger batch or prompt); a single kernel set beside its own measurement (ops, trace) keeps its shape
    rows_pad = True
    timed, peaks, curve = _OP_TIMES.get((device, efficiency, power), (dg.dtype, rows_pad), lambda: (
        {}, {}, power.curve_for(device) if type(power) is PowerModel else None))
    ops, views, kernels, flop, nbytes, kernel_launches = _plan(part, dg.dtype)
    if views is not None:
        first_view, view_launches = views
        found = timed.get("view")
        if found is None:
            found = timed["view"] = _time_op(first_view, None, dg.dtype, device, efficiency, power, peaks, curve,
                                             rows_pad=rows_pad)
        if found[1] is None:  # views cost this device nothing: the host only dispatches them
            for key, count in view_launches.items():
                launches[key] = launches.get(key, 0) + count
            ops = kernels
    for op, slot, count, phase, key, view, view_key, matrix_dtype in ops:
        if view:
            # no kernel; the host still dispatches it (counted as views, key "<phase>:view")
            launches[view_key] = launches.get(view_key, 0) + count
        found = timed.get(slot)
        if found is None:
            if len(timed) >= 100_000:
                timed.clear()
            found = timed[slot] = _time_op(op, matrix_dtype, dg.dtype, device, efficiency, power, peaks, curve,
                                           timed, rows_pad)
        op_s = found[1]
        if op_s is None:
            continue
        op_total_s, e = op_s * count, found[3]
        limited += (op_s - found[0]) * count
        time += op_total_s
        energy += e * count
        bound[found[2]] += op_total_s
        breakdown[key] = breakdown.get(key, 0.0) + op_total_s
        cell = (*key, found[2])
        cells[cell] = cells.get(cell, 0.0) + op_total_s
        phase_energy[phase] = phase_energy.get(phase, 0.0) + e * count
        if with_rows:
            rows.append(OpRow(op.record.module, op.record.op, op.category, count, op.cost.flop, op.cost.bytes,
                              op_s, found[2], e))
    for phase, count in kernel_launches.items():  # each kernel op launches one kernel per call
        launches[phase] = launches.get(phase, 0) + count
    return time, energy, flop, nbytes, bound, rows, breakdown, phase_energy, launches, limited, cells


def _time_op(op, matrix_dtype: str | None, graph_dtype: str, device: Device, efficiency: EfficiencyModel,
             power: PowerModel, peaks: dict, curve, memo: dict | None = None, rows_pad: bool = False) -> tuple:
    """(burst seconds, sustained seconds (None: a view that costs nothing), bound, energy J, record, cost) of
    one op: op_time, then PowerModel.sustained_energy_j, by the same arithmetic (roofline.roofline_s,
    PowerModel.sustained_op) with the device's peak for each dtype read once into `peaks`, its power curve
    (PowerModel.curve_for) given, and no OpTime built per op. The record and cost are kept with the result:
    the memo's key holds their ids."""
    rec, category, cost = op.record, op.category, op.cost
    if category == "view" or type(power) is not PowerModel:
        burst = op_time(rec, category, cost, graph_dtype, device, efficiency, rows_pad)
        if burst.bound == "none":
            return burst.time_s, None, "none", 0.0, rec, cost
        t, e = power.sustained_energy_j(burst, device, cost)
        return burst.time_s, t.time_s, t.bound, e, rec, cost
    peak = peaks.get(matrix_dtype)
    if peak is None:
        peak = peaks[matrix_dtype] = (vector_peak(device, graph_dtype) if matrix_dtype is None
                                      else matrix_peak(device, matrix_dtype, graph_dtype))

    def resized_effs(r) -> tuple[float, float, float]:
        # (compute, memory efficiency, overhead) of a resized op (envelope.py: named as its anchor, interned), met
        # again from every op of its shape family on this device: looked up once (`memo`), keyed by identity
        # with the record kept to check it is the same
        key = ("resized", id(r))
        found = memo.get(key) if memo is not None else None
        if found is None or found[0] is not r:
            found = (r, efficiency.efficiencies(r, category, device))
            if memo is not None:
                memo[key] = found
        return found[1]

    if rec.op.startswith("fused."):  # op_time: a fused group's efficiency is read at its kernel's bytes
        compute_eff, memory_eff, overhead = efficiency.efficiencies(rec, category, device, nbytes=cost.bytes)
    else:
        compute_eff, memory_eff, overhead = efficiency.efficiencies(rec, category, device)
    time_s, compute, memory, bound = roofline_s(cost.flop, cost.bytes, peak, device.mem_bytes_per_s, compute_eff,
                                                memory_eff, overhead)
    # a GEMM of few rows or decode attention on the padding envelope (planner/predict/envelope.py), its parts
    # scaled to that time as roofline.op_time scales them; power drawn at the op's own FLOP and bytes
    floor = roofline_s(cost.flop, cost.bytes, peak, device.mem_bytes_per_s, 1.0, 1.0, 0.0)[0]
    enveloped = envelope_s(rec, category, lambda r, c: roofline_s(c.flop, c.bytes, peak, device.mem_bytes_per_s,
                                                                  *resized_effs(r))[0], floor, rows_pad)
    if enveloped is not None:
        f = enveloped / time_s if time_s > 0 else 1.0
        time_s, compute, memory, overhead = enveloped, compute * f, memory * f, overhead * f
    sustained_s, bound, energy = power.sustained_op(time_s, compute, memory, overhead, bound, peak, device, cost, curve)
    return time_s, sustained_s, bound, energy, rec, cost


def _plan(part: Part, dtype: str) -> tuple:
    """What `_part_time` reads of the part, the same on every device, worked out once per part and graph dtype:
    (entries, views, kernel entries, FLOP, bytes, kernel launches by phase).

    An entry per op: (op, its memo slot, count, phase, (phase, category), is a view, "<phase>:view", the dtype
    a matrix op computes in (roofline.op_dtype; None for vector work)). Every view shares one slot: a view
    launches no kernel, and what it costs (the dispatcher's time, on a CPU) is the device's and library's, not
    the op's (EfficiencyModel.efficiencies). Half of a decoder graph's ops are views, and on a GPU they cost
    nothing: `views` is (the first view op, views dispatched by "<phase>:view"), for a device whose views are
    free to count them at once (None for a part without views), and the kernel entries are the others. FLOP
    and bytes (counts applied) and the kernels launched per phase are summed in op order, as the per-op loop
    summed them: a view adds neither FLOP nor bytes."""
    return _PLANS.get((part,), (dtype,), lambda: _planned(part, dtype))


def _planned(part: Part, dtype: str) -> tuple:
    entries = tuple(
        (op, "view" if op.category == "view" else (id(op.record), op.category, id(op.cost)), op.count,
         op.record.phase, (op.record.phase, op.category), op.category == "view", f"{op.record.phase}:view",
         op_dtype(op.record, dtype) if op.category in MATRIX_CATEGORIES else None)
        for op in part.ops)
    flop = nbytes = 0.0
    kernel_launches: dict[str, int] = {}
    view_launches: dict[str, int] = {}
    first_view = None
    for op, entry in zip(part.ops, entries):
        if entry[5]:
            first_view = first_view or op
            view_launches[entry[6]] = view_launches.get(entry[6], 0) + entry[2]
        else:
            flop += op.cost.flop * op.count
            nbytes += op.cost.bytes * op.count
            kernel_launches[entry[3]] = kernel_launches.get(entry[3], 0) + entry[2]
    views = None if first_view is None else (first_view, view_launches)
    return entries, views, tuple(entry for entry in entries if not entry[5]), flop, nbytes, kernel_launches


_PLANS = IdentityMemo(8192)
_OP_TIMES = IdentityMemo(1024)
"""Per (device, efficiency, power model, dtype): each op's _time_op result by the identity of its record and
cost, the device's peak per dtype and its power curve. Device graphs of other layouts, batches and engines share
op objects (planner/workload/device_graph.py, _interned), so a cold `compare` times about half the ops."""
_PART_TIMES = IdentityMemo()
"""_part_time results by graph part, device, efficiency and power model (planner/memo.py): a sweep or
`compare` predicts the same cached graph part on the same device many times (other pp, dp, prices)."""
_STAGES = IdentityMemo()


def _cached_part_time(part: Part, dg: DeviceGraph, device: Device, efficiency: EfficiencyModel, power: PowerModel):
    return _PART_TIMES.get((part, device, efficiency, power), (dg.dtype, dg.workload.engine, dg.workload.mode),
                           lambda: _part_time(part, dg, device, efficiency, power))


def stage_times(dg: DeviceGraph, device: Device, efficiency: EfficiencyModel, power: PowerModel) -> list[StageTime]:
    """StageTime of each pipeline stage of `dg` on `device` (a fresh list; its StageTimes are shared)."""
    return list(_STAGES.get((dg.layer, dg.first, dg.last, device, efficiency, power),
                            (dg.num_layers, dg.parallelism.pp, dg.dtype, dg.workload.engine, dg.workload.mode),
                            lambda: _stage_times(dg, device, efficiency, power)))


def _stage_times(dg: DeviceGraph, device: Device, efficiency: EfficiencyModel, power: PowerModel) -> list[StageTime]:
    cache = {}
    for role, part in (("first", dg.first), ("layer", dg.layer), ("last", dg.last)):
        cache[role] = _cached_part_time(part, dg, device, efficiency, power)
    launch_s, view_s = host_dispatch_s(dg, device, efficiency)
    stages = []
    for stage in range(dg.parallelism.pp):
        time = energy = flop = nbytes = limited = 0.0
        bound = {"compute": 0.0, "memory": 0.0, "overhead": 0.0, "launch": 0.0}
        breakdown: dict[tuple[str, str], float] = {}
        cells: dict[tuple[str, str, str], float] = {}
        phase_energy: dict[str, float] = {}
        launches: dict[str, int] = {}
        for part, n in dg.stage_parts(stage):
            role = "layer" if part is dg.layer else ("first" if part is dg.first else "last")
            t, e, f, b, bnd, _, brk, pe, ln, lim, cel = cache[role]
            limited += n * lim
            for k, v in ln.items():
                launches[k] = launches.get(k, 0) + n * v
            time, energy, flop, nbytes = time + n * t, energy + n * e, flop + n * f, nbytes + n * b
            for k, v in bnd.items():
                bound[k] += n * v
            for k, v in brk.items():
                breakdown[k] = breakdown.get(k, 0.0) + n * v
            for k, v in pe.items():
                phase_energy[k] = phase_energy.get(k, 0.0) + n * v
            for k, v in cel.items():
                cells[k] = cells.get(k, 0.0) + n * v
        for phase, count in launches.items():
            if phase.endswith(":view"):
                continue
            device_s = sum(v for (p, _), v in breakdown.items() if p == phase)
            waiting = count * launch_s + launches.get(f"{phase}:view", 0) * view_s - device_s
            if waiting > 0:
                breakdown[(phase, "launch")] = waiting
                bound["launch"] += waiting
                time += waiting
        stages.append(StageTime(time, energy, flop, nbytes, bound, breakdown, phase_energy, limited, cells))
    return stages


def op_rows(dg: DeviceGraph, device: Device, efficiency: EfficiencyModel, power: PowerModel) -> list[OpRow]:
    """Every distinct op of `dg` with its time on `device`; layer ops' counts include all layers."""
    rows = []
    for part, times in ((dg.first, 1), (dg.layer, dg.num_layers), (dg.last, 1)):
        for row in _part_time(part, dg, device, efficiency, power, with_rows=True)[5]:
            rows.append(OpRow(row.role, row.op, row.category, row.count * times, row.flop, row.bytes, row.time_s,
                              row.bound, row.energy_j))
    return rows
