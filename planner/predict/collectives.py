"""Measured collective curves: time against message bytes per device, op, GPU count and node count.

The data are hardware_specs/collectives/<device-id>.json, converted by scripts/import_collectives.py
from published NCCL measurements (aiconfigurator's nccl-tests runs, Vidur's profiles) and the serving
engines' own all-reduce (TensorRT-LLM, vLLM, SGLang); the README there gives every source. Message
bytes are the full buffer as nccl-tests counts it (parallel.py uses the same definition).

A curve's time at M bytes, with measured points (b_1, t_1) .. (b_k, t_k), b ascending:
    M <= b_1            t_1                       (latency-bound: the smallest point's time)
    b_i <= M <= b_i+1   exp(ln t_i + (ln M - ln b_i) / (ln b_i+1 - ln b_i) · (ln t_i+1 - ln t_i))
    M > b_k             α + M · f / β, the asymptote of the two largest points: bus bandwidth
                        β = f · (b_k - b_k-1) / (t_k - t_k-1), latency α = t_k - b_k · f / β
                        (so t = t_k + (M - b_k) · (t_k - t_k-1) / (b_k - b_k-1); α is the intercept and
                        comes out negative when the last segment is steeper than the line through the
                        origin; if t_k <= t_k-1, α = 0 and β = f · b_k / t_k)
and then at most the time of any larger measured size, min(that, t_j for every b_j >= M): a message can
be padded to a larger one, so a measured curve whose time dips with size (two algorithms crossing, noise
at small sizes) is read as its lower envelope, non-decreasing in M (tests/predict/test_collectives.py);
with f the bus factor of nccl-tests: 2(n-1)/n for an all-reduce, (n-1)/n for all-gather,
reduce-scatter and all-to-all, 1 for point-to-point. A GPU count n that was not measured inside one
node takes the nearest measured count m (the larger on a tie) scaled by the ring step factor:
t_n(M) = t_m(M) · f(n) / f(m).
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import random
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from planner.errors import ConfigError
from planner.files import parse_json, read_text, shipped_specs

ROOT = shipped_specs()
OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "p2p")
MAX_CURVES = 1000
"""Most curves one device file may hold."""
MAX_POINTS = 10_000
"""Most points one curve may hold."""
MAX_GPUS = 2**20
HOLDOUT_FRACTION = 0.2
"""Share of each curve's points held back in the held-out evaluation."""
HOLDOUT_SEED = 0
"""Seed of the held-out draw (one random.Random per curve, seeded with this and the curve's name)."""


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus bandwidth factor: busbw = algbw x this (all-reduce 2(n-1)/n, p2p 1, others (n-1)/n)."""
    if op == "p2p":
        return 1.0
    return (2 if op == "allreduce" else 1) * (n - 1) / n


@dataclass(frozen=True, slots=True)
class Curve:
    """One measured collective: time against message bytes."""

    op: str
    """allreduce, allgather, reducescatter, alltoall or p2p."""
    gpus: int
    """Devices in the group (count)."""
    nodes: int
    """Scale-up domains (servers, or NVLink pairs of PCIe cards) the group spans (count)."""
    source: str
    """Key of the file's `sources` entry."""
    message_bytes: tuple[float, ...]
    """Message sizes in bytes, strictly ascending."""
    time_s: tuple[float, ...]
    """Measured time in seconds at each size."""
    engine: str | None = None
    """The serving engine whose own all-reduce this is; None for NCCL."""

    def asymptote(self) -> tuple[float, float]:
        """(latency_s, bus_bytes_per_s) of the line through the two largest points."""
        (b1, b2), (t1, t2) = self.message_bytes[-2:], self.time_s[-2:]
        f = bus_factor(self.op, self.gpus)
        if t2 <= t1:
            return 0.0, f * b2 / t2
        bw = f * (b2 - b1) / (t2 - t1)
        return t2 - b2 * f / bw, bw

    def time_at_s(self, message_bytes: float) -> float:
        """Seconds at `message_bytes` (module docstring: interpolation and both extrapolations)."""
        b, t = self.message_bytes, self.time_s
        if message_bytes <= b[0]:
            return min(t)
        if message_bytes > b[-1]:
            latency_s, bw = self.asymptote()
            return latency_s + message_bytes * bus_factor(self.op, self.gpus) / bw
        hi = bisect.bisect_left(b, message_bytes)  # b[hi-1] < message_bytes <= b[hi]
        above = min(t[hi:])  # the padding envelope (module docstring)
        if message_bytes == b[hi]:
            return above
        lo = hi - 1
        w = (math.log(message_bytes) - math.log(b[lo])) / (math.log(b[hi]) - math.log(b[lo]))
        return min(above, math.exp(math.log(t[lo]) + w * (math.log(t[hi]) - math.log(t[lo]))))

    def label(self) -> str:
        what = f"{self.engine} all-reduce" if self.engine else self.op
        return f"{what}, {self.gpus} GPUs on {self.nodes} node{'s' if self.nodes > 1 else ''}"


