"""Results of elementwise aten ops on contiguous meta tensors, made directly.

torch runs an elementwise op on the meta device through its Python reference implementation
(torch._refs and torch._prims): 115 us for one bf16 `mul` of [2, 1, 4096] by [4096] on a 2-core machine,
where making an empty tensor of the result's shape takes 5. A decoder layer's capture runs some twenty of
them (the rotary embedding, the residual adds, the gated MLP's product): made here, a Llama-2-7B layer's
decode capture takes 5.6 ms instead of 6.3 (the median of 10 on that machine). On meta only a result's
shape, dtype and strides exist, and for operands that are all contiguous they are known in closed form:
the broadcast shape, the promoted dtype (torch.result_type) and contiguous strides (TensorIterator keeps
its operands' layout, and theirs is the contiguous one). Contiguous here means torch.empty's strides for
the shape, a dimension of size 1 included: torch's is_contiguous ignores those, and the result keeps
them. Everything else, a strided or channels-last operand, an `out=` or in-place variant, an op not
listed, goes to torch.

tests/workload/test_meta_ops.py checks every result made here against torch's own, shape, strides and
dtype, over the captures of the zoo's model families, modes and precisions.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

_BINARY = frozenset({aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.pow.Tensor_Scalar,
                     aten.maximum.default, aten.minimum.default})
"""Functional binary ops whose result is their operands' broadcast shape at the promoted dtype."""
_UNARY = frozenset({aten.neg.default, aten.silu.default, aten.gelu.default, aten.relu.default, aten.exp.default,
                    aten.sigmoid.default, aten.tanh.default, aten.rsqrt.default, aten.sqrt.default, aten.sin.default,
                    aten.cos.default, aten.abs.default})
"""Functional unary ops whose result on a floating-point operand is its shape and dtype."""
_NUMBERS = (int, float)


def _contiguous(t: torch.Tensor) -> bool:
    """True when `t` has the strides torch.empty gives its shape, a dimension of size 1 included (torch's
    is_contiguous ignores those, but an elementwise result keeps its operand's stride there)."""
    expected = 1
    for size, stride in zip(reversed(t.shape), reversed(t.stride())):
        if stride != expected:
            return False
        expected *= size if size > 1 else 1
    return True


def elementwise_result(func, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The result torch's meta kernel gives for `func(*args, **kwargs)`, as an empty meta tensor, where
    `func` is a listed elementwise op and every tensor operand is a contiguous meta tensor; else None (the
    caller runs `func`)."""
    if func in _UNARY:
        if kwargs or len(args) != 1:
            return None  # gelu's approximate= and the like: torch's kernel
        x = args[0]
        if type(x) is not torch.Tensor or not x.is_meta or not x.is_floating_point() or not _contiguous(x):
            return None
        return torch.empty(x.shape, dtype=x.dtype, device="meta")
    if func not in _BINARY or len(args) != 2 or (kwargs and set(kwargs) != {"alpha"}):
        return None
    a, b = args
    shapes = []
    for v in (a, b):
        if type(v) is torch.Tensor:
            if not v.is_meta or not _contiguous(v):
                return None
            shapes.append(v.shape)
        elif type(v) not in _NUMBERS:  # bool, complex, a symbolic number: torch's kernel
            return None
    if not shapes:
        return None
    dtype = torch.result_type(a, b)
    if not dtype.is_floating_point:
        return None  # integer arithmetic (true division, overflow rules): torch's kernel
    shape = shapes[0] if len(shapes) == 1 or shapes[0] == shapes[1] else torch.broadcast_shapes(*shapes)
    return torch.empty(shape, dtype=dtype, device="meta")
