"""Kernel time apart from dispatch, profiles per kernel library, and power under load (issue 20).

Closed forms against the shipped pytorch-eager profiles of the H100 and H200 (their dispatch block:
host_per_op_s, view_host_s, kernel_floor_s, isolated_call_s, after_launch_s, all measured), and
predictions against planner's own measurements of those GPUs (benchmarks/data/gpu_validate.json).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from planner.calibration.validate import isolated_call_s
from planner.hardware.profile_select import alignment_bytes
from planner.predict.api import Request, predict
from planner.predict.context import default_context
from planner.predict.ops import gemm_record
from planner.predict.roofline import op_time
from planner.predict.timing import host_dispatch_s, op_rows, stage_times
from planner.workload.device_graph import device_graph
from planner.workload.engines import get_engine
from planner.workload.counting import classify
from planner.workload.graphs import Workload, build_graph, resolve_workload
from planner.workload.zoo import resolve

ROOT = Path(__file__).resolve().parents[2]
MEASURED = json.loads((ROOT / "benchmarks" / "data" / "gpu_validate.json").read_text())


def _decode(engine: str):
    ctx = default_context()
    dev = ctx.device("h100-sxm")
    model = resolve("llama-3.1-8b")
    w = resolve_workload(model, Workload("decode", 1, context_len=2048, dtype="bf16", engine=engine))
    dg = device_graph(model, w)
    eff = ctx.efficiency(dev, get_engine(engine).libraries)
    return ctx, dev, dg, eff


def test_each_engine_takes_the_profile_of_its_kernel_library():
    ctx = default_context()
    h100 = ctx.device("h100-sxm")
    eager = ctx.efficiency(h100, get_engine("eager").libraries)
    assert (eager.tier, eager.profile.library) == ("measured", "pytorch-eager")
    assert eager.profile.name == "hardware_specs/calibration/h100-sxm/pytorch-eager.json"
    served = ctx.efficiency(h100, get_engine("vllm").libraries)
    assert (served.tier, served.profile.library) == ("published", "aiconfigurator")
    # no Inductor profile ships: torch.compile runs on the eager profile's kernels, band widened; the H100 compile
    # probe measured its kernel sums within 7% (median) of that profile's (benchmarks/gpu_validate.py compile_rows)
    compiled = ctx.efficiency(h100, get_engine("compile").libraries)
    assert (compiled.tier, compiled.profile.library) == ("cross-library", "pytorch-eager")
    assert compiled.band_fraction > eager.band_fraction
    # no TensorRT profile ships, and no measurement shows eager's kernels are TensorRT's: the datasheet tier with the
    # engine's rules (hardware_specs/engines/tensorrt.json `profiles`)
    assert ctx.efficiency(h100, get_engine("tensorrt").libraries).tier == "datasheet"
    # SGLang on an H100 has aiconfigurator's tables; with cross_library off the same, since they are its own
    sglang = ctx.efficiency(h100, get_engine("sglang").libraries)
    assert (sglang.tier, sglang.profile.library) == ("published", "aiconfigurator")
    # a neighbour of the same generation transfers the eager profile; another generation does not
    pcie = ctx.efficiency(ctx.device("h100-pcie"), get_engine("eager").libraries)
    assert pcie.tier == "transferred" and pcie.profile.library == "pytorch-eager"
    b200 = ctx.efficiency(ctx.device("b200"), get_engine("eager").libraries)
    assert (b200.tier, b200.profile.library) == ("cross-library", "aiconfigurator")
    # ... for its GEMMs only: the serving tables are measured to time eager's cuBLAS GEMMs (benchmarks/
    # cross_library.py: median |ln| 0.09 / 0.10 on the H100 / H200 against 0.32 / 0.35 from the datasheet); its
    # attention is not the serving stacks' kernel, so it is the datasheet tier's
    assert b200.categories == frozenset({"matmul"})
    # compile's: every kind but norms (Inductor's Triton reductions are not eager's batch norm kernels)
    assert "norm" not in compiled.categories and {"matmul", "conv", "elementwise", "attention"} <= compiled.categories
    records = build_graph(resolve("gpt2"), Workload("prefill", 1, 128)).graph.records
    classified = [classify(r, False) for r in records]
    for category in ("matmul", "attention"):
        rec, cost = next((r, c) for r, (cat, c) in zip(records, classified) if cat == category)
        datasheet = b200.fallback.efficiencies(rec, category, ctx.device("b200"))
        assert (b200.efficiencies(rec, category, ctx.device("b200")) == datasheet) == (category == "attention")
        assert b200.covers(rec, category) == (category == "matmul")
    # no measurement shows eager's ROCm GEMMs are aiter's tuned ones, nor Megatron's Transformer Engine kernels
    # another library's: the datasheet tier
    assert ctx.efficiency(ctx.device("mi300x"), get_engine("eager").libraries).tier == "datasheet"
    assert ctx.efficiency(ctx.device("b200"), get_engine("megatron").libraries).tier == "datasheet"
    # the JSON names the profile and its library
    p = predict(Request("llama-3.1-8b", "h100-sxm", batch=1, input_len=128, output_len=8, engine="eager"))
    assert p.as_dict()["profile"] == "hardware_specs/calibration/h100-sxm/pytorch-eager.json (pytorch-eager)"


def test_an_eager_decode_step_at_batch_1_is_host_bound_in_closed_form():
    ctx, dev, dg, eff = _decode("eager")
    d = eff.profile.dispatch
    host_op, host_view = host_dispatch_s(dg, dev, eff)
    assert (host_op, host_view) == (d["host_per_op_s"], d["view_host_s"])
    rows = op_rows(dg, dev, eff, ctx.power)
    kernels = sum(r.count for r in rows if r.category != "view")
    views = sum(op.count * n for part, n in ((dg.first, 1), (dg.layer, dg.num_layers), (dg.last, 1))
                for op in part.ops if op.category == "view")
    kernel_s = sum(r.time_s * r.count for r in rows)
    # 846 kernel ops and 1,189 views per step (32 layers of 26 + 37, embedding and rotary, head)
    assert (kernels, views) == (846, 1189)
    stage = stage_times(dg, dev, eff, ctx.power)[0]
    host_s = kernels * host_op + views * host_view  # 846 x 22.1 us + 1189 x 1.19 us = 20.1 ms
    assert host_s > kernel_s  # the GPU's kernels take 7.4 ms: it waits on the host
    assert stage.time_s == pytest.approx(host_s, rel=1e-12)
    assert stage.bound_s["launch"] == pytest.approx(host_s - kernel_s, rel=1e-9)
    # views cost the device nothing: no view row adds time
    assert all(r.time_s == 0 for r in rows if r.category == "view")


def test_a_cuda_graph_engine_pays_no_eager_dispatch():
    ctx, dev, dg, eff = _decode("trtllm")
    assert host_dispatch_s(dg, dev, eff) == (0.0, 0.0)
    stage = stage_times(dg, dev, eff, ctx.power)[0]
    kernel_s = sum(r.time_s * r.count for r in op_rows(dg, dev, eff, ctx.power))
    assert stage.bound_s["launch"] == 0.0
    assert stage.time_s == pytest.approx(kernel_s, rel=1e-12)
    # the eager step's excess over its own kernels is exactly kernels x dispatch (+ views x view dispatch)
    ctx, dev, edg, eeff = _decode("eager")
    rows = op_rows(edg, dev, eeff, ctx.power)
    e_kernels = sum(r.time_s * r.count for r in rows)
    n_k = sum(r.count for r in rows if r.category != "view")
    n_v = sum(op.count * n for part, n in ((edg.first, 1), (edg.layer, edg.num_layers), (edg.last, 1))
              for op in part.ops if op.category == "view")
    h_op, h_view = host_dispatch_s(edg, dev, eeff)
    eager_s = stage_times(edg, dev, eeff, ctx.power)[0].time_s
    assert eager_s - e_kernels == pytest.approx(n_k * h_op + n_v * h_view - e_kernels, rel=1e-12)


def test_an_isolated_eager_call_waits_for_its_launch():
    ctx = default_context()
    dev = ctx.device("h200-sxm")
    eff = ctx.efficiency(dev, get_engine("eager").libraries)
    d = eff.profile.dispatch
    # event time = isolated_call_s + max(kernel, after_launch_s): 14.1 us + max(k, 8.8 us)
    assert isolated_call_s(eff, 1e-6) == pytest.approx(d["isolated_call_s"] + d["after_launch_s"])
    assert isolated_call_s(eff, 1e-3) == pytest.approx(d["isolated_call_s"] + 1e-3)
    # a profile that measured no dispatch (the published tables, CUDA-graph replays): the kernel alone
    served = ctx.efficiency(dev, get_engine("vllm").libraries)
    assert isolated_call_s(served, 5e-6) == 5e-6


@pytest.mark.parametrize(("n", "k", "align"), [(4096, 4096, 16), (1020, 4096, 8), (1018, 4096, 4), (50257, 768, 2),
                                              (4096, 300, 8)])
def test_gemm_alignment_is_the_largest_power_of_two_bytes_of_every_inner_dimension(n, k, align):
    rec, _, _ = gemm_record(512, n, k, "bf16")
    # bf16 rows of n and k elements: 2n and 2k bytes; e.g. 50257 x 2 = 100514 = 2 x 50257 (odd): 2 bytes
    assert alignment_bytes(rec) == align


def test_a_misaligned_gemm_runs_the_slower_kernels_it_was_measured_on():
    ctx = default_context()
    dev = ctx.device("h100-sxm")
    eff = ctx.efficiency(dev, get_engine("eager").libraries)
    aligned = op_time(*gemm_record(8192, 50256, 768, "bf16"), "bf16", dev, eff).time_s
    odd = op_time(*gemm_record(8192, 50257, 768, "bf16"), "bf16", dev, eff).time_s
    # GPT-2's LM head (vocabulary 50257): cuBLAS falls back to sm75 align1 kernels, measured about 2x slower
    assert odd > 1.5 * aligned


def test_predictions_match_planners_own_h100_and_h200_measurements():
    from benchmarks.gpu_validate import predict_case

    # every run that measured its own machine's dispatch: the probe runs (H100, H200) and planner validate's
    # run with a host measurement before each case (H200); the calibrate-day runs never measured theirs
    runs: dict[tuple[str, str], dict[str, list[float]]] = {}
    for case in MEASURED["cases"]:
        if case["run"] in ("calibrate-day", "depthwise-probe") or case["dtype"] == "amp-bf16":
            continue  # depthwise-probe: GPU-bound CNN steps (tests/hardware/test_training_kernels.py)
        predicted, kernel, tier = predict_case(case, case["device"])
        assert tier == "measured"
        run = runs.setdefault((case["device"], case["run"]), {"model": [], "gemm": [], "kernel": []})
        run[case["kind"]].append(predicted / case["measured_s"] - 1)
        if case["kind"] == "model" and case["spec"].startswith("gpt2:training"):
            run.setdefault("training", []).append(predicted / case["measured_s"] - 1)
        if case["kind"] == "gemm" and case.get("kernel_s"):
            run["kernel"].append(kernel / case["kernel_s"] - 1)
    assert {k for k in runs} >= {("h100-sxm", "probe"), ("h200-sxm", "probe"), ("h200-sxm", "validate-2026-11-26b")}
    for key, run in runs.items():
        # every inference case within 25%; GEMMs timed alone (event) and their kernels: median within 8%.
        # GPT-2 training within 30%: on the H200 probe it reads -28.6% since the capture stopped recording
        # 148 x 148 detach views of its own optimizer bookkeeping (an artifact that stood in for the foreach
        # optimizer's real host time, which is not modelled yet); its kernels are predicted 17% low
        inference = [e for e in run["model"] if e not in run.get("training", [])]
        assert all(abs(e) <= 0.25 for e in inference), (key, run["model"])
        assert all(abs(e) <= 0.30 for e in run.get("training", [])), (key, run["training"])
        assert statistics.median(map(abs, run["gemm"])) <= 0.08, key
        if run["kernel"]:
            assert len(run["kernel"]) == 26 and statistics.median(map(abs, run["kernel"])) <= 0.08, key
    assert sum(len(r["model"]) for r in runs.values()) == 13 + 13 + 10


@pytest.mark.parametrize(("device", "rate", "watts"), [("h100-sxm", 6.72e14, 695.5), ("h200-sxm", 6.65e14, 687.4)])
def test_a_sustained_bf16_gemm_runs_at_the_power_caps_clock(device, rate, watts):
    ctx = default_context()
    dev = ctx.device(device)
    eff = ctx.efficiency(dev, get_engine("eager").libraries)
    rec, category, cost = gemm_record(8192, 8192, 8192, "bf16")
    burst = op_time(rec, category, cost, "bf16", dev, eff)
    sustained = ctx.power.sustained(burst, dev, cost)
    # measured (hardware_specs/energy/sustained_checks.csv): 672 / 665 TFLOP/s at 695.5 / 687.4 W
    assert cost.flop / sustained.time_s == pytest.approx(rate, rel=0.10)
    assert ctx.power.power_w(sustained, dev, cost) == pytest.approx(watts, rel=0.10)
    assert sustained.time_s > burst.time_s  # burst 818 TFLOP/s is not sustained under 700 W


def test_a_host_bound_decode_draws_near_idle_power_not_near_the_cap():
    kwargs = dict(batch=1, input_len=128, output_len=64)
    eager = predict(Request("llama-3.1-8b", "h100-sxm", engine="eager", **kwargs))
    graphs = predict(Request("llama-3.1-8b", "h100-sxm", engine="trtllm", **kwargs))
    idle, cap = 122.7, 700.0
    assert eager.metrics["host_wait_fraction"] > 0.5
    assert any(n.startswith("host-bound") for n in eager.notes)
    watts = eager.metrics["average_power_w_per_gpu"]
    # measured 231 W (H100) and 204 W (H200) over 3 s of this host-bound decode (gpu_probe.json)
    assert idle < watts < idle + 0.25 * (cap - idle)
    assert graphs.metrics["average_power_w_per_gpu"] > watts
