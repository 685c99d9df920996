"""planner/sweep/run.py: rows equal `planner predict --configs`, resume after a kill, every backend."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from planner.cli import main
from planner.errors import ConfigError
from planner.sweep.grid import parse_grid
from planner.sweep.run import flatten, run_sweep

ROOT = Path(__file__).resolve().parents[2]
GRID = {"axes": {"model": ["gpt2"], "input_len": [128], "output_len": [32], "batch": [1, 4],
                 "device": ["h100-sxm", "l4", "no-such-gpu"], "pricing": ["on_demand", "spot"]}, "chunk": 2}


def test_flatten():
    assert flatten({"a": 1, "m": {"x": 2, "y": {"z": 3}}, "l": [1, 2]}) == {"a": 1, "m.x": 2, "m.y.z": 3, "l": "[1, 2]"}


def test_rows_equal_predict_configs(tmp_path, capsys):
    grid = parse_grid(GRID)
    result = run_sweep(grid, tmp_path / "s.parquet")
    frame = pd.read_parquet(result.out)
    assert result.points == 12 and result.rows == 12 and result.errors == 4  # 2 batches x 2 pricings x bad device
    assert frame["id"].tolist() == list(range(12))
    configs = tmp_path / "c.jsonl"
    points = dict(grid.points())
    sample = [0, 3, 5, 8, 11]
    configs.write_text("".join(json.dumps({"id": i, **points[i]}) + "\n" for i in sample))
    assert main(["predict", "--configs", str(configs), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for line in lines:
        row = frame.loc[frame["id"] == line["id"]].iloc[0]
        for key, value in flatten(line).items():
            got = row[key]
            assert got == value or (isinstance(value, float) and got == pytest.approx(value, rel=1e-12)), key
        assert row["in.pricing"] == points[line["id"]]["pricing"]
    assert frame.loc[frame["id"] == 5, "error"].iloc[0].startswith("unknown device 'no-such-gpu'")


def test_keep_filters_rows(tmp_path):
    grid = parse_grid({**GRID, "keep": {"fits": True}})
    result = run_sweep(grid, tmp_path / "s.parquet")
    frame = pd.read_parquet(result.out)
    assert result.rows == 8 and frame["fits"].all() and "error" not in frame  # the 4 error rows are dropped


def test_a_killed_sweep_resumes_without_duplicates_or_gaps(tmp_path):
    grid_file = tmp_path / "g.yaml"
    many = {**GRID, "axes": {**GRID["axes"], "batch": [1, 2, 4, 8, 16, 32]}, "chunk": 1}  # 36 points, 36 chunks
    grid_file.write_text(json.dumps(many))  # JSON is YAML
    out = tmp_path / "s.parquet"
    parts = tmp_path / "s.parquet.parts"
    proc = subprocess.Popen([sys.executable, "-m", "planner.cli", "sweep", str(grid_file), "--out", str(out),
                             "--no-progress"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(parts.glob("chunk-*.parquet"))) < 3 and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list(parts.glob("chunk-*.parquet")))
    assert not out.exists() and 3 <= done < 36, done  # killed mid-way: some chunks on disk, no output
    resumed = run_sweep(parse_grid(many), out)
    assert resumed.resumed_chunks >= done and not parts.exists()
    frame = pd.read_parquet(out)
    assert frame["id"].tolist() == list(range(36))  # no duplicates, no gaps, in order
    fresh = pd.read_parquet(run_sweep(parse_grid(many), tmp_path / "fresh.parquet").out)
    pd.testing.assert_frame_equal(frame, fresh)


def test_another_grids_parts_are_not_mixed_in(tmp_path):
    out = tmp_path / "s.parquet"
    parts = tmp_path / "s.parquet.parts"
    parts.mkdir()
    (parts / "manifest.json").write_text(json.dumps({"grid_sha256": "0" * 64}))
    with pytest.raises(ConfigError, match="interrupted sweep of another grid"):
        run_sweep(parse_grid(GRID), out)


def _backend_frame(tmp_path, backend, **kw):
    return pd.read_parquet(run_sweep(parse_grid(GRID), tmp_path / f"{backend}.parquet", backend, **kw).out)


def test_processes_backend_equals_local(tmp_path):
    pd.testing.assert_frame_equal(_backend_frame(tmp_path, "processes", workers=2), _backend_frame(tmp_path, "local"))


def test_dask_backend_on_a_local_cluster(tmp_path):
    pytest.importorskip("dask.distributed")
    pd.testing.assert_frame_equal(_backend_frame(tmp_path, "dask", workers=2), _backend_frame(tmp_path, "local"))


def test_ray_backend_local(tmp_path):
    pytest.importorskip("ray")
    pd.testing.assert_frame_equal(_backend_frame(tmp_path, "ray", workers=2), _backend_frame(tmp_path, "local"))


@pytest.mark.parametrize("args, message", [
    (["sweep", "missing.yaml"], "missing.yaml"),
    (["sweep", "examples/sweeps/serving.yaml", "--cluster", "spark://x"], "--cluster 'spark://x' is not one of"),
    (["sweep", "examples/sweeps/serving.yaml", "--workers", "0"], "--workers must be"),
    (["sweep", "examples/sweeps/serving.yaml", "--out", "no/such/dir/s.parquet"], "does not exist")])
def test_cli_errors_are_one_line(args, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
