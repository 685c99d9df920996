"""planner's Python API: what the CLI does, as eight functions over composed, validated inputs.

    import planner
    p = planner.predict(model="llama-3.1-8b", device="h100-sxm", mode="inference", batch=8)
    p.metrics["tpot_s"]          # s
    p.to_frame()                 # one row, every figure of `planner predict --json`

Inputs come in groups, each a frozen dataclass (Workload, Parallel, Costs, Training, Platform); a field of
any group may also be given by name as a keyword (`batch=8` is Workload(batch=8)). An unknown or repeated
field raises ConfigError naming it. Every result has `to_dict()` (JSON-ready, units in the keys) and
`to_frame()` (pandas). Errors raised below are the library's; where one names a command-line flag of a
field (`--seq-len`), it is reworded to the field (`seq_len`), so a message names what the caller wrote.

Nothing here changes the process (no collector, thread or signal settings): the CLI entry point does that.
The `context` argument (planner.predict.context.Context: catalog, profiles, defaults and their caches) is
the data every call reads; None takes the shipped one (or $PLANNER_HARDWARE_SPECS).
"""

from __future__ import annotations

import difflib
import re
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from planner.errors import ConfigError, PlannerError


@dataclass(frozen=True)
class Workload:
    """What runs: mode and sizes; None takes the model's default."""

    mode: str = "inference"
    """inference, prefill, decode, forward or training (count and predict; predict takes inference or training)."""
    batch: int | str = 1
    """Sequences or images per step; predict also takes "max" (the largest that fits)."""
    input_len: int | None = None
    """Prompt tokens (LM inference)."""
    output_len: int = 256
    """Generated tokens per request (LM inference)."""
    seq_len: int | None = None
    """Sequence length (encoders, training; count: the prompt of a prefill)."""
    image_size: int | None = None
    """Image side in pixels (vision)."""
    dtype: str = "bf16"
    """A dtype (bf16, fp8, ...) or a quantization recipe or composition ("w4a16", "weights=int4,kv=fp8")."""
    engine: str | None = None
    """Execution engine (hardware_specs/engines); None: the workload's default."""


@dataclass(frozen=True)
class Parallel:
    """How the model is split over devices."""

    gpus: int | None = None
    """Devices in all; None: tp x pp x dp."""
    tp: int = 1
    pp: int = 1
    dp: int | None = None
    ep: int = 1
    zero: int = 0
    microbatches: int | None = None
    """Pipeline micro-batches per step (training)."""
    overlap: float = 0.8
    """Fraction of data-parallel communication hidden under compute (training)."""


@dataclass(frozen=True)
class Costs:
    """How the deployment is priced."""

    instance: str | None = None
    """A cloud instance ("p5.48xlarge"); None with no site: the cheapest that holds the devices."""
    site: str | None = None
    """An on-prem site (hardware_specs/sites.csv)."""
    pricing: str = "on_demand"
    utilization: float = 1.0
    """On-prem: fraction of hours the servers do useful work."""


@dataclass(frozen=True)
class Training:
    """Training step options (mode="training")."""

    global_batch: int | None = None
    micro_batch: int | None = None
    recompute: str = "none"
    mixed_precision: str = "auto"
    optimizer: str = "auto"
    train_tokens: float | None = None
    """Tokens of the whole run: time and cost to train are reported for it."""


@dataclass(frozen=True)
class Platform:
    """Changes to the catalog's device."""

    scaleout_gbps: float | None = None
    """Scale-out network per device per direction, Gb/s."""
    power_limit_w: float | None = None
    """A power limit below TDP, W."""


GROUPS = {"workload": Workload, "parallel": Parallel, "costs": Costs, "training": Training, "platform": Platform}
FIELDS = {f.name: name for name, cls in GROUPS.items() for f in fields(cls)}
"""Every field by name -> its group's name."""


