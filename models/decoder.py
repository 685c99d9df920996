"""Decoder-only language models: Llama, Mistral, Mixtral (MoE), GPT-2, GPT-J, GPT-3.

One module covers the family with config switches (norm, MLP, positions, biases, experts). It
runs on meta tensors for counting and on real tensors for measurement; attention goes through
F.scaled_dot_product_attention so the capture can route it to the fused kernel.

Shapes: B batch, S new tokens, P cache position (tokens already cached), d hidden,
H query heads, Hkv key/value heads, D head dim, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True, slots=True)
class DecoderConfig:
    """Architecture of a decoder-only LM (field names follow Hugging Face where they exist)."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    mlp: str
    """"gated_silu" (SwiGLU: gate, up, down) or "gelu" (fc_in, fc_out)."""
    norm: str
    """"rms" or "layer"."""
    norm_eps: float
    position: str
    """"rope" (rotary) or "learned" (absolute position table)."""
    rotary_dim: int
    """Dimensions of each head that are rotated (head_dim for Llama, 64 for GPT-J)."""
    rope_theta: float
    max_position_embeddings: int
    qkv_bias: bool
    out_bias: bool
    mlp_bias: bool
    lm_head_bias: bool
    tie_embeddings: bool
    parallel_block: bool
    """GPT-J: attention and MLP both read one normed input and add to the residual together."""
    fused_qkv: bool
    """One Q|K|V projection (GPT-2, GPT-3) instead of three."""
    num_experts: int = 0
    experts_per_token: int = 0
    sliding_window: int | None = None
    """Keys a query attends to at most (Mistral v0.1); the decode KV cache is a rolling buffer."""
    local_experts: int = 0
    """Experts held by this device under expert parallelism (0: all num_experts)."""


def _norm(cfg: DecoderConfig) -> nn.Module:
    if cfg.norm == "rms":
        return nn.RMSNorm(cfg.hidden_size, eps=cfg.norm_eps)
    return nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int) -> torch.Tensor:
    """Rotate the first `rotary_dim` dims of x [B, H, S, D] by angles cos/sin [S, rotary_dim]."""
    if rotary_dim == x.shape[-1]:
        return x * cos + _rotate_half(x) * sin
    rot, keep = x[..., :rotary_dim], x[..., rotary_dim:]
    return torch.cat((rot * cos + _rotate_half(rot) * sin, keep), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        d, hd = cfg.hidden_size, cfg.head_dim
        if cfg.fused_qkv:
            self.qkv_proj = nn.Linear(d, (cfg.num_heads + 2 * cfg.num_kv_heads) * hd, bias=cfg.qkv_bias)
        else:
            self.q_proj = nn.Linear(d, cfg.num_heads * hd, bias=cfg.qkv_bias)
            self.k_proj = nn.Linear(d, cfg.num_kv_heads * hd, bias=cfg.qkv_bias)
            self.v_proj = nn.Linear(d, cfg.num_kv_heads * hd, bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(cfg.num_heads * hd, d, bias=cfg.out_bias)

    def forward(self, x, cos, sin, cache: tuple[torch.Tensor, torch.Tensor] | None, position: int):
        cfg = self.cfg
        b, s, _ = x.shape
        h, hkv, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        if cfg.fused_qkv:
            q, k, v = self.qkv_proj(x).split((h * hd, hkv * hd, hkv * hd), dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.view(b, s, h, hd).transpose(1, 2)  # [B, H, S, D]
        k = k.view(b, s, hkv, hd).transpose(1, 2)  # [B, Hkv, S, D]
        v = v.view(b, s, hkv, hd).transpose(1, 2)
        if cos is not None:
            q = apply_rotary(q, cos, sin, cfg.rotary_dim)
            k = apply_rotary(k, cos, sin, cfg.rotary_dim)
        causal = int(s) > 1  # int(): under torch.jit tracing sizes are tensors
        if cache is not None:
            # Serving engines write the new keys and values into a preallocated cache and let the
            # attention kernel read the cache: K, V [B, Hkv, P + S, D].
            k_cache, v_cache = cache
            k_cache[:, :, position:position + s].copy_(k)
            v_cache[:, :, position:position + s].copy_(v)
            k = k_cache[:, :, :position + s]
            v = v_cache[:, :, :position + s]
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hkv != h)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, h * hd))


