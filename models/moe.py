"""Mixture-of-experts MLP of the decoder family: top-k routed experts with balanced dispatch, and the
variants of today's MoE models (a shared expert always on, sigmoid scores, router and expert biases).

Shapes: T = B·S tokens, d hidden, E experts (E/ep on this device), k experts per token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from .decoder import DecoderConfig


def balanced_counts(rows: int, experts: int) -> list[int]:
    """Rows each expert receives when `rows` routed rows spread evenly (what load balancing aims at)."""
    base, extra = divmod(rows, experts)
    return [base + (1 if e < extra else 0) for e in range(experts)]


class MoE(nn.Module):
    """Top-k routed mixture of gated MLP experts, with sort-based token dispatch.

    Routing depends on data, which meta tensors do not have; the graph assumes balanced routing:
    the T*k routed rows are split evenly over the E experts (an expert given 0 rows is not run,
    so a decode step at batch 1 reads only k experts' weights). Under expert parallelism a device
    holds E/ep experts. Within a tensor-parallel group (ep ≤ tp) every rank holds the same T tokens and
    runs only the ⌈T*k/ep⌉ rows routed to its experts, the partial outputs summed by the group's
    all-reduce after the MLP (vLLM, SGLang and TensorRT-LLM EP without attention DP); across
    data-parallel replicas (ep > tp) a device receives, after the all-to-all, T*k/tp rows: its tokens'
    share (`routed_rows_divisor` = min(tp, ep) either way).
    Scores are a softmax over the experts (Mixtral, Qwen3-MoE, gpt-oss: softmax of the top k) or a
    sigmoid per expert (DeepSeek-V3, Llama 4); the k weights are normalized to sum to 1 either way
    (a scale, not a change of work). A shared expert (DeepSeek-V3, Llama 4) runs on every token.
    """

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        from .decoder import MLP

        self.k, self.router = cfg.experts_per_token, cfg.router
        self.gate = nn.Linear(cfg.hidden_size, cfg.num_experts, bias=cfg.router_bias)
        width = cfg.moe_intermediate_size or cfg.intermediate_size
        self.experts = nn.ModuleList(MLP(cfg, width, cfg.expert_bias) for _ in range(cfg.local_experts or cfg.num_experts))
        if cfg.shared_intermediate_size:
            self.shared_expert = MLP(cfg, cfg.shared_intermediate_size, False)
        self.rows_divisor = max(1, cfg.routed_rows_divisor)
        self.capture_repeat = None
        """Set by a capture on meta tensors (planner/workload/graphs.py): a context manager factory that
        counts the ops run inside it n times. Experts given the same number of rows run the same ops on
        same-shaped weights, so one of them runs and is counted for all (DeepSeek-V3's 14,848 expert
        calls of a prefill are captured as 58 x 2); None runs every expert."""

    def forward(self, x):
        b, s, d = x.shape
        flat = x.reshape(b * s, d)  # [T, d]
        logits = self.gate(flat).float()  # [T, E]
        probs = torch.sigmoid(logits) if self.router == "sigmoid" else F.softmax(logits, dim=-1)
        weights, chosen = torch.topk(probs, self.k, dim=-1)  # [T, k]
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        order = torch.argsort(chosen.reshape(-1), stable=True)  # [T*k] rows sorted by expert
        token = torch.div(order, self.k, rounding_mode="floor")  # [T*k] token of each row
        row_weight = weights.reshape(-1)[order].unsqueeze(-1)  # [T*k, 1]
        out = self.shared_expert(flat) if hasattr(self, "shared_expert") else torch.zeros_like(flat)
        divisor = self.rows_divisor  # [T*k / divisor] rows run on this device
        counts = balanced_counts(-(-int(b) * int(s) * self.k // divisor), len(self.experts))
        if self.capture_repeat is not None and x.device.type == "meta":
            start = 0
            for n in sorted(set(counts) - {0}, reverse=True):  # balanced: the larger counts come first
                same = counts.count(n)
                with self.capture_repeat(same):
                    self._run(self.experts[counts.index(n)], flat, token, row_weight, out, start, n)
                start += n * same
            return out.view(b, s, d)
        start = 0
        for expert, n in zip(self.experts, counts):
            if n:
                self._run(expert, flat, token, row_weight, out, start, n)
                start += n
        return out.view(b, s, d)

    @staticmethod
    def _run(expert, flat, token, row_weight, out, start: int, n: int) -> None:
        rows = token[start:start + n]
        y = expert(flat.index_select(0, rows)) * row_weight[start:start + n]
        out.index_add_(0, rows, y)
