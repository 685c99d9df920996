"""Efficiency models: how close to peak each op runs on a device.

`DatasheetEfficiency` is the default tier for a device with no calibration profile: documented
curves by device kind (hardware_specs/efficiency/defaults.json): a maximum efficiency per op kind,
lowered by wave quantization (output tiles spread over the device's compute units, the last
wave partly idle) and by short reduction dimensions; a constant fraction of memory bandwidth (a
GEMM's own, where the kind gives one: its weights stream below a copy's rate); a fixed per-kernel
overhead. Calibration profiles (issue 4) implement the same interface.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from planner.errors import ConfigError
from planner.files import finite, parse_json, read_text, shipped_specs
from planner.hardware.catalog import Device
from planner.workload.capture import OpRecord

DEFAULTS_PATH = shipped_specs() / "efficiency" / "defaults.json"


@dataclass(frozen=True, slots=True)
class KindDefaults:
    """Default efficiencies of one kind of device (gpu, cpu, tpu, accelerator)."""

    matmul_max_efficiency: float
    conv_max_efficiency: float
    attention_max_efficiency: float
    tile_m: int
    """Output tile rows of one matrix-engine work unit (wave quantization)."""
    tile_n: int
    k_half: float
    """Reduction length at which a GEMM reaches half its maximum efficiency."""
    memory_efficiency: float
    """Fraction of datasheet memory bandwidth a streaming kernel reaches."""
    kernel_overhead_s: float
    """Fixed cost of one kernel (launch and tail), in seconds."""
    matmul_memory_efficiency: float | None = None
    """Fraction of datasheet memory bandwidth a GEMM streaming its operands reaches (decode's skinny GEMMs);
    None: memory_efficiency."""


@dataclass(frozen=True, slots=True)
class Defaults:
    """Everything in defaults.json, in SI units."""

    kinds: dict[str, KindDefaults]
    scaleup_latency_s: float
    scaleout_latency_s: float
    collective_bandwidth_efficiency: float
    datasheet_band_fraction: float
    memory_usable_fraction: float
    workspace_bytes: float

    def for_device(self, device) -> KindDefaults:
        """The defaults of `device`: its architecture's entry ("gpu:cdna3": kind, colon, generation) where
        defaults.json has one, else its kind's, else the GPU's."""
        kind = getattr(device, "kind", "gpu")
        return (self.kinds.get(f"{kind}:{getattr(device, 'generation', '')}") or self.kinds.get(kind)
                or self.kinds["gpu"])


@lru_cache(maxsize=4)
def load_defaults(path: str | None = None) -> Defaults:
    """Load and check the default efficiency data (cached); return it in SI units.

    Read as data only (files.read_text and files.parse_json: size and nesting bounded, no NaN or
    Infinity). Raise ConfigError naming the file and the key when a key is missing, "kinds" lacks
    "gpu" (the fallback kind), or a number is out of range: efficiencies and fractions in (0, 1]
    (the band in (0, 1)), tiles whole numbers >= 1, k_half, times and bytes finite and >= 0. A kind's
    matmul_memory_efficiency is optional (absent: GEMMs stream at its memory_efficiency)."""
    file = Path(path) if path else DEFAULTS_PATH
    where = f"efficiency defaults '{file}'"
    raw = parse_json(read_text(file, "efficiency defaults"), where)
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a JSON object expected, got {type(raw).__name__}")
    kinds_raw = _section(raw, "kinds", where, "")
    if "gpu" not in kinds_raw:
        raise ConfigError(f"{where}: kinds lacks 'gpu', the kind a device of another kind falls back to")
    kinds = {}
    for name in kinds_raw:
        values, at = _section(kinds_raw, name, where, "kinds."), f"kinds.{name}."
        kinds[name] = KindDefaults(
            **{key: _value(values, key, where, at, 0, 1, open_lo=True) for key in
               ("matmul_max_efficiency", "conv_max_efficiency", "attention_max_efficiency", "memory_efficiency")},
            tile_m=int(_value(values, "tile_m", where, at, 1, 65536, whole=True)),
            tile_n=int(_value(values, "tile_n", where, at, 1, 65536, whole=True)),
            k_half=_value(values, "k_half", where, at, 0, 1e9),
            kernel_overhead_s=_value(values, "kernel_overhead_s", where, at, 0, 1),
            matmul_memory_efficiency=_value(values, "matmul_memory_efficiency", where, at, 0, 1, open_lo=True)
            if "matmul_memory_efficiency" in values else None)
    coll, unc, mem = (_section(raw, key, where, "") for key in ("collectives", "uncertainty", "memory"))
    return Defaults(kinds, _value(coll, "scaleup_latency_s", where, "collectives.", 0, 1),
                    _value(coll, "scaleout_latency_s", where, "collectives.", 0, 1),
                    _value(coll, "bandwidth_efficiency", where, "collectives.", 0, 1, open_lo=True),
                    _value(unc, "datasheet_band_fraction", where, "uncertainty.", 0, 1, open_lo=True, open_hi=True),
                    _value(mem, "usable_fraction", where, "memory.", 0, 1, open_lo=True),
                    _value(mem, "workspace_bytes", where, "memory.", 0, 2.0**60))


def _section(parent: dict, key: str, where: str, at: str) -> dict:
    """The JSON object `parent[key]`; ConfigError naming `at` + key when it is missing or not an object."""
    value = parent.get(key)
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{at}{key}' must be a JSON object, got {type(value).__name__}")
    return value


def _value(section: dict, key: str, where: str, at: str, lo: float, hi: float, open_lo: bool = False,
           open_hi: bool = False, whole: bool = False) -> float:
    """The number `section[key]` as the file holds it (an int stays an int), when finite and within its
    range; ConfigError naming `at` + key otherwise."""
    if key not in section:
        raise ConfigError(f"{where}: '{at}{key}' is missing")
    if not isinstance(section[key], (int, float)) or isinstance(section[key], bool):  # finite() takes "0.5"
        raise ConfigError(f"{where}: {at}{key} must be a number, got {section[key]!r:.60}")
    value = finite(section[key], f"{where}: {at}{key}")
    if (value <= lo if open_lo else value < lo) or (value >= hi if open_hi else value > hi) or \
            (whole and not value.is_integer()):
        valid = f"{'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"
        raise ConfigError(f"{where}: {at}{key} must be {'a whole number' if whole else 'a number'} in {valid}, "
                          f"got {section[key]!r}")
    return section[key]


class EfficiencyModel(Protocol):
    """What the roofline needs from any efficiency source."""

    tier: str
    """"measured", "transferred" or "datasheet"."""
    band_fraction: float
    """Relative half-width of the uncertainty band of a time predicted with this model."""

    def efficiencies(self, rec: OpRecord, category: str, device: Device,
                     nbytes: float | None = None) -> tuple[float, float, float]:
        """Return (compute efficiency, memory efficiency, per-kernel overhead in s) of one op. `nbytes`:
        the bytes the kernel moves where its record's tensors do not say (a fused group: the record is
        its anchor op's); None reads them off the record. For a view (category "view": no kernel) the
        result may depend on the device and the model only, not on the op: the timing asks once per
        device (planner/predict/timing.py)."""


def gemm_shape(rec: OpRecord, category: str) -> tuple[int, int, int, int] | None:
    """Return (batch, M, N, K) of the implicit GEMM an op runs, or None for non-GEMM ops.

    mm [M, K] @ [K, N]; bmm [b, M, K] @ [b, K, N]; convolution as implicit GEMM with
    M = N·out_spatial, N = C_out, K = C_in/groups·prod(kernel); attention per (batch, head):
    M = S_q, N = S_k, K = head dim.
    """
    out = rec.outputs[0].shape if rec.outputs else ()
    if category == "matmul":
        a = rec.arg("mat1") or rec.arg("batch1") or rec.arg("self") or rec.arg("input")
        if a is None or len(a.shape) < 2 or not out:
            return None
        k = a.shape[-1]
        m = math.prod(out[:-1]) if rec.packet in ("aten.mm", "aten.addmm", "aten.matmul", "aten.linear") else out[-2]
        batch = 1 if rec.packet in ("aten.mm", "aten.addmm", "aten.matmul", "aten.linear") else math.prod(out[:-2])
        return batch, m, out[-1], k
    if category == "conv" and rec.packet != "aten.convolution_backward":
        w = rec.arg("weight")
        if w is None or not out:
            return None
        return 1, out[0] * math.prod(out[2:]), out[1], math.prod(w.shape[1:])
    if category == "attention":
        q, k = rec.arg("query"), rec.arg("key")
        if q is None or k is None:
            return None
        return math.prod(q.shape[:-2]), q.shape[-2], k.shape[-2], q.shape[-1]
    return None


@dataclass(frozen=True, slots=True)
class DatasheetEfficiency:
    """The default tier: documented curves by device kind, no measurement of this device."""

    defaults: Defaults
    tier: str = "datasheet"

    @property
    def band_fraction(self) -> float:
        return self.defaults.datasheet_band_fraction

    @property
    def source(self) -> str:
        return "default efficiencies by device kind (hardware_specs/efficiency/defaults.json): no calibration profile covers it"

    def kind(self, device: Device) -> KindDefaults:
        return self.defaults.for_device(device)

    def efficiencies(self, rec: OpRecord, category: str, device: Device,
                     nbytes: float | None = None) -> tuple[float, float, float]:
        kind = self.kind(device)
        overhead = 0.0 if category == "view" else kind.kernel_overhead_s
        maximum = {"matmul": kind.matmul_max_efficiency, "conv": kind.conv_max_efficiency,
                   "attention": kind.attention_max_efficiency}.get(category)
        if maximum is None:
            # vector-unit work (elementwise, norms, reductions): memory-bound in practice; half the
            # vector peak is taken as its compute ceiling
            return 0.5, kind.memory_efficiency, overhead
        memory = kind.memory_efficiency
        if category == "matmul" and kind.matmul_memory_efficiency is not None:
            memory = kind.matmul_memory_efficiency
        shape = gemm_shape(rec, category)
        if shape is None:
            return maximum, memory, overhead
        compute = maximum * wave_efficiency(shape, kind, device) * shape[3] / (shape[3] + kind.k_half)
        return compute, memory, overhead


def wave_efficiency(shape: tuple[int, int, int, int], kind: KindDefaults, device: Device) -> float:
    """Fraction of the compute units busy over the waves of output tiles of a GEMM.

    tiles = batch·ceil(M/tile_m)·ceil(N/tile_n); waves = ceil(tiles/units); a partial last tile
    along a dimension at least one tile long also wastes its empty rows or columns.
    """
    batch, m, n, _ = shape
    tiles_m, tiles_n = math.ceil(m / kind.tile_m), math.ceil(n / kind.tile_n)
    fill = 1.0
    if m >= kind.tile_m:
        fill *= m / (tiles_m * kind.tile_m)
    if n >= kind.tile_n:
        fill *= n / (tiles_n * kind.tile_n)
    units = device.compute_units
    if not units or kind.tile_m == 1:
        return fill
    tiles = batch * tiles_m * tiles_n
    return fill * tiles / (math.ceil(tiles / units) * units)


def wave_efficiencies(batch: np.ndarray, m: np.ndarray, n: np.ndarray, kind: KindDefaults,
                       device: Device) -> np.ndarray:
    """wave_efficiency over numpy arrays of shapes (batch, M, N); 1 where batch is 0 (no shape)."""
    tiles_m, tiles_n = np.ceil(m / kind.tile_m), np.ceil(n / kind.tile_n)
    fill = np.where(m >= kind.tile_m, m / np.maximum(tiles_m * kind.tile_m, 1), 1.0)
    fill = fill * np.where(n >= kind.tile_n, n / np.maximum(tiles_n * kind.tile_n, 1), 1.0)
    units = device.compute_units
    if units and kind.tile_m != 1:
        tiles = np.maximum(batch * tiles_m * tiles_n, 1)
        fill = fill * tiles / (np.ceil(tiles / units) * units)
    return np.where(batch > 0, fill, 1.0)
