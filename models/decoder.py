"""Decoder-only language models: Llama, Mistral, Mixtral (MoE), GPT-2, GPT-J, GPT-3, Falcon-7B, Qwen 2/2.5/3 and
Qwen3-MoE, Gemma 2, Phi-3, DeepSeek-V3 (multi-head latent attention + shared-expert MoE, models/mla.py and
models/moe.py), gpt-oss and Llama 4 (MoE).

One module covers the family with config switches (norm, MLP, positions, biases, experts, per-layer
kinds: dense or MoE, sliding-window or full attention, with or without rotary positions). It
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

from .mla import MLAttention
from .moe import MoE, balanced_counts  # noqa: F401  (balanced_counts: re-exported)


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
    routed_rows_divisor: int = 1
    """Devices that share the routed rows of this device's tokens: under expert parallelism within a
    tensor-parallel group every rank holds all the group's tokens and computes only the rows routed to its
    own experts, so a device runs T·k / min(tp, ep) rows (1: all T·k)."""
    moe_intermediate_size: int = 0
    """Width of one routed expert (0: intermediate_size)."""
    shared_intermediate_size: int = 0
    """Width of the always-on shared expert of each MoE layer (DeepSeek-V3, Llama 4; 0: none)."""
    router: str = "softmax"
    """Expert scores: "softmax" (Mixtral, Qwen3-MoE, gpt-oss) or "sigmoid" (DeepSeek-V3, Llama 4)."""
    router_bias: bool = False
    expert_bias: bool = False
    kinds: tuple[str, ...] = ()
    """Per-layer kind, "+"-joined tags: "moe" (else dense MLP), "sliding" (attends to the last
    sliding_window keys), "nope" (no rotary positions). Empty: every layer is alike (MoE when
    num_experts, sliding when sliding_window). A layer past the end takes the last kind."""
    qk_norm: str = "none"
    """Per-head norm of queries and keys before rotary: "rms" (Qwen3, learned), "l2" (Llama 4, no weights)."""
    sandwich_norm: bool = False
    """Gemma 2: norms after attention and after the MLP too (four per layer)."""
    embed_scale: bool = False
    """Gemma: embeddings multiplied by sqrt(hidden_size)."""
    final_softcap: float = 0.0
    """Gemma 2: logits = cap * tanh(logits / cap) (0: none). Attention softcapping runs inside the fused
    kernel (FlashAttention's softcap argument) and is not a separate op."""
    attn_sinks: bool = False
    """gpt-oss: a learned sink logit per head (a parameter of H values; inside the fused kernel)."""
    swiglu_limit: float = 0.0
    """gpt-oss: gate clamped to <= limit, up to [-limit, limit], out = (up + 1) * gate * sigmoid(1.702 gate)."""
    mla: tuple[int, int, int, int, int] | None = None
    """Multi-head latent attention (DeepSeek-V2/V3): (q_lora_rank, kv_lora_rank, qk_nope_head_dim,
    qk_rope_head_dim, v_head_dim); q_lora_rank 0 projects queries directly."""

    def kind(self, layer: int) -> frozenset[str]:
        """Tags of layer `layer` (see `kinds`)."""
        if self.kinds:
            return frozenset(self.kinds[min(layer, len(self.kinds) - 1)].split("+")) - {""}
        tags = set()
        if self.num_experts:
            tags.add("moe")
        if self.sliding_window is not None:
            tags.add("sliding")
        return frozenset(tags)

    @property
    def kv_cache_width(self) -> int:
        """KV-cache elements one token stores per layer: 2·kv_heads·head_dim (K and V), or the compressed
        latent and the shared rotary key of multi-head latent attention (kv_lora_rank + qk_rope_head_dim)."""
        if self.mla is not None:
            return self.mla[1] + self.mla[3]
        return 2 * self.num_kv_heads * self.head_dim


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
    def __init__(self, cfg: DecoderConfig, tags: frozenset[str] = frozenset()):
        super().__init__()
        self.cfg = cfg
        self.rotary = "nope" not in tags
        d, hd = cfg.hidden_size, cfg.head_dim
        if cfg.fused_qkv:
            self.qkv_proj = nn.Linear(d, (cfg.num_heads + 2 * cfg.num_kv_heads) * hd, bias=cfg.qkv_bias)
        else:
            self.q_proj = nn.Linear(d, cfg.num_heads * hd, bias=cfg.qkv_bias)
            self.k_proj = nn.Linear(d, cfg.num_kv_heads * hd, bias=cfg.qkv_bias)
            self.v_proj = nn.Linear(d, cfg.num_kv_heads * hd, bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(cfg.num_heads * hd, d, bias=cfg.out_bias)
        if cfg.qk_norm == "rms":
            self.q_norm = nn.RMSNorm(hd, eps=cfg.norm_eps)
            self.k_norm = nn.RMSNorm(hd, eps=cfg.norm_eps)
        if cfg.attn_sinks:
            self.sinks = nn.Parameter(torch.empty(cfg.num_heads))

    def _qk_norm(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.cfg.qk_norm == "rms":
            return self.q_norm(q), self.k_norm(k)
        if self.cfg.qk_norm == "l2" and self.rotary:  # Llama 4: weightless RMS norm on the rotary layers
            return F.rms_norm(q, (q.shape[-1],), eps=self.cfg.norm_eps), F.rms_norm(k, (k.shape[-1],), eps=self.cfg.norm_eps)
        return q, k

    def forward(self, x, cos, sin, cache: tuple[torch.Tensor, torch.Tensor] | None, position: int):
        cfg = self.cfg
        b, s, _ = x.shape
        h, hkv, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        if cfg.fused_qkv:
            q, k, v = self.qkv_proj(x).split((h * hd, hkv * hd, hkv * hd), dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q, k = self._qk_norm(q.view(b, s, h, hd), k.view(b, s, hkv, hd))
        q = q.transpose(1, 2)  # [B, H, S, D]
        k = k.transpose(1, 2)  # [B, Hkv, S, D]
        v = v.view(b, s, hkv, hd).transpose(1, 2)
        if cos is not None and self.rotary:
            q = apply_rotary(q, cos, sin, cfg.rotary_dim)
            k = apply_rotary(k, cos, sin, cfg.rotary_dim)
        causal = int(s) > 1  # int(): under torch.jit tracing sizes are tensors
        if cache is not None:
            # Serving engines write the new keys and values into a preallocated cache and let the
            # attention kernel read the cache: K, V [B, Hkv, P + S, D].
            k_cache, v_cache = cache
            if position + s <= k_cache.shape[2]:
                k_cache[:, :, position:position + s].copy_(k)
                v_cache[:, :, position:position + s].copy_(v)
                k = k_cache[:, :, :position + s]
                v = v_cache[:, :, :position + s]
            else:  # a prompt longer than a sliding window: the buffer keeps its last keys and values
                n = k_cache.shape[2]
                k_cache.copy_(k[:, :, -n:])
                v_cache.copy_(v[:, :, -n:])
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hkv != h)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, h * hd))


class MLP(nn.Module):
    """Gated MLP (gate, up, down: SwiGLU, GeGLU for "gated_gelu", gpt-oss's clamped SwiGLU when
    cfg.swiglu_limit) or a two-layer GELU MLP; `intermediate` and `bias` override the config's (experts)."""

    def __init__(self, cfg: DecoderConfig, intermediate: int | None = None, bias: bool | None = None):
        super().__init__()
        d, i = cfg.hidden_size, intermediate or cfg.intermediate_size
        bias = cfg.mlp_bias if bias is None else bias
        self.act, self.limit = cfg.mlp, cfg.swiglu_limit
        self.gated = cfg.mlp.startswith("gated")
        if self.gated:
            self.gate_proj = nn.Linear(d, i, bias=bias)
            self.up_proj = nn.Linear(d, i, bias=bias)
            self.down_proj = nn.Linear(i, d, bias=bias)
        else:
            self.fc_in = nn.Linear(d, i, bias=bias)
            self.fc_out = nn.Linear(i, d, bias=bias)

    def forward(self, x):
        if not self.gated:
            return self.fc_out(F.gelu(self.fc_in(x), approximate="tanh"))
        gate, up = self.gate_proj(x), self.up_proj(x)
        if self.limit:  # gpt-oss (openai/gpt-oss torch reference: swiglu with alpha 1.702 and a clamp)
            gate, up = gate.clamp(max=self.limit), up.clamp(-self.limit, self.limit)
            return self.down_proj(gate * torch.sigmoid(1.702 * gate) * (up + 1))
        if self.act == "gated_gelu":
            return self.down_proj(F.gelu(gate, approximate="tanh") * up)
        return self.down_proj(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: DecoderConfig, tags: frozenset[str] = frozenset()):
        super().__init__()
        self.parallel, self.sandwich = cfg.parallel_block, cfg.sandwich_norm
        self.window = cfg.sliding_window if "sliding" in tags else None
        self.input_norm = _norm(cfg)
        self.attn = MLAttention(cfg) if cfg.mla is not None else Attention(cfg, tags)
        if not self.parallel:
            self.post_attn_norm = _norm(cfg)
        if self.sandwich:  # Gemma 2: post_attn_norm normalizes the attention output; two more around the MLP
            self.pre_mlp_norm = _norm(cfg)
            self.post_mlp_norm = _norm(cfg)
        self.mlp = MoE(cfg) if "moe" in tags else MLP(cfg)

    def forward(self, x, cos, sin, cache, position):
        if cache is not None and self.window is not None:
            # Rolling buffer of `window` slots: a decode step attends to at most that many keys (which
            # slot is overwritten does not change the cost).
            position = max(0, min(position, self.window - x.shape[1]))
        h = self.input_norm(x)
        if self.parallel:
            return x + self.attn(h, cos, sin, cache, position) + self.mlp(h)
        if self.sandwich:
            x = x + self.post_attn_norm(self.attn(h, cos, sin, cache, position))
            return x + self.post_mlp_norm(self.mlp(self.pre_mlp_norm(x)))
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
        self.layers = nn.ModuleList(Block(cfg, cfg.kind(i)) for i in range(cfg.num_layers))
        self.norm = _norm(cfg)
        if not cfg.tie_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=cfg.lm_head_bias)

    def new_kv_cache(self, batch: int, length: int, dtype: torch.dtype, device) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Return an empty KV cache: per layer (K, V), each [B, Hkv, length, D] (a sliding-window layer
        holds at most sliding_window positions); under multi-head latent attention one buffer per layer,
        [B, 1, length, kv_lora_rank + qk_rope_head_dim]: the latent and the rotary key, shared by the heads."""
        cfg = self.cfg
        cache = []
        for layer in self.layers:
            n = min(length, layer.window) if layer.window is not None else length
            if cfg.mla is not None:
                shapes = ((batch, 1, n, cfg.mla[1] + cfg.mla[3]),)
            else:
                shapes = ((batch, cfg.num_kv_heads, n, cfg.head_dim),) * 2
            cache.append(tuple(torch.empty(shape, dtype=dtype, device=device) for shape in shapes))
        return cache

    def inactive_params(self) -> int:
        """Parameters a token does not use: the routed experts it is not sent to (MoE layers)."""
        idle = 0
        for layer in self.layers:
            if isinstance(layer.mlp, MoE):
                per_expert = sum(p.numel() for p in layer.mlp.experts[0].parameters())
                idle += (len(layer.mlp.experts) - layer.mlp.k) * per_expert
        return max(idle, 0)

    def forward(self, input_ids, kv_cache=None, position: int = 0, all_logits: bool = True):
        cfg = self.cfg
        b, s = input_ids.shape
        x = self.embed_tokens(input_ids)  # [B, S, d]
        if cfg.embed_scale:
            x = x * (cfg.hidden_size ** 0.5)
        cos = sin = None
        rotary_dim = cfg.mla[3] if cfg.mla is not None else cfg.rotary_dim
        if cfg.position == "learned":
            pos = torch.arange(position, position + s, device=input_ids.device)
            x = x + self.embed_positions(pos)
        else:
            # rotary angles in fp32 whatever the model dtype: [S, rotary_dim / 2]
            dev = input_ids.device
            inv_freq = cfg.rope_theta ** (-torch.arange(0, rotary_dim, 2, device=dev, dtype=torch.float32) / rotary_dim)
            pos = torch.arange(position, position + s, device=dev, dtype=torch.float32)
            angles = torch.outer(pos, inv_freq)
            angles = torch.cat((angles, angles), dim=-1)  # [S, rotary_dim]
            cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        if kv_cache is not None and position > 0 and s > 1:
            raise ValueError("chunked prefill (new tokens on top of a filled cache) is not modelled")
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, None if kv_cache is None else kv_cache[i], position)
        x = self.norm(x)
        if not all_logits:
            x = x[:, -1:, :]  # serving engines compute logits for the last position only
        logits = F.linear(x, self.embed_tokens.weight) if cfg.tie_embeddings else self.lm_head(x)
        if cfg.final_softcap:
            logits = torch.tanh(logits / cfg.final_softcap) * cfg.final_softcap
        return logits
