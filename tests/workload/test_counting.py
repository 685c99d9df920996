"""Per-op formulas in closed form, and the acceptance figures of whole models."""

from dataclasses import replace

import pytest

from planner.workload.capture import OpGraph, OpRecord, TensorMeta
from planner.workload.counting import OpCost, attention_flop, classified, classify, count, pointwise_packets
from planner.workload.graphs import Workload, build_graph
from planner.workload.zoo import resolve


def _t(*shape, bits=16):
    n = 1
    for s in shape:
        n *= s
    return TensorMeta(tuple(shape), "bfloat16", bits, n)


def _rec(packet, args, outputs, mutates=(), phase="forward"):
    return OpRecord(op=packet + ".default", packet=packet, module="", phase=phase, args=tuple(args),
                    outputs=tuple(outputs), mutates=mutates, is_view=False)


def test_mm_closed_form():
    # [M=128, K=256] @ [256, N=512]: 2·128·256·512 = 33,554,432 FLOP;
    # bytes (bf16): read (128·256 + 256·512)·2 = 327,680, write 128·512·2 = 131,072
    cat, cost = classify(_rec("aten.mm", [("self", _t(128, 256)), ("mat2", _t(256, 512))], [_t(128, 512)]), False)
    assert cat == "matmul"
    assert cost == OpCost(33_554_432, 327_680, 131_072)


def test_bmm_and_addmm_closed_form():
    # bmm [4, 8, 16] @ [4, 16, 32]: 2·4·8·16·32 = 32,768
    _, c = classify(_rec("aten.bmm", [("self", _t(4, 8, 16)), ("mat2", _t(4, 16, 32))], [_t(4, 8, 32)]), False)
    assert c.flop == 32_768
    # addmm bias[32] + [8, 16] @ [16, 32]: 2·8·16·32 = 8,192 (the bias is read, not counted as FLOP)
    _, c = classify(_rec("aten.addmm", [("self", _t(32)), ("mat1", _t(8, 16)), ("mat2", _t(16, 32))], [_t(8, 32)]), False)
    assert c.flop == 8_192
    assert c.bytes_read == (32 + 8 * 16 + 16 * 32) * 2


def test_conv_closed_form_and_backward_is_twice():
    # x [1, 64, 56, 56], w [128, 64, 3, 3], y [1, 128, 56, 56]: 2·128·64·9·56·56 = 462,422,016
    x, w, y = _t(1, 64, 56, 56), _t(128, 64, 3, 3), _t(1, 128, 56, 56)
    _, fwd = classify(_rec("aten.convolution", [("input", x), ("weight", w), ("bias", None), ("transposed", False)], [y]), False)
    assert fwd.flop == 462_422_016
    _, bwd = classify(_rec("aten.convolution_backward", [("grad_output", y), ("input", x), ("weight", w),
                                                          ("output_mask", (True, True, False))], [x, w], phase="backward"), False)
    assert bwd.flop == 2 * fwd.flop


def test_attention_causal_halves_and_gqa_changes_bytes_not_flop():
    # q [2, 8, 64, 32], k, v [2, 2, 64, 32]: scores 2·2·8·64·64·32 + values the same = 8,388,608; causal: half
    assert attention_flop((2, 8, 64, 32), (2, 2, 64, 32), (2, 2, 64, 32), causal=False) == 8_388_608
    assert attention_flop((2, 8, 64, 32), (2, 2, 64, 32), (2, 2, 64, 32), causal=True) == 4_194_304
    assert attention_flop((2, 8, 64, 32), (2, 8, 64, 32), (2, 8, 64, 32), causal=False) == 8_388_608
    # bshd layout of the raw kernels gives the same
    assert attention_flop((2, 64, 8, 32), (2, 64, 2, 32), (2, 64, 2, 32), causal=True, layout="bshd") == 4_194_304


def test_captured_sdpa_is_fused_reads_qkv_once_and_halves_when_causal():
    causal = count(build_graph(resolve("custom_model:causal_attention", allow_code=True), Workload("forward", 2, dtype="fp32")).graph)
    full = count(build_graph(resolve("custom_model:full_attention", allow_code=True), Workload("forward", 2, dtype="fp32")).graph)
    [attn] = [c for c in causal.ops if c.category == "attention"]
    assert attn.record.packet == "aten._scaled_dot_product_flash_attention"
    assert attn.cost.flop == 4_194_304 and full.total.flop == 8_388_608
    # fp32: reads q (2·8·64·32 = 32,768) + k + v (2·2·64·32 = 8,192 each) elements x 4 B = 196,608 B;
    # writes O and the fp32 logsumexp [2, 8, 64]: (32,768 + 1,024)·4 = 135,168 B, plus the kernel's
    # RNG state (3 int64) = 24 B
    assert attn.cost.bytes_read == 196_608
    assert attn.cost.bytes_written == 135_168 + 24


