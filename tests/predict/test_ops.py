"""Op-level predictions: rate definitions and closed forms on the datasheet tier."""

import json

import pytest

from planner.cli import main
from planner.predict.context import default_context
from planner.predict.ops import predict_op
from planner.predict.parallel import collective_time_s


def _datasheet():
    """The shipped context without calibration profiles: the datasheet tier the closed forms are about."""
    from dataclasses import replace
    return replace(default_context(), profiles={}, _efficiency={}, _targets={})


def test_gemm_rate_is_flop_over_time():
    p = predict_op("gemm", "h100-sxm", m=4096, n=4096, k=4096, dtype="bf16")
    assert p.rate == pytest.approx(2 * 4096**3 / p.time_s)
    assert p.rate < default_context().device("h100-sxm").peak("bf16")


def test_copy_counts_bytes_read_and_written():
    # 1 GB copied: 2e9 bytes move; the datasheet tier runs at 90% of 3.35e12 B/s plus 1.5 us
    p = predict_op("copy", "h100-sxm", nbytes=1e9, ctx=_datasheet())
    assert p.time_s == pytest.approx(2e9 / (0.9 * 3.35e12) + 1.5e-6, rel=1e-3)
    assert p.rate == pytest.approx(2e9 / p.time_s)


def test_h2d_uses_pcie_and_refuses_cpus():
    p = predict_op("h2d", "h100-sxm", nbytes=1e9)
    dev = default_context().device("h100-sxm")
    assert p.rate < dev.pcie_bytes_per_s
    from planner.errors import ConfigError
    profiles = default_context().profiles
    cpu = next((d for d in profiles if profiles.tier_of(d) == "measured" and profiles[d].kind == "cpu"), None)
    if cpu:
        with pytest.raises(ConfigError, match="no host-to-device"):
            predict_op("h2d", cpu, nbytes=1e6)


def test_collectives_report_nccl_bus_bandwidth():
    ctx = default_context()
    p = predict_op("allreduce", "h100-sxm", nbytes=1e9, gpus=8)
    t = collective_time_s("allreduce", 1e9, 8, ctx.device("h100-sxm"), ctx.defaults, 8)
    assert p.time_s == t and p.rate == pytest.approx(1e9 / t * 2 * 7 / 8)
    across = predict_op("allgather", "h100-sxm", nbytes=1e9, gpus=16, nodes=2)
    assert across.time_s > predict_op("allgather", "h100-sxm", nbytes=1e9, gpus=8).time_s


def test_cli_op_json_and_configs_rows(tmp_path, capsys):
    assert main(["op", "gemm", "--m", "1024", "--n", "1024", "--k", "1024", "--device", "a100-sxm-80gb", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["time_s"] > 0 and out["flop_per_s"] > 0 and out["tier"] == "datasheet"
    rows = tmp_path / "ops.jsonl"
    rows.write_text(json.dumps({"id": "g", "op": "gemm", "m": 64, "n": 64, "k": 64, "device": "l4"}) + "\n"
                    + json.dumps({"id": "c", "op": "copy", "bytes": 1e6, "device": "l4"}) + "\n"
                    + json.dumps({"id": "x", "op": "gemm", "device": "l4"}) + "\n")
    assert main(["predict", "--configs", str(rows), "--json"]) == 0
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert "flop_per_s" in lines[0] and "bytes_per_s" in lines[1] and "needs --m" in lines[2]["error"]


def test_op_errors_are_clear(capsys):
    assert main(["op", "gemm", "--m", "4", "--device", "h100-sxm"]) == 2
    assert "needs --m, --n and --k" in capsys.readouterr().err
    assert main(["op", "allreduce", "--bytes", "1e6", "--device", "h100-sxm"]) == 2
    assert main(["op", "copy", "--bytes", "1e6", "--device", "h100-sxn"]) == 2
    assert "Did you mean" in capsys.readouterr().err


def test_collectives_use_the_measured_link_of_a_profile():
    from planner.hardware.profile import Profile
    from planner.predict.context import Context

    # a profile whose 8-GPU all-reduce was fitted to α = 4 us, B = 300 GB/s per direction
    fit = {"allreduce": {"ranks": 8, "latency_s": 4e-6, "bytes_per_s": 300e9, "median_abs_error": 0.05}}
    raw = {"collectives": {"fit": fit}}
    profile = Profile("h100-sxm", "NVIDIA H100", "gpu", {}, {"copy_bytes_per_s": 3e12}, (), "2026-11-21", "t", raw)
    base = default_context()
    ctx = Context(base.catalog, base.defaults, base.power, {"h100-sxm": profile})
    p = predict_op("allreduce", "h100-sxm", nbytes=1e9, gpus=8, ctx=ctx)
    # 2·7·4e-6 + 2·7/8·1e9/300e9 s
    assert p.tier == "measured" and p.time_s == pytest.approx(14 * 4e-6 + 1.75 * 1e9 / 300e9)
    # beyond the measured group: h100-sxm has no measured curve across nodes, so NCCL's own model of 2 x 8
    across = predict_op("allreduce", "h100-sxm", nbytes=1e9, gpus=16, nodes=2, ctx=ctx)
    assert across.tier == "datasheet" and "NCCL model" in across.source
