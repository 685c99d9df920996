"""Workload definitions: model configs (configs/*.json, Hugging Face field names) and the PyTorch
modules that build them, on the meta device for counting or on a real device for measurement."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from torch import nn

from .decoder import DecoderConfig, DecoderLM
from .encoder import BertConfig, BertModel
from .hf import ConfigFieldError, parse
from .vision import ResNet, ResNetConfig, ViT, ViTConfig

CONFIG_DIR = Path(__file__).parent / "configs"

__all__ = ["CONFIG_DIR", "ConfigFieldError", "build", "parse", "zoo_ids", "zoo_config"]


def zoo_ids() -> list[str]:
    """Ids of the built-in models, e.g. "llama-2-7b"."""
    return list(_zoo_ids())


@lru_cache(maxsize=1)
def _zoo_ids() -> tuple[str, ...]:
    # the configs ship with the package and do not change while it runs: listed once per process
    return tuple(sorted(p.stem for p in CONFIG_DIR.glob("*.json")))


def zoo_config(model_id: str) -> dict:
    """The raw config.json of built-in model `model_id` (with planner_source and planner_date)."""
    return json.loads((CONFIG_DIR / f"{model_id}.json").read_text())


def build(config: DecoderConfig | BertConfig | ResNetConfig | ViTConfig) -> nn.Module:
    """Instantiate the module for a parsed config on the current default device."""
    if hasattr(config, "build"):  # a library-built model (models/library.py)
        return config.build()
    if isinstance(config, DecoderConfig):
        return DecoderLM(config)
    if isinstance(config, BertConfig):
        return BertModel(config)
    if isinstance(config, ResNetConfig):
        return ResNet(config)
    if isinstance(config, ViTConfig):
        return ViT(config)
    raise TypeError(f"no builder for {type(config).__name__}")
