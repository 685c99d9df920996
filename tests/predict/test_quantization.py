"""Predictions under quantization recipes: the peak each op runs at, weight and KV-cache memory in closed
form, and KV capacity never below bf16's."""

import pytest
import torch
from torch import nn

from planner.errors import UnsupportedError
from planner.predict import Request, default_context, predict, request_from_row
from planner.predict.memory import kv_bytes_per_token, kv_capacity_tokens, serving_memory, weight_bytes
from planner.predict.roofline import op_dtype, op_time
from planner.workload.counting import count
from planner.workload.device_graph import device_graph
from planner.workload.graphs import Workload, build_graph
from planner.workload.quant import recipe_names
from planner.workload.zoo import Model, resolve


def _linear_4096():
    # one nn.Linear(4096 -> 4096) on x [8, 4096] bf16
    return nn.Linear(4096, 4096, bias=False), (torch.randn(8, 4096, dtype=torch.bfloat16),)


LINEAR = Model("linear-4096", "custom", None, "tests", _linear_4096)


def _mm_time(dtype: str, device: str = "h100-sxm"):
    graph = build_graph(LINEAR, Workload("forward", dtype=dtype)).graph
    [mm] = [op for op in count(graph).ops if op.category == "matmul"]
    ctx = default_context()
    dev = ctx.device(device)
    eff = ctx.efficiency(dev)
    return mm, op_time(mm.record, mm.category, mm.cost, graph.dtype, dev, eff), dev, eff


def test_w4a16_gemm_runs_at_the_16_bit_peak():
    # weight-only int4: the weights are dequantized to bf16 in the main loop; the multiply (and the
    # 2 FLOP per weight of dequantization) run on the bf16 tensor cores
    mm, t, h100, eff = _mm_time("w4a16")
    assert op_dtype(mm.record, "w4a16") == "bf16"
    assert t.peak_flop_per_s == h100.peak("bf16")
    compute_eff = eff.efficiencies(mm.record, "matmul", h100)[0]
    assert t.compute_s == pytest.approx((2 * 8 * 4096**2 + 2 * 4096**2) / (h100.peak("bf16") * compute_eff))


def test_w8a8_gemms_run_at_the_recipe_peak():
    mm, t, h100, _ = _mm_time("quant=fp8")
    assert op_dtype(mm.record, "quant=fp8") == "fp8" and t.peak_flop_per_s == h100.peak("fp8")
    mm, t, _, _ = _mm_time("quant=int8")
    assert t.peak_flop_per_s == h100.peak("int8")
    mm, t, b200, _ = _mm_time("nvfp4", "b200")
    assert t.peak_flop_per_s == b200.peak("fp4")
    # a plain dtype is unchanged: fp8 counted at 8 bits runs at the fp8 peak, as before recipes
    mm, t, h100, _ = _mm_time("fp8")
    assert op_dtype(mm.record, "fp8") == "fp8" and t.peak_flop_per_s == h100.peak("fp8")


def test_a_device_without_the_recipe_gemm_peak_is_a_clear_error():
    # H100 has no fp4 tensor-core peak: nvfp4's GEMMs cannot be timed there, and the message says why
    with pytest.raises(UnsupportedError, match="no fp4 peak.*nvfp4.*runs its GEMMs at fp4"):
        _mm_time("nvfp4", "h100-sxm")
    with pytest.raises(UnsupportedError, match="nvfp4"):
        predict(Request("llama-2-7b", "h100-sxm", dtype="nvfp4", output_len=2))


def test_nvfp4_kv_cache_is_one_byte_per_element():
    # nvfp4 keeps the KV cache in FP8: 2 · layers · kv_heads · head_dim · 1 B per token
    # llama-2-7b: 2 · 32 · 32 · 128 · 1 = 262,144 B per token (bf16: twice that)
    dg = device_graph(resolve("llama-2-7b"), Workload("prefill", 1, 64, dtype="nvfp4"))
    assert kv_bytes_per_token(dg) == 2 * 32 * 32 * 128 * 1 == 262_144
    h100 = default_context().device("h100-sxm")
    memory = serving_memory(dg, 2, 4096, h100, default_context().defaults)
    assert memory.kv_cache_bytes == 2 * 4096 * 262_144
    bf16 = device_graph(resolve("llama-2-7b"), Workload("prefill", 1, 64))
    assert kv_bytes_per_token(bf16) == 2 * kv_bytes_per_token(dg)


