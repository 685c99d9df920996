"""Engines in predictions: defaults, checks, host launch cost and CUDA graphs, interfaces."""

import json

import pytest

from planner.cli import main
from planner.errors import ConfigError, PlannerError
from planner.predict.api import Request, engine_for, predict
from planner.predict.context import default_context
from planner.predict.timing import host_dispatch_s, host_launch_s, op_rows, stage_times
from planner.workload.device_graph import device_graph
from planner.workload.engines import get_engine, parse_engine
from planner.workload.graphs import Workload
from planner.workload.zoo import resolve


def test_default_engine_is_stated_and_follows_the_workload():
    llm = predict(Request("llama-2-7b", "h100-sxm", output_len=8))
    assert llm.engine == "vllm"
    assert llm.notes[0].startswith("engine vllm (the default for LLM inference on a GPU")
    cnn = predict(Request("resnet50", "h100-sxm"))
    assert cnn.engine == "eager" and cnn.notes[0].startswith("engine eager (the default")
    cpu = default_context().device("xeon-8480")
    assert engine_for(Request("gpt2", "xeon-8480"), resolve("gpt2"), cpu)[0] == "eager"
    train = predict(Request("gpt2", "h100-sxm", "training", seq_len=128))
    assert train.engine == "eager"


@pytest.mark.parametrize("req,message", [
    (Request("llama-2-7b", "h100-sxm", engine="tensorrt"), "engine 'tensorrt' does not run decoder models"),
    (Request("llama-2-7b", "mi300x", engine="trtllm"), "does not run on AMD devices"),
    (Request("gpt2", "h100-sxm", "training", engine="vllm"), "engine 'vllm' does not run training"),
    (Request("resnet50", "h100-sxm", engine="nope"), "unknown engine 'nope'"),
    (Request("resnet50", "h100-sxm", engine="mlperf"), "engine 'mlperf' does not run inference"),
    (Request("gpt2", "h100-sxm", "training", seq_len=128, engine="mlperf"), "does not run decoder models"),
])
def test_engine_that_cannot_run_the_request_is_refused_with_what_would(req, message):
    with pytest.raises(PlannerError, match=message.replace("(", r"\(")):
        predict(req)


def test_engine_files_are_sourced_and_bad_ones_refused():
    for name in ("eager", "compile", "tensorrt", "trtllm", "vllm", "sglang", "megatron", "mlperf"):
        engine = get_engine(name)
        assert engine.sources and all(source.strip() for _, source in engine.sources)
    good = json.loads(open("hardware_specs/engines/vllm.json").read())
    for broken, message in ((dict(good, fusions={"magic": {"phases": ["forward"], "source": "x"}}), "unknown fusion"),
                            (dict(good, cuda_graphs={"replays": "decode"}), "cuda_graphs"),
                            (dict(good, host_launch_s={"value": -1, "source": "x"}), "host_launch_s"),
                            (dict(good, host_view_s={"value": 0.5, "source": "x"}), "host_view_s"),
                            (dict(good, host_view_s={"value": True, "source": "x"}), "host_view_s"),
                            (dict(good, modes=["serving"]), "modes"),
                            (dict(good, fusions=dict(good["fusions"], moe_grouped=dict(
                                good["fusions"]["moe_grouped"], gather="teleport"))), "moe_grouped.gather"),
                            (dict(good, fusions=dict(good["fusions"], moe_grouped=dict(
                                good["fusions"]["moe_grouped"], gather_source=""))), "gather_source")):
        with pytest.raises(ConfigError, match=message):
            parse_engine(broken, "test.json")


def test_an_engine_without_a_view_cost_charges_views_nothing():
    assert get_engine("vllm").host_view_s == 0.0
    good = json.loads(open("hardware_specs/engines/vllm.json").read())
    assert parse_engine(dict(good, host_view_s={"value": 2e-6, "source": "x"}), "test.json").host_view_s == 2e-6


