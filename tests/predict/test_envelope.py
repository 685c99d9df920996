"""The padding envelope (planner/predict/envelope.py): closed forms, and times non-decreasing in the sizes a
kernel pads, never below the roofline."""

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.hardware.catalog import load_catalog
from planner.predict import Request, default_context
from planner.predict.api import target_of
from planner.predict.envelope import GEMM_TOP, axes, grid_ops, resized
from planner.predict.roofline import op_time
from planner.workload.capture import OpRecord, TensorMeta
from planner.workload.counting import classify
from planner.workload.device_graph import device_graph
from planner.workload.graphs import Workload
from planner.workload.parallelism import Parallelism
from planner.workload.zoo import resolve

H100 = load_catalog().device("h100-sxm")


def _t(*shape, bits=16):
    n = 1
    for s in shape:
        n *= s
    return TensorMeta(tuple(shape), "bfloat16", bits, n)


def _mm(m, k, n):
    rec = OpRecord("aten.mm.default", "aten.mm", "", "forward", (("self", _t(m, k)), ("mat2", _t(k, n))),
                   (_t(m, n),), (), False)
    return rec, *classify(rec, False)


@dataclass(frozen=True)
class RowEfficiency:
    """Memory efficiency that rises with a GEMM's rows (a GEMV kernel slower than a small GEMM's tiles), as an
    interpolated profile can read: 0.5 below 32 rows, 0.9 from 32 on."""

    tier: str = "datasheet"
    band_fraction: float = 0.0

    def efficiencies(self, rec, category, device, nbytes=None):
        m = rec.arg("self").shape[0]
        return 1.0, (0.9 if m >= 32 else 0.5), 0.0


def test_a_gemm_is_resized_along_its_rows_on_a_grid_of_powers_of_two():
    rec, category, cost = _mm(3, 4096, 1024)
    (found,) = axes(rec, category, rows_pad=True)
    assert found == (("self",), 0, 3, GEMM_TOP)
    assert axes(rec, category) == []  # a single kernel beside its own measurement keeps its rows
    _, grids, points = grid_ops(rec, category, rows_pad=True)
    # 2, 4, ..., 4096: the largest power of two at or below 3, up to the top (12 points)
    assert grids == [[2 ** i for i in range(1, 13)]]
    # at 4 rows: 2 x 4 x 4,096 x 1,024 FLOP; bytes 3 rows more than at 3: A 4,096 x 2 and C 1,024 x 2 per row
    r4, c4 = points[(4,)]
    assert r4.arg("self").shape == (4, 4096) and r4.outputs[0].shape == (4, 1024)
    assert c4.flop == 2 * 4 * 4096 * 1024
    assert c4.bytes - cost.bytes == 4096 * 2 + 1024 * 2
    assert axes(*_mm(GEMM_TOP, 64, 64)[:2], rows_pad=True) == []  # at the top: timed as measured


def test_a_1_row_gemm_takes_what_the_gemm_padded_to_32_rows_takes():
    # 1 x 4,096 @ 4,096 x 4,096 bf16 on an H100 (3.35e12 B/s). At 1 row the efficiency reads 0.5: 33,570,816 B
    # in 20.04 us; padded to 32 rows it reads 0.9 on (32 x 4,096 + 4,096^2 + 32 x 4,096) x 2 = 34,078,720 B:
    # 11.30 us, the least time at or above 1 row on the grid (1 is a grid point: no interpolation)
    rec, category, cost = _mm(1, 4096, 4096)
    t = op_time(rec, category, cost, "bf16", H100, RowEfficiency(), rows_pad=True)
    assert t.time_s == pytest.approx(34_078_720 / (H100.mem_bytes_per_s * 0.9))
    assert t.time_s >= cost.bytes / H100.mem_bytes_per_s
    # eager PyTorch calls cuBLAS at the shape it has: 33,570,816 B at 0.5 of the bandwidth, 20.04 us
    eager = op_time(rec, category, cost, "bf16", H100, RowEfficiency())
    assert eager.time_s == pytest.approx(33_570_816 / (H100.mem_bytes_per_s * 0.5))


def test_between_grid_points_the_time_is_log_linear_and_never_below_the_roofline():
    # 48 rows lie between 32 and 64: u = log2(48 / 32) = 0.585; both points read 0.9, so
    # t = exp((1 - u) ln t(32) + u ln t(64)), and the roofline of 48 rows at efficiency 1 is below it
    rec, category, cost = _mm(48, 4096, 4096)
    t32 = (32 * 4096 + 4096 * 4096 + 32 * 4096) * 2 / (H100.mem_bytes_per_s * 0.9)
    t64 = (64 * 4096 + 4096 * 4096 + 64 * 4096) * 2 / (H100.mem_bytes_per_s * 0.9)
    import math
    u = math.log2(48 / 32)
    expected = math.exp((1 - u) * math.log(t32) + u * math.log(t64))
    assert op_time(rec, category, cost, "bf16", H100, RowEfficiency(), rows_pad=True).time_s == pytest.approx(expected)
    assert expected >= cost.bytes / H100.mem_bytes_per_s


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=2, max_size=6))
def test_gemm_time_is_non_decreasing_in_its_rows(rows):
    times = [op_time(*_mm(m, 4096, 4096), "bf16", H100, RowEfficiency(), rows_pad=True).time_s for m in sorted(rows)]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(times, times[1:]))


