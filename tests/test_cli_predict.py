"""`planner predict` and `planner compare` from the command line: JSON, configs, clear errors."""

import json
import os
import shutil
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
