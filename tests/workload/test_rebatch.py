"""planner/workload/rebatch.py: a graph at batch B derived from the captures at batch 2 and 3 equals the
graph captured at B, record by record (shapes, elements touched, storage offsets, arguments) and in the
bytes saved for backward."""

from dataclasses import replace

import pytest

from planner.workload import rebatch
from planner.workload.graphs import Workload, build_graph, resolve_workload
from planner.workload.zoo import resolve


def _one_layer(name: str):
    model = resolve(name)
    return replace(model, config=replace(model.config, num_layers=1)) if model.family == "decoder" else model


def _derived(model, workload):
    two = build_graph(model, replace(workload, batch=2))
    three = build_graph(model, replace(workload, batch=3))
    return rebatch.derive(two, three, resolve_workload(model, workload))


def _assert_same(derived, captured):
    assert derived.workload == captured.workload
    assert len(derived.graph.records) == len(captured.graph.records)
    assert derived.graph.records == captured.graph.records
    # storage offsets are not part of TensorMeta equality; the lowering tells chunks of a storage apart by them
    offsets = lambda g: [t.offset for r in g.graph.records for t in (*r.outputs, *r.tensors())]  # noqa: E731
    assert offsets(derived) == offsets(captured)
    assert derived.graph.saved_bytes == captured.graph.saved_bytes
    assert (derived.params, derived.param_by_top, derived.layer_params) == \
        (captured.params, captured.param_by_top, captured.layer_params)


CASES = [
    ("llama-2-7b", Workload(mode="prefill", seq_len=96)),
    ("llama-2-7b", Workload(mode="decode", context_len=77)),
    ("llama-2-7b", Workload(mode="training", seq_len=32)),
    ("llama-2-7b", Workload(mode="training", seq_len=32, mixed_precision="amp")),
    ("llama-2-7b", Workload(mode="decode", context_len=77, dtype="w4a16")),
    ("llama-2-7b", Workload(mode="prefill", seq_len=64, dtype="quant=fp8")),
    ("llama-2-7b", Workload(mode="decode", context_len=40, dtype="bf16,kv=fp8")),
    ("gemma-2-9b", Workload(mode="prefill", seq_len=64)),  # alternating sliding-window layers
    ("gpt2", Workload(mode="decode", context_len=50)),
    ("bert-base", Workload(mode="training", seq_len=32)),
    ("resnet50", Workload(mode="inference", image_size=64)),
    ("vit-b-16", Workload(mode="inference")),
]


@pytest.mark.parametrize("name,workload", CASES, ids=[f"{n}-{w.mode}-{w.dtype}-{w.mixed_precision}" for n, w in CASES])
def test_derived_graph_equals_the_captured_one(name, workload):
    model = _one_layer(name)
    for batch in (4, 7):
        w = replace(workload, batch=batch)
        assert rebatch.derivable(model, w)
        _assert_same(_derived(model, w), build_graph(model, w))


def test_a_large_batch_too():
    # B = 512: every batch-sized number is 512/2 = 256 times batch 2's; e.g. prefill's token count
    # 512 x 96 = 49,152 rows of the first projection's input
    model, w = _one_layer("llama-2-7b"), Workload(mode="prefill", seq_len=96, batch=512)
    derived, captured = _derived(model, w), build_graph(model, w)
    _assert_same(derived, captured)
    mm = next(r for r in derived.graph.records if r.packet == "aten.mm")
    assert mm.tensors()[0].shape[0] == 512 * 96


def test_which_graphs_are_derived():
    llama = _one_layer("llama-2-7b")
    assert not rebatch.derivable(llama, Workload(mode="prefill", batch=3))  # the anchors and batch 1 are captured
    assert not rebatch.derivable(llama, Workload(mode="prefill", batch=1))
    assert not rebatch.derivable(resolve("mixtral-8x7b"), Workload(mode="prefill", batch=8))  # experts: rounded routing
    assert not rebatch.derivable(resolve("stable-diffusion-1.5"), Workload(batch=8))  # a family not checked here


def test_graphs_that_differ_in_more_than_numbers_are_not_derived():
    model = _one_layer("gpt2")
    prefill = build_graph(model, Workload(mode="prefill", seq_len=16, batch=2))
    decode = build_graph(model, Workload(mode="decode", context_len=16, batch=3))
    with pytest.raises(rebatch.NotAffine):
        rebatch.derive(prefill, decode, resolve_workload(model, Workload(mode="prefill", seq_len=16, batch=8)))


