"""`advise`: every change is a re-prediction that fits, meets the SLOs and gains; its gain is the ratio of
two predictions; its why is the predictor's own per-op bound."""

import json
from dataclasses import replace

import pytest

from planner.cli import main
from planner.errors import ConfigError
from planner.predict.api import Request, op_rows, predict, summary_row
from planner.trace.advise import KINDS, MIN_GAIN, advise

LLAMA = Request("llama-3.1-8b", "h100-sxm", batch=1)


@pytest.fixture(scope="module")
def llama():
    return advise(LLAMA)


def test_batch_or_precision_first_and_its_gain_is_the_ratio_of_two_predictions(llama):
    top = llama.changes[0]
    assert top.kind in ("batch", "precision")
    assert top.figures.throughput_per_s > llama.baseline.throughput_per_s
    old, new = predict(LLAMA), predict(top.request)
    assert new.gpus == old.gpus == 1
    # gain = new / old - 1 of output tokens/s (per device: both on one), old / new - 1 of $ and J per token
    tokens = "throughput_tokens_per_s"
    assert top.throughput_gain == pytest.approx(new.metrics[tokens] / old.metrics[tokens] - 1, rel=1e-12)
    assert top.gain == top.throughput_gain
    assert top.usd_gain == pytest.approx(old.metrics["usd_per_million_output_tokens"]
                                         / new.metrics["usd_per_million_output_tokens"] - 1, rel=1e-12)
    assert top.j_gain == pytest.approx(old.metrics["j_per_output_token"] / new.metrics["j_per_output_token"] - 1)
    assert top.latency_gain == pytest.approx(old.metrics["latency_s"] / new.metrics["latency_s"] - 1)


def test_changes_are_ranked_better_than_the_baseline_and_each_kind_is_known(llama):
    gains = [c.gain for c in llama.changes]
    assert gains == sorted(gains, reverse=True) and gains[-1] > MIN_GAIN
    assert {c.kind for c in llama.changes} <= set(KINDS)
    assert {"batch", "precision", "device"} <= {c.kind for c in llama.changes}
    assert sum(c.kind == "device" for c in llama.changes) <= 3
    assert llama.counts["advised"] == len(llama.changes)
    assert llama.counts["predicted"] == sum(v for k, v in llama.counts.items() if k != "predicted")
    for c in llama.changes:
        assert c.figures.prediction.fits and c.request != LLAMA


def test_why_names_the_bound_summed_from_the_predictors_op_rows(llama):
    for change in (llama.changes[0], llama.changes[-1]):
        fig = change.figures
        rows = op_rows(replace(change.request, batch=fig.prediction.metrics["batch"]))[fig.phase]
        by_bound = {}
        for r in rows:
            by_bound[r.bound] = by_bound.get(r.bound, 0.0) + r.time_s * r.count
        assert fig.bound == max(by_bound, key=by_bound.get)
        assert fig.bound_share == pytest.approx(by_bound[fig.bound] / sum(by_bound.values()))
        assert f"{fig.bound}-bound" in change.why
    assert llama.baseline.phase == "decode" and llama.baseline.bound == "memory"  # batch 1 reads every weight per token


def test_tight_tpot_slo_stops_the_batch_at_the_largest_that_meets_it():
    tpot = {b: predict(replace(LLAMA, batch=b)).metrics["tpot_s"] for b in (16, 32)}
    slo = (tpot[16] + tpot[32]) / 2  # batch 16 meets it, batch 32 does not
    advice = advise(LLAMA, slo_tpot_s=slo)
    batches = [c for c in advice.changes if c.kind == "batch"]
    assert [c.request.batch for c in batches] == [16]
    assert predict(batches[0].request).metrics["tpot_s"] <= slo < predict(replace(LLAMA, batch=32)).metrics["tpot_s"]
    assert advice.counts["over_slo"] >= 1
    for c in advice.changes:
        assert c.figures.prediction.fits and c.figures.tpot_s <= slo


