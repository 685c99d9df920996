"""A user's own model, `package.module:function` returning (nn.Module, example inputs), and its batch.

The batch of a user's model is found by the first rule that applies:

1. The function has a parameter named `batch`: planner calls fn(batch=B) for a batch of B. Its example
   (what `count` and `predict` run when --batch is not given) is fn(batch=D), D the parameter's default
   where that is a positive integer, else 1.
2. Otherwise the function is called with no arguments, and dim 0 of its example inputs is the batch when
   every tensor among them (inside tuples, lists and dicts too) has a dim 0 and all have the same size
   there. A batch of B gives each of those tensors B rows, the example's rows in turn (row i is the
   example's row i mod D), so token ids stay valid on a real device; on meta only the shape changes.
   Everything that is not a tensor is passed as given.
3. Otherwise the batch cannot be found (no tensor input, a 0-dimensional tensor, or first dimensions that
   differ, such as a mask [S, S] beside x [B, S, H]): the example runs as given, counted as a batch of 1,
   and any other batch is refused with the reason.

What the model takes, for labels, is read from the first tensor input: integers [B, S] are sequences of
S tokens, floating-point [B, C, H, W] with C <= 4 channels (grey, RGB, RGBA) images, anything else
samples of its shape without dim 0.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import nn

from planner.errors import ConfigError

TAKES = {"tokens": "sequence", "images": "image", "samples": "sample"}
"""What a user's model takes -> the noun of one item of its batch (rates are per item: sequences/s)."""


@dataclass(frozen=True, slots=True)
class Example:
    """What a user's function returns when called for its example, as far as its batch goes."""

    batch: int | None
    """The example's batch (None: the batch dimension cannot be found)."""
    why: str
    """Why the batch dimension cannot be found ("" when it is found)."""
    takes: str
    """"tokens", "images" or "samples" (TAKES)."""
    item: tuple[int, ...]
    """Shape of one item of the first tensor input (without dim 0); () when there is none."""
    by_argument: bool
    """True when the function takes a `batch` parameter (rule 1)."""

    def noun(self, count: int = 2) -> str:
        """An item of the batch: "sequence", "image" or "sample", plural unless `count` is 1."""
        return TAKES[self.takes] + ("" if count == 1 else "s")

    def label(self, batch: int) -> str:
        """The batch as a phrase: "batch 8 sequences of 128 tokens", "batch 4 images of 3x224x224",
        "batch 32 samples of shape [64]", or, with no batch dimension, the example as given."""
        if self.batch is None:
            return f"the example's inputs as given, counted as batch 1 (no batch dimension: {self.why})"
        if self.takes == "tokens":
            return f"batch {batch:,} {self.noun(batch)} of {self.item[0]:,} tokens"
        if self.takes == "images":
            return f"batch {batch:,} {self.noun(batch)} of {'x'.join(str(d) for d in self.item)} (CxHxW)"
        shape = f" of shape [{', '.join(str(d) for d in self.item)}]" if self.item else ""
        return f"batch {batch:,} {self.noun(batch)}{shape}"


@dataclass(frozen=True, slots=True, eq=False)
class UserFunction:
    """The factory of a user's model: called with a batch (or None for the example), it returns
    (module, example inputs as a tuple) built on the current default device. Equal only to itself (a
    module imported again under the same name is another function)."""

    spec: str
    """The `package.module:function` it was named by."""
    fn: Callable
    """The user's function."""

    def __call__(self, batch: int | None = None) -> tuple[nn.Module, tuple]:
        default = _batch_default(self.fn)
        if default is not None:  # rule 1: the function makes its own inputs at any batch
            return self._call(batch=batch or default)
        module, inputs = self._call()
        if batch is None:
            return module, inputs
        found, why = find_batch(inputs)
        if found is None:
            if batch == 1:
                return module, inputs
            raise refusal(self.spec, batch, why)
        return module, inputs if batch == found else _rebatch(inputs, batch)

    def example(self) -> Example:
        """The example's batch and what it takes (built once, on meta)."""
        return _example(self)

    def _call(self, **kwargs) -> tuple[nn.Module, tuple]:
        try:
            result = self.fn(**kwargs)
        except (Exception, SystemExit) as exc:
            called = "with batch=B (it has a `batch` parameter)" if kwargs else "with no arguments"
            raise ConfigError(f"'{self.spec}' raised {type(exc).__name__}: {first_line(exc)} (it is called "
                              f"{called} and must return (nn.Module, example inputs))") from None
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], nn.Module)):
            raise ConfigError(f"'{self.spec}' must return (nn.Module, example inputs), got {type(result).__name__}")
        inputs = result[1] if isinstance(result[1], tuple) else (result[1],)
        return result[0], inputs


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, at most 200 characters."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return line if len(line) <= 200 else line[:197] + "..."


