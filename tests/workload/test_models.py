"""The zoo: exact parameter counts, every config parses, modules run on real tensors, KV cache."""

import json

import pytest
import torch

import planner_models
from planner.errors import ConfigError
from planner.workload.graphs import Workload, build_graph
from planner.workload.zoo import resolve
from planner_models.decoder import DecoderLM, balanced_counts

# Published parameter counts (Hugging Face model cards / torchvision), exact.
EXACT_PARAMS = {
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496,
    "mixtral-8x7b": 46_702_792_704,
    "bert-base": 109_482_240,
    "bert-large": 335_141_888,
    "resnet50": 25_557_032,
    "vit-b-16": 86_567_656,
    "gpt2": 124_439_808,
}


def _params(model_id: str) -> int:
    with torch.device("meta"):
        module = resolve(model_id).build()
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("model_id,expected", sorted(EXACT_PARAMS.items()))
def test_parameter_count_is_exact(model_id, expected):
    assert _params(model_id) == expected


def test_gpt3_within_half_a_percent_of_175e9():
    # 96 layers x 12·12288² + embeddings ≈ 174.6e9
    assert abs(_params("gpt-3-175b") - 175e9) / 175e9 < 0.005


def test_llama_2_7b_parameters_in_closed_form():
    # embed 32000·4096 + 32·(4·4096² + 3·4096·11008 + 2·4096) + 4096 + lm_head 32000·4096
    expected = 32000 * 4096 + 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 4096 + 32000 * 4096
    assert expected == 6_738_415_616 == _params("llama-2-7b")


def test_mixtral_active_parameters():
    # total less the 6 unrouted experts of 32 layers: 3·4096·14336 = 176,160,768 each
    wg = build_graph(resolve("mixtral-8x7b"), Workload("decode", context_len=16))
    assert wg.active_params == 46_702_792_704 - 32 * 6 * 176_160_768 == 12_879_925_248


def test_every_zoo_config_carries_a_source_and_date():
    for model_id in planner_models.zoo_ids():
        raw = planner_models.zoo_config(model_id)
        assert raw["planner_source"], model_id
        assert len(raw["planner_date"]) == 10, model_id


def test_the_zoo_has_the_required_ids():
    required = {"gpt2", "gpt-j-6b", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b",
                "llama-3.1-405b", "mistral-7b", "mixtral-8x7b", "gpt-3-175b", "bert-base", "bert-large",
                "resnet50", "vit-b-16"}
    assert required <= set(planner_models.zoo_ids())


def test_hf_config_file_resolves_like_the_zoo(tmp_path):
    path = tmp_path / "config.json"
    raw = planner_models.zoo_config("llama-2-7b")
    path.write_text(json.dumps(raw))
    with torch.device("meta"):
        module = resolve(str(path)).build()
    assert sum(p.numel() for p in module.parameters()) == 6_738_415_616


FALCON_7B = {"model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 4544,
             "num_attention_heads": 71, "num_hidden_layers": 32, "vocab_size": 65024, "multi_query": True,
             "parallel_attn": True, "new_decoder_architecture": False, "bias": False, "alibi": False}


def test_a_falcon_config_is_a_generative_decoder_of_6_92e9_parameters(tmp_path):
    # tiiuae/falcon-7b: embeddings 65024·4544 (tied to the head); per layer a fused q|k|v of 71 query heads and one
    # shared K/V head of 64 (4544·(4544 + 2·64)), the output 4544², a 4 x 4544 GELU MLP (2·4544·18176) and one
    # LayerNorm (2·4544) read by attention and MLP in parallel; a final LayerNorm: 6,921,720,704 ("7B", 6.92e9)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(FALCON_7B))
    model = resolve(str(path))
    assert model.family == "decoder" and (model.config.num_kv_heads, model.config.head_dim) == (1, 64)
    layer = 4544 * (4544 + 2 * 64) + 4544**2 + 2 * 4544 * 18176 + 2 * 4544
    expected = 65024 * 4544 + 32 * layer + 2 * 4544
    assert expected == 6_921_720_704
    wg = build_graph(model, Workload("decode", context_len=16))  # generative: a decode step on a KV cache
    assert wg.params == expected and wg.workload.context_len == 16