@dataclass(frozen=True, slots=True)
class Lookup:
    """A time read off a device's measured curves."""

    time_s: float
    """Seconds."""
    basis: str
    """Which curve, from which source, and how it was read (for the prediction's notes)."""
    exact: bool
    """True when the measured (op, GPUs, nodes) curve itself was read, False when scaled from another count."""
    side: int = 0
    """-1 below the curve's smallest measured size, 0 within its measured range, 1 above its largest."""


@dataclass(frozen=True, slots=True)
class DeviceCurves:
    """Every measured collective curve of one device."""

    device: str
    """Catalog device id."""
    sources: tuple[tuple[str, str], ...]
    """(key, one-line description: library, repository, commit) of each source."""
    curves: tuple[Curve, ...]
    """NCCL curves, one per (op, gpus, nodes)."""
    custom: tuple[Curve, ...]
    """The engines' own all-reduce curves, one per (engine, gpus) inside one node."""

    def source(self, key: str) -> str:
        return dict(self.sources).get(key, key)

    def find(self, op: str, gpus: int, nodes: int) -> Curve | None:
        """The measured curve of exactly (op, gpus, nodes), or None."""
        return next((c for c in self.curves if (c.op, c.gpus, c.nodes) == (op, gpus, nodes)), None)

    def has(self, op: str) -> bool:
        """True when some single-node curve of `op` was measured."""
        return any(c.op == op and c.nodes == 1 for c in self.curves)

    def lookup(self, op: str, message_bytes: float, gpus: int) -> Lookup | None:
        """Time of `op` over `gpus` devices inside one node, from the measured curve of that count or the
        nearest measured count scaled by the ring step factor; None when `op` was not measured."""
        return _read(self, [c for c in self.curves if c.op == op and c.nodes == 1], op, message_bytes, gpus)

    def custom_lookup(self, engine: str, message_bytes: float, gpus: int) -> Lookup | None:
        """Time of `engine`'s own all-reduce over `gpus` devices inside one node, or None."""
        return _read(self, [c for c in self.custom if c.engine == engine], "allreduce", message_bytes, gpus)


def _read(dc: DeviceCurves, candidates: list[Curve], op: str, message_bytes: float, gpus: int) -> Lookup | None:
    if not candidates:
        return None
    curve = min(candidates, key=lambda c: (abs(c.gpus - gpus), -c.gpus))
    t = curve.time_at_s(message_bytes)
    b = curve.message_bytes
    how = ("below the smallest measured size: its time" if message_bytes < b[0] else
           "above the largest measured size: its asymptotic bus bandwidth" if message_bytes > b[-1] else
           "a measured point" if message_bytes in b else "interpolated in log-log")
    basis = f"{dc.device} {curve.label()} ({dc.source(curve.source)}), {how}"
    side = -1 if message_bytes < b[0] else 1 if message_bytes > b[-1] else 0
    if curve.gpus == gpus:
        return Lookup(t, basis, True, side)
    scale = bus_factor(op, gpus) / bus_factor(op, curve.gpus)
    return Lookup(t * scale, f"{basis}, scaled to {gpus} GPUs by the ring factor ({scale:.3f})", False, side)