class MLP(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        d, i = cfg.hidden_size, cfg.intermediate_size
        self.gated = cfg.mlp == "gated_silu"
        if self.gated:
            self.gate_proj = nn.Linear(d, i, bias=cfg.mlp_bias)
            self.up_proj = nn.Linear(d, i, bias=cfg.mlp_bias)
            self.down_proj = nn.Linear(i, d, bias=cfg.mlp_bias)
        else:
            self.fc_in = nn.Linear(d, i, bias=cfg.mlp_bias)
            self.fc_out = nn.Linear(i, d, bias=cfg.mlp_bias)

    def forward(self, x):
        if self.gated:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.fc_out(F.gelu(self.fc_in(x), approximate="tanh"))


def balanced_counts(rows: int, experts: int) -> list[int]:
    """Rows each expert receives when `rows` routed rows spread evenly (what load balancing aims at)."""
    base, extra = divmod(rows, experts)
    return [base + (1 if e < extra else 0) for e in range(experts)]


class MoE(nn.Module):
    """Top-k routed mixture of gated MLP experts (Mixtral), with sort-based token dispatch.

    Routing depends on data, which meta tensors do not have; the graph assumes balanced routing:
    the T*k routed rows are split evenly over the E experts (an expert given 0 rows is not run,
    so a decode step at batch 1 reads only k experts' weights). Under expert parallelism a device
    holds E/ep experts and, after the all-to-all, receives T*k rows for them (its tokens' share).
    """

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.k = cfg.experts_per_token
        self.gate = nn.Linear(cfg.hidden_size, cfg.num_experts, bias=False)
        self.experts = nn.ModuleList(MLP(cfg) for _ in range(cfg.local_experts or cfg.num_experts))

    def forward(self, x):
        b, s, d = x.shape
        flat = x.reshape(b * s, d)  # [T, d]
        probs = F.softmax(self.gate(flat), dim=-1, dtype=torch.float32)  # [T, E]
        weights, chosen = torch.topk(probs, self.k, dim=-1)  # [T, k]
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        order = torch.argsort(chosen.reshape(-1), stable=True)  # [T*k] rows sorted by expert
        token = torch.div(order, self.k, rounding_mode="floor")  # [T*k] token of each row
        row_weight = weights.reshape(-1)[order].unsqueeze(-1)  # [T*k, 1]
        out = torch.zeros_like(flat)
        start = 0
        for expert, n in zip(self.experts, balanced_counts(int(b) * int(s) * self.k, len(self.experts))):
            if n == 0:
                continue
            rows = token[start:start + n]
            y = expert(flat.index_select(0, rows)) * row_weight[start:start + n]
            out.index_add_(0, rows, y)
            start += n
        return out.view(b, s, d)


class Block(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.parallel = cfg.parallel_block
        self.input_norm = _norm(cfg)
        self.attn = Attention(cfg)
        if not self.parallel:
            self.post_attn_norm = _norm(cfg)
        self.mlp = MoE(cfg) if cfg.num_experts else MLP(cfg)

    def forward(self, x, cos, sin, cache, position):
        h = self.input_norm(x)
        if self.parallel:
            return x + self.attn(h, cos, sin, cache, position) + self.mlp(h)
        x = x + self.attn(h, cos, sin, cache, position)
        return x + self.mlp(self.post_attn_norm(x))


class DecoderLM(nn.Module):
    """forward(input_ids [B, S], kv_cache, position, all_logits) -> logits [B, S or 1, V]."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        if cfg.position == "learned":
            self.embed_positions = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.norm = _norm(cfg)
        if not cfg.tie_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=cfg.lm_head_bias)

    def new_kv_cache(self, batch: int, length: int, dtype: torch.dtype, device) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Return an empty KV cache: per layer (K, V), each [B, Hkv, length, D]."""
        cfg = self.cfg
        if cfg.sliding_window is not None:
            length = min(length, cfg.sliding_window)
        shape = (batch, cfg.num_kv_heads, length, cfg.head_dim)
        return [(torch.empty(shape, dtype=dtype, device=device), torch.empty(shape, dtype=dtype, device=device))
                for _ in range(cfg.num_layers)]

    def forward(self, input_ids, kv_cache=None, position: int = 0, all_logits: bool = True):
        cfg = self.cfg
        b, s = input_ids.shape
        x = self.embed_tokens(input_ids)  # [B, S, d]
        cos = sin = None
        if cfg.position == "learned":
            pos = torch.arange(position, position + s, device=input_ids.device)
            x = x + self.embed_positions(pos)
        else:
            # rotary angles in fp32 whatever the model dtype: [S, rotary_dim / 2]
            dev = input_ids.device
            inv_freq = cfg.rope_theta ** (-torch.arange(0, cfg.rotary_dim, 2, device=dev, dtype=torch.float32) / cfg.rotary_dim)
            pos = torch.arange(position, position + s, device=dev, dtype=torch.float32)
            angles = torch.outer(pos, inv_freq)
            angles = torch.cat((angles, angles), dim=-1)  # [S, rotary_dim]
            cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        if kv_cache is not None and position > 0 and s > 1:
            raise ValueError("chunked prefill (new tokens on top of a filled cache) is not modelled")
        if kv_cache is not None and cfg.sliding_window is not None:
            # Rolling buffer of `sliding_window` slots: a decode step attends to at most that many
            # keys (which slot is overwritten does not change the cost).
            position = min(position, cfg.sliding_window - s)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, None if kv_cache is None else kv_cache[i], position)
        x = self.norm(x)
        if not all_logits:
            x = x[:, -1:, :]  # serving engines compute logits for the last position only
        if cfg.tie_embeddings:
            return F.linear(x, self.embed_tokens.weight)
        return self.lm_head(x)
