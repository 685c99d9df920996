"""--quant, --weights, --activations, --kv-cache on predict, compare and count: output and one-line errors."""

import json

import pytest

from planner.cli import main


def _error(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", ["predict", "compare", "count"])
def test_bad_precision_flags_are_one_line_errors(capsys, command):
    where = ["--device", "h100-sxm"] if command == "predict" else ["--devices", "h100-sxm"] if command == "compare" else []
    err = _error(capsys, command, "gpt2", *where, "--quant", "w4a17")
    assert "unknown quantization recipe 'w4a17'" in err and "w4a16" in err
    err = _error(capsys, command, "gpt2", *where, "--quant", "w4a16", "--dtype", "fp16")
    assert "not both" in err
    err = _error(capsys, command, "gpt2", *where, "--kv-cache", "fp3")
    assert "unknown kv-cache dtype 'fp3'" in err and "fp8" in err
    err = _error(capsys, command, "gpt2", *where, "--activations", "int4")
    assert "activations dtype" in err


def test_predict_states_the_precision(capsys):
    assert main(["predict", "llama-2-7b", "--device", "h100-sxm", "--quant", "w4a16", "--kv-cache", "fp8"]) == 0
    out = capsys.readouterr().out
    assert "inference, w4a16,kv=fp8: weights int4 (+scales), activations bf16, KV fp8 (+scales)" in out
    assert "KV capacity" in out
    assert main(["predict", "llama-2-7b", "--device", "h100-sxm", "--quant", "fp8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["dtype"] == "quant=fp8" and d["precision"].startswith("fp8: weights fp8")


def test_predict_nvfp4_on_a_device_without_fp4_is_one_line(capsys):
    err = _error(capsys, "predict", "llama-2-7b", "--device", "h100-sxm", "--quant", "nvfp4")
    assert "no fp4 peak" in err and "nvfp4" in err


def test_count_with_a_recipe(capsys):
    assert main(["count", "gpt2", "--mode", "decode", "--context-len", "64", "--quant", "int8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["dtype"] == "quant=int8" and d["precision"].startswith("int8: weights int8 (+scales)")
    assert any(row["op"] == "quant.quantize.default" for row in d["table"])


def test_compare_with_a_recipe(capsys):
    assert main(["compare", "llama-2-7b", "--devices", "h100-sxm,b200", "--quant", "nvfp4", "--json"]) == 0
    rows = {r["device"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["b200"]["fits"] and "no fp4 peak" in rows["h100-sxm"]["note"]


def test_configs_rows_with_precision_keys(tmp_path, capsys):
    rows = tmp_path / "c.jsonl"
    rows.write_text("\n".join([json.dumps({"id": 1, "model": "gpt2", "device": "l4", "quant": "w4a16"}),
                               json.dumps({"id": 2, "model": "gpt2", "device": "l4", "quant": "zz"}),
                               json.dumps({"id": 3, "model": "gpt2", "device": "l4", "quant": "fp8", "dtype": "fp16"}),
                               json.dumps({"id": 4, "model": "gpt2", "device": "l4", "kv_cache": "fp8"})]))
    assert main(["predict", "--configs", str(rows), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["dtype"] == "w4a16" and "unknown quantization recipe 'zz'" in lines[1]["error"]
    assert "not both" in lines[2]["error"] and lines[3]["dtype"] == "kv=fp8"
