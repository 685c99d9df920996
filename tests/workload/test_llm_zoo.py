"""The decoder LMs added in issue 16 (Qwen2.5, Qwen3, Qwen3-MoE, Gemma 2, Phi-3, DeepSeek-V3, gpt-oss,
Llama 4 Scout): built by planner's own decoder module, checked against Hugging Face transformers' modeling
code built from the same config.json on meta, against the published counts, and in closed form."""

from dataclasses import replace

import pytest
import torch

import planner_models
from planner.predict.memory import kv_bytes_per_token
from planner.workload.counting import count
from planner.workload.device_graph import device_graph
from planner.workload.graphs import Workload, build_graph
from planner.workload.zoo import resolve

NEW = ("qwen2.5-7b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b", "gemma-2-9b", "phi-3-mini", "deepseek-v3", "gpt-oss-20b",
       "llama-4-scout")

# (total, active) parameters; published figures, rounded as their sources round them:
# - Qwen2.5-7B: 7.61B, non-embedding 6.53B (huggingface.co/Qwen/Qwen2.5-7B model card)
# - Qwen3-8B: 8.2B, non-embedding 6.95B (huggingface.co/Qwen/Qwen3-8B); Qwen3-14B: 14.8B, non-embedding 13.2B
#   (huggingface.co/Qwen/Qwen3-14B)
# - Qwen3-32B: 32.8B, non-embedding 31.2B (huggingface.co/Qwen/Qwen3-32B)
# - Qwen3-30B-A3B: 30.5B total, 3.3B activated, non-embedding 29.9B (huggingface.co/Qwen/Qwen3-30B-A3B)
# - Gemma 2 9B: 917,504,000 embedding + 8,324,201,984 non-embedding (Gemma 2 report, arXiv 2408.00118, Table 2)
# - Phi-3-mini: 3.8B (arXiv 2404.14219)
# - DeepSeek-V3: 671B total, 37B activated per token (arXiv 2412.19437, abstract), without the 14B MTP module
# - gpt-oss-20b: 20.91B total, 3.61B active (gpt-oss model card, arXiv 2508.10925, Table 1: active excludes
#   the embedding table)
# - Llama 4 Scout: 17B active, 109B total with the vision encoder (ai.meta.com/blog/llama-4-multimodal-intelligence);
#   the text model built here is 107.77B
EXACT = {  # sum(p.numel()) of transformers' *ForCausalLM from the same config on meta (transformers 5.18)
    "qwen2.5-7b": 7_615_616_512, "qwen3-8b": 8_190_735_360, "qwen3-14b": 14_768_307_200, "qwen3-32b": 32_762_123_264, "qwen3-30b-a3b": 30_532_122_624,
    "gemma-2-9b": 9_241_705_984, "phi-3-mini": 3_821_079_552, "deepseek-v3": 671_026_404_352,
    "gpt-oss-20b": 20_914_757_184, "llama-4-scout": 107_769_861_120}
PUBLISHED = {"qwen2.5-7b": (7.61e9, 0.005), "qwen3-8b": (8.2e9, 0.005), "qwen3-14b": (14.8e9, 0.005), "qwen3-32b": (32.8e9, 0.005), "qwen3-30b-a3b": (30.5e9, 0.005),
             "gemma-2-9b": (917_504_000 + 8_324_201_984, 0.0), "phi-3-mini": (3.8e9, 0.01),
             "deepseek-v3": (671e9, 0.001), "gpt-oss-20b": (20.91e9, 0.001), "llama-4-scout": (109e9, 0.02)}


def test_qwen3_dense_parameters_in_closed_form():
    # per layer: q and o h*(heads*128) each, k and v h*(8*128) each, q/k norms 2*128, MLP 3*h*i, two norms 2*h;
    # plus embedding and untied head 2*151,936*h and the final norm h
    for model_id, h, i, heads, layers in (("qwen3-8b", 4096, 12288, 32, 36), ("qwen3-14b", 5120, 17408, 40, 40)):
        layer = 2 * h * heads * 128 + 2 * h * 8 * 128 + 2 * 128 + 3 * h * i + 2 * h
        # qwen3-8b: 2*4096*4096 + 2*4096*1024 + 256 + 3*4096*12288 + 8192 = 192,946,432; * 36 + 1,244,659,712 + 4096
        built = sum(p.numel() for p in _module(model_id).parameters())
        assert built == layers * layer + 2 * 151_936 * h + h == EXACT[model_id]


def _module(model_id: str):
    with torch.device("meta"):
        return resolve(model_id).build()


@pytest.mark.parametrize("model_id", NEW)
def test_parameters_equal_transformers_and_published(model_id):
    module = _module(model_id)
    total = sum(p.numel() for p in module.parameters())
    assert total == EXACT[model_id]
    published, rel = PUBLISHED[model_id]
    assert total == pytest.approx(published, rel=rel or 1e-12)


