"""The same traced run on another device: each op's measured time scaled by the predicted ratio.

For a counted op (planner/trace/analyze.py), ratio = attainable time on the target / attainable time
on the device it ran on, both from the same roofline with each device's efficiency model; its
measured time is multiplied by that ratio, so what the model gets wrong about an op on one device
cancels to first order. Device time planner does not count (kernels of ops without a formula) is
scaled by the ratio of memory bandwidths (most of it is copies and small elementwise kernels);
communication kernels by the ratio of scale-up link bandwidths where both devices have one, else
kept. Host time is kept as measured, or multiplied by `host_scale` (0.5: a host twice as fast).

A GPU trace is then replayed: every kernel starts when its launch call ran on the host (measured,
shifted earlier where a host synchronization now returns sooner) plus the launch latency it had, or
when its stream is free plus the gap back-to-back kernels have (the trace's median); a synchronization returns when the device has finished what
was launched before it. So a host-bound run stays host-bound on a faster device (its kernels only
wait longer for the host), and a device-bound one shrinks with its kernels. Replaying the trace on
its own device with unit ratios reproduces its measured wall time exactly. A CPU-only trace's ops
run on the host: its counted ops' times are replaced and the rest kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import ConfigError, PlannerError
from planner.predict.context import Context, default_context
from planner.predict.roofline import op_time
from planner.trace.analyze import TraceReport, kernel_classes
from planner.trace.ops import count_op
from planner.workload.engines import get_engine


@dataclass(frozen=True, slots=True)
class WhatIf:
    """The traced run predicted on another device. Times in s."""

    device: str
    tier: str
    """Efficiency tier of the target's attainable times."""
    wall_s: float
    """Predicted wall time of the traced span."""
    measured_wall_s: float
    counted_s: float
    """Time of counted ops on the target (device time on a GPU trace, host time on a CPU trace)."""
    measured_counted_s: float
    other_s: float
    """Other device time (uncounted kernels, communication) on the target; 0 on a CPU trace."""
    measured_other_s: float
    unscaled_ops: int
    """Counted ops the target cannot run at their dtype (kept as measured)."""
    host_scale: float

    @property
    def speedup(self) -> float:
        """Measured wall / predicted wall (above 1: faster on the target)."""
        return self.measured_wall_s / self.wall_s if self.wall_s > 0 else math.nan

    def as_dict(self) -> dict:
        return {"device": self.device, "tier": self.tier, "wall_s": self.wall_s, "measured_wall_s": self.measured_wall_s,
                "speedup": self.speedup, "counted_s": self.counted_s, "measured_counted_s": self.measured_counted_s,
                "other_device_s": self.other_s, "measured_other_device_s": self.measured_other_s,
                "unscaled_ops": self.unscaled_ops, "host_scale": self.host_scale}


def what_if(report: TraceReport, device: str, *, host_scale: float = 1.0, engine: str = "eager",
            ctx: Context | None = None) -> WhatIf:
    """Predict the traced run of `report` on `device` (see the module docstring)."""
    ctx = ctx or default_context()
    if not (math.isfinite(host_scale) and 0 <= host_scale <= 100):
        raise ConfigError(f"--host-scale must be a number in [0, 100], got {host_scale!r}")
    src = report.device
    dst = ctx.device(device)
    dst_eff = ctx.efficiency(dst, get_engine(engine).libraries)
    ratios: dict[int, float] = {}
    unscaled = 0
    ops = report.ops
    for i in ops.index[ops["counted"]]:
        c = count_op(report.trace.ops[i])
        a = ops.at[i, "attainable_s"]
        try:
            b = op_time(c.record, c.category, c.cost, report.dtype, dst, dst_eff).time_s
        except PlannerError:  # no peak for this dtype on the target: kept as measured, and said
            unscaled += 1
            b = a
        ratios[i] = b / a if a > 0 else 1.0
    return replay(report, ratios, _other_ratios(src, dst), host_scale, dst.id, dst_eff.tier, unscaled)


def replay(report: TraceReport, ratios: dict[int, float], other: dict[str, float] | None = None,
           host_scale: float = 1.0, device: str | None = None, tier: str | None = None, unscaled: int = 0) -> WhatIf:
    """The traced run with each counted op's time multiplied by `ratios[op index]` (1 where absent), other
    device time by `other` ("uncounted", "communication"; 1 where absent) and host time by `host_scale`."""
    other = {"uncounted": 1.0, "communication": 1.0} | (other or {})
    device, tier = device or report.device.id, tier or report.tier
    if report.trace.has_device:
        return _replay(report, device, tier, ratios, other, unscaled, host_scale)
    counted = report.ops[report.ops["counted"]]
    measured = float(counted["measured_s"].sum())
    new = float(sum(counted.at[i, "measured_s"] * ratios.get(i, 1.0) for i in counted.index))
    host = report.wall_s - measured
    return WhatIf(device, tier, host * host_scale + new, report.wall_s, new, measured, 0.0, 0.0, unscaled, host_scale)


