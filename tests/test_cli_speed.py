"""Speed at the prompt (issue 42): building the parser and `planner models` import no torch, pandas or numpy
(benchmarks/cli_speed.py times them); the choice lists the parser holds equal their sources; `planner models`
lists every config from models/zoo_index.json, whose entries match the configs and the models built;
progress is drawn on a terminal only and erased before the command prints."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import planner_models
from planner.cli import main, progress

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "pandas", "pyomo", "streamlit", "numpy", "scipy", "tqdm")


def _heavy_imports(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter has imported once `code` has run."""
    probe = f"{code}\nimport sys; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_building_the_parser_imports_nothing_heavy():
    assert _heavy_imports("import planner.cli as c; c.parser()") == []


def test_help_and_models_import_nothing_heavy():
    code = ("import contextlib, io\nfrom planner.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['--help']) == 0 and main(['models']) == 0 and main(['models', '--json']) == 0")
    assert _heavy_imports(code) == []


def test_the_parsers_choices_equal_their_sources():
    from planner.cli import names
    from planner.hardware.catalog import PRICINGS
    from planner.predict.ops import OPS
    from planner.workload.dtypes import DTYPES
    from planner.workload.engines import FAMILIES
    from planner.workload.graphs import MODES

    assert names.DTYPES == tuple(DTYPES)
    assert names.MODES == MODES
    assert names.PRICINGS == PRICINGS
    assert names.OPS == OPS
    assert names.FAMILIES == FAMILIES


def test_models_lists_every_config(capsys):
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == planner_models.zoo_ids()
    for r in rows:
        raw = planner_models.zoo_config(r["id"])
        assert r["builder"] == raw.get("planner_builder", "planner") and r["source"] == raw["planner_source"]
        assert 0 < r["active_params"] <= r["params"]
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:-1]] == planner_models.zoo_ids()
    assert lines[-1].startswith(f"{len(rows)} models; ")


def test_every_zoo_config_has_a_current_index_entry():
    """Fails after a config is added or changed until scripts/zoo_index.py is run (planner models would build
    that model at every listing)."""
    INDEX = planner_models.zoo_index()

    assert sorted(INDEX) == planner_models.zoo_ids()
    stale = [m for m in INDEX if INDEX[m]["digest"] != planner_models.config_digest(planner_models.zoo_config(m))]
    assert not stale, f"run scripts/zoo_index.py: the configs of {', '.join(stale)} changed"


@pytest.mark.slow
def test_the_index_counts_are_the_built_models():
    """Every entry as describe() gives it by building the model on meta tensors (about 15 s): fails after a
    builder changes a model's parameters until scripts/zoo_index.py is run."""
    from planner.cli.models import describe, entries
    from planner.errors import UnsupportedError
    from planner.workload.zoo import resolve

    listed = {r["id"]: r for r in entries()}
    missing = []
    for model_id in planner_models.zoo_ids():
        try:
            built = describe(resolve(model_id))
        except UnsupportedError:  # its builder's library is not installed (the zoo extra)
            missing.append(model_id)
            continue
        assert listed[model_id] == built, model_id
    if missing:
        pytest.skip(f"not built (library missing): {', '.join(missing)}")


def test_a_model_without_a_current_entry_is_built(monkeypatch, capsys):
    from planner.cli import models
    from planner.workload.zoo import resolve
    index = dict(planner_models.zoo_index())
    index["gpt2"] = {**index["gpt2"], "digest": "0" * 16, "params": 1}  # as if its config had changed
    del index["bert-base"]  # as if added since the index was written
    monkeypatch.setattr(planner_models, "zoo_index", lambda: index)
    rows = {r["id"]: r for r in models.entries()}
    assert rows["gpt2"] == models.describe(resolve("gpt2")) and rows["gpt2"]["params"] == 124_439_808
    assert rows["bert-base"] == models.describe(resolve("bert-base"))
    assert [r["id"] for r in models.entries(["encoder"])] == ["bert-base", "bert-large"]
    assert capsys.readouterr().err == ""  # no terminal: no progress


def test_progress_is_drawn_on_a_terminal_only_and_erased(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    progress.step("importing", of=2)  # not a terminal: nothing, and tqdm is not started
    assert progress._bar is None and stream.getvalue() == ""
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    with progress.shown():
        progress.step("importing", of=2)
        progress.step("counting")
        assert "planner: 1/2 steps done" in stream.getvalue() and "counting" in stream.getvalue()
    assert progress._bar is None
    assert stream.getvalue().endswith("\r")  # the line was blanked


def test_a_failing_command_erases_its_progress_before_the_error(monkeypatch, capsys):
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    assert main(["count", "no-such-model"]) == 2
    err = capsys.readouterr().err
    assert progress._bar is None and "planner: error:" in err
    assert err.rindex("\r") < err.index("planner: error:")  # the line was erased first


def test_commands_freeze_their_imports_under_the_entry_point_only(monkeypatch, capsys):
    import gc

    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    assert main(["count", "gpt2", "--seq-len", "16", "--json"]) == 0 and calls == []
    assert main(["count", "gpt2", "--seq-len", "16", "--json"], freeze=True) == 0
    assert calls == ["freeze", "freeze"]  # once parsed, once the command's imports are done
    capsys.readouterr()
