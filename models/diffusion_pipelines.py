"""Text-to-image pipelines as nn.Modules, for counting: text encoding, the denoising loop and the VAE decode
that diffusers' StableDiffusionPipeline and StableDiffusionXLPipeline run to generate an image, built from
diffusers' and transformers' own modules (planner_models.diffusion builds them from config dicts).

forward(prompt_ids, latents, timestep, [time_ids,] steps=None, repeat=None) runs each text encoder once, then
one denoising step inside `repeat(steps)` (planner/workload/capture.py's Capture.repeat: the step runs once on
meta and is counted `steps` times, every step being the same ops on the same shapes), then the VAE decode.
It returns the decoded images [B, 3, H, W] in [0, 1].

One step, as the pipelines' loop runs it (guidance on: classifier-free guidance doubles the batch):
  x = cat([latents, latents])                 the unconditional and conditional rows
  x = scheduler.scale_model_input(x, t)       Euler: x / sqrt(sigma^2 + 1); PNDM: identity
  eps = denoiser(x, t, text embeddings...)    one UNet call on 2B rows
  eps = eps_u + g * (eps_c - eps_u)           3 elementwise ops on B rows
  latents = scheduler.step(eps, t, latents)   the scheduler's elementwise update (SCHEDULERS)
The schedulers' state from earlier steps (PNDM's last three noise predictions) is allocated once
before the loop (torch.empty_like on meta: no work; zeros on a real device).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn

SCHEDULERS = {
    "PNDMScheduler": "PLMS steady state (diffusers PNDMScheduler.step_plms, skip_prk_steps, 4 or more past "
                     "predictions): eps' = (55 e0 - 59 e1 + 37 e2 - 9 e3) / 24, then _get_prev_sample: "
                     "x' = a x - b eps' / c: 12 elementwise ops on the latents",
    "EulerDiscreteScheduler": "diffusers EulerDiscreteScheduler.step with s_churn = 0: upcast to fp32, "
                              "x0 = x - sigma eps, d = (x - x0) / sigma, x' = x + d dt, cast back: 6 elementwise "
                              "ops and 2 casts, after scale_model_input's x / sqrt(sigma^2 + 1) on the 2B rows",
}
"""Schedulers whose per-step update is modelled, and what one step runs."""


def _no_repeat(count: int):
    return contextlib.nullcontext()


def scale_model_input(scheduler: str, x: torch.Tensor) -> torch.Tensor:
    """The scheduler's input scaling of the denoiser's input `x` (same shape and dtype)."""
    if scheduler == "EulerDiscreteScheduler":
        return x / ((14.6**2 + 1) ** 0.5)  # sigma of the first step of a 1000-step schedule
    return x


def scheduler_step(scheduler: str, sample: torch.Tensor, eps: torch.Tensor, history: list[torch.Tensor]) -> torch.Tensor:
    """One scheduler update: the next latents [B, C, h, w] from `sample` and the guided noise prediction
    `eps` (same shape); `history` holds PNDM's three earlier predictions. The coefficients stand for the
    schedule's per-step values: each is one elementwise multiply whatever its value, so the counted work
    does not depend on them."""
    if scheduler == "PNDMScheduler":
        e1, e2, e3 = history
        eps = (1 / 24) * (55 * eps - 59 * e1 + 37 * e2 - 9 * e3)
        return 1.01 * sample - 0.002 * eps / 0.9
    if scheduler == "EulerDiscreteScheduler":
        x = sample.to(torch.float32)
        sigma, dt = 14.6, -0.3
        x0 = x - sigma * eps
        derivative = (x - x0) / sigma
        return (x + derivative * dt).to(eps.dtype)
    raise ValueError(f"scheduler {scheduler!r} is not modelled; valid: {', '.join(SCHEDULERS)}")


class _Pipeline(nn.Module):
    """Shared denoising loop and decode of the text-to-image pipelines."""

    def __init__(self, unet: nn.Module, vae: nn.Module, scheduler: str, steps: int, guidance_scale: float,
                 scaling_factor: float):
        super().__init__()
        self.unet, self.vae = unet, vae
        # steps: the default number of denoising steps (a forward's `steps` overrides it)
        self.scheduler, self.steps, self.scaling_factor = scheduler, steps, scaling_factor
        self.guidance_scale = guidance_scale
        self.guidance = guidance_scale > 1  # diffusers: do_classifier_free_guidance

    def denoise(self, latents: torch.Tensor, timestep: torch.Tensor, steps: int | None, repeat: Callable | None,
                **cond) -> torch.Tensor:
        """The denoising loop: `steps` identical steps (counted through `repeat`; without it one step runs);
        returns the final latents."""
        # PNDM's earlier predictions: allocated without work on meta, zeros on a real device
        fresh = torch.empty_like if latents.is_meta else torch.zeros_like
        history = [fresh(latents) for _ in range(3)] if self.scheduler == "PNDMScheduler" else []
        with (repeat or _no_repeat)(steps or self.steps):
            x = torch.cat([latents, latents]) if self.guidance else latents
            x = scale_model_input(self.scheduler, x)
            eps = self.unet(x, timestep, return_dict=False, **cond)[0]
            if self.guidance:
                uncond, text = eps.chunk(2)
                eps = uncond + self.guidance_scale * (text - uncond)
            latents = scheduler_step(self.scheduler, latents, eps, history)
        return latents

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """VAE decode of [B, C, h, w] latents into images [B, 3, 8h, 8w] in [0, 1] (the pipeline's
        `latents / scaling_factor`, vae.decode, and the image processor's denormalize)."""
        image = self.vae.decode(latents / self.scaling_factor, return_dict=False)[0]
        return (image / 2 + 0.5).clamp(0, 1)


class StableDiffusion(_Pipeline):
    """StableDiffusionPipeline: one CLIP text encoder (its last hidden state), a UNet, a VAE."""

    def __init__(self, text_encoder: nn.Module, unet: nn.Module, vae: nn.Module, **kw):
        super().__init__(unet, vae, **kw)
        self.text_encoder = text_encoder

    def forward(self, prompt_ids: torch.Tensor, latents: torch.Tensor, timestep: torch.Tensor,
                steps: int | None = None, repeat: Callable | None = None) -> torch.Tensor:
        """prompt_ids [2B, 77] under guidance (the prompts, then the empty negative prompts: encode_prompt
        runs the encoder on each; one call on 2B rows is the same work), else [B, 77]; latents [B, 4, h, w];
        timestep a 0-d tensor. Returns images [B, 3, 8h, 8w]."""
        text = self.text_encoder(prompt_ids)[0]
        if self.guidance:
            cond, uncond = text.chunk(2)
            text = torch.cat([uncond, cond])
        return self.decode(self.denoise(latents, timestep, steps, repeat, encoder_hidden_states=text))


class StableDiffusionXL(_Pipeline):
    """StableDiffusionXLPipeline: two CLIP text encoders (penultimate hidden states concatenated; the pooled
    projection of the second), a UNet with added time and text embeddings, a VAE."""

    def __init__(self, text_encoder: nn.Module, text_encoder_2: nn.Module, unet: nn.Module, vae: nn.Module,
                 force_zeros_for_empty_prompt: bool = True, **kw):
        super().__init__(unet, vae, **kw)
        self.text_encoder, self.text_encoder_2 = text_encoder, text_encoder_2
        self.force_zeros = force_zeros_for_empty_prompt

    def forward(self, prompt_ids: torch.Tensor, latents: torch.Tensor, timestep: torch.Tensor,
                time_ids: torch.Tensor, steps: int | None = None, repeat: Callable | None = None) -> torch.Tensor:
        """prompt_ids [B, 77] (or [2B, 77] under guidance without force_zeros_for_empty_prompt: the empty
        negative prompts are encoded too); latents [B, 4, h, w]; timestep 0-d; time_ids [B', 6] for the rows
        the UNet runs (original size, crop, target size). Returns images [B, 3, 8h, 8w]."""
        first = self.text_encoder(prompt_ids, output_hidden_states=True)
        second = self.text_encoder_2(prompt_ids, output_hidden_states=True)
        text = torch.cat([first.hidden_states[-2], second.hidden_states[-2]], dim=-1)
        pooled = second.text_embeds
        if self.guidance and self.force_zeros:  # the pipeline's zeros for an empty negative prompt
            text = torch.cat([torch.zeros_like(text), text])
            pooled = torch.cat([torch.zeros_like(pooled), pooled])
        elif self.guidance:
            cond, uncond = text.chunk(2)
            text = torch.cat([uncond, cond])
            cond, uncond = pooled.chunk(2)
            pooled = torch.cat([uncond, cond])
        added = {"text_embeds": pooled, "time_ids": time_ids}
        return self.decode(self.denoise(latents, timestep, steps, repeat, encoder_hidden_states=text,
                                        added_cond_kwargs=added))
