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
