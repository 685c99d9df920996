"""Calibration profiles and the efficiency model fitted to them (the measured and transferred tiers).

The model predicts each op's *roofline efficiency* η = ideal time / measured time, where the ideal
time is max(FLOP / peak, bytes / bandwidth) on the profiled device and the measured time excludes
the per-op dispatch overhead (kept as its own term). η is interpolated in log-shape space per op
kind: linearly over the (M, N, K) grid for GEMM, by inverse-distance weighting of the nearest
measurements for attention, convolution and batched GEMM, and piecewise-linearly against bytes
for memory-bound kernels. On GPUs the wave quantization of 128x128 output tiles over the SMs is
divided out before fitting and put back for the device predicted, so the fit transfers across
SM counts. A prediction on device D is then D's own ideal time / η (+ overhead): on the profiled
device this reproduces the measurements ("measured" tier); on another device of the same kind it
carries the measured efficiencies over to D's peaks, bandwidth and unit count ("transferred").

Uncertainty: leave-one-out residuals of the fit (each measurement predicted from the others) give
the band: its 90th percentile |error| for the measured tier, widened for transferred predictions.
"""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.interpolate import LinearNDInterpolator

from planner.errors import ConfigError
from planner.files import MAX_JSON_DEPTH, finite, json_depth, parse_json, read_text
from planner.hardware.catalog import KINDS, Device
from planner.hardware.efficiency import Defaults, KindDefaults, gemm_shape, wave_efficiency
from planner.workload.capture import OpRecord

PROFILE_ROOT = Path(__file__).resolve().parents[2] / "hardware_specs" / "calibration"
SCHEMA = 1
"""The profile layout read here (`schema` in profile.json, as planner/calibration/calibrate.py writes it)."""
# the shape fields of each measured kind (whole numbers >= 1); the other kinds are sized by `bytes`
_SHAPES = {"gemm": ("m", "n", "k"), "bmm": ("b", "m", "n", "k"), "attention": ("bh", "sq", "sk", "d"),
           "conv": ("n", "cin", "hw", "cout", "ksize", "stride")}
_OVERHEADS = ("launch", "view")
"""Per-call costs: time_s may be 0 (below the timer's resolution); the others divide by it."""
_SIZED = ("copy", "add", "gelu", "sum", "layer_norm", "softmax", "batch_norm", "maxpool", "h2d")
_MAX_COUNT = 2**53  # a shape stays exact as a float (wave counts divide it)
_TRANSCENDENTAL = frozenset({"aten.gelu", "aten.silu", "aten.tanh", "aten.exp", "aten.sigmoid", "aten.erf",
                             "aten.pow", "aten.rsqrt", "aten.sqrt", "aten.log", "aten.sin", "aten.cos",
                             "aten.gelu_backward", "aten.silu_backward", "aten.tanh_backward",
                             "aten.sigmoid_backward"})
MEMORY_KIND_OF_CATEGORY = {"elementwise": "add", "norm": "layer_norm", "softmax": "softmax", "reduction": "sum",
                           "copy": "copy", "fill": "copy", "embedding": "copy", "loss": "copy", "sort": "add",
                           "pool": "add", "optimizer": "add"}


@dataclass(frozen=True)
class Profile:
    """A calibration profile as written by `planner calibrate`."""

    device_id: str
    device_name: str
    kind: str
    """"cpu" or "gpu"."""
    properties: dict
    ceilings: dict
    measurements: tuple[dict, ...]
    date: str
    path: str
    raw: dict = field(repr=False)

    def device(self, catalog_device: Device | None) -> Device:
        """The Device this profile measured: the catalog's where it has one (GPUs), else one built
        from the measured ceilings (a CPU: peak = best measured GEMM rate, bandwidth = copy rate)."""
        if catalog_device is not None:
            return catalog_device
        peaks = {key.removeprefix("gemm_").removesuffix("_flop_per_s"): value
                 for key, value in self.ceilings.items() if key.startswith("gemm_")}
        props = self.properties
        vendor = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}.get(props.get("vendor", ""), props.get("vendor", ""))
        return Device(id=self.device_id, name=self.device_name, vendor=vendor,
                      generation=f"family-{props.get('family', '?')}-model-{props.get('model', '?')}", kind=self.kind,
                      memory_bytes=props.get("memory_bytes"), mem_bytes_per_s=self.ceilings["copy_bytes_per_s"],
                      peak_flop_per_s=peaks, llc_bytes=None, compute_units=props.get("logical_cpus"), clock_hz=None,
                      tdp_w=None, idle_w=None, scaleup_bytes_per_s=None, devices_per_node=1,
                      scaleout_bytes_per_s=None, pcie_bytes_per_s=None, release_year=None, confidence="measured",
                      source=f"calibration profile {self.path} (measured ceilings)", date=self.date[:10])