def test_linear_is_2_b_i_o():
    # Linear [B=8, i=64] -> [B, o=32]: 2·8·64·32 = 32,768 FLOP
    counts = count(build_graph(resolve("custom_model:linear_64_to_32", allow_code=True), Workload("forward", 8, dtype="fp32")).graph)
    assert counts.total.flop == 2 * 8 * 64 * 32 == 32_768


def test_backward_of_a_matmul_is_twice_its_forward():
    counts = count(build_graph(resolve("custom_model:linear_64_to_32", allow_code=True), Workload("training", 8, dtype="fp32")).graph)
    by_phase = counts.table("phase")["flop"]
    mm_fwd = sum(c.cost.flop for c in counts.ops if c.category == "matmul" and c.record.phase == "forward")
    mm_bwd = sum(c.cost.flop for c in counts.ops if c.category == "matmul" and c.record.phase == "backward")
    assert mm_fwd == 32_768
    # the input needs no gradient, so backward computes only dW = dYᵀ·X: 2·32·8·64 = 32,768
    assert mm_bwd == 32_768
    assert set(by_phase.index) == {"forward", "backward", "optimizer"}


def test_fused_adamw_closed_form():
    # 2 fp32 parameters of 10 and 6 elements: 14·16 = 224 FLOP; reads p, g, m, v = 4·16·4 B = 256,
    # writes p, m, v = 3·16·4 B = 192
    group = lambda: (_t(10, bits=32), _t(6, bits=32))
    rec = _rec("aten._fused_adamw_", [("self", group()), ("grads", group()), ("exp_avgs", group()),
                                      ("exp_avg_sqs", group()), ("max_exp_avg_sqs", ()), ("state_steps", ()),
                                      ("amsgrad", False)], [], mutates=("self", "exp_avgs", "exp_avg_sqs"))
    assert classify(rec, False) == ("optimizer", OpCost(224, 256, 192))


def test_embedding_reads_only_the_rows_it_gathers():
    # table [32000, 4096] bf16, 3 ids (int64): reads 3·8 + 3·4096·2 = 24,600 B, writes 3·4096·2 = 24,576 B
    idx = TensorMeta((3,), "int64", 64, 3)
    _, c = classify(_rec("aten.embedding", [("weight", _t(32000, 4096)), ("indices", idx)], [_t(3, 4096)]), False)
    assert c == OpCost(0, 24_600, 24_576)


def test_copy_into_a_slice_reads_the_source_and_writes_the_slice():
    _, c = classify(_rec("aten.copy_", [("self", _t(1, 8, 1, 128)), ("src", _t(1, 8, 1, 128))], [_t(1, 8, 1, 128)],
                         mutates=("self",)), False)
    assert c == OpCost(0, 2048, 2048)


def test_ops_without_a_formula_are_reported_never_zero():
    counts = count(build_graph(resolve("custom_model:fft_model", allow_code=True), Workload("forward", 4, dtype="fp32")).graph)
    names = [op for op, _ in counts.unsupported]
    assert any("fft" in n for n in names), names
    assert all(calls >= 1 for _, calls in counts.unsupported)


def test_costs_add_up_to_the_totals(run_captured):
    _, counts = run_captured("gpt2", mode="training", seq_len=64)
    total = OpCost()
    for c in counts.ops:
        total = total + c.cost
    assert total == counts.total
    for by in ("op", "module", "category", "phase"):
        frame = counts.table(by)
        assert frame["flop"].sum() == pytest.approx(counts.total.flop, rel=1e-12)
        assert frame["bytes_read"].sum() == pytest.approx(counts.total.bytes_read, rel=1e-12)
        assert frame["calls"].sum() == len(counts.ops)


# ------------------------------------------------------------------ acceptance figures

def test_resnet50_forward_is_8_18_gflop(run_captured):
    _, counts = run_captured("resnet50", mode="inference")
    assert counts.total.flop == pytest.approx(8.18e9, rel=0.02)


def test_vit_b_16_forward_is_35_1_gflop(run_captured):
    _, counts = run_captured("vit-b-16", mode="inference")
    assert counts.total.flop == pytest.approx(35.1e9, rel=0.02)


@pytest.mark.parametrize("s", [128, 4096])
def test_llama_2_7b_prefill_closed_form(run_captured, s):
    # 2·6,476,005,376·S (32 layers' Linear weights) + 2·131,072,000 (lm_head, last position only)
    # + 2·32·S²·4096 (causal attention: scores and values, halved)
    expected = 2 * 6_476_005_376 * s + 2 * 131_072_000 + 2 * 32 * s**2 * 4096
    _, counts = run_captured("llama-2-7b", mode="prefill", seq_len=s)
    assert counts.total.flop == pytest.approx(expected, rel=0.01)


def test_training_forward_plus_backward_is_3x_forward(run_captured):
    _, counts = run_captured("llama-2-7b", mode="training", seq_len=512)
    phase = counts.table("phase")["flop"]
    assert phase["forward"] + phase["backward"] == pytest.approx(3 * phase["forward"], rel=0.02)


