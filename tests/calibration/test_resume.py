"""Resuming an interrupted calibration (planner/calibration/resume.py): a line cut by the interruption is dropped
with a note and the file rewritten whole, so later appends start on a fresh line and every later resume reads them;
malformed lines are skipped with a note; the measuring time adds up across invocations into the profile's
duration_s, with the invocation count.

Runs are driven in-process with a fake run_one (fixed, consistent timings) and a fake clock that advances 10 s per
measurement, so the time arithmetic is exact and each test takes well under a second."""

import json
import types

import pytest

import planner.calibration.calibrate as calibrate_module
from planner.calibration.bench import local_device
from planner.calibration.calibrate import _plan_hash, calibrate
from planner.calibration.resume import read_partial

PLAN = ([{"kind": "launch", "dtype": "fp32"}, {"kind": "view", "dtype": "fp32"}]
        + [{"kind": "copy", "dtype": "fp32", "bytes": 2**e, "warm": False} for e in (20, 22)]
        + [{"kind": "gemm", "dtype": "fp32", "m": m, "n": 64, "k": 64} for m in (16, 32, 64)])
KEYS = [json.dumps(entry, sort_keys=True) for entry in PLAN]
STEP_S = 10.0
"""Fake seconds one measurement takes."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C in the middle of a measurement (before it is recorded)."""


class Runs:
    """A fake clock and run_one: every measurement advances the clock STEP_S; `stop_after` measurements into an
    invocation, the next one raises Interrupted. GEMMs run at exactly 10 GFLOP/s (no outlier is re-measured)."""

    def __init__(self, monkeypatch):
        self.now = 0.0
        self.stop_after: int | None = None
        self.measured: list[dict] = []
        monkeypatch.setattr(calibrate_module, "time", types.SimpleNamespace(perf_counter=lambda: self.now))
        monkeypatch.setattr(calibrate_module, "run_one", self.run_one)
        monkeypatch.setattr(calibrate_module, "probe_round", lambda device: [1e-3, 2e-3])  # a quiet machine

    def run_one(self, entry: dict, device) -> dict:
        if self.stop_after is not None and len(self.measured) >= self.stop_after:
            raise Interrupted
        self.now += STEP_S
        self.measured.append(entry)
        if entry["kind"] == "gemm":
            flop = 2.0 * entry["m"] * entry["n"] * entry["k"]
            result = {"time_s": flop / 1e10, "flop": flop, "bytes": 4.0 * (entry["m"] * 128 + 64 * 64)}
        elif entry["kind"] == "copy":  # a memory entry's `bytes` (buffer size) becomes the traffic: read + write
            result = {"time_s": 2 * entry["bytes"] / 1e10, "flop": 0.0, "bytes": 2.0 * entry["bytes"]}
        else:
            result = {"time_s": 2e-6, "flop": 0.0, "bytes": 0.0}
        return {**entry, **result, "samples": 3, "spread": 0.0}

    def invoke(self, out, stop_after: int | None = None) -> tuple[list[str], list[dict]]:
        """One `planner calibrate` invocation; returns its log lines and the entries it measured."""
        self.stop_after, self.measured, log = stop_after, [], []
        if stop_after is None:
            calibrate("cpu", 3600, out, plan=PLAN, log=log.append)
        else:
            with pytest.raises(Interrupted):
                calibrate("cpu", 3600, out, plan=PLAN, log=log.append)
        return log, self.measured


@pytest.fixture
def runs(monkeypatch):
    return Runs(monkeypatch)


def _partial(out):
    return out / local_device("cpu").id / "partial.jsonl"


def _lines(path) -> list[dict]:
    text = path.read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]  # every line whole: no record glued to a cut one


def test_a_cut_last_line_is_dropped_and_later_appends_are_read_by_every_resume(runs, tmp_path):
    # run 1 records 3 measurements (10, 20, 30 s), then Ctrl-C (the header is rewritten: 30 s spent); the kill
    # came mid-write of the third line
    runs.invoke(tmp_path, stop_after=3)
    partial = _partial(tmp_path)
    text = partial.read_text()
    cut = text[:text.rindex("\n", 0, len(text) - 1) + 1] + text.splitlines()[-1][:40]
    partial.write_text(cut)  # no newline at the end: the third record is half written

    # run 2: the cut line is dropped with a note, the file rewritten; 1 measurement is appended, then Ctrl-C
    log, measured = runs.invoke(tmp_path, stop_after=1)
    assert any("dropped the cut last line of partial.jsonl (line 4, 40 characters" in line for line in log)
    # the time of the cut measurement was spent all the same: it counts against the budget
    assert any("resuming" in line and "2 of 7 measurements already done (30 s of the budget spent over 1 earlier "
               "run(s))" in line for line in log)
    assert measured == [PLAN[2]]  # the cut measurement runs again
    header, *records = _lines(partial)
    assert header["spent_s"] == 40 and header["invocations"] == 2
    assert [r["key"] for r in records] == KEYS[:3]
    assert [(r["spent_s"], r["invocation"]) for r in records] == [(10, 1), (20, 1), (40, 2)]

    # run 3 reads all 3 records, including the one appended after the repair, and measures only the rest
    log, measured = runs.invoke(tmp_path, stop_after=2)
    assert not any("dropped" in line or "skipped" in line for line in log)
    assert any("3 of 7 measurements already done (40 s of the budget spent over 2 earlier run(s))" in line
               for line in log)
    assert measured == PLAN[3:5]
    assert [r["key"] for r in _lines(partial)[1:]] == KEYS[:5]


