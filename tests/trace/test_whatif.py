"""What-if on other devices: the replay in closed form on a hand-made GPU trace, identity on the measured
H100 traces, per-op ratios from the roofline, and the findings' gains."""

from __future__ import annotations

import json

import pytest

from planner.cli import main
from planner.trace.analyze import analyze
from planner.trace.findings import findings
from planner.trace.read import parse_trace, read_trace
from planner.trace.whatif import replay, what_if
from planner.workload.engines import get_engine
from tests.trace.conftest import CPU_PROFILE, GPU_TRACES


def _gpu_trace(sync: bool = False):
    """Three bf16 GEMMs launched from the host at 5, 25 and 45 us; each kernel starts 3 us after its launch
    and runs 5 us; the profiler's span is 60 us. Optionally a device synchronization from 52 to 58 us."""
    dims = [[1024, 1024], [1024, 1024]]
    events = [{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": 0, "dur": 60, "pid": "Spans"}]
    for k, t in enumerate((0, 20, 40)):
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 10,
             "args": {"External id": k + 1, "Input type": ["c10::BFloat16"] * 2, "Input Dims": dims,
                      "Input Strides": [[1024, 1], [1024, 1]], "Concrete Inputs": ["", ""]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 5, "dur": 2,
             "args": {"correlation": 11 + k}},
            {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "pid": 0, "tid": 7, "ts": t + 8, "dur": 5,
             "args": {"External id": k + 1, "correlation": 11 + k, "device": 0, "stream": 7}}]
    if sync:
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1,
                       "ts": 52, "dur": 6, "args": {"correlation": 99}})
    doc = {"deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}], "traceEvents": events}
    return analyze(parse_trace(json.dumps(doc).encode(), "three_gemms.json"))


def test_replay_on_its_own_device_reproduces_the_wall_time():
    report = _gpu_trace()
    assert report.wall_s == pytest.approx(60e-6)
    assert what_if(report, "h100-sxm").wall_s == pytest.approx(60e-6, abs=1e-12)


def test_a_host_bound_run_stays_host_bound_when_its_kernels_halve():
    report = _gpu_trace()
    half = {i: 0.5 for i in report.counted.index}
    assert replay(report, half).wall_s == pytest.approx(60e-6, abs=1e-12)


def test_without_the_host_kernels_run_back_to_back():
    report = _gpu_trace()
    # launch latency of the first (3 us) + three kernels of 5 us with no back-to-back gap measured
    assert replay(report, {}, host_scale=0.0).wall_s == pytest.approx((3 + 3 * 5) * 1e-6, abs=1e-12)
    half = {i: 0.5 for i in report.counted.index}
    assert replay(report, half, host_scale=0.0).wall_s == pytest.approx((3 + 3 * 2.5) * 1e-6, abs=1e-12)


def test_a_synchronization_returns_when_the_device_is_done():
    report = _gpu_trace(sync=True)
    assert dict(report.breakdown)["idle: host sync"] > 0
    assert replay(report, {}).wall_s == pytest.approx(60e-6, abs=1e-12)
    # kernels at half time: the last ends at 45 + 3 + 2.5 = 50.5 us, before the sync starts (52 us); the sync
    # then costs its measured return latency, 58 - max(52, 53) = 5 us, and returns at 57 us instead of 58:
    # the rest of the host timeline moves 1 us earlier, so the span ends at 59 us
    half = {i: 0.5 for i in report.counted.index}
    assert replay(report, half).wall_s == pytest.approx(59e-6, abs=1e-12)


def test_each_op_scales_by_its_predicted_ratio_between_devices():
    report = _gpu_trace()
    w = what_if(report, "h200-sxm", host_scale=0.0)
    from planner.predict.context import default_context
    from planner.predict.roofline import op_time
    from planner.trace.ops import count_op
    ctx = default_context()
    c = count_op(report.trace.ops[0])
    h200 = ctx.device("h200-sxm")
    ratio = op_time(c.record, c.category, c.cost, "bf16", h200, ctx.efficiency(h200, get_engine("eager").libraries)).time_s \
        / report.counted["attainable_s"].iloc[0]
    assert w.counted_s == pytest.approx(3 * 5e-6 * ratio, rel=1e-9)
    assert w.wall_s == pytest.approx((3 + 3 * 5 * ratio) * 1e-6, rel=1e-9)


@pytest.mark.parametrize("name", ["h100_llama1b_prefill_b1_s512_bf16.json.gz", "h100_resnet50_train_b32_amp_bf16.json.gz"])
def test_the_measured_h100_traces_replay_to_their_wall_time(name):
    report = analyze(read_trace(GPU_TRACES / name))
    assert what_if(report, "h100-sxm").wall_s == pytest.approx(report.wall_s, rel=1e-9)
    # both are host-bound eager runs: a faster device barely moves them, a CUDA graph does
    assert what_if(report, "b200").speedup < 1.05
    assert replay(report, {}, host_scale=0.0).wall_s < 0.6 * report.wall_s


def test_a_cpu_trace_what_if_replaces_its_counted_ops_only(traces):
    report = analyze(read_trace(traces["transformer_forward"].path), CPU_PROFILE)
    same = what_if(report, CPU_PROFILE)
    assert same.wall_s == pytest.approx(report.wall_s, rel=1e-12)
    gpu = what_if(report, "h100-sxm", host_scale=0.0)
    assert gpu.wall_s == pytest.approx(gpu.counted_s) and gpu.counted_s < same.counted_s


def test_findings_are_ranked_re_predictions():
    report = analyze(read_trace(GPU_TRACES / "h100_resnet50_train_b32_amp_bf16.json.gz"))
    found = findings(report, [what_if(report, "h200-sxm")])
    assert found and [f.gain for f in found] == sorted((f.gain for f in found), reverse=True)
    graph = next(f for f in found if f.kind == "cuda-graph")
    assert graph.wall_s == pytest.approx(replay(report, {}, host_scale=0.0).wall_s)
    assert graph.gain == pytest.approx(report.wall_s / graph.wall_s - 1)


def test_the_cli_prints_the_report_the_what_if_and_a_roofline(tmp_path, capsys):
    png = tmp_path / "roofline.png"
    path = str(GPU_TRACES / "h100_llama1b_prefill_b1_s512_bf16.json.gz")
    assert main(["trace", path, "--on", "h200-sxm,b200", "--roofline", str(png)]) == 0
    out = capsys.readouterr().out
    for text in ("breakdown", "by category", "slowest ops", "GEMMs        median |ln(attainable/measured)|",
                 "what-if", "h200-sxm", "b200", "advice"):
        assert text in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["trace", path, "--json", "--on", "h200-sxm"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"] == "h100-sxm" and len(doc["ops"]) == 2598 and doc["what_if"][0]["device"] == "h200-sxm"
    assert sum(doc["breakdown_s"].values()) == pytest.approx(doc["wall_s"])


def test_an_unknown_on_device_is_one_line(capsys):
    path = str(GPU_TRACES / "h100_llama1b_prefill_b1_s512_bf16.json.gz")
    assert main(["trace", path, "--on", "h900"]) == 2
    err = capsys.readouterr().err
    assert "unknown device 'h900'" in err and err.count("\n") == 1


def test_advise_on_a_trace_lists_the_replayed_findings(capsys):
    path = str(GPU_TRACES / "h100_llama1b_prefill_b1_s512_bf16.json.gz")
    assert main(["advise", "--trace", path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    report = analyze(read_trace(GPU_TRACES / "h100_llama1b_prefill_b1_s512_bf16.json.gz"))
    assert [f["title"] for f in doc["findings"]] == [f.title for f in findings(report)]
    assert doc["findings"][0]["throughput_gain"] > 0
    assert main(["advise", "llama-3.1-8b", "--trace", path]) == 2
    assert "not both" in capsys.readouterr().err
