"""Training-mode batch norm, depthwise convolutions and dense convolutions' backward take the kernel
curves measured for them (benchmarks/gpu_depthwise_probe.py on the lent H100 and H200), not eval-mode
batch norm's, dense convolutions' or the datasheet's."""

import copy
import json
from pathlib import Path

import pytest

from planner.errors import ConfigError
from planner.hardware.profile_check import check_profile
from planner.predict.context import default_context
from planner.predict.roofline import op_time
from planner.workload.engines import get_engine
from planner.workload.graphs import Workload, build_graph
from planner.workload.zoo import resolve

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "benchmarks" / "data" / "measured" / "h100-sxm" / "depthwise-probe"


def _h100():
    ctx = default_context()
    device = ctx.device("h100-sxm")
    return device, ctx.efficiency(device, get_engine("eager").libraries)


def _first(graph, packet: str, **args):
    return next(r for r in graph.records if r.packet == packet and all(r.arg(k) == v for k, v in args.items()))


def test_each_kind_of_op_takes_its_own_curve():
    device, eff = _h100()
    assert eff.tier == "measured"
    train = build_graph(resolve("efficientnet-b0"), Workload("training", 2, None, None, 64, "bf16",
                                                             mixed_precision="amp"))
    infer = build_graph(resolve("efficientnet-b0"), Workload("inference", 2, None, None, 64, "bf16"))
    depthwise = next(r for r in train.graph.records if r.packet == "aten.convolution" and r.arg("groups") > 1)
    dense = _first(train.graph, "aten.convolution", groups=1)
    depthwise_back = next(r for r in train.graph.records
                          if r.packet == "aten.convolution_backward" and r.arg("groups") > 1)
    keys = {
        "training batch norm": eff._key(_first(train.graph, "aten.native_batch_norm"), "norm")[0],
        "its backward": eff._key(_first(train.graph, "aten.native_batch_norm_backward"), "norm")[0],
        "depthwise convolution": eff._key(depthwise, "conv")[0],
        "depthwise backward": eff._key(depthwise_back, "conv")[0],
        "dense convolution": eff._key(dense, "conv")[0],
        "dense backward": eff._key(next(r for r in train.graph.records
                                        if r.packet == "aten.convolution_backward" and r.arg("groups") == 1), "conv")[0],
        "eval batch norm": eff._key(next(r for r in infer.graph.records if "batch_norm" in r.packet), "norm")[0],
    }
    assert keys == {"training batch norm": "bn_train", "its backward": "bn_backward", "depthwise convolution": "dw",
                    "depthwise backward": "dw_backward", "dense convolution": "conv", "dense backward": "conv_backward",
                    "eval batch norm": "bn"}


def _profile_point(kind: str, **shape) -> dict:
    raw = json.loads((ROOT / "hardware_specs" / "calibration" / "h100-sxm" / "pytorch-eager.json").read_text())
    return next(m for m in raw["measurements"] if m["kind"] == kind and all(m[k] == v for k, v in shape.items()))


def _accumulation_s(x_bytes: float) -> float:
    """The probe's extra x.grad += dx (scripts/eager_profile.py): the H100's kernel floor, 2.45 us, plus
    3 x the activation's bytes at calibrate's largest add, 3,221,225,472 B in 1,065.97 us (3.02 TB/s)."""
    raw = json.loads((ROOT / "hardware_specs" / "calibration" / "h100-sxm" / "pytorch-eager.json").read_text())
    adds = sorted((m["bytes"], m["time_s"]) for m in raw["measurements"] if m["kind"] == "add")
    assert adds[-1][0] == 3221225472 and adds[-1][1] == pytest.approx(1065.97e-6, abs=0.01e-6)
    assert raw["dispatch"]["kernel_floor_s"] == pytest.approx(2.45e-6, abs=0.01e-6)
    return raw["dispatch"]["kernel_floor_s"] + 3 * x_bytes * adds[-1][1] / adds[-1][0]


@pytest.mark.parametrize("phase, packet, measured_key, kind", [
    ("forward", "aten.native_batch_norm", "fwd_kernel_s", "batch_norm_train"),
    ("backward", "aten.native_batch_norm_backward", "bwd_kernel_s", "batch_norm_backward"),
])
def test_a_measured_shape_is_predicted_at_its_measured_time(phase, packet, measured_key, kind):
    """ResNet-50's first batch norm at batch 128 (x [128, 64, 112, 112] bf16, fp32 statistics under amp) is
    a measured point: the forward took 1563.8 us and the backward 3089.5 us on the H100 (gpu_bn_train.json),
    6.5x and 12.9x eval-mode batch norm's 239.1 us for the same activation (probe/gpu_bn.json). The backward
    the profile holds is the probe's less one gradient accumulation of x (205.5 MB: 2.45 + 204.2 us)."""
    device, eff = _h100()
    graph = build_graph(resolve("resnet50"), Workload("training", 128, None, None, 224, "bf16", mixed_precision="amp"))
    rec = next(r for r in graph.graph.records if r.packet == packet and r.phase == phase
               and r.tensors()[0].shape == (128, 64, 112, 112))
    probe = next(b for b in json.loads((PROBE / "gpu_bn_train.json").read_text())["batch_norm_train"]
                 if (b["n"], b["c"], b["hw"]) == (128, 64, 112))[measured_key]
    point = _profile_point(kind, n=128, c=64, hw=112)["time_s"]
    x_bytes = 2.0 * 128 * 64 * 112 * 112
    expected = probe - _accumulation_s(x_bytes) if phase == "backward" else probe
    assert point == pytest.approx(expected, rel=1e-9)
    assert op_time(rec, "norm", _cost(rec), "bf16", device, eff).time_s == pytest.approx(point, rel=0.05)


