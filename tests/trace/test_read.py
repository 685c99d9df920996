"""The trace reader: real profiler traces read whole, and every malformed or hostile file refused in one line."""

from __future__ import annotations

import gzip
import json

import pytest

from planner.cli import main
from planner.trace.read import TraceError, parse_trace, read_trace
from tests.trace.conftest import GPU_TRACES


def test_a_cpu_trace_keeps_every_host_op_nested_by_time(traces):
    raw = json.loads(traces["transformer_forward"].path.read_text())
    ops_in_file = [e for e in raw["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    trace = read_trace(traces["transformer_forward"].path)
    assert len(trace.ops) == len(ops_in_file)
    assert not trace.has_device and trace.device_name == ""
    for op in trace.ops:
        if op.parent is not None:
            parent = trace.ops[op.parent]
            # a child starts inside its parent and ends inside it (within the 1 us rounding the reader allows)
            assert parent.start_ns <= op.start_ns and op.end_ns <= parent.end_ns
            assert op.depth == parent.depth + 1 and op.thread == parent.thread


def test_a_gpu_trace_links_every_kernel_to_the_op_that_launched_it():
    trace = read_trace(GPU_TRACES / "h100_llama1b_prefill_b1_s512_bf16.json.gz")
    assert trace.device_name == "NVIDIA H100 80GB HBM3" and trace.device_properties["numSms"] == 132
    ids = {op.external_id for op in trace.ops}
    # 661 kernels and 17 memsets (reference/h100/README.md), each with its launching op's External id
    assert len(trace.device_events) == 678
    assert all(e.external_id in ids for e in trace.device_events)
    # the profiler's own span event: 21,638.827 us
    assert trace.span_ns == 21_638_827


def _gz(obj) -> bytes:
    return gzip.compress(json.dumps(obj).encode())


GOOD = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5,
                         "args": {"Input type": ["float", "float"], "Input Dims": [[4, 8], [8, 2]]}}]}


@pytest.mark.parametrize("data, message", [
    (b"", "is empty"),
    (b"{\"traceEvents\": [", "not valid JSON"),
    (_gz(GOOD)[:-10], "truncated gzip"),
    (b"\x1f\x8b\x08\x00garbage", "gzip"),
    (b"[" * 5000 + b"]" * 5000, "nested deeper"),
    (json.dumps({"traceEvents": 3}).encode(), "traceEvents"),
    (json.dumps({"traceEvents": []}).encode(), "no host ops"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": NaN, "dur": 1}]}', "not valid JSON"),
    (json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 0, "dur": -1}]}).encode(), "negative"),
    (json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", "ts": "0", "dur": 1}]}).encode(), "numeric 'ts'"),
    (json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1, "args": {
        "Input type": ["float"], "Input Dims": [[2**50]]}}]}).encode(), "not an integer"),
    (json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1, "args": {
        "Input type": ["float"] * 300}}]}).encode(), "lists 300 inputs"),
    ("\xff\xfe".encode("latin-1"), "not UTF-8"),
])
def test_malformed_traces_are_one_line_errors(data, message):
    with pytest.raises(TraceError) as exc:
        parse_trace(data, "t.json")
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_trace_over_the_limit_is_refused_before_it_is_parsed():
    with pytest.raises(TraceError, match="over the limit of 1,000 bytes"):
        parse_trace(b" " * 1001, "big.json", max_bytes=1000)


def test_a_gzip_bomb_stops_at_the_limit():
    bomb = gzip.compress(b" " * (50 * 2**20))  # 50 MiB of spaces in about 50 KB
    assert len(bomb) < 100_000
    with pytest.raises(TraceError, match="decompresses to over the limit"):
        parse_trace(bomb, "bomb.json.gz", max_bytes=2**20)


def test_op_names_are_looked_up_never_run(tmp_path):
    # a hostile name is only a string: it is not an aten op, so it is listed uncounted
    from planner.trace.ops import count_op
    doc = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": n, "ts": 0, "dur": 1, "pid": 1, "tid": 1,
                            "args": {"Input type": ["Scalar"], "Concrete Inputs": ["__import__('os').system('x')"]}}
                           for n in ("__import__('os')", "aten::__class__", "aten::add;rm -rf")]}
    trace = parse_trace(json.dumps(doc).encode(), "hostile.json")
    assert [count_op(op).category for op in trace.ops] == ["uncounted"] * 3


@pytest.mark.parametrize("content, message", [
    (b"not json", "not valid JSON"),
    (_gz(GOOD)[:40], "truncated gzip"),
])
def test_the_cli_gives_one_line_and_exit_2(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert main(["trace", str(bad), "--device", "h100-sxm"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_the_cli_refuses_a_trace_over_max_mb(tmp_path, capsys):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (2 * 2**20))
    assert main(["trace", str(big), "--max-mb", "1"]) == 2
    assert "over the limit" in capsys.readouterr().err


def test_a_missing_file_is_one_line(capsys):
    assert main(["trace", "/no/such/trace.json"]) == 2
    assert "does not exist" in capsys.readouterr().err
