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


# ------------------------------------------------------------------ issue 45: the second hardening pass

_MM = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5,
       "args": {"Input type": ["float", "float"], "Input Dims": [[4, 8], [8, 2]]}}


def _trace(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("event, message", [
    (json.dumps({"traceEvents": [{**_MM, "dur": 0}]}), "spans no time"),
    (json.dumps({"traceEvents": [{**_MM, "dur": 1e308}]}), "'dur' = 1e+308 us, beyond"),
    ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ' + "9" * 401
     + ', "dur": 5}]}', "'ts' = a 401-digit number us"),
])
def test_traces_with_impossible_times_are_one_line_errors(capsys, tmp_path, event, message):
    rc, out, err = _run(capsys, "trace", _trace(tmp_path, "t.json", event), "--device", "h100-sxm")
    assert rc == 2 and message in err and err.count("\n") == 1


def test_a_grid_number_beyond_float_is_refused(capsys, tmp_path):
    for spec in ({"from": 1, "to": 10**400, "times": 2}, [1, 10**400]):
        grid = tmp_path / "g.yaml"
        body = json.dumps({"axes": {"model": ["gpt2"], "device": ["h100-sxm"], "batch": "SPEC"}})
        grid.write_text(body.replace('"SPEC"', json.dumps(spec) if isinstance(spec, list) else
                                     "{" + ", ".join(f'"{k}": {v}' for k, v in spec.items()) + "}"))
        rc, out, err = _run(capsys, "sweep", str(grid), "--out", str(tmp_path / "s.parquet"), "--no-progress")
        assert rc == 2 and "up to 1e+300" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, message", [
    (["predict", "gpt2", "--device", "h100-sxm", "--roofline", "/proc/self/x.png"], "--roofline: cannot write"),
    (["sweep", "examples/sweeps/serving.yaml", "--cluster", "tcp://[::1"], "not a valid tcp://HOST:PORT address"),
    (["sweep", "examples/sweeps/serving.yaml", "--cluster", "dask://host"], "needs a host and a port"),
    (["sweep", "examples/sweeps/serving.yaml", "--cluster", "dask://h:0"], "port 0 is not in 1..65535"),
    (["sweep", "examples/sweeps/serving.yaml", "--out", "a" * 300 + ".parquet"], "the limit is 240 bytes"),
    (["count", "gpt2", "--top", "-1"], "--top must be a whole number from 0"),
    (["op", "allreduce", "--device", "h100", "--bytes", "1.5", "--gpus", "8"], "whole number of bytes"),
    (["serve", "gpt2", "--device", "l4", "--rate", "2", "--input-len", "128", "--output-len", "32", "--slo-ttft", "0"],
     "--slo-ttft must be a positive number"),
    (["compare", "gpt2", "--devices", ""], "names no device"),
    (["count", "os:abort"], "add --allow-code"),
    (["count", "code:interact"], "add --allow-code"),
    (["predict", "os:abort", "--device", "h100"], "add --allow-code"),
    (["compare", "json:loads"], "add --allow-code"),
])
def test_issue_45_command_lines_are_one_line_errors(capsys, argv, message):
    rc, out, err = _run(capsys, *argv)
    assert rc == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_host_scale_needs_a_what_if_and_a_sane_value(capsys, tmp_path):
    trace = _trace(tmp_path, "t.json", json.dumps({"traceEvents": [_MM]}))
    rc, out, err = _run(capsys, "trace", trace, "--device", "h100-sxm", "--host-scale", "-1")
    assert rc == 2 and "--host-scale scales the host time of a what-if" in err
    rc, out, err = _run(capsys, "trace", trace, "--device", "h100-sxm", "--on", "a100-sxm-80gb", "--host-scale", "-1")
    assert rc == 2 and "--host-scale must be a number in [0, 100]" in err


def test_configs_limits_empty_files_and_the_row_limit(capsys, tmp_path, monkeypatch):
    from planner.cli import predict as cli_predict

    for name, text in (("e.jsonl", ""), ("blank.jsonl", "\n \n"), ("h.csv", "model,device\n")):
        rc, out, err = _run(capsys, "predict", "--configs", _trace(tmp_path, name, text))
        assert rc == 2 and "holds no configuration" in err and out == ""
    monkeypatch.setattr(cli_predict, "MAX_CONFIG_ROWS", 3)  # the limit counts rows, not rows + 1
    row = '{"model": "gpt2", "device": "h100"}\n'
    rc, out, err = _run(capsys, "predict", "--configs", _trace(tmp_path, "four.jsonl", row * 4))
    assert rc == 2 and "4 rows; the limit is 3" in err
    rc, out, err = _run(capsys, "predict", "--configs", _trace(tmp_path, "three.csv", "model,device\n"
                                                                + "gpt2,h100\n" * 3), "--json")
    assert rc == 0 and len(out.splitlines()) == 3


def test_a_wrong_specs_folder_names_the_variable_and_the_folder(capsys, monkeypatch, tmp_path):
    from planner.predict.context import default_context
    from planner.workload.quant import load_recipes

    monkeypatch.setenv("PLANNER_HARDWARE_SPECS", str(tmp_path))
    default_context.cache_clear()
    try:
        rc, out, err = _run(capsys, "predict", "gpt2", "--device", "h100-sxm")
    finally:
        monkeypatch.delenv("PLANNER_HARDWARE_SPECS")
        default_context.cache_clear()
        getattr(load_recipes, "cache_clear", lambda: None)()
    assert rc == 2 and f"PLANNER_HARDWARE_SPECS='{tmp_path}' has no " in err and err.count("\n") == 1


