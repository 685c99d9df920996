"""A traced aten op rebuilt as planner's OpRecord, counted with the same registry as a captured graph.

The profiler records an op's name without its overload ("aten::add_") and every schema argument in
order: tensors as dtype + sizes + strides, scalars and int lists as text, None (and types it does
not record: devices, generators, lists of optional tensors) as "". The rebuild picks the overload
whose schema the inputs fit, makes meta tensors of those sizes and strides, runs the op on the meta
device (no memory, no data: its outputs' shapes come from torch's own meta kernels) and records it
as capture does. planner.workload.counting then gives its FLOP, bytes and category.

Nothing from the trace ever runs as code: the name is looked up in `torch.ops.aten` only (a fixed
library of operators), every argument is a number, a bool, a list of those, or a meta tensor, and
factory ops run under `torch.device("meta")` so nothing is allocated.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import torch

from planner.trace.read import HostOp, Input
from planner.workload.capture import OpRecord, tensor_meta
from planner.workload.counting import ZERO_COST, OpCost, classify

TRACE_DTYPES = {
    "float": torch.float32, "double": torch.float64, "c10::Half": torch.float16, "c10::BFloat16": torch.bfloat16,
    "long int": torch.int64, "int": torch.int32, "short int": torch.int16, "signed char": torch.int8,
    "unsigned char": torch.uint8, "bool": torch.bool, "c10::Float8_e4m3fn": torch.float8_e4m3fn,
    "c10::Float8_e5m2": torch.float8_e5m2, "c10::complex<float>": torch.complex64,
    "c10::complex<double>": torch.complex128,
}
"""The profiler's names of tensor element types (c10's C++ names) -> torch dtypes."""
SCALAR_TYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
                6: torch.float32, 7: torch.float64, 9: torch.complex64, 10: torch.complex128, 11: torch.bool,
                15: torch.bfloat16, 23: torch.float8_e5m2, 24: torch.float8_e4m3fn}
"""c10::ScalarType enum values (c10/core/ScalarType.h) as the profiler prints a dtype argument."""
MEMORY_FORMATS = {0: torch.contiguous_format, 1: torch.preserve_format, 2: torch.channels_last,
                  3: torch.channels_last_3d}
MAX_NUMEL = 2**50
"""Largest tensor rebuilt (elements): beyond it the op is reported uncounted, never allocated."""
NO_WORK = frozenset({"aten.item", "aten.detach_", "aten.result_type", "aten._nnpack_available", "aten.is_nonzero",
                     "aten.record_stream", "aten.set_", "aten.size", "aten.stride", "aten.dim", "aten.numel",
                     "aten.is_floating_point", "aten.is_complex", "aten.can_cast", "aten.promote_types"})
"""Ops with no device work beyond what their children run (item: a _local_scalar_dense sync) or metadata only."""
_NAME = re.compile(r"aten::([a-z0-9_]{1,80})")
_NUMBER = re.compile(r"-?(\d+\.?\d*(e[-+]?\d+)?|\.\d+(e[-+]?\d+)?|inf|nan)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Counted:
    """What the registry says of one traced op."""

    category: str
    """A counting category ("matmul", "elementwise", ...), "view", "unsupported" (no formula), or
    "uncounted" (not an aten op, or one the trace does not describe well enough to rebuild)."""
    cost: OpCost
    record: OpRecord | None
    note: str = ""
    """Why an op is uncounted."""

    @property
    def counts(self) -> bool:
        """True when the op has a formula that does work (not a view, not unsupported, not uncounted)."""
        return self.category not in ("view", "unsupported", "uncounted")


NOT_ATEN = Counted("uncounted", OpCost(), None, "not an aten op")


def count_op(op: HostOp) -> Counted:
    """The registry's category and cost of one traced op (cached per name and inputs)."""
    return _count(op.name, op.inputs)


@lru_cache(maxsize=65536)
def _count(name: str, inputs: tuple[Input, ...]) -> Counted:
    m = _NAME.fullmatch(name)
    if m is None:
        return NOT_ATEN
    packet = getattr(torch.ops.aten, m.group(1), None)
    if packet is None or not hasattr(packet, "overloads"):
        return Counted("uncounted", OpCost(), None, "not in this torch's aten library")
    if f"aten.{m.group(1)}" in ZERO_COST:
        return Counted("view", OpCost(), None)
    if f"aten.{m.group(1)}" in NO_WORK:
        return Counted("view", OpCost(), None)
    fitting = [getattr(packet, name) for name in packet.overloads()
               if len(getattr(packet, name)._schema.arguments) == len(inputs)]
    if fitting and all(_is_view(o._schema) for o in fitting):
        return Counted("view", OpCost(), None)
    tried, refused = [], ""
    for overload in fitting:
        schema = overload._schema
        values = _bind(schema, inputs)
        if values is None:
            continue
        tried.append(overload)
        if _is_view(schema):
            return Counted("view", OpCost(), None)
        mutates = tuple(a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write)
        try:
            with torch.device("meta"):
                out = overload(*[v for _, v, kw in values if not kw], **{n: v for n, v, kw in values if kw})
        except NotImplementedError:
            refused = "torch has no meta kernel for it (its parent op, where counted, holds its work)"
            continue
        except Exception:  # noqa: BLE001 (a meta kernel that cannot run these inputs: try the next overload)
            refused = refused or "its meta kernel refused the recorded inputs"
            continue
        flat = out if isinstance(out, (tuple, list)) else (out,)
        rec = OpRecord(op=str(overload), packet=str(overload.overloadpacket), module="", phase="forward",
                       args=tuple((n, _meta(v)) for n, v, _ in values),
                       outputs=tuple(tensor_meta(t) for t in flat if isinstance(t, torch.Tensor)),
                       mutates=mutates, is_view=False)
        category, cost = classify(rec, torch.Tag.pointwise in overload.tags)
        return Counted(category, cost, rec)
    why = refused if tried else \
        "the recorded inputs fit none of its schemas (the profiler records no devices, generators, lists of " \
        "optional tensors, nor the shapes of long tensor lists)"
    return Counted("uncounted", OpCost(), None, why)


