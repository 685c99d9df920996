"""Capture on meta tensors: ops, module paths, phases, shapes and touched storage."""

import torch

from planner.workload.capture import capture
from planner.workload.graphs import Workload, build_graph
from planner.workload.zoo import resolve


def test_records_ops_with_module_paths_and_phases(run_captured):
    wg, _ = run_captured("gpt2", mode="training", seq_len=64, optimizer="fused")
    records = wg.graph.records
    assert {r.phase for r in records} == {"forward", "backward", "optimizer"}
    fwd_mm = [r for r in records if r.packet == "aten.addmm" and r.phase == "forward"]
    assert fwd_mm[0].module == "layers.0.attn.qkv_proj"
    # backward ops are attributed to the module whose gradient they compute
    assert any(r.module.startswith("layers.11.") for r in records if r.phase == "backward" and r.packet == "aten.mm")
    # the optimizer update runs per parameter owner: one fused AdamW call per layer, embedding, head
    owners = {r.module for r in records if r.phase == "optimizer" and r.packet == "aten._fused_adamw_"}
    assert owners == {f"layers.{i}" for i in range(12)} | {"embed_tokens", "embed_positions", "norm"}


def test_records_shapes_and_dtypes(run_captured):
    wg, _ = run_captured("llama-2-7b", mode="prefill", seq_len=16)
    [q_proj] = [r for r in wg.graph.records if r.module == "layers.0.attn.q_proj" and r.packet == "aten.mm"]
    x, w = q_proj.arg("self"), q_proj.arg("mat2")
    assert (x.shape, w.shape, q_proj.outputs[0].shape) == ((16, 4096), (4096, 4096), (16, 4096))
    assert x.dtype == "bfloat16" and x.bits == 16


def test_logical_dtype_sets_the_counted_width(run_captured):
    wg, _ = run_captured("llama-2-7b", mode="prefill", seq_len=16, dtype="fp4")
    [q_proj] = [r for r in wg.graph.records if r.module == "layers.0.attn.q_proj" and r.packet == "aten.mm"]
    assert q_proj.arg("mat2").bits == 4
    assert q_proj.arg("mat2").bytes == 4096 * 4096 * 4 / 8


def test_broadcast_dimensions_count_once():
    def body(_):
        a = torch.empty(1, 4096, device="meta").expand(64, 4096)
        (a + torch.empty(64, 4096, device="meta"))

    graph = capture(body, torch.float32, 32, "fp32")
    [add] = [r for r in graph.records if r.packet == "aten.add"]
    assert add.arg("self").touched == 4096 and add.arg("self").numel == 64 * 4096


def test_a_405b_model_captures_on_meta_without_memory():
    # building and running llama-3.1-405b on meta allocates no weights
    wg = build_graph(resolve("llama-3.1-405b"), Workload("decode", context_len=8))
    assert wg.params > 405e9
    assert all(r.outputs[0].shape for r in wg.graph.records if r.packet == "aten.mm")


def test_linear_weights_are_recorded_as_stored_transposed(run_captured):
    # nn.Linear computes x @ W.t() with W [out, in] row-major: mm's second operand is column-major
    wg, _ = run_captured("gpt2", mode="prefill", seq_len=32)
    [qkv] = [r for r in wg.graph.records if r.module == "layers.0.attn.qkv_proj" and r.packet == "aten.addmm"]
    assert qkv.arg("mat2").col_major and not qkv.arg("mat1").col_major


def test_in_module_equals_dataclasses_replace_for_every_field():
    # in_module lists OpRecord's fields by hand: a field added to OpRecord must be added there too
    import dataclasses

    from planner.workload.capture import OpRecord
    rec = OpRecord("aten.mm.default", "aten.mm", "layers.0.mlp", "forward", (("self", None), ("alpha", 2)), (),
                   ("out",), True)
    assert rec.in_module("layer") == dataclasses.replace(rec, module="layer")
    assert len(dataclasses.fields(OpRecord)) == 8


