"""Diagnosis: where one step's time goes, and the notes that name what bounds it.

A step's wall time is split along the path that sets it, the slowest pipeline stage's device:

    compute_s, memory_s, overhead_s   its ops, by each op's roofline bound (StageTime.cells_s): the FLOP
                                      rate, memory bandwidth, or the fixed cost of a kernel
    launch_s                          waiting on the host's kernel dispatch (the "launch" wait of
                                      planner/predict/timing.py; 0 in a phase the engine replays as a CUDA
                                      graph, whose one graph launch per step is not modelled)
    comm_s                            collectives it waits on, not overlapped with compute: TP all-reduces
                                      and EP all-to-alls per layer, pipeline sends, and data-parallel
                                      communication the backward pass does not hide
    bubble_s                          idle while other stages work: inference passes a batch through the
                                      stages one after another (the other stages' time); training's 1F1B
                                      schedule runs (M + pp - 1) slots of the slowest micro-batch, pp - 1
                                      of them fill and drain, a bubble of (pp-1)/(M+pp-1) of the pipeline

The parts add up to the step as planner/predict/inference.py and training.py add it up, so each share
(part / step) is a fraction of the predicted step and the shares sum to 1. A note names each cause that
takes at least NOTE_SHARE of the step, the largest first (the largest alone when none reaches it).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.predict.timing import StageTime

BOUNDS = ("compute", "memory", "overhead")
CAUSES = ("compute", "memory", "overhead", "launch", "comm", "bubble")
METRICS = {"compute": "compute_bound_fraction", "memory": "memory_bound_fraction",
           "overhead": "overhead_bound_fraction", "launch": "host_wait_fraction",
           "comm": "comm_exposed_fraction", "bubble": "pipeline_bubble_fraction"}
"""The Prediction metric that holds each cause's share of the diagnosed step."""
PREFIXES = {"compute": "compute-bound:", "memory": "memory-bound:", "overhead": "overhead-bound:",
            "launch": "host-bound:", "comm": "exposed communication:", "bubble": "pipeline bubble:"}
"""How each cause's note begins."""
NOTE_SHARE = 0.25
"""A cause gets a note when it takes at least this share of the step."""


@dataclass(frozen=True, slots=True)
class StepParts:
    """Seconds of one step by cause, on the path that sets the step (module docstring); they sum to step_s."""

    compute_s: float = 0.0
    """Ops bound by the device's FLOP rate."""
    memory_s: float = 0.0
    """Ops bound by memory bandwidth."""
    overhead_s: float = 0.0
    """Ops bound by a kernel's fixed cost."""
    launch_s: float = 0.0
    """The device idle, waiting on the host's kernel dispatch."""
    comm_s: float = 0.0
    """Collectives the device waits on (not overlapped)."""
    bubble_s: float = 0.0
    """The device idle while other pipeline stages work."""
    collectives: tuple[tuple[str, float], ...] = ()
    """(kind, count per step) of the collectives in comm_s."""

    @property
    def step_s(self) -> float:
        return self.compute_s + self.memory_s + self.overhead_s + self.launch_s + self.comm_s + self.bubble_s

    def __add__(self, other: StepParts) -> StepParts:
        counts = dict(self.collectives)
        for kind, n in other.collectives:
            counts[kind] = counts.get(kind, 0) + n
        return StepParts(*(getattr(self, f"{c}_s") + getattr(other, f"{c}_s") for c in CAUSES),
                         tuple(counts.items()))

    def scaled(self, k: float) -> StepParts:
        """Every time and count x k (k micro-batches; 1/2 for the mean of two steps)."""
        return StepParts(*(getattr(self, f"{c}_s") * k for c in CAUSES),
                         tuple((kind, n * k) for kind, n in self.collectives))

    def shares(self) -> dict[str, float]:
        """Each cause's share of step_s (all 0 for an empty step)."""
        step = self.step_s
        return {c: (getattr(self, f"{c}_s") / step if step > 0 else 0.0) for c in CAUSES}

    def metrics(self) -> dict[str, float]:
        """The shares under their METRICS keys, and "collectives_per_step"."""
        out = {METRICS[c]: share for c, share in self.shares().items()}
        out["collectives_per_step"] = sum(n for _, n in self.collectives)
        return out