def test_latency_objective_advises_tensor_parallelism_judged_per_device():
    advice = advise(LLAMA, objective="latency", max_latency_s=predict(LLAMA).metrics["latency_s"])
    assert not any(c.kind == "batch" for c in advice.changes)  # a larger batch is slower for each request
    tp = [c for c in advice.changes if c.kind == "parallel"]
    assert tp and all(c.figures.gpus == c.request.tp > 1 for c in tp)
    for c in tp:  # throughput per device: a change that adds devices is not credited for them
        assert c.throughput_gain == pytest.approx(c.figures.throughput_per_s / c.figures.gpus
                                                  / advice.baseline.throughput_per_s - 1)
        assert c.latency_gain == c.gain > 0


def test_training_on_several_devices_keeps_their_count_and_advises_zero_only_with_replicas():
    req = Request("gpt2", "h100-sxm", mode="training", gpus=8, global_batch=64, seq_len=1024)
    advice = advise(req, top=None)
    for c in advice.changes:
        assert c.figures.gpus == 8 and c.figures.prediction.fits and c.gain > MIN_GAIN
        if c.kind == "parallel":
            par = c.figures.prediction.parallelism
            assert par.tp * par.pp * par.dp == 8
    # recompute trades time for memory: on a baseline that fits it is never advised for throughput
    assert not any(c.kind == "recompute" for c in advice.changes)
    single = advise(replace(req, gpus=1, global_batch=8))
    assert not any(c.kind in ("parallel", "overlap") for c in single.changes)  # one device: no ZeRO, no layout


def test_training_that_does_not_fit_gets_the_recompute_that_makes_it_fit():
    req = Request("gpt2", "l4", mode="training", micro_batch=64, seq_len=1024)
    assert not predict(req).fits
    advice = advise(req)
    assert not advice.baseline_ok
    recompute = {c.request.recompute for c in advice.changes if c.kind == "recompute"}
    assert recompute == {"full"}  # selective keeps the activations that overflow the 24 GB
    assert not predict(replace(req, recompute="selective")).fits
    assert all(c.figures.prediction.fits and c.why.startswith("fits:") for c in advice.changes)


def test_a_precision_that_needs_another_engine_must_beat_that_engine_alone():
    checked = 0
    for req, objective in ((Request("resnet50", "l4", batch=8), "energy"),
                           (Request("gpt2", "b200", mode="training", micro_batch=8, seq_len=1024), "cost")):
        for c in advise(req, objective=objective).changes:
            assert c.request.dtype in ("bf16", "quant=fp8", "mxfp8", "nvfp4") or req.mode == "inference"
            if c.kind == "precision" and " on " in c.title:  # e.g. fp8 training runs on megatron
                alone = summary_row(predict(replace(req, engine=c.request.engine)))
                assert c.figures.prediction.engine == c.request.engine
                key = "j_per_unit" if objective == "energy" else "usd_per_unit"
                assert getattr(c.figures, key) < alone[key]
                checked += 1
    assert checked  # resnet50's convolutions keep bf16: its recipes gain nothing over tensorrt alone


def test_bad_input_is_one_config_error():
    with pytest.raises(ConfigError, match="objective"):
        advise(LLAMA, objective="speed")
    with pytest.raises(ConfigError, match="slo-tpot"):
        advise(LLAMA, slo_tpot_s=-1.0)
    with pytest.raises(ConfigError, match="LLM serving"):
        advise(Request("resnet50", "l4"), slo_ttft_s=0.1)


def test_cli_table_json_and_errors(capsys):
    assert main(["advise", "llama-3.1-8b", "--device", "h100-sxm", "--batch", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("baseline  llama-3.1-8b on 1 x h100-sxm") and "rank" in out and "batch 1 -> " in out
    assert "   1  " in out and "why" in out
    assert main(["advise", "llama-3.1-8b", "--device", "h100-sxm", "--batch", "1", "--top", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["changes"]) == 2 and data["baseline"]["throughput_unit"] == "output tokens"
    assert data["changes"][0]["gain"] > data["changes"][1]["gain"] > 0
    assert main(["advise", "llama-3.1-8b", "--device", "no-such-gpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("planner: error: unknown device") and err.count("\n") == 1
    assert main(["advise", "--device", "h100-sxm"]) == 2
    assert "give a MODEL" in capsys.readouterr().err
