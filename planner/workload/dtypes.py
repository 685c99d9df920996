"""Logical data types of a workload: their storage width and the torch dtype used to capture them.

Graphs are captured on the meta device in a dtype torch supports for every op there (float32 or
bfloat16); the workload's logical dtype then sets the width every floating-point tensor is
counted at. Sub-byte types are stored in bits (fp4 = 4 bits per element).

Convention (documented in docs/counting.md): every floating-point tensor of the workload (weights,
activations, KV cache, gradients) is counted at the logical width; integer tensors (token ids,
indices) keep their own width. Optimizer state is counted as fp32 in training (mixed precision).
"""

from dataclasses import dataclass

import torch

from planner.errors import UnknownNameError


@dataclass(frozen=True, slots=True)
class DType:
    """A logical dtype."""

    name: str
    """Canonical name, e.g. "bf16"."""
    bits: int
    """Storage width of one element in bits."""
    capture: torch.dtype
    """The torch dtype the graph is captured in on the meta device."""


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("fp32", 32, torch.float32),
        # tf32 stores fp32 and runs matmuls on tensor cores at reduced mantissa.
        DType("tf32", 32, torch.float32),
        DType("bf16", 16, torch.bfloat16),
        DType("fp16", 16, torch.float16),
        DType("fp8", 8, torch.bfloat16),
        DType("int8", 8, torch.bfloat16),
        DType("fp4", 4, torch.bfloat16),
    )
}

_ALIASES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
            "float8": "fp8", "fp8_e4m3": "fp8", "e4m3": "fp8", "nvfp4": "fp4", "mxfp4": "fp4"}


def get_dtype(name: str) -> DType:
    """Return the logical dtype for `name` (case-insensitive; aliases like "bfloat16" accepted)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DTYPES:
        raise UnknownNameError("dtype", name, DTYPES)
    return DTYPES[key]


def torch_bits(dtype: torch.dtype) -> int:
    """Return the storage width in bits of a torch dtype (bool counts as 8)."""
    return torch.empty((), dtype=dtype, device="meta").element_size() * 8
