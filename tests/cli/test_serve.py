"""`planner serve` from the command line: the text report, JSON without NaN, the rate sweep and its
curve, a trace file, and bad input as one line on stderr with exit status 2 (never a traceback).

Every run uses the same model, device and lengths as tests/serve/test_api.py, so the step-time grid
(the default context's cache "serve.steps", planner/serve/api.py) is filled once."""

import json
import random

import pytest

from planner.cli import main

BASE = ["serve", "llama-3.1-8b", "--device", "h100-sxm", "--input-len", "512", "--output-len", "128"]


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([*BASE, *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _no_nan(text: str):
    def refuse(constant):
        raise AssertionError(f"{constant} in JSON output")
    return json.loads(text, parse_constant=refuse)


def test_text_report_has_the_latency_rows_and_littles_law(capsys):
    rc, out, err = _run(capsys, "--rate", "10", "--requests", "200")
    assert rc == 0, err
    assert err == ""
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    for name in ("TTFT", "TPOT", "ITL", "E2E"):
        assert len(rows[name]) == 8, rows[name]  # mean, p50, p90, p99, each a number and a unit
    assert "Little's law" in out
    assert "10 requests/s, Poisson, 200 requests, 512 prompt + 128 output tokens" in out
    assert "nan" not in out.lower() and "inf " not in out


def test_json_parses_and_has_no_nan(capsys):
    rc, out, err = _run(capsys, "--rate", "10", "--requests", "200", "--slo-ttft", "0.5", "--json")
    assert rc == 0, err
    got = _no_nan(out)
    assert got["requests"] == got["completed"] == 200
    assert got["goodput_rps"] is not None and 0 < got["goodput_rps"] <= got["requests_per_s"] * (1 + 1e-12)
    for key in ("ttft_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_s", "tpot_p90_s", "e2e_p99_s",
                "output_tokens_per_s", "requests_per_s"):
        assert isinstance(got[key], float) and got[key] > 0, key


def test_sweep_writes_a_png_curve_and_the_rate_within_slos(tmp_path, capsys):
    png = tmp_path / "curve.png"
    rc, out, err = _run(capsys, "--rate", "10", "--requests", "200", "--sweep-rate", "3", "--slo-ttft", "0.5",
                        "--curve", str(png))
    assert rc == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "within SLOs" in out and "saturation" in out and str(png) in out
    table = [line for line in out.splitlines() if line.strip() and line.split()[0].replace(".", "").isdigit()]
    assert len(table) == 3  # one row per rate


def test_sweep_json_has_no_nan(capsys):
    rc, out, err = _run(capsys, "--rate", "10", "--requests", "100", "--sweep-rate", "2", "--slo-ttft", "0.5",
                        "--json")
    assert rc == 0, err
    got = _no_nan(out)
    assert len(got["curve"]) == 2
    assert 0 < got["max_rate_within_slo_rps"] <= got["saturation_rps"]


def test_a_trace_file_runs(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    # 6 requests of 512 prompt and 128 output tokens, 0.2 s apart (the settings of the other runs)
    trace.write_text("arrival_s,input_len,output_len\n" + "".join(f"{0.2 * i:.1f},512,128\n" for i in range(6)))
    rc, out, err = _run(capsys, "--trace", str(trace), "--json")
    assert rc == 0, err
    got = _no_nan(out)
    assert got["requests"] == got["completed"] == 6
    assert "(6 requests)" in got["load"]


def test_a_disaggregated_deployment_runs_sglang(capsys):
    rc, out, err = _run(capsys, "--rate", "5", "--requests", "50", "--gpus", "2", "--disagg", "1p1d",
                        "--engine", "sglang", "--json")
    assert rc == 0, err
    got = _no_nan(out)
    assert got["copies"] == 2 and got["completed"] == 50


def test_a_disaggregated_deployment_runs_default_engine(capsys):
    rc, out, err = _run(capsys, "--rate", "5", "--requests", "50", "--gpus", "2", "--disagg", "1p1d")
    assert rc == 0, err


ISSUE = ["serve", "llama-3.1-8b", "--device", "h100-sxm", "--rate", "20", "--slo-ttft", "0.5"]
"""Issue 38's command: 1,024 prompt + 256 output tokens at 20 requests/s, above the copy's saturation."""


def _issue(capsys, *argv: str) -> str:
    rc = main([*ISSUE, *argv])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def _goodput_percent(out: str) -> float:
    line = next(line for line in out.splitlines() if line.startswith("goodput"))
    return float(line.split("(")[1].split("%")[0])


def test_the_issues_overloaded_run_warns_and_does_not_show_full_goodput(capsys):
    # before: 1,000 requests, p90 TTFT 135 ms, "100.0% of requests" and no word of the overload
    out = _issue(capsys)
    assert "warning        overloaded: 20 requests/s offered, above the " in out
    assert _goodput_percent(out) < 100.0
    assert "ran " in out and "until the queue's growth showed" in out


def test_a_stated_request_count_keeps_its_count_and_is_warned(capsys):
    # --requests 1000 runs exactly 1,000 requests (what was asked), and says the rate is past saturation
    out = _issue(capsys, "--requests", "1000")
    assert "20 requests/s, Poisson, 1,000 requests" in out
    assert "warning        overloaded: 20 requests/s offered" in out


def test_the_sweeps_verdict_agrees_with_its_table(capsys):
    # before: "within SLOs 18.79 requests/s at most" above a row at 20.75 requests/s whose p90 TTFT (148 ms)
    # met the 0.5 s SLO, with no word that the answer stops at the saturation rate
    out = _issue(capsys, "--sweep-rate", "10")
    lines = out.splitlines()
    saturation = float(next(line for line in lines if line.startswith("saturation")).split()[1])
    verdict_line = next(line for line in lines if line.startswith("within SLOs"))
    verdict = float(verdict_line.split()[2])
    rows = [line.split() for line in lines if line.strip() and line.split()[0].replace(".", "").isdigit()]
    assert len(rows) == 10
    for row in rows:
        rate, p90, unit, marked = float(row[0]), float(row[4].replace(",", "")), row[5], row[-1] == "overloaded"
        within = (p90 * (1e-3 if unit == "ms" else 1.0)) <= 0.5 and not marked
        assert not within or rate <= verdict, (row, verdict_line)  # no row above the verdict meets the SLO
        assert marked == (rate > saturation), row  # a row past saturation is marked, and no other
    assert verdict <= saturation
    if verdict >= 0.99 * saturation:  # every rate up to saturation met the SLO: the answer says it is capped
        assert "capped at saturation" in verdict_line, verdict_line


def _garbage(path):
    path.write_bytes(bytes(random.Random(7).randrange(256) for _ in range(4096)))
    return path


def _text(content):
    def write(path):
        path.write_text(content)
        return path
    return write


@pytest.mark.parametrize("argv,message", [
    (["--device", "h100-sx", "--rate", "5"], "unknown device 'h100-sx'"),
    (["--rate", "0"], "rate"),
    (["--rate", "-3"], "rate"),
    (["--rate", "nan"], "--rate"),
    (["--rate", "inf"], "--rate"),
    (["--rate", "5", "--concurrency", "3"], "not allowed with argument --rate"),
    ([], "serve needs exactly one of --rate, --concurrency or --trace"),
    (["--rate", "5", "--curve", "x.png"], "--curve needs --sweep-rate"),
    (["--rate", "5", "--disagg", "1x1"], "--disagg"),
    (["--rate", "5", "--requests", "0"], "--requests"),
    (["--rate", "5", "--prefix-hit-rate", "1.5"], "--prefix-hit-rate"),
    (["--rate", "5", "--slo-ttft", "-1"], "--slo-ttft"),
    (["--rate", "5", "--slo-stat", "p42"], "--slo-stat"),
    (["--rate", "5", "--sweep-rate", "1"], "--sweep-rate"),
    (["--rate", "5", "--lengths", "nosuch"], "unknown length preset"),
    (["--concurrency", "4", "--gpus", "2", "--disagg", "1p1d"], "--disagg"),
    (["--rate", "5", "--recv-interval", "30"], "--recv-interval is SGLang's"),
    (["--rate", "5", "--engine", "sglang", "--batch-wait-iters", "40"], "--batch-wait-iters"),
    (["--rate", "5", "--engine", "trtllm", "--batch-wait-iters", "4", "--batch-wait-tokens-ratio", "nan"],
     "--batch-wait-tokens-ratio"),
], ids=["unknown-device", "rate-0", "rate-negative", "rate-nan", "rate-inf", "rate-and-concurrency", "no-load",
        "curve-without-sweep", "disagg-1x1", "requests-0", "prefix-1.5", "slo-negative", "slo-stat",
        "sweep-1-point", "unknown-lengths", "disagg-closed-loop", "recv-interval-vllm", "batch-wait-sglang",
        "batch-wait-ratio-nan"])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    rc, out, err = _run(capsys, *argv)
    assert rc == 2
    # planner's own errors start "planner: error:", argparse's "planner serve: error:"
    assert err.startswith("planner") and " error: " in err and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err
    assert out == ""


HOSTILE_TRACES = [
    ("missing.csv", None, "does not exist"),
    ("garbage.csv", _garbage, "not UTF-8"),
    ("garbage.jsonl", _garbage, "not UTF-8"),
    ("trace.txt", _text("arrival_s,input_len,output_len\n0,512,128\n"), "unknown suffix"),
    ("empty.csv", _text("arrival_s,input_len,output_len\n"), "has no requests"),
    ("header.csv", _text("a,b,c\n0,512,128\n"), "needs exactly one of arrival_s"),
    ("nan.csv", _text("arrival_s,input_len,output_len\n0,512,128\n0.1,nan,128\n"), "line 3"),
    ("huge.csv", _text("arrival_s,input_len,output_len\n0,99999999999,128\n"), "'input_len'"),
    ("negative.csv", _text("arrival_s,input_len,output_len\n-1,512,128\n"), "'arrival_s'"),
    ("ragged.csv", _text("arrival_s,input_len,output_len\n0,512\n"), "2 cells"),
    ("broken.jsonl", _text('{"arrival_s": 0, "input_len": 512, "output_len": 128}\n{broken\n'), "line 2"),
    ("list.jsonl", _text("[1, 2, 3]\n"), "JSON object"),
    ("overflow.jsonl", _text('{"arrival_s": 0, "input_len": 1e400, "output_len": 3}\n'), "'input_len'"),
]


@pytest.mark.parametrize("name,write,message", HOSTILE_TRACES, ids=[name for name, _, _ in HOSTILE_TRACES])
def test_a_hostile_trace_is_one_line_and_exit_2(tmp_path, capsys, name, write, message):
    path = tmp_path / name
    if write is not None:
        write(path)
    rc, out, err = _run(capsys, "--trace", str(path))
    assert rc == 2
    assert err.startswith("planner: error: trace") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err
    assert out == ""


def test_configs_rows_with_a_load_run_the_simulator(tmp_path, capsys):
    # a row with `concurrency` is simulated (percentile keys), one without is predicted, a bad serving
    # key is a one-line error for that row only
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "model": "llama-3.1-8b", "device": "h100-sxm", "input_len": 512, "output_len": 64, '
                    '"concurrency": 1, "requests": 5}\n'
                    '{"id": "b", "model": "llama-3.1-8b", "device": "h100-sxm", "arrival_rate_rps": "x"}\n'
                    '{"id": "c", "model": "llama-3.1-8b", "device": "h100-sxm", "input_len": 512, "output_len": 64}\n')
    assert main(["predict", "--configs", str(rows), "--json"]) == 0
    a, b, c = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert a["ttft_p90_s"] is not None and "tpot_s" in a and a["completed"] == 5
    assert "arrival_rate_rps" in b["error"]
    # one request at a time: the simulated TTFT is the predicted one plus vLLM's 4 ms in its HTTP server
    assert a["ttft_s"] == pytest.approx(c["ttft_s"] + 0.004, rel=1e-9)


def test_configs_rows_take_the_servers_wait_settings(tmp_path, capsys):
    # SGLang's recv_interval and TensorRT-LLM's batch wait as --configs keys: the scheduler line names them, and a
    # key for the other engine is that row's one-line error
    rows = tmp_path / "rows.jsonl"
    base = '"model": "llama-3.1-8b", "device": "h100-sxm", "input_len": 512, "output_len": 64, "concurrency": 4, ' \
           '"requests": 12'
    rows.write_text(f'{{"id": "s", {base}, "engine": "sglang", "recv_interval": 30}}\n'
                    f'{{"id": "t", {base}, "engine": "trtllm", "batch_wait_iters": 40, "batch_wait_tokens_ratio": 0.8}}\n'
                    f'{{"id": "v", {base}, "engine": "vllm", "recv_interval": 30}}\n')
    assert main(["predict", "--configs", str(rows), "--json"]) == 0
    s, t, v = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert "new requests taken every 30 decode steps" in s["policy"]
    assert "new prompts held up to 40 steps until 80% of the budget is scheduled" in t["policy"]
    assert "--recv-interval is SGLang's" in v["error"]
