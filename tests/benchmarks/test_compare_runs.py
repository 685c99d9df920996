"""benchmarks/compare_runs.py: the per-category verdict between two dev_validation runs."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "compare_runs.py"
spec = importlib.util.spec_from_file_location("compare_runs", SCRIPT)
compare_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_runs)


def _rows(errors: dict[str, float], category: str = "gemm") -> dict[str, dict]:
    return {i: {"id": i, "category": category, "abs_ln_ratio": e} for i, e in errors.items()}


def test_median_change_and_verdicts():
    before = _rows({"a": 0.1, "b": 0.2, "c": 0.3})
    # every row 0.1 better: median 0.2 -> 0.1, change -0.1, improved
    (r,) = compare_runs.compare(before, _rows({"a": 0.0, "b": 0.1, "c": 0.2}))
    assert r["median_before"] == 0.2 and r["median_after"] == pytest.approx(0.1) and r["change"] == pytest.approx(-0.1)
    assert r["verdict"] == "improved" and r["better"] == 3 and r["worse_rows"] == 0
    # every row 0.1 worse: every resample's change is +0.1, the interval excludes 0: worse
    (r,) = compare_runs.compare(before, _rows({"a": 0.2, "b": 0.3, "c": 0.4}))
    assert r["ci95"] == pytest.approx((0.1, 0.1)) and r["verdict"] == "worse"
    # one row much worse, one better, median up 0.01: resamples fall on both sides of 0: holds
    (r,) = compare_runs.compare(before, _rows({"a": 0.05, "b": 0.21, "c": 0.9}))
    assert r["change"] == pytest.approx(0.01) and r["ci95"][0] < 0 < r["ci95"][1] and r["verdict"] == "holds"


def test_only_rows_of_both_runs_count():
    before = _rows({"a": 0.1, "b": 0.2})
    (r,) = compare_runs.compare(before, _rows({"b": 0.5, "z": 9.0}))
    assert r["n"] == 1 and r["median_after"] == 0.5


def test_bad_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"no": "rows"}))
    with pytest.raises(SystemExit) as exc:
        compare_runs.load_rows(str(bad))
    assert exc.value.code == 2 and "cannot read" in capsys.readouterr().err
