"""Diffusion models of builder "diffusers" (models/diffusion.py): exact parameters against diffusers and
transformers modules built directly from the same configs and against published counts, the SD-1.5 UNet's
FLOP against BK-SDM's published MACs, the stable-diffusion-1.5 pipeline in closed form, every op costed."""

import pytest
import torch

import planner_models
from planner.errors import ConfigError
from planner.workload.capture import capture
from planner.workload.counting import count
from planner.workload.graphs import Workload, build_graph
from planner.workload.zoo import resolve
from planner_models import diffusion

IDS = ("sd-1.5-unet", "stable-diffusion-1.5", "sdxl-base-1.0", "dit-xl-2-256", "flux.1-dev")
SMALL = {"stable-diffusion-1.5": dict(steps=2), "sdxl-base-1.0": dict(image_size=256, steps=2),
         "flux.1-dev": dict(image_size=256)}
"""Workload sizes that keep the capture short where a test needs no default size (parameters do not
depend on them)."""


def _libraries():
    from planner_models.tv_ops import import_torchvision

    try:
        import_torchvision()
    except ImportError:
        pass
    import diffusers
    import transformers

    return diffusers, transformers


def _direct_modules(model_id: str) -> list[torch.nn.Module]:
    """The model's components built straight from its zoo JSON by diffusers and transformers, on meta."""
    diffusers, transformers = _libraries()
    raw = planner_models.zoo_config(model_id)
    d = raw["denoiser"]
    cls = diffusers.DiTTransformer2DModel if d["_class_name"] == "Transformer2DModel" else getattr(diffusers, d["_class_name"])
    with torch.device("meta"):
        modules = [cls.from_config(d)]
        for e in raw.get("text_encoders", []):
            kept = {k: v for k, v in e.items() if k not in ("architectures", "model_type", "torch_dtype",
                                                             "transformers_version", "_name_or_path")}
            modules.append(getattr(transformers, e["architectures"][0])(transformers.CLIPTextConfig(**kept)))
        if "vae" in raw:
            modules.append(diffusers.AutoencoderKL.from_config(raw["vae"]))
    return modules


@pytest.fixture(scope="module")
def graphs():
    """Forward graphs at batch 1 of every new zoo id, and their counts."""
    out = {}
    for model_id in IDS:
        wg = build_graph(resolve(model_id), Workload("forward", 1, **SMALL.get(model_id, {})))
        out[model_id] = (wg, count(wg.graph))
    return out


@pytest.fixture(scope="module")
def unet_b2():
    return count(build_graph(resolve("sd-1.5-unet"), Workload("forward", 2)).graph)


@pytest.fixture(scope="module")
def pipeline_10_20():
    """The stable-diffusion-1.5 pipeline at 10 and 20 steps."""
    return {n: count(build_graph(resolve("stable-diffusion-1.5"), Workload("forward", 1, steps=n)).graph)
            for n in (10, 20)}


# ------------------------------------------------------------------ parameters

@pytest.mark.parametrize("model_id", IDS)
def test_parameters_equal_the_libraries_own_modules(graphs, model_id):
    wg, _ = graphs[model_id]
    assert wg.params == sum(sum(p.numel() for p in m.parameters()) for m in _direct_modules(model_id))


def test_published_parameter_counts(graphs):
    # SD-1.5 UNet: 859,520,964, diffusers' ModelMixin.num_parameters docstring
    # (github.com/huggingface/diffusers/blob/v0.42.1/src/diffusers/models/modeling_utils.py) and BK-SDM's
    # count_macs_params.py log ("[U-Net] Params: 859.5M = 859520964", "[Text Enc] Params: 123.1M = 123060480",
    # github.com/Nota-NetsPresso/BK-SDM/issues/53)
    assert graphs["sd-1.5-unet"][0].params == 859_520_964
    sd = graphs["stable-diffusion-1.5"][0].param_by_top
    assert sd["unet"] == 859_520_964 and sd["text_encoder"] == 123_060_480
    # the whole AutoencoderKL is resident (its encoder never runs in text-to-image): 83,653,863
    assert sd["vae"] == 83_653_863
    # SDXL UNet: 2,567,463,684 (the "2.6B" UNet of the SDXL report, arXiv:2307.01952, Table 1; the exact sum of
    # stabilityai/stable-diffusion-xl-base-1.0's unet weights); its two text encoders 123,060,480 + 694,659,840
    xl = graphs["sdxl-base-1.0"][0].param_by_top
    assert xl["unet"] == 2_567_463_684
    assert xl["text_encoder"] + xl["text_encoder_2"] == 817_720_320
    # FLUX.1-dev: "a 12 billion parameter rectified flow transformer" (huggingface.co/black-forest-labs/FLUX.1-dev)
    assert graphs["flux.1-dev"][0].params == 11_901_408_320