def test_time_adds_up_across_invocations_into_the_profile(runs, tmp_path):
    # 2 + 3 + 2 measurements at 10 s each over three invocations: duration_s = 70 s, invocations = 3
    runs.invoke(tmp_path, stop_after=2)
    runs.invoke(tmp_path, stop_after=3)
    log, measured = runs.invoke(tmp_path)
    assert measured == PLAN[5:]
    profile = json.loads((_partial(tmp_path).parent / "profile.json").read_text())
    assert profile["duration_s"] == 70.0 and profile["invocations"] == 3
    assert profile["measured"] == len(PLAN) and not _partial(tmp_path).exists()
    # the bookkeeping of partial.jsonl is not part of a measurement
    assert all("spent_s" not in m and "invocation" not in m for m in profile["measurements"])
    assert any("(7 measurements, 70 s of the 3600 s budget over 3 runs;" in line for line in log)


def test_an_invocation_interrupted_before_its_first_measurement_still_counts(runs, tmp_path):
    runs.invoke(tmp_path, stop_after=2)  # invocation 1: 20 s
    runs.invoke(tmp_path, stop_after=0)  # invocation 2: Ctrl-C at once, 0 s
    runs.invoke(tmp_path)  # invocation 3: the other 5, 50 s
    profile = json.loads((_partial(tmp_path).parent / "profile.json").read_text())
    assert profile["duration_s"] == 70.0 and profile["invocations"] == 3


def _record(index: int, spent_s: float, **changes) -> dict:
    entry = PLAN[index]
    measured = {"time_s": 1e-3, "flop": 0.0, "bytes": 2.0 * entry.get("bytes", 1)}
    return {**entry, **measured, "samples": 3, "spread": 0.0, "key": KEYS[index], "spent_s": spent_s,
            "invocation": 1, **changes}


def test_malformed_middle_lines_are_skipped_with_a_note(tmp_path):
    header = {"plan": _plan_hash(PLAN), "device": "cpu-x", "spent_s": 0, "invocations": 1}
    lines = [
        json.dumps(header),
        json.dumps(_record(0, 10)),  # line 2: kept
        '{"kind": "view", "time_s": ',  # line 3: cut, but not the last line
        "",  # line 4: blank
        json.dumps(_record(1, 20)).replace("0.001", "NaN"),  # line 5: NaN time
        json.dumps(_record(2, 30, time_s=0)),  # line 6: zero time would divide the bandwidth ceiling by 0
        json.dumps(_record(3, 40, key='{"kind": "fft"}')),  # line 7: not an entry of this plan
        json.dumps({**_record(4, 50), "m": "16"}),  # line 8: a GEMM whose m is not its entry's (a string)
        json.dumps({k: v for k, v in _record(4, 50).items() if k != "dtype"}),  # line 9: no dtype
        json.dumps(_record(3, 60, warm=True)),  # line 10: a cold copy marked warm: not its entry
        json.dumps(_record(4, 70, kind="copy")),  # line 11: a GEMM's key on a copy
        "[" * 100 + "]" * 100,  # line 12: nested deeper than JSON is read
        json.dumps(_record(5, 80, flop=float("inf"))).replace("Infinity", "1e400"),  # line 13: overflows to inf
        json.dumps(_record(0, 90, time_s=5.0)),  # line 14: a second record of entry 0: ignored, no note
        json.dumps(_record(6, 100, error="RuntimeError: no kernel")),  # line 15: a recorded failure: kept
    ]
    path = tmp_path / "partial.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode())
    resumed = read_partial(path, _plan_hash(PLAN), set(KEYS))
    assert [r["key"] for r in resumed.done] == [KEYS[0], KEYS[6]]
    assert resumed.done[0]["time_s"] == 1e-3  # the first record of an entry wins
    assert resumed.notes == tuple(f"skipped malformed line {n} of partial.jsonl: that measurement runs again"
                                  for n in range(3, 14))
    # the time of the records kept (the skipped ones may be wrong) and the invocations seen
    assert resumed.spent_s == 100 and resumed.invocations == 1


@pytest.mark.parametrize("content, note", [
    (b"", "the header line of partial.jsonl is unreadable: starting afresh"),
    (b'{"plan": "0123', "the header line of partial.jsonl is unreadable: starting afresh"),
    (b'{"plan": "another", "spent_s": 5}\n', "holds measurements of another plan: starting afresh"),
    (b"\xff\xfe\x00garbage\n", "the header line of partial.jsonl is unreadable: starting afresh"),
])
def test_an_unusable_file_starts_afresh(tmp_path, content, note):
    path = tmp_path / "partial.jsonl"
    path.write_bytes(content)
    resumed = read_partial(path, _plan_hash(PLAN), set(KEYS))
    assert resumed.done == () and resumed.spent_s == 0 and resumed.invocations == 0
    assert len(resumed.notes) == 1 and note in resumed.notes[0]


def test_a_skipped_record_is_measured_again(runs, tmp_path):
    runs.invoke(tmp_path, stop_after=4)
    partial = _partial(tmp_path)
    header, *records = partial.read_text().splitlines()
    records[1] = records[1].replace('"kind": "view"', '"kind": "gemm"')  # disagrees with its key
    partial.write_text("\n".join([header, *records]) + "\n")
    log, measured = runs.invoke(tmp_path)
    assert any("skipped malformed line 3 of partial.jsonl" in line for line in log)
    assert measured == [PLAN[1], *PLAN[4:]]
    profile = json.loads((partial.parent / "profile.json").read_text())
    assert sorted(m["key"] for m in profile["measurements"]) == sorted(KEYS)
