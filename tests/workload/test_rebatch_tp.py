"""planner/workload/rebatch.py across tensor-parallel widths: the graph one device runs at width t, derived
from the graphs at widths 1 and 2, equals the graph captured at t record by record; widths where a
sharded dimension would be 1, leave a remainder, or meet block-wise scales are captured."""

from dataclasses import replace

import pytest

from planner.workload import rebatch
from planner.workload.graphs import Workload, build_graph
from planner.workload.parallelism import Parallelism, shard_config
from planner.workload.zoo import resolve


def _sharded(model, tp: int):
    """The 1-layer model one device runs at width `tp` (what device_graph captures)."""
    config = shard_config(model.config, Parallelism(tp=tp))
    return replace(model, config=replace(config, num_layers=1))


def _derived_and_captured(name: str, workload: Workload, tp: int):
    model = resolve(name)
    assert rebatch.tp_derivable(model, workload, tp)
    one, two = (build_graph(_sharded(model, t), workload) for t in rebatch.TP_ANCHORS)
    target = _sharded(model, tp)
    return rebatch.derive_tp(one, two, target, tp), build_graph(target, workload)


def _offsets(g):
    return [t.offset for r in g.graph.records for t in (*r.outputs, *r.tensors())]


CASES = [
    ("llama-2-7b", Workload(mode="prefill", batch=2, seq_len=96), 4),
    ("llama-2-7b", Workload(mode="decode", batch=3, context_len=77), 8),
    ("llama-2-7b", Workload(mode="decode", batch=1, context_len=77), 16),  # batch 1 too (captured at each width)
    ("llama-2-7b", Workload(mode="training", batch=2, seq_len=32), 8),
    ("llama-2-7b", Workload(mode="training", batch=2, seq_len=32, mixed_precision="amp"), 4),
    ("llama-2-7b", Workload(mode="prefill", batch=2, seq_len=64, dtype="quant=fp8"), 8),
    ("llama-2-7b", Workload(mode="decode", batch=2, context_len=40, dtype="bf16,kv=fp8"), 4),
    ("llama-3.1-8b", Workload(mode="training", batch=2, seq_len=32), 4),  # grouped-query: 2 KV heads per device
    ("gemma-2-9b", Workload(mode="prefill", batch=2, seq_len=64), 4),  # alternating sliding-window layers
]


@pytest.mark.parametrize("name,workload,tp", CASES, ids=[f"{n}-{w.mode}-{w.dtype}-tp{t}" for n, w, t in CASES])
def test_derived_width_equals_the_captured_one(name, workload, tp):
    derived, captured = _derived_and_captured(name, workload, tp)
    assert derived.workload == captured.workload and derived.model == captured.model
    assert derived.graph.records == captured.graph.records
    assert _offsets(derived) == _offsets(captured)  # not part of TensorMeta equality; the lowering reads them
    assert derived.graph.saved_bytes == captured.graph.saved_bytes
    assert (derived.params, derived.active_params, derived.param_by_top, derived.layer_params) == \
        (captured.params, captured.active_params, captured.param_by_top, captured.layer_params)


def test_a_sharded_number_follows_the_line_in_one_over_tp():
    # the query projection's output columns: 4096 at width 1 and 2048 at width 2, so at width 4
    # 4096 + (2048 - 4096) x (2 - 2/4) = 4096 - 3072 = 1024 = 4096 / 4
    derived, _ = _derived_and_captured("llama-2-7b", Workload(mode="prefill", batch=2, seq_len=96), 4)
    mm = next(r for r in derived.graph.records if r.packet == "aten.mm")
    assert mm.outputs[0].shape == (2 * 96, 1024)


def test_a_width_the_line_does_not_land_on_a_whole_number_is_refused():
    # width 3: 4096 + (2048 - 4096) x (2 - 2/3) = 4096 - 2730.67, not a whole number of columns
    model, w = resolve("llama-2-7b"), Workload(mode="prefill", batch=2, seq_len=16)
    one, two = (build_graph(_sharded(model, t), w) for t in rebatch.TP_ANCHORS)
    with pytest.raises(rebatch.NotAffine):
        rebatch.derive_tp(one, two, _sharded(model, 4), 3)


def test_which_widths_are_derived():
    llama2, llama3, w = resolve("llama-2-7b"), resolve("llama-3.1-8b"), Workload(mode="prefill", batch=2)
    assert rebatch.tp_derivable(llama2, w, 4) and rebatch.tp_derivable(llama2, w, 16)
    assert not rebatch.tp_derivable(llama2, w, 2)  # an anchor: captured
    assert rebatch.tp_derivable(llama3, w, 4)  # 8 KV heads: 2 per device
    assert not rebatch.tp_derivable(llama3, w, 8)  # 1 KV head per device broadcasts as batch 1 does
    assert not rebatch.tp_derivable(resolve("gpt2"), w, 8)  # 12 heads: a remainder
    assert not rebatch.tp_derivable(resolve("mixtral-8x7b"), w, 4)  # experts
    assert not rebatch.tp_derivable(llama2, replace(w, dtype="w4a16"), 4)  # ceil(K / 128) scales per row


def test_predictions_are_unchanged(monkeypatch):
    """A prediction at width 8 over the derived graph equals one over the graph captured at width 8."""
    from planner.predict import Request, predict
    from planner.workload import device_graph
    from planner.workload.device_graph import clear_capture_caches

    req = Request("llama-2-7b", "h100-sxm", gpus=8, tp=8, batch=24, input_len=300, output_len=40)
    clear_capture_caches()
    derived = predict(req)
    monkeypatch.setattr(device_graph, "tp_derivable", lambda *a: False)
    clear_capture_caches()
    captured = predict(req)
    clear_capture_caches()
    assert derived.as_dict() == captured.as_dict()
