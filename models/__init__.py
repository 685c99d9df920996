"""Workload definitions: model configs (configs/*.json, Hugging Face field names) and the PyTorch
modules that build them, on the meta device for counting or on a real device for measurement.

Importing this package imports no torch: listing and reading the configs (zoo_ids, zoo_config,
config_digest, and zoo_index.json's counts: zoo_index()) stays fast; parse, ConfigFieldError and build import the
builders when first used."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

    from .decoder import DecoderConfig
    from .encoder import BertConfig
    from .hf import ConfigFieldError, parse
    from .vision import ResNetConfig, ViTConfig

CONFIG_DIR = Path(__file__).parent / "configs"

INDEX_FILE = Path(__file__).parent / "zoo_index.json"

__all__ = ["CONFIG_DIR", "ConfigFieldError", "build", "config_digest", "parse", "zoo_config", "zoo_ids", "zoo_index"]


def __getattr__(name: str) -> Any:
    # parse and ConfigFieldError live with the builders (planner_models.hf, which imports torch)
    if name in ("parse", "ConfigFieldError"):
        from . import hf

        value = getattr(hf, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


@lru_cache(maxsize=1)
def zoo_index() -> dict[str, dict]:
    """zoo_index.json's entries by model id: digest, family, params, active_params (scripts/zoo_index.py
    writes it; an entry stands while its digest is its config's)."""
    return json.loads(INDEX_FILE.read_text())["models"]


def config_digest(raw: dict) -> str:
    """A digest of a config's content (SHA-256 of its JSON with sorted keys, first 16 hex digits): the
    counts zoo_index.json holds of a zoo model stand while its config's digest is theirs."""
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build(config: DecoderConfig | BertConfig | ResNetConfig | ViTConfig) -> nn.Module:
    """Instantiate the module for a parsed config on the current default device."""
    from .decoder import DecoderConfig, DecoderLM
    from .encoder import BertConfig, BertModel
    from .vision import ResNet, ResNetConfig, ViT, ViTConfig

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
