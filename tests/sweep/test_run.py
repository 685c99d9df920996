"""planner/sweep/run.py: rows equal `planner predict --configs`, resume after a kill, every backend."""

import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from planner.cli import main
from planner.errors import ConfigError
from planner.sweep.grid import parse_grid
from planner.sweep.run import flatten, predict_point, read_out, run_sweep

ROOT = Path(__file__).resolve().parents[2]
# batch 0 cannot be predicted: the 4 points of it are error rows (ids 8 to 11)
GRID = {"axes": {"model": ["gpt2"], "input_len": [128], "output_len": [32], "batch": [1, 4, 0],
                 "device": ["h100-sxm", "l4"], "pricing": ["on_demand", "spot"]}, "chunk": 2}


def test_flatten():
    assert flatten({"a": 1, "m": {"x": 2, "y": {"z": 3}}, "l": [1, 2]}) == {"a": 1, "m.x": 2, "m.y.z": 3, "l": "[1, 2]"}
    # lists are the text json.dumps writes (a non-finite number as null, as predict --configs prints it)
    for value in ([1.5, 2.25], [1e300, -0.0], [1.0, 2.0, 3.0], [], ["x", "y"], [1, "x", None]):
        assert flatten({"r": value}) == {"r": json.dumps(value)}
    assert flatten({"r": [float("inf"), 1.0], "f": float("nan"), "b": True}) == {"r": "[null, 1.0]", "f": None, "b": True}


def test_rows_equal_predict_configs(tmp_path, capsys):
    grid = parse_grid(GRID)
    result = run_sweep(grid, tmp_path / "s.parquet")
    frame = pd.read_parquet(result.out)
    assert result.points == 12 and result.rows == 12 and result.errors == 4  # batch 0 x 2 devices x 2 pricings
    assert frame["id"].tolist() == list(range(12))
    configs = tmp_path / "c.jsonl"
    points = dict(grid.points())
    sample = [0, 3, 5, 8, 11]  # 8 and 11 are errors
    configs.write_text("".join(json.dumps({"id": i, **points[i]}) + "\n" for i in sample))
    assert main(["predict", "--configs", str(configs), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for line in lines:
        row = frame.loc[frame["id"] == line["id"]].iloc[0]
        for key, value in flatten(line).items():
            got = row[key]
            assert got == value or (isinstance(value, float) and got == pytest.approx(value, rel=1e-12)), key
        assert row["in.pricing"] == points[line["id"]]["pricing"]
    assert frame.loc[frame["id"] == 9, "error"].iloc[0] == "key 'batch': expected a whole number of at least 1, got 0"


def test_keep_filters_rows_but_never_hides_an_error(tmp_path):
    grid = parse_grid({**GRID, "keep": {"fits": True}})
    result = run_sweep(grid, tmp_path / "s.parquet")
    frame = pd.read_parquet(result.out)
    predicted = frame[frame["error"].isna()]
    assert result.rows == 12 and result.errors == 4 and predicted["fits"].all() and len(predicted) == 8
    none_fit = parse_grid({**GRID, "keep": {"fits": False}})
    frame = pd.read_parquet(run_sweep(none_fit, tmp_path / "n.parquet").out)
    assert frame["id"].tolist() == [8, 9, 10, 11]  # gpt2 fits everywhere: only the errors are left


def test_int_columns_stay_int_beside_error_rows(tmp_path):
    import pyarrow.parquet as pq

    run_sweep(parse_grid(GRID), tmp_path / "s.parquet")
    schema = pq.read_schema(tmp_path / "s.parquet")
    assert str(schema.field("gpus").type) == "int64" and str(schema.field("in.batch").type) == "int64"


def test_an_axis_mixing_texts_and_numbers_is_written_as_text(tmp_path):
    grid = parse_grid({"axes": {"model": ["gpt2"], "input_len": [128], "output_len": [32], "batch": [1, "auto"],
                                "device": ["l4"]}})
    frame = pd.read_parquet(run_sweep(grid, tmp_path / "s.parquet").out)
    assert frame["in.batch"].tolist() == ["1", "auto"] and "error" not in frame  # both points predict


def test_unknown_names_stop_the_sweep_before_it_predicts(tmp_path):
    grid = parse_grid({**GRID, "axes": {**GRID["axes"], "device": ["h100-sxm", "no-such-gpu"]}})
    with pytest.raises(ConfigError, match="axis 'device': unknown device 'no-such-gpu'"):
        run_sweep(grid, tmp_path / "s.parquet")
    assert list(tmp_path.iterdir()) == []


def test_keep_naming_no_column_is_refused_and_an_empty_result_still_reads(tmp_path):
    from planner.sweep.summary import read_sweep

    with pytest.raises(ConfigError, match="keep: fit is not a column of the predictions; columns: .*fits"):
        run_sweep(parse_grid({**GRID, "keep": {"fit": True}}), tmp_path / "s.parquet")
    assert list(tmp_path.iterdir()) == []
    grid = parse_grid({**GRID, "axes": {**GRID["axes"], "batch": [1]}, "keep": {"fits": False}})
    result = run_sweep(grid, tmp_path / "none.parquet")
    assert result.rows == 0 and read_sweep(str(result.out)).empty  # no row kept: still a sweep's file


def test_a_constraint_that_fails_stops_before_any_file_is_written(tmp_path):
    grid = parse_grid({**GRID, "where": ["model * 2 == 'x'"]})
    with pytest.raises(ConfigError, match="arithmetic takes numbers"):
        run_sweep(grid, tmp_path / "s.parquet")
    assert list(tmp_path.iterdir()) == []


def test_out_never_overwrites_another_file(tmp_path):
    other = tmp_path / "grid.yaml"
    other.write_text("axes: {}\n")
    with pytest.raises(ConfigError, match="exists and is not a sweep's Parquet file"):
        run_sweep(parse_grid(GRID), other)
    assert other.read_text() == "axes: {}\n"
    with pytest.raises(ConfigError, match="--out is empty"):
        run_sweep(parse_grid(GRID), "")
    out = run_sweep(parse_grid(GRID), tmp_path / "s.parquet").out
    assert run_sweep(parse_grid(GRID), out).rows == 12  # a sweep's own output is replaced


def test_out_writes_csv_for_a_csv_name_and_parquet_for_a_parquet_one(tmp_path):
    import csv

    import pyarrow.parquet as pq

    parquet = run_sweep(parse_grid(GRID), tmp_path / "s.parquet").out
    out = run_sweep(parse_grid(GRID), tmp_path / "s.csv").out
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["id"]) for r in rows] == list(range(12)) and rows[0]["in.device"] == "h100-sxm"
    assert list(rows[0]) == pq.read_schema(parquet).names  # the same columns, in the same order
    # read back, the CSV holds the Parquet's rows (an empty cell a null)
    pd.testing.assert_frame_equal(read_out(out), pd.read_parquet(parquet))
    for path in (out, parquet):  # as open() gives, not mkstemp's 0600
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()
    assert run_sweep(parse_grid(GRID), out).rows == 12  # a sweep's own CSV is replaced
    valid = "valid: .parquet (Parquet), .csv (CSV)"
    for name, message in (("s.txt", f"suffix '.txt' is not a format a sweep writes; {valid}"),
                          ("s", f"no suffix to tell the format; {valid}")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            run_sweep(parse_grid(GRID), tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv", "s.parquet"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_a_killed_sweep_resumes_without_duplicates_or_gaps(tmp_path):
    grid_file = tmp_path / "g.yaml"
    many = {**GRID, "axes": {**GRID["axes"], "batch": [1, 2, 4, 8, 16, 32, 64, 128, 256]}, "chunk": 1}  # 36 chunks
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
    (parts / "chunk-00000000.parquet").write_bytes(b"")
    with pytest.raises(ConfigError, match="interrupted sweep of another grid"):
        run_sweep(parse_grid(GRID), out)
    (parts / "chunk-00000000.parquet").unlink()  # another grid's run that wrote no chunk: nothing to resume
    assert run_sweep(parse_grid(GRID), out).rows == 12 and not parts.exists()


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
    (["sweep", "examples/sweeps/serving.yaml", "--out", "no/such/dir/s.parquet"], "does not exist"),
    (["sweep", "examples/sweeps/serving.yaml", "--out", "README.md"], "exists and is not a sweep's Parquet file"),
    (["sweep", "examples/sweeps/serving.yaml", "--out", "no-such-folder/"], "is a folder"),
    (["sweep", "examples/sweeps/serving.yaml", "--out", "sweep.txt"], "suffix '.txt' is not a format a sweep writes")])
