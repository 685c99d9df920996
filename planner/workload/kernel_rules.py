"""An engine's rewrites of its lowered kernels that are not fusions (planner/workload/lowering.py fuses):

    channel padding     an ungrouped conv's input channels padded to the engine's vector width
                        (Engine.conv_channel_multiple: TensorRT's 3 -> 4); its FLOP grow, its bytes do not
    training BN reads   a training batch norm reading its activations twice, statistics then normalization
                        (Engine.batch_norm_reads: Inductor's split reductions)
    conv layout         every convolution named "convolution[NHWC]" where the engine runs the graph
                        channels-last (Engine.conv_layout: Inductor's layout optimization); a profile of
                        contiguous convolutions times it without cuDNN's layout transforms
                        (planner/hardware/profile_select.py)
    KV concatenation    a decode step's KV-cache write made a concatenation of the past and the new
                        (Engine.kv_update: transformers' DynamicCache)

Each takes the kernels in order and returns them rewritten; `apply` runs those the engine asks for.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from planner.workload.capture import OpRecord, TensorMeta
from planner.workload.counting import classify

if TYPE_CHECKING:
    from planner.workload.engines import Engine
    from planner.workload.lowering import Kernel

BATCH_NORM = frozenset({"aten.native_batch_norm", "aten._native_batch_norm_legit",
                        "aten._native_batch_norm_legit_no_training", "aten.cudnn_batch_norm", "aten.batch_norm",
                        "aten._batch_norm_no_update", "aten._batch_norm_with_update"})
"""Forward batch norm packets (training or inference: batch_norm_training tells)."""
BATCH_NORM_BACKWARD = {"aten.native_batch_norm_backward": ("grad_out", "input"),
                       "aten.batch_norm_backward": ("grad_out", "input"),
                       "aten.cudnn_batch_norm_backward": ("grad_output", "input")}
"""Backward batch norm packets and the activation-sized tensors each reads."""
PERSISTENT_REDUCTION_ELEMENTS = 64
"""Longest batch-norm reduction Inductor runs persistent, in one block that keeps its input for the pointwise
part: a channels-last batch norm reduces over N·H·W with the channels innermost, an outer reduction, whose
threshold is 64 elements (1,024 only for inner reductions: torch/_inductor/choices.py,
should_use_persistent_reduction, `{ReductionHint.INNER: 1024}.get(hint, 64)`); longer ones loop or split."""
INDUCTOR_MULTIPLIER = {"grouped": 1.358, "small": 0.783, "in_out": 0.725, "default": 0.823}
"""Inductor's estimate of a channels-last convolution's time over a contiguous one's, by kind, from its
microbenchmarks of TorchBench training convolutions: what decide_layout_opt weighs an inference graph's conv
FLOP with (torch/_inductor/graph.py, GraphLowering.decide_layout_opt, PyTorch 2.3 to 2.9)."""


def apply(kernels: list[Kernel], records: tuple[OpRecord, ...], categories: Sequence[str],
          engine: Engine) -> list[Kernel]:
    """`kernels` (lowered from `records`, in order) rewritten by the rules `engine` names."""
    if engine.conv_channel_multiple > 1:
        kernels = [padded(k, engine.conv_channel_multiple) if k.category == "conv" else k for k in kernels]
    if engine.batch_norm_reads > 1:
        kernels = [reread(k, engine.batch_norm_reads) if k.category == "norm" else k for k in kernels]
    if engine.conv_layout == "channels_last" and layout_optimized(records):
        kernels = [_channels_last(k) if k.category == "conv" else k for k in kernels]
    if engine.kv_update == "concatenate":
        kernels = concatenated(kernels, records, categories)
    return kernels


def batch_norm_training(rec: OpRecord) -> bool:
    """True for a forward batch norm that computes its statistics (training mode)."""
    return rec.packet in BATCH_NORM and bool(
        rec.arg("training", "no_training" not in rec.packet and "no_update" not in rec.packet))


def padded(k: Kernel, multiple: int) -> Kernel:
    """`k` with its convolution's input channels padded up to `multiple`: the anchor's input and weight
    shapes padded (so efficiency lookups see the padded reduction, C·R·S), its conv FLOP scaled by padded /
    real channels, and "[C 3->4]" in its name. The padded lanes are zeros made on chip: bytes as counted.
    `k` itself where no padding is needed or applies (a backward conv keeps its own shapes)."""
    rec = k.record
    weight, x = rec.arg("weight"), rec.arg("input")
    # the vectorized formats pad a tensor's C, not C per group: grouped (depthwise) and transposed convs
    # (whose weight's dim 1 is output channels) are left as they are
    if rec.packet != "aten.convolution" or not isinstance(weight, TensorMeta) or not isinstance(x, TensorMeta) \
            or len(weight.shape) < 2 or weight.shape[1] % multiple == 0 or rec.arg("groups", 1) != 1 \
            or rec.arg("transposed", False):
        return k
    c = weight.shape[1]
    channels = -(-c // multiple) * multiple
    conv_flop = 2.0 * math.prod(rec.outputs[0].shape) * math.prod(weight.shape[1:])
    extra_flop = conv_flop * (channels - c) / c

    def pad(t: TensorMeta, width: int) -> TensorMeta:
        return replace(t, shape=(t.shape[0], width) + t.shape[2:], touched=t.touched // t.shape[1] * width)

    args = tuple((name, pad(v, channels) if name in ("weight", "input") else v) for name, v in rec.args)
    name = rec.op.replace("convolution", f"convolution[C {c}->{channels}]", 1)
    return replace(k, record=replace(rec, op=name, args=args), cost=replace(k.cost, flop=k.cost.flop + extra_flop),
                   padding_flop=extra_flop)


def reread(k: Kernel, reads: int) -> Kernel:
    """`k` reading its batch norm's activations `reads` times where its anchor is a training batch norm,
    forward (its input) or backward (the gradient and the input), whose per-channel reduction over N·H·W is
    longer than PERSISTENT_REDUCTION_ELEMENTS: the statistics (backward: the two sums) are one pass and the
    normalization (backward: the input's gradient) another. `k` itself otherwise."""
    rec = k.record
    names = BATCH_NORM_BACKWARD.get(rec.packet) or (("input",) if batch_norm_training(rec) else ())
    tensors = [t for t in (rec.arg(n) for n in names) if isinstance(t, TensorMeta)]
    if not tensors or len(tensors[-1].shape) < 2 \
            or tensors[-1].numel // tensors[-1].shape[1] <= PERSISTENT_REDUCTION_ELEMENTS:
        return k
    extra_bytes = (reads - 1) * sum(t.bytes for t in tensors)
    return replace(k, cost=replace(k.cost, bytes_read=k.cost.bytes_read + extra_bytes))


def layout_optimized(records: tuple[OpRecord, ...]) -> bool:
    """Inductor's decide_layout_opt on a captured graph (PyTorch 2.3 to 2.9, torch/_inductor/graph.py), asked
    of the forward graph: channels-last when it has convolutions and fewer than 300 forward ops per
    convolution, and (training) no grouped convolution of more than one channel per group, no k > 1
    convolution with at least twice the input channels as output channels, not every convolution of 64
    channels or fewer; (inference) conv FLOP weighted by INDUCTOR_MULTIPLIER no more than unweighted. The
    backward graph has no forward convolutions of its own: its convolutions run on the channels-last tensors
    the forward saved."""
    forward = [r for r in records if r.phase == "forward"]
    convs = [r for r in forward if r.packet == "aten.convolution" and isinstance(r.arg("weight"), TensorMeta)]
    if not convs or len(forward) >= 300 * len(convs):
        return False

    def grouped(rec: OpRecord) -> bool:
        return rec.arg("groups", 1) > 1 and rec.arg("weight").shape[1] > 1  # weight [C_out, C_in / groups, *k]

    def small(rec: OpRecord) -> bool:
        w = rec.arg("weight").shape
        return w[0] <= 64 and w[1] <= 64

    def in_out(rec: OpRecord) -> bool:
        w = rec.arg("weight").shape
        return w[0] * 2 <= w[1] and len(w) > 2 and w[2] > 1

    if any(r.phase == "backward" for r in records):
        return not any(map(grouped, convs)) and not any(map(in_out, convs)) and not all(map(small, convs))
    kinds = ["grouped" if grouped(r) else "small" if small(r) else "in_out" if in_out(r) else "default"
             for r in convs]
    flop = [classify(r, False)[1].flop for r in convs]
    return sum(f * INDUCTOR_MULTIPLIER[k] for f, k in zip(flop, kinds)) <= sum(flop)


def _channels_last(k: Kernel) -> Kernel:
    # "aten.convolution.default" -> "aten.convolution[NHWC].default"; a backward's after "_backward"; a
    # padded kernel keeps its "[C 3->4]" after the tag
    op = re.sub(r"convolution(_backward)?", r"\g<0>[NHWC]", k.record.op, count=1)
    return replace(k, record=replace(k.record, op=op))


def concatenated(kernels: list[Kernel], records: tuple[OpRecord, ...], categories: Sequence[str]) -> list[Kernel]:
    """`kernels` with each write of new keys or values into a KV cache (a copy_ into a slice of a storage
    that an attention op then reads whole, [B, Hkv, P + S, D]) made a concatenation, torch.cat of the past
    and the new: the kernel also reads the P past positions and writes them again to a new tensor. A prefill
    into an empty cache (P = 0) and copies into storages no attention reads are left as they are."""
    caches: dict[int, TensorMeta] = {}  # storage -> the cache as an attention op reads it
    for rec, category in zip(records, categories):
        if category == "attention":
            for name in ("key", "value"):
                t = rec.arg(name)
                if isinstance(t, TensorMeta) and t.storage:
                    caches.setdefault(t.storage, t)
    out = []
    for k in kernels:
        dst = k.record.arg("self") if k.record.packet == "aten.copy_" else None
        cache = caches.get(dst.storage) if isinstance(dst, TensorMeta) and dst.storage else None
        if cache is not None and cache.bytes > dst.bytes:
            past_bytes = cache.bytes - dst.bytes
            k = replace(k, cost=replace(k.cost, bytes_read=k.cost.bytes_read + past_bytes,
                                        bytes_written=k.cost.bytes_written + past_bytes))
        out.append(k)
    return out
