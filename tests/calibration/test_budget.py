"""The calibration budget (issue 44 item 4, issue 45 item 5): wall time for the whole command, measuring, fit,
leave-one-out and writing, across resumes; leave-one-out bounded (planner/calibration/loo.py) and equal to
fit_report's where it judges every point; a busy machine (probes varying between repeats) refused.

Driven in-process with test_resume's fake clock and run_one (every measurement 10 s), so every deadline is a
closed-form number and each test takes well under a second."""

import json

import pytest

import planner.calibration.calibrate as calibrate_module
from planner.calibration.bench import local_device
from planner.calibration.budget import BUSY_CV, BusyMachineError, process_age_s, reserve_s, variation
from planner.calibration.calibrate import calibrate
from planner.calibration.loo import leave_one_out, sample_order
from planner.hardware.fit_report import fit_report
from tests.calibration.test_resume import Interrupted, Runs

PLAN = ([{"kind": "launch", "dtype": "fp32"}, {"kind": "view", "dtype": "fp32"}]
        + [{"kind": "copy", "dtype": "fp32", "bytes": 2**e, "warm": False} for e in (20, 22)]
        + [{"kind": "gemm", "dtype": "fp32", "m": 2**e, "n": 64, "k": 64} for e in range(4, 12)])
"""12 entries: at 10 s each, 120 s to measure them all."""


@pytest.fixture
def runs(monkeypatch):
    runs = Runs(monkeypatch)
    runs.loo_calls = []
    real = calibrate_module.leave_one_out

    def loo(profile, max_points, deadline_s, clock):
        runs.loo_calls.append((runs.now, deadline_s))
        return real(profile, max_points, deadline_s, clock)

    monkeypatch.setattr(calibrate_module, "leave_one_out", loo)
    return runs


def _profile(out) -> dict:
    return json.loads((out / local_device("cpu").id / "profile.json").read_text())


def test_reserve_is_the_fit_and_leave_one_out_share():
    # 3 s + 10 x 1.4e-4 s per point + min(30 s, 5% of the budget)
    assert reserve_s(1674, 600) == pytest.approx(3 + 2.3436 + 30)
    assert reserve_s(12, 100) == pytest.approx(3 + 0.0168 + 5)


def test_measuring_stops_early_enough_for_the_fit(runs, tmp_path):
    # budget 100 s: the reserve is 8.0168 s, so measuring ends at 91.98 s (its first 0.8 x 91.98 = 73.59 s before
    # the recheck, which finds no outlier here and leaves the rest to the plan); after the first, no measurement
    # starts that the slowest so far (10 s) would carry past that: 9 measured by 90 s
    calibrate("cpu", 100, tmp_path, plan=PLAN, log=lambda s: None)
    assert runs.measured == PLAN[:9]
    (at, deadline), = runs.loo_calls
    assert at == 90 and deadline == 99  # leave-one-out ends 1 s before the budget, for writing
    profile = _profile(tmp_path)
    assert profile["duration_s"] == 90 and profile["not_measured"] == 3
    assert profile["leave_one_out"]["max_points"] == calibrate_module.LOO_MAX_POINTS
    assert profile["probe_cv"] == 0 and profile["forced"] is False


def test_a_resumed_run_gets_what_is_left_of_the_budget(runs, tmp_path):
    # run 1: 3 measurements (30 s), then Ctrl-C. Run 2, same 100 s budget: 70 s left, measuring ends
    # 70 - 8.0168 = 61.98 s later: 6 more (60 s). 90 s in all, never 100 s again
    with pytest.raises(Interrupted):
        runs.stop_after = 3
        calibrate("cpu", 100, tmp_path, plan=PLAN, log=lambda s: None)
    runs.stop_after, runs.measured = None, []
    log = []
    calibrate("cpu", 100, tmp_path, plan=PLAN, log=log.append)
    assert runs.measured == PLAN[3:9]
    assert any("30 s of the budget spent over 1 earlier run(s)" in line for line in log)
    (_, deadline), = runs.loo_calls
    assert deadline == 30 + 70 - 1  # run 2 started at 30 s on the fake clock, with 70 s left
    profile = _profile(tmp_path)
    assert profile["duration_s"] == 90 and profile["invocations"] == 2


def test_a_run_whose_budget_is_spent_only_fits(runs, tmp_path):
    # run 1 measures 7 points in 70 s and is stopped; run 2 with a 60 s budget has nothing left: it measures
    # nothing, and leave-one-out still gets min(2 s, 5% of 60 s) = 2 s
    with pytest.raises(Interrupted):
        runs.stop_after = 7
        calibrate("cpu", 200, tmp_path, plan=PLAN, log=lambda s: None)
    runs.stop_after, runs.measured = None, []
    calibrate("cpu", 60, tmp_path, plan=PLAN, log=lambda s: None)
    assert runs.measured == []
    (at, deadline), = runs.loo_calls
    assert deadline == at + 2
    assert _profile(tmp_path)["measured"] == 7