def test_host_launch_cost_is_zero_when_replayed_as_a_cuda_graph_or_on_a_cpu():
    ctx = default_context()
    gpu, cpu = ctx.device("h100-sxm"), ctx.device("xeon-8480")
    model = resolve("gpt2")
    decode = device_graph(model, Workload("decode", 1, context_len=64, engine="vllm"))
    prefill = device_graph(model, Workload("prefill", 1, 64, engine="vllm"))
    assert host_launch_s(decode, gpu) == 0.0  # vLLM replays decode steps as CUDA graphs
    assert host_launch_s(prefill, gpu) == get_engine("vllm").host_launch_s
    assert host_launch_s(device_graph(model, Workload("decode", 1, context_len=64)), cpu) == 0.0


def test_a_launch_bound_step_takes_kernels_times_the_host_cost():
    # gpt2 decode at batch 1 under eager: ~50 kernels per layer of a few microseconds each on an H100
    # (its default profile, which has no dispatch of its own measured: eager's costs apply); the phase
    # takes max(device time, kernels x 22.5 us + views x 1.23 us) (asynchronous launch: the longer queue wins)
    ctx = default_context()
    target = ctx.target("h100-sxm")
    dg = device_graph(resolve("gpt2"), Workload("decode", 1, context_len=64, engine="eager"))
    rows = op_rows(dg, target.device, target.efficiency, target.power)
    device_s = sum(r.time_s * r.count for r in rows)
    kernels = sum(r.count for r in rows if r.category != "view")
    views = sum(op.count * n for part, n in ((dg.first, 1), (dg.layer, dg.num_layers), (dg.last, 1))
                for op in part.ops if op.category == "view")
    eager = get_engine("eager")
    assert host_dispatch_s(dg, target.device, target.efficiency) == (eager.host_launch_s, eager.host_view_s)
    assert views > 0 and eager.host_view_s == pytest.approx(1.23e-6)
    host_s = kernels * eager.host_launch_s + views * eager.host_view_s
    stage = stage_times(dg, target.device, target.efficiency, target.power)[0]
    expected = max(device_s, host_s)
    assert stage.time_s == pytest.approx(expected, rel=1e-9)
    assert host_s > device_s  # it is launch-bound
    assert stage.bound_s["launch"] == pytest.approx(expected - device_s, rel=1e-9)


def test_fusing_engines_run_fewer_kernels_and_predict_less_time():
    eager = predict(Request("resnet50", "h100-sxm", batch=32))
    trt = predict(Request("resnet50", "h100-sxm", batch=32, engine="tensorrt"))
    assert trt.metrics["latency_s"] < eager.metrics["latency_s"]
    assert trt.engine == "tensorrt" and "bn_fold" in trt.notes[0]