def test_a_line_that_goes_below_zero_is_refused():
    # anchors swapped: sizes fall by one batch's worth per step, 2 - 1 x (9 - 2) < 0
    model = _one_layer("gpt2")
    w = Workload(mode="prefill", seq_len=16)
    two, three = build_graph(model, replace(w, batch=2)), build_graph(model, replace(w, batch=3))
    with pytest.raises(rebatch.NotAffine):
        rebatch.derive(three, two, resolve_workload(model, replace(w, batch=9)))


def test_graph_at_captures_when_the_anchors_disagree(monkeypatch):
    model, w = _one_layer("gpt2"), Workload(mode="prefill", seq_len=16, batch=6)
    monkeypatch.setattr(rebatch, "derive", lambda *a: (_ for _ in ()).throw(rebatch.NotAffine()))
    _assert_same(rebatch.graph_at(model, w), build_graph(model, w))


def test_predictions_are_unchanged(monkeypatch):
    """A prediction over derived graphs equals one over graphs captured at its batch."""
    from planner.predict import Request, predict
    from planner.workload.device_graph import clear_capture_caches

    req = Request("llama-2-7b", "h100-sxm", batch=24, input_len=300, output_len=40, tp=2)
    clear_capture_caches()
    derived = predict(req)
    monkeypatch.setattr(rebatch, "derivable", lambda model, workload: False)
    clear_capture_caches()
    captured = predict(req)
    clear_capture_caches()
    assert derived.as_dict() == captured.as_dict()


def test_an_anchor_batch_is_captured_once(monkeypatch):
    """A prediction at batch 2 and one at batch 8 (derived from batches 2 and 3) capture batch 2 once:
    graph_at(batch 2) is the anchor's own capture. Captures: batch 2, then batch 3 = 2."""
    rebatch.clear_anchors()
    calls = []
    real = rebatch.build_graph
    monkeypatch.setattr(rebatch, "build_graph", lambda m, w: calls.append(w.batch) or real(m, w))
    llama = _one_layer("llama-2-7b")
    w = Workload(mode="prefill", seq_len=32, batch=2)
    two = rebatch.graph_at(llama, w)
    rebatch.graph_at(llama, replace(w, batch=8))
    assert calls == [2, 3]
    assert rebatch.graph_at(llama, w) is two
    rebatch.clear_anchors()


def test_numbers_across_widths_are_the_fraction_arithmetic():
    # _number works across widths in integers: the same numbers, and the same refusals, as Fraction arithmetic
    from fractions import Fraction

    for tp in (3, 4, 6, 8, 16):
        steps = Fraction(2 * (tp - 1), tp)
        for x in (0, 1, 7, 64, 4096, 10**12 + 3):
            for y in (0, 1, 2, 5, 32, 4096, 8191, 2 * 10**12):
                v = x + (y - x) * steps
                expected = x if x == y else int(v) if v.denominator == 1 and v >= 0 else rebatch.NotAffine
                try:
                    got = rebatch._number(x, y, steps)
                except rebatch.NotAffine:
                    got = rebatch.NotAffine
                assert got == expected and type(got) is type(expected), (x, y, tp)


def test_records_alike_at_every_batch_are_the_first_anchors_own():
    # a record no number of which changes with the batch is batch 2's object itself, not a copy; the rest are
    # new records equal to the captured ones (test_derived_graph_equals_the_captured_one)
    model, w = _one_layer("llama-2-7b"), Workload(mode="prefill", seq_len=32, batch=8)
    two = build_graph(model, replace(w, batch=2))
    derived = rebatch.derive(two, build_graph(model, replace(w, batch=3)), resolve_workload(model, w))
    captured = build_graph(model, w)
    _assert_same(derived, captured)
    shared = [a is b for a, b in zip(derived.graph.records, two.graph.records)]
    assert any(shared) and not all(shared)
    for a, b, c in zip(derived.graph.records, two.graph.records, captured.graph.records):
        assert (a is b) == (b == c and all(t.offset == u.offset for t, u in zip((*b.outputs, *b.tensors()),
                                                                               (*c.outputs, *c.tensors()))))
