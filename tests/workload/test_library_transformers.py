"""Models built by transformers' own modeling code (models/transformers_hf.py): Whisper large-v3 and CLIP
ViT-L/14 from their config.json (huggingface.co/openai/whisper-large-v3 and
huggingface.co/openai/clip-vit-large-patch14), and the generic path for model types planner's own parsers do
not know.

Published sizes: whisper-large-v3 "1.54B params" (its model card), 1,543,490,560 as transformers counts it;
CLIP ViT-L/14 "428M params" (its model card), 427,616,513 as transformers counts it.
"""

import json

import pytest
import torch

import planner_models
from planner.errors import ConfigError
from planner.workload.counting import count
from planner.workload.graphs import Workload, build_graph
from planner.workload.zoo import Model, resolve
from planner_models import transformers_hf

transformers = pytest.importorskip("transformers")


def _fields(model_id: str) -> dict:
    return {k: v for k, v in planner_models.zoo_config(model_id).items() if not k.startswith("planner_")}


def _numel(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.fixture(scope="module")
def whisper():
    return build_graph(resolve("whisper-large-v3"), Workload("forward", 1))


@pytest.fixture(scope="module")
def clip():
    return build_graph(resolve("clip-vit-l-14"), Workload("forward", 2))


@pytest.fixture(scope="module")
def clip_training():
    return build_graph(resolve("clip-vit-l-14"), Workload("training", 2))


def test_whisper_parameters_are_transformers_own(whisper):
    with torch.device("meta"):
        direct = transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(**_fields("whisper-large-v3")))
    assert whisper.params == _numel(direct) == 1_543_490_560
    assert whisper.model.family == "speech"


def test_clip_parameters_are_transformers_own(clip):
    with torch.device("meta"):
        direct = transformers.CLIPModel(transformers.CLIPConfig(**_fields("clip-vit-l-14")))
    assert clip.params == _numel(direct) == 427_616_513
    assert clip.param_by_top == {"text_model": 123_060_480, "vision_model": 303_179_776,
                                 "visual_projection": 786_432, "text_projection": 589_824, "": 1}


def test_every_op_has_a_formula(whisper, clip, clip_training):
    for wg in (whisper, clip, clip_training):
        assert count(wg.graph).unsupported == ()


def test_whisper_runs_30_seconds_of_audio_and_224_decoder_tokens(whisper):
    assert whisper.workload.seq_len == 224
    attention = [r for r in whisper.graph.records if r.packet == "aten._scaled_dot_product_flash_attention"]
    shapes = [(bool(r.arg("is_causal")), r.arg("query").shape[2], r.arg("key").shape[2]) for r in attention]
    # 32 encoder layers over 1500 frames (3000 mel frames, stride 2), 32 decoder layers: causal self-attention
    # over the 224 tokens and cross-attention to the 1500 encoder frames
    assert shapes.count((False, 1500, 1500)) == 32
    assert shapes.count((True, 224, 224)) == 32
    assert shapes.count((False, 224, 1500)) == 32
    assert len(shapes) == 96


def test_clip_runs_both_towers(clip, clip_training):
    assert (clip.workload.seq_len, clip.workload.image_size) == (77, 224)
    attention = [r for r in clip.graph.records if r.packet == "aten._scaled_dot_product_flash_attention"]
    # 12 causal text layers over 77 tokens, 24 vision layers over 16 x 16 patches + the class token
    assert sum(1 for r in attention if r.arg("is_causal") and r.arg("query").shape[2] == 77) == 12
    assert sum(1 for r in attention if not r.arg("is_causal") and r.arg("query").shape[2] == 257) == 24
    # the contrastive loss: a cross entropy each way over the 2 x 2 image-text logits
    losses = [r for r in clip_training.graph.records if r.packet == "aten.nll_loss_forward"]
    assert [r.arg("self").shape for r in losses] == [(2, 2), (2, 2)]


def test_a_whisper_training_step_is_counted():
    wg = build_graph(resolve("whisper-large-v3"), Workload("training", 1, seq_len=16))
    assert count(wg.graph).unsupported == ()
    assert [r.packet for r in wg.graph.records if r.phase == "backward" and "nll_loss" in r.packet] == \
        ["aten.nll_loss_backward"]


@pytest.mark.parametrize("model_id,workload,message", [
    ("whisper-large-v3", Workload("forward", 1, seq_len=449), "above the 448 positions"),
    ("whisper-large-v3", Workload("forward", 1, image_size=224), "image_size does not apply"),
    ("clip-vit-l-14", Workload("forward", 1, image_size=336), "image_size must be 224"),
    ("clip-vit-l-14", Workload("forward", 1, seq_len=78), "above the 77 positions"),
])
def test_impossible_sizes_are_refused(model_id, workload, message):
    with pytest.raises(ConfigError, match=message):
        build_graph(resolve(model_id), workload)


