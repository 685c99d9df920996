"""The serving API (planner/serve/api.py, sweep.py) against the predictor's closed forms: one request at
a time is `planner predict`'s TTFT and TPOT, static batches back to back are its batch throughput,
dp copies add up; JSON-safe results, goodput at the SLO extremes, the highest rate within SLOs, and
bad input as ConfigError naming the flag.

Every run uses the same model, device and lengths, so the step-time grid (kept in the shared
default context's cache "serve.steps")
is filled once and the file runs in seconds."""

import json
import math
import re
from dataclasses import replace

import pytest

from planner.errors import ConfigError, PlannerError
from planner.predict.api import Request, predict
from planner.serve import sweep as sweeps
from planner.serve import versions
from planner.serve.api import Load, Scheduling, Slo, serve
from planner.units import json_safe

MODEL, DEVICE, PROMPT, OUTPUT = "llama-3.1-8b", "h100-sxm", 512, 128
REQ = Request(MODEL, DEVICE, input_len=PROMPT, output_len=OUTPUT)
OPEN = Load(rate_rps=10.0, requests=200)  # well below saturation (~40 requests/s on one H100)


@pytest.fixture(scope="module")
def open_run():
    """One open-loop run at 10 requests/s, with a TTFT SLO so that goodput is reported."""
    return serve(REQ, OPEN, slo=Slo(ttft_s=0.5))


def test_one_request_at_a_time_is_predict():
    # one closed-loop client: a request arrives as the last completes, so nothing queues and every
    # request is one prefill step of 512 tokens (TTFT) then 127 decode steps at batch 1 (TPOT),
    # exactly what predict models for batch 1; the client's TTFT adds the 4 ms vLLM's HTTP server takes
    # before the scheduler sees a request (schedulers.json frontend), which predict (the engine alone) has not
    result = serve(REQ, Load(concurrency=1, requests=20))
    expected = predict(REQ).metrics
    m = result.metrics
    assert result.engine == "vllm" and result.copies == 1 and m.completed == 20
    assert versions.frontend_s("vllm") == 0.004
    for stat in (m.ttft_s.mean, m.ttft_s.p50, m.ttft_s.p99):
        assert stat == pytest.approx(expected["ttft_s"] + 0.004, rel=1e-9)
    # in-process (trtllm-bench: no HTTP server): the engine's TTFT alone
    bench = serve(replace(REQ, engine="trtllm"), Load(concurrency=1, requests=5, client="trtllm-bench")).metrics
    assert bench.ttft_s.mean == pytest.approx(predict(replace(REQ, engine="trtllm")).metrics["ttft_s"], rel=1e-9)
    # predict's TPOT is the decode step at the mean context; the simulator's the mean over the 127
    # steps of an interpolated grid line (exact at contexts 512 and 639): equal to 1e-3
    assert m.tpot_s.mean == pytest.approx(expected["tpot_s"], rel=1e-3)
    assert m.e2e_s.mean == pytest.approx(m.ttft_s.mean + (OUTPUT - 1) * m.tpot_s.mean, rel=1e-9)
    assert m.preemptions == 0 and m.rejected == 0


def test_static_batches_back_to_back_are_predict():
    # eager engine, batch 8, 8 closed-loop clients and 32 requests: 4 batches of 8, each prefilled
    # together (TTFT = predict's batch-8 prefill) and decoded for 127 steps; the next 8 requests arrive
    # as the batch completes, so the span is 4 x one batch and the throughput is predict's
    req = replace(REQ, engine="eager", batch=8)
    result = serve(req, Load(concurrency=8, requests=32))
    expected = predict(req).metrics
    m = result.metrics
    assert result.engine == "eager" and result.policy == "static batching, batch 8"
    assert m.completed == 32
    assert m.ttft_s.mean == pytest.approx(expected["ttft_s"], rel=1e-9)
    assert m.ttft_s.p99 == pytest.approx(expected["ttft_s"], rel=1e-9)
    assert m.tpot_s.mean == pytest.approx(expected["tpot_s"], rel=1e-3)
    assert m.output_tokens_per_s == pytest.approx(expected["throughput_tokens_per_s"], rel=1e-3)
    # 32 x 128 output tokens over 4 batches of (TTFT + 127 TPOT)
    assert m.duration_s == pytest.approx(4 * (m.ttft_s.mean + (OUTPUT - 1) * m.tpot_s.mean), rel=1e-9)


