"""Every traced op beside its roofline: the reader against the profiler's own op table, FLOP against closed
forms, the breakdown against the wall time, and the roofline against planner's own op prediction."""

from __future__ import annotations

import math
import statistics

import pytest

from planner.predict.context import default_context
from planner.predict.roofline import op_time
from planner.trace.analyze import FLAG_RATIO, analyze
from planner.trace.ops import count_op
from planner.trace.read import read_trace
from planner.workload.engines import get_engine
from tests.trace.conftest import BATCH, CPU_PROFILE, D_MODEL, FFN, GPU_TRACES, HEADS, LAYERS, SEQ


@pytest.fixture(scope="module")
def forward(traces):
    return analyze(read_trace(traces["transformer_forward"].path), CPU_PROFILE)


@pytest.mark.parametrize("name", ["transformer_forward", "transformer_train", "cnn_forward", "cnn_train"])
def test_every_op_the_profiler_lists_is_in_the_table_and_self_times_add_up(traces, name):
    rec = traces[name]
    report = analyze(read_trace(rec.path), CPU_PROFILE)
    assert rec.names <= set(report.ops["name"])
    # the profiler's table: self CPU time summed over every op (key_averages), in us
    assert report.ops["self_s"].sum() * 1e6 == pytest.approx(rec.self_total_us, rel=0.01)
    # self times add up to the host-busy time, and with the idle between ops to the wall time
    assert sum(s for _, s in report.breakdown) == pytest.approx(report.wall_s, rel=1e-9)


def test_the_transformer_gemms_count_2_tokens_params(forward):
    # four linear layers per block on T = BATCH x SEQ = 128 tokens, biases in the epilogue:
    # 2 x T x (d x 3d + d x d + d x ffn + ffn x d) = 2 x 128 x (49,152 + 16,384 + 65,536 + 65,536) = 50,331,648 per block
    tokens = BATCH * SEQ
    per_block = 2 * tokens * (D_MODEL * 3 * D_MODEL + D_MODEL * D_MODEL + 2 * D_MODEL * FFN)
    assert per_block == 50_331_648
    cats = forward.by_category()
    assert cats.loc["matmul", "flop"] == LAYERS * per_block == 201_326_592
    assert cats.loc["matmul", "ops"] == 4 * LAYERS
    # causal attention: QK^T and PV, 2 x B x H x S x S x (dh + dh), halved by the mask (counting.attention_flop)
    head_dim = D_MODEL // HEADS
    assert cats.loc["attention", "flop"] == LAYERS * 2 * BATCH * HEADS * SEQ * SEQ * 2 * head_dim / 2 == 8_388_608


def test_a_training_step_is_forward_backward_and_optimizer(traces):
    report = analyze(read_trace(traces["transformer_train"].path), CPU_PROFILE)
    phases = set(report.counted["phase"])
    assert phases == {"forward", "backward", "optimizer"}
    # backward GEMMs: dX and dW per linear layer, each as many FLOP as the forward one
    mm = report.counted[report.counted["category"] == "matmul"].groupby("phase")["flop"].sum()
    assert mm["backward"] == 2 * mm["forward"] == 2 * 201_326_592


def test_the_gemm_error_is_reported_and_slow_ops_flagged(forward):
    median, n = forward.gemm_abs_ln
    assert n == 4 * LAYERS and median is not None and math.isfinite(median)
    g = forward.counted[forward.counted["category"] == "matmul"]
    assert median == statistics.median(abs(math.log(a / m)) for a, m in zip(g["attainable_s"], g["measured_s"]))
    flagged = forward.counted["ratio"] > FLAG_RATIO
    assert list(forward.flagged.index.sort_values()) == list(forward.counted.index[flagged])


def test_attainable_times_are_the_predictors_own(forward):
    ctx = default_context()
    dev = ctx.device(CPU_PROFILE)
    eff = ctx.efficiency(dev, get_engine("eager").libraries)
    row = forward.counted[forward.counted["category"] == "matmul"].iloc[0]
    c = count_op(forward.trace.ops[int(row["index"])])
    assert row["attainable_s"] == op_time(c.record, c.category, c.cost, forward.dtype, dev, eff).time_s
    assert forward.tier == "measured" and forward.device.id == CPU_PROFILE