def test_rms_norm_results_are_the_decompositions_on_meta():
    """_rms_norm_results gives what the decomposition gives, in shape, dtype and strides: contiguous and
    transposed inputs, a weight of another dtype, no weight, a norm over two dimensions."""
    from planner.workload.capture import _rms_norm_results

    def decomposed(x, weight, dims):
        over = tuple(range(-dims, 0))
        rstd = torch.rsqrt(x.float().pow(2).mean(over, keepdim=True) + 1e-6)
        y = (x.float() * rstd).to(x.dtype)
        return (y * weight if weight is not None else y), rstd

    meta = dict(device="meta")
    cases = [
        (torch.empty(2, 5, 8, dtype=torch.bfloat16, **meta), torch.empty(8, dtype=torch.bfloat16, **meta), 1),
        (torch.empty(2, 5, 8, dtype=torch.bfloat16, **meta), torch.empty(8, dtype=torch.float32, **meta), 1),
        (torch.empty(2, 5, 8, dtype=torch.float16, **meta), None, 1),
        (torch.empty(5, 2, 8, dtype=torch.bfloat16, **meta).transpose(0, 1), torch.empty(8, dtype=torch.bfloat16, **meta), 1),
        (torch.empty(2, 4, 8, dtype=torch.float32, **meta), torch.empty(4, 8, dtype=torch.float32, **meta), 2),
        (torch.empty(3, 8, dtype=torch.bfloat16, **meta), torch.empty(8, dtype=torch.bfloat16, **meta), 1),
    ]
    for x, weight, dims in cases:
        want = decomposed(x, weight, dims)
        got = _rms_norm_results(x, weight, dims)
        for a, b in zip(got, want):
            assert (a.shape, a.dtype, a.stride(), a.storage_offset()) == (b.shape, b.dtype, b.stride(), b.storage_offset())


def test_rms_norm_results_over_an_empty_normalized_shape():
    """An empty normalized shape: the decomposition's mean over no dimension is torch's mean over all of
    them, so rstd has every dimension of size 1."""
    from planner.workload.capture import _rms_norm_results

    x = torch.empty(2, 3, 4, dtype=torch.bfloat16, device="meta")
    y, rstd = _rms_norm_results(x, None, 0)
    want = torch.rsqrt(x.float().pow(2).mean((), keepdim=True) + 1e-6)
    assert (tuple(rstd.shape), rstd.stride(), rstd.dtype) == (tuple(want.shape), want.stride(), want.dtype)
    assert (tuple(y.shape), y.dtype) == ((2, 3, 4), torch.bfloat16)


def test_training_dropout_is_one_kernel_each_way_as_on_a_gpu():
    # F.dropout(p=0.1) in training on a CUDA tensor runs native_dropout (aten Dropout.cpp): one kernel that
    # reads x [8, 1024, 768] bf16 (12,582,912 B) and writes y (12,582,912 B) and a bool mask (6,291,456 B);
    # its backward one native_dropout_backward. Meta tensors would take the CPU composite (bernoulli_, div_,
    # mul); the capture routes them to the GPU's kernel
    from planner.workload.counting import classify
    x = torch.empty(8, 1024, 768, device="meta", dtype=torch.bfloat16, requires_grad=True)

    def run(_cap):
        torch.nn.functional.dropout(x, 0.1, training=True).float().sum().backward()

    graph = capture(run, torch.bfloat16, 16, "bf16")
    packets = [r.packet for r in graph.records]
    assert "aten.bernoulli_" not in packets
    [fwd] = [r for r in graph.records if r.packet == "aten.native_dropout"]
    [bwd] = [r for r in graph.records if r.packet == "aten.native_dropout_backward"]
    n = 8 * 1024 * 768
    cost = classify(fwd, False)[1]
    assert (cost.bytes_read, cost.bytes_written) == (2 * n, 2 * n + n)
    assert bwd.phase == "backward"
    # at inference (training=False) dropout is the identity: no kernel
    graph = capture(lambda _cap: torch.nn.functional.dropout(x.detach(), 0.1, training=False),
                    torch.bfloat16, 16, "bf16")
    assert not [r for r in graph.records if "dropout" in r.packet or r.packet == "aten.bernoulli_"]