def test_two_copies_serve_twice_the_closed_loop_throughput_of_one():
    # the same load per copy (16 clients, 200 requests) on 1 and on 2 model copies
    one = serve(REQ, Load(concurrency=16, requests=200))
    two = serve(replace(REQ, gpus=2), Load(concurrency=32, requests=400))
    assert (one.copies, one.gpus, two.copies, two.gpus) == (1, 1, 2, 2)
    assert two.metrics.completed == 400
    assert two.metrics.requests_per_s == pytest.approx(2 * one.metrics.requests_per_s, rel=0.02)
    assert two.metrics.output_tokens_per_s == pytest.approx(2 * one.metrics.output_tokens_per_s, rel=0.02)
    # the latency of each request is the same on either: each copy sees the same load
    assert two.metrics.ttft_s.p50 == pytest.approx(one.metrics.ttft_s.p50, rel=0.02)


def test_fewer_clients_than_copies_still_serve_every_request():
    result = serve(replace(REQ, gpus=2), Load(concurrency=1, requests=10))
    assert result.metrics.requests == result.metrics.completed == 10


def _check_disaggregated(engine: str | None) -> None:
    req = replace(REQ, gpus=2, engine=engine)
    n = 100
    result = serve(req, Load(rate_rps=10.0, requests=n), Scheduling(disagg="1p1d"))
    prefill = predict(replace(req, gpus=1)).metrics["ttft_s"]  # one prompt of 512 tokens alone
    m = result.metrics
    assert result.copies == 2 and result.gpus == 2
    assert m.requests == n and m.completed == n and m.rejected == 0
    # the first token comes out of the prefill copy: never sooner than a prefill of 512 tokens alone
    assert m.ttft_s.p50 >= prefill * (1 - 1e-9)
    assert min(m.ttft_s.mean, m.ttft_s.p50, m.ttft_s.p90, m.ttft_s.p99) >= prefill * (1 - 1e-9)
    assert m.e2e_s.mean > m.ttft_s.mean
    assert any("disaggregated 1p1d" in note for note in result.notes)


def test_disaggregated_runs_every_request_to_completion_sglang():
    _check_disaggregated("sglang")


def test_disaggregated_runs_every_request_to_completion_default_engine():
    _check_disaggregated(None)


@pytest.mark.parametrize("disagg", ["1x1", "p1d", "0p1d", "1p0d", "1p1", "-1p2d", "1p1d1p1d", "99999p1d"])
def test_a_malformed_disagg_is_a_config_error(disagg):
    with pytest.raises(ConfigError, match="--disagg"):
        serve(replace(REQ, gpus=2), Load(rate_rps=10.0, requests=10), Scheduling(disagg=disagg))


def test_disagg_copies_must_match_the_gpus():
    # 1p1d is 2 copies of tp 1: 3 GPUs do not make it
    with pytest.raises(ConfigError, match="--gpus 3"):
        serve(replace(REQ, gpus=3), Load(rate_rps=10.0, requests=10), Scheduling(disagg="1p1d"))


def test_as_dict_is_json_without_nan(open_run):
    out = open_run.as_dict()
    text = json.dumps(json_safe(out), allow_nan=False)
    back = json.loads(text)
    for key in ("ttft_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_s", "tpot_p90_s", "e2e_p99_s",
                "output_tokens_per_s", "requests_per_s", "goodput_rps"):
        assert key in back, key
        assert isinstance(back[key], float) and math.isfinite(back[key]) and back[key] > 0, key
    assert back["requests"] == back["completed"] == 200
    assert back["ttft_p50_s"] <= back["ttft_p90_s"] <= back["ttft_p99_s"]
    assert back["model"] == MODEL and back["device"] == DEVICE and back["engine"] == "vllm"


