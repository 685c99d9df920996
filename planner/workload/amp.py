"""Mixed-precision training as PyTorch users run it: torch.autocast over fp32 weights, captured on meta.

`torch.autocast` does not act on meta tensors (it keys on the CUDA and CPU dispatch keys), so the
capture applies its policy itself, as a TorchFunctionMode around the forward pass
(pytorch.org/docs/stable/amp.html, "Autocast Op Reference", CUDA):

- ops that autocast to the 16-bit dtype (matmul, linear, convolutions, scaled dot-product attention,
  baddbmm, addmm, bmm, mm) cast their fp32 floating inputs to it; a weight (a leaf that requires grad)
  is cast once per forward and the cast reused, as autocast's weight cache does. The cast is an aten
  `_to_copy` (read 4 B, write 2 B per element), and autograd's backward of it casts the weight's
  gradient back to fp32 (read 2 B, write 4 B) before it accumulates into the fp32 `.grad`;
- ops that autocast to fp32 (layer_norm, group_norm, softmax, log_softmax, cross_entropy, nll_loss,
  mse_loss) cast 16-bit inputs to fp32;
- everything else runs on the types it gets (binary ops promote: a 16-bit matmul output added to the
  fp32 residual stream is fp32).

The optimizer then steps fp32 weights with fp32 gradients and moments (no master copy). What each
mode costs beside this: planner/workload/graphs.py (MIXED_PRECISION).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

LOW = frozenset({F.linear, F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d,
                 F.scaled_dot_product_attention, torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.baddbmm,
                 torch.Tensor.matmul, torch.Tensor.__matmul__})
"""Functions autocast runs in the 16-bit dtype ("CUDA Ops that can autocast to float16")."""
FP32 = frozenset({F.layer_norm, F.group_norm, F.softmax, F.log_softmax, F.cross_entropy, F.nll_loss, F.mse_loss,
                  torch.softmax, torch.log_softmax, torch.Tensor.softmax, torch.Tensor.log_softmax})
"""Functions autocast runs in fp32 ("CUDA Ops that can autocast to float32")."""


class Autocast(TorchFunctionMode):
    """Apply autocast's casting policy to `dtype` (bfloat16 or float16) on any device, meta included."""

    def __init__(self, dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        self.dtype = dtype
        self._weights: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def _cast(self, value, to: torch.dtype):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != to:
            if to == self.dtype and value.is_leaf and value.requires_grad:
                cached = self._weights.get(id(value))
                if cached is None or cached[0] is not value:
                    # keep the weight with its cast: its id is not reused while the entry lives
                    cached = self._weights[id(value)] = (value, value.to(to))
                return cached[1]
            return value.to(to)
        if isinstance(value, (list, tuple)):
            return type(value)(self._cast(v, to) for v in value)
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in LOW:
            args, kwargs = self._cast(args, self.dtype), {k: self._cast(v, self.dtype) for k, v in kwargs.items()}
        elif func in FP32:
            args = self._cast(args, torch.float32)
            kwargs = {k: self._cast(v, torch.float32) for k, v in kwargs.items()}
        return func(*args, **kwargs)
