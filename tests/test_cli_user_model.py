"""`planner count` and `planner predict` on a user's own model (`package.module:function`, here
tests/custom_model.py): --batch scales its example inputs, labels say what it takes, and a model whose
batch dimension cannot be found refuses --batch in one line."""

import json
import re

import pytest

from planner.cli import main


def _workload_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("workload"))


def test_count_without_batch_runs_and_labels_the_example_batch(capsys):
    assert main(["count", "custom_model:linear_64_to_32", "--allow-code", "--dtype", "fp32"]) == 0
    out = capsys.readouterr().out
    # example x [8, 64]: "batch 8", not "batch 1"; Linear 64 -> 32 at B = 8: 2·8·64·32 = 32,768 FLOP
    assert _workload_line(out) == "workload       forward, batch 8 samples of shape [64], fp32"
    assert "3.2768e+04" in out


def test_count_batch_scales_the_example_inputs(capsys):
    assert main(["count", "custom_model:linear_64_to_32", "--allow-code", "--dtype", "fp32", "--batch", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # 2·4·64·32 = 16,384 FLOP; reads X [4, 64] + W [32, 64] = 2,304 fp32 values = 9,216 B
    assert out["batch"] == 4 and out["flop"] == 16_384 and out["bytes_read"] == 9_216
    assert (out["takes"], out["example_batch"], out["inputs"]) == ("samples", 8, "batch 4 samples of shape [64]")


def test_count_training_labels_what_the_model_takes(capsys):
    assert main(["count", "custom_model:linear_64_to_32", "--allow-code", "--mode", "training", "--dtype", "fp32"]) == 0
    line = _workload_line(capsys.readouterr().out)
    assert "None" not in line and line == "workload       training, batch 8 samples of shape [64], fp32"
    assert main(["count", "custom_model:token_classifier", "--allow-code", "--mode", "training", "--batch", "2"]) == 0
    assert _workload_line(capsys.readouterr().out) == "workload       training, batch 2 sequences of 128 tokens, bf16"
    assert main(["count", "custom_model:tiny_cnn", "--allow-code"]) == 0
    assert _workload_line(capsys.readouterr().out) == "workload       forward, batch 4 images of 3x32x32 (CxHxW), bf16"


def test_predict_batch_moves_the_latency_not_only_the_rate(capsys):
    # Linear 8192 -> 8192, example x [64, 8192]: at 1,024 the step runs 2·1024·8192² = 137 GFLOP, 16x the example's
    assert main(["predict", "custom_model:wide_linear", "--allow-code", "--device", "h100-sxm", "--json"]) == 0
    example = json.loads(capsys.readouterr().out)
    assert main(["predict", "custom_model:wide_linear", "--allow-code", "--device", "h100-sxm", "--batch", "1024", "--json"]) == 0
    big = json.loads(capsys.readouterr().out)
    assert big["latency_s"] > 4 * example["latency_s"]
    assert (example["batch"], big["batch"]) == (64, 1024)
    # samples/s is batch / latency, so it does not grow 16x with the batch
    assert big["throughput_samples_per_s"] < 16 * example["throughput_samples_per_s"]
    assert big["throughput_samples_per_s"] == pytest.approx(big["batch"] / big["latency_s"], rel=1e-12)


def test_predict_labels_the_inputs_and_the_rate(capsys):
    assert main(["predict", "custom_model:token_classifier", "--allow-code", "--device", "h100-sxm", "--batch", "4"]) == 0
    out = capsys.readouterr().out
    assert ("inputs         batch 4 sequences of 128 tokens; example batch 8, --batch calls the function with batch=B"
            in out.splitlines())
    assert re.search(r"^sequences/s\s+[\d,.]+", out, re.M) and "samples/s" not in out
    assert main(["predict", "custom_model:linear_64_to_32", "--allow-code", "--device", "h100-sxm", "--mode", "training"]) == 0
    out = capsys.readouterr().out
    assert "inputs         batch 8 samples of shape [64] per device; example batch 8, --batch scales dim 0 of its inputs" in out
    assert "micro-batch    8 per device" in out


def test_a_model_without_a_batch_dimension_refuses_batch_in_one_line(capsys):
    for command in (["count", "custom_model:masked", "--allow-code", "--batch", "4"],
                    ["predict", "custom_model:masked", "--allow-code", "--device", "h100-sxm", "--batch", "4"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert ("cannot run 'custom_model:masked' at batch 4: the batch dimension of its example inputs cannot be "
                "found (dim 0 of its example input tensors differs (2, 16))") in err
    assert main(["count", "custom_model:masked", "--allow-code"]) == 0  # without --batch: the example as given
    assert _workload_line(capsys.readouterr().out) == (
        "workload       forward, the example's inputs as given, counted as batch 1 (no batch dimension: dim 0 of its "
        "example input tensors differs (2, 16)), bf16")


def test_a_model_file_runs_without_allow_code_and_a_module_name_needs_it(capsys):
    from pathlib import Path

    path = Path(__file__).resolve().parent / "custom_model.py"
    assert main(["count", f"{path}:linear_64_to_32", "--dtype", "fp32", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["flop"] == 2 * 8 * 64 * 32  # batch 8 x [64] -> [32]
    assert main(["count", "custom_model:linear_64_to_32", "--dtype", "fp32"]) == 2
    assert "add --allow-code" in capsys.readouterr().err
    assert main(["count", f"{path.parent / 'no_such.py'}:f"]) == 2
    assert "does not exist" in capsys.readouterr().err
