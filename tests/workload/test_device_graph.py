"""Folding by layer is exact: first + L x layer + last equals the full capture."""

import pytest

from planner.workload.counting import count
from planner.workload.device_graph import device_graph
from planner.workload.graphs import Workload, build_graph
from planner.workload.parallelism import Parallelism
from planner.workload.zoo import resolve

CASES = [("llama-2-7b", Workload("prefill", 2, 128)), ("llama-2-7b", Workload("decode", 4, context_len=300)),
         ("llama-2-7b", Workload("training", 1, 128)), ("mixtral-8x7b", Workload("training", 1, 32)),
         ("gpt2", Workload("training", 2, 64)), ("gpt-j-6b", Workload("decode", 2, context_len=100)),
         ("bert-base", Workload("training", 2, 64)), ("vit-b-16", Workload("forward", 2)),
         ("resnet50", Workload("forward", 2))]


@pytest.mark.parametrize("model_id,workload", CASES, ids=[f"{m}-{w.mode}" for m, w in CASES])
def test_folded_graph_equals_full_capture(model_id, workload):
    model = resolve(model_id)
    full = build_graph(model, workload)
    total = count(full.graph).total
    dg = device_graph(model, workload)
    folded = dg.total()
    assert folded.flop == pytest.approx(total.flop, rel=1e-12)
    assert folded.bytes_read == pytest.approx(total.bytes_read, rel=1e-12)
    assert folded.bytes_written == pytest.approx(total.bytes_written, rel=1e-12)
    assert dg.first.params + dg.last.params + dg.num_layers * dg.layer.params == full.params
    saved = sum(b for _, b in full.graph.saved_bytes)
    folded_saved = dg.first.saved_bytes + dg.last.saved_bytes + dg.num_layers * dg.layer.saved_bytes
    assert folded_saved == pytest.approx(saved, rel=0.01)


def test_tensor_parallel_shard_divides_the_layer_work():
    model = resolve("llama-2-7b")
    w = Workload("prefill", 1, 512)
    one, four = device_graph(model, w), device_graph(model, w, Parallelism(tp=4))
    matmul = lambda dg: sum(op.cost.flop * op.count for op in dg.layer.ops if op.category == "matmul")
    # every layer GEMM is split 4 ways
    assert matmul(four) == pytest.approx(matmul(one) / 4)
    assert four.layer.params == pytest.approx(one.layer.params / 4, rel=0.001)


def test_pipeline_stages_split_the_layers():
    dg = device_graph(resolve("llama-2-7b"), Workload("decode", 1, context_len=64), Parallelism(pp=3))
    # 32 layers over 3 stages: 11, 11, 10
    assert [dg.layers_on_stage(s) for s in range(3)] == [11, 11, 10]


DERIVED_CASES = [
    ("llama-2-7b", Workload("prefill", 9, 96, engine="vllm"), 1),
    ("llama-2-7b", Workload("decode", 64, context_len=77, engine="eager"), 1),
    ("llama-2-7b", Workload("decode", 17, context_len=300, engine="vllm"), 4),  # tp 4: derived across widths too
    ("llama-2-7b", Workload("training", 5, 32, engine="eager"), 1),
    ("llama-2-7b", Workload("prefill", 8, 64, dtype="quant=fp8", engine="trtllm"), 2),
    ("llama-3.1-8b", Workload("prefill", 12, 128, dtype="bf16,kv=fp8", engine="sglang"), 1),
    ("llama-2-7b", Workload("decode", 9, context_len=77, dtype="w4a16", engine="vllm"), 1),
    ("gemma-2-9b", Workload("prefill", 6, 64, engine="vllm"), 1),
    ("gpt2", Workload("decode", 32, context_len=50, engine="compile"), 1),
    ("bert-base", Workload("training", 4, 32), 1),
    ("resnet50", Workload("inference", 8, image_size=64), 1),
    ("vit-b-16", Workload("inference", 7), 1),
]


@pytest.mark.parametrize("model_id,workload,tp", DERIVED_CASES,
                         ids=[f"{m}-{w.mode}-{w.batch}-{w.dtype}-{w.engine}-tp{t}" for m, w, t in DERIVED_CASES])
def test_a_device_graph_derived_from_the_anchor_batches_equals_the_built_one(model_id, workload, tp):
    """device_graph._derived_device_graph (each lowered op along the line between the batch-2 and batch-3 device
    graphs) gives what lowering and folding the batch-B graph gives: the same ops in the same order, counts,
    fusions, costs, parameters and saved bytes; or it declines (a quantized width) and the graph is built."""
    from planner.workload.device_graph import _built_device_graph, _derived_device_graph
    from planner.workload.rebatch import NotAffine

    model = resolve(model_id)
    built = _built_device_graph(model, workload, tp, 1)
    try:
        derived = _derived_device_graph(model, workload, tp, 1)
    except NotAffine:
        assert workload.dtype != "bf16"  # only a quantized width (fractional bits) declines here
        return
    assert (derived.workload, derived.parallelism, derived.config, derived.num_layers, derived.dtype) == \
        (built.workload, built.parallelism, built.config, built.num_layers, built.dtype)
    for a, b in ((derived.first, built.first), (derived.layer, built.layer), (derived.last, built.last)):
        assert (a.params, a.saved_bytes) == (b.params, b.saved_bytes)
        assert [(o.record, o.category, o.cost, o.count, o.absorbed) for o in a.ops] == \
            [(o.record, o.category, o.cost, o.count, o.absorbed) for o in b.ops]
    assert device_graph(model, workload, Parallelism(tp=tp)).layer.ops == derived.layer.ops


@pytest.mark.parametrize("workload,what", [
    (Workload("decode", 2**20 + 1, context_len=8, engine="vllm"), "batch"),  # past LIMITS["batch"]
    (Workload("decode", 2**20, context_len=4096, engine="vllm"), "tokens"),  # 2^20 x 4097 > 2^32 in one step
])
def test_a_derived_device_graph_keeps_the_limits_of_a_built_one(workload, what):
    """A device graph at a batch past the anchors is resolved at its own batch: a batch or a step of tokens
    over the limits is refused there as a built graph refuses it, not derived from the anchors below them."""
    from planner.errors import ConfigError

    with pytest.raises(ConfigError, match=what):
        device_graph(resolve("llama-2-7b"), workload)


@pytest.mark.parametrize("batch", [512, 1000])
def test_derived_device_graphs_at_large_batches_equal_the_built_ones(batch):
    """The fusions of the anchors hold at large batches too (decode and prefill, eager and vLLM)."""
    from planner.workload.device_graph import _built_device_graph, _derived_device_graph

    model = resolve("llama-3.1-8b")
    for workload in (Workload("decode", batch, context_len=600, engine="vllm"),
                     Workload("prefill", batch, 16, engine="eager")):
        built, derived = _built_device_graph(model, workload, 1, 1), _derived_device_graph(model, workload, 1, 1)
        for a, b in ((derived.first, built.first), (derived.layer, built.layer), (derived.last, built.last)):
            assert [(o.record, o.category, o.cost, o.count, o.absorbed) for o in a.ops] == \
                [(o.record, o.category, o.cost, o.count, o.absorbed) for o in b.ops]