def _decode_attention(batch: int, context: int):
    dg = device_graph(resolve("llama-3.1-8b"), Workload("decode", batch, context_len=context, engine="vllm"),
                      Parallelism(tp=4))
    op = next(op for op in dg.layer.ops if op.category == "attention")
    return op.record, op.category, op.cost, dg.dtype


CTX = default_context()
TARGET = target_of(Request(model="llama-3.1-8b", device="h100-sxm", engine="vllm"), CTX, "vllm")


def _attention_s(batch: int, context: int) -> float:
    rec, category, cost, dtype = _decode_attention(batch, context)
    return op_time(rec, category, cost, dtype, TARGET.device, TARGET.efficiency).time_s


def test_decode_attention_is_non_decreasing_in_its_context_on_the_h100_profile():
    # before the envelope the H100 profile read decode attention at 4,000 tokens faster (14.4 us) than at
    # 1,000 (16.6 us): llama-3.1-8b, batch 1, tp 4 (2 KV heads per device), vLLM
    times = [_attention_s(1, c) for c in (255, 500, 1000, 1999, 2000, 4000, 4255, 8000)]
    assert times == sorted(times)


@settings(max_examples=15, deadline=None)
@given(b=st.sampled_from([1, 2, 3, 8, 16, 100]), db=st.sampled_from([0, 1, 7, 64]),
       c=st.sampled_from([100, 255, 1000, 3000, 4000]), dc=st.sampled_from([0, 1, 500, 3000]))
def test_decode_attention_is_non_decreasing_in_batch_and_context(b, db, c, dc):
    small, large = _attention_s(b, c), _attention_s(b + db, c + dc)
    assert large >= small * (1 - 1e-12)


def test_a_fused_group_is_resized_as_its_anchor_alone():
    # a fused kernel's record is its anchor's: its grid is its anchor's, named as the anchor op (efficiency read
    # at its shape) with the anchor's cost, the same grid as the unfused GEMM's; its other work enters only
    # through its own roofline floor
    rec, category, cost = _mm(8, 256, 256)
    fused = OpRecord("fused.mm+relu", rec.packet, "", "forward", rec.args, rec.outputs, (), False)
    (axis,) = axes(fused, category, rows_pad=True)
    out, c = resized(fused, [(axis, 16)])
    _, at16 = classify(_mm(16, 256, 256)[0], False)
    assert c == at16 and out.op == "aten.mm"
    assert out == resized(rec, [(axis, 16)])[0]


def test_mla_decode_attention_fused_by_trtllm_is_non_decreasing_in_its_context():
    # DeepSeek-V3's latent attention with its prologue fused (trtllm), batch 1, tp 8 on an H200: the group's
    # other work (the cache's concatenation) grows with the context and once read the kernel's efficiency at
    # its own bytes, faster at 1,000 tokens (4.53 us) than at 128 (4.67 us)
    ctx = default_context()
    target = target_of(Request(model="deepseek-v3", device="h200-sxm", engine="trtllm"), ctx, "trtllm")
    times = []
    for context in (128, 255, 1000, 1999):
        dg = device_graph(resolve("deepseek-v3"), Workload("decode", 1, context_len=context, engine="trtllm"),
                          Parallelism(tp=8))
        op = next(op for op in dg.layer.ops if op.category == "attention")
        times.append(op_time(op.record, op.category, op.cost, dg.dtype, target.device, target.efficiency).time_s)
    assert times == sorted(times)


def _grouped(experts, m, k, n):
    # a grouped expert GEMM's lookup record (lowering._batched): [E, m, K] x [E, K, N], named fused.experts:
    rec = OpRecord("fused.experts:aten.mm.default", "aten.bmm", "", "forward",
                   (("self", _t(experts, m, k)), ("mat2", _t(experts, k, n))), (_t(experts, m, n),), (), False)
    return rec, *classify(rec, False)


def test_a_grouped_expert_gemm_pads_its_rows_per_expert_and_keeps_its_name():
    # 8 experts of 5 rows each, K 2,048, N 768: the rows axis is dim 1 of the [8, 5, 2,048] operand; at 8 rows
    # per expert the resized op is 2 x 8 x 8 x 2,048 x 768 FLOP, still fused.experts: (profile_select reads
    # its waves per expert)
    rec, category, _ = _grouped(8, 5, 2048, 768)
    (axis,) = axes(rec, category, rows_pad=True)
    assert axis == (("self",), 1, 5, GEMM_TOP)
    out, cost = resized(rec, [(axis, 8)])
    assert out.op == "fused.experts:aten.mm.default" and out.outputs[0].shape == (8, 8, 768)
    assert cost.flop == 2 * 8 * 8 * 2048 * 768


def test_a_moe_prefill_is_non_decreasing_in_prompt_length():
    # qwen3-30b-a3b under vLLM on an H200: its grouped expert GEMMs read 0.16 ms at a 113-token prompt and
    # 0.14 ms at 210 before their rows padded, and TTFT fell 20.65 -> 20.36 ms
    from planner.predict import predict
    ctx = default_context()
    ttft = [predict(Request(model="qwen3-30b-a3b", device="h200-sxm", engine="vllm", batch=1, input_len=n,
                            output_len=16), ctx).metrics["ttft_s"] for n in (16, 113, 210, 307, 404)]
    assert ttft == sorted(ttft)
