"""planner/api.py through the public names only (`import planner`): composed inputs, typed results with
to_dict() and to_frame(), errors that name fields, and the calls whose names are also subpackages."""

import json

import pandas as pd
import pytest

import planner


def test_predict_default_workload_matches_its_dict_and_frame():
    p = planner.predict(model="llama-3.1-8b", device="h100-sxm")
    d = p.to_dict()
    assert (d["model"], d["device"], d["gpus"], d["mode"], d["batch"]) == ("llama-3.1-8b", "h100-sxm", 1, "inference", 1)
    json.dumps(d, allow_nan=False)  # JSON-ready
    frame = p.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 1
    assert frame.loc[0, "tpot_s"] == d["tpot_s"] == p.metrics["tpot_s"] > 0
    # the memory breakdown is flattened into dotted columns: memory.total_bytes is the per-GPU total
    assert frame.loc[0, "memory.total_bytes"] == d["memory_bytes_per_gpu"]
    assert p.fits is True and "TPOT" in str(p)


def test_keywords_and_groups_are_the_same_request():
    loose = planner.predict("llama-3.1-8b", "h100-sxm", batch=8, input_len=1024, output_len=128, tp=2, gpus=2)
    grouped = planner.predict("llama-3.1-8b", "h100-sxm",
                              workload=planner.Workload(batch=8, input_len=1024, output_len=128),
                              parallel=planner.Parallel(gpus=2, tp=2))
    assert loose.to_dict() == grouped.to_dict()
    assert (loose.to_dict()["tp"], loose.to_dict()["gpus"], loose.to_dict()["batch"]) == (2, 2, 8)


@pytest.mark.parametrize("kwargs, text", [
    ({"bacth": 8}, "unknown field 'bacth'; did you mean 'batch'?"),
    ({"workload": planner.Workload(batch=2), "batch": 4}, "field 'batch' given twice"),
    ({"parallel": planner.Workload()}, "parallel must be a planner.Parallel, got Workload"),
    ({"seq_len": -3}, "seq_len must be a positive integer"),  # the library's --seq-len, named as the field
])
def test_bad_input_names_the_field(kwargs, text):
    with pytest.raises(planner.ConfigError) as info:
        planner.predict("llama-3.1-8b", "h100-sxm", **kwargs)
    assert text in str(info.value)
    assert "--" not in str(info.value)


def test_unknown_device_is_an_unknown_name():
    with pytest.raises(planner.UnknownNameError, match="unknown device 'nvidia-h101'"):
        planner.predict("llama-3.1-8b", "nvidia-h101")


def test_count_totals_are_the_table_sums():
    c = planner.count("resnet50", batch=1, by="category")
    frame = c.to_frame()
    assert set(frame["category"]) >= {"conv", "norm", "matmul"}
    assert frame["flop"].sum() == pytest.approx(c.flop, rel=1e-12)
    assert frame["bytes_read"].sum() == pytest.approx(c.bytes_read, rel=1e-12)
    # ResNet-50 v1.5 at 224x224: 4.09 G multiply-adds per image (torchvision's model card), 2 FLOP each
    assert 2 * 4.0e9 < c.flop < 2 * 4.2e9
    assert c.to_dict()["params"] == c.params == 25_557_032  # torchvision resnet50: 25,557,032 parameters


def test_compare_is_one_row_per_device():
    r = planner.compare("llama-3.1-8b", devices=["h100-sxm", "h200-sxm"], batch=8)
    frame = r.to_frame()
    assert sorted(frame["device"]) == ["h100-sxm", "h200-sxm"]
    assert [row["device"] for row in r.to_dict()["rows"]] == list(frame["device"])
    # the same configuration alone gives the same TPOT as its compare row (tp 1 fits on both)
    one = planner.predict("llama-3.1-8b", "h200-sxm", batch=8)
    assert frame.set_index("device").loc["h200-sxm", "tpot_s"] == pytest.approx(one.metrics["tpot_s"], rel=1e-9)


def test_calls_stay_callable_after_their_subpackages_are_imported():
    import planner.plan.solve  # noqa: F401  binds the subpackage planner.plan
    import planner.predict.api as internal

    assert callable(planner.predict) and callable(planner.plan) and callable(planner.serve)
    assert internal.Request is planner.predict.api.Request
    p = planner.predict("llama-3.1-8b", "h100-sxm")
    assert p.metrics["tpot_s"] == planner.api.predict("llama-3.1-8b", "h100-sxm").metrics["tpot_s"]


def test_plan_from_a_dict_passes_its_check():
    scenario = {"name": "api", "horizon_months": 1, "objective": "cost",
                "workloads": [{"name": "chat", "model": "llama-2-7b", "dtype": "bf16", "demand_rps": 2,
                               "buckets": [{"input_len": 512, "output_len": 128, "share": 1.0}],
                               "slo": {"ttft_p90_s": 1.0, "tpot_p90_s": 0.05}}],
                "candidates": {"cloud": {"providers": ["runpod"], "pricing": ["on_demand"]}}}
    result = planner.plan(scenario)
    d = result.to_dict()
    assert d["check"]["passed"] is True
    frame = result.to_frame()
    assert len(frame) == len(d["rows"]) >= 1 and frame["units"].sum() >= 1


def test_serve_reports_percentiles():
    r = planner.serve("llama-3.1-8b", "h100-sxm", load=planner.Load(rate_rps=1.0, requests=50, seed=0),
                      input_len=512, output_len=64)
    d = r.to_dict()
    assert 0 < d["ttft_p50_s"] <= d["ttft_p99_s"]
    assert len(r.to_frame()) == 1


def test_the_groups_hold_every_field_of_a_request_once():
    """The groups are the one prediction request split by concern: none lost, none added, none twice."""
    from dataclasses import fields

    from planner.predict.api import Request

    grouped = [f.name for g in (planner.Workload, planner.Parallel, planner.Costs, planner.Training, planner.Platform)
               for f in fields(g)]
    assert len(grouped) == len(set(grouped))
    assert set(grouped) == {f.name for f in fields(Request)} - {"model", "device"}
