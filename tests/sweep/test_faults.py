"""Writes under faults (issue 45): a second writer of the same output, a full disk, a kill during a sweep's
final clean-up. Each leaves no mixed rows, no torn file and a one-line message."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from planner.cli import main
from planner.errors import ConfigError
from planner.files import exclusive_lock
from planner.sweep.grid import parse_grid
from planner.sweep.run import run_sweep

ROOT = Path(__file__).resolve().parents[2]
GRID = {"axes": {"model": ["gpt2"], "input_len": [128], "output_len": [32], "batch": [1, 2, 4, 8, 16, 32],
                 "device": ["h100-sxm", "l4"]}, "chunk": 1}  # 12 chunks of one point
OTHER = {**GRID, "axes": {**GRID["axes"], "device": ["a100-sxm-80gb", "l40s"]}}


def _sweep(grid_file: Path, out: Path, patch: str = "") -> subprocess.Popen:
    """`planner sweep GRID --out OUT` in a process of its own, with `patch` (Python source run first, over
    `run` = planner.sweep.run) to slow it down or kill it at a chosen point."""
    script = (f"import os, sys, time\nimport planner.sweep.run as run\n{patch}\nfrom planner.cli import main\n"
              f"sys.exit(main(['sweep', {str(grid_file)!r}, '--out', {str(out)!r}, '--no-progress']))\n")
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_second_writer_of_the_same_out_stops_at_once_naming_the_first(tmp_path):
    grid_file = tmp_path / "g.yaml"
    grid_file.write_text(json.dumps(GRID))
    out = tmp_path / "s.parquet"
    parts = tmp_path / "s.parquet.parts"
    # the first writer pauses 15 s after its first chunk: the second surely starts while it holds --out
    first = _sweep(grid_file, out, "write = run._write_part\n"
                                   "def slow(parts, number, *args):\n"
                                   "    write(parts, number, *args)\n"
                                   "    if number == 0:\n"
                                   "        time.sleep(15)\n"
                                   "run._write_part = slow\n")
    deadline = time.time() + 120
    while time.time() < deadline and not any(parts.glob("chunk-*.parquet")) and first.poll() is None:
        time.sleep(0.02)
    assert first.poll() is None, "the first sweep ended before the second could start"
    second = _sweep(grid_file, out)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 2
    line = err.decode().strip()
    assert line.count("\n") == 0 and f"being written by another planner process (pid {first.pid})" in line
    assert first.wait(timeout=300) == 0
    frame = pd.read_parquet(out)
    assert frame["id"].tolist() == list(range(12))  # the first writer's rows, whole, once
    assert not (tmp_path / ".s.parquet.lock").exists() and not parts.exists()


def test_the_lock_is_per_output_and_released_after_an_error(tmp_path):
    target = tmp_path / ".x.lock"
    with exclusive_lock(target, "--out 'x'"):
        with pytest.raises(ConfigError, match=f"pid {os.getpid()}"):
            with exclusive_lock(target, "--out 'x'"):
                pass
        with exclusive_lock(tmp_path / ".y.lock", "--out 'y'"):  # another output: no wait
            pass
    assert not target.exists()
    with pytest.raises(ValueError):
        with exclusive_lock(target, "--out 'x'"):
            raise ValueError("inside")
    with exclusive_lock(target, "--out 'x'"):  # taken again after the error released it
        pass


def test_a_calibration_output_takes_one_writer(tmp_path):
    from planner.calibration.calibrate import calibrate
    from planner.calibration.bench import local_device

    folder = tmp_path / local_device("cpu").id
    folder.mkdir()
    with exclusive_lock(folder / ".calibrate.lock", "calibration output"):
        with pytest.raises(ConfigError, match="being written by another planner process"):
            calibrate("cpu", budget_s=5, out=tmp_path, plan=[], log=lambda _: None)


def test_a_kill_during_the_final_clean_up_resumes_without_mixing(tmp_path):
    """The join is written, then the parts folder is removed; a kill in between leaves the output and the
    chunks (the manifest gone first here). The same grid resumes and joins them again; another grid on the
    same --out is refused, its rows never merged with these."""
    grid_file = tmp_path / "g.yaml"
    grid_file.write_text(json.dumps(GRID))
    out = tmp_path / "s.parquet"
    parts = tmp_path / "s.parquet.parts"
    proc = _sweep(grid_file, out, "def killed(path, *args, **kwargs):\n"
                                  "    os.unlink(os.path.join(path, 'manifest.json'))\n"
                                  "    os.kill(os.getpid(), 9)\n"
                                  "run.shutil.rmtree = killed\n")
    proc.communicate(timeout=300)
    assert proc.returncode == -9
    chunks = sorted(parts.glob("chunk-*.parquet"))
    assert out.is_file() and len(chunks) == 12 and not (parts / "manifest.json").exists()
    before = pd.read_parquet(out)
    # another grid: refused before anything is written, the parts and the output as they were
    other = tmp_path / "other.yaml"
    other.write_text(json.dumps(OTHER))
    assert main(["sweep", str(other), "--out", str(out), "--no-progress"]) == 2
    assert sorted(parts.glob("chunk-*.parquet")) == chunks
    pd.testing.assert_frame_equal(pd.read_parquet(out), before)
    # the same grid: every chunk proven its own, joined again, the parts removed
    result = run_sweep(parse_grid(GRID), out)
    assert result.resumed_chunks == 12 and result.predicted == 0 and not parts.exists()
    after = pd.read_parquet(out)
    assert after["id"].tolist() == list(range(12)) and set(after["in.device"]) == {"h100-sxm", "l4"}
    pd.testing.assert_frame_equal(after, before)


def test_chunks_without_a_manifest_of_another_grid_are_never_merged(tmp_path):
    """Issue 45 item 4: kill a sweep of grid A after some chunks, remove the manifest, sweep grid B on the same
    --out: B must not take A's chunks as its own."""
    out = tmp_path / "mix.parquet"
    parts = tmp_path / "mix.parquet.parts"
    parts.mkdir()  # A's first three chunks, as a killed run leaves them, its manifest removed
    for chunk in range(3):
        shutil.copy(_chunk_of(parse_grid(OTHER), tmp_path, chunk), parts / f"chunk-{chunk:08d}.parquet")
    with pytest.raises(ConfigError, match="interrupted sweep of another grid"):
        run_sweep(parse_grid(GRID), out)
    assert not out.exists() and len(list(parts.glob("chunk-*.parquet"))) == 3


