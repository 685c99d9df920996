"""Cross-check our counts against fvcore's FlopCountAnalysis on the same model and inputs.

fvcore traces the forward pass with torch.jit (on meta tensors here, so it costs no memory) and
counts one multiply-add as 1 "flop"; we count it as 2. Both count matrix products and
convolutions as multiply-adds, so those are compared, after normalizing fvcore's by 2. fvcore
counts norms and pooling in conventions of its own, and not fused attention at all: those are
shown, not compared.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

from planner.errors import UnsupportedError
from planner.workload.counting import Counts
from planner.workload.graphs import WorkloadGraph, build_inputs

CPU_TRACE_MAX_PARAMS = 1_000_000_000
"""Largest model traced on real CPU tensors for fvcore (4 GB of fp32 weights)."""

# fvcore operator name -> our category, for the operators both count as multiply-adds
_COMPARED = {"linear": "matmul", "matmul": "matmul", "addmm": "matmul", "bmm": "matmul", "mm": "matmul",
             "einsum": "matmul", "conv": "conv"}


@dataclass(frozen=True, slots=True)
class FvcoreComparison:
    """fvcore's counts next to ours."""

    fvcore_by_operator: dict[str, float]
    """fvcore's count per operator, normalized to 2 FLOP per multiply-add."""
    fvcore_unsupported: dict[str, int]
    """Operators fvcore skipped, with call counts."""
    ours_compared_flop: float
    """Our FLOP on the categories both count (matmul, conv)."""
    fvcore_compared_flop: float
    """fvcore's FLOP on the same operators, normalized (x2)."""

    @property
    def ratio(self) -> float:
        """ours / fvcore on the compared operators (1.0 is agreement)."""
        return self.ours_compared_flop / self.fvcore_compared_flop if self.fvcore_compared_flop else float("nan")


class _Bound(nn.Module):
    """Binds keyword arguments so torch.jit.trace sees positional tensors only."""

    def __init__(self, module: nn.Module, kwargs: dict):
        super().__init__()
        self.module = module
        self.kwargs = kwargs

    def forward(self, *args):
        out = self.module(*args, **self.kwargs)
        return out


def compare(wg: WorkloadGraph, counts: Counts) -> FvcoreComparison:
    """Run fvcore on the forward pass of `wg`'s model and compare with `counts`."""
    from fvcore.nn import FlopCountAnalysis

    if wg.workload.mode == "training":
        raise UnsupportedError("fvcore counts forward passes only; use --mode inference, prefill or decode")
    # torch.jit cannot trace every meta kernel (convolution fails): models that fit easily in
    # memory are traced on random CPU weights; larger ones on meta tensors.
    device = "cpu" if wg.params <= CPU_TRACE_MAX_PARAMS else "meta"
    module, args, kwargs, _ = build_inputs(wg.model, wg.workload, device=device)
    logging.getLogger("fvcore").setLevel(logging.ERROR)
    try:
        with torch.no_grad():
            analysis = FlopCountAnalysis(_Bound(module, kwargs).eval(), args)
            analysis.unsupported_ops_warnings(False)
            analysis.uncalled_modules_warnings(False)
            analysis.tracer_warnings("none")
            by_op = {k: 2.0 * v for k, v in analysis.by_operator().items()}
            unsupported = dict(analysis.unsupported_ops())
    except Exception as exc:  # fvcore/jit failures are reported, not raised as tracebacks
        raise UnsupportedError(f"fvcore could not trace {wg.model.name} on {device}: {type(exc).__name__}: {exc}") from None
    categories = set(_COMPARED.values())
    ours = sum(c.cost.flop for c in counts.ops if c.category in categories)
    theirs = sum(v for k, v in by_op.items() if k in _COMPARED)
    return FvcoreComparison(by_op, unsupported, ours, theirs)
