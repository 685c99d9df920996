"""Real traces for the trace tests: torch.profiler on the CPU, recorded once per session.

A 4-layer transformer (pre-norm decoder blocks: nn.Linear projections, scaled_dot_product_attention,
LayerNorm, GELU MLP) and a small CNN (conv, batch norm, ReLU, pooling, linear head), each profiled
for a forward pass and for a training step (forward, backward, AdamW), exported with
export_chrome_trace exactly as a user would.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

D_MODEL, HEADS, FFN, LAYERS, BATCH, SEQ = 128, 4, 512, 4, 2, 64
"""Transformer shapes: tokens = BATCH x SEQ = 128."""


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.out = nn.Linear(D_MODEL, D_MODEL)
        self.up, self.down = nn.Linear(D_MODEL, FFN), nn.Linear(FFN, D_MODEL)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, HEADS, D_MODEL // HEADS).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, D_MODEL)
        x = x + self.out(a)
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])

    def forward(self, x):
        return self.blocks(x)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


@dataclass(frozen=True)
class Recorded:
    path: Path
    self_total_us: float
    """The profiler's own self-CPU total over its op table (key_averages)."""
    names: frozenset[str]
    """Every op name in the profiler's own table."""


def _record(tmp: Path, name: str, model: nn.Module, x: torch.Tensor, train: bool) -> Recorded:
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3) if train else None

    def step():
        if train:
            loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        else:
            with torch.no_grad():
                model(x)

    step()  # warm-up: first-call allocations and kernel selection stay out of the trace
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    path = tmp / f"{name}.json"
    prof.export_chrome_trace(str(path))
    table = prof.key_averages()
    return Recorded(path, sum(e.self_cpu_time_total for e in table), frozenset(e.key for e in table))


@pytest.fixture(scope="session")
def traces(tmp_path_factory) -> dict[str, Recorded]:
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tmp = tmp_path_factory.mktemp("traces")
        tf, cnn = Transformer(), SmallCNN()
        x, img = torch.randn(BATCH, SEQ, D_MODEL), torch.randn(4, 3, 32, 32)
        return {"transformer_forward": _record(tmp, "transformer_forward", tf.eval(), x, False),
                "transformer_train": _record(tmp, "transformer_train", tf.train(), x, True),
                "cnn_forward": _record(tmp, "cnn_forward", cnn.eval(), img, False),
                "cnn_train": _record(tmp, "cnn_train", cnn.train(), img, True)}
    finally:
        torch.set_num_threads(threads)


CPU_PROFILE = "cpu-amd-epyc-25-17-2c"
"""The calibration profile shipped for this workplace's CPU (hardware_specs/calibration/): the local
profile the trace tests read CPU traces against, on any machine."""
GPU_TRACES = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "traces"
