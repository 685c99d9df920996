"""What would gain most in a traced run, each change re-predicted by replaying the trace.

Only changes the model can price are listed, each with the wall time the replay
(planner/trace/whatif.py) predicts for it:
- host-bound GPU runs: replay the step as a CUDA graph (torch.compile mode="reduce-overhead", or
  torch.cuda.graphs): host time goes to zero, the kernels keep their times;
- ops measured above twice their attainable time: those ops at their attainable time (a kernel that
  reaches the roofline the device's efficiency model says is reachable: another layout, a fused or
  tuned kernel); the three slowest are named;
- another device, for each `--on` device whose what-if is faster.
A change predicted to gain less than advise's MIN_GAIN (1%) is not listed, as for a configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.trace.advise import MIN_GAIN
from planner.trace.analyze import TraceReport
from planner.trace.whatif import WhatIf, replay


@dataclass(frozen=True, slots=True)
class Finding:
    """One change to a traced run with its predicted wall time."""

    kind: str
    """"cuda-graph", "kernels", "cuda-graph+kernels" or "device"."""
    title: str
    wall_s: float
    """Predicted wall time of the traced span after the change, s."""
    gain: float
    """Throughput gain: measured wall / predicted wall - 1."""
    why: str

    def as_dict(self) -> dict:
        return {"kind": self.kind, "title": self.title, "wall_s": self.wall_s, "throughput_gain": self.gain,
                "why": self.why}


def findings(report: TraceReport, whatifs: list[WhatIf] = ()) -> list[Finding]:
    """Changes to the traced run ranked by predicted gain, largest first."""
    out: list[Finding] = []
    wall = report.wall_s
    parts = dict(report.breakdown)
    if report.trace.has_device:
        host = parts.get("idle: host-bound (dispatch, Python)", 0.0) + parts.get("idle: host sync", 0.0)
        graph = replay(report, {}, host_scale=0.0)
        out.append(Finding("cuda-graph", "replay the step as a CUDA graph (torch.compile mode='reduce-overhead')",
                           graph.wall_s, wall / graph.wall_s - 1,
                           f"the device waits for the host {100 * host / wall:.0f}% of the wall time; a graph "
                           "launches every kernel at once, so only kernel time and back-to-back gaps remain"))
    flagged = report.flagged
    if len(flagged):
        ratios = {i: r["attainable_s"] / r["measured_s"] for i, r in flagged.iterrows()}
        fixed = replay(report, ratios)
        names = ", ".join(list(dict.fromkeys(flagged["name"]))[:3])
        out.append(Finding("kernels", f"bring the {len(flagged)} ops above 2x their roofline to it ({names})",
                           fixed.wall_s, wall / fixed.wall_s - 1,
                           f"they take {1e3 * float(flagged['measured_s'].sum()):.2f} ms against "
                           f"{1e3 * float(flagged['attainable_s'].sum()):.2f} ms attainable on {report.device.id} "
                           f"({report.tier} ceilings): a tuned or fused kernel, another memory layout"))
        if report.trace.has_device:
            both = replay(report, ratios, host_scale=0.0)
            out.append(Finding("cuda-graph+kernels", f"a CUDA graph, and the {len(flagged)} ops above 2x their roofline "
                               "brought to it", both.wall_s, wall / both.wall_s - 1,
                               "once the host no longer paces the step, the kernels' own time decides it: "
                               f"{1e3 * float(flagged['measured_s'].sum()):.2f} ms of it is in those ops"))
    for w in whatifs:
        if w.device != report.device.id:
            out.append(Finding("device", f"run on {w.device}", w.wall_s, w.speedup - 1,
                               f"every op re-predicted on {w.device} ({w.tier} ceilings) and the trace replayed"))
    return sorted((f for f in out if f.gain >= MIN_GAIN), key=lambda f: -f.gain)