# ------------------------------------------------------------------ loading

def collectives_root() -> Path:
    """The collectives folder: $PLANNER_HARDWARE_SPECS/collectives when that is set, else the repository's."""
    return Path(_folder(os.environ.get("PLANNER_HARDWARE_SPECS")))


@lru_cache(maxsize=8)
def _folder(specs: str | None) -> str:
    # by the variable's value: a sweep asks for the curves thousands of times a second
    return str((Path(specs) if specs else ROOT) / "collectives")


def device_curves(device_id: str) -> DeviceCurves | None:
    """The measured curves of `device_id`, or None when none were published for it."""
    return load_curves(_folder(os.environ.get("PLANNER_HARDWARE_SPECS"))).get(device_id)


@lru_cache(maxsize=4)
def load_curves(folder: str) -> dict[str, DeviceCurves]:
    """Every <device-id>.json under `folder` (a missing folder holds none), by device id."""
    path = Path(folder)
    if not path.is_dir():
        return {}
    out = {}
    for file in sorted(path.glob("*.json")):
        where = f"hardware_specs/collectives/{file.name}"
        dc = parse_curves(parse_json(read_text(file, where), where), where)
        if dc.device != file.stem:
            raise ConfigError(f"{where}: device '{dc.device[:40]}' differs from the file name '{file.stem}'")
        out[dc.device] = dc
    return out


def _int(value, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"{where} must be a whole number in [{lo}, {hi}], got {str(value)[:40]}")
    return value


def _points(entry: dict, where: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    b, t = entry.get("bytes"), entry.get("time_s")
    if not isinstance(b, list) or not isinstance(t, list) or len(b) != len(t) or not 2 <= len(b) <= MAX_POINTS:
        raise ConfigError(f"{where}: 'bytes' and 'time_s' must be lists of equal length, 2 to {MAX_POINTS}")
    for name, values in (("bytes", b), ("time_s", t)):
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ConfigError(f"{where}: '{name}' holds {str(v)[:40]}; every value must be a positive number")
    if any(b2 <= b1 for b1, b2 in itertools.pairwise(b)):
        raise ConfigError(f"{where}: 'bytes' must be strictly ascending")
    return tuple(float(v) for v in b), tuple(float(v) for v in t)


def parse_curves(data, where: str) -> DeviceCurves:
    """Validate one device file and return its curves; ConfigError names `where` and the field."""
    if not isinstance(data, dict) or not isinstance(data.get("device"), str) or not data["device"]:
        raise ConfigError(f"{where}: a collectives file must hold an object with 'device'")
    raw_sources = data.get("sources")
    if not isinstance(raw_sources, dict) or not raw_sources:
        raise ConfigError(f"{where}: 'sources' must be a non-empty object")
    sources = []
    for key, s in raw_sources.items():
        if not isinstance(s, dict) or not all(isinstance(s.get(k), str) and s[k] for k in
                                              ("repository", "commit", "path", "license", "method")):
            raise ConfigError(f"{where}: source '{key[:40]}' needs repository, commit, path, license and method")
        sources.append((key, f"{s.get('library', 'library not recorded')}; {s['repository'].removeprefix('https://')}"
                             f" @{s['commit'][:7]}"))
    curves, custom = [], []
    for field, out in (("curves", curves), ("custom_allreduce", custom)):
        entries = data.get(field, [])
        if not isinstance(entries, list) or len(entries) > MAX_CURVES:
            raise ConfigError(f"{where}: '{field}' must be a list of at most {MAX_CURVES} curves")
        for i, e in enumerate(entries):
            at = f"{where}: {field}[{i}]"
            if not isinstance(e, dict):
                raise ConfigError(f"{at} must be an object")
            op = e.get("op", "allreduce") if field == "curves" else "allreduce"
            if op not in OPS:
                raise ConfigError(f"{at}: unknown op '{str(op)[:40]}'; valid: {', '.join(OPS)}")
            engine = None
            if field == "custom_allreduce":
                engine = e.get("engine")
                if not isinstance(engine, str) or not engine:
                    raise ConfigError(f"{at}: 'engine' must name the engine")
            gpus = _int(e.get("gpus"), f"{at}: gpus", 2, MAX_GPUS)
            nodes = _int(e.get("nodes"), f"{at}: nodes", 1, gpus)
            if engine is not None and nodes != 1:
                raise ConfigError(f"{at}: an engine's all-reduce curve must be measured inside one node")
            if e.get("source") not in raw_sources:
                raise ConfigError(f"{at}: source '{str(e.get('source'))[:40]}' is not in 'sources'")
            b, t = _points(e, at)
            out.append(Curve(op, gpus, nodes, e["source"], b, t, engine))
    keys = [(c.op, c.gpus, c.nodes) for c in curves] + [(c.engine, c.gpus, 1) for c in custom]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"{where}: two curves for the same (op or engine, gpus, nodes)")
    return DeviceCurves(data["device"], tuple(sources), tuple(curves), tuple(custom))


