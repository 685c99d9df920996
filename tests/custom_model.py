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