def test_w4a16_weight_memory_of_llama_2_7b():
    # Linear weights of the 32 layers: 32 · (4·4096² + 3·4096·11008) = 6,476,005,376 at 4 + 20/128 bits;
    # the 32 · 2 · 4096 layer norms, the final norm, the embedding and the LM head (2 · 32000 · 4096) at 2 B
    dg = device_graph(resolve("llama-2-7b"), Workload("prefill", 1, 64, dtype="w4a16"))
    linear = 32 * (4 * 4096**2 + 3 * 4096 * 11008)
    assert linear == 6_476_005_376
    other = 32 * 2 * 4096 + 4096 + 2 * 32000 * 4096
    assert weight_bytes(dg, 0) == pytest.approx(linear * (4 + 20 / 128) / 8 + other * 2, rel=1e-12)


def test_kv_capacity_closed_form():
    # tokens that fit = floor((usable − weights − activations − workspace) / KV bytes per token)
    ctx = default_context()
    h100 = ctx.device("h100-sxm")
    dg = device_graph(resolve("llama-2-7b"), Workload("prefill", 1, 1024, dtype="quant=fp8"))
    memory = serving_memory(dg, 1, 0, h100, ctx.defaults)
    free = memory.capacity_bytes - memory.weights_bytes - memory.activation_bytes - memory.workspace_bytes
    assert kv_capacity_tokens(dg, h100, ctx.defaults) == int(free // kv_bytes_per_token(dg))


@pytest.mark.parametrize("device", ["h100-sxm", "a100-sxm-80gb", "mi300x"])
def test_every_recipe_fits_at_least_as_many_kv_tokens_as_bf16(device):
    # property: quantizing weights, activations or the KV cache never leaves less room for KV tokens
    ctx = default_context()
    dev = ctx.device(device)
    model = resolve("llama-2-7b")

    def tokens(dtype: str) -> int:
        dg = device_graph(model, Workload("prefill", 1, 1024, dtype=dtype))
        return kv_capacity_tokens(dg, dev, ctx.defaults)

    bf16 = tokens("bf16")
    assert bf16 > 0
    for recipe in recipe_names():
        assert tokens(f"quant={recipe}") >= bf16, recipe


def test_quantized_prediction_states_its_precision_and_capacity():
    p = predict(Request("llama-2-7b", "h100-sxm", dtype="w4a16", batch=4, input_len=512, output_len=64))
    d = p.as_dict()
    assert d["dtype"] == "w4a16" and d["precision"] == "w4a16: weights int4 (+scales), activations bf16, KV bf16"
    assert d["max_batch_in_memory"] == d["kv_cache_capacity_tokens"] // (512 + 64)
    plain = predict(Request("llama-2-7b", "h100-sxm", batch=4, input_len=512, output_len=64))
    # a quarter of the weight bytes leaves more room; decode reads fewer bytes, so it is faster
    assert p.memory.weights_bytes < 0.3 * plain.memory.weights_bytes
    assert d["kv_cache_capacity_tokens"] > plain.metrics["kv_cache_capacity_tokens"]
    assert p.metrics["tpot_s"] < plain.metrics["tpot_s"]


def test_configs_rows_take_precision_keys():
    req = request_from_row({"model": "gpt2", "device": "h100-sxm", "quant": "w4a16", "kv_cache": "fp8"})
    assert req.dtype == "w4a16,kv=fp8"
    assert request_from_row({"model": "gpt2", "device": "l4", "weights": "int4"}).dtype == "weights=int4"
    assert request_from_row({"model": "gpt2", "device": "l4", "dtype": "fp16", "kv_cache": "fp8"}).dtype == "fp16,kv=fp8"
