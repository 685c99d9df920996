"""Roofline per op: closed forms, bounds, and efficiencies that only ever slow an op down."""

from dataclasses import dataclass, replace

import pytest

from planner.hardware.catalog import load_catalog
from planner.hardware.efficiency import DatasheetEfficiency, load_defaults, wave_efficiency
from planner.predict.roofline import op_time
from planner.workload.capture import OpRecord, TensorMeta
from planner.workload.counting import classify


@dataclass(frozen=True)
class FixedEfficiency:
    """The same efficiency `eta` both ways, no overhead; 1 is the pure roofline."""

    eta: float = 1.0
    tier: str = "datasheet"
    band_fraction: float = 0.0

    def efficiencies(self, rec, category, device, nbytes=None):
        return self.eta, self.eta, 0.0


def _t(*shape, bits=16, dtype="bfloat16"):
    n = 1
    for s in shape:
        n *= s
    return TensorMeta(tuple(shape), dtype, bits, n)


def _mm(m, k, n):
    rec = OpRecord("aten.mm.default", "aten.mm", "", "forward", (("self", _t(m, k)), ("mat2", _t(k, n))),
                   (_t(m, n),), (), False)
    return rec, *classify(rec, False)


def test_8192_cubed_bf16_gemm_on_h100_at_efficiency_1():
    # 2·8192³ FLOP / 989.4e12 FLOP/s (h100-sxm dense bf16) = 1.1113 ms, compute-bound
    h100 = load_catalog().device("h100-sxm")
    rec, cat, cost = _mm(8192, 8192, 8192)
    t = op_time(rec, cat, cost, "bf16", h100, FixedEfficiency())
    assert t.time_s == 2 * 8192**3 / h100.peak("bf16")
    assert t.bound == "compute"


def test_gemv_is_memory_bound_at_bandwidth():
    # [1, 4096] @ [4096, 4096] bf16 reads 4096·4096·2 + 4096·2 B and writes 4096·2 B
    a100 = load_catalog().device("a100-sxm-80gb")
    rec, cat, cost = _mm(1, 4096, 4096)
    t = op_time(rec, cat, cost, "bf16", a100, FixedEfficiency())
    assert t.bound == "memory"
    assert t.time_s == pytest.approx((4096 * 4096 * 2 + 4096 * 2 * 2) / a100.mem_bytes_per_s)


def test_overhead_bound_for_tiny_ops_and_views_cost_nothing():
    h100 = load_catalog().device("h100-sxm")
    eff = DatasheetEfficiency(load_defaults())
    rec, cat, cost = _mm(2, 2, 2)
    assert op_time(rec, cat, cost, "bf16", h100, eff).bound == "overhead"
    view = OpRecord("aten.view.default", "aten.view", "", "forward", (("self", _t(4)),), (_t(4),), (), True)
    assert op_time(view, "view", cost, "bf16", h100, eff).time_s == 0


def test_wave_quantization_closed_form():
    # 132 SMs, 128x128 tiles: M=N=128·12 gives 144 tiles = 2 waves of 132 → 144 / 264 busy
    h100 = load_catalog().device("h100-sxm")
    kind = load_defaults().kinds["gpu"]
    assert wave_efficiency((1, 128 * 12, 128 * 12, 4096), kind, h100) == pytest.approx(144 / 264)
    # exactly one full wave: 132 tiles
    assert wave_efficiency((1, 128 * 11, 128 * 12, 4096), kind, h100) == pytest.approx(1.0)


def test_unsupported_dtype_is_a_clear_error():
    from planner.errors import UnsupportedError

    v100 = load_catalog().device("v100-sxm2-32gb")
    rec, cat, cost = _mm(64, 64, 64)
    with pytest.raises(UnsupportedError, match="bf16"):
        op_time(rec, cat, cost, "bf16", v100, FixedEfficiency())


def test_datasheet_efficiency_never_exceeds_one():
    h100 = load_catalog().device("h100-sxm")
    eff = DatasheetEfficiency(load_defaults())
    for m in (1, 7, 128, 1000, 8192):
        rec, cat, cost = _mm(m, 4096, 4096)
        c, mem, over = eff.efficiencies(rec, cat, h100)
        assert 0 < c <= 1 and 0 < mem <= 1 and over >= 0
    faster = replace(h100, mem_bytes_per_s=h100.mem_bytes_per_s * 2)
    rec, cat, cost = _mm(1, 4096, 4096)
    assert op_time(rec, cat, cost, "bf16", faster, eff).time_s < op_time(rec, cat, cost, "bf16", h100, eff).time_s


def test_an_efficiency_above_1_is_held_at_the_device_peak_and_bandwidth():
    # L4 (300 GB/s): the [1, 4096] x [4096, 1024] decode GEMM reads 4096·1024·2 + 4096·2 B and writes
    # 1024·2 B, no faster than at 300 GB/s however high the curve reads; compute likewise caps at the peak
    l4 = load_catalog().device("l4")
    rec, cat, cost = _mm(1, 4096, 1024)
    fast = FixedEfficiency(2.3)  # a curve read above 1 (a wave factor moved to a device with fewer SMs)
    t = op_time(rec, cat, cost, "bf16", l4, fast)
    assert t.memory_s == pytest.approx((4096 * 1024 * 2 + 4096 * 2 + 1024 * 2) / l4.mem_bytes_per_s)
    rec, cat, cost = _mm(8192, 8192, 8192)
    assert op_time(rec, cat, cost, "bf16", l4, fast).compute_s == 2 * 8192**3 / l4.peak("bf16")


@dataclass(frozen=True)
class BytesSeen:
    """Records the bytes an efficiency lookup was given."""

    seen: list
    tier: str = "published"
    band_fraction: float = 0.0

    def efficiencies(self, rec, category, device, nbytes=None):
        self.seen.append(nbytes)
        return 0.5, 0.5, 0.0


def test_a_fused_group_is_looked_up_at_the_bytes_the_whole_kernel_moves():
    # the rotary table of a vLLM prefill: a fused group whose record is its first op's (a 64-element
    # neg, 512 B) while the kernel writes 524,288 B; the lookup must see the kernel's bytes, not 512
    h100 = load_catalog().device("h100-sxm")
    x = _t(64, bits=32, dtype="float32")
    rec = OpRecord("fused.neg+div+cos", "aten.neg", "", "forward", (("self", x),), (x,), (), False)
    from planner.workload.counting import OpCost
    cost = OpCost(327_872.0, 4_352.0, 524_288.0)
    eff = BytesSeen([])
    op_time(rec, "elementwise", cost, "bf16", h100, eff)
    op_time(replace(rec, op="aten.neg.default"), "elementwise", cost, "bf16", h100, eff)
    assert eff.seen == [4_352.0 + 524_288.0, None]  # an aten op's own tensors say what it moves


def test_no_memory_bound_kernel_of_a_vllm_prefill_crawls():
    # llama-3.1-70b prefill on 8 x H100 (vLLM, published profile): every memory-bound kernel moving 100 kB
    # or more streams at 1% of the 3.35 TB/s or better (the rotary-table group ran at 0.02% before its
    # lookup read the group's bytes)
    from planner.predict import Request
    from planner.predict.api import op_rows
    h100 = load_catalog().device("h100-sxm")
    rows = op_rows(Request("llama-3.1-70b", "h100-sxm", gpus=8, tp=8, batch=32))["prefill"]
    slow = [(r.op, r.bytes, r.time_s) for r in rows
            if r.bound == "memory" and r.bytes >= 1e5 and r.bytes / r.time_s < 0.01 * h100.mem_bytes_per_s]
    assert slow == []