def _is_view(schema) -> bool:
    """Every result aliases an input that the op does not write (a view or metadata op)."""
    writes = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    return bool(schema.returns) and not writes and all(
        r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _meta(v):
    if isinstance(v, torch.Tensor):
        return tensor_meta(v)
    if isinstance(v, (list, tuple)):
        return tuple(_meta(x) for x in v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def _bind(schema, inputs: tuple[Input, ...]) -> list[tuple[str, object, bool]] | None:
    """(name, value, keyword-only) per schema argument, or None when the inputs do not fit this schema."""
    values = []
    for arg, inp in zip(schema.arguments, inputs):
        kind = str(arg.real_type)
        value = _value(kind, inp, arg)
        if value is _NO:
            return None
        values.append((arg.name, value, arg.kwarg_only))
    return values


class _Missing:
    pass


_NO = _Missing()


def _value(kind: str, inp: Input, arg):
    optional = kind.startswith("Optional[")
    base = kind[9:-1] if optional else kind
    if inp.type in TRACE_DTYPES:
        if base != "Tensor" and base != "Scalar":
            return _NO
        return _tensor(inp.type, inp.dims, inp.strides)
    if inp.type == "TensorList":
        if base not in ("List[Tensor]", "List[Optional[Tensor]]"):
            return _NO
        if not all(isinstance(d, tuple) for d in inp.dims):
            return _NO
        tensors = []
        strides = inp.strides if len(inp.strides) == len(inp.dims) else [()] * len(inp.dims)
        for dims, st in zip(inp.dims, strides):
            t = _tensor("float", dims, st)
            if t is _NO:
                return _NO
            tensors.append(t)
        return tensors
    if inp.type == "" or (not inp.value and inp.type not in ("Scalar", "ScalarList")):
        # the profiler recorded nothing: None where allowed, else the schema's default
        if base == "Device":
            return torch.device("meta")
        if optional:
            return None
        if arg.has_default_value():
            return arg.default_value
        return _NO
    if inp.type == "Scalar":
        return _scalar(base, inp.value)
    if inp.type == "ScalarList":
        if not base.startswith("List[") and base != "Scalar":
            return _NO
        items = [s.strip() for s in inp.value.strip("[]() ").split(",") if s.strip()]
        parsed = [_scalar(base[5:-1] if base.startswith("List[") else "Scalar", s) for s in items]
        return _NO if any(p is _NO for p in parsed) else parsed
    return _NO


def _scalar(base: str, text: str):
    text = text.strip()
    if base == "Device":
        return torch.device("meta")
    if text in ("True", "False"):
        if base in ("bool", "Scalar", "number"):
            return text == "True"
        return _NO
    if base == "str":
        return text
    if not _NUMBER.fullmatch(text):
        return _NO
    number = float(text)
    if base == "ScalarType":
        return SCALAR_TYPES.get(int(number), _NO) if number.is_integer() else _NO
    if base == "MemoryFormat":
        return MEMORY_FORMATS.get(int(number), _NO) if number.is_integer() else _NO
    if base == "Layout":
        return torch.strided if number == 0 else _NO
    if base in ("int", "SymInt"):
        return int(text) if re.fullmatch(r"-?\d+", text) and abs(int(text)) < 2**63 else _NO
    if base in ("float", "number", "Scalar"):
        return int(text) if re.fullmatch(r"-?\d+", text) and abs(int(text)) < 2**63 else number
    return _NO


def _tensor(type_name: str, dims: tuple, strides: tuple):
    if not all(isinstance(d, int) and d >= 0 for d in dims):
        return _NO
    if math.prod(dims) > MAX_NUMEL:
        return _NO
    dtype = TRACE_DTYPES[type_name]
    if len(strides) == len(dims) and all(isinstance(s, int) and s >= 0 for s in strides):
        return torch.empty_strided(dims, strides, dtype=dtype, device="meta")
    return torch.empty(dims, dtype=dtype, device="meta")