def test_goodput_at_the_slo_extremes():
    # loose: every completed request meets the SLOs, so goodput is the completion rate
    loose = serve(REQ, OPEN, slo=Slo(ttft_s=1e6, tpot_s=1e6)).metrics
    assert loose.goodput_rps == pytest.approx(loose.requests_per_s, rel=1e-12)
    assert loose.slo_met_fraction == 1.0
    # tight: no TTFT is within 1 ns
    tight = serve(REQ, OPEN, slo=Slo(ttft_s=1e-9)).metrics
    assert tight.goodput_rps == 0.0 and tight.slo_met_fraction == 0.0
    assert tight.requests_per_s == pytest.approx(loose.requests_per_s, rel=1e-12)  # the SLO changes no latency
    # no SLO: no goodput
    assert serve(REQ, OPEN).metrics.goodput_rps is None


def test_max_rate_returns_a_run_that_meets_the_slo():
    slo = Slo(ttft_s=0.05)
    load = Load(rate_rps=1.0, requests=300)
    cap = sweeps.max_rate(REQ, load, Scheduling(), slo)
    assert 0 < cap.rate_rps <= cap.saturation_rps
    assert cap.at_rate is not None and slo.met(cap.at_rate.metrics)
    assert cap.at_rate.metrics.ttft_s.p90 <= 0.05 and cap.at_rate.metrics.rejected == 0
    # the same seed: the run at the returned rate is reproduced exactly
    again = serve(REQ, replace(load, rate_rps=cap.rate_rps), slo=slo)
    assert again.metrics.ttft_s.p90 == cap.at_rate.metrics.ttft_s.p90


def test_sweep_spans_5_to_110_percent_of_saturation():
    load = Load(rate_rps=1.0, requests=200)
    curve, cap = sweeps.sweep(REQ, load, Scheduling(), Slo(ttft_s=0.5), points=3)
    rates = [rate for rate, _ in curve]
    # 3 points: 5%, 57.5% and 110% of the closed-loop saturation rate
    assert rates == pytest.approx([0.05 * cap.saturation_rps, 0.575 * cap.saturation_rps, 1.10 * cap.saturation_rps])
    assert all(run.metrics.completed == 200 for _, run in curve)
    assert 0 < cap.rate_rps <= cap.saturation_rps


@pytest.mark.parametrize("call,flag", [
    (lambda: sweeps.max_rate(REQ, OPEN, Scheduling(), Slo()), "--slo-ttft"),
    (lambda: sweeps.sweep(REQ, OPEN, points=1), "--sweep-rate"),
    (lambda: sweeps.sweep(REQ, OPEN, points=True), "--sweep-rate"),
], ids=["max-rate-without-slo", "one-point", "bool-points"])
def test_bad_sweep_inputs_are_config_errors(call, flag):
    with pytest.raises(ConfigError, match=flag):
        call()