def read_profile(path: Path) -> Profile:
    """Load one profile.json and check it (`check_profile`); return the Profile. Raise ConfigError naming
    the file, and the measurement index where one is bad, when it is not UTF-8 JSON, nests too deep,
    has an unknown schema, or holds a number that is not finite or out of range."""
    where = f"calibration profile '{path}'"
    raw = _parse(read_text(path, "calibration profile"), where)
    check_profile(raw, where)
    return Profile(raw["device_id"], raw["device_name"], raw["kind"], raw.get("properties", {}), raw["ceilings"],
                   tuple(raw["measurements"]), raw["date"], str(path), raw)


@lru_cache(maxsize=4)
def load_profiles(root: str | None = None) -> dict[str, Profile]:
    """Every profile under hardware_specs/calibration/<device-id>/profile.json (or `root`), by device id.

    A bad profile is refused, not skipped: ConfigError naming its file (and measurement), whether
    `root` is the shipped folder or one the user pointed at (PLANNER_HARDWARE_SPECS). Skipping would
    not keep it away from unrelated devices: any profile of a device's kind may be the neighbour its
    transferred tier is fitted on, so a silently dropped profile would change other predictions."""
    base = Path(root) if root else PROFILE_ROOT
    return {p.parent.name: read_profile(p) for p in sorted(base.glob("*/profile.json"))}


def _parse(text: str, where: str):
    """The JSON of a profile through files.parse_json. A NaN or Infinity it refuses is then located, so
    the message names the measurement (measurements[5].time_s) rather than only the file."""
    try:
        return parse_json(text, where)
    except ConfigError as refused:
        if json_depth(text) > MAX_JSON_DEPTH:
            raise
        try:  # the nesting is bounded: parse again keeping the constants, only to name where they are
            _not_finite(json.loads(text, parse_constant=float), where, "")
        except ValueError:
            pass
        raise refused from None


