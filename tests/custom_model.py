"""A user model loaded by `package.module:function` in the tests."""

import torch
from torch import nn


def linear_64_to_32():
    # Linear [B=8, i=64] -> [B, o=32], no bias
    return nn.Linear(64, 32, bias=False), (torch.randn(8, 64),)


def two_layer():
    return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4)), torch.randn(2, 16)


class _Attention(nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal, enable_gqa=True)


def causal_attention():
    # q [B=2, H=8, S=64, D=32]; k, v [2, Hkv=2, 64, 32]
    return _Attention(True), (torch.randn(2, 8, 64, 32), torch.randn(2, 2, 64, 32), torch.randn(2, 2, 64, 32))


def full_attention():
    return _Attention(False), (torch.randn(2, 8, 64, 32), torch.randn(2, 2, 64, 32), torch.randn(2, 2, 64, 32))


class _FFT(nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x).abs()


def fft_model():
    return _FFT(), (torch.randn(4, 256),)


def not_a_model():
    return 42


def wide_linear():
    # Linear [B=64, i=8192] -> [B, o=8192], no bias: large enough that batch moves the predicted time
    return nn.Linear(8192, 8192, bias=False), (torch.randn(64, 8192),)


class _Masked(nn.Module):
    def forward(self, x, mask):
        return (x @ x.transpose(-1, -2)).masked_fill(mask, 0.0)


def masked():
    # x [B=2, S=16, H=8] beside a mask [S, S]: dim 0 differs (2 and 16), so the batch cannot be found
    return _Masked(), (torch.randn(2, 16, 8), torch.ones(16, 16, dtype=torch.bool))


def token_classifier(batch=8):
    # ids [B, S=128] -> embedding [B, S, 64] -> mean over S -> Linear 64 -> 10; takes a `batch` argument
    class _Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(1000, 64)
            self.head = nn.Linear(64, 10, bias=False)

        def forward(self, ids):
            return self.head(self.embed(ids).mean(1))

    return _Classifier(), (torch.randint(0, 1000, (batch, 128)),)


def tiny_cnn():
    # images [B=4, C=3, 32, 32] -> Conv2d 3 -> 8, 3x3, no bias
    return nn.Conv2d(3, 8, 3, bias=False), (torch.randn(4, 3, 32, 32),)