def _other_ratios(src, dst) -> dict[str, float]:
    link = src.scaleup_bytes_per_s / dst.scaleup_bytes_per_s if src.scaleup_bytes_per_s and dst.scaleup_bytes_per_s \
        else 1.0
    return {"uncounted": src.mem_bytes_per_s / dst.mem_bytes_per_s, "communication": link}


def _replay(report: TraceReport, device: str, tier: str, ratios: dict[int, float], other: dict[str, float],
            unscaled: int, host_scale: float) -> WhatIf:
    trace = report.trace
    ops = report.ops
    by_ext = {op.external_id: op.index for op in trace.ops if op.external_id is not None}
    launch = {r.correlation: r.start_ns for r in trace.runtime if r.correlation is not None}
    inside = ops["inside"].to_numpy()
    counted = ops["counted"].to_numpy()
    classes = kernel_classes(trace, ops)
    # (host time, kind, payload): kernels in launch order, synchronizations by their start
    timeline = []
    prev_end: dict[tuple[int, int], int] = {}
    queued_gaps = []
    for ev in trace.device_events:  # gaps between back-to-back kernels: what a queued kernel waits
        lane = (ev.device, ev.stream)
        if launch.get(ev.correlation, ev.start_ns) <= prev_end.get(lane, -1):
            queued_gaps.append(ev.start_ns - prev_end[lane])
        prev_end[lane] = ev.end_ns
    back_to_back = sorted(queued_gaps)[len(queued_gaps) // 2] if queued_gaps else 0
    prev_end = {}
    for k, ev in enumerate(trace.device_events):
        lane = (ev.device, ev.stream)
        at = launch.get(ev.correlation, ev.start_ns)
        before = prev_end.get(lane, 0)
        if at <= before:  # it waited for its stream: (launch latency hidden, gap after the last kernel)
            gap = (0, max(0, ev.start_ns - before))
        else:  # it waited for its launch: (launch latency, the back-to-back gap if it now queues)
            gap = (max(0, ev.start_ns - at), min(back_to_back, max(0, ev.start_ns - before)))
        prev_end[lane] = ev.end_ns
        owner = by_ext.get(ev.external_id)
        if owner is not None and not counted[owner]:
            owner = inside[owner] if inside[owner] >= 0 else None
        if classes[k] in other:
            ratio = other[classes[k]]
        else:
            ratio = ratios.get(owner, other["uncounted"])
        timeline.append((at, 1, (lane, gap, ev.dur_ns * ratio, classes[k], ev.dur_ns)))
    for r in trace.runtime:
        if r.is_sync:
            timeline.append((r.start_ns, 0, r))
    timeline.sort(key=lambda x: (x[0], x[1]))
    shift = 0.0
    free: dict[tuple[int, int], float] = {}
    done_measured = 0
    by_start = sorted((e.start_ns, e.end_ns) for e in trace.device_events)
    seen = 0  # device events started before the current synchronization (syncs come in start order)
    counted_s = other_s = measured_counted = measured_other = 0.0
    for at, kind, payload in timeline:
        host_at = host_scale * (at - shift)
        if kind == 1:
            lane, gap, dur, cls, measured = payload
            start = max(host_at + gap[0], free.get(lane, 0.0) + gap[1])
            free[lane] = start + dur
            if cls in ("uncounted", "communication"):
                other_s, measured_other = other_s + dur, measured_other + measured
            else:
                counted_s, measured_counted = counted_s + dur, measured_counted + measured
            continue
        r = payload
        while seen < len(by_start) and by_start[seen][0] <= r.start_ns:
            done_measured = max(done_measured, by_start[seen][1])
            seen += 1
        device_done = max(free.values(), default=0.0)
        returns = max(host_at, device_done) + max(0, r.end_ns - max(r.start_ns, done_measured))
        shift = r.end_ns - returns / host_scale if host_scale > 0 else shift
    end = max([host_scale * (trace.span_ns - shift)] + list(free.values()))
    return WhatIf(device, tier, end / 1e9, report.wall_s, counted_s / 1e9, measured_counted / 1e9, other_s / 1e9,
                  measured_other / 1e9, unscaled, host_scale)