PHI = {"model_type": "phi", "architectures": ["PhiForCausalLM"], "hidden_size": 64, "intermediate_size": 256,
       "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000, "max_position_embeddings": 256}
FALCON = {"model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "vocab_size": 1000}
GPT2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": 2, "n_head": 4,
        "vocab_size": 1000, "n_positions": 256}
ROBERTA = {"model_type": "roberta", "architectures": ["RobertaForMaskedLM"], "hidden_size": 64,
           "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
           "max_position_embeddings": 130}


@pytest.mark.parametrize("raw,auto", [(PHI, "AutoModelForCausalLM"), (FALCON, "AutoModelForCausalLM"),
                                      (GPT2, "AutoModelForCausalLM"), (ROBERTA, "AutoModel")])
def test_a_generic_config_counts_like_transformers(tmp_path, raw, auto):
    cfg = transformers_hf.parse_generic(json.loads(json.dumps(raw)), "config.json")
    assert cfg.family == "text"
    model = Model(name=raw["model_type"], family=cfg.family, config=cfg, source="config.json")
    fields = {k: v for k, v in raw.items() if k != "model_type"}
    with torch.device("meta"):
        direct = getattr(transformers, auto).from_config(transformers.AutoConfig.for_model(raw["model_type"], **fields))
    for mode in ("forward", "training"):
        wg = build_graph(model, Workload(mode, 2))
        assert wg.params == _numel(direct)
        assert wg.workload.seq_len == 128
        assert count(wg.graph).unsupported == ()
    # the same config through a file naming the builder
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(raw, planner_builder="transformers")))
    assert resolve(str(path)).config == cfg


@pytest.mark.parametrize("raw,message", [
    ({"model_type": "qwen2_moe", "num_experts": 8}, "data-dependent MoE routing cannot run on meta tensors"),
    ({"model_type": "vit"}, "no text model in transformers"),
    ({"model_type": "no-such-model"}, "one of transformers'"),
    ({"model_type": 3}, "field 'model_type' is 3"),
    (dict(PHI, num_hidden_layers=1000), "'num_hidden_layers' must be an integer from 0 to 256"),
    (dict(PHI, vocab_size=2**30), "'vocab_size' must be an integer from 0 to 4,194,304"),
    (dict(PHI, hidden_size=64.0), "'hidden_size' must be an integer"),
    (dict(PHI, rope_theta=float("inf")), "'rope_theta' must be a finite number"),
    (dict(PHI, extra={"a": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}), "nested deeper than 16"),
    ([PHI], "must be a JSON object"),
])
def test_bad_generic_configs_are_refused_in_one_line(raw, message):
    with pytest.raises(ValueError, match=message) as info:
        transformers_hf.parse_generic(raw, "config.json")
    assert "\n" not in str(info.value)


def test_a_moe_module_is_refused_even_without_the_expert_field():
    # the routing is detected in the built module too (here a field name the parser does not check)
    raw = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 64,
           "intermediate_size": 128, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64,
           "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
    cfg = transformers_hf.parse_generic(raw, "config.json")  # num_experts left to transformers' default (60)
    with torch.device("meta"), pytest.raises(ValueError, match="mixture of experts .*Qwen2MoeSparseMoeBlock"):
        cfg.build()


def test_transformers_gpt2_trains_with_its_head_its_dropout_and_its_python_gelu():
    # GPT2LMHeadModel (the type's causal LM class, not named *ForCausalLM) keeps its tied head: the loss reads
    # logits [2, 128, 1000]; in training its three dropouts of p = 0.1 (embeddings; after attention and after
    # the MLP, per layer: 1 + 2·2 = 5) run as native_dropout kernels, and its gelu_new is transformers' Python
    # formula (0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x^3)))): one tanh per layer
    cfg = transformers_hf.parse_generic(json.loads(json.dumps(GPT2)), "config.json")
    assert cfg.architecture == "causal_lm"
    model = Model(name="gpt2", family=cfg.family, config=cfg, source="config.json")
    wg = build_graph(model, Workload("training", 2))
    fwd = [r for r in wg.graph.records if r.phase == "forward"]
    assert [r.packet for r in fwd].count("aten.native_dropout") == 5
    assert [r.packet for r in fwd].count("aten.tanh") == 2
    [nll] = [r for r in fwd if r.packet == "aten.nll_loss_forward"]
    assert nll.arg("self").shape == (2 * 128, 1000)
