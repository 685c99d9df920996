"""Vision models: ResNet (bottleneck, v1.5 as torchvision) and ViT (as torchvision's vit_b_16).

Shapes: B batch, C channels, image [B, 3, R, R] with R the image size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True, slots=True)
class ResNetConfig:
    """Bottleneck ResNet (Hugging Face "resnet" field names)."""

    depths: tuple[int, ...]
    hidden_sizes: tuple[int, ...]
    """Output channels of each stage (4x the bottleneck width)."""
    embedding_size: int
    num_labels: int
    image_size: int


class Bottleneck(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        width = c_out // 4
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(out + identity)


class ResNet(nn.Module):
    """forward(images [B, 3, R, R]) -> logits [B, num_labels]."""

    def __init__(self, cfg: ResNetConfig):
        super().__init__()
        self.conv1 = nn.Conv2d(3, cfg.embedding_size, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(cfg.embedding_size)
        stages = []
        c_in = cfg.embedding_size
        for i, (depth, c_out) in enumerate(zip(cfg.depths, cfg.hidden_sizes)):
            blocks = [Bottleneck(c_in, c_out, 1 if i == 0 else 2)]
            blocks += [Bottleneck(c_out, c_out, 1) for _ in range(depth - 1)]
            stages.append(nn.Sequential(*blocks))
            c_in = c_out
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(c_in, cfg.num_labels)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, stride=2, padding=1)
        x = self.stages(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


@dataclass(frozen=True, slots=True)
class ViTConfig:
    """Vision transformer (Hugging Face "vit" field names)."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    patch_size: int
    image_size: int
    num_channels: int
    num_labels: int
    norm_eps: float


class ViTLayer(nn.Module):
    def __init__(self, cfg: ViTConfig):
        super().__init__()
        d = cfg.hidden_size
        self.heads = cfg.num_heads
        self.norm1 = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.fc1 = nn.Linear(d, cfg.intermediate_size)
        self.fc2 = nn.Linear(cfg.intermediate_size, d)

    def forward(self, x):
        b, s, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])  # [B, H, S, D]
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    """forward(images [B, C, R, R]) -> logits [B, num_labels]; tokens S = (R / patch)^2 + 1."""

    def __init__(self, cfg: ViTConfig):
        super().__init__()
        d = cfg.hidden_size
        self.patch = cfg.patch_size
        self.conv_proj = nn.Conv2d(cfg.num_channels, d, cfg.patch_size, stride=cfg.patch_size)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embedding = nn.Parameter(torch.zeros(1, (cfg.image_size // cfg.patch_size) ** 2 + 1, d))
        self.layers = nn.ModuleList(ViTLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.head = nn.Linear(d, cfg.num_labels)

    def forward(self, x):
        b = x.shape[0]
        x = self.conv_proj(x).flatten(2).transpose(1, 2)  # [B, (R/p)^2, d]
        x = torch.cat((self.class_token.expand(b, -1, -1), x), dim=1)
        if x.shape[1] != self.pos_embedding.shape[1]:
            raise ValueError(f"image size gives {x.shape[1] - 1} patches; the position table was built for "
                             f"{self.pos_embedding.shape[1] - 1}")
        x = x + self.pos_embedding
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x)[:, 0])
