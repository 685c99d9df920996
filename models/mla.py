"""Multi-head latent attention (DeepSeek-V2/V3, arXiv 2405.04434 section 2.1), as serving engines run it.

Keys and values are compressed into one latent per token, c = norm(W_dkv x) [kv_lora_rank], beside one
rotary key shared by the heads, k_r [qk_rope_head_dim]: the KV cache holds [c | k_r] (576 elements per
token and layer for DeepSeek-V3), not per-head keys and values.
- Prefill (several new tokens): the latent is expanded to per-head keys and values by kv_b_proj and
  attention runs over them (q, k [B, H, S, nope + rope], v [B, H, S, v_head_dim]).
- Decode (one new token on a filled cache): the expansion is absorbed into the query and the output
  (vLLM's and SGLang's MLA decode): q_lat = q_nope W_uk [B, H, 1, kv_lora_rank], attention over the cached
  [c | k_r] as one key/value head (the values are the latent part), then W_uv maps each head's output to
  v_head_dim. Per step this reads the cache once instead of expanding it.

Shapes: B batch, S new tokens, P cache position, H heads, d hidden, C kv_lora_rank, R qk_rope_head_dim,
N qk_nope_head_dim, V v_head_dim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from .decoder import DecoderConfig


class MLAttention(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        q_rank, c, n, r, v = cfg.mla
        d, h = cfg.hidden_size, cfg.num_heads
        self.h, self.c, self.n, self.r, self.v = h, c, n, r, v
        self.scale = (n + r) ** -0.5
        if q_rank:
            self.q_a_proj = nn.Linear(d, q_rank, bias=cfg.qkv_bias)
            self.q_a_norm = nn.RMSNorm(q_rank, eps=cfg.norm_eps)
            self.q_b_proj = nn.Linear(q_rank, h * (n + r), bias=False)
        else:
            self.q_proj = nn.Linear(d, h * (n + r), bias=False)
        self.kv_a_proj = nn.Linear(d, c + r, bias=cfg.qkv_bias)
        self.kv_a_norm = nn.RMSNorm(c, eps=cfg.norm_eps)
        self.kv_b_proj = nn.Linear(c, h * (n + v), bias=False)
        self.o_proj = nn.Linear(h * v, d, bias=cfg.out_bias)

    def forward(self, x, cos, sin, cache: tuple[torch.Tensor] | None, position: int):
        from .decoder import apply_rotary

        b, s, _ = x.shape
        h, c, n, r, v = self.h, self.c, self.n, self.r, self.v
        if hasattr(self, "q_a_proj"):
            q = self.q_b_proj(self.q_a_norm(self.q_a_proj(x)))
        else:
            q = self.q_proj(x)
        q = q.view(b, s, h, n + r).transpose(1, 2)  # [B, H, S, N + R]
        q_nope, q_rope = q.split((n, r), dim=-1)
        q_rope = apply_rotary(q_rope, cos, sin, r)
        latent, k_rope = self.kv_a_proj(x).split((c, r), dim=-1)  # [B, S, C], [B, S, R]
        latent = self.kv_a_norm(latent)
        k_rope = apply_rotary(k_rope.unsqueeze(1), cos, sin, r)  # [B, 1, S, R]
        if cache is not None:
            (buf,) = cache  # [B, 1, L, C + R]
            buf[:, :, position:position + s, :c].copy_(latent.unsqueeze(1))
            buf[:, :, position:position + s, c:].copy_(k_rope)
        if cache is not None and s == 1 and position > 0:
            w = self.kv_b_proj.weight.view(h, n + v, c)  # [H, N + V, C]
            q_lat = torch.einsum("bhsn,hnc->bhsc", q_nope, w[:, :n])  # [B, H, 1, C]
            keys = buf[:, :, :position + 1]  # [B, 1, P + 1, C + R]: latent and rotary key, one head
            out = F.scaled_dot_product_attention(torch.cat((q_lat, q_rope), dim=-1), keys, keys[..., :c],
                                                 scale=self.scale, enable_gqa=True)[..., :c]  # [B, H, 1, C]
            out = torch.einsum("bhsc,hvc->bhsv", out, w[:, n:])  # [B, H, 1, V]
        else:
            kv = self.kv_b_proj(latent).view(b, s, h, n + v).transpose(1, 2)  # [B, H, S, N + V]
            k_nope, values = kv.split((n, v), dim=-1)
            keys = torch.cat((k_nope, k_rope.expand(b, h, s, r)), dim=-1)  # [B, H, S, N + R]
            out = F.scaled_dot_product_attention(torch.cat((q_nope, q_rope), dim=-1), keys, values,
                                                 is_causal=int(s) > 1, scale=self.scale)[..., :v]
        return self.o_proj(out.transpose(1, 2).reshape(b, s, h * v))
