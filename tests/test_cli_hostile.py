"""The CLI boundary under hostile input: one line and exit 2 for bad input, one line and exit 3 for
an internal error (a traceback only with PLANNER_DEBUG=1), never NaN in JSON."""

import json

import pytest

from planner.cli import main
from planner.units import band, json_safe
from planner.workload import zoo


def _run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv,message", [
    (["count", "gpt2", "--batch", "99999999999999999999999"], "whole number from 1 to 9,007,199,254,740,992"),
    (["count", "gpt2", "--batch", "2000000"], "above the limit of 1,048,576"),
    (["predict", "gpt2", "--device", "h100", "--mode", "training", "--train-tokens", "nan"], "finite"),
    (["predict", "gpt2", "--device", "h100", "--mode", "training", "--train-tokens", "inf"], "finite"),
    (["predict", "gpt2", "--device", "h100", "--utilization", "nan", "--site", "x"], "finite"),
    (["predict", "gpt2", "--device", "h100", "--gpus", "99999999999999"], "--gpus"),
    (["predict", "gpt2", "--device", "h100", "--tp", "99999999999999"], "limit"),
    (["count", ":"], "not package.module:function"),
    (["count", "..:x"], "not package.module:function"),
    (["count", "m" * 10_000], "limit is 1,000"),
    (["op", "copy", "--bytes", "inf", "--device", "h100"], "finite"),
    (["op", "gemm", "--m", "99999999999999", "--n", "2", "--k", "2", "--device", "h100"], "--m"),
    (["predict", "gpt2", "--device", "h100", "--roofline", "/"], "is a directory"),
])
def test_hostile_command_lines_are_one_line_errors(capsys, argv, message):
    rc, out, err = _run(capsys, *argv)
    assert rc == 2
    # planner's own errors start "planner: error:", argparse's "planner <command>: error:"; one line each
    assert err.startswith("planner") and " error: " in err.split("\n")[0] and message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_an_internal_error_is_one_line_with_exit_3(capsys, monkeypatch):
    monkeypatch.setattr(zoo, "resolve", lambda *a, **k: {}["boom"])  # count imports it when it runs
    monkeypatch.delenv("PLANNER_DEBUG", raising=False)
    rc, out, err = _run(capsys, "count", "gpt2")
    assert rc == 3 and err.count("\n") == 1
    assert err.startswith("planner: internal error: KeyError: 'boom'") and "report it" in err


def test_planner_debug_shows_the_traceback(monkeypatch):
    monkeypatch.setattr(zoo, "resolve", lambda *a, **k: {}["boom"])  # count imports it when it runs
    monkeypatch.setenv("PLANNER_DEBUG", "1")
    with pytest.raises(KeyError):
        main(["count", "gpt2"])


def test_ops_table_works_with_the_default_prompt_of_a_learned_position_model(capsys):
    # gpt2 has 1,024 learned positions: the prompt defaults to 1024 - 256 output tokens = 768
    rc, out, err = _run(capsys, "predict", "gpt2", "--device", "h100", "--ops", "--json")
    assert rc == 0, err
    assert json.loads(out)["ops"]["prefill"]


def test_compare_where_every_device_fails_prints_the_reasons(capsys):
    rc, out, err = _run(capsys, "compare", "gpt2", "--devices", "h100", "--dtype", "fp4")
    assert rc == 0, err
    assert "no fp4 peak" in out
    rc, out, err = _run(capsys, "compare", "gpt2", "--devices", "h100", "--dtype", "fp4", "--json")
    assert json.loads(out)[0]["usd_per_unit"] is None


def test_compare_keeps_a_device_whose_replicas_cannot_be_timed(capsys):
    # tpu-v4 has no sourced link: its instance cannot be filled with replicas, one group is reported
    rc, out, err = _run(capsys, "compare", "resnet50", "--mode", "training", "--devices", "tpu-v4,h100", "--json")
    assert rc == 0, err
    rows = {r["device"]: r for r in json.loads(out)}
    assert rows["tpu-v4"]["fits"] and "not filled" in rows["tpu-v4"]["note"]
    assert rows["h100-sxm"]["fits"]


def test_a_device_without_tdp_gives_null_energy_in_json_and_not_sourced_in_text(capsys):
    rc, out, err = _run(capsys, "predict", "gpt2", "--device", "tpu-v5e", "--json")
    assert rc == 0, err
    assert "NaN" not in out and json.loads(out)["energy_j"] is None
    rc, out, err = _run(capsys, "predict", "gpt2", "--device", "tpu-v5e")
    assert "energy         not sourced" in out and "nan" not in out


def test_configs_files_are_read_safely(capsys, tmp_path):
    latin = tmp_path / "rows.jsonl"
    latin.write_bytes(b'{"model": "caf\xe9", "device": "h100"}\n')
    rc, out, err = _run(capsys, "predict", "--configs", str(latin))
    assert rc == 2 and "not UTF-8 text" in err
    rows = tmp_path / "rows2.jsonl"
    rows.write_text("[" * 200_000 + "]" * 200_000 + "\n" + '{"id": 7, "model": "os:abort", "device": "h100"}\n'
                    + '{"id": 8, "model": "gpt2", "device": "h100", "batch": 1e400}\n')
    rc, out, err = _run(capsys, "predict", "--configs", str(rows))
    lines = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and len(lines) == 3
    assert "nested deeper" in lines[0]["error"] and "names Python code" in lines[1]["error"]
    assert lines[2]["id"] == 8 and "expected a number" in lines[2]["error"]
    csv_rows = tmp_path / "rows.csv"
    csv_rows.write_bytes(b"\xef\xbb\xbfmodel,device,batch\ngpt2,h100,2,3\ngpt2,h100,2\n")
    rc, out, err = _run(capsys, "predict", "--configs", str(csv_rows))
    lines = [json.loads(line) for line in out.splitlines()]
    assert "more cells than the header" in lines[0]["error"] and lines[1]["batch"] == 2


def test_bands_never_cross_zero_and_json_never_holds_nan():
    # the same factor either way (planner.units.band): 10 ms / 1.4 = 7.142857 .. 10 x 1.4 = 14
    assert band(10.0, 0.4) == pytest.approx((10 / 1.4, 14.0))
    assert band(10.0, 1.86) == pytest.approx((10 / 2.86, 28.6))
    assert all(v > 0 for f in (0.0, 0.5, 0.99, 1.0, 5.0) for v in band(1e-3, f) + band(1e-3, f, inverse=True))
    assert json_safe({"a": float("nan"), "b": [float("inf"), 1.5], "c": (2,)}) == {"a": None, "b": [None, 1.5],
                                                                                  "c": [2]}


def test_a_zero_count_in_a_configs_row_is_refused_not_taken_as_the_default(capsys, tmp_path):
    # `input_len: 0` once meant "the default 1024" (the code read `x or default`); zero stays valid for zero
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "model": "gpt2", "device": "h100", "input_len": 0}\n'
                    '{"id": "b", "model": "gpt2", "device": "h100", "input_len": 128, "zero": 0}\n')
    rc, out, err = _run(capsys, "predict", "--configs", str(rows), "--json")
    a, b = (json.loads(line) for line in out.splitlines())
    assert "at least 1" in a["error"] and "input_len" in a["error"]
    assert "error" not in b