@pytest.mark.parametrize("model_id", ["qwen2.5-7b", "gemma-2-9b", "deepseek-v3", "gpt-oss-20b"])
def test_transformers_builds_the_same_count(model_id):
    # the library's own modeling code, from the same config.json, on meta: sum(p.numel()) is EXACT[model_id]
    transformers = pytest.importorskip("transformers")
    from planner_models.tv_ops import import_torchvision

    import_torchvision()  # transformers imports torchvision when it is installed
    raw = {k: v for k, v in planner_models.zoo_config(model_id).items() if not k.startswith("planner_")}
    config = transformers.CONFIG_MAPPING[raw.pop("model_type")](**raw)
    with torch.device("meta"):
        module = transformers.AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in module.parameters()) == EXACT[model_id]


def test_active_parameters_of_the_moe_models():
    # active = total - idle routed experts: Qwen3-30B-A3B 3.35B (published 3.3B); DeepSeek-V3 37.55B (37B);
    # gpt-oss-20b 4.19B with its 579M embedding table (3.61B without); Llama 4 Scout 17.17B (17B)
    for model_id, expected in (("qwen3-30b-a3b", 3_353_032_704), ("deepseek-v3", 37_552_282_624),
                               ("gpt-oss-20b", 4_187_440_704), ("llama-4-scout", 17_172_894_720)):
        assert EXACT[model_id] - _module(model_id).inactive_params() == expected
    embedding = 201_088 * 2880
    assert (4_187_440_704 - embedding) / 1e9 == pytest.approx(3.61, abs=0.005)


@pytest.mark.parametrize("s", [128, 4096])
def test_qwen2_5_7b_prefill_closed_form(run_captured, s):
    # per layer: q, o 3584x3584; k, v 3584x512; gate, up, down 3x3584x18944 = 233,046,016 weights;
    # x 28 = 6,525,288,448 (the non-embedding 6.53B less norms and biases). lm_head 3584x152064 at the last
    # position only; causal attention 2·28·S²·(28 heads x 128)
    expected = 2 * 6_525_288_448 * s + 2 * 3584 * 152_064 + 2 * 28 * s**2 * 3584
    _, counts = run_captured("qwen2.5-7b", mode="prefill", seq_len=s)
    assert counts.total.flop == pytest.approx(expected, rel=0.01)
    assert counts.unsupported == ()


@pytest.mark.parametrize("s", [128, 4096])
def test_gemma_2_9b_prefill_closed_form(run_captured, s):
    # per layer: q 3584x4096, k, v 3584x2048, o 4096x3584, gate, up, down 3x3584x14336 = 198,180,864;
    # x 42 = 8,323,596,288 (the published 8,324,201,984 non-embedding less 4 norms per layer and the final
    # one); the tied head 256000x3584 at the last position; attention 2·42·S²·(16 x 256); the 4096-token
    # sliding window does not bind at S <= 4096
    expected = 2 * 8_323_596_288 * s + 2 * 917_504_000 + 2 * 42 * s**2 * 4096
    _, counts = run_captured("gemma-2-9b", mode="prefill", seq_len=s)
    assert counts.total.flop == pytest.approx(expected, rel=0.01)
    assert counts.unsupported == ()


@pytest.mark.parametrize("model_id", NEW)
@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_every_layer_kind_is_fully_supported(model_id, mode):
    # the folded capture runs one layer of each distinct kind (dense and MoE, sliding and full, with and
    # without rotary positions): every op of every kind has a cost formula
    model = resolve(model_id)
    kinds = model.config.kinds
    distinct = tuple(dict.fromkeys(kinds))
    config = replace(model.config, num_layers=max(1, len(distinct)), kinds=distinct)
    w = Workload("prefill", 1, 16) if mode == "prefill" else Workload("decode", 2, context_len=64)
    counts = count(build_graph(replace(model, config=config), w).graph)
    assert counts.unsupported == ()
    assert counts.total.flop > 0


@pytest.mark.parametrize("model_id", ["qwen3-30b-a3b", "gemma-2-9b", "phi-3-mini"])
def test_training_steps_are_fully_supported(model_id):
    model = resolve(model_id)
    config = replace(model.config, num_layers=2, kinds=model.config.kinds[:2])
    counts = count(build_graph(replace(model, config=config), Workload("training", 1, 16)).graph)
    assert counts.unsupported == ()


def test_folded_graph_of_unlike_layers_equals_the_full_capture():
    # DeepSeek-V3 shrunk to 4 layers (1 dense + 3 MoE) and 8 experts: the folded graph (one layer of each
    # kind, weighted 1/4 and 3/4) totals exactly what the whole capture counts
    model = resolve("deepseek-v3")
    small = replace(model, config=replace(model.config, num_layers=4, kinds=("",) + ("moe",) * 3, num_experts=8,
                                          experts_per_token=2))
    w = Workload("prefill", 2, 32)
    folded = device_graph(small, w).total()
    whole = count(build_graph(small, w).graph).total
    assert folded.flop == pytest.approx(whole.flop, rel=1e-9)
    assert folded.bytes == pytest.approx(whole.bytes, rel=1e-9)