def test_cli_engine_flags(capsys, tmp_path):
    assert main(["count", "resnet50", "--engine", "tensorrt", "--by", "kernel", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "engine         tensorrt: 55 kernels" in out
    assert "fused.convolution+native_batch_norm+relu" in out
    # the model's FLOP stay in the total; the stem's padded channel (3 -> 4) is reported apart: a third of its
    # 2·(64·112·112)·(3·7·7) = 236,027,904 FLOP, 78,675,968 (78.68 MFLOP)
    assert "FLOP           8.2176e+09" in out and "78.68 MFLOP more on zero-padded channels" in out
    assert main(["count", "resnet50", "--engine", "tensorrt", "--json"]) == 0
    counted = json.loads(capsys.readouterr().out)
    assert counted["padding_flop"] == 2 * 64 * 112 * 112 * 3 * 7 * 7 / 3 == 78_675_968
    assert main(["predict", "llama-2-7b", "--device", "h100-sxm", "--engine", "sglang", "--output-len", "4"]) == 0
    assert "engine sglang" in capsys.readouterr().out
    assert main(["predict", "llama-2-7b", "--device", "h100-sxm", "--engine", "bogus"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown engine 'bogus'" in err
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"model": "resnet50", "device": "h100-sxm", "engine": "tensorrt"}\n')
    assert main(["predict", "--configs", str(rows)]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["engine"] == "tensorrt"


def test_eager_host_cost_is_the_dispatch_measured_on_the_two_hosts():
    """A device with no measured dispatch of its own takes eager's host cost per kernel: the mean of the
    per-op host time measured on the lent H100's and H200's hosts, (22.1 + 22.9) / 2 = 22.5 us."""
    from planner.hardware.profile import load_profiles

    profiles = load_profiles()
    measured = [profiles.library(d, "pytorch-eager").dispatch["host_per_op_s"] for d in ("h100-sxm", "h200-sxm")]
    assert measured == [pytest.approx(22.1e-6, abs=0.05e-6), pytest.approx(22.9e-6, abs=0.05e-6)]
    assert get_engine("eager").host_launch_s == pytest.approx(sum(measured) / 2, abs=0.05e-6)


def test_compile_host_cost_is_the_issue_time_measured_on_the_lent_h100():
    """torch.compile's host cost per kernel launch is what benchmarks/gpu_validate.py derives from the
    compile probe's host-bound cases (compiled issue time / host factor / predicted launches): 14.2,
    22.0, 24.9, 25.6 and 27.8 us, median 24.9 us (Inductor's wrapper, not Triton's 7-9 us launch alone)."""
    from benchmarks.gpu_validate import compile_host_launch_s, compile_rows

    rows = compile_rows()
    per_case = sorted(r["host_per_launch_s"] for r in rows if "host_per_launch_s" in r)
    assert len(per_case) == 5
    assert per_case[0] == pytest.approx(14.2e-6, abs=0.5e-6) and per_case[-1] == pytest.approx(27.8e-6, abs=0.5e-6)
    assert get_engine("compile").host_launch_s == pytest.approx(compile_host_launch_s(rows), rel=0.02)


def test_a_host_bound_compiled_step_pays_each_launch_at_the_measured_host_cost():
    """bert-large at batch 1 (384 tokens) is host-bound compiled: 248 kernel launches x 24.9 us = 6.175 ms
    (no views charged, no CUDA graph in default mode); its kernels alone take about 1.3 ms."""
    from planner.predict.context import default_context
    from planner.predict.timing import _part_time, host_dispatch_s, stage_times
    from planner.workload.device_graph import device_graph
    from planner.workload.graphs import Workload, resolve_workload
    from planner.workload.zoo import resolve

    ctx = default_context()
    device = ctx.device("h100-sxm")
    model = resolve("bert-large")
    dg = device_graph(model, resolve_workload(model, Workload("inference", 1, 384, None, None, "bf16", engine="compile")))
    eff = ctx.efficiency(device, get_engine("compile").libraries)
    assert host_dispatch_s(dg, device, eff) == (pytest.approx(24.9e-6), 0.0)
    launches = sum(n * c for part, n in dg.stage_parts(0)
                   for key, c in _part_time(part, dg, device, eff, ctx.power)[8].items() if not key.endswith(":view"))
    assert launches == 248
    stage = stage_times(dg, device, eff, ctx.power)[0]
    assert stage.time_s == pytest.approx(248 * 24.9e-6)
    assert stage.time_s - stage.bound_s["launch"] < 0.3 * stage.time_s


def test_int8_inference_of_a_non_llm_on_an_nvidia_gpu_defaults_to_tensorrt_and_answers_on_a_t4():
    # eager PyTorch runs no quantized operator on a GPU: INT8 / FP8 vision and encoder inference defaults to
    # TensorRT on NVIDIA GPUs; an LLM still defaults to vLLM, a bf16 CNN to eager, a CPU to eager
    from planner.predict import Request, predict
    from planner.workload.engines import default_engine

    assert default_engine("vision", "inference", "gpu", "int8", "nvidia") == "tensorrt"
    assert default_engine("encoder", "inference", "gpu", "fp8", "NVIDIA") == "tensorrt"
    assert default_engine("vision", "inference", "gpu", "bf16", "nvidia") == "eager"
    assert default_engine("vision", "inference", "gpu", "int8", "amd") == "eager"
    assert default_engine("vision", "training", "gpu", "int8", "nvidia") == "eager"
    assert default_engine("decoder", "inference", "gpu", "int8", "nvidia") == "vllm"
    p = predict(Request("resnet50", "t4", batch=8, dtype="quant=int8"))
    assert p.engine == "tensorrt" and p.dtype == "quant=int8,compute=fp16"
    assert any("no BF16 on this device" in n for n in p.notes)
    assert any("default for INT8 or FP8 inference of a non-LLM" in n for n in p.notes)


def test_ops_on_a_t4_runs_the_recipe_as_predict_does():
    from planner.predict.api import Request, op_rows

    rows = op_rows(Request("resnet50", "t4", batch=8, dtype="quant=int8"))
    assert rows["forward"]


def test_eager_runs_no_quantized_convolution_on_a_gpu_and_says_what_would():
    # PyTorch has no INT8/FP8 convolution on a GPU: a recipe that quantizes ResNet-50's convolutions is refused
    # under eager, naming TensorRT on an NVIDIA GPU and a 16-bit dtype elsewhere (no engine here runs them on AMD);
    # a model without convolutions (BERT) keeps its INT8 GEMMs under eager
    from planner.errors import ConfigError
    from planner.predict import Request, predict

    with pytest.raises(ConfigError, match=r"eager PyTorch runs no INT8 convolution on a GPU.*valid: --engine tensorrt"):
        predict(Request("resnet50", "h100-sxm", batch=8, dtype="quant=int8", engine="eager"))
    with pytest.raises(ConfigError, match=r"no FP8 convolution.*on mi300x; valid: --dtype bf16 or fp16"):
        predict(Request("resnet50", "mi300x", batch=8, dtype="quant=fp8"))
    assert predict(Request("bert-base", "h100-sxm", batch=8, seq_len=128, dtype="quant=int8", engine="eager")).engine \
        == "eager"


def test_mlperf_training_fuses_batch_norm_with_its_relu_and_runs_on_the_datasheet_tier():
    # NVIDIA's MLPerf ResNet-50 (MXNet BatchNorm act_type='relu', BatchNormAddRelu; hardware_specs/engines/mlperf.json):
    # each training batch norm runs with its ReLU (and the block's residual add) as one kernel forward and backward,
    # where eager runs them apart; the kernels are NHWC cuDNN, not eager's NCHW aten ones, so the H100's measured
    # eager profile does not stand in (datasheet tier). Same FLOP, fewer kernels and bytes, less time.
    eager = predict(Request("resnet50", "h100-sxm", "training", batch=32, dtype="fp16"))
    mlperf = predict(Request("resnet50", "h100-sxm", "training", batch=32, dtype="fp16", engine="mlperf"))
    assert eager.tier == "measured" and mlperf.tier == "datasheet"
    assert "norm_fusion" in mlperf.notes[0] and "forward and backward replayed as CUDA graphs" in mlperf.notes[0]
    assert get_engine("mlperf").replays("training") and not get_engine("eager").replays("training")
    rows = {e: op_rows(device_graph(resolve("resnet50"), Workload("training", 32, dtype="fp16", engine=e)),
                       default_context().target("h100-sxm").device, default_context().efficiency(
                           default_context().device("h100-sxm"), get_engine(e).libraries),
                       default_context().power) for e in ("eager", "mlperf")}
    kernels = {e: sum(r.count for r in rs if r.category != "view") for e, rs in rows.items()}
    flop = {e: sum(r.count * r.flop for r in rs) for e, rs in rows.items()}
    assert kernels["mlperf"] < kernels["eager"] and flop["mlperf"] == pytest.approx(flop["eager"], rel=1e-9)
    assert any("native_batch_norm" in r.op and "relu" in r.op for r in rows["mlperf"])
    assert mlperf.metrics["step_time_s"] < eager.metrics["step_time_s"]