def check_profile(raw, where: str) -> None:
    """Refuse a profile planner cannot use; return None when it is sound. ConfigError names `where` and the
    key (measurements[i] for a measurement). Checked: `schema` is SCHEMA; device_id, device_name, date
    (an ISO day first) and kind (a catalog kind) are set; every number is finite (1e400 parses to
    infinity); ceilings are rates > 0 and overheads >= 0; each measurement has a known
    kind, time_s > 0 (>= 0 for the per-call launch and view costs), flop and bytes >= 0 (bytes > 0 for
    kinds sized by bytes) and whole-number shapes >= 1; the properties a CPU Device is built from, the
    leave-one-out band and the collective fits have the types and signs they are used with."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a JSON object expected, got {type(raw).__name__}")
    if raw.get("schema") != SCHEMA or isinstance(raw.get("schema"), bool):
        raise ConfigError(f"{where}: unknown schema {_show(raw.get('schema'))}; this planner reads schema {SCHEMA} "
                          "(run `planner calibrate` again)")
    _not_finite(raw, where, "")
    for key in ("device_id", "device_name", "date", "kind"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise ConfigError(f"{where}: '{key}' must be a non-empty string, got {_show(raw.get(key))}")
    if raw["kind"] not in KINDS:
        raise ConfigError(f"{where}: kind {_show(raw['kind'])} is not one of {', '.join(KINDS)}")
    try:
        datetime.date.fromisoformat(raw["date"][:10])
    except ValueError:
        raise ConfigError(f"{where}: date {_show(raw['date'])} does not start with a day YYYY-MM-DD") from None
    ceilings = _object(raw, "ceilings", where, required=True)
    for key, value in ceilings.items():
        _number(value, f"{where}: ceilings.{key}", positive=key.endswith("_per_s"))
    props = _object(raw, "properties", where)
    if props.get("memory_bytes") is not None:
        _number(props["memory_bytes"], f"{where}: properties.memory_bytes", positive=True)
    if props.get("logical_cpus") is not None:
        _count(props["logical_cpus"], f"{where}: properties.logical_cpus")
    measurements = raw.get("measurements")
    if not isinstance(measurements, list):
        raise ConfigError(f"{where}: 'measurements' must be a list, got {_show(measurements)}")
    for i, m in enumerate(measurements):
        _check_measurement(m, f"{where}: measurements[{i}]")
    loo = _object(raw, "leave_one_out", where)
    for what, stats in (("leave_one_out", loo), ("leave_one_out.interior", _object(loo, "interior", where))):
        if stats.get("p90_abs_error") is not None:  # null: a group with no points (calibrate writes NaN as null)
            _number(stats["p90_abs_error"], f"{where}: {what}.p90_abs_error")
    collectives = raw.get("collectives")
    if isinstance(collectives, dict):  # a string says why none was measured
        for op, fit in _object(collectives, "fit", where).items():
            if not isinstance(fit, dict):
                raise ConfigError(f"{where}: collectives.fit.{op} must be an object, got {_show(fit)}")
            _count(fit.get("ranks"), f"{where}: collectives.fit.{op}.ranks")
            for key, positive in (("latency_s", False), ("bytes_per_s", True), ("median_abs_error", False)):
                _number(fit.get(key), f"{where}: collectives.fit.{op}.{key}", positive)


def _check_measurement(m, where: str) -> None:
    if not isinstance(m, dict):
        raise ConfigError(f"{where}: a JSON object expected, got {_show(m)}")
    kind = m.get("kind")
    if kind not in (*_SHAPES, *_OVERHEADS, *_SIZED):
        raise ConfigError(f"{where}: unknown kind {_show(kind)}; valid: {', '.join((*_SHAPES, *_OVERHEADS, *_SIZED))}")
    where = f"{where} ({kind})"
    _number(m.get("time_s"), f"{where}: time_s", positive=kind not in _OVERHEADS)
    _number(m.get("flop"), f"{where}: flop")
    _number(m.get("bytes"), f"{where}: bytes", positive=kind in _SIZED)
    for key in _SHAPES.get(kind, ()):
        _count(m.get(key), f"{where}: {key}")
    # a GEMM's dtype names its model and an attention's causal flag is one of its features: both required
    for key, kinds, valid in (("dtype", ("gemm",), str), ("layout", (), str), ("warm", (), bool),
                              ("causal", ("attention",), bool)):
        if (key in m or kind in kinds) and not isinstance(m.get(key), valid):
            raise ConfigError(f"{where}: {key} must be {'a string' if valid is str else 'true or false'}, "
                              f"got {_show(m.get(key))}")
    if kind == "conv":
        pad = m.get("pad")
        if isinstance(pad, bool) or pad != 0:
            pad = _count(pad, f"{where}: pad")
        if m["hw"] + 2 * pad < m["ksize"]:
            raise ConfigError(f"{where}: hw + 2 pad ({m['hw'] + 2 * pad}) is smaller than ksize ({m['ksize']}): "
                              "no output pixel")


def _not_finite(value, where: str, path: str) -> None:
    """Refuse a number that is not finite anywhere in the profile: parse_json refuses NaN and Infinity,
    but a literal like 1e400 still parses to infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {path} must be a finite number, got {value}")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        _not_finite(item, where, f"{path}[{key}]" if isinstance(value, list) else f"{path}.{key}".lstrip("."))


def _number(value, what: str, positive: bool = False) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):  # finite() alone takes "0.5"
        raise ConfigError(f"{what} must be a number, got {_show(value)}")
    number = finite(value, what)
    if number < 0 or (positive and number == 0):
        raise ConfigError(f"{what} must be {'> 0' if positive else '>= 0'}, got {_show(value)}")
    return number


def _count(value, what: str) -> int:
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or not 1 <= value <= _MAX_COUNT:
        raise ConfigError(f"{what} must be a whole number in [1, 2**53], got {_show(value)}")
    return int(value)