def _cost(rec):
    from planner.workload.counting import classify
    category, cost = classify(rec, False)
    assert category == "norm"
    return cost


def test_a_depthwise_filter_size_of_zero_is_refused():
    raw = json.loads((ROOT / "hardware_specs" / "calibration" / "h100-sxm" / "pytorch-eager.json").read_text())
    bad = copy.deepcopy(raw)
    i = next(i for i, m in enumerate(bad["measurements"]) if m["kind"] == "depthwise")
    bad["measurements"][i]["ksize"] = 0
    with pytest.raises(ConfigError, match=rf"measurements\[{i}\].*ksize"):
        check_profile(bad, "profile")
    check_profile(raw, "profile")  # the shipped one is sound


def test_cnn_training_steps_on_the_h100_and_h200_within_25_percent():
    """The probe's EfficientNet-B0/B4 and ResNet-50 training steps and EfficientNet-B0 inference
    (benchmarks/data/gpu_validate.json, run depthwise-probe): every step within 25% of its measurement.
    With eval-mode batch norm's and dense convolutions' curves they were 48-72% too fast (docs/accuracy.md)."""
    from benchmarks.gpu_validate import predict_case

    data = json.loads((ROOT / "benchmarks" / "data" / "gpu_validate.json").read_text())
    cases = [c for c in data["cases"] if c["run"] == "depthwise-probe"]
    assert len(cases) == 10
    errors = {(c["device"], c["spec"], c["dtype"]): predict_case(c, c["device"])[0] / c["measured_s"] - 1
              for c in cases}
    assert all(abs(e) <= 0.25 for e in errors.values()), errors


def test_a_measured_convolution_backward_is_predicted_at_its_measured_time():
    """ResNet-50's 3x3 convolution of 128 channels at 28x28, batch 128, is a measured point: its backward
    (input and weight gradients, 2 x 2 x 128 x 128 x 28 x 28 x 128 x 9 = 59.2 GFLOP) took 239.9 us on the
    H100 (gpu_conv_backward.json), 247 TFLOP/s, of which one gradient accumulation of x (25.7 MB, about
    11 us) the profile subtracts."""
    device, eff = _h100()
    graph = build_graph(resolve("resnet50"), Workload("training", 128, None, None, 224, "bf16", mixed_precision="amp"))
    rec = next(r for r in graph.graph.records if r.packet == "aten.convolution_backward"
               and r.arg("weight").shape == (128, 128, 3, 3) and r.arg("grad_output").shape == (128, 128, 28, 28))
    from planner.workload.counting import classify
    category, cost = classify(rec, False)
    assert cost.flop == 2 * 2 * 128 * 128 * 28 * 28 * 128 * 9
    probe = next(c for c in json.loads((PROBE / "gpu_conv_backward.json").read_text())["conv_backward"]
                 if (c["n"], c["cin"], c["cout"], c["hw"], c["ksize"]) == (128, 128, 128, 28, 3))["bwd_kernel_s"]
    assert probe == pytest.approx(239.9e-6, abs=0.1e-6)
    point = _profile_point("conv_backward", n=128, cin=128, cout=128, hw=28, ksize=3)["time_s"]
    assert point == pytest.approx(probe - _accumulation_s(2.0 * 128 * 128 * 28 * 28), rel=1e-9)
    assert op_time(rec, category, cost, "bf16", device, eff).time_s == pytest.approx(point, rel=0.05)


def test_what_the_curves_do_not_cover_keeps_its_old_curve():
    """A network's first convolution computes only its weight's gradient (its input is the data): other
    kernels than the probe's, so not the conv_backward curve. A frozen batch norm's backward (train=False)
    is not a training-mode one. A fused group (torch.compile's Triton kernel) is not ATen's kernel."""
    from dataclasses import replace

    _, eff = _h100()
    train = build_graph(resolve("resnet50"), Workload("training", 2, None, None, 64, "bf16", mixed_precision="amp"))
    stem = next(r for r in train.graph.records if r.packet == "aten.convolution_backward"
                and r.arg("weight").shape[1] == 3)
    assert not stem.arg("output_mask")[0]
    assert eff._key(stem, "conv") is None  # datasheet tier, as before
    bn_back = _first(train.graph, "aten.native_batch_norm_backward")
    frozen = replace(bn_back, args=tuple((k, False if k == "train" else v) for k, v in bn_back.args))
    assert frozen.arg("train") is False
    assert eff._key(frozen, "norm")[0] == "bn"
    fused = replace(bn_back, packet="fused.native_batch_norm_backward+threshold_backward")
    assert eff._key(fused, "norm")[0] != "bn_backward"
