"""planner/workload/meta_ops.py: every result it makes equals torch's own meta result, in shape, strides,
storage offset and dtype, over captures of the zoo's families, modes and precisions; and it hands back to
torch what it does not know."""

from dataclasses import replace

import pytest
import torch

import planner.workload.capture as capture_module
from planner.workload.graphs import Workload, build_graph
from planner.workload.meta_ops import elementwise_result
from planner.workload.zoo import resolve

aten = torch.ops.aten

CASES = [
    ("llama-2-7b", Workload(mode="prefill", batch=2, seq_len=96)),
    ("llama-2-7b", Workload(mode="decode", batch=1, context_len=77)),
    ("llama-2-7b", Workload(mode="training", batch=2, seq_len=32)),
    ("llama-2-7b", Workload(mode="training", batch=2, seq_len=32, mixed_precision="amp")),
    ("llama-2-7b", Workload(mode="decode", batch=3, context_len=77, dtype="w4a16")),
    ("llama-2-7b", Workload(mode="prefill", batch=2, seq_len=64, dtype="quant=fp8")),
    ("gemma-2-9b", Workload(mode="prefill", batch=2, seq_len=64)),
    ("mixtral-8x7b", Workload(mode="decode", batch=4, context_len=64)),
    ("deepseek-v3", Workload(mode="prefill", batch=1, seq_len=32)),
    ("gpt2", Workload(mode="training", batch=2, seq_len=64, dtype="fp32")),
    ("bert-base", Workload(mode="training", batch=2, seq_len=32)),
    ("resnet50", Workload(mode="training", batch=2, image_size=64)),
    ("vit-b-16", Workload(mode="inference", batch=2)),
    ("whisper-large-v3", Workload(mode="inference", batch=1)),
]


def _layout(t: torch.Tensor):
    return tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device.type


def test_every_result_made_directly_equals_torchs(monkeypatch):
    made = []

    def checked(func, args, kwargs):
        result = elementwise_result(func, args, kwargs)
        if result is not None:
            assert _layout(result) == _layout(func(*args, **kwargs)), str(func)
            made.append(str(func))
        return result

    monkeypatch.setattr(capture_module, "elementwise_result", checked)
    for name, workload in CASES:
        model = resolve(name)
        if getattr(model.config, "num_layers", 0) > 2:  # one layer shows every op kind at a fraction of the time
            model = replace(model, config=replace(model.config, num_layers=2))
        build_graph(model, workload)
    assert len(made) > 200 and {"aten.mul.Tensor", "aten.add.Tensor", "aten.silu.default"} <= set(made)


def test_what_it_does_not_know_goes_to_torch():
    meta = dict(device="meta")
    x = torch.empty(4, 8, dtype=torch.bfloat16, **meta)
    assert elementwise_result(aten.mul.Tensor, (x, x), {}) is not None
    assert elementwise_result(aten.mul.Tensor, (x.t(), x.t()), {}) is None  # strided operands
    assert elementwise_result(aten.mul_.Tensor, (x, x), {}) is None  # in place
    assert elementwise_result(aten.add.Tensor, (x, x), {"out": x}) is None  # out=
    ints = torch.empty(4, 8, dtype=torch.int64, **meta)
    assert elementwise_result(aten.div.Tensor, (ints, ints), {}) is None  # integer division rules
    assert elementwise_result(aten.neg.default, (ints,), {}) is None
    assert elementwise_result(aten.mul.Tensor, (x, True), {}) is None  # a bool operand
    assert elementwise_result(aten.gelu.default, (x,), {"approximate": "tanh"}) is None
    cpu = torch.empty(4, 8)
    assert elementwise_result(aten.mul.Tensor, (cpu, cpu), {}) is None  # not meta
    # broadcasting and promotion, against torch
    for a, b in [(x, torch.empty(8, dtype=torch.float32, **meta)), (torch.empty(4, 1, 8, **meta), x),
                 (x, 2.5), (3, x), (torch.empty((), dtype=torch.float32, **meta), x)]:
        got = elementwise_result(aten.mul.Tensor, (a, b), {})
        assert _layout(got) == _layout(torch.ops.aten.mul.Tensor(a, b))


@pytest.mark.parametrize("op", [aten.neg.default, aten.silu.default, aten.rsqrt.default, aten.cos.default])
def test_unary_results(op):
    x = torch.empty(2, 3, 5, dtype=torch.float16, device="meta")
    assert _layout(elementwise_result(op, (x,), {})) == _layout(op(x))