def test_cli_errors_are_one_line(args, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_ctrl_c_stops_a_sweep_on_local_workers_and_its_workers(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during `--workers 2` ends the run
    with status 130 within seconds and leaves no worker behind: the workers ignore the signal and the pool
    is terminated (with ProcessPoolExecutor the run could hang for ever on a worker's queue lock)."""
    grid_file = tmp_path / "g.yaml"
    grid_file.write_text(json.dumps({"axes": {
        "model": ["llama-2-7b", "qwen2.5-7b", "gemma-2-9b", "phi-3-mini"], "input_len": [512, 1024, 2048, 4096],
        "output_len": [128], "batch": [1, 8, 64, 128], "tp": [1, 2],
        "device": ["h100-sxm", "a100-sxm-80gb", "mi300x", "l40s"]}, "chunk": 4}))
    parts = tmp_path / "s.parquet.parts"
    proc = subprocess.Popen([sys.executable, "-m", "planner.cli", "sweep", str(grid_file), "--workers", "2",
                             "--out", str(tmp_path / "s.parquet"), "--no-progress"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not any(parts.glob("chunk-*.parquet")) and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert rc == 130 and "planner: interrupted" in proc.stderr.read().decode()
    time.sleep(1)
    assert _running_in_group(proc.pid) == []  # the workers went too (a zombie left for init to reap is not running)


def _running_in_group(pgid: int) -> list[int]:
    """Processes of process group `pgid` that are not zombies, from /proc/<pid>/stat (Linux)."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc")
    running = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()  # state, ppid, pgrp, ...
                if int(fields[2]) == pgid and fields[0] != "Z":
                    running.append(int(entry.name))
    return running


def test_the_summary_marks_stale_prices_and_idle_devices_paid_for():
    from planner.cli.sweep import _price_marks

    note = ("cost pays for 7 idle mi300x of the whole instance rented (1 x azure:Standard_ND96isr_MI300X_v5:eastus2 "
            "spot); more replicas (--dp) or `planner compare`, which fills the instance, use them")
    assert _price_marks({"price_stale": True, "notes": json.dumps([note])}) == ["stale price", "pays for 7 idle"]
    assert _price_marks({"price_stale": False, "notes": "[]"}) == []
    # the note is the one make_prediction writes: the catalog's only MI300X spot price is an 8-GPU Azure
    # instance (ND96isr MI300X v5), so a 1-GPU point pays for the other 7
    row = predict_point(0, {"model": "gpt2", "device": "mi300x", "pricing": "spot", "input_len": 128, "output_len": 32})
    assert "ND96isr_MI300X" in row["cost_basis"] and "pays for 7 idle" in _price_marks(row)