def test_llama_2_7b_decode_bytes(run_captured):
    # every weight but the embedding table: 6,607,343,616·2 B; KV cache: 2·32·4096·4096·2 B
    floor = 6_607_343_616 * 2 + 2 * 32 * 4096 * 4096 * 2
    _, counts = run_captured("llama-2-7b", mode="decode", context_len=4096)
    assert floor <= counts.total.bytes_read <= 1.10 * floor


def test_bytes_follow_the_dtype(run_captured):
    # weights and cache dominate a decode step: fp8 moves about half of bf16, fp4 a quarter, fp32 twice
    _, bf16 = run_captured("llama-2-7b", mode="decode", context_len=256, dtype="bf16")
    _, fp8 = run_captured("llama-2-7b", mode="decode", context_len=256, dtype="fp8")
    _, fp4 = run_captured("llama-2-7b", mode="decode", context_len=256, dtype="fp4")
    _, fp32 = run_captured("llama-2-7b", mode="decode", context_len=256, dtype="fp32")
    assert fp8.total.bytes_read == pytest.approx(bf16.total.bytes_read / 2, rel=0.01)
    assert fp4.total.bytes_read == pytest.approx(bf16.total.bytes_read / 4, rel=0.01)
    assert fp32.total.bytes_read == pytest.approx(bf16.total.bytes_read * 2, rel=0.01)
    assert fp8.total.flop == bf16.total.flop


def test_moe_decode_reads_only_routed_experts(run_captured):
    # batch 1 routes to 2 of 8 experts per layer: the step reads about the active parameters, not all
    wg, counts = run_captured("mixtral-8x7b", mode="decode", context_len=256)
    assert counts.total.bytes_read == pytest.approx(wg.active_params * 2, rel=0.05)
    assert counts.total.bytes_read < 0.3 * wg.params * 2


def test_mistral_sliding_window_caps_the_decode_cache(run_captured):
    # past 4096 tokens a decode step attends to the 4096-slot rolling buffer, no more
    _, at_window = run_captured("mistral-7b", mode="decode", context_len=4095)
    _, beyond = run_captured("mistral-7b", mode="decode", context_len=16000)
    assert beyond.total.bytes_read == pytest.approx(at_window.total.bytes_read, rel=1e-6)


@pytest.mark.parametrize("model_id", ["gpt2", "gpt-j-6b", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b",
                                      "llama-3.1-70b", "llama-3.1-405b", "mistral-7b", "mixtral-8x7b",
                                      "gpt-3-175b", "bert-base", "bert-large", "resnet50", "vit-b-16"])
def test_every_zoo_forward_is_fully_supported(run_captured, model_id):
    kwargs = {"seq_len": 16} if model_id not in ("resnet50", "vit-b-16") else {}
    _, counts = run_captured(model_id, mode="inference", **kwargs)
    assert counts.unsupported == ()
    assert counts.total.flop > 0


@pytest.mark.parametrize("model_id,mode", [("llama-3.1-8b", "decode"), ("mixtral-8x7b", "training"),
                                           ("bert-base", "training"), ("resnet50", "training"),
                                           ("vit-b-16", "training"), ("gpt-j-6b", "training")])
def test_decode_and_training_are_fully_supported(run_captured, model_id, mode):
    kwargs = {"seq_len": 32} if mode == "training" and model_id not in ("resnet50", "vit-b-16") else {}
    if mode == "decode":
        kwargs = {"context_len": 64}
    _, counts = run_captured(model_id, mode=mode, **kwargs)
    assert counts.unsupported == ()


def _tagged_pointwise(graph) -> frozenset[str]:
    # torch's pointwise tags looked up afresh, packet by packet (what pointwise_packets caches)
    import torch

    found = set()
    for packet in {r.packet for r in graph.records}:
        namespace, _, name = packet.partition(".")
        op = getattr(getattr(torch.ops, namespace, None), name, None)
        if op is not None and any(torch.Tag.pointwise in getattr(op, o).tags for o in op.overloads()):
            found.add(packet)
    return frozenset(found)


def test_classified_is_memoized_by_graph_and_equals_a_fresh_classification():
    model = resolve("gpt2")
    graph = build_graph(replace(model, config=replace(model.config, num_layers=1)),
                        Workload(mode="training", seq_len=16, batch=2)).graph
    tags = _tagged_pointwise(graph)
    assert pointwise_packets(graph) == tags and tags
    fresh = [classify(r, r.packet in tags) for r in graph.records]
    first = classified(graph)
    assert list(zip(*first)) == fresh
    assert classified(graph) is first  # the same graph: the memo's answer
    twin = OpGraph(graph.records, graph.dtype, graph.saved_bytes)  # equal, another object: classified afresh
    again = classified(twin)
    assert again is not first and again == first
