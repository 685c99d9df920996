"""The `planner count` command: output, JSON keys, and clear errors without tracebacks."""

import json
import os
import subprocess
import sys
from pathlib import Path

from planner.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    return subprocess.run([sys.executable, "-m", "planner.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_count_json_has_the_required_keys(capsys):
    assert main(["count", "gpt2", "--mode", "prefill", "--seq-len", "32", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("params", "flop", "bytes_read", "bytes_written", "unsupported"):
        assert key in out
    assert out["params"] == 124_439_808 and out["unsupported"] == []


def test_count_text_by_each_grouping(capsys):
    for by in ("op", "module", "category", "phase"):
        assert main(["count", "resnet50", "--by", by, "--top", "3"]) == 0
        text = capsys.readouterr().out
        assert "FLOP" in text and "intensity" in text


def test_fvcore_counter_agrees_with_ours(capsys):
    assert main(["count", "bert-base", "--counter", "fvcore", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert abs(out["fvcore"]["ratio"] - 1) < 0.01


def test_unknown_model_suggests_close_ids_without_traceback():
    result = _run("count", "llama-2-7", "--json")
    assert result.returncode != 0
    assert "llama-2-7b" in result.stderr and "Did you mean" in result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_config_names_the_field_without_traceback(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32}))
    result = _run("count", str(bad))
    assert result.returncode != 0
    assert "num_hidden_layers" in result.stderr and "Traceback" not in result.stderr
    bad.write_text("{not json")
    result = _run("count", str(bad))
    assert result.returncode != 0 and "not valid JSON" in result.stderr and "Traceback" not in result.stderr


def test_custom_model_entry_point(capsys):
    assert main(["count", "custom_model:two_layer", "--allow-code", "--dtype", "fp32", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # Linear 16->16 and 16->4 at batch 2: 2·2·16·16 + 2·2·16·4 = 1,280 matmul FLOP, plus ReLU on 32 elements
    assert out["params"] == 16 * 16 + 16 + 16 * 4 + 4
    assert out["flop"] == 1_280 + 32


def test_bad_custom_model_and_bad_sizes_are_clear_errors(capsys):
    assert main(["count", "custom_model:not_a_model", "--allow-code"]) == 2
    assert "must return (nn.Module, example inputs)" in capsys.readouterr().err
    assert main(["count", "no_such_module:fn"]) == 2
    assert "add --allow-code" in capsys.readouterr().err
    assert main(["count", "no_such_module:fn", "--allow-code"]) == 2
    assert "cannot import" in capsys.readouterr().err
    assert main(["count", "resnet50", "--mode", "decode"]) == 2
    assert "needs a generative decoder" in capsys.readouterr().err
    assert main(["count", "gpt2", "--seq-len", "4096"]) == 2
    assert "1024 positions" in capsys.readouterr().err


def test_a_length_flag_the_mode_does_not_read_is_refused_naming_the_one_it_does(capsys):
    # a decode step reads the KV cache's length (--context-len), never --seq-len; every other mode the reverse
    assert main(["count", "gpt2", "--mode", "decode", "--seq-len", "10"]) == 2
    err = capsys.readouterr().err
    assert err == ("planner: error: --seq-len does not apply to --mode decode (one new token on a KV cache); give "
                   "the tokens already in the cache with --context-len 10\n")
    assert main(["count", "gpt2", "--mode", "prefill", "--context-len", "10"]) == 2
    assert "--context-len applies to --mode decode only; for --mode prefill give the sequence length with --seq-len " \
           "10" in capsys.readouterr().err
    assert main(["count", "gpt2", "--mode", "decode", "--context-len", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["context_len"] == 10


def test_negative_batch_is_rejected_by_the_parser():
    result = _run("count", "gpt2", "--batch", "-1")
    assert result.returncode == 2 and "whole number from 1" in result.stderr and "Traceback" not in result.stderr


def test_a_folder_named_models_on_the_path_does_not_shadow_planners_builders(tmp_path):
    # planner imports its builders as planner_models, so a user's own `models` package is left alone
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "planner.cli", "count", "gpt2", "--seq-len", "16", "--json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["params"] == 124_439_808


def test_the_command_freezes_its_imports_out_of_the_collector(monkeypatch, capsys):
    """entry() (the `planner` command) runs main(freeze=True): gc.freeze once the subcommand is parsed; main()
    as tests call it never freezes, nor does a command line argparse refuses."""
    import gc

    import pytest

    from planner import cli

    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    assert main(["models"]) == 0 and calls == []
    assert main(["models", "--bogus"], freeze=True) == 2 and calls == []
    monkeypatch.setattr(sys, "argv", ["planner", "models"])
    with pytest.raises(SystemExit) as exit_:
        cli.entry()
    assert exit_.value.code == 0 and calls == ["freeze"]
    capsys.readouterr()