def test_dit_parameters_reconcile_with_the_paper(graphs):
    # DiT-XL/2 has 675M parameters (Peebles & Xie, arXiv:2212.09748, Table 1); facebookresearch/DiT's train.py
    # logs sum(p.numel()) = 675,129,632, which includes the fixed sin-cos position table (256 x 1152) that
    # diffusers keeps as a buffer. diffusers' DiTTransformer2DModel gives each of the 28 blocks its own
    # timestep embedder (256 -> 1152 -> 1152) and class table (1001 x 1152); the original shares one.
    per_block = (256 * 1152 + 1152) + (1152 * 1152 + 1152) + 1001 * 1152
    assert per_block == 2_777_472
    assert graphs["dit-xl-2-256"][0].params == 675_129_632 - 256 * 1152 + 27 * per_block == 749_826_464


# ------------------------------------------------------------------ FLOP against published figures

def _thop_macs(c) -> float:
    """What thop 0.1.1 counts of a graph: Conv2d and Linear multiply-adds (bias not counted) and LayerNorm at
    4 per element (normalize and affine, 2 each); GroupNorm, F.scaled_dot_product_attention and elementwise
    functions have no module hook there."""
    gemm = sum(o.cost.flop for o in c.ops if o.category in ("conv", "matmul"))
    layer_norm = sum(o.record.arg("input").numel for o in c.ops if o.record.packet == "aten.native_layer_norm")
    return gemm / 2 + 4 * layer_norm


def test_sd15_unet_flop_matches_bk_sdm(graphs):
    # BK-SDM (Kim et al., arXiv:2305.15798) counts the SD-v1.4 U-Net (the v1.5 architecture) at 339G MACs:
    # src/count_macs_params.py runs thop 0.1.1 on unet(latents [1, 4, 64, 64], t, text [1, 77, 768]): one call,
    # batch 1, a 512 x 512 image, no CFG; its log prints "[U-Net] MACs: 338.7G = 338749194240"
    # (github.com/Nota-NetsPresso/BK-SDM/issues/53). thop hooks nn.Modules: Conv2d and Linear multiply-adds
    # (no bias) and LayerNorm at 4 per element; GroupNorm and F.scaled_dot_product_attention are not counted.
    _, c = graphs["sd-1.5-unet"]
    assert _thop_macs(c) == 338_749_194_240  # exact: the same convolutions, linears and layer norms
    # attention, in closed form: each transformer block runs self-attention over S = h·w tokens and
    # cross-attention over 77 text tokens, 4·S·(S + 77)·C FLOP (QKᵀ and PV), 5 blocks at each of 64², 32²
    # and 16² latent pixels (C = 320, 640, 1280) and one at 8² (C = 1280)
    attention = sum(n * 4 * ch * (s * s + 77 * s) for n, s, ch in
                    ((5, 4096, 320), (5, 1024, 640), (5, 256, 1280), (1, 64, 1280)))
    assert attention == 126_052_270_080
    assert sum(o.cost.flop for o in c.ops if o.category == "attention") == attention
    published = 2 * 338_749_194_240 + attention  # 803.55 GFLOP
    assert abs(c.total.flop - published) / published < 0.05
    assert c.total.flop == pytest.approx(804.06e9, rel=1e-4)
    # NVIDIA's TensorRT talk "Stable Diffusion 推理加速技巧解析" (sgpjbg.com/bgdown/155314.html) gives
    # 1.67952e12 FLOP for the UNet on 2 rows (CFG) at 64 x 64 latents: 839.76 GFLOP a row, attention included
    assert abs(c.total.flop - 1.67952e12 / 2) / (1.67952e12 / 2) < 0.05


def test_dit_flop_matches_the_paper(graphs):
    # DiT-XL/2 at 256 x 256 (32 x 32 latents, 256 tokens): 118.6 Gflops (arXiv:2212.09748, Table 4), counted
    # as multiply-adds: 28 x 256 x 12 x 1152² linear MACs + attention = 118.6e9
    _, c = graphs["dit-xl-2-256"]
    assert abs(c.total.flop / 2 - 118.6e9) / 118.6e9 < 0.01


# ------------------------------------------------------------------ the pipeline in closed form

def _counts_of(fn):
    return count(capture(lambda cap: fn(), torch.bfloat16, 16, "bf16"))


