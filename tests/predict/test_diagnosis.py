"""Diagnoses name the real cause (issue 38, item 4): each note on what bounds a step (host dispatch,
exposed communication, pipeline bubble, memory-bound, compute-bound) gives a share of the predicted step
that these tests rebuild from the per-op rows, stage times and collectives the prediction is made of."""

from __future__ import annotations

import pytest

from planner.predict.api import Request, predict, target_of
from planner.predict.context import default_context
from planner.predict.diagnosis import METRICS, PREFIXES
from planner.predict.parallel import activation_bytes, collective_time_s, layer_comm_s, pipeline_hop_s
from planner.predict.timing import op_rows, stage_times
from planner.workload.device_graph import device_graph
from planner.workload.graphs import Workload
from planner.workload.parallelism import Parallelism
from planner.workload.zoo import resolve


def _note(p, cause: str) -> str | None:
    found = [n for n in p.notes if n.startswith(PREFIXES[cause])]
    assert len(found) <= 1
    return found[0] if found else None


def _says(p, cause: str, share: float) -> None:
    """The cause's note exists and prints `share` (and the metric is that share)."""
    assert p.metrics[METRICS[cause]] == pytest.approx(share, rel=1e-9, abs=1e-12)
    note = _note(p, cause)
    assert note is not None, p.notes
    assert f"{p.metrics[METRICS[cause]]:.0%} of each" in note


def _shares_sum_to_one(p) -> None:
    assert sum(p.metrics[key] for key in METRICS.values()) == pytest.approx(1.0, rel=1e-12)


def _decode_graphs(model, batch: int, input_len: int, output_len: int, engine: str, par: Parallelism):
    """The two decode steps TPOT is the mean of (planner/predict/inference.py)."""
    return [device_graph(model, Workload("decode", batch, context_len=c, dtype="bf16", engine=engine), par)
            for c in (input_len, input_len + output_len - 1)]


def test_a_tp8_decode_on_mi300x_waits_on_its_all_reduces_not_on_host_dispatch():
    """The defect: vLLM replays decode as CUDA graphs, so the device never waits on dispatch; the step
    waits on its tensor-parallel all-reduces (two per layer, one for the embedding), which the note names
    with their count and share."""
    req = Request("llama-3.1-70b", "mi300x", gpus=8, tp=8)
    p = predict(req)
    assert p.engine == "vllm" and p.metrics["output_len"] > 1
    assert p.metrics["host_wait_fraction"] == 0.0
    assert _note(p, "launch") is None
    ctx = default_context()
    target = target_of(req, ctx, "vllm")
    model = resolve("llama-3.1-70b")
    # 80 layers x 2 + 1 (vocabulary-parallel embedding) = 161 all-reduces of [1 token, 8192] x 2 B = 16,384 B
    assert model.config.num_layers == 80 and model.config.hidden_size == 8192
    dg = _decode_graphs(model, 1, p.metrics["input_len"], p.metrics["output_len"], "vllm", Parallelism(tp=8))[0]
    assert activation_bytes(dg, 1) == 1 * 8192 * 2
    one = collective_time_s("allreduce", 16384, 8, target.device, target.defaults, target.node_size, engine="vllm")
    share = 161 * one / p.metrics["tpot_s"]
    _says(p, "comm", share)
    # RCCL's LL ring on 8 MI300X: 12 + 14 x 0.8 = 23.2 us per 16 KiB all-reduce (nccl_model.rccl_best), 161 of them
    # a third or more of a decode step of the 70B model
    assert one == pytest.approx(23.2e-6 + 16384 / (0.5 * 448e9 * 0.8 * 8 / 14), rel=1e-6)
    assert share > 0.3
    assert p.metrics["collectives_per_step"] == 161
    assert "161 tensor-parallel all-reduces" in _note(p, "comm")
    _shares_sum_to_one(p)


def test_host_dispatch_share_is_the_launch_wait_of_the_decode_steps():
    """Eager decode at batch 1 waits on the host's launches: the share is the stages' launch wait (the
    mean of TPOT's two steps) over TPOT; an engine replaying CUDA graphs waits for none."""
    req = Request("llama-3.1-8b", "h100-sxm", engine="eager", batch=1, input_len=128, output_len=64)
    p = predict(req)
    target = target_of(req, default_context(), "eager")
    waits = [stage_times(dg, target.device, target.efficiency, target.power)[0].bound_s["launch"]
             for dg in _decode_graphs(resolve("llama-3.1-8b"), 1, 128, 64, "eager", Parallelism())]
    assert min(waits) > 0
    _says(p, "launch", sum(waits) / 2 / p.metrics["tpot_s"])
    assert p.metrics["host_wait_fraction"] > 0.5
    _shares_sum_to_one(p)
    graphs = predict(Request("llama-3.1-8b", "h100-sxm", engine="vllm", batch=1, input_len=128, output_len=64))
    assert graphs.metrics["host_wait_fraction"] == 0.0 and _note(graphs, "launch") is None