def _compose(call: str, groups: dict[str, Any], loose: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    """The fields of the `allowed` groups, from the group objects given (None: defaults) overlaid with the
    loose keywords; ConfigError for an unknown keyword, a field of a group `call` does not take, a field
    given twice, or a group object of the wrong type."""
    out: dict[str, Any] = {}
    for name in allowed:
        value = groups.get(name)
        cls = GROUPS[name]
        if value is not None and not isinstance(value, cls):
            raise ConfigError(f"{call}(): {name} must be a planner.{cls.__name__}, got {type(value).__name__}")
        out.update(asdict(value if value is not None else cls()))
    valid = [f for g in allowed for f in (x.name for x in fields(GROUPS[g]))]
    for key, value in loose.items():
        if key not in valid:
            near = difflib.get_close_matches(key, valid, n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise ConfigError(f"{call}(): unknown field '{key}'{hint} valid: {', '.join(valid)}")
        group = groups.get(FIELDS[key])
        if group is not None:
            raise ConfigError(f"{call}(): field '{key}' given twice: as a keyword and in {FIELDS[key]}=")
        out[key] = value
    return out


_FLAG = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def _as_fields(exc: PlannerError) -> PlannerError:
    """The same error with each command-line flag of a field (--seq-len) written as the field (seq_len)."""
    def field(m: re.Match) -> str:
        name = m.group(1).replace("-", "_")
        return name if name in FIELDS else m.group(0)

    text = _FLAG.sub(field, str(exc))
    if text == str(exc):
        return exc
    new = type(exc).__new__(type(exc))
    new.args = (text,)
    return new


def _calling(fn, *args, **kwargs):
    """fn(*args, **kwargs) with a PlannerError's flags reworded to fields."""
    try:
        return fn(*args, **kwargs)
    except PlannerError as exc:
        raise _as_fields(exc) from None


def _request(model: str, device: str, values: dict[str, Any]):
    from planner.predict.api import Request

    return Request(model=model, device=device, **values)


def _model(model):
    """A zoo id or config.json path, resolved; a Model object as given."""
    from planner.workload.zoo import Model, resolve

    return model if isinstance(model, Model) else resolve(str(model))


def _name(model) -> str:
    """A resolved model's name (zoo id or the config's name)."""
    return model.name


# ------------------------------------------------------------------ results

class Result(ABC):
    """A result: to_dict() (JSON-ready) and to_frame() (pandas; by default to_dict() flattened to one row)."""

    @abstractmethod
    def to_dict(self) -> dict:
        """Every figure of the result, JSON-ready (numbers finite or None), units in the keys."""

    def to_frame(self):
        import pandas as pd

        return pd.json_normalize(self.to_dict(), sep=".")


@dataclass(frozen=True)
class CountResult(Result):
    """FLOP and bytes of one workload: totals and a table (by op, module, category or phase)."""

    model: str
    workload: dict
    """The workload with every default filled in."""
    params: int
    flop: float
    bytes_read: float
    bytes_written: float
    ops: int
    """aten ops executed."""
    by: str
    table: Any
    """pandas DataFrame: calls, flop, bytes_read, bytes_written, flop_share per `by` key."""

    def to_dict(self) -> dict:
        from planner.units import json_safe

        rows = [{self.by: str(k), **{c: float(v) for c, v in row.items()}} for k, row in self.table.iterrows()]
        return json_safe({"model": self.model, "workload": self.workload, "params": self.params, "flop": self.flop,
                          "bytes_read": self.bytes_read, "bytes_written": self.bytes_written, "ops": self.ops,
                          "by": self.by, "table": rows})

    def to_frame(self):
        return self.table.reset_index()

    def __str__(self) -> str:
        from planner.units import si

        return (f"{self.model}: {si(self.flop, 'FLOP')}, {si(self.bytes_read, 'B')} read, "
                f"{si(self.bytes_written, 'B')} written, {self.ops} ops ({self.workload['mode']}, "
                f"batch {self.workload['batch']}, {self.workload['dtype']})")


@dataclass(frozen=True)
class PredictResult(Result):
    """One configuration's prediction (planner.predict.prediction.Prediction): its fields are readable
    here too (`fits`, `metrics`, `memory`, `cost`, `notes`, ...)."""

    prediction: Any

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.prediction, name)

    def to_dict(self) -> dict:
        return self.prediction.as_dict()

    def __str__(self) -> str:
        return summary(self.prediction)


def summary(p) -> str:
    """A prediction in a few lines: the deployment, memory, the mode's times and rate, energy and cost."""
    from planner.units import band_label, si

    m, par = p.metrics, p.parallelism
    lines = [f"{p.model} on {p.gpus} x {p.device} (tp {par.tp}, pp {par.pp}, dp {par.dp}), {p.mode}, {p.dtype}, "
             f"engine {p.engine}, tier {p.tier} (band {band_label(p.band_fraction)})",
             f"memory/device {si(p.memory.total_bytes, 'B')} of {si(p.memory.capacity_bytes, 'B')}: "
             + ("fits" if p.fits else "does NOT fit")]
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("latency_s", "latency"), ("step_time_s", "step")):
        if m.get(key) is not None:
            lines.append(f"{label:<13} {_time(m[key])}  ({_time(p.band(m[key])[0])} .. {_time(p.band(m[key])[1])})")
    for key, label in (("throughput_tokens_per_s", "tokens/s"), ("throughput_samples_per_s", "samples/s")):
        if m.get(key) is not None:
            lines.append(f"{label:<13} {m[key]:,.1f}")
    if p.cost is not None:
        lines.append(f"cost          ${p.cost.usd_per_h:,.2f}/h ({p.cost.what})")
    return "\n".join(lines)


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.3f} s"