def test_pipeline_steps_count_linearly(pipeline_10_20, unet_b2):
    # one step: the UNet on 2 rows (CFG), the guidance combine (3 elementwise ops) and PNDM's PLMS update
    # (12 elementwise ops) on the [1, 4, 64, 64] latents
    step = unet_b2.total.flop + 15 * 4 * 64 * 64
    assert pipeline_10_20[20].total.flop - pipeline_10_20[10].total.flop == pytest.approx(10 * step, rel=1e-12)


def test_pipeline_in_closed_form(pipeline_10_20, unet_b2):
    # FLOP(N steps) = N x (UNet at batch 2 + 15 elementwise ops on the latents) + text encoder on 2 prompts
    # (cond + empty negative) + latents / scaling_factor + VAE decode + (x / 2 + 0.5).clamp(0, 1)
    diffusers, transformers = _libraries()
    raw = planner_models.zoo_config("stable-diffusion-1.5")
    with torch.device("meta"):
        text = _direct_modules("stable-diffusion-1.5")[1].to(torch.bfloat16)
        vae = diffusers.AutoencoderKL.from_config(raw["vae"]).to(torch.bfloat16)
    ids = torch.empty((2, 77), dtype=torch.long, device="meta")
    latents = torch.empty((1, 4, 64, 64), dtype=torch.bfloat16, device="meta")
    with torch.no_grad():
        encode_counts, decode_counts = _counts_of(lambda: text(ids)), _counts_of(lambda: vae.decode(latents))
    # BK-SDM's thop log (github.com/Nota-NetsPresso/BK-SDM/issues/53): "[Text Enc] MACs: 6.5G = 6545882112" a
    # prompt, "[Img Dec] MACs: 1240.1G = 1240079532032" for vae.decoder on [1, 4, 64, 64]; vae.decode adds
    # post_quant_conv, a 1 x 1 convolution 4 -> 4 over 64 x 64 latents
    assert _thop_macs(encode_counts) == 2 * 6_545_882_112
    assert _thop_macs(decode_counts) == 1_240_079_532_032 + 4 * 4 * 64 * 64
    encode, decode = encode_counts.total.flop, decode_counts.total.flop
    c = pipeline_10_20[10]
    expected = 10 * (unet_b2.total.flop + 15 * 4 * 64 * 64) + encode + 4 * 64 * 64 + decode + 3 * 3 * 512 * 512
    assert c.total.flop == pytest.approx(expected, rel=1e-12)
    by_part: dict[str, float] = {}
    for o in c.ops:
        part = o.record.module.split(".")[0]
        by_part[part] = by_part.get(part, 0.0) + o.cost.flop
    assert by_part["unet"] == pytest.approx(10 * unet_b2.total.flop, rel=1e-12)
    assert by_part["text_encoder"] == pytest.approx(encode, rel=1e-12)


def test_sdxl_guidance_doubles_the_unet_rows_only(graphs):
    # SDXL zeroes the negative prompt's embeddings (force_zeros_for_empty_prompt): the encoders see B
    # prompts, the UNet 2B rows
    wg, c = graphs["sdxl-base-1.0"]
    rows = {o.record.module.split(".")[0]: o.record.arg("query").shape[0] for o in c.ops if o.category == "attention"}
    assert rows["text_encoder"] == rows["text_encoder_2"] == 1 and rows["unet"] == 2
    assert wg.workload.steps == 2 and wg.workload.image_size == 256


# ------------------------------------------------------------------ every op costed

@pytest.mark.parametrize("model_id", IDS)
def test_forward_has_no_unsupported_op(graphs, model_id):
    assert graphs[model_id][1].unsupported == ()


def test_unet_training_step_has_no_unsupported_op():
    wg = build_graph(resolve("sd-1.5-unet"), Workload("training", 1, image_size=256))
    c = count(wg.graph)
    assert c.unsupported == ()
    assert {r.phase for r in wg.graph.records} == {"forward", "backward", "optimizer"}
    assert any(r.packet == "aten.mse_loss" for r in wg.graph.records)


# ------------------------------------------------------------------ sizes, modes and bad configs

def test_defaults_are_the_pipelines():
    for model_id, image, steps in (("stable-diffusion-1.5", 512, 50), ("sdxl-base-1.0", 1024, 50)):
        sizes = resolve(model_id).config.sizes(Workload("forward", 1))
        assert sizes == {"image_size": image, "steps": steps, "seq_len": 77}
    assert resolve("dit-xl-2-256").config.sizes(Workload("forward")) == {"image_size": 256, "steps": None,
                                                                         "seq_len": None}


