"""Efficiency models: how close to peak each op runs on a device.

`DatasheetEfficiency` is the default tier for a device with no calibration profile: documented
curves by device kind (hardware_specs/efficiency/defaults.json): a maximum efficiency per op kind,
lowered by wave quantization (output tiles spread over the device's compute units, the last
wave partly idle) and by short reduction dimensions; a constant fraction of memory bandwidth;
a fixed per-kernel overhead. Calibration profiles (issue 4) implement the same interface.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from planner.capture import OpRecord
from planner.catalog import Device
from planner.errors import ConfigError

DEFAULTS_PATH = Path(__file__).resolve().parents[1] / "hardware_specs" / "efficiency" / "defaults.json"


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


@lru_cache(maxsize=4)
def load_defaults(path: str | None = None) -> Defaults:
    """Load and check the default efficiency data (cached)."""
    file = Path(path) if path else DEFAULTS_PATH
    try:
        raw = json.loads(file.read_text())
        fields = KindDefaults.__dataclass_fields__
        kinds = {name: KindDefaults(**{k: v for k, v in values.items() if k in fields})
                 for name, values in raw["kinds"].items()}
        coll, unc, mem = raw["collectives"], raw["uncertainty"], raw["memory"]
        defaults = Defaults(kinds, coll["scaleup_latency_s"], coll["scaleout_latency_s"], coll["bandwidth_efficiency"],
                            unc["datasheet_band_fraction"], mem["usable_fraction"], mem["workspace_bytes"])
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{file}: malformed efficiency defaults ({type(exc).__name__}: {exc})") from None
    for name, kind in kinds.items():
        for field in ("matmul_max_efficiency", "conv_max_efficiency", "attention_max_efficiency", "memory_efficiency"):
            value = getattr(kind, field)
            if not 0 < value <= 1:
                raise ConfigError(f"{file}: kinds.{name}.{field} must be in (0, 1], got {value}")
    return defaults


class EfficiencyModel(Protocol):
    """What the roofline needs from any efficiency source."""

    tier: str
    """"measured", "transferred" or "datasheet"."""
    band_fraction: float
    """Relative half-width of the uncertainty band of a time predicted with this model."""

    def efficiencies(self, rec: OpRecord, category: str, device: Device) -> tuple[float, float, float]:
        """Return (compute efficiency, memory efficiency, per-kernel overhead in s) of one op."""


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

    def kind(self, device: Device) -> KindDefaults:
        return self.defaults.kinds.get(device.kind) or self.defaults.kinds["gpu"]

    def efficiencies(self, rec: OpRecord, category: str, device: Device) -> tuple[float, float, float]:
        kind = self.kind(device)
        overhead = 0.0 if category == "view" else kind.kernel_overhead_s
        maximum = {"matmul": kind.matmul_max_efficiency, "conv": kind.conv_max_efficiency,
                   "attention": kind.attention_max_efficiency}.get(category)
        if maximum is None:
            # vector-unit work (elementwise, norms, reductions): memory-bound in practice; half the
            # vector peak is taken as its compute ceiling
            return 0.5, kind.memory_efficiency, overhead
        shape = gemm_shape(rec, category)
        if shape is None:
            return maximum, kind.memory_efficiency, overhead
        return maximum * wave_efficiency(shape, kind, device) * shape[3] / (shape[3] + kind.k_half), \
            kind.memory_efficiency, overhead


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
