"""Quantization recipes: the precision strings, scale overheads in closed form, roles in the capture
(weights, KV cache, quantized GEMM inputs), and plain dtypes counted exactly as before recipes."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from planner.errors import ConfigError, UnknownNameError
from planner.workload.counting import count
from planner.workload.graphs import Workload, build_graph
from planner.workload.quant import (
    compose,
    load_recipes,
    parameter_bits,
    precision,
    quantized_weights,
    recipe_names,
)
from planner.workload.zoo import Model, resolve

ROOT = Path(__file__).resolve().parents[2]


def _linear_4096():
    # one nn.Linear(4096 -> 4096), no bias, on x [8, 4096] bf16: y = x Wᵀ is aten.mm(x, Wᵀ)
    return nn.Linear(4096, 4096, bias=False), (torch.randn(8, 4096, dtype=torch.bfloat16),)


LINEAR = Model("linear-4096", "custom", None, "tests", _linear_4096)


def _ops(model: Model, workload: Workload):
    return count(build_graph(model, workload).graph).ops


def test_every_recipe_in_the_file_has_its_parts_and_a_source():
    raw = json.loads((ROOT / "hardware_specs" / "quant" / "recipes.json").read_text())
    assert {"fp8", "int8", "w4a16", "nvfp4", "mxfp8"} <= set(recipe_names())
    for name, entry in raw["recipes"].items():
        assert entry["source"].strip(), name
        p = precision(f"quant={name}")
        assert p.recipe == name and not p.plain
    readme = (ROOT / "hardware_specs" / "quant" / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in recipe_names())


def test_what_each_recipe_sets():
    w4a16, fp8, int8 = precision("w4a16"), precision("quant=fp8"), precision("quant=int8")
    nvfp4, mxfp8 = precision("nvfp4"), precision("mxfp8")
    assert (w4a16.weights, w4a16.activations, w4a16.kv_cache, w4a16.gemm) == ("int4", "bf16", "bf16", "bf16")
    assert (fp8.weights, fp8.activations, fp8.kv_cache, fp8.gemm) == ("fp8", "fp8", "fp8", "fp8")
    assert (int8.weights, int8.activations, int8.kv_cache, int8.gemm) == ("int8", "int8", "bf16", "int8")
    assert (nvfp4.weights, nvfp4.activations, nvfp4.kv_cache, nvfp4.gemm) == ("fp4", "fp4", "fp8", "fp4")
    assert (mxfp8.weights, mxfp8.activations, mxfp8.kv_cache, mxfp8.gemm) == ("fp8", "fp8", "bf16", "fp8")
    assert w4a16.describe() == "w4a16: weights int4 (+scales), activations bf16, KV bf16"
    assert not w4a16.quantizes_activations and fp8.quantizes_activations and nvfp4.quantizes_activations


def test_scale_overhead_in_bits_per_element_closed_forms():
    k = 4096
    # w4a16: one fp16 scale + one int4 zero point per 128 inputs: 4 + (16 + 4)/128 = 4.15625 bits
    assert precision("w4a16").weight_bits(k) == 4 + (16 + 4) / 128 == 4.15625
    # a row of 11008 inputs is 86 groups of 128: the same 20/128 bits per element
    assert precision("w4a16").weight_bits(11008) == 4 + 86 * 20 / 11008 == 4.15625
    # a row of 100 inputs is one (partial) group: 20 bits over 100 elements
    assert precision("w4a16").weight_bits(100) == 4 + 20 / 100
    # nvfp4: one E4M3 scale (8 bits) per 16 elements: 4 + 8/16 = 4.5 bits, weights and activations
    assert precision("nvfp4").weight_bits(k) == precision("nvfp4").activation_bits(k) == 4.5
    # mxfp8: one E8M0 scale (8 bits) per 32 elements: 8 + 8/32 = 8.25 bits
    assert precision("mxfp8").weight_bits(k) == 8.25
    # int8: one fp32 scale per output channel of a [N, K] weight = 32/K bits per element; per token likewise
    assert precision("quant=int8").weight_bits(k) == precision("quant=int8").activation_bits(k) == 8 + 32 / k
    # fp8: per-tensor scales (one fp32 number per tensor) are not counted
    assert precision("quant=fp8").weight_bits(k) == precision("quant=fp8").kv_bits(128) == 8
    # nvfp4's KV cache is FP8 with a per-tensor scale: exactly 1 byte per element
    assert precision("nvfp4").kv_bits(128) == 8


def test_precision_strings_and_their_canonical_form():
    assert precision("bf16").plain and precision("BF16").name == "bf16" and precision("bfloat16").name == "bf16"
    # a dtype's own name is the plain dtype; a recipe with the same name needs quant=
    assert precision("fp8").plain and precision("int8").plain
    assert not precision("quant=fp8").plain and precision("quant=fp8").name == "quant=fp8"
    # a recipe name is the recipe (nvfp4 was a dtype alias of fp4 before recipes existed)
    assert precision("nvfp4").recipe == "nvfp4" and precision("nvfp4").name == "nvfp4"
    assert precision("weights=int4,activations=bf16,kv=fp8").name == "weights=int4,kv=fp8"
    assert precision("kv=fp8, w4a16").name == "w4a16,kv=fp8"
    assert precision("fp16,weights=int4").compute == "fp16"
    # overrides equal to the base vanish; the result is the base
    assert precision("w4a16,activations=bf16").name == "w4a16"
    assert precision("bf16,kv=bf16").name == "bf16" and precision("bf16,kv=bf16").plain


def test_compose_from_flags():
    assert compose("bf16") == "bf16"
    assert compose("fp16") == "fp16"
    assert compose("bf16", "w4a16") == "w4a16"
    assert compose("bf16", "fp8") == "quant=fp8"
    assert compose(None, "nvfp4", kv_cache="fp4") == "nvfp4,kv=fp4"
    assert compose("bf16", None, "int4", None, "fp8") == "weights=int4,kv=fp8"
    assert compose("w4a16", kv_cache="fp8") == "w4a16,kv=fp8"
    # --activations fp16 on w4a16 makes fp16 the compute dtype, and GEMMs and attention run at it
    p = precision(compose("bf16", "w4a16", activations="fp16"))
    assert (p.activations, p.compute, p.gemm, p.attention) == ("fp16", "fp16", "fp16", "fp16")
    # int4 weights with fp8 activations (W4A8): GEMMs at fp8, a quantize kernel feeds each
    p = precision(compose(weights="int4", activations="fp8"))
    assert p.gemm == "fp8" and p.quantizes_activations
    # an explicit --kv-cache keeps attention at the compute dtype (a dequantizing kernel)
    assert precision(compose("bf16", "fp8", kv_cache="bf16")).attention == "bf16"


def test_nvfp4_mlp_quantizes_the_mlps_and_experts_but_not_attention_or_the_router():
    # ModelOpt's DeepSeek-R1 FP4 export: MLP, shared expert and expert Linears in NVFP4; attention projections,
    # the router gate and lm_head at bf16 (four layers: three dense, one MoE of 256 experts)
    import torch

    from planner.workload.quant import quantized_weights
    from planner.workload.zoo import resolve

    model = resolve("deepseek-v3")
    with torch.device("meta"):
        module = replace(model, config=replace(model.config, num_layers=4)).build()
    names = {id(sub.weight): name for name, sub in module.named_modules() if isinstance(sub, torch.nn.Linear)}
    chosen = {names[id(w)] for w in quantized_weights(module, precision("nvfp4-mlp"))}
    assert chosen and all(".mlp." in n for n in chosen)
    assert not any(".attn." in n or n.endswith(".mlp.gate") or n == "lm_head" for n in chosen)
    # 3 dense MLPs x 3 + 1 shared expert x 3 + 256 experts x 3 projections
    assert len(chosen) == 3 * 3 + 3 + 256 * 3
    assert precision("nvfp4-mlp").gemm == "fp4" and precision("nvfp4-mlp").kv_cache == "fp8"


def test_bad_precisions_are_one_line_errors_listing_what_is_valid():
    with pytest.raises(ConfigError, match="not both"):
        compose("fp16", "w4a16")
    with pytest.raises(UnknownNameError, match="Valid quantization recipes: fp8, int8, mxfp4-moe, mxfp8, nvfp4, nvfp4-mlp, w4a16"):
        compose("bf16", "w4a17")
    with pytest.raises(UnknownNameError, match="Valid kv-cache dtypes: bf16, fp16, fp32, fp4, fp8, int8"):
        compose("bf16", kv_cache="int4")
    with pytest.raises(UnknownNameError, match="Valid activations dtypes"):
        compose("bf16", activations="int4")  # no device multiplies int4 activations
    with pytest.raises(UnknownNameError, match="dtype or quantization recipe 'fp61'"):
        precision("fp61")
    for bad in ("w4a16,nvfp4", "weights=int4,weights=fp8", "colour=red", "", "x" * 500):
        with pytest.raises(ConfigError):
            precision(bad)


def test_w4a16_single_linear_reads_half_a_byte_per_weight_plus_scales():
    # acceptance: weight-only int4 on a 4096 x 4096 Linear. The weight is read at 4 bits = 4096·4096·0.5 B
    # plus one fp16 scale and one int4 zero point per 128 inputs: 4096 rows x 32 groups x 20 bits / 8
    [mm] = [op for op in _ops(LINEAR, Workload("forward", dtype="w4a16")) if op.category == "matmul"]
    x, w = mm.record.arg("self"), mm.record.arg("mat2")
    weight_bytes = 4096 * 4096 * 0.5 + 4096 * (4096 // 128) * (16 + 4) / 8
    assert weight_bytes == 8_388_608 + 327_680
    assert w.bytes == weight_bytes and w.shape == (4096, 4096)
    # the activation stays bf16: 8 x 4096 x 2 B; the output too
    assert x.bits == 16 and mm.cost.bytes_read == 8 * 4096 * 2 + weight_bytes
    assert mm.cost.bytes_written == 8 * 4096 * 2
    # FLOP: 2·M·K·N for the product, plus the dequantization (q − zero)·scale of every weight element
    # in the main loop: 2 per element per call
    assert mm.cost.flop == 2 * 8 * 4096 * 4096 + 2 * 4096 * 4096
    # no activation quantization under a weight-only recipe
    assert not [op for op in _ops(LINEAR, Workload("forward", dtype="w4a16")) if op.record.packet == "quant.quantize"]


def test_w8a8_quantizes_each_gemm_input_with_a_kernel_of_its_own():
    ops = _ops(LINEAR, Workload("forward", dtype="quant=int8"))
    quantize, mm = [op for op in ops if op.category != "view"]
    assert quantize.record.packet == "quant.quantize" and quantize.category == "elementwise"
    x_in, q_out = quantize.record.arg("input"), quantize.record.outputs[0]
    # reads x [8, 4096] at 16 bits; writes it at 8 bits plus one fp32 scale per token (row of 4096)
    assert quantize.cost.bytes_read == 8 * 4096 * 2
    assert quantize.cost.bytes_written == 8 * 4096 * 1 + 8 * 4 == 32_800
    # dynamic per-token scale: an amax compare and a scale multiply per element
    assert quantize.cost.flop == 2 * 8 * 4096
    # the GEMM reads the quantized copy (the same storage the quantize kernel wrote), not x
    a = mm.record.arg("self")
    assert a.storage == q_out.storage != x_in.storage and a.bits == 8 + 32 / 4096
    # weights: 8 bits + one fp32 scale per output channel (32/4096 bits per element); no dequant FLOP
    assert mm.cost.flop == 2 * 8 * 4096 * 4096
    assert mm.cost.bytes_read == 8 * 4096 * (8 + 32 / 4096) / 8 + 4096 * 4096 * (8 + 32 / 4096) / 8


def test_a_shared_gemm_input_is_quantized_once():
    # one llama layer, prefill: q, k, v read one normed input and gate, up another: 4 quantize kernels
    # (qkv, o, gate+up, down), none for the LM head (kept at bf16, as vLLM and ModelOpt keep it)
    model = resolve("llama-2-7b")
    model = replace(model, config=replace(model.config, num_layers=1))
    ops = _ops(model, Workload("prefill", 1, 32, dtype="quant=fp8"))
    quantized = [op for op in ops if op.record.packet == "quant.quantize"]
    assert len(quantized) == 4
    assert all(op.record.module.startswith("layers.0") for op in quantized)
    head = [op for op in ops if op.category == "matmul" and op.record.module == "lm_head"]
    assert head and all(t.bits == 16 for t in head[0].record.tensors())


def test_kv_cache_tensors_are_counted_at_the_kv_width():
    # nvfp4: FP8 KV cache. A decode step's attention reads K and V [1, 32, C + 1, 128] at 8 bits;
    # the query stays at the compute width (16 bits)
    model = resolve("llama-2-7b")
    model = replace(model, config=replace(model.config, num_layers=1))
    ops = _ops(model, Workload("decode", 1, context_len=255, dtype="nvfp4"))
    [attn] = [op for op in ops if op.category == "attention"]
    q, k, v = (attn.record.arg(n) for n in ("query", "key", "value"))
    assert (q.bits, k.bits, v.bits) == (16, 8, 8)
    assert k.bytes == 1 * 32 * 256 * 128 * 1
    # the cache write (copy_ of the new K, V) quantizes on the way in: 16-bit source, 8-bit destination
    writes = [op for op in ops if op.record.packet == "aten.copy_"]
    assert writes and all(op.record.arg("self").bits == 8 and op.record.arg("src").bits == 16 for op in writes)


def test_which_weights_a_recipe_quantizes():
    p = precision("w4a16")
    with torch.device("meta"):
        mixtral = resolve("mixtral-8x7b")
        module = replace(mixtral, config=replace(mixtral.config, num_layers=1)).build()
    names = {id(param): name for name, param in module.named_parameters()}
    quantized = {names[id(w)] for w in quantized_weights(module, p)}
    # every Linear weight of the layer, experts included; not the router, the LM head, norms, embeddings
    assert "layers.0.attn.q_proj.weight" in quantized and "layers.0.mlp.experts.7.down_proj.weight" in quantized
    assert "layers.0.mlp.gate.weight" not in quantized and "lm_head.weight" not in quantized
    assert not any("norm" in n or "embed" in n for n in quantized)
    assert quantized_weights(module, precision("bf16")) == ()


def test_parameter_bits_of_llama_2_7b_under_w4a16():
    # a layer: 4·4096² + 3·4096·11008 = 202,375,168 Linear weights at 4.15625 bits, 2·4096 norm weights at 16
    model = resolve("llama-2-7b")
    layer_bits, other_bits = parameter_bits(model, model.config, True, "w4a16")
    linear, norms = 4 * 4096**2 + 3 * 4096 * 11008, 2 * 4096
    assert layer_bits == pytest.approx((linear * 4.15625 + norms * 16) / (linear + norms), rel=1e-12)
    # outside the layers: embeddings, final norm and LM head stay bf16
    assert other_bits == 16


# Totals (FLOP, bytes read, bytes written, saved bytes) counted at commit 2dd08b0, before recipes
# existed: a plain dtype must give exactly these.
BEFORE = {
    ("gpt2", "decode", "bf16"): (516701184.0, 270251544.0, 950908.0, 0),
    ("gpt2", "decode", "fp16"): (516701184.0, 270251544.0, 950908.0, 0),
    ("gpt2", "decode", "fp8"): (516701184.0, 135125784.0, 476378.0, 0),
    ("gpt2", "training", "bf16"): (97316460160.0, 3711872036.0, 2865135916.0, 63975716.0),
    ("gpt2", "training", "fp8"): (97316460160.0, 3151849892.0, 2479599660.0, 44904740.0),
    ("vit-b-16", "forward", "fp8"): (35165177856.0, 123483112.0, 33438512.0, 0),
}
WORKLOADS = {"decode": Workload("decode", 2, context_len=300),
             # 16-bit weights with an fp32 master in the optimizer: the one way training ran before recipes
             "training": Workload("training", 2, 64, mixed_precision="master", optimizer="fused"),
             "forward": Workload("forward", 1)}


@pytest.mark.parametrize("case", sorted(BEFORE))
def test_plain_dtypes_count_exactly_as_before_recipes(case):
    model, mode, dtype = case
    wg = build_graph(resolve(model), replace(WORKLOADS[mode], dtype=dtype))
    total = count(wg.graph).total
    saved = sum(b for _, b in wg.graph.saved_bytes)
    assert (total.flop, total.bytes_read, total.bytes_written, saved) == BEFORE[case]
    assert not any(r.packet == "quant.quantize" for r in wg.graph.records)


def test_a_recipes_file_elsewhere_is_checked(tmp_path, monkeypatch):
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "hardware_specs" / "quant", specs / "quant")
    monkeypatch.setenv("PLANNER_HARDWARE_SPECS", str(specs))
    raw = json.loads((specs / "quant" / "recipes.json").read_text())
    raw["recipes"]["w2"] = {**raw["recipes"]["w4a16"], "source": "a test"}
    raw["recipes"]["w2"]["weights"] = {"dtype": "int4", "scales": {"granularity": "block", "block": 64, "scale": "fp16"}}
    (specs / "quant" / "recipes.json").write_text(json.dumps(raw))
    assert load_recipes().recipes["w2"].weight_bits(4096) == 4 + 16 / 64
    raw["recipes"]["w2"]["weights"]["scales"]["block"] = 0
    (specs / "quant" / "recipes.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="block must be a whole number"):
        load_recipes()
    raw["recipes"]["w2"]["weights"]["scales"]["block"] = 64
    del raw["recipes"]["w2"]["source"]
    (specs / "quant" / "recipes.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="no source"):
        load_recipes()
    (specs / "quant" / "recipes.json").write_text("{broken")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_recipes()
    # plain dtypes need no recipes file
    assert precision("fp16").plain


def test_compute_moves_every_part_at_the_recipes_16_bit_dtype():
    # quant=int8 (W8A8, BF16 everywhere else): compute=fp16 moves the unquantized tensors, the 16-bit KV cache and
    # attention to FP16 and leaves the INT8 weights, activations and GEMMs alone
    p = precision("quant=int8,compute=fp16")
    assert (p.weights, p.activations, p.gemm) == ("int8", "int8", "int8")
    assert (p.compute, p.kv_cache, p.attention) == ("fp16", "fp16", "fp16")
    assert p.name == "quant=int8,compute=fp16" and precision(p.name) == p
    # w4a16: weight-only, its GEMMs ran at the compute dtype and move with it
    assert precision("w4a16,compute=fp16").gemm == "fp16"
    with pytest.raises(ConfigError, match="plain dtype"):
        precision("bf16,compute=fp16")
    with pytest.raises(UnknownNameError, match="compute dtype"):
        precision("quant=int8,compute=int8")


def test_on_device_runs_a_bf16_recipe_in_fp16_where_there_is_no_bf16_and_refuses_what_no_kernel_runs():
    from planner.errors import UnsupportedError
    from planner.workload.quant import on_device

    t4 = ("fp64", "fp32", "fp16", "int8")  # T4's datasheet peaks: no BF16, no FP8
    name, note = on_device("quant=int8", t4, "t4")
    assert name == "quant=int8,compute=fp16" and "FP16" in note
    assert on_device("quant=int8", ("bf16", "fp16", "int8", "fp8")) == ("quant=int8", None)
    assert on_device("bf16", t4) == ("bf16", None)  # a plain dtype the user named is not re-typed
    with pytest.raises(UnsupportedError, match=r"runs no fp8 kernels .* recipes it runs: int8") as info:
        on_device("quant=fp8", t4, "t4")
    assert "\n" not in str(info.value) and "nvfp4" not in str(info.value).split("recipes it runs:")[1]


def _conv_7x7():
    # one nn.Conv2d(3 -> 64, 7x7, stride 2, padding 3), no bias, on x [2, 3, 224, 224] bf16: ResNet-50's stem
    return nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), (torch.randn(2, 3, 224, 224, dtype=torch.bfloat16),)


CONV = Model("conv-7x7", "custom", None, "tests", _conv_7x7)


def test_int8_quantizes_a_convolution_per_channel_with_a_static_per_tensor_input():
    # TensorRT's INT8 (recipes.json int8 `convolutions`): the weight [64, 3, 7, 7] is stored at 8 bits plus one fp32
    # scale per output channel over its 3 x 7 x 7 = 147 elements: 8 + 32/147 bits each; the input [2, 3, 224, 224]
    # gets one static scale: a quantize kernel reads it at 16 bits and writes it at 8, no scale bits, not dynamic
    ops = _ops(CONV, Workload("inference", 2, image_size=224, dtype="quant=int8"))
    quantize = [op for op in ops if op.record.packet == "quant.quantize"]
    conv = [op for op in ops if op.record.packet == "aten.convolution"]
    assert len(quantize) == 1 and len(conv) == 1
    x = 2 * 3 * 224 * 224
    assert quantize[0].cost.bytes_read == x * 2 and quantize[0].cost.bytes_written == x * 1
    assert quantize[0].record.arg("dynamic") is False
    weight = conv[0].record.arg("weight")
    assert weight.bits == pytest.approx(8 + 32 / 147)
    assert conv[0].record.arg("input").bits == 8
    from planner.predict.roofline import op_dtype

    assert op_dtype(conv[0].record, "quant=int8") == "int8"  # it runs at the device's INT8 peak
    # a recipe without `convolutions` (w4a16: Linear weights only) leaves the conv at the compute dtype
    plain = [op for op in _ops(CONV, Workload("inference", 2, image_size=224, dtype="w4a16"))
             if op.record.packet == "aten.convolution"]
    assert plain[0].record.arg("weight").bits == 16 and plain[0].record.arg("input").bits == 16


def test_quantized_conv_weights_take_one_scale_per_output_channel_in_memory_too():
    # parameter_bits (weight memory) uses the capture's rule: a conv weight [64, 3, 7, 7] has one fp32 scale per
    # output channel over 3 x 7 x 7 = 147 elements: 8 + 32/147 bits each (not 32/7 per element of the last dim)
    from planner.workload.quant import channel_elements, parameter_bits

    assert channel_elements(torch.empty(64, 3, 7, 7, device="meta")) == 147
    assert channel_elements(torch.empty(4096, 1024, device="meta")) == 1024
    _, outside = parameter_bits(CONV, None, False, "quant=int8")
    assert outside == pytest.approx(8 + 32 / 147)


def test_compose_takes_a_compute_override_with_other_flags():
    # what on_device writes ("quant=int8,compute=fp16") can come back as a --configs dtype with other parts
    assert compose("quant=int8,compute=fp16", kv_cache="fp8") == "quant=int8,kv=fp8,compute=fp16"
    assert precision("quant=int8,kv=fp8,compute=fp16").kv_cache == "fp8"


class _Stem(nn.Module):
    # ResNet's stem and a downsampling residual block, NCHW [1, 8, 16, 16] bf16:
    # conv 3x3 (8 -> 8) + BN + ReLU -> max pool 2x2 -> [1, 8, 8, 8] = x;
    # y = BN(conv1x1(x, 8 -> 16)) (main branch), s = BN(conv1x1(x, 8 -> 16)) (downsample); out = ReLU(y + s)
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.main = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16))
        self.down = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16))

    def forward(self, x):
        x = self.pool(self.stem(x))
        return torch.relu(self.main(x) + self.down(x))


STEM = Model("stem-block", "custom", None, "tests",
             lambda: (_Stem().eval(), (torch.randn(1, 8, 16, 16, dtype=torch.bfloat16),)))


def test_an_int8_network_stores_its_activations_at_8_bits_between_layers():
    # TensorRT's INT8 ResNet keeps every activation between layers in INT8 (NVIDIA/TensorRT trt-engine-explorer
    # resnet A100 qat-residual-qgap graph): the max pool runs on the quantized stem output (a quantization commutes
    # with max), both operands of the residual add are read quantized, and the downsample branch is quantized where
    # it is produced
    records = build_graph(STEM, Workload("inference", 1, dtype="quant=int8")).graph.records
    pool = next(r for r in records if r.packet == "aten.max_pool2d_with_indices")
    add = next(r for r in records if r.packet == "aten.add")
    quantize = [r for r in records if r.packet == "quant.quantize"]
    assert pool.arg("self").bits == 8 and pool.outputs[0].bits == 8  # [1, 8, 16, 16] in, [1, 8, 8, 8] out at 8 bits
    # four quantize kernels: the image (first conv), the stem output before the pool (moved in front of it), and
    # the add's two operands (the main branch's BN output and the downsample branch's); none after the pool
    assert len(quantize) == 4
    assert records.index(quantize[1]) < records.index(pool)
    assert all(t.bits == 8 for _, t in add.args if hasattr(t, "bits"))
    # the two 1x1 convs read the pooled tensor itself, already at 8 bits: 8 x 8 x 8 = 512 bytes each
    convs = [r for r in records if r.packet == "aten.convolution"]
    assert [c.arg("input").bits for c in convs] == [8, 8, 8]
    assert convs[1].arg("input").storage == pool.outputs[0].storage == convs[2].arg("input").storage
    # a training step's backward reads what autograd saved, at full width: nothing there reads a quantized copy
    train = build_graph(STEM, Workload("training", 1, dtype="quant=int8")).graph.records
    read_back = [t for r in train if r.phase == "backward" for t in r.tensors()
                 if t.dtype == "bfloat16" and t.shape == (1, 8, 16, 16)]  # the image and the stem's activations
    assert read_back and all(t.bits == 16 for t in read_back)
    # a recipe without `convolutions` (w4a16) moves nothing: the pool stays at 16 bits
    plain = build_graph(STEM, Workload("inference", 1, dtype="w4a16")).graph.records
    assert next(r for r in plain if r.packet == "aten.max_pool2d_with_indices").outputs[0].bits == 16