def _object(parent: dict, key: str, where: str, required: bool = False) -> dict:
    value = parent.get(key, None if required else {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{key}' must be an object, got {_show(value)}")
    return value


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------ features and ideal times

def _log2(x: float) -> float:
    return math.log2(max(x, 1e-30))


def _ideal_s(flop: float, nbytes: float, peak: float, bw: float) -> float:
    return max(flop / peak if peak else 0.0, nbytes / bw if bw else 0.0)


def _vector_peak(device: Device, dtype: str) -> float:
    peaks = device.peak_flop_per_s
    return peaks.get("fp32") or peaks.get(dtype) or max(peaks.values())


def _dtype_peak(device: Device, dtype: str) -> float | None:
    return device.peak_flop_per_s.get(dtype)


def _features(m: dict) -> tuple[str, tuple[float, ...], tuple[int, int, int, int] | None]:
    """(model key, log-shape features, GEMM shape for wave quantization) of one measurement."""
    kind = m["kind"]
    if kind == "gemm":
        family = "gemm" if m.get("layout", "nt") == "nt" else "gemm_nn"
        return f"{family}:{m['dtype']}", (_log2(m["m"]), _log2(m["n"]), _log2(m["k"])), (1, m["m"], m["n"], m["k"])
    if kind == "bmm":
        return "bmm", (_log2(m["b"]), _log2(m["m"]), _log2(m["n"]), _log2(m["k"])), (m["b"], m["m"], m["n"], m["k"])
    if kind == "attention":
        feats = (_log2(m["bh"]), _log2(m["sq"]), _log2(m["sk"]), _log2(m["d"]), 1.0 if m["causal"] else 0.0)
        return "attention", feats, (m["bh"], m["sq"], m["sk"], m["d"])
    if kind == "conv":
        out = (m["hw"] + 2 * m["pad"] - m["ksize"]) // m["stride"] + 1
        gm, gn, gk = m["n"] * out * out, m["cout"], m["cin"] * m["ksize"] ** 2
        return "conv", (_log2(gm), _log2(gn), _log2(gk), _log2(m["ksize"] ** 2)), (1, gm, gn, gk)
    if kind == "copy" and not m.get("warm", True):
        return "mem:copy_cold", (_log2(m["bytes"]),), None
    return f"mem:{kind}", (_log2(m["bytes"]),), None


class _IDW:
    """Inverse-distance weighting of the k nearest points (features standardized)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, k: int = 4):
        self.scale = np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
        self.x, self.y, self.k = x / self.scale, y, min(k, len(y))

    def __call__(self, q: np.ndarray) -> float:
        d = np.sqrt(((self.x - q / self.scale) ** 2).sum(axis=1))
        idx = np.argsort(d)[: self.k]
        if d[idx[0]] < 1e-9:
            return float(self.y[idx[0]])
        w = 1.0 / d[idx] ** 2
        return float((w * self.y[idx]).sum() / w.sum())


class _Interpolator:
    """log η against log-shape features.

    Points on a grid (GEMM): multilinear interpolation over the grid's axes, the holes of a grid
    cut short by the budget filled from the scattered interpolator, queries clamped to the grid's
    edges. Scattered points: linear on a Delaunay mesh where possible, else IDW. 1-D kinds:
    piecewise-linear in log bytes, constant beyond the ends."""

    def __init__(self, x: np.ndarray, y: np.ndarray, linear: bool):
        self.dims = x.shape[1]
        self.idw = _IDW(x, y)
        self.linear = None
        self.grid = None
        if self.dims == 1:
            order = np.argsort(x[:, 0])
            self.x1, self.y1 = x[order, 0], y[order]
            return
        if linear and len(y) > self.dims + 1:
            try:
                self.linear = LinearNDInterpolator(x, y)
            except Exception:  # degenerate (coplanar) points: IDW alone
                self.linear = None
            axes = [np.unique(x[:, d]) for d in range(self.dims)]
            if all(len(a) >= 2 for a in axes) and math.prod(len(a) for a in axes) <= 4 * len(y):
                self.grid = self._grid(x, y, axes)

    def _grid(self, x: np.ndarray, y: np.ndarray, axes: list[np.ndarray]):
        from scipy.interpolate import RegularGridInterpolator

        values = np.full([len(a) for a in axes], np.nan)
        index = tuple(np.searchsorted(axes[d], x[:, d]) for d in range(self.dims))
        values[index] = y
        for hole in zip(*np.nonzero(np.isnan(values))):
            values[hole] = self._scattered(np.array([axes[d][i] for d, i in enumerate(hole)]))
        self.lo, self.hi = np.array([a[0] for a in axes]), np.array([a[-1] for a in axes])
        return RegularGridInterpolator(axes, values, method="linear")

    def _scattered(self, point: np.ndarray) -> float:
        if self.linear is not None:
            value = float(self.linear(point.reshape(1, -1))[0])
            if not math.isnan(value):
                return value
        return self.idw(point)

    def __call__(self, q: tuple[float, ...]) -> float:
        if self.dims == 1:
            return float(np.interp(q[0], self.x1, self.y1))
        point = np.asarray(q, dtype=float)
        if self.grid is not None:
            return float(self.grid(np.clip(point, self.lo, self.hi).reshape(1, -1))[0])
        return self._scattered(point)


@dataclass
class ProfileModel:
    """Efficiency model fitted to a profile, scikit-learn style: fit(profile, device) returns self."""

    kind_defaults: KindDefaults
    """Tile sizes for wave quantization (GPU) from the efficiency defaults."""

    def fit(self, profile: Profile, device: Device, exclude: int | None = None) -> ProfileModel:
        """Fit per-kind interpolators of log η; `exclude` leaves one measurement out (for LOO)."""
        groups: dict[str, tuple[list, list]] = {}
        self.device_ = device
        self.launch_s_ = profile.ceilings.get("launch_overhead_s", 0.0)
        self.view_s_ = profile.ceilings.get("view_overhead_s", 0.0)
        for i, m in enumerate(profile.measurements):
            if i == exclude or m["kind"] in ("launch", "view", "h2d"):
                continue
            eta = self.efficiency_of(m, device)
            if eta is None:
                continue
            key, feats, _ = _features(m)
            xs, ys = groups.setdefault(key, ([], []))
            xs.append(feats)
            ys.append(math.log(eta))
        self.models_ = {key: _Interpolator(np.asarray(xs, dtype=float), np.asarray(ys), key.startswith("gemm"))
                        for key, (xs, ys) in groups.items() if len(ys) >= 2}
        return self

    def efficiency_of(self, m: dict, device: Device) -> float | None:
        """Measured η of one measurement on `device` (wave quantization divided out on GPUs)."""
        key, _, shape = _features(m)
        dtype = m.get("dtype", "fp32")
        peak = _dtype_peak(device, dtype) if key.startswith(("gemm", "bmm", "attention", "conv")) else \
            _vector_peak(device, dtype)
        if not peak:
            return None
        core = m["time_s"] - min(self.launch_s_, 0.5 * m["time_s"])
        eta = _ideal_s(m["flop"], m["bytes"], peak, device.mem_bytes_per_s) / core
        if shape is not None and device.kind == "gpu":
            eta /= wave_efficiency(_wave_shape(key, shape), self.kind_defaults, device)
        return eta if eta > 0 else None

    def predict_eta(self, key: str, feats: tuple[float, ...], shape, device: Device) -> float | None:
        """η for an op of model `key` with `feats` on `device` (None if the profile lacks the kind)."""
        model = self.models_.get(key)
        if model is None:
            return None
        eta = math.exp(model(feats))
        if shape is not None and device.kind == "gpu":
            eta *= wave_efficiency(_wave_shape(key, shape), self.kind_defaults, device)
        return eta


def _wave_shape(key: str, shape: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    if key == "attention":
        # FlashAttention tiles the queries of each (batch, head): blocks = bh x ceil(Sq/128)
        bh, sq, sk, d = shape
        return bh, sq, d, sk
    return shape


def _op_key(rec: OpRecord, category: str, dtype: str, models: dict) -> tuple[str, tuple[float, ...], object] | None:
    """The model key, features and wave shape for one op of a graph."""
    if category in ("matmul", "conv", "attention"):
        shape = gemm_shape(rec, category)
        if shape is None:
            return None
        b, m, n, k = shape
        if category == "matmul":
            if b > 1 and "bmm" in models:
                return "bmm", (_log2(b), _log2(m), _log2(n), _log2(k)), shape
            # an nn.Linear weight reaches mm stored transposed ("nt"); two row-major operands are "nn"
            second = rec.arg("mat2") or rec.arg("other")
            family = "gemm" if (second is None or second.col_major or "gemm_nn:fp32" not in models) else "gemm_nn"
            key = f"{family}:{dtype}" if f"{family}:{dtype}" in models else f"{family}:fp32"
            return key, (_log2(m * b), _log2(n), _log2(k)), (1, m * b, n, k)
        if category == "conv":
            w = rec.arg("weight")
            ksize = math.prod(w.shape[2:]) if w is not None and len(w.shape) > 2 else 1
            return "conv", (_log2(m), _log2(n), _log2(k), _log2(ksize)), shape
        q, key_t = rec.arg("query"), rec.arg("key")
        causal = bool(rec.arg("is_causal", False))
        return "attention", (_log2(b), _log2(m), _log2(key_t.shape[-2]), _log2(q.shape[-1]), float(causal)), \
            (b, m, key_t.shape[-2], q.shape[-1])
    kind = MEMORY_KIND_OF_CATEGORY.get(category)
    if kind is None:
        return None
    if category == "elementwise" and rec.packet in _TRANSCENDENTAL:
        kind = "gelu"
    if category == "norm" and "batch_norm" in rec.packet:
        kind = "batch_norm" if "mem:batch_norm" in models else "add"
    if category == "pool" and "max_pool" in rec.packet and "mem:maxpool" in models:
        kind = "maxpool"
    return f"mem:{kind}", None, None


_DTYPE_OF = {("float32", 32): "fp32", ("bfloat16", 16): "bf16", ("float16", 16): "fp16", ("bfloat16", 8): "fp8",
             ("bfloat16", 4): "fp4", ("float8_e4m3fn", 8): "fp8", ("int8", 8): "int8"}


def _rec_dtype(rec: OpRecord) -> str:
    """The logical dtype an op computes in, read from its first floating tensor (storage dtype and
    counted width: fp8 and fp4 are captured as bf16 counted at 8 and 4 bits; scale factors of a
    quantization recipe add a fraction of a bit, which is dropped)."""
    for t in rec.tensors():
        name = _DTYPE_OF.get((t.dtype, int(t.bits)))
        if name:
            return name
    return "fp32"


@dataclass(frozen=True)
class ProfileEfficiency:
    """The EfficiencyModel of a profiled device (tier measured) or a neighbour (tier transferred)."""

    model: ProfileModel
    profile: Profile
    tier: str
    band_fraction: float
    fallback: object
    """Datasheet efficiency for op kinds the profile does not cover."""
    clock_ratio: float = 1.0
    """Profiled device clock / predicted device clock, scaling the fixed per-op cost."""

    def efficiencies(self, rec: OpRecord, category: str, device: Device) -> tuple[float, float, float]:
        m = self.model
        if category == "view":
            return 1.0, 1.0, m.view_s_ * self.clock_ratio
        overhead = m.launch_s_ * self.clock_ratio
        found = _op_key(rec, category, "fp32", m.models_)
        if found is None:
            return self.fallback.efficiencies(rec, category, device)
        key, feats, shape = found
        if key.startswith("gemm"):
            family = key.split(":")[0]
            dtype = _rec_dtype(rec)
            key = f"{family}:{dtype}" if f"{family}:{dtype}" in m.models_ else key
        if feats is None:  # memory-bound: features from the op's bytes
            nbytes = sum(t.bytes for t in rec.tensors()) + sum(t.bytes for t in rec.outputs)
            feats = (_log2(max(nbytes, 1.0)),)
        eta = m.predict_eta(key, feats, shape, device)
        if eta is None:
            return self.fallback.efficiencies(rec, category, device)
        return eta, eta, overhead


def fit_report(raw_profile: dict) -> dict:
    """Leave-one-out errors of the efficiency model on a profile's own measurements.

    Each measurement is predicted from a model fitted to all the others; error = predicted time /
    measured time − 1. Returns {"n", "median_abs_error", "p90_abs_error", "by_kind": {...}}.
    """
    from planner.hardware.efficiency import load_defaults

    profile = Profile(raw_profile["device_id"], raw_profile["device_name"], raw_profile["kind"],
                      raw_profile.get("properties", {}), raw_profile["ceilings"], tuple(raw_profile["measurements"]),
                      raw_profile["date"], "(in memory)", raw_profile)
    device = profile_device(profile)
    if device is None or "copy_bytes_per_s" not in profile.ceilings:
        return {"n": 0, "median_abs_error": float("nan"), "p90_abs_error": float("nan"), "by_kind": {}}
    defaults = load_defaults().kinds.get(device.kind) or load_defaults().kinds["gpu"]
    errors: dict[str, list[float]] = {}
    interior: list[float] = []
    full = ProfileModel(defaults).fit(profile, device)
    bounds: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for m in profile.measurements:
        if m["kind"] in ("launch", "view", "h2d"):
            continue
        key, feats, _ = _features(m)
        lo, hi = bounds.get(key, (np.asarray(feats), np.asarray(feats)))
        bounds[key] = (np.minimum(lo, feats), np.maximum(hi, feats))
    for i, m in enumerate(profile.measurements):
        if m["kind"] in ("launch", "view", "h2d"):
            continue
        key, feats, shape = _features(m)
        measured_eta = full.efficiency_of(m, device)
        if measured_eta is None or key not in full.models_:
            continue
        loo = ProfileModel(defaults).fit(profile, device, exclude=i)
        if key not in loo.models_:
            continue
        predicted = math.exp(loo.models_[key](feats))
        # time is inversely proportional to η (the overhead part is common to both)
        error = measured_eta / predicted - 1
        errors.setdefault(key if key.startswith(("mem", "gemm")) else key.split(":")[0], []).append(error)
        lo, hi = bounds[key]
        # a point on the edge of its grid, left out, is an extrapolation the model never makes
        # inside its grid: the band comes from interior points
        if np.all((np.asarray(feats) > lo) & (np.asarray(feats) < hi)):
            interior.append(error)
    every = [e for es in errors.values() for e in es]

    def stats(values: list[float]) -> dict:
        a = np.abs(np.asarray(values))
        return {"n": len(values), "median_abs_error": float(np.median(a)) if len(a) else float("nan"),
                "p90_abs_error": float(np.percentile(a, 90)) if len(a) else float("nan")}

    return {**stats(every), "interior": stats(interior), "by_kind": {k: stats(v) for k, v in errors.items()}}


def profile_device(profile: Profile) -> Device | None:
    """The Device of a profile: the catalog's for a catalog id, else one from the measured ceilings."""
    from planner.errors import PlannerError
    from planner.hardware.catalog import load_catalog

    try:
        return load_catalog().device(profile.device_id)
    except PlannerError:
        if "copy_bytes_per_s" not in profile.ceilings or not any(k.startswith("gemm_") for k in profile.ceilings):
            return None
        return profile.device(None)


def efficiency_for(device: Device, defaults: Defaults, profiles: dict[str, Profile], fallback) -> object:
    """The efficiency model of `device`: its own profile (measured), the nearest profiled device of
    the same kind (transferred: same vendor and generation first), or `fallback` (datasheet)."""
    own = profiles.get(device.id)
    kind_defaults = defaults.kinds.get(device.kind) or defaults.kinds["gpu"]
    if own is not None:
        ref = profile_device(own)
        band = _band(own)
        return ProfileEfficiency(ProfileModel(kind_defaults).fit(own, ref), own, "measured", band, fallback)
    candidates = []
    for profile in profiles.values():
        ref = profile_device(profile)
        if ref is None or ref.kind != device.kind or device.kind == "cpu":
            continue
        distance = (0 if (ref.vendor, ref.generation) == (device.vendor, device.generation) else
                    1 if ref.vendor == device.vendor else 2)
        bw = abs(math.log(ref.mem_bytes_per_s / device.mem_bytes_per_s))
        candidates.append((distance, bw, profile.device_id, profile, ref))
    if not candidates:
        return fallback
    _, _, _, profile, ref = min(candidates)
    clock = (ref.clock_hz / device.clock_hz) if ref.clock_hz and device.clock_hz else 1.0
    # a transferred prediction carries the neighbour's fit plus what the transfer cannot know:
    # twice the measured band plus 10%, and never narrower than the datasheet band's half
    band = min(defaults.datasheet_band_fraction, max(2 * _band(profile) + 0.10, defaults.datasheet_band_fraction / 2))
    model = ProfileModel(kind_defaults).fit(profile, ref)
    return ProfileEfficiency(model, profile, "transferred", band, fallback, clock)


def _band(profile: Profile) -> float:
    """p90 |leave-one-out error| of the profile's interior points (all points if none are interior)."""
    loo = profile.raw.get("leave_one_out", {})
    value = loo.get("interior", {}).get("p90_abs_error")
    if value is None or value != value:
        value = loo.get("p90_abs_error")
    return float(value) if value is not None and value == value else 0.25