@dataclass(frozen=True)
class FrameResult(Result):
    """A table result (compare, sweep): `frame` is the pandas DataFrame; to_dict() gives its rows."""

    frame: Any
    extra: dict

    def to_dict(self) -> dict:
        from planner.units import json_safe

        return json_safe({**self.extra, "rows": self.frame.to_dict(orient="records")})

    def to_frame(self):
        return self.frame.copy()

    def __str__(self) -> str:
        # the long text columns (notes, profile paths) make a table unreadable: to_frame() has them
        long = [c for c in self.frame.columns if self.frame[c].astype(str).str.len().max() > 60]
        return self.frame.drop(columns=long).to_string(index=False)


@dataclass(frozen=True)
class ObjectResult(Result):
    """A library result with its own as_dict() (serve, plan, advise): its fields are readable here too;
    to_frame() gives `rows` when the result has a table, else one row of to_dict()."""

    value: Any
    extra: dict
    rows_key: str | None = None

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.value, name)

    def to_dict(self) -> dict:
        from planner.units import json_safe

        return json_safe({**self.value.as_dict(), **self.extra})

    def to_frame(self):
        import pandas as pd

        out = self.to_dict()
        if self.rows_key and isinstance(out.get(self.rows_key), list):
            return pd.json_normalize(out[self.rows_key], sep=".")
        return pd.json_normalize({k: v for k, v in out.items() if not isinstance(v, list)}, sep=".")


# ------------------------------------------------------------------ the eight calls

def count(model, workload: Workload | None = None, *, by: str = "category", context_len: int | None = None,
          **fields_) -> CountResult:
    """FLOP and bytes of `model` (a zoo id, a config.json path or a Model) under `workload` (its fields
    may be keywords); `by`: op, module, category or phase. For mode="decode", context_len is the tokens
    already cached. Eager counts: every aten op its own kernel."""
    from planner.workload.counting import count as count_ops
    from planner.workload.graphs import Workload as GraphWorkload
    from planner.workload.graphs import build_graph
    from planner.workload.user_model import default_batch

    values = _compose("count", {"workload": workload}, fields_, ("workload",))
    if by not in ("op", "module", "category", "phase"):
        raise ConfigError(f"count(): by must be one of op, module, category, phase, got {str(by)[:40]!r}")
    resolved = _calling(_model, model)
    batch = values["batch"] if workload is not None or "batch" in fields_ else default_batch(resolved)
    graph_workload = GraphWorkload(mode=values["mode"], batch=batch, seq_len=values["seq_len"] or values["input_len"],
                                   context_len=context_len, image_size=values["image_size"], dtype=values["dtype"],
                                   engine=values["engine"] or "eager")
    wg = _calling(build_graph, resolved, graph_workload)
    counts = count_ops(wg.graph)
    t = counts.total
    return CountResult(_name(resolved), asdict(wg.workload), int(wg.params), t.flop, t.bytes_read, t.bytes_written,
                       len(counts.ops), by, counts.table(by))


def predict(model, device: str, workload: Workload | None = None, parallel: Parallel | None = None,
            costs: Costs | None = None, training: Training | None = None, platform: Platform | None = None, *,
            context=None, **fields_) -> PredictResult:
    """The prediction of `model` on `device` (a catalog id): times in s, rates per s, memory in B, energy
    in J, money in USD; with its tier, band and the catalog rows it read."""
    from planner.predict.api import predict as predict_request

    values = _compose("predict", {"workload": workload, "parallel": parallel, "costs": costs, "training": training,
                                  "platform": platform}, fields_, tuple(GROUPS))
    resolved = _calling(_model, model)
    req = _request(_name(resolved), device, values)
    return PredictResult(_calling(predict_request, req, context, resolved))


def compare(model, devices: list[str] | None = None, workload: Workload | None = None,
            training: Training | None = None, *, sort: str = "cost", context=None, **fields_) -> FrameResult:
    """One row per device (every catalog device when None): the smallest tensor-parallel group that fits,
    priced on the cheapest instance; devices that cannot run it say why."""
    from planner.predict.api import compare as compare_devices

    values = _compose("compare", {"workload": workload, "training": training}, fields_, ("workload", "training"))
    resolved = _calling(_model, model)
    frame = _calling(compare_devices, resolved, list(devices) if devices else None, sort=sort, ctx=context, **values)
    return FrameResult(frame, {"model": _name(resolved), "sort": sort})