def refusal(spec: str, batch: int, why: str) -> ConfigError:
    """The error for a batch other than 1 on a model whose batch dimension cannot be found."""
    return ConfigError(f"cannot run '{spec}' at batch {batch:,}: the batch dimension of its example inputs cannot "
                       f"be found ({why}); give the function a `batch` parameter (planner calls fn(batch=B)), make "
                       "dim 0 of every input tensor the batch, or leave --batch out to run the example as given")


def _batch_default(fn: Callable) -> int | None:
    """Rule 1: the example batch of a function with a `batch` parameter (its default where that is a
    positive int, else 1); None when it has none."""
    try:
        param = inspect.signature(fn).parameters.get("batch")
    except (TypeError, ValueError):  # a callable whose signature cannot be read: no batch parameter
        return None
    if param is None or param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
        return None
    default = param.default
    return default if isinstance(default, int) and not isinstance(default, bool) and default >= 1 else 1


def _tensors(value) -> list[torch.Tensor]:
    """Every tensor in `value`, through tuples, lists and dict values, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def find_batch(inputs: tuple) -> tuple[int | None, str]:
    """Rule 2: (the batch, "") when dim 0 of every tensor among `inputs` has one size; else (None, why)."""
    tensors = _tensors(inputs)
    if not tensors:
        return None, "its example inputs hold no tensor"
    if any(t.dim() == 0 for t in tensors):
        return None, "a 0-dimensional tensor among its example inputs has no dim 0"
    sizes = sorted({t.shape[0] for t in tensors})
    if len(sizes) > 1:
        return None, f"dim 0 of its example input tensors differs ({', '.join(str(s) for s in sizes)})"
    return sizes[0], ""


def _rebatch(value, batch: int):
    """`value` with dim 0 of every tensor made `batch`, the rows repeated in turn."""
    if isinstance(value, torch.Tensor):
        rows = torch.arange(batch, device=value.device) % value.shape[0]
        return value.index_select(0, rows)
    if isinstance(value, tuple):
        return tuple(_rebatch(v, batch) for v in value)
    if isinstance(value, list):
        return [_rebatch(v, batch) for v in value]
    if isinstance(value, dict):
        return {k: _rebatch(v, batch) for k, v in value.items()}
    return value


@lru_cache(maxsize=64)
def _example(factory: UserFunction) -> Example:
    by_argument = _batch_default(factory.fn)
    with torch.device("meta"):
        _, inputs = factory()
    batch, why = (by_argument, "") if by_argument is not None else find_batch(inputs)
    tensors = _tensors(inputs)
    first = tensors[0] if tensors else None
    item = tuple(first.shape[1:]) if first is not None and first.dim() else ()
    takes = "samples"
    if first is not None and batch is not None:
        if len(item) == 1 and not first.is_floating_point() and not first.is_complex() and first.dtype != torch.bool:
            takes = "tokens"
        elif len(item) == 3 and item[0] <= 4 and first.is_floating_point():
            takes = "images"
    return Example(batch=batch, why=why, takes=takes, item=item, by_argument=by_argument is not None)


def example_of(model) -> Example | None:
    """The example of a user's model (a zoo.Model whose factory is a UserFunction); None for others."""
    return model.factory.example() if isinstance(model.factory, UserFunction) else None


def default_batch(model) -> int:
    """The batch a command runs when --batch is not given: a user's model's example batch (1 where its
    batch dimension cannot be found), 1 for every other model."""
    example = example_of(model)
    return example.batch or 1 if example is not None else 1


def check_batch(model, batch: int) -> None:
    """Raise ConfigError when `batch` cannot be run on a user's model (no batch dimension, batch != 1)."""
    example = example_of(model)
    if example is not None and example.batch is None and batch != 1:
        raise refusal(model.name, batch, example.why)
