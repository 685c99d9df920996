"""Resolve a model argument: a zoo id, a path to a Hugging Face style config.json, or (only when the
caller allows code: a command-line argument or the Python API) `package.module:function` returning
(nn.Module, example inputs); how such a model's batch is found and changed: planner/workload/user_model.py."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from torch import nn

import planner_models
from planner.errors import ConfigError, UnknownNameError, UnsupportedError
from planner.files import parse_json, read_text
from planner.workload.user_model import UserFunction, first_line
from planner_models.library import LibraryMissingError

MAX_NAME_CHARS = 1000
"""Longest model name or path accepted."""
MAX_CONFIG_BYTES = 2**20
"""Largest config.json read (1 MiB; real ones are a few KB)."""


@dataclass(frozen=True, slots=True)
class Model:
    """A resolved model: what it is and how to build it."""

    name: str
    """Zoo id, config path or import path as given."""
    family: str
    """"decoder" (generative LM), "encoder" (BERT-like), "vision", "custom", or a family of a library-built
    model (planner_models.library.FAMILIES: detection, diffusion, recommender, speech, multimodal)."""
    config: Any
    """Parsed architecture dataclass (None for custom models)."""
    source: str
    """Where the architecture comes from (a URL or paper for zoo models, the path otherwise)."""
    factory: Callable[..., tuple[nn.Module, tuple]] | None = None
    """Custom models only: returns (module, example inputs) on the current default device. A user's
    `package.module:function` is a user_model.UserFunction, called with a batch (None: the example's own)
    and returning the inputs at that batch; any other callable is called with no arguments and its
    inputs run as they are."""

    def build(self) -> nn.Module:
        """Instantiate the module on the current default device (use torch.device("meta"))."""
        if self.factory is not None:
            return self.made(None)[0]
        try:
            return planner_models.build(self.config)
        except LibraryMissingError as exc:
            raise UnsupportedError(f"{self.name}: {exc}") from None
        except ValueError as exc:  # a library refused a component config: bad input, named
            raise ConfigError(f"{self.name}: {exc}") from None

    def made(self, batch: int | None) -> tuple[nn.Module, tuple]:
        """A custom model's (module, inputs) at `batch` (None: its example's), on the current default device."""
        if isinstance(self.factory, UserFunction):
            return self.factory(batch)
        return self.factory()


def _from_config(raw: Any, name: str, origin: str, source: str, echo: bool = True) -> Model:
    """The Model of a parsed config.json; ConfigError for a bad one, which echoes no value read from the file
    unless `echo` (the file was named on the command line, not by a data file)."""
    try:
        family, config = planner_models.parse(raw, origin)
    except planner_models.ConfigFieldError as exc:
        raise ConfigError(str(exc) if echo or not getattr(exc, "quiet", "") else exc.quiet) from None
    return Model(name=name, family=family, config=config, source=source)


def is_file_function(name: str) -> bool:
    """True for `path/to/model.py:function`: a user's file named by its path (not a module found on sys.path)."""
    path, sep, attr = name.strip().rpartition(":")
    return bool(sep) and path.endswith(".py") and attr.isidentifier()


def _load_file_function(spec: str):
    """The function `name` of the Python file `path` in `path.py:name`, imported from that file alone."""
    import importlib.util

    path_text, _, attr = spec.strip().rpartition(":")
    path = Path(path_text)
    try:
        is_file = path.is_file()
    except (OSError, ValueError):
        is_file = False
    if not is_file:
        raise ConfigError(f"'{spec}': file '{path_text}' does not exist (give path/to/model.py:function)")
    module_spec = importlib.util.spec_from_file_location(f"planner_user_model_{abs(hash(str(path.resolve()))):x}",
                                                         path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, attr)


def _custom(spec: str) -> Model:
    """A user's model function: `path/to/model.py:function` (that file) or `package.module:function` (imported
    from sys.path); ConfigError for a name of neither form, an import that fails, or no function."""
    from_file = is_file_function(spec)
    form = "path/to/model.py:function" if from_file else "package.module:function"
    if not from_file:
        module_name, _, attr = spec.partition(":")
        if not module_name or not attr or not all(part.isidentifier() for part in module_name.split(".") + [attr]):
            raise ConfigError(f"'{spec}' is not package.module:function (dotted Python identifiers, then a colon "
                              "and a function name)")
    try:
        fn = _load_file_function(spec) if from_file else getattr(importlib.import_module(module_name), attr)
    except ConfigError:
        raise
    except (Exception, SystemExit) as exc:
        # a user module may fail in any way while importing: report it as bad input, never a traceback
        raise ConfigError(f"cannot import '{spec}': {type(exc).__name__}: {first_line(exc)}. Expected {form} "
                          "returning (nn.Module, example inputs)") from None
    if not callable(fn):
        raise ConfigError(f"'{spec}' is a {type(fn).__name__}, not a function returning (nn.Module, example inputs)")
    return Model(name=spec, family="custom", config=None, source=spec, factory=UserFunction(spec, fn))


def from_config(raw: object, name: str) -> Model:
    """A Model from a parsed config.json (an upload, say); errors name the bad field."""
    return _from_config(raw, name, name, name)


@lru_cache(maxsize=None)
def _zoo_model(key: str) -> Model:
    """A built-in model, parsed once per process (its config ships with the package)."""
    raw = planner_models.zoo_config(key)
    return _from_config(raw, key, f"models/configs/{key}.json", raw.get("planner_source", ""))


def resolve(name: str, allow_code: bool = False, echo: bool | None = None) -> Model:
    """Return the Model for a zoo id (case-insensitive) or a config.json path; with `allow_code=True`
    also for `package.module:function` or `path/to/model.py:function`, which imports and runs that code.

    Only a command-line argument or a Python caller may set allow_code: names read from data files
    (scenarios, --configs rows, uploads) never do, so a file cannot make planner run code.
    """
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("a model name is needed: a zoo id, a config.json path or (command line only) "
                          "package.module:function")
    if len(name) > MAX_NAME_CHARS:
        raise ConfigError(f"model name of {len(name):,} characters; the limit is {MAX_NAME_CHARS:,}")
    ids = planner_models.zoo_ids()
    key = name.strip().lower()
    if key in ids:
        return _zoo_model(key)
    path = Path(name)
    try:
        is_file, exists = path.is_file(), path.exists()
    except (OSError, ValueError):
        is_file = exists = False
    if path.suffix == ".json" or is_file:
        if not is_file:
            raise ConfigError(f"config file '{name}' does not exist")
        raw = parse_json(read_text(path, "config.json", MAX_CONFIG_BYTES), name)
        # a file named by a data file is not echoed back in errors: it may be any JSON file (`echo`: the caller
        # says the user named it; default: a caller that may run code is the user)
        return _from_config(raw, str(path), str(path), str(path), echo=allow_code if echo is None else echo)
    if ":" in name and not exists:
        if not allow_code:
            raise ConfigError(f"'{name}' names Python code (package.module:function); files and uploads may name only "
                              f"zoo ids or config.json files. Zoo ids: {', '.join(ids)}")
        return _custom(name)
    raise UnknownNameError("model", name, ids)
