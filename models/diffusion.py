"""Builder "diffusers" (family "diffusion"): Stable Diffusion 1.5 and SDXL UNets, DiT and Flux transformers,
their VAEs and CLIP text encoders, built by diffusers' and transformers' own classes from the config dicts
a zoo JSON file carries (copied from the model repositories' config.json files), on the current default
device (meta when counting). Attention runs through F.scaled_dot_product_attention (diffusers'
AttnProcessor2_0, transformers' "sdpa"), which the capture records as the fused kernel.

A config.json:
    {"planner_builder": "diffusers",
     "pipeline": "denoiser" | "stable-diffusion" | "stable-diffusion-xl",
     "denoiser": {"_class_name": "UNet2DConditionModel", ...},     the denoiser's config.json
     "text_encoders": [{"architectures": ["CLIPTextModel"], ...}],  pipelines: each text encoder's config.json
     "vae": {"_class_name": "AutoencoderKL", ...},                  pipelines: the VAE's config.json
     "scheduler": {"_class_name": "PNDMScheduler", ...},            pipelines: scheduler_config.json
     "num_inference_steps": 50, "guidance_scale": 7.5,              pipelines: the pipeline's call defaults
     "force_zeros_for_empty_prompt": true,                          SDXL: model_index.json's flag
     "image_size": 512,                                             default image side in pixels
     "vae_scale_factor": 8,                                         bare denoisers: pixels per latent
     "text_len": 77}                                                tokens of the text conditioning

Workloads: a bare denoiser's forward is one denoiser call on latents [B, C, H/8, W/8] (and its text or
class conditioning); its training step is one denoising step of the diffusers training scripts (MSE of
the noise prediction against the target noise). A pipeline's forward generates B images: the text
encoders once, `steps` denoising steps (classifier-free guidance doubles the UNet's batch), one VAE decode
(planner_models.diffusion_pipelines). Pipelines do not train.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .library import require

PIPELINES = ("denoiser", "stable-diffusion", "stable-diffusion-xl")
"""What a config runs: one denoiser call, or a text-to-image pipeline."""
DENOISERS = ("UNet2DConditionModel", "DiTTransformer2DModel", "Transformer2DModel", "FluxTransformer2DModel")
"""diffusers classes a denoiser may be (Transformer2DModel with norm_type ada_norm_zero is DiT)."""
ENCODERS = {"stable-diffusion": ("CLIPTextModel",), "stable-diffusion-xl": ("CLIPTextModel", "CLIPTextModelWithProjection"),
            "denoiser": ()}
"""transformers classes of each pipeline's text encoders, in order."""
SCHEDULERS = ("PNDMScheduler", "EulerDiscreteScheduler")
"""Schedulers whose update is modelled (planner_models.diffusion_pipelines.SCHEDULERS)."""
MAX_INT = 2**20
"""Largest integer inside a component config (vocabularies are 49,408; channel counts a few thousand)."""
MAX_DEPTH_FIELDS = {"layers_per_block": 16, "num_layers": 128, "num_single_layers": 128, "num_hidden_layers": 128,
                    "transformer_layers_per_block": 64}
"""Fields that set how many blocks are built and captured, with their limits."""


def _fail(field: str, why: str) -> ValueError:
    return ValueError(f"field '{field}' {why}")


def _int(raw: dict, field: str, default: Any = ..., low: int = 1, high: int = 10000) -> int:
    value = raw.get(field, default)
    if value is ...:
        raise _fail(field, "is missing")
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _fail(field, f"must be an integer from {low} to {high:,}, got {str(value)[:40]!r}")
    return value


def _check_component(value: Any, field: str, depth: int = 0) -> None:
    """Reject component configs that are not plain JSON of sane size (each integer at most MAX_INT, lists of
    at most 16 entries, block counts within MAX_DEPTH_FIELDS)."""
    if depth > 3:
        raise _fail(field, "nests too deep")
    if isinstance(value, dict):
        for key, item in value.items():
            limit = MAX_DEPTH_FIELDS.get(key)
            for n in (item if isinstance(item, list) else [item]):
                if limit is not None and isinstance(n, int) and not 0 <= n <= limit:
                    raise _fail(f"{field}.{key}", f"must be from 0 to {limit}, got {n}")
            _check_component(item, f"{field}.{key}", depth + 1)
    elif isinstance(value, list):
        if len(value) > 16:
            raise _fail(field, f"has {len(value)} entries; at most 16")
        for item in value:
            _check_component(item, field, depth + 1)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if abs(value) > MAX_INT:
            raise _fail(field, f"is {value:,}, above the limit of {MAX_INT:,}")
    elif isinstance(value, str):
        if len(value) > 200:
            raise _fail(field, "is a string of more than 200 characters")
    elif not isinstance(value, float):
        raise _fail(field, f"has a value of type {type(value).__name__}")


