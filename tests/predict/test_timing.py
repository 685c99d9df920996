"""planner/predict/timing.py's per-op loop (_time_op) against op_time then PowerModel.sustained_energy_j:
the same numbers, bit for bit, on devices of every efficiency tier and power model, with and without a
power limit that slows kernels."""

from dataclasses import replace

import pytest

from planner.predict.context import default_context
from planner.predict.roofline import MATRIX_CATEGORIES, op_dtype, op_time
from planner.predict.timing import _time_op
from planner.workload.device_graph import device_graph
from planner.workload.engines import get_engine
from planner.workload.graphs import Workload
from planner.workload.parallelism import Parallelism
from planner.workload.zoo import resolve

CTX = default_context()
# published (h100), transferred (h100-pcie, h800), datasheet (a10g, l4), AMD published (mi300x), a CPU
DEVICES = ("h100-sxm", "h100-pcie", "a10g", "l4", "mi300x", "epyc-9654")
GRAPHS = (("llama-3.1-8b", Workload("prefill", 4, 512, dtype="bf16", engine="vllm"), Parallelism(tp=2)),
          ("llama-3.1-8b", Workload("decode", 8, context_len=1024, dtype="fp8", engine="eager"), Parallelism()),
          ("resnet50", Workload("training", 16, image_size=224, dtype="bf16"), Parallelism()),
          ("gpt2", Workload("training", 4, 512, dtype="fp32"), Parallelism()))


def _ops(dg):
    return [op for part in (dg.first, dg.layer, dg.last) for op in part.ops]


@pytest.mark.parametrize("limit_fraction", [None, 0.5])
def test_time_op_equals_op_time_then_sustained_energy(limit_fraction):
    checked = slowed = 0
    for model_id, workload, par in GRAPHS:
        dg = device_graph(resolve(model_id), workload, par)
        for device_id in DEVICES:
            device = CTX.device(device_id)
            if limit_fraction is not None and device.tdp_w:
                # half the TDP: compute-bound kernels draw more than that and are slowed
                device = replace(device, power_limit_w=limit_fraction * device.tdp_w)
            efficiency = CTX.efficiency(device, get_engine(workload.engine).libraries)
            peaks, curve = {}, CTX.power.curve_for(device)
            for op in _ops(dg):
                matrix_dtype = op_dtype(op.record, dg.dtype) if op.category in MATRIX_CATEGORIES else None
                try:
                    burst = op_time(op.record, op.category, op.cost, dg.dtype, device, efficiency)
                except Exception as exc:  # a device without the dtype's peak: both raise the same
                    with pytest.raises(type(exc), match=str(exc)[:40]):
                        _time_op(op, matrix_dtype, dg.dtype, device, efficiency, CTX.power, peaks, curve)
                    continue
                got = _time_op(op, matrix_dtype, dg.dtype, device, efficiency, CTX.power, peaks, curve)
                if burst.bound == "none":
                    assert got[:4] == (burst.time_s, None, "none", 0.0)
                    continue
                t, energy = CTX.power.sustained_energy_j(burst, device, op.cost)
                assert got[:4] == (burst.time_s, t.time_s, t.bound, energy)  # exact, not approximate
                assert got[4] is op.record and got[5] is op.cost
                checked += 1
                slowed += t.time_s > burst.time_s
    assert checked > 500
    # the slowed path is exercised: the measured H100 curve slows large GEMMs even at its TDP (700 W)
    assert slowed > (100 if limit_fraction is not None else 0)


def _reference_part_time(part, dg, device, efficiency, power):
    """A part's totals op by op, as the predictor summed them before it planned parts: op_time, then
    sustained_energy_j, added in op order (a view that costs nothing only counted as dispatched)."""
    time = energy = flop = nbytes = limited = 0.0
    bound = {"compute": 0.0, "memory": 0.0, "overhead": 0.0}
    launches, breakdown, phase_energy = {}, {}, {}
    for op in part.ops:
        phase, count, view = op.record.phase, op.count, op.category == "view"
        if view:
            launches[f"{phase}:view"] = launches.get(f"{phase}:view", 0) + count
        # every op of a step on the padding envelope (planner/predict/envelope.py: rows_pad)
        burst = op_time(op.record, op.category, op.cost, dg.dtype, device, efficiency, rows_pad=True)
        if burst.bound == "none":
            continue
        t, e = power.sustained_energy_j(burst, device, op.cost)
        limited += (t.time_s - burst.time_s) * count
        time += t.time_s * count
        energy += e * count
        flop += op.cost.flop * count
        nbytes += op.cost.bytes * count
        bound[t.bound] += t.time_s * count
        breakdown[(phase, op.category)] = breakdown.get((phase, op.category), 0.0) + t.time_s * count
        phase_energy[phase] = phase_energy.get(phase, 0.0) + e * count
        if not view:
            launches[phase] = launches.get(phase, 0) + count
    return time, energy, flop, nbytes, bound, breakdown, phase_energy, launches, limited


def test_part_time_equals_the_op_by_op_sums_on_gpus_and_cpus():
    """_part_time (planned parts, views counted at once where free, FLOP and bytes summed once per part)
    gives the op-by-op sums exactly, on GPUs (views free) and CPUs (views cost the dispatcher's time)."""
    from planner.predict.timing import _part_time

    checked_cpu = 0
    for model_id, workload, par in GRAPHS:
        dg = device_graph(resolve(model_id), workload, par)
        for device_id in DEVICES:
            device = CTX.device(device_id)
            efficiency = CTX.efficiency(device, get_engine(workload.engine).libraries)
            for part in (dg.first, dg.layer, dg.last):
                try:
                    want = _reference_part_time(part, dg, device, efficiency, CTX.power)
                except Exception:
                    continue  # a device without the graph's dtype
                got = _part_time(part, dg, device, efficiency, CTX.power)
                time, energy, flop, nbytes, bound, _, breakdown, phase_energy, launches, limited, cells = got
                assert (time, energy, flop, nbytes, bound, breakdown, phase_energy, launches, limited) == want
                # the (phase, category, bound) cells add up to the breakdown and to the bounds
                for key, seconds in breakdown.items():
                    assert sum(v for c, v in cells.items() if c[:2] == key) == pytest.approx(seconds, rel=1e-12)
                for key, seconds in bound.items():
                    assert sum(v for c, v in cells.items() if c[2] == key) == pytest.approx(seconds, rel=1e-12)
                # the phases in the order their first kernel ran (the order host waits are added in)
                assert [k for k in launches if ":" not in k] == [k for k in want[7] if ":" not in k]
                checked_cpu += device.kind == "cpu"
    assert checked_cpu > 0