def op_parts(st: StageTime, phases: tuple[str, ...] | None = None, attention_only: bool = False) -> StepParts:
    """A stage's ops (of `phases`, default all) by roofline bound, and its wait on host launches in them;
    `attention_only`: the attention ops alone, no launch wait (a selective recompute re-runs them)."""
    seconds = dict.fromkeys(BOUNDS, 0.0)
    for (phase, category, bound), t in st.cells_s.items():
        if (phases is None or phase in phases) and (not attention_only or category == "attention"):
            seconds[bound] += t
    if attention_only:
        launch = 0.0
    elif phases is None:
        launch = st.bound_s.get("launch", 0.0)
    else:
        launch = sum(st.breakdown_s.get((p, "launch"), 0.0) for p in phases)
    return StepParts(seconds["compute"], seconds["memory"], seconds["overhead"], launch)


def comm_parts(seconds: float, collectives: dict[str, float]) -> StepParts:
    """`seconds` of exposed collectives, `collectives` their counts by kind."""
    return StepParts(comm_s=seconds, collectives=tuple(collectives.items()) if seconds > 0 else ())


def pass_parts(stages: list[StageTime], comm_s: list[float], collectives: list[dict[str, int]],
               hop_s: float) -> StepParts:
    """One pass of a batch through the stages one after another (inference.pass_time: each stage's ops
    and collectives, then a send to the next): the slowest stage's ops and collectives, the pp - 1
    sends, and the other stages' time as its bubble."""
    own = [st.time_s + c for st, c in zip(stages, comm_s)]
    slow = max(range(len(stages)), key=own.__getitem__)
    parts = op_parts(stages[slow]) + comm_parts(comm_s[slow], collectives[slow])
    sends = len(stages) - 1
    if sends and hop_s > 0:
        parts += comm_parts(sends * hop_s, {"pipeline send": sends})
    return parts + StepParts(bubble_s=sum(t for s, t in enumerate(own) if s != slow))


def notes(parts: StepParts, step: str, engine: str, schedule: str = "") -> list[str]:
    """A note for each cause of at least NOTE_SHARE of `step` ("decode step", "training step", ...),
    largest first, each with its share of the step; `schedule` says how the pipeline runs (bubble note)."""
    shares = parts.shares()
    if parts.step_s <= 0:
        return []
    ranked = sorted(CAUSES, key=lambda c: -shares[c])
    chosen = [c for c in ranked if shares[c] >= NOTE_SHARE] or ranked[:1]
    return [_note(c, shares[c], parts, step, engine, schedule) for c in chosen]


def _note(cause: str, share: float, parts: StepParts, step: str, engine: str, schedule: str) -> str:
    head, of = PREFIXES[cause], f"{share:.0%} of each {step}"
    if cause == "compute":
        return f"{head} {of} in ops bound by the device's FLOP rate"
    if cause == "memory":
        return f"{head} {of} in ops bound by memory bandwidth"
    if cause == "overhead":
        return f"{head} {of} in kernels too small to reach either roofline (each kernel's fixed cost)"
    if cause == "launch":
        return (f"{head} the device waits {of} on the host's kernel dispatch ({engine} launches every kernel of "
                "it from the host); an engine that replays CUDA graphs or fuses kernels does not")
    if cause == "comm":
        what = " and ".join(f"{n:,.0f} {kind}{'s' if round(n) != 1 else ''}" for kind, n in parts.collectives)
        return f"{head} the device waits {of} on {what or 'collectives'}, not overlapped with compute"
    return f"{head} each device idles {of} while the other stages work" + (f" ({schedule})" if schedule else "")