def test_variation_is_the_largest_coefficient_of_variation():
    assert variation([[1.0, 10.0]]) == 0  # one round: nothing to compare
    assert variation([[1.0, 10.0], [3.0, 10.0]]) == pytest.approx(2**0.5 / 2)
    assert variation([[2.0, 4.0]] * 6) == 0


def test_a_busy_machine_writes_no_profile_unless_forced(runs, monkeypatch, tmp_path):
    # probe times alternate 1 ms and 2 ms: CV = stdev / mean = 0.5477 / 1.5 = 36.5%, above BUSY_CV
    times = iter([[1e-3, 1e-3], [2e-3, 2e-3]] * 10)
    monkeypatch.setattr(calibrate_module, "probe_round", lambda device: next(times))
    folder = tmp_path / local_device("cpu").id
    folder.mkdir()
    (folder / "profile.json").write_text('{"an": "older profile"}')
    with pytest.raises(BusyMachineError, match=r"the machine is busy: .*CV 37%"):
        calibrate("cpu", 200, tmp_path, plan=PLAN, log=lambda s: None)
    assert json.loads((folder / "profile.json").read_text()) == {"an": "older profile"}
    header = json.loads((folder / "partial.jsonl").read_text().splitlines()[0])
    assert header["probe_cv"] == pytest.approx(0.3651, abs=1e-4) and header["spent_s"] == 120
    # the next run's probes are quiet, but the measurements it resumes were taken busy: refused again
    monkeypatch.setattr(calibrate_module, "probe_round", lambda device: [1e-3, 1e-3])
    with pytest.raises(BusyMachineError):
        calibrate("cpu", 200, tmp_path, plan=PLAN, log=lambda s: None)
    calibrate("cpu", 200, tmp_path, plan=PLAN, log=lambda s: None, force=True)
    profile = _profile(tmp_path)
    assert profile["forced"] is True and profile["probe_cv"] > BUSY_CV and profile["measured"] == len(PLAN)


def test_the_cli_says_the_machine_is_busy_and_exits_2(monkeypatch, capsys):
    from planner.cli import main

    def busy(*args, **kwargs):
        raise BusyMachineError("the machine is busy: the probe points' times varied by CV 40% between repeats")

    monkeypatch.setattr(calibrate_module, "calibrate", busy)
    assert main(["calibrate", "--device", "cpu", "--budget-s", "30"]) == 2
    assert "the machine is busy" in capsys.readouterr().err


def test_process_age_is_this_process_lifetime():
    assert 0 < process_age_s() < 600


def test_sample_order_is_round_robin_over_keys():
    keys = ["a", "a", "a", "b", "c", "c"]
    order = sample_order(keys, seed=1)
    assert sorted(order) == list(range(6))
    assert [keys[i] for i in order] == ["a", "b", "c", "a", "c", "a"]  # one of each key, then the next of each
    assert order == sample_order(keys, seed=1)  # seeded


def _small_profile() -> dict:
    """Measurements with closed-form times: GEMMs at rates that vary with shape, memory kernels at 10 GB/s."""
    rows = [{"kind": "launch", "dtype": "fp32", "time_s": 2e-6, "flop": 0.0, "bytes": 0.0}]
    for m in (16, 32, 64, 128):
        for n in (64, 128, 256):
            flop = 2.0 * m * n * 64
            rows.append({"kind": "gemm", "dtype": "fp32", "m": m, "n": n, "k": 64, "flop": flop,
                         "bytes": 4.0 * (m * 64 + 64 * n + m * n), "time_s": flop / (1e9 * (1 + m / 64 + n / 256))})
    for e in range(12, 24, 2):
        for kind, warm in (("copy", False), ("add", True)):
            rows.append({"kind": kind, "dtype": "fp32", "bytes": 2.0**e, "warm": warm, "flop": 0.0,
                         "time_s": 2.0**e / 1e10 * (1 + 1 / (e - 11))})
    return {"device_id": "cpu-test", "device_name": "test CPU", "kind": "cpu", "properties": {},
            "date": "2026-01-01", "measurements": rows,
            "ceilings": calibrate_module.ceilings(rows)}


def test_leave_one_out_of_every_point_is_fit_reports():
    raw = _small_profile()
    report = leave_one_out(raw)
    extra = {k: report.pop(k) for k in ("eligible", "max_points", "seed", "seconds")}
    assert report == fit_report(raw)
    assert extra["eligible"] == report["n"] == 24  # 12 GEMMs and 12 memory kernels, launch excluded


def test_leave_one_out_is_bounded_by_points_and_by_its_deadline():
    raw = _small_profile()
    assert leave_one_out(raw, max_points=5)["n"] == 5
    ticks = iter(range(1000))
    # the clock ticks 1 s a reading: read at the start, then before each point; past 3.5 s no point starts
    report = leave_one_out(raw, deadline_s=3.5, clock=lambda: float(next(ticks)))
    assert report["n"] == 3 and report["eligible"] == 24
    assert set(report["by_kind"]) == {"gemm:fp32", "mem:copy_cold", "mem:add"}  # one point of each key first