def _chunk_of(grid, tmp_path: Path, number: int) -> Path:
    """Chunk file `number` of `grid`, as a run writes it (a kill keeps the parts folder)."""
    from planner.sweep.run import _write_part, predict_chunk

    folder = tmp_path / f"chunks-{grid.digest[:8]}"
    folder.mkdir(exist_ok=True)
    points = dict(grid.chunks())[number]
    _write_part(folder, number, predict_chunk(points, grid.keep, grid.texts), grid.digest)
    return folder / f"chunk-{number:08d}.parquet"


def _tiny_disk(tmp_path: Path) -> Path:
    """A tmpfs of 64 KiB mounted in tmp_path (unmounted at the end of the test), or a skip with the reason."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    if sys.platform != "linux" or os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a full disk needs a tmpfs mount: Linux as root (this run is not)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a 64 KiB tmpfs here: {done.stderr.decode().strip()[:200]}")
    return folder


@pytest.fixture
def tiny_disk(tmp_path):
    folder = _tiny_disk(tmp_path)
    yield folder
    subprocess.run(["umount", str(folder)], capture_output=True)


def test_a_full_disk_is_a_one_line_error_and_leaves_no_torn_file(tiny_disk, tmp_path, capsys):
    grid_file = tmp_path / "g.yaml"
    grid_file.write_text(json.dumps(GRID))
    (tiny_disk / "fill").write_bytes(b"\0" * 40 * 1024)  # 24 KiB left: a manifest fits, twelve chunks do not
    out = tiny_disk / "s.parquet"
    assert main(["sweep", str(grid_file), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "Traceback" not in err
    assert not out.exists() and not list(tiny_disk.glob(".*.tmp")) and not list(tiny_disk.rglob(".chunk-*"))
    for chunk in (tiny_disk / "s.parquet.parts").glob("chunk-*.parquet"):
        pd.read_parquet(chunk)  # every chunk left is whole (it resumes once there is room)
    # a roofline PNG: the same, and an existing file is kept as it was
    old = tiny_disk / "r.png"
    old.write_bytes(b"old")
    (tiny_disk / "fill2").write_bytes(b"\0" * max(0, shutil.disk_usage(tiny_disk).free - 4096))
    assert main(["predict", "llama-3.1-8b", "--device", "h100-sxm", "--roofline", str(old)]) == 2
    err = capsys.readouterr().err
    assert "--roofline: cannot write" in err and "No space left on device" in err and err.count("\n") == 1
    assert old.read_bytes() == b"old" and not list(tiny_disk.glob("tmp*.png"))