def _component(raw: dict, field: str, key: str, valid: tuple[str, ...]) -> str:
    """The JSON text of component `field` after checking its class (`key`: "_class_name" or "architectures")."""
    value = raw.get(field)
    if not isinstance(value, dict):
        raise _fail(field, f"must be an object (a {', '.join(valid)} config.json)")
    name = value.get(key)
    name = name[0] if key == "architectures" and isinstance(name, list) and len(name) == 1 else name
    if name not in valid:
        raise _fail(f"{field}.{key}", f"is {str(name)[:60]!r}; valid: {', '.join(valid)}")
    _check_component(value, field)
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True, slots=True)
class DiffusionConfig:
    """A parsed diffusers config: component configs as JSON text (the dataclass stays hashable)."""

    pipeline: str
    denoiser: str
    text_encoders: tuple[str, ...]
    vae: str | None
    scheduler: str | None
    steps: int | None
    """Default denoising steps (pipelines)."""
    guidance_scale: float
    """Classifier-free guidance when above 1 (diffusers' do_classifier_free_guidance)."""
    force_zeros_for_empty_prompt: bool
    image_size: int
    """Default image side in pixels."""
    vae_scale_factor: int
    """Image pixels per latent pixel: 2 ** (VAE blocks - 1)."""
    text_len: int
    """Tokens of the text conditioning (CLIP: 77)."""
    family: str = "diffusion"

    @property
    def repeats(self) -> bool:
        """Pipelines take `repeat=` (their denoising loop is captured once and counted `steps` times)."""
        return self.pipeline != "denoiser"

    def component(self, text: str) -> dict:
        """A component config as a dict."""
        return json.loads(text)

    @property
    def kind(self) -> str:
        """The denoiser's kind: "unet", "dit" or "flux"."""
        name = self.component(self.denoiser)["_class_name"]
        return {"UNet2DConditionModel": "unet", "FluxTransformer2DModel": "flux"}.get(name, "dit")

    @property
    def image_multiple(self) -> int:
        """Image sides must be a multiple of this many pixels: the VAE's factor, times the patch size of a
        transformer (Flux packs 2 x 2 latent pixels per token)."""
        d = self.component(self.denoiser)
        patch = {"unet": 1, "flux": 2, "dit": d.get("patch_size") or 2}[self.kind]
        return self.vae_scale_factor * patch

    # ------------------------------------------------------------------ the library contract

    def build(self) -> nn.Module:
        """The bare diffusers denoiser, or the pipeline module, on the current default device; ValueError
        when diffusers or transformers refuse a component config."""
        from .tv_ops import prepare

        prepare()  # transformers and diffusers import torchvision where it is installed
        diffusers = require("diffusers", "the diffusers builder")
        _quiet_empty_fp32_warning()
        try:
            return self._build(diffusers)
        # what the libraries raise on a config they cannot build (a bad field type or size, a missing key,
        # an unsupported option), turned into the one ValueError the library contract promises
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, NotImplementedError) as exc:
            raise ValueError(f"diffusers/transformers could not build this {self.pipeline} config: "
                             f"{type(exc).__name__}: {str(exc)[:300]}") from None

    def _build(self, diffusers) -> nn.Module:
        d = self.component(self.denoiser)
        cls = getattr(diffusers, "DiTTransformer2DModel" if self.kind == "dit" else d["_class_name"])
        denoiser = cls.from_config(d)
        if self.pipeline == "denoiser":
            return denoiser
        transformers = require("transformers", "the diffusers builder's text encoders")
        encoders = []
        for text in self.text_encoders:
            c = self.component(text)
            name = c.pop("architectures")[0]
            meta = ("model_type", "torch_dtype", "transformers_version")  # file metadata, not architecture
            config = transformers.CLIPTextConfig(**{k: v for k, v in c.items() if k not in meta and k[0] != "_"})
            config._attn_implementation = "sdpa"
            encoders.append(getattr(transformers, name)(config))
        vae_cfg = self.component(self.vae)
        vae = diffusers.AutoencoderKL.from_config(vae_cfg)
        from .diffusion_pipelines import StableDiffusion, StableDiffusionXL

        kw = dict(scheduler=self.component(self.scheduler)["_class_name"], steps=self.steps,
                  guidance_scale=self.guidance_scale, scaling_factor=vae.config.scaling_factor)
        if self.pipeline == "stable-diffusion":
            return StableDiffusion(encoders[0], denoiser, vae, **kw)
        return StableDiffusionXL(encoders[0], encoders[1], denoiser, vae,
                                 force_zeros_for_empty_prompt=self.force_zeros_for_empty_prompt, **kw)

    def sizes(self, workload) -> dict:
        """{"image_size": pixels, "steps": denoising steps (None for a bare denoiser), "seq_len": tokens of
        the text conditioning (None for class-conditional DiT)}; ValueError naming the field otherwise."""
        if workload.mode == "training" and self.pipeline != "denoiser":
            raise ValueError(f"mode 'training': a {self.pipeline} pipeline generates images and does not train; "
                             "train its bare denoiser (e.g. sd-1.5-unet) or use --mode inference")
        image = workload.image_size or self.image_size
        multiple = self.image_multiple
        if image % multiple:
            raise ValueError(f"image_size must be a multiple of {multiple} pixels (the VAE's factor "
                             f"{self.vae_scale_factor}{' times the patch size' if multiple != self.vae_scale_factor else ''}); "
                             f"got {image}")
        if self.pipeline == "denoiser":
            if workload.steps is not None:
                raise ValueError("steps applies to pipelines (a bare denoiser runs one call); "
                                 "use a pipeline such as stable-diffusion-1.5")
            steps = None
        else:
            steps = workload.steps or self.steps
        seq = workload.seq_len
        if self.kind == "dit":
            if seq is not None:
                raise ValueError("seq_len does not apply: DiT is class-conditional (no text)")
        elif self.pipeline != "denoiser" and seq not in (None, self.text_len):
            raise ValueError(f"seq_len must be {self.text_len} (prompts are padded to the text encoder's "
                             f"{self.text_len} positions); got {seq}")
        else:
            seq = seq or self.text_len
        return {"image_size": image, "steps": steps, "seq_len": seq}

    def inputs(self, module: nn.Module, workload, device, dtype: torch.dtype):
        """(args, kwargs, labels) of one forward: a bare denoiser's inputs (labels: the target noise in
        training), or a pipeline's prompt ids, initial latents [B, C, h, w] and timestep."""
        b, latent = workload.batch, workload.image_size // self.vae_scale_factor
        meta = torch.device(device).type == "meta"

        def floats(*shape: int, dt: torch.dtype = dtype) -> torch.Tensor:
            return torch.empty(shape, dtype=dt, device=device) if meta else torch.randn(shape, dtype=dt, device=device)

        def ids(*shape: int, high: int) -> torch.Tensor:
            return torch.empty(shape, dtype=torch.long, device=device) if meta else torch.randint(0, high, shape, device=device)

        training = workload.mode == "training"
        if self.pipeline != "denoiser":
            d = module.unet.config  # the built module's config: every default filled in
            guidance = self.guidance_scale > 1
            encode = 2 * b if guidance and not (self.pipeline == "stable-diffusion-xl" and self.force_zeros_for_empty_prompt) else b
            vocab = module.text_encoder.config.vocab_size
            args = [ids(encode, self.text_len, high=vocab), floats(b, d["in_channels"], latent, latent),
                    floats(dt=torch.float32)]
            if self.pipeline == "stable-diffusion-xl":
                args.append(floats((2 if guidance else 1) * b, 6))
            return tuple(args), {"steps": workload.steps}, None
        d = module.config
        timestep = ids(b, high=1000)
        if self.kind == "unet":
            x = floats(b, d["in_channels"], latent, latent)
            kwargs = {"encoder_hidden_states": floats(b, workload.seq_len, d["cross_attention_dim"]), "return_dict": False}
            if d.get("addition_embed_type") == "text_time":
                pooled = d["projection_class_embeddings_input_dim"] - 6 * d["addition_time_embed_dim"]
                kwargs["added_cond_kwargs"] = {"text_embeds": floats(b, pooled), "time_ids": floats(b, 6)}
            target = floats(b, d.get("out_channels") or d["in_channels"], latent, latent) if training else None
            return (x, timestep), kwargs, target
        if self.kind == "dit":
            x = floats(b, d["in_channels"], latent, latent)
            kwargs = {"class_labels": ids(b, high=d.get("num_embeds_ada_norm") or 1000), "return_dict": False}
            return (x, timestep), kwargs, floats(b, d["in_channels"], latent, latent) if training else None
        tokens = (latent // 2) ** 2  # Flux: 2 x 2 latent pixels of 16 channels packed into one 64-wide token
        x = floats(b, tokens, d["in_channels"])
        kwargs = {"encoder_hidden_states": floats(b, workload.seq_len, d["joint_attention_dim"]),
                  "pooled_projections": floats(b, d["pooled_projection_dim"]), "timestep": floats(b, dt=torch.float32),
                  "img_ids": floats(tokens, 3, dt=torch.float32), "txt_ids": floats(workload.seq_len, 3, dt=torch.float32),
                  "return_dict": False}
        if d.get("guidance_embeds"):
            kwargs["guidance"] = floats(b, dt=torch.float32)
        return (x,), kwargs, floats(b, tokens, d.get("out_channels") or d["in_channels"]) if training else None

    def loss(self, output, labels: torch.Tensor) -> torch.Tensor:
        """The diffusers training scripts' objective: MSE in fp32 between the noise prediction (DiT's first
        `in_channels` outputs: the learned variance is not in it) and the target noise; a 0-d tensor."""
        pred = output[0] if isinstance(output, (tuple, list)) else output
        if pred.dim() == 4 and pred.shape[1] != labels.shape[1]:
            pred = pred[:, :labels.shape[1]]
        return F.mse_loss(pred.float(), labels.float())


class _EmptyFp32Warning(logging.Filter):
    """Drops diffusers' ModelMixin.to() warning about fp32 modules when there are none ("...: []")."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "should be kept in float32: []" not in record.getMessage()


def _quiet_empty_fp32_warning() -> None:
    log = logging.getLogger("diffusers.models.modeling_utils")
    if not any(isinstance(f, _EmptyFp32Warning) for f in log.filters):
        log.addFilter(_EmptyFp32Warning())


def parse(raw: dict[str, Any], origin: str) -> DiffusionConfig:
    """Parse a builder "diffusers" config.json; ValueError naming the field and the valid values."""
    pipeline = raw.get("pipeline")
    if pipeline not in PIPELINES:
        raise _fail("pipeline", f"is {str(pipeline)[:40]!r}; valid: {', '.join(PIPELINES)}")
    denoiser = _component(raw, "denoiser", "_class_name", DENOISERS if pipeline == "denoiser" else ("UNet2DConditionModel",))
    d = json.loads(denoiser)
    if d["_class_name"] == "Transformer2DModel" and d.get("norm_type") != "ada_norm_zero":
        raise _fail("denoiser.norm_type", f"is {d.get('norm_type')!r}; a Transformer2DModel denoiser must be DiT "
                    "(ada_norm_zero)")
    if pipeline == "stable-diffusion-xl" and d.get("addition_embed_type") != "text_time":
        raise _fail("denoiser.addition_embed_type", "must be 'text_time' for a stable-diffusion-xl pipeline")
    valid = ENCODERS[pipeline]
    encoders = raw.get("text_encoders", [])
    if not isinstance(encoders, list) or len(encoders) != len(valid):
        raise _fail("text_encoders", f"must list {len(valid)} text encoder config(s) for pipeline {pipeline}"
                    + (f" ({', '.join(valid)})" if valid else ""))
    texts = tuple(_component({"text_encoders": e}, "text_encoders", "architectures", (name,))
                  for e, name in zip(encoders, valid))
    vae = scheduler = None
    steps = vae_factor = None
    if pipeline != "denoiser":
        vae = _component(raw, "vae", "_class_name", ("AutoencoderKL",))
        blocks = json.loads(vae).get("block_out_channels", [64])
        vae_factor = 2 ** (len(blocks) - 1) if isinstance(blocks, list) and blocks else 1
        scheduler = _component(raw, "scheduler", "_class_name", SCHEDULERS)
        steps = _int(raw, "num_inference_steps")
    guidance = raw.get("guidance_scale", 1.0)
    if isinstance(guidance, bool) or not isinstance(guidance, (int, float)) or not 0 <= guidance <= 100:
        raise _fail("guidance_scale", f"must be a number from 0 to 100, got {str(guidance)[:40]!r}")
    zeros = raw.get("force_zeros_for_empty_prompt", False)
    if not isinstance(zeros, bool):
        raise _fail("force_zeros_for_empty_prompt", f"must be true or false, got {str(zeros)[:40]!r}")
    vae_factor = vae_factor or _int(raw, "vae_scale_factor", 8, high=64)
    image = _int(raw, "image_size", high=8192)
    config = DiffusionConfig(pipeline=pipeline, denoiser=denoiser, text_encoders=texts, vae=vae, scheduler=scheduler,
                             steps=steps, guidance_scale=float(guidance), force_zeros_for_empty_prompt=zeros,
                             image_size=image, vae_scale_factor=vae_factor, text_len=_int(raw, "text_len", 77, high=4096))
    for text in texts:
        positions = json.loads(text).get("max_position_embeddings", 77)
        if config.text_len > positions:
            raise _fail("text_len", f"is {config.text_len}, above the text encoders' {positions} positions")
    if image % config.image_multiple:
        raise _fail("image_size", f"must be a multiple of {config.image_multiple} pixels, got {image}")
    return config
