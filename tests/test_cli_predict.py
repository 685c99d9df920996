"""`planner predict` and `planner compare` from the command line: JSON, configs, clear errors."""

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from planner.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=300)


def _clean(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("planner: error:")


def test_predict_json(capsys):
    assert main(["predict", "llama-2-7b", "--device", "H100", "--batch", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["device"] == "h100-sxm" and out["batch"] == 4 and out["tier"] == "published"


def test_predict_text_ops_and_roofline(tmp_path, capsys):
    png = tmp_path / "roof.png"
    assert main(["predict", "resnet50", "--device", "l4", "--batch", "8", "--ops", "--roofline", str(png)]) == 0
    text = capsys.readouterr().out
    assert "samples/s" in text and "aten.convolution" in text and "bound" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert stat.S_IMODE(png.stat().st_mode) == 0o666 & ~_umask()  # as open() gives, not mkstemp's 0600


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_configs_one_json_line_per_row_and_bad_rows_do_not_stop_the_rest(tmp_path, capsys):
    rows = tmp_path / "c.jsonl"
    rows.write_text("\n".join([json.dumps({"id": 1, "model": "gpt2", "device": "l4", "batch": 2}),
                               json.dumps({"id": 2, "model": "gpt2", "device": "h100-sx"}),
                               "{broken",
                               json.dumps({"id": 4, "model": "resnet50", "device": "t4", "dtype": "fp16"})]))
    assert main(["predict", "--configs", str(rows), "--json"]) == 0
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert [l["id"] for l in lines] == [1, 2, None, 4]
    assert "ttft_s" in lines[0] and "error" in lines[1] and "Did you mean" in lines[1]["error"]
    assert "not valid JSON" in lines[2]["error"] and "throughput_samples_per_s" in lines[3]


def test_configs_csv(tmp_path, capsys):
    rows = tmp_path / "c.csv"
    rows.write_text("id,model,device,batch,tp,gpus\na,llama-2-70b,h100-sxm,1,2,2\n")
    assert main(["predict", "--configs", str(rows), "--json"]) == 0
    [line] = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert line["id"] == "a" and line["fits"] is True


def test_compare_json(capsys):
    assert main(["compare", "llama-2-7b", "--devices", "h100-sxm,mi300x,l4", "--batch", "2", "--input-len", "128",
                 "--output-len", "32", "--json", "--sort", "latency"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["device"] for r in rows][0] in ("h100-sxm", "mi300x")
    assert all(r["instance"] for r in rows if r["fits"])


def test_unknown_device_suggests_close_matches():
    result = _run("predict", "llama-2-7b", "--device", "h100-sxn")
    _clean(result)
    assert "h100-sxm" in result.stderr


def test_tp_not_dividing_heads():
    result = _run("predict", "llama-2-7b", "--device", "h100-sxm", "--gpus", "3", "--tp", "3")
    _clean(result)
    assert "does not divide the 32 attention heads" in result.stderr


def test_negative_batch():
    result = _run("predict", "llama-2-7b", "--device", "h100-sxm", "--batch", "-4")
    assert result.returncode == 2 and "whole number from 1" in result.stderr and "Traceback" not in result.stderr


def test_malformed_catalog_row_names_file_row_and_key(tmp_path):
    specs = tmp_path / "hardware_specs"
    shutil.copytree(ROOT / "hardware_specs", specs)
    devices = specs / "devices.csv"
    lines = devices.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[2].split(",")
    cells[header.index("mem_bw_gb_per_s")] = "-320"
    lines[2] = ",".join(cells)
    devices.write_text("\n".join(lines) + "\n")
    result = _run("predict", "llama-2-7b", "--device", "h100-sxm", env={"PLANNER_HARDWARE_SPECS": str(specs)})
    _clean(result)
    assert "devices.csv" in result.stderr and "row 3" in result.stderr and "mem_bw_gb_per_s" in result.stderr


def test_a_sequence_beyond_the_context_window_is_predicted_with_a_note(capsys):
    # llama-2-7b's max_position_embeddings is 4,096: a 8,000-token prompt + 100 output tokens = 8,100 exceeds it;
    # predict, count and serve each say so (and still answer: a user may extend the window), and a prompt
    # inside the window gets no such note
    assert main(["predict", "llama-2-7b", "--device", "h100-sxm", "--input-len", "8000", "--output-len", "100",
                 "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert "8,100 tokens (prompt + output) exceed llama-2-7b's context window of 4,096 (max_position_embeddings): " \
           "predicted as if it ran them" in notes
    assert main(["predict", "llama-2-7b", "--device", "h100-sxm", "--input-len", "3000", "--output-len", "100",
                 "--json"]) == 0
    assert not any("context window" in n for n in json.loads(capsys.readouterr().out)["notes"])
    assert main(["count", "llama-2-7b", "--mode", "prefill", "--seq-len", "5000"]) == 0
    assert "5,000 tokens exceed llama-2-7b's context window of 4,096" in capsys.readouterr().out
    assert main(["serve", "llama-2-7b", "--device", "h100-sxm", "--input-len", "8000", "--output-len", "100",
                 "--rate", "0.1", "--requests", "3"]) == 0
    assert "requests of up to 8,100 tokens (prompt + output) exceed llama-2-7b's context window" in capsys.readouterr().out


def test_compare_gpus_fixes_the_devices_of_each_configuration_and_shows_tp_dp_batch(capsys):
    # Llama 3.1 70B: 70.55e9 parameters x 2 B = 141 GB of weights. On 8 devices an H100 (80 GiB x 0.9 usable)
    # needs tp 2 (dp 4); an MI300X (192 GiB) holds it at tp 1 (dp 8): gpus = tp x dp = 8 on both
    assert main(["compare", "llama-3.1-70b", "--devices", "h100-sxm,mi300x", "--gpus", "8", "--output-len", "8",
                 "--json"]) == 0
    rows = {r["device"]: r for r in json.loads(capsys.readouterr().out)}
    assert {d: (r["gpus"], r["tp"], r["dp"], r["batch"], r["fits"]) for d, r in rows.items()} == {
        "h100-sxm": (8, 2, 4, 1, True), "mi300x": (8, 1, 8, 1, True)}
    assert main(["compare", "llama-3.1-70b", "--devices", "h100-sxm", "--gpus", "8", "--output-len", "8"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert header.split()[:5] == ["device", "gpus", "tp", "dp", "batch"] and row.split()[:5] == ["h100-sxm", "8", "2",
                                                                                                 "4", "1"]


def test_a_prediction_that_does_not_fit_names_the_tensor_parallel_degree_that_does(capsys):
    # 141 GB of weights: 8 x H100 at tp 1 holds them on each device (does not fit); tp 2 halves them (70.6 GB
    # of 77.3 GB usable) and divides the 8 devices
    assert main(["predict", "llama-3.1-70b", "--device", "h100-sxm", "--gpus", "8", "--output-len", "8"]) == 0
    out = capsys.readouterr().out
    assert "DOES NOT FIT" in out and "does not fit in memory at tp=1; --tp 2 fits" in out
    assert main(["predict", "llama-3.1-70b", "--device", "h100-sxm", "--gpus", "8", "--tp", "2",
                 "--output-len", "8"]) == 0
    assert "--tp" not in capsys.readouterr().out  # it fits: no hint


def test_money_prints_with_thousands_separators_not_an_exponent(capsys):
    # a training run of Llama 3.1 70B on 64 H100s for 1e11 tokens costs some $155,000: "$155,144", not "$1.551e+05"
    assert main(["predict", "llama-3.1-70b", "--device", "h100-sxm", "--mode", "training", "--gpus", "64", "--tp", "8",
                 "--global-batch", "512", "--seq-len", "4096", "--train-tokens", "1e11"]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if "$ to train" in line]
    assert re.fullmatch(r" +\$ to train: \$\d{3},\d{3}", line), line


def test_a_cnn_trains_on_images_not_tokens(capsys):
    assert main(["predict", "resnet50", "--device", "h100-sxm", "--mode", "training", "--global-batch", "256",
                 "--train-tokens", "1.28e6"]) == 0
    out = capsys.readouterr().out
    assert "for 1.28e+06 images" in out and "tokens" not in out


def test_a_vendor_prefixed_device_suggests_the_catalog_ids(capsys):
    assert main(["predict", "gpt2", "--device", "nvidia-h100"]) == 2
    err = capsys.readouterr().err
    assert "unknown device 'nvidia-h100'. Did you mean: h100-" in err and err.count("\n") == 1
    assert {"h100-sxm", "h100-pcie"} <= set(err.split("Did you mean: ")[1].split("?")[0].split(", "))


def test_an_instance_given_with_its_provider(capsys):
    assert main(["predict", "llama-3.1-8b", "--device", "h100-sxm", "--gpus", "8", "--tp", "8", "--output-len", "8",
                 "--instance", "aws:p5.48xlarge", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost_basis"] == "1 x aws:p5.48xlarge:us-east-1 on_demand"
    assert main(["predict", "llama-3.1-8b", "--device", "h100-sxm", "--instance", "gcp:p5.48xlarge"]) == 2
    assert "unknown instance 'gcp:p5.48xlarge'. Did you mean: aws:p5.48xlarge" in capsys.readouterr().err
