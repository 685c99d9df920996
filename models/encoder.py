"""BERT encoder (post-norm), as Hugging Face's BertModel: embeddings, layers, pooler.

Shapes: B batch, S tokens, d hidden, H heads, D = d / H.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True, slots=True)
class BertConfig:
    """Architecture of a BERT encoder (Hugging Face field names)."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    norm_eps: float


class BertLayer(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        d = cfg.hidden_size
        self.heads = cfg.num_heads
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.attn_out = nn.Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.intermediate = nn.Linear(d, cfg.intermediate_size)
        self.output = nn.Linear(cfg.intermediate_size, d)
        self.out_norm = nn.LayerNorm(d, eps=cfg.norm_eps)

    def forward(self, x):
        b, s, d = x.shape
        hd = d // self.heads

        def heads(t):  # [B, S, d] -> [B, H, S, D]
            return t.view(b, s, self.heads, hd).transpose(1, 2)

        a = F.scaled_dot_product_attention(heads(self.query(x)), heads(self.key(x)), heads(self.value(x)))
        x = self.attn_norm(x + self.attn_out(a.transpose(1, 2).reshape(b, s, d)))
        return self.out_norm(x + self.output(F.gelu(self.intermediate(x))))


class BertModel(nn.Module):
    """forward(input_ids [B, S]) -> (sequence output [B, S, d], pooled output [B, d])."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        d = cfg.hidden_size
        self.word_embeddings = nn.Embedding(cfg.vocab_size, d)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, d)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, d)
        self.embed_norm = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.layers = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.num_layers))
        self.pooler = nn.Linear(d, d)

    def forward(self, input_ids):
        b, s = input_ids.shape
        pos = torch.arange(s, device=input_ids.device)
        token_type = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids) + self.position_embeddings(pos) + self.token_type_embeddings(token_type)
        x = self.embed_norm(x)
        for layer in self.layers:
            x = layer(x)
        return x, torch.tanh(self.pooler(x[:, 0]))
