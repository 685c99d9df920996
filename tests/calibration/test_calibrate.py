"""Calibration: a short run in CI, resumable after Ctrl-C, never a half-written profile."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from planner.calibration.bench import local_device
from planner.calibration.calibrate import build_plan, calibrate

ROOT = Path(__file__).resolve().parents[2]
SMALL_PLAN = ([{"kind": "launch", "dtype": "fp32"}, {"kind": "view", "dtype": "fp32"}]
              + [{"kind": "copy", "dtype": "fp32", "bytes": 2**e, "warm": False} for e in (26, 24, 22)]
              + [{"kind": "gemm", "dtype": "fp32", "m": m, "n": n, "k": k} for m in (16, 128, 512) for n in (128, 512)
                 for k in (128, 512)]
              + [{"kind": kind, "dtype": "fp32", "bytes": 2**e, "warm": True} for kind in ("add", "gelu")
                 for e in (14, 18, 22)])


def test_plan_covers_every_kind_early():
    plan = build_plan(local_device("cpu"))
    first = {e["kind"] for e in plan[:60]}
    assert {"gemm", "conv", "attention", "copy", "launch", "bmm"} <= first
    assert plan[0]["kind"] == "launch"


@pytest.mark.slow
def test_short_calibration_writes_a_complete_profile(tmp_path):
    # the CI calibration: a 60 s budget over the full plan, the fit and leave-one-out within it (10% slack for a
    # busy host: one measurement or one leave-one-out refit may run past a deadline)
    began = time.perf_counter()
    path = calibrate("cpu", budget_s=60, out=tmp_path, log=lambda s: None, force=True)
    assert time.perf_counter() - began <= 66
    profile = json.loads(path.read_text())
    for key in ("device_id", "device_name", "properties", "versions", "date", "duration_s", "measurements",
                "ceilings", "leave_one_out"):
        assert key in profile, key
    assert profile["versions"]["torch"]
    assert profile["ceilings"]["gemm_fp32_flop_per_s"] > 1e9
    assert profile["ceilings"]["copy_bytes_per_s"] > 1e9
    kinds = {m["kind"] for m in profile["measurements"]}
    assert {"gemm", "conv", "attention", "copy", "launch"} <= kinds
    assert profile["leave_one_out"]["n"] > 20
    assert not (path.parent / "partial.jsonl").exists()


def _script(out: Path) -> str:
    return ("import sys; sys.path.insert(0, %r); from tests.calibration.test_calibrate import SMALL_PLAN; "
            "from planner.calibration.calibrate import calibrate; "
            "calibrate('cpu', 120, %r, plan=SMALL_PLAN, force=True)") % (str(ROOT), str(out))


def test_interrupted_calibration_resumes_and_never_half_writes(tmp_path):
    device = local_device("cpu")
    folder = tmp_path / device.id
    folder.mkdir()
    old = folder / "profile.json"
    old.write_text('{"an": "older complete profile"}')
    proc = subprocess.Popen([sys.executable, "-c", _script(tmp_path)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    partial = folder / "partial.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if partial.exists() and len(partial.read_text().splitlines()) >= 6:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    proc.wait(timeout=60)
    assert proc.returncode != 0
    # the old profile is untouched and the measurements so far are kept
    assert json.loads(old.read_text()) == {"an": "older complete profile"}
    done = len(partial.read_text().splitlines()) - 1
    assert 5 <= done < len(SMALL_PLAN)
    # run again: it resumes, measures only what is left, and replaces the profile atomically
    result = subprocess.run([sys.executable, "-c", _script(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "resuming" in result.stderr and f"{done} of {len(SMALL_PLAN)}" in result.stderr
    profile = json.loads(old.read_text())
    assert profile["measured"] == len(SMALL_PLAN)
    assert not partial.exists() and not (folder / "profile.json.tmp").exists()


def test_cli_ctrl_c_exits_with_a_message_not_a_traceback(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "planner.cli", "calibrate", "--device", "cpu", "--budget-s", "60",
                             "--out", str(tmp_path)], cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    # interrupt once measuring has started (a signal during `import torch` would test Python, not us)
    partial = tmp_path / local_device("cpu").id / "partial.jsonl"
    deadline = time.time() + 180
    while time.time() < deadline and not (partial.exists() and len(partial.read_text().splitlines()) >= 3):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err


def test_bad_budget_and_device_are_clear_errors():
    from planner.cli import main

    assert main(["calibrate", "--budget-s", "-5", "--device", "cpu"]) == 2
    assert main(["calibrate", "--device", "tpu"]) == 2


def test_refit_rewrites_the_fit_report_of_existing_profiles(tmp_path):
    from planner.cli import main
    from planner.hardware.profile import PROFILE_ROOT

    # the profile `planner calibrate` measured (published ones carry a held-back report instead)
    sources = [p for p in sorted(PROFILE_ROOT.glob("*/profile.json")) if '"tier":"published"' not in p.read_text()[:200]]
    assert sources, "a committed measured profile is needed"
    target = tmp_path / sources[0].parent.name / "profile.json"
    target.parent.mkdir()
    raw = json.loads(sources[0].read_text())
    raw.pop("leave_one_out", None)
    raw["measurements"] = raw["measurements"][::4]  # a quarter of its points: leave-one-out refits per point
    target.write_text(json.dumps(raw))
    assert main(["calibrate", "--refit", "--out", str(tmp_path)]) == 0
    refitted = json.loads(target.read_text())
    assert refitted["leave_one_out"]["n"] > 20 and "interior" in refitted["leave_one_out"]
    assert refitted["measurements"] == raw["measurements"]


@pytest.mark.slow
def test_collectives_measure_and_fit_over_two_processes():
    # the NCCL path on several GPUs is the same code; gloo over two CPU processes exercises it here
    from planner.calibration.collectives import fit_alpha_beta, measure_collectives

    rows = measure_collectives(2, "gloo", sizes=[2**e for e in (12, 16, 20, 26)], repeats=5)
    assert {r["op"] for r in rows} == {"allreduce", "allgather", "reducescatter", "alltoall"}
    assert all(r["time_s"] > 0 and r["ranks"] == 2 for r in rows)
    fit = fit_alpha_beta(rows)
    for op, f in fit.items():
        assert f["latency_s"] >= 0 and f["bytes_per_s"] > 1e6, op
    # a 64 MiB all-reduce takes longer than a 4 KiB one (16,000x the bytes; small messages are
    # dominated by start-up jitter, so only the ends are compared)
    times = [r["time_s"] for r in rows if r["op"] == "allreduce"]
    assert times[-1] > times[0]


def test_alpha_beta_fit_recovers_a_known_link():
    from planner.calibration.collectives import fit_alpha_beta

    # synthetic 8-rank all-reduce: α = 5 us, B = 100 GB/s: t = 14·α + 2·7/8·M/B
    rows = [{"op": "allreduce", "ranks": 8, "bytes": m, "time_s": 14 * 5e-6 + 1.75 * m / 100e9}
            for m in (1e4, 1e6, 1e8, 1e9)]
    f = fit_alpha_beta(rows)["allreduce"]
    assert f["latency_s"] == pytest.approx(5e-6, rel=1e-6) and f["bytes_per_s"] == pytest.approx(100e9, rel=1e-6)