def test_a_model_file_named_by_data_is_not_echoed(capsys, tmp_path):
    other = tmp_path / "secret.json"
    other.write_text('{"model_type": "TOKEN-abc123", "x": 1}')
    rows = _trace(tmp_path, "rows.jsonl", json.dumps({"model": str(other), "device": "h100"}) + "\n")
    rc, out, err = _run(capsys, "predict", "--configs", rows, "--json")
    line = json.loads(out)
    assert rc == 0 and "TOKEN-abc123" not in line["error"] and "is not one planner reads" in line["error"]
    # named on the command line by its user: the value is shown, to find the typo
    rc, out, err = _run(capsys, "count", str(other))
    assert rc == 2 and "TOKEN-abc123" in err


def test_a_scenario_with_an_empty_candidate_list_is_refused(capsys, tmp_path):
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "examples" / "chat.yaml").read_text()
    assert "providers: [aws, gcp, azure, runpod, lambda]" in text
    scenario = _trace(tmp_path, "s.yaml", text.replace("providers: [aws, gcp, azure, runpod, lambda]", "providers: []"))
    rc, out, err = _run(capsys, "plan", scenario)
    assert rc == 2 and "candidates.cloud.providers: is an empty list" in err


def test_serving_a_learned_position_model_packs_long_steps_into_sequences(capsys):
    # gpt2 holds 1,024 positions; a step of 2,048 prompt tokens is two requests' prompts, not one sequence
    rc, out, err = _run(capsys, "serve", "gpt2", "--device", "l4", "--rate", "2", "--input-len", "128",
                        "--output-len", "32", "--requests", "50", "--json")
    assert rc == 0, err


def test_plan_csv_neutralises_spreadsheet_formulas():
    import pandas as pd

    from planner.files import spreadsheet_csv

    text = spreadsheet_csv(pd.DataFrame({"name": ["=HYPERLINK(\"x\")", "+1", "-cmd", "@SUM(A1)", "ok", None],
                                         "usd": [-1.5, 2.0, 3.0, 4.0, 5.0, 6.0]}))
    assert text.splitlines() == ["name,usd", "\"'=HYPERLINK(\"\"x\"\")\",-1.5", "'+1,2.0", "'-cmd,3.0",
                                 "'@SUM(A1),4.0", "ok,5.0", ",6.0"]


def test_a_plan_whose_weights_are_all_zero_is_solved_not_an_internal_error(capsys, tmp_path):
    # every plan then has the same objective (a constant): the tie-break must not hold it by a constraint
    scenario = _trace(tmp_path, "s.yaml", "name: tiny\nhorizon_months: 12\nobjective: cost\n"
                      "workloads: [{name: chat, model: gpt2, dtype: bf16, demand_rps: 5, buckets: [{input_len: 128, "
                      "output_len: 32, share: 1.0}], slo: {ttft_s: 1.0, tpot_s: 0.1}}]\n"
                      "candidates: {cloud: {providers: [runpod], pricing: [on_demand]}}\n"
                      "constraints: {monthly_budget_usd: 100000}\nweights: {cost: 0, energy: 0}\n")
    rc, out, err = _run(capsys, "plan", scenario)
    assert rc in (0, 2) and "internal error" not in err


def test_calibration_logs_say_n_a_where_there_was_no_point_to_check():
    from planner.units import percent_or_na

    assert percent_or_na(float("nan")) == "n/a (no points)" and percent_or_na(0.1234) == "12.3%"


def test_a_port_that_is_no_dask_scheduler_is_a_clear_error_within_seconds(tmp_path):
    """Issue 45 item 2: a port that accepts and says nothing (a web server, a stray service) made Dask's
    client wait for ever; the probe reads the scheduler's greeting and stops in seconds."""
    import socket
    import time

    from planner.errors import ConfigError
    from planner.sweep.grid import parse_grid
    from planner.sweep.run import run_sweep

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    grid = parse_grid({"axes": {"model": ["gpt2"], "device": ["h100-sxm"], "batch": [1]}})
    start = time.perf_counter()
    try:
        with pytest.raises(ConfigError, match="is not a Dask scheduler"):
            run_sweep(grid, tmp_path / "s.parquet", "dask", address=f"tcp://127.0.0.1:{port}")
    finally:
        server.close()
    assert time.perf_counter() - start < 30


def test_a_large_grid_reports_its_constraint_checks_and_finishes(monkeypatch):
    """Issue 45 item 2: a grid whose constraints drop every point says how far it is, and ends."""
    from planner.sweep import grid as grid_module

    monkeypatch.setattr(grid_module, "CHECK_REPORT", 100)
    grid = grid_module.parse_grid({"axes": {"model": ["gpt2"], "device": ["h100-sxm"], "batch": list(range(1, 501))},
                                   "where": ["batch > 1000"]})
    seen = []
    assert list(grid.points(seen.append)) == [] and seen == [100, 200, 300, 400, 500]


def test_a_read_only_folder_for_the_roofline_is_a_one_line_error(capsys, tmp_path):
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder: this run cannot see the refusal")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        rc, out, err = _run(capsys, "predict", "gpt2", "--device", "h100-sxm", "--roofline", str(folder / "r.png"))
    finally:
        folder.chmod(0o755)
    assert rc == 2 and "--roofline: cannot write" in err and err.count("\n") == 1 and not list(folder.iterdir())