def test_ops_inside_a_counted_op_carry_no_work_of_their_own(forward):
    inner = forward.ops[forward.ops["inside"] >= 0]
    assert not inner["counted"].any() and (inner["flop"] == 0).all()
    # and every counted op's FLOP is the registry's for that op
    for _, row in forward.counted.head(20).iterrows():
        assert row["flop"] == count_op(forward.trace.ops[int(row["index"])]).cost.flop


def test_a_gpu_trace_reads_against_the_catalog_device_it_names():
    report = analyze(read_trace(GPU_TRACES / "h100_llama1b_prefill_b1_s512_bf16.json.gz"))
    assert report.device.id == "h100-sxm" and report.dtype == "bf16"
    parts = dict(report.breakdown)
    assert sum(parts.values()) == pytest.approx(report.wall_s, rel=1e-9)
    # every kernel belongs to a counted op: device time of counted ops = device-busy time of the kernels
    busy = sum(e.dur_ns for e in report.trace.device_events) / 1e9
    assert report.counted["measured_s"].sum() == pytest.approx(busy, rel=1e-9)
    # 16 layers x 7 projections + the LM head... as mm: 16 x 7 + 1 = 113 GEMMs plus the rotary inv_freq matmul
    assert report.gemm_abs_ln[1] == 114
    # the eager run is host-bound: the device waits for the host most of the time
    assert parts["idle: host-bound (dispatch, Python)"] > 0.5 * report.wall_s


def test_the_resnet50_step_on_the_h100_reads_against_its_measured_eager_profile():
    report = analyze(read_trace(GPU_TRACES / "h100_resnet50_train_b32_amp_bf16.json.gz"))
    assert report.device.id == "h100-sxm"
    # the trace is eager PyTorch on an H100: the pytorch-eager profile measured on an H100 is its own
    assert report.tier == "measured" and "h100-sxm/pytorch-eager.json" in report.source
    # every kernel is correlated with its CPU op: the ops' own device time adds up to every kernel's
    kernels = sum(e.dur_ns for e in report.trace.device_events) / 1e9
    assert report.ops["device_s"].sum() == pytest.approx(kernels, rel=1e-9)
    # 98% of it lies in counted ops, each with its measured time beside an attainable time from that profile
    timed = report.counted[report.counted["measured_s"] > 0]
    assert timed["measured_s"].sum() > 0.97 * kernels
    assert len(timed) > 100 and (timed["attainable_s"] > 0).all()


def test_a_cpu_trace_without_a_device_reads_against_this_cpu_on_the_datasheet_tier_without_a_profile(traces):
    from planner.hardware.cpu import parse_host
    from planner.predict.context import Context
    from planner.trace.analyze import trace_device

    ctx = default_context()
    # this machine's CPU as a host no profile covers describes it (planner/hardware/cpu.py reads /proc/cpuinfo)
    cpuinfo = "processor: 0\nvendor_id: GenuineIntel\ncpu family: 6\nmodel: 85\nmodel name: Test CPU @ 3.00GHz\n" \
              "core id: 0\nflags: avx2 fma avx512f\n"
    here = Context(ctx.catalog, ctx.defaults, ctx.power, ctx.profiles, bands=ctx.bands, host=lambda: parse_host(cpuinfo))
    trace = read_trace(traces["cnn_forward"].path)
    device = trace_device(trace, None, here)
    assert device.id == "cpu-intel-test-cpu-3-00ghz-6-85-1c" and device.id not in ctx.profiles
    assert device.peak("fp32") == 1 * 3.0e9 * 64  # 1 core x 3 GHz x 64 FLOP/cycle (2 AVX-512 FMA)
    assert analyze(trace, ctx=here).tier == "datasheet"
