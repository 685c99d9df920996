"""Resolve a model argument: a zoo id, a path to a Hugging Face style config.json, or
`package.module:function` returning (nn.Module, example inputs)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

import models
from planner.errors import ConfigError, UnknownNameError


@dataclass(frozen=True, slots=True)
class Model:
    """A resolved model: what it is and how to build it."""

    name: str
    """Zoo id, config path or import path as given."""
    family: str
    """"decoder" (generative LM), "encoder" (BERT-like), "vision" or "custom"."""
    config: Any
    """Parsed architecture dataclass (None for custom models)."""
    source: str
    """Where the architecture comes from (a URL or paper for zoo models, the path otherwise)."""
    factory: Callable[[], tuple[nn.Module, tuple]] | None = None
    """Custom models only: returns (module, example inputs), called on the meta device."""

    def build(self) -> nn.Module:
        """Instantiate the module on the current default device (use torch.device("meta"))."""
        if self.factory is not None:
            return self.factory()[0]
        return models.build(self.config)


def _from_config(raw: Any, name: str, origin: str, source: str) -> Model:
    try:
        family, config = models.parse(raw, origin)
    except models.ConfigFieldError as exc:
        raise ConfigError(str(exc)) from None
    return Model(name=name, family=family, config=config, source=source)


def _custom(spec: str) -> Model:
    module_name, _, attr = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import '{spec}': {exc}. Expected package.module:function returning "
                          "(nn.Module, example inputs)") from None

    def factory() -> tuple[nn.Module, tuple]:
        result = fn()
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], nn.Module)):
            raise ConfigError(f"'{spec}' must return (nn.Module, example inputs), got {type(result).__name__}")
        inputs = result[1] if isinstance(result[1], tuple) else (result[1],)
        return result[0], inputs

    return Model(name=spec, family="custom", config=None, source=spec, factory=factory)


def from_config(raw: object, name: str) -> Model:
    """A Model from a parsed config.json (an upload, say); errors name the bad field."""
    return _from_config(raw, name, name, name)


def resolve(name: str) -> Model:
    """Return the Model for a zoo id (case-insensitive), a config.json path, or module:function."""
    ids = models.zoo_ids()
    key = name.strip().lower()
    if key in ids:
        raw = models.zoo_config(key)
        return _from_config(raw, key, f"models/configs/{key}.json", raw.get("planner_source", ""))
    path = Path(name)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise ConfigError(f"config file '{name}' does not exist")
        try:
            raw = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{name}: not valid JSON ({exc})") from None
        return _from_config(raw, str(path), str(path), str(path))
    if ":" in name and not path.exists():
        return _custom(name)
    raise UnknownNameError("model", name, ids)