@pytest.mark.parametrize("req,load,scheduling,slo,flag", [
    (REQ, Load(rate_rps=5.0, concurrency=2), Scheduling(), Slo(), "--rate, --concurrency or --trace"),
    (REQ, Load(rate_rps=5.0, trace="t.csv"), Scheduling(), Slo(), "--rate, --concurrency or --trace"),
    (REQ, Load(), Scheduling(), Slo(), "--rate, --concurrency or --trace"),
    (REQ, Load(rate_rps=5.0, requests=0), Scheduling(), Slo(), "--requests"),
    (REQ, Load(rate_rps=5.0, requests=True), Scheduling(), Slo(), "--requests"),
    (REQ, Load(rate_rps=5.0, requests=10**9), Scheduling(), Slo(), "--requests"),
    (REQ, Load(concurrency=0), Scheduling(), Slo(), "--concurrency"),
    (REQ, Load(rate_rps=math.nan), Scheduling(), Slo(), "rate"),
    (REQ, Load(rate_rps=0.0), Scheduling(), Slo(), "rate"),
    (REQ, Load(rate_rps=5.0, arrival="uniform"), Scheduling(), Slo(), "--arrival"),
    (REQ, Load(rate_rps=5.0), Scheduling(prefix_hit_rate=-0.1), Slo(), "--prefix-hit-rate"),
    (REQ, Load(rate_rps=5.0), Scheduling(prefix_hit_rate=1.5), Slo(), "--prefix-hit-rate"),
    (REQ, Load(rate_rps=5.0), Scheduling(prefix_hit_rate=math.nan), Slo(), "--prefix-hit-rate"),
    (REQ, Load(rate_rps=5.0), Scheduling(max_num_seqs=0), Slo(), "--max-num-seqs"),
    (REQ, Load(rate_rps=5.0), Scheduling(), Slo(ttft_s=1.0, stat="p42"), "--slo-stat"),
    (REQ, Load(rate_rps=5.0), Scheduling(), Slo(ttft_s=-1.0), "--slo-ttft"),
    (REQ, Load(rate_rps=5.0), Scheduling(), Slo(tpot_s=math.inf), "--slo-tpot"),
    (REQ, Load(concurrency=2, think_s=-1.0), Scheduling(), Slo(), "--think-s"),
    (replace(REQ, gpus=2), Load(concurrency=4), Scheduling(disagg="1p1d"), Slo(), "--disagg"),
    (Request("bert-base", DEVICE), Load(rate_rps=5.0), Scheduling(), Slo(), "decoder"),
    (replace(REQ, engine="vllm"), Load(rate_rps=5.0), Scheduling(recv_interval=30), Slo(), "--recv-interval"),
    (replace(REQ, engine="sglang"), Load(rate_rps=5.0), Scheduling(recv_interval=0), Slo(), "--recv-interval"),
    (replace(REQ, engine="sglang"), Load(rate_rps=5.0), Scheduling(recv_interval=5000), Slo(), "--recv-interval"),
    (replace(REQ, engine="sglang"), Load(rate_rps=5.0), Scheduling(batch_wait_iters=40), Slo(), "--batch-wait-iters"),
    (replace(REQ, engine="trtllm"), Load(rate_rps=5.0), Scheduling(batch_wait_iters=-1), Slo(), "--batch-wait-iters"),
    (replace(REQ, engine="trtllm"), Load(rate_rps=5.0), Scheduling(batch_wait_iters=4, batch_wait_tokens_ratio=1.5),
     Slo(), "--batch-wait-tokens-ratio"),
], ids=["rate-and-concurrency", "rate-and-trace", "no-load", "requests-0", "requests-bool", "requests-huge",
        "concurrency-0", "rate-nan", "rate-0", "arrival", "prefix-negative", "prefix-1.5", "prefix-nan",
        "max-num-seqs-0", "slo-stat-p42", "slo-ttft-negative", "slo-tpot-inf", "think-negative",
        "disagg-closed-loop", "encoder-model", "recv-interval-vllm", "recv-interval-0", "recv-interval-5000",
        "batch-wait-sglang", "batch-wait-negative", "batch-wait-ratio-1.5"])
def test_bad_inputs_are_config_errors_naming_the_flag(req, load, scheduling, slo, flag):
    with pytest.raises(ConfigError, match=re.escape(flag)) as info:
        serve(req, load, scheduling, slo)
    assert isinstance(info.value, PlannerError) and "\n" not in str(info.value)


def test_an_unknown_model_or_device_is_a_planner_error():
    with pytest.raises(PlannerError, match="Did you mean"):
        serve(replace(REQ, device="h100-sx"), OPEN)
    with pytest.raises(PlannerError):
        serve(replace(REQ, model="llama-3.1-8bx"), OPEN)