@pytest.mark.parametrize("field", ["new_decoder_architecture", "alibi"])
def test_a_falcon_layout_not_modelled_is_refused_naming_the_field(tmp_path, field):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**FALCON_7B, field: True}))
    with pytest.raises(ConfigError, match=f"field '{field}' is true .* which is not modelled; valid: false"):
        resolve(str(path))


@pytest.mark.parametrize("raw,field", [
    ({"model_type": "llama", "hidden_size": 64}, "num_attention_heads"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 3, "num_hidden_layers": 1,
      "intermediate_size": 8, "vocab_size": 10}, "num_attention_heads"),
    ({"model_type": "gpt2", "n_embd": -1, "n_head": 1, "n_layer": 2, "vocab_size": 10}, "n_embd"),
    ({"model_type": "gpt2", "n_embd": 64}, "vocab_size', 'n_layer', 'n_head"),
    ({"model_type": "not_a_model_type"}, "model_type"),  # t5 now builds through transformers' own code
    ({"model_type": "resnet", "depths": [3, 4], "hidden_sizes": [256]}, "hidden_sizes"),
])
def test_malformed_config_names_the_field(tmp_path, raw, field):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=f"'{field}'"):
        resolve(str(path))


def test_balanced_routing_split():
    # 2 routed rows over 8 experts: two experts get 1 row, six get none
    assert balanced_counts(2, 8) == [1, 1, 0, 0, 0, 0, 0, 0]
    assert sum(balanced_counts(1000, 8)) == 1000


def _tiny(model_type: str, **extra) -> dict:
    base = {"llama": dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, intermediate_size=48),
            "gpt2": dict(vocab_size=97, n_embd=32, n_layer=2, n_head=4, n_positions=64),
            "gptj": dict(vocab_size=97, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64),
            "mixtral": dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, intermediate_size=48, num_local_experts=4,
                            num_experts_per_tok=2)}[model_type]
    return {"model_type": model_type, **base, **extra}


@pytest.mark.parametrize("model_type", ["llama", "gpt2", "gptj"])
def test_kv_cache_decode_matches_full_forward(model_type):
    # The logits of the last token are the same whether it is decoded on a cache or run in a prefill.
    torch.manual_seed(0)
    _, cfg = planner_models.parse(_tiny(model_type), "tiny")
    model = DecoderLM(cfg).eval()
    ids = torch.randint(0, 97, (2, 9))
    with torch.no_grad():
        full = model(ids, all_logits=False)
        cache = model.new_kv_cache(2, 9, torch.float32, "cpu")
        model(ids[:, :8], kv_cache=cache, position=0, all_logits=False)
        step = model(ids[:, 8:], kv_cache=cache, position=8, all_logits=False)
    torch.testing.assert_close(step, full, rtol=1e-4, atol=1e-4)


def test_real_moe_forward_runs_and_has_the_right_shape():
    _, cfg = planner_models.parse(_tiny("mixtral"), "tiny")
    model = DecoderLM(cfg).eval()
    with torch.no_grad():
        out = model(torch.randint(0, 97, (3, 5)))
    assert out.shape == (3, 5, 97)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("model_id,shape", [("resnet50", (1, 3, 64, 64)), ("vit-b-16", (1, 3, 224, 224))])
def test_vision_models_run_on_real_tensors(model_id, shape):
    torch.manual_seed(0)
    model = resolve(model_id).build().eval()
    with torch.no_grad():
        out = model(torch.randn(shape))
    assert out.shape == (1, 1000) and torch.isfinite(out).all()


def test_bert_runs_on_real_tensors():
    model = resolve("bert-base").build().eval()
    with torch.no_grad():
        seq, pooled = model(torch.randint(0, 30522, (2, 16)))
    assert seq.shape == (2, 16, 768) and pooled.shape == (2, 768)