def test_memory_bound_share_is_the_memory_bound_op_rows_of_the_decode_steps():
    """vLLM decode at batch 1 on one H100 reads the weights each step: the share is the time of the op rows
    whose roofline bound is memory (the --ops table), the mean of TPOT's two steps, over TPOT."""
    req = Request("llama-3.1-8b", "h100-sxm", batch=1, input_len=512, output_len=128)
    p = predict(req)
    target = target_of(req, default_context(), p.engine)
    seconds = [sum(r.time_s * r.count for r in op_rows(dg, target.device, target.efficiency, target.power)
                   if r.bound == "memory")
               for dg in _decode_graphs(resolve("llama-3.1-8b"), 1, 512, 128, p.engine, Parallelism())]
    share = sum(seconds) / 2 / p.metrics["tpot_s"]
    _says(p, "memory", share)
    assert share > 0.5
    assert p.notes.index(_note(p, "memory")) == 2  # after the engine's and the tier's notes: the largest cause
    _shares_sum_to_one(p)


def test_compute_bound_share_is_the_compute_bound_op_rows_of_the_prefill():
    """With one output token the diagnosed step is the prefill: 8 x 2,048 tokens are compute-bound, the
    share is the compute-bound op rows' time over TTFT."""
    req = Request("llama-3.1-8b", "h100-sxm", batch=8, input_len=2048, output_len=1)
    p = predict(req)
    target = target_of(req, default_context(), p.engine)
    dg = device_graph(resolve("llama-3.1-8b"), Workload("prefill", 8, 2048, dtype="bf16", engine=p.engine))
    seconds = sum(r.time_s * r.count for r in op_rows(dg, target.device, target.efficiency, target.power)
                  if r.bound == "compute")
    share = seconds / p.metrics["ttft_s"]
    _says(p, "compute", share)
    assert share > 0.5
    assert "of each prefill" in _note(p, "compute")
    _shares_sum_to_one(p)


def test_compute_bound_share_of_a_training_step_is_its_compute_bound_op_rows():
    """One device, one micro-batch, no recompute: the step is the forward, backward and optimizer ops once
    (plus any launch wait), and the compute-bound share is their compute-bound rows over the step."""
    req = Request("llama-3.1-8b", "h100-sxm", mode="training", seq_len=2048, micro_batch=2)
    p = predict(req)
    assert p.metrics["microbatches"] == 1
    target = target_of(req, default_context(), p.engine)
    w = Workload("training", 2, 2048, dtype="bf16", engine=p.engine, mixed_precision=req.mixed_precision,
                 optimizer=req.optimizer)
    dg = device_graph(resolve("llama-3.1-8b"), w)
    rows = op_rows(dg, target.device, target.efficiency, target.power)
    [stage] = stage_times(dg, target.device, target.efficiency, target.power)
    assert p.metrics["step_time_s"] == pytest.approx(stage.time_s, rel=1e-12)
    _says(p, "compute", sum(r.time_s * r.count for r in rows if r.bound == "compute") / stage.time_s)
    assert p.metrics["memory_bound_fraction"] == pytest.approx(
        sum(r.time_s * r.count for r in rows if r.bound == "memory") / stage.time_s, rel=1e-9)
    _shares_sum_to_one(p)


def test_training_bubble_is_pp_minus_1_slots_of_m_plus_pp_minus_1():
    """1F1B with pp 4 and M 4: the pipeline is (4 + 3) slots of the slowest micro-batch, 3 of them
    bubble, so bubble / pipeline = 3/7 (the pipeline is the step less the optimizer and the exposed
    data-parallel communication)."""
    req = Request("llama-3.1-8b", "h100-sxm", gpus=8, pp=4, dp=2, mode="training", seq_len=4096, micro_batch=1,
                  global_batch=8)
    p = predict(req)
    m = p.metrics
    assert m["microbatches"] == 4  # 8 / (micro-batch 1 x dp 2)
    step = m["step_time_s"]
    pipeline = step - m["optimizer_s"] - m["dp_comm_exposed_s"]
    bubble = m["pipeline_bubble_fraction"] * step
    assert bubble / pipeline == pytest.approx(3 / 7, rel=1e-9)
    _says(p, "bubble", m["pipeline_bubble_fraction"])
    assert "(pp-1)/(M+pp-1) = 43%" in _note(p, "bubble")  # 3/7
    # 4 micro-batches x 2 pipeline sends + 1 data-parallel gradient all-reduce
    assert m["collectives_per_step"] == 4 * 2 + 1
    _shares_sum_to_one(p)


def test_inference_bubble_is_the_other_stages_time_on_the_slowest_stages_device():
    """A batch passes pp 2 stages one after another: the slowest stage's device idles while the other
    stage works; the share is that stage's ops and collectives over the pass."""
    req = Request("llama-3.1-8b", "h100-sxm", gpus=2, pp=2, batch=1, input_len=512, output_len=64)
    p = predict(req)
    target = target_of(req, default_context(), p.engine)
    idle = []
    for dg in _decode_graphs(resolve("llama-3.1-8b"), 1, 512, 64, p.engine, Parallelism(pp=2)):
        stages = stage_times(dg, target.device, target.efficiency, target.power)
        own = [st.time_s + layer_comm_s(dg, s, 1, target.device, target.defaults, target.node_size)
               for s, st in enumerate(stages)]
        wall = sum(own) + pipeline_hop_s(dg, 1, target.device, target.defaults, target.node_size)
        idle.append(min(own))
        assert wall > 0
    share = sum(idle) / 2 / p.metrics["tpot_s"]
    assert 0.4 < share < 0.5  # two near-equal stages: about (pp-1)/pp = 1/2, less the sends
    _says(p, "bubble", share)
    assert "2 stages one after another" in _note(p, "bubble")
    _shares_sum_to_one(p)