def serve(model, device: str, load=None, scheduling=None, slo=None, workload: Workload | None = None,
          parallel: Parallel | None = None, costs: Costs | None = None, platform: Platform | None = None, *,
          context=None, **fields_) -> ObjectResult:
    """Continuous batching of `model` on `device` under `load` (planner.Load: rate_rps or concurrency, lengths,
    arrival), `scheduling` (planner.Scheduling) and `slo` (planner.Slo): TTFT/TPOT percentiles, goodput."""
    from planner.serve.api import Load, Scheduling, Slo
    from planner.serve.api import serve as simulate

    values = _compose("serve", {"workload": workload, "parallel": parallel, "costs": costs, "platform": platform},
                      fields_, ("workload", "parallel", "costs", "platform"))
    resolved = _calling(_model, model)
    req = _request(_name(resolved), device, values)
    result = _calling(simulate, req, load or Load(), scheduling or Scheduling(), slo or Slo(), context, resolved)
    return ObjectResult(result, {})


def plan(scenario: str | Path | dict, *, objective: str | None = None, context=None) -> ObjectResult:
    """The instance mix that meets a scenario (a YAML path, or the same content as a dict) at least cost (or
    `objective`: cost, energy, carbon), with its independent check: to_dict()["check"]."""
    from dataclasses import replace

    from planner.plan.check import check
    from planner.plan.scenario import load, parse
    from planner.plan.solve import solve

    parsed = _calling(parse, scenario) if isinstance(scenario, dict) else _calling(load, scenario)
    if objective:
        parsed = replace(parsed, objective=objective, weights=((objective, 1.0),))
    result = _calling(solve, parsed, context)
    problems = check(result, parsed)
    return ObjectResult(result, {"check": {"passed": not problems, "problems": problems}}, "rows")


def sweep(grid: str | Path, out: str | Path, *, backend: str = "local", workers: int = 1,
          address: str | None = None) -> FrameResult:
    """Predict every point of a sweep grid (YAML) into the Parquet or CSV file `out`; the frame holds every
    row with its measures (cost per unit of work, ...)."""
    import pandas as pd

    from planner.sweep.grid import load_grid
    from planner.sweep.run import run_sweep
    from planner.sweep.summary import measures

    result = _calling(run_sweep, _calling(load_grid, grid), out, backend, workers, address)
    path = Path(result.out)
    frame = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    return FrameResult(measures(frame), {"out": str(path), "points": result.points, "errors": result.errors,
                                         "wall_s": result.wall_s})


def trace(path: str | Path, device: str, *, engine: str = "eager", on: list[str] | None = None,
          host_scale: float = 1.0) -> ObjectResult:
    """A PyTorch Profiler trace read back on `device`: each op beside its roofline, the what-ifs on the
    devices `on`, and the findings; to_frame() gives the ops."""
    from planner.trace.analyze import analyze
    from planner.trace.findings import findings
    from planner.trace.read import read_trace
    from planner.trace.whatif import what_if

    report = _calling(analyze, _calling(read_trace, path), device, engine=engine)
    whatifs = [_calling(what_if, report, d, host_scale=host_scale, engine=engine) for d in (on or [])]
    return ObjectResult(_Trace(report, tuple(whatifs), tuple(findings(report, whatifs))), {}, "ops")


@dataclass(frozen=True)
class _Trace:
    report: Any
    whatifs: tuple
    findings: tuple

    def as_dict(self) -> dict:
        from planner.cli.trace import as_json

        return as_json(self.report, list(self.whatifs), list(self.findings))


def advise(model, device: str, workload: Workload | None = None, parallel: Parallel | None = None,
           costs: Costs | None = None, training: Training | None = None, *, objective: str = "throughput",
           slo_ttft_s: float | None = None, slo_tpot_s: float | None = None, max_latency_s: float | None = None,
           top: int | None = None, context=None, **fields_) -> ObjectResult:
    """The changes to a configuration the predictor says beat it on `objective` (throughput, cost,
    latency, energy), best first; to_frame() gives the ranked changes."""
    from planner.trace.advise import advise as rank

    values = _compose("advise", {"workload": workload, "parallel": parallel, "costs": costs, "training": training},
                      fields_, ("workload", "parallel", "costs", "training", "platform"))
    resolved = _calling(_model, model)
    req = _request(_name(resolved), device, values)
    advice = _calling(rank, req, objective=objective, slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s,
                      max_latency_s=max_latency_s, ctx=context, top=top, model=resolved)
    return ObjectResult(advice, {}, "options")
