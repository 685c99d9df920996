"""Per-op time on a device: the roofline with efficiencies and a per-kernel overhead.

    time = max(FLOP / (peak for the op's dtype x compute efficiency),
               bytes / (memory bandwidth x memory efficiency)) + per-kernel overhead

Matrix-engine ops (matmul, conv, attention) use the device's dense peak for the op's dtype;
vector ops (elementwise, norms, reductions, ...) use its fp32 vector peak. Each op is labelled
by what bounds it: compute, memory, or overhead (the fixed cost exceeds both).

Under a quantization recipe (planner/workload/quant.py) a matrix op with an operand stored narrower
than the compute dtype (quantized weights, quantized activations, a quantized KV cache) runs at the
recipe's GEMM dtype (attention: its attention dtype): w4a16 at the 16-bit peak, fp8 at the fp8 peak,
nvfp4 at the fp4 peak. A device with no peak for that dtype (fp4 on an H100) is an error that names
the recipe: there is no silent fallback to a slower path.

Padding envelope (planner/predict/envelope.py). Decode attention, and in a step replayed as a CUDA
graph a GEMM of few rows, are timed on the envelope of the op padded up to larger sizes: never slower
than a padded kernel, and non-decreasing as their batch, context or rows grow, whatever the
interpolated efficiencies read; never below the roofline.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import UnsupportedError
from planner.hardware.catalog import Device
from planner.hardware.efficiency import EfficiencyModel
from planner.predict.envelope import envelope_s
from planner.workload.capture import OpRecord
from planner.workload.counting import OpCost
from planner.workload.quant import precision

MATRIX_CATEGORIES = frozenset({"matmul", "conv", "attention"})


@dataclass(frozen=True, slots=True)
class OpTime:
    """Predicted time of one op, and its parts."""

    time_s: float
    """max(compute_s, memory_s) + overhead_s."""
    compute_s: float
    memory_s: float
    overhead_s: float
    bound: str
    """"compute", "memory", "overhead" or "none" (a view: no kernel)."""
    peak_flop_per_s: float
    """The peak the compute term used."""


def op_dtype(rec: OpRecord, graph_dtype: str) -> str:
    """The dtype an op computes in: the workload's compute dtype, or fp32 for ops on fp32 tensors
    (tf32 if asked); under a quantization recipe, its GEMM (attention: attention) dtype for an op
    reading a tensor stored narrower than the compute dtype."""
    p = precision(graph_dtype)
    for value in rec.tensors():
        if value.dtype in ("float32", "float64") and value.bits >= 32:
            return "tf32" if p.compute == "tf32" else "fp32"
        if value.dtype in ("bfloat16", "float16", "float32"):
            break
    if p.plain:
        return p.compute
    if any(v.dtype in ("bfloat16", "float16", "float32") and v.bits < p.bits for v in rec.tensors()):
        return p.attention if "attention" in rec.packet else p.gemm
    return p.compute


def vector_peak(device: Device, graph_dtype: str) -> float:
    """The rate of vector (non-matrix) work: the fp32 peak, or where none is sourced (Gaudi, TPU,
    Trainium) the workload's compute dtype's peak, an upper bound that only matters for the rare
    vector op that is not memory-bound."""
    if "fp32" in device.peak_flop_per_s:
        return device.peak("fp32")
    return device.peak(precision(graph_dtype).compute)


def matrix_peak(device: Device, dtype: str, graph_dtype: str) -> float:
    """The dense peak of `dtype` on `device`; for a quantization recipe's GEMM or attention dtype the
    device lacks, an UnsupportedError naming the recipe."""
    try:
        return device.peak(dtype)
    except UnsupportedError:
        p = precision(graph_dtype)
        if p.plain or dtype == p.compute:
            raise
        have = ", ".join(device.peak_flop_per_s) or "none"
        what = "attention" if dtype == p.attention and dtype != p.gemm else "GEMMs"
        raise UnsupportedError(f"device '{device.id}' has no {dtype} peak in the catalog (it has {have}), but "
                               f"{p.describe()} runs its {what} at {dtype}: pick a device that has one, or "
                               "another precision (--quant, --weights, --activations)") from None


def op_time(rec: OpRecord, category: str, cost: OpCost, graph_dtype: str, device: Device,
            efficiency: EfficiencyModel, rows_pad: bool = False) -> OpTime:
    """Predict one op's time on `device` (seconds); decode attention, and with `rows_pad` (an op of a step timed
    as a whole) a GEMM of few rows, on the padding envelope (planner/predict/envelope.py), its parts scaled to
    that time."""
    own = _op_time(rec, category, cost, graph_dtype, device, efficiency)
    if own.bound == "none":
        return own
    floor = roofline_s(cost.flop, cost.bytes, own.peak_flop_per_s, device.mem_bytes_per_s, 1.0, 1.0, 0.0)[0]
    enveloped = envelope_s(rec, category, lambda r, c: _op_time(r, category, c, graph_dtype, device,
                                                                      efficiency).time_s, floor, rows_pad)
    return own if enveloped is None else scaled(own, enveloped)


def scaled(t: OpTime, time_s: float) -> OpTime:
    """`t` with its time set to `time_s` and its compute, memory and overhead parts scaled alike (its bound
    kept)."""
    f = time_s / t.time_s if t.time_s > 0 else 1.0
    return OpTime(time_s, t.compute_s * f, t.memory_s * f, t.overhead_s * f, t.bound, t.peak_flop_per_s)


def _op_time(rec: OpRecord, category: str, cost: OpCost, graph_dtype: str, device: Device,
             efficiency: EfficiencyModel) -> OpTime:
    if rec.op.startswith("fused."):
        # a fused group's record is its anchor op's (lowering.py): the efficiency of a memory-bound group
        # is read at the bytes the whole kernel moves, not at its first op's tensors (a rotary table's
        # 528 kB read at its 512-byte first op took 1 ms on an H100)
        compute_eff, memory_eff, overhead = efficiency.efficiencies(rec, category, device, nbytes=cost.bytes)
    else:
        compute_eff, memory_eff, overhead = efficiency.efficiencies(rec, category, device)
    if category == "view":
        # no kernel; on a CPU the dispatcher still costs a microsecond or so (measured by calibration)
        return OpTime(overhead, 0.0, 0.0, overhead, "overhead" if overhead else "none", 0.0)
    if category in MATRIX_CATEGORIES:
        peak = matrix_peak(device, op_dtype(rec, graph_dtype), graph_dtype)
    else:
        peak = vector_peak(device, graph_dtype)
    time_s, compute, memory, bound = roofline_s(cost.flop, cost.bytes, peak, device.mem_bytes_per_s, compute_eff,
                                                memory_eff, overhead)
    return OpTime(time_s, compute, memory, overhead, bound, peak)


def roofline_s(flop: float, nbytes: float, peak_flop_per_s: float, mem_bytes_per_s: float, compute_eff: float,
               memory_eff: float, overhead_s: float) -> tuple[float, float, float, str]:
    """(time, compute, memory seconds, bound) of an op of `flop` and `nbytes` at these rates and efficiencies:
    the module docstring's formula, shared by op_time and the per-op loop of planner/predict/timing.py."""
    # no kernel runs above its device's peak or streams memory above its bandwidth: an efficiency read
    # above 1 (a curve's wave factor moved to a device with fewer SMs, an edge of a grid) is held at 1
    compute = flop / (peak_flop_per_s * min(compute_eff, 1.0)) if flop else 0.0
    memory = nbytes / (mem_bytes_per_s * min(memory_eff, 1.0)) if nbytes else 0.0
    if overhead_s > max(compute, memory):
        bound = "overhead"
    else:
        bound = "compute" if compute >= memory else "memory"
    return max(compute, memory) + overhead_s, compute, memory, bound