def test_deepseek_v3_caches_the_latent_not_per_head_keys():
    # MLA: each token stores kv_lora_rank + qk_rope_head_dim = 512 + 64 elements per layer: 61 x 576 x 2 B
    # = 70,272 B at bf16 (per-head K and V would be 61 x 2 x 128 x 192 x 2 B = 5,996,544 B)
    dg = device_graph(resolve("deepseek-v3"), Workload("decode", 1, context_len=128))
    assert kv_bytes_per_token(dg) == 61 * 576 * 2


def test_deepseek_v3_decode_attention_is_absorbed():
    # decode runs attention over the cached latent as one key/value head: q [B, 128, 1, 576] against
    # k [B, 1, P + 1, 576] (scores over 576 dims, values over the 512-dim latent)
    model = resolve("deepseek-v3")
    one = replace(model, config=replace(model.config, num_layers=1, kinds=("",)))
    wg = build_graph(one, Workload("decode", 1, context_len=1000))
    attention = [r for r in wg.graph.records if "attention" in r.op and "flash" in r.op]
    assert len(attention) == 1
    q, k = attention[0].arg("query").shape, attention[0].arg("key").shape
    assert q == (1, 128, 1, 576) and k == (1, 1, 1001, 576)


@pytest.mark.parametrize("model_id,window", [("gpt-oss-20b", 128), ("gemma-2-9b", 4096)])
def test_sliding_layers_cap_their_decode_cache(model_id, window):
    # half the layers attend to the last `window` keys: past the window only the full layers' reads grow
    model = resolve(model_id)
    two = replace(model, config=replace(model.config, num_layers=2, kinds=model.config.kinds[:2]))
    reads = {}
    for ctx in (window * 4, window * 8):
        graph = build_graph(two, Workload("decode", 1, context_len=ctx)).graph
        reads[ctx] = sum(r.arg("key").numel for r in graph.records if "flash" in r.op)
    assert reads[window * 4] == (window + window * 4 + 1) * model.config.num_kv_heads * model.config.head_dim
    assert reads[window * 8] - reads[window * 4] == window * 4 * model.config.num_kv_heads * model.config.head_dim


def test_gemma_2_has_four_norms_per_layer_and_softcapped_logits():
    module = _module("gemma-2-9b")
    layer = module.layers[0]
    norms = [name for name, m in layer.named_children() if isinstance(m, torch.nn.RMSNorm)]
    assert len(norms) == 4
    graph = build_graph(resolve("gemma-2-9b"), Workload("prefill", 1, 8)).graph
    assert any(r.packet == "aten.tanh" and r.module == "" for r in graph.records)


def test_llama4_config_is_read_through_its_text_config():
    raw = {"model_type": "llama4", "text_config": dict(planner_models.zoo_config("llama-4-scout"))}
    family, config = planner_models.parse(raw, "llama4.json")
    assert family == "decoder" and config == resolve("llama-4-scout").config


@pytest.mark.parametrize("field,value,expect", [("layer_types", ["full_attention"], "layer_types"),
                                               ("num_experts_per_tok", 64, "num_experts_per_tok")])
def test_malformed_new_configs_name_the_field(field, value, expect):
    raw = dict(planner_models.zoo_config("gpt-oss-20b"), **{field: value})
    with pytest.raises(planner_models.ConfigFieldError, match=expect):
        planner_models.parse(raw, "gpt-oss.json")


def test_folded_parameters_of_unlike_layers_add_up():
    # the mean layer x 61 + embedding + head = the model: DeepSeek-V3's 3 dense and 58 MoE layers
    dg = device_graph(resolve("deepseek-v3"), Workload("prefill", 1, 16))
    total = dg.first.params + dg.layer.params * dg.num_layers + dg.last.params
    assert total == pytest.approx(EXACT["deepseek-v3"], rel=1e-12)
    assert dg.last.params == 129_280 * 7168 + 7168  # lm_head and the final norm


def test_gpt_oss_native_mxfp4_experts_weigh_4_25_bits():
    # experts: 24 layers x 32 x 3 x 2880 x 2880 = 19,110,297,600 weights at 4 + 8/32 bits; everything else
    # (20,914,757,184 - 19,110,297,600 = 1,804,459,584 parameters) at 16 bits
    from planner.predict.memory import weight_bytes
    dg = device_graph(resolve("gpt-oss-20b"), Workload("prefill", 1, 16, dtype="mxfp4-moe"))
    expected = 19_110_297_600 * 4.25 / 8 + 1_804_459_584 * 2
    assert weight_bytes(dg, 0) == pytest.approx(expected, rel=1e-3)