@pytest.mark.parametrize("model_id,workload,message", [
    ("stable-diffusion-1.5", Workload("training", 1), "does not train"),
    ("sd-1.5-unet", Workload("forward", 1, steps=4), "steps applies to pipelines"),
    ("sd-1.5-unet", Workload("forward", 1, image_size=100), "multiple of 8"),
    ("dit-xl-2-256", Workload("forward", 1, image_size=264), "multiple of 16"),
    ("flux.1-dev", Workload("forward", 1, image_size=1032), "multiple of 16"),
    ("stable-diffusion-1.5", Workload("forward", 1, seq_len=100), "seq_len must be 77"),
])
def test_impossible_workloads_are_config_errors(model_id, workload, message):
    with pytest.raises(ConfigError, match=message):
        build_graph(resolve(model_id), workload)


@pytest.mark.parametrize("change,field", [
    ({"pipeline": "video"}, "'pipeline'"),
    ({"denoiser": {"_class_name": "UNet3DConditionModel"}}, "'denoiser._class_name'"),
    ({"text_encoders": []}, "'text_encoders'"),
    ({"scheduler": {"_class_name": "LCMScheduler"}}, "'scheduler._class_name'"),
    ({"num_inference_steps": 0}, "'num_inference_steps'"),
    ({"guidance_scale": "high"}, "'guidance_scale'"),
    ({"image_size": 516}, "'image_size'"),
    ({"vae": {"_class_name": "AutoencoderKL", "layers_per_block": 10**6}}, "'vae.layers_per_block'"),
])
def test_bad_fields_are_named(change, field):
    raw = dict(planner_models.zoo_config("stable-diffusion-1.5"), **change)
    with pytest.raises(ValueError, match=field):
        diffusion.parse(raw, "test")


# ------------------------------------------------------------------ real tensors

TINY_UNET = {"_class_name": "UNet2DConditionModel", "block_out_channels": [32, 64], "layers_per_block": 1,
             "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"], "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"],
             "cross_attention_dim": 32, "attention_head_dim": 8, "norm_num_groups": 8, "sample_size": 8}
TINY_CLIP = {"architectures": ["CLIPTextModel"], "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
             "num_hidden_layers": 2, "max_position_embeddings": 77, "vocab_size": 1000, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1}
TINY_VAE = {"_class_name": "AutoencoderKL", "block_out_channels": [32, 32], "down_block_types": ["DownEncoderBlock2D"] * 2,
            "up_block_types": ["UpDecoderBlock2D"] * 2, "latent_channels": 4, "layers_per_block": 1, "norm_num_groups": 8}


@pytest.mark.parametrize("pipeline,scheduler", [("stable-diffusion", "PNDMScheduler"),
                                                ("stable-diffusion-xl", "EulerDiscreteScheduler")])
def test_a_tiny_pipeline_generates_images_on_real_tensors(pipeline, scheduler):
    unet = dict(TINY_UNET)
    encoders = [TINY_CLIP]
    if pipeline == "stable-diffusion-xl":
        unet.update(addition_embed_type="text_time", addition_time_embed_dim=8, projection_class_embeddings_input_dim=80,
                    cross_attention_dim=64)
        encoders = [TINY_CLIP, dict(TINY_CLIP, architectures=["CLIPTextModelWithProjection"], projection_dim=32)]
    raw = {"pipeline": pipeline, "denoiser": unet, "text_encoders": encoders, "vae": TINY_VAE,
           "scheduler": {"_class_name": scheduler}, "num_inference_steps": 3, "guidance_scale": 5.0,
           "force_zeros_for_empty_prompt": pipeline == "stable-diffusion-xl", "image_size": 32}
    cfg = diffusion.parse(raw, "tiny")
    torch.manual_seed(0)
    module = cfg.build().eval()
    w = Workload("forward", 2, image_size=32, seq_len=77, steps=3)
    args, kwargs, labels = cfg.inputs(module, w, "cpu", torch.float32)
    with torch.no_grad():
        image = module(*args, **kwargs)
    assert image.shape == (2, 3, 32, 32) and labels is None
    assert torch.isfinite(image).all() and 0 <= image.min() and image.max() <= 1


def test_a_config_the_library_refuses_is_a_value_error():
    raw = dict(planner_models.zoo_config("sd-1.5-unet"))
    raw["denoiser"] = dict(raw["denoiser"], down_block_types=["NoSuchBlock2D"] * 4)
    cfg = diffusion.parse(raw, "test")
    with pytest.raises(ValueError, match="could not build this denoiser config"), torch.device("meta"):
        cfg.build()