# ------------------------------------------------------------------ held-out evaluation

@dataclass(frozen=True, slots=True)
class HeldOut:
    """One held-back point and its prediction from the rest of its curve."""

    device: str
    op: str
    """The op, or 'custom_allreduce:<engine>' for an engine's own all-reduce."""
    gpus: int
    nodes: int
    message_bytes: float
    measured_s: float
    predicted_s: float

    @property
    def error_fraction(self) -> float:
        """|predicted / measured - 1|."""
        return abs(self.predicted_s / self.measured_s - 1)


def holdout(dc: DeviceCurves, fraction: float = HOLDOUT_FRACTION, seed: int = HOLDOUT_SEED) -> list[HeldOut]:
    """Hold back `fraction` of each curve's points (at least 1, leaving at least 2), drawn at random with
    a generator seeded by `seed` and the curve's name; predict each from the remaining points."""
    out = []
    for c in dc.curves + dc.custom:
        op = f"custom_allreduce:{c.engine}" if c.engine else c.op
        n = len(c.message_bytes)
        k = min(max(1, round(fraction * n)), n - 2)
        if k < 1:
            continue
        rng = random.Random(f"{seed}:{dc.device}:{op}:{c.gpus}:{c.nodes}")
        held = set(rng.sample(range(n), k))
        keep = [i for i in range(n) if i not in held]
        fit = Curve(c.op, c.gpus, c.nodes, c.source, tuple(c.message_bytes[i] for i in keep),
                    tuple(c.time_s[i] for i in keep), c.engine)
        out += [HeldOut(dc.device, op, c.gpus, c.nodes, c.message_bytes[i], c.time_s[i],
                        fit.time_at_s(c.message_bytes[i])) for i in sorted(held)]
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of `values`, linear between order statistics (numpy's default)."""
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def band_fraction(device_id: str) -> float | None:
    """The p90 held-out |error| of `device_id`'s curves: the uncertainty band of a time read straight off
    one of them; None for a device without curves."""
    return _band(_folder(os.environ.get("PLANNER_HARDWARE_SPECS")), device_id)


@lru_cache(maxsize=64)
def _band(folder: str, device_id: str) -> float | None:
    dc = load_curves(folder).get(device_id)
    errors = [h.error_fraction for h in holdout(dc)] if dc is not None else []
    return percentile(errors, 0.9) if errors else None


def summary(points: list[HeldOut]) -> dict:
    """{"n", "median_abs_error", "p90_abs_error"} of a list of held-out points (fractions)."""
    errors = [p.error_fraction for p in points]
    return {"n": len(errors), "median_abs_error": statistics.median(errors) if errors else None,
            "p90_abs_error": percentile(errors, 0.9) if errors else None}
