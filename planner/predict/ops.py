"""Op-level prediction: one GEMM, device copy, host-to-device copy or collective on a device.

The same roofline and efficiency model as whole graphs, on a single synthetic op record, so op
predictions and graph predictions cannot disagree. Rates follow the usual definitions:
flop_per_s = 2·M·N·K / time; a device copy moves bytes read plus bytes written (2·B / time); a
host-to-device copy moves B / time; collectives report bus bandwidth as nccl-tests does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from planner.errors import ConfigError
from planner.files import finite
from planner.hardware.catalog import Device
from planner.hardware.efficiency import Defaults
from planner.predict.context import Context, default_context
from planner.predict.parallel import COLLECTIVES, bus_bytes_per_s, collective_estimate
from planner.predict.roofline import op_time
from planner.units import band, json_safe
from planner.workload.capture import OpRecord, TensorMeta
from planner.workload.counting import OpCost, classify
from planner.workload.dtypes import get_dtype

MAX_BYTES = 1e15
"""Largest buffer of a single op accepted (1 PB)."""
MAX_GEMM_DIM = 2**24
"""Largest M, N or K of a single GEMM accepted."""
MAX_GPUS = 2**20
"""Largest collective group accepted (devices)."""
OPS = ("gemm", "copy", "h2d") + tuple(c for c in COLLECTIVES if c != "p2p")
_TORCH_NAME = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16",
               "int8": "bfloat16", "fp4": "bfloat16"}


@dataclass(frozen=True, slots=True)
class OpPrediction:
    """Predicted time of one op, its rate, and how sure we are."""

    op: str
    device: str
    time_s: float
    rate: float
    """flop_per_s (gemm), bytes_per_s (copy, h2d) or bus_bytes_per_s (collectives)."""
    rate_key: str
    tier: str
    band_fraction: float
    bound: str
    source: str = ""
    """Where the tier's efficiencies come from (a profile's provenance), one line."""

    def as_dict(self) -> dict:
        lo, hi = band(self.time_s, self.band_fraction)
        return json_safe({"op": self.op, "device": self.device, "time_s": self.time_s, self.rate_key: self.rate,
                          "time_range_s": [lo, hi], "tier": self.tier, "band_fraction": self.band_fraction,
                          "bound": self.bound, "source": self.source})


def _tensor(shape: tuple[int, ...], dtype: str, col_major: bool = False) -> TensorMeta:
    bits = get_dtype(dtype).bits
    return TensorMeta(shape, _TORCH_NAME[get_dtype(dtype).name], bits, math.prod(shape), col_major)


def gemm_record(m: int, n: int, k: int, dtype: str = "fp32") -> tuple[OpRecord, str, OpCost]:
    """The op record, category and cost of C[M, N] = A[M, K] @ B[K, N] in `dtype`, with B stored
    transposed as nn.Linear stores its weight ([N, K] row-major)."""
    for name, value in (("m", m), ("n", n), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"--{name} must be a positive integer, got {value!r}")
        if value > MAX_GEMM_DIM:
            raise ConfigError(f"--{name} {value:,} is above the limit of {MAX_GEMM_DIM:,}")
    rec = OpRecord("aten.mm.default", "aten.mm", "", "forward",
                   (("self", _tensor((m, k), dtype)), ("mat2", _tensor((k, n), dtype, col_major=True))),
                   (_tensor((m, n), dtype),),
                   (), False)
    category, cost = classify(rec, False)
    return rec, category, cost


def copy_record(nbytes: float) -> tuple[OpRecord, str, OpCost]:
    """A device-to-device copy of `nbytes` (fp32 elements)."""
    if nbytes <= 0:
        raise ConfigError(f"--bytes must be positive, got {nbytes}")
    elements = max(1, int(nbytes // 4))
    rec = OpRecord("aten.clone.default", "aten.clone", "", "forward", (("self", _tensor((elements,), "fp32")),),
                   (_tensor((elements,), "fp32"),), (), False)
    category, cost = classify(rec, False)
    return rec, category, cost


def predict_op(op: str, device: str, *, m: int | None = None, n: int | None = None, k: int | None = None,
               dtype: str = "fp32", nbytes: float | None = None, gpus: int | None = None, nodes: int = 1,
               scaleout_gbps: float | None = None, ctx: Context | None = None) -> OpPrediction:
    """Predict one op on `device` (a catalog id or alias, or a profiled local device); a collective across nodes
    over `scaleout_gbps` Gb/s of network per device where given (the catalog's scale-out otherwise)."""
    ctx = ctx or default_context()
    dev = ctx.device(device)
    if scaleout_gbps is not None:
        from planner.predict.api import scaleout_bytes_per_s

        dev = replace(dev, scaleout_bytes_per_s=scaleout_bytes_per_s(scaleout_gbps))
    eff = ctx.efficiency(dev)
    if op == "gemm":
        if None in (m, n, k):
            raise ConfigError("gemm needs --m, --n and --k")
        rec, category, cost = gemm_record(m, n, k, dtype)
        if hasattr(eff, "covers") and not eff.covers(rec, category):
            eff = eff.fallback  # a dtype the profile did not measure: the datasheet tier says so
        t = op_time(rec, category, cost, get_dtype(dtype).name, dev, eff)
        return OpPrediction(op, dev.id, t.time_s, cost.flop / t.time_s, "flop_per_s", eff.tier, eff.band_fraction,
                            t.bound, getattr(eff, "source", ""))
    if nbytes is None:
        raise ConfigError(f"{op} needs --bytes (a positive number)")
    nbytes = finite(nbytes, "--bytes")
    if not 0 < nbytes <= MAX_BYTES:
        raise ConfigError(f"--bytes must be in (0, {MAX_BYTES:.0e}], got {nbytes:g}")
    if op == "copy":
        return _copy(dev, eff, nbytes)
    if op == "h2d":
        return _h2d(ctx.defaults, dev, eff, nbytes)
    if op in COLLECTIVES:
        # one device exchanges nothing: its time would be 0 and its bus bandwidth 0/0
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not 2 <= gpus <= MAX_GPUS:
            raise ConfigError(f"{op} needs --gpus, an integer in 2..{MAX_GPUS:,} (a collective over one device "
                              f"moves nothing), got {gpus!r}")
        if not gpus or gpus < 1:
            raise ConfigError(f"{op} needs --gpus (a positive integer)")
        if nodes < 1 or gpus % nodes:
            raise ConfigError(f"--nodes {nodes} must divide --gpus {gpus}")
        per_node = gpus // nodes
        measured = _measured_link(ctx.profiles.get(dev.id), op, gpus, nodes)
        if measured is not None:
            alpha, bw, band = measured
            steps = 2 * (gpus - 1) if op == "allreduce" else gpus - 1
            share = 2 * (gpus - 1) / gpus if op == "allreduce" else (gpus - 1) / gpus
            t = steps * alpha + share * nbytes / bw
            return OpPrediction(op, dev.id, t, bus_bytes_per_s(op, nbytes, gpus, t), "bus_bytes_per_s", "measured",
                                band, "memory")
        # published curves of this device where they exist (hardware_specs/collectives), else the formula
        est = collective_estimate(op, nbytes, gpus, dev, ctx.defaults, per_node)
        band = est.band_fraction if est.band_fraction is not None else ctx.defaults.datasheet_band_fraction
        return OpPrediction(op, dev.id, est.time_s, bus_bytes_per_s(op, nbytes, gpus, est.time_s), "bus_bytes_per_s",
                            est.tier, band, "memory", est.basis)
    raise ConfigError(f"unknown op '{op}'; valid: {', '.join(OPS)}")


def _measured_link(profile, op: str, gpus: int, nodes: int) -> tuple[float, float, float] | None:
    """(α, B, band) of a collective measured by calibration on this device (its `profile`, or None), for a
    group inside one node no larger than the measured one; None otherwise."""
    coll = profile.raw.get("collectives") if profile is not None else None
    if nodes != 1 or not isinstance(coll, dict):
        return None
    fit = coll.get("fit", {}).get(op)
    if not fit or gpus > fit["ranks"]:
        return None
    return fit["latency_s"], fit["bytes_per_s"], max(0.1, 2 * fit["median_abs_error"])


def _copy(dev: Device, eff, nbytes: float) -> OpPrediction:
    from planner.hardware.profile_select import ProfileEfficiency

    rec, category, cost = copy_record(nbytes)
    if isinstance(eff, ProfileEfficiency):
        # a device copy as calibration defines it: buffers rotated beyond the cache
        eta = eff.model.predict_eta("mem:copy_cold", (math.log2(cost.bytes),), None, dev)
        if eta is not None:
            time = cost.bytes / (dev.mem_bytes_per_s * eta) + eff.model.launch_s_ * eff.clock_ratio
            return OpPrediction("copy", dev.id, time, cost.bytes / time, "bytes_per_s", eff.tier, eff.band_fraction,
                                "memory")
    t = op_time(rec, category, cost, "fp32", dev, eff)
    return OpPrediction("copy", dev.id, t.time_s, cost.bytes / t.time_s, "bytes_per_s", eff.tier, eff.band_fraction,
                        t.bound)


def _h2d(defaults: Defaults, dev: Device, eff, nbytes: float) -> OpPrediction:
    from planner.hardware.profile_select import ProfileEfficiency

    if dev.kind == "cpu":
        raise ConfigError(f"{dev.id} is a CPU: there is no host-to-device copy")
    if isinstance(eff, ProfileEfficiency):
        points = sorted((m["bytes"], m["bytes"] / m["time_s"]) for m in eff.profile.measurements if m["kind"] == "h2d")
        if len(points) >= 2:
            import numpy as np
            rate = math.exp(float(np.interp(math.log(nbytes), [math.log(b) for b, _ in points],
                                            [math.log(r) for _, r in points])))
            return OpPrediction("h2d", dev.id, nbytes / rate, rate, "bytes_per_s", eff.tier, eff.band_fraction,
                                "memory")
    if not dev.pcie_bytes_per_s:
        raise ConfigError(f"{dev.id} has no sourced PCIe bandwidth: a host-to-device copy cannot be timed")
    kind = defaults.for_device(dev)
    time = nbytes / (dev.pcie_bytes_per_s * kind.memory_efficiency) + kind.kernel_overhead_s
    return OpPrediction("h2d", dev.id, time, nbytes / time, "bytes_per_s", "datasheet",
                        defaults.datasheet_band_fraction, "memory")


def predict_op_row(row: dict, ctx: Context | None = None) -> dict:
    """A --configs row with an "op" key: {"op": "gemm", "m": .., "n": .., "k": .., "device": ..}."""
    allowed = {"id", "op", "device", "m", "n", "k", "dtype", "bytes", "gpus", "nodes"}
    unknown = sorted(set(row) - allowed)
    if unknown:
        raise ConfigError(f"unknown key(s) for an op row: {', '.join(unknown)}; valid: {', '.join(sorted(allowed))}")
    if not row.get("device"):
        raise ConfigError("an op row needs 'device'")

    def num(key: str, cast=int):
        value = row.get(key)
        if value in (None, ""):
            return None
        try:
            return cast(float(value)) if cast is int else cast(value)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"key '{key}': expected a number, got {value!r}") from None

    return predict_op(str(row["op"]), str(row["device"]), m=num("m"), n=num("n"), k=num("k"),
                      dtype=str(row.get("dtype") or "fp32"), nbytes=num("bytes", float), gpus=num("gpus"),
                      nodes=num("nodes") or 1, ctx=ctx).as_dict()
