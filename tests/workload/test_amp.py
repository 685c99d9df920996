"""Mixed-precision training as users run it (planner/workload/amp.py, graphs.MIXED_PRECISION)."""

from __future__ import annotations

import pytest

from planner.predict.api import Request, predict
from planner.workload.graphs import Workload, build_graph, resolve_workload
from planner.workload.zoo import resolve

GPT2_PARAMS = 124_439_808


def _casts(graph, phase: str, src: str, dst: str) -> tuple[int, int]:
    """(number, input elements) of aten._to_copy records of `phase` from dtype `src` to `dst`."""
    n = elements = 0
    for r in graph.records:
        if r.op.startswith("aten._to_copy") and r.phase == phase:
            if r.tensors()[0].dtype == src and r.outputs[0].dtype == dst:
                n += 1
                elements += r.tensors()[0].touched
    return n, elements


def test_autocast_casts_each_weight_once_per_forward_and_its_gradient_back():
    g = build_graph(resolve("gpt2"), Workload("training", 2, 64, mixed_precision="amp"))
    assert g.params == GPT2_PARAMS
    # weights cast to bf16: every parameter but the position table (F.embedding is not autocast) and the
    # 25 LayerNorms (fp32 ops): 124,439,808 - 1,024 x 768 - (12 x 2 + 1) x 2 x 768 = 123,614,976; the
    # tied token table is cast once for the LM head (autocast's weight cache), not again
    weights = GPT2_PARAMS - 1024 * 768 - 25 * 2 * 768
    # activations cast: the fp32 LayerNorm output into c_attn and c_fc of each layer and into the head:
    # (12 x 2 + 1) x 2 x 64 tokens x 768 = 2,457,600
    activations = 25 * 2 * 64 * 768
    n, elements = _casts(g.graph, "forward", "float32", "bfloat16")
    assert elements == weights + activations == 126_072_576
    # 97 weights (8 per layer with biases, and the head) and 25 activations, each cast back in backward
    assert n == 12 * 8 + 1 + 25
    assert _casts(g.graph, "backward", "bfloat16", "float32")[0] == n


def test_each_mode_keeps_its_weights_gradients_and_moments():
    model = resolve("gpt2")
    graphs = {m: build_graph(model, Workload("training", 2, 64, mixed_precision=m)) for m in ("amp", "master", "pure")}
    # master: the optimizer reads the bf16 gradient cast to fp32; pure and amp have no such cast in it
    for mode, g in graphs.items():
        n, _ = _casts(g.graph, "optimizer", "bfloat16", "float32")
        assert (n > 0) == (mode == "master"), mode
    # pure keeps no fp32 state at all: no fp32 tensor is written by the optimizer
    written = {o.dtype for r in graphs["pure"].graph.records if r.phase == "optimizer" for o in r.outputs}
    assert "float32" not in written


@pytest.mark.parametrize(("mode", "per_param"), [("amp", 4 + 2 + 4 + 8), ("master", 2 + 2 + 12), ("pure", 2 + 2 + 4)])
def test_training_memory_per_parameter(mode, per_param):
    # amp: fp32 weights + their bf16 casts held to the backward + fp32 gradients + fp32 m, v = 18 B;
    # master: bf16 weights + bf16 gradients + fp32 master, m, v = 16 B; pure: 2 + 2 + bf16 m, v = 8 B
    p = predict(Request("gpt2", "h100-sxm", mode="training", micro_batch=1, seq_len=64, mixed_precision=mode))
    m = p.memory
    assert m.weights_bytes + m.gradient_bytes + m.optimizer_bytes == pytest.approx(per_param * GPT2_PARAMS)


def test_the_engine_chooses_how_it_trains_a_16_bit_dtype():
    model = resolve("llama-3.1-8b")
    w = lambda engine, dtype="bf16": resolve_workload(model, Workload("training", 1, 128, dtype=dtype, engine=engine))  # noqa: E731
    assert w("eager").mixed_precision == "amp"  # PyTorch's recipe: torch.autocast
    assert w("compile").mixed_precision == "amp"
    assert w("megatron").mixed_precision == "master"  # Megatron-LM --bf16
    assert w("eager", "fp32").mixed_precision == "none"
    assert w("megatron", "quant=fp8").mixed_precision == "master"
    assert resolve_workload(model, Workload("prefill", 1, 128)).mixed_precision == "none"


def test_autocast_costs_what_the_casts_and_fp32_weights_add():
    kwargs = dict(mode="training", micro_batch=8, seq_len=1024, engine="eager")
    amp = predict(Request("gpt2", "h100-sxm", mixed_precision="amp", **kwargs)).metrics["step_time_s"]
    pure = predict(Request("gpt2", "h100-sxm", mixed_precision="pure", **kwargs)).metrics["step_time_s"]
    # measured on the H100: 43.3 ms under autocast against 38.6 ms in bf16 (1.12x; the H200 1.04x,
    # benchmarks/data/measured/*/probe/gpu_probe.json); predicted 1.10x
    assert 1.0 < amp / pure < 1.2


@pytest.mark.parametrize(("optimizer", "bytes_per_param", "kernels"), [("fused", 28, None), ("foreach", 84, None),
                                                                       ("loop", 84, 148 * 8)])
def test_each_adamw_implementation_moves_what_it_runs(optimizer, bytes_per_param, kernels):
    from planner.workload.counting import count

    # fp32 weights (amp): fused reads p, g, m, v and writes p, m, v: 7 x 4 = 28 B per parameter. foreach
    # and the loop run 8 passes: p *= 1 - lr wd (r4 w4), m.lerp(g) (r8 w4), v *= b2 (r4 w4),
    # v.addcmul(g, g) (r12 w4), sqrt(v) (r4 w4), / c2 (r4 w4), + eps (r4 w4), p.addcdiv(m, d) (r12 w4):
    # 52 read + 32 written = 84 B, 3x the fused kernel
    g = build_graph(resolve("gpt2"), Workload("training", 2, 64, mixed_precision="amp", optimizer=optimizer))
    ops = [o for o in count(g.graph).ops if o.record.phase == "optimizer" and o.category != "view"]
    moved = sum(o.cost.bytes_read + o.cost.bytes_written for o in ops)
    assert moved == bytes_per_param * GPT2_PARAMS
    if kernels is not None:  # the loop: 8 kernels for each of GPT-2's 148 parameter tensors
        assert len(ops) == kernels


def test_the_engine_picks_its_optimizer():
    model = resolve("gpt2")
    w = lambda engine: resolve_workload(model, Workload("training", 1, 64, engine=engine))  # noqa: E731
    assert (w("eager").optimizer, w("megatron").optimizer) == ("foreach", "fused")
    assert resolve_workload(model, Workload("prefill", 1, 64)).optimizer == "none"
