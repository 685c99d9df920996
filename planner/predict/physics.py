"""Physics as a checked law: the least time a step can take on a device, and the invariants every
prediction keeps (tests/predict/test_physics.py, benchmarks/physics_audit.py).

Floors, for one device of a tp x ep shard, all its pipeline stages together (a pass runs them in turn):
    bytes         = what the step must move whatever the engine fuses: every tensor that existed before
                    a block of ops (weights, inputs, the KV cache) read once, every tensor that outlives
                    it written once (planner/workload/device_graph.least_cost)
    memory floor  = bytes / the device's memory bandwidth
    compute floor = the step's FLOP / the highest dense peak among the dtypes its precision runs in
    floor         = max(memory floor, compute floor)
so a decode step is never faster than reading its weights and its KV cache, a prefill never faster
than its FLOP at the peak. Per prediction:
    TTFT     >= floor of the prefill of the batch
    TPOT     >= mean of the decode floors at the context's two ends (TPOT is the mean of those two
                steps, planner/predict/inference.py, and each step is at least its floor)
    latency  >= TTFT floor + (output - 1) x TPOT floor
    forward  >= floor of the forward pass of the batch
    training >= model FLOP per step / (devices x highest peak)   (MFU <= 1)
and average power per device lies between the device's idle power and its power limit.
Per op: time >= max(FLOP / the peak of the dtype it runs in, bytes / memory bandwidth).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import UnsupportedError
from planner.hardware.catalog import Device
from planner.predict.roofline import MATRIX_CATEGORIES, matrix_peak, op_dtype, vector_peak
from planner.workload.capture import OpRecord
from planner.workload.counting import OpCost
from planner.workload.device_graph import least_cost
from planner.workload.graphs import Workload
from planner.workload.parallelism import Parallelism
from planner.workload.quant import precision
from planner.workload.zoo import Model

RELATIVE_SLACK = 1e-9
"""A figure may sit this far below its floor (float rounding of sums in another order), no further."""


@dataclass(frozen=True, slots=True)
class Floor:
    """The least time of one step on one device, and what it is made of."""

    flop: float
    """FLOP the device computes per step."""
    bytes: float
    """Bytes the device must move per step (read + written)."""
    compute_s: float
    """flop / the highest dense peak of the precision's dtypes."""
    memory_s: float
    """bytes / memory bandwidth."""

    @property
    def time_s(self) -> float:
        """max(compute_s, memory_s), in seconds."""
        return max(self.compute_s, self.memory_s)


def top_peak(device: Device, dtype: str) -> float:
    """The highest dense peak (FLOP/s) among the dtypes a workload at `dtype` computes in: its compute,
    GEMM and attention dtypes and fp32. No op of the workload runs faster than this."""
    p = precision(dtype)
    peaks = []
    for name in {p.compute, p.gemm, p.attention, "fp32", "tf32"}:
        try:
            peaks.append(device.peak(name))
        except UnsupportedError:
            continue
    if not peaks:
        raise UnsupportedError(f"device '{device.id}' has no peak for {p.describe()}")
    return max(peaks)


def step_floor(model: Model, workload: Workload, par: Parallelism, device: Device) -> Floor:
    """The floor of one step of `workload` on one device of `par`'s tp x ep shard (module docstring)."""
    cost = least_cost(model, workload, par)
    return Floor(cost.flop, cost.bytes, cost.flop / top_peak(device, workload.dtype),
                 cost.bytes / device.mem_bytes_per_s)


def op_floor_s(rec: OpRecord, category: str, cost: OpCost, graph_dtype: str, device: Device) -> float:
    """max(FLOP / the peak of the dtype the op runs in, bytes / memory bandwidth), in seconds: a view 0."""
    if category == "view":
        return 0.0
    if category in MATRIX_CATEGORIES:
        peak = matrix_peak(device, op_dtype(rec, graph_dtype), graph_dtype)
    else:
        peak = vector_peak(device, graph_dtype)
    return max(cost.flop / peak if cost.flop else 0.0, cost.bytes / device.mem_bytes_per_s)


def llm_floors(model: Model, par: Parallelism, device: Device, batch: int, input_len: int, output_len: int,
               dtype: str) -> dict[str, float]:
    """{"ttft_s", "tpot_s", "latency_s"} floors in seconds of serving `batch` requests of `input_len` +
    `output_len` tokens on one model copy (engine-independent: the bytes no lowering avoids)."""
    ttft = step_floor(model, Workload("prefill", batch, input_len, dtype=dtype), par, device).time_s
    tpot = 0.0
    if output_len > 1:
        ends = (input_len, input_len + output_len - 1)
        tpot = sum(step_floor(model, Workload("decode", batch, context_len=c, dtype=dtype), par, device).time_s
                   for c in ends) / 2
    return {"ttft_s": ttft, "tpot_s": tpot, "latency_s": ttft + (output_len - 1) * tpot}


def forward_floors(model: Model, par: Parallelism, device: Device, batch: int, seq_len: int | None,
                   image_size: int | None, dtype: str) -> dict[str, float]:
    """{"latency_s"} floor in seconds of one forward pass of `batch` samples on one model copy."""
    w = Workload("forward", batch, seq_len, image_size=image_size, dtype=dtype)
    return {"latency_s": step_floor(model, w, par, device).time_s}


def training_floors(metrics: dict, gpus: int, device: Device, dtype: str) -> dict[str, float]:
    """{"step_time_s"} floor in seconds: the step's model FLOP (forward and backward) over every device
    at the highest peak of the precision."""
    return {"step_time_s": metrics["model_flop_per_step"] / (gpus * top_peak(device, dtype))}


def violations(figures: dict, floors: dict[str, float], idle_w: float | None = None,
               limit_w: float | None = None) -> list[str]:
    """Each invariant `figures` (a Prediction.as_dict() or its metrics) breaks, as one line: a time below
    its floor in `floors`, average power per device outside [idle_w, limit_w], a non-finite figure."""
    found = []
    for key, floor in floors.items():
        value = figures.get(key)
        if value is None:
            continue
        if not math.isfinite(value):
            found.append(f"{key} is {value}")
        elif value < floor * (1 - RELATIVE_SLACK):
            found.append(f"{key} {value:.6g} s below its roofline floor {floor:.6g} s")
    power = figures.get("average_power_w_per_gpu")
    if power is not None and idle_w is not None and limit_w is not None and math.isfinite(idle_w):
        if power < idle_w * (1 - RELATIVE_SLACK) or power > limit_w * (1 + RELATIVE_SLACK):
            found.append(f"average power {power:.6g} W outside idle {idle_w:.6g} W .. limit {limit_w:.6g} W")
    return found
