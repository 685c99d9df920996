"""benchmarks/dev_validation.py: which rows run on the serving simulator, under which load, read how."""

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # dev_validation imports its neighbour output.py
spec = importlib.util.spec_from_file_location("dev_validation", BENCHMARKS / "dev_validation.py")
dev_validation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dev_validation)


def _row(**changes) -> dict:
    """DEV-093 of benchmarks/data/dev_measurements.csv (the columns the planning reads), with changes."""
    row = {"id": "DEV-093", "category": "inference_llm", "model": "Llama-3.1-8B",
           "precision": "BF16 weights, BF16 KV cache", "framework_and_version": "vLLM ~0.19.1",
           "hardware": "H100 (variant not stated)", "accelerator_count": "1", "nodes": "1", "parallelism": "TP=1",
           "batch_size": "8", "input_len": "20000", "output_len": "2000", "image_size": "",
           "scenario": "online serving, concurrency 8, long context", "metric": "output_tokens_per_s",
           "value": "450.3",
           "notes": "vllm bench serve, 150 requests at concurrency 8, ~20k input and ~2k output tokens (+-15% "
                    "variance); single GPU; FlashAttention-3 backend (vLLM fork) on H100; vLLM ~v0.19.1; same "
                    "table: median TTFT and total duration also given"}
    row.update(changes)
    return row


SHAREGPT = {"id": "DEV-123", "model": "Llama-3.1-405B", "precision": "BF16",
            "framework_and_version": "vLLM v0.6.x (ROCm 6.2), optimized settings (multi-step scheduling, chunked "
                                     "prefill off, etc.)",
            "hardware": "AMD Instinct MI300X 192GB", "accelerator_count": "8", "parallelism": "TP=8",
            "batch_size": "", "input_len": "ShareGPT", "output_len": "ShareGPT",
            "scenario": "online serving, ShareGPT, request rate 1000 QPS (saturated)", "metric": "requests_per_s",
            "notes": "Guest post Embedded LLM + Hot Aisle; ShareGPT dataset (variable lengths); number read from "
                     "text; exact sample count not stated in text (see appendix commands in post)"}


def test_serving_loads_of_the_dev_rows():
    # DEV-093: concurrency 8 in the scenario, 150 requests in the notes
    assert dev_validation.serving_load(_row()) == {"concurrency": 8, "requests": 150}
    # DEV-094: the latency row of the same run
    assert dev_validation.serving_load(_row(category="inference_llm_latency", metric="ms_per_token",
                                            scenario="median inter-token latency at concurrency 8")) == {
        "concurrency": 8, "requests": 150}
    # DEV-123 / DEV-124: a request rate, a dataset's lengths, no count; "2.58 req/s" is no request count
    assert dev_validation.serving_load(_row(**SHAREGPT)) == {"rate_rps": 1000.0, "lengths": "sharegpt"}
    dev124 = {**SHAREGPT, "scenario": "online serving, ShareGPT, request rate 16 QPS",
              "notes": "default vLLM configuration at 16 QPS; TGI got 2.58 req/s in the same setup"}
    assert dev_validation.serving_load(_row(**dev124)) == {"rate_rps": 16.0, "lengths": "sharegpt"}
    # an engine serving benchmark stated as concurrent requests, with the count given as 1,000 prompts
    assert dev_validation.serving_load(_row(framework_and_version="SGLang 0.4", scenario="64 concurrent requests",
                                            notes="bench_serving, 1,000 prompts")) == {
        "concurrency": 64, "requests": 1000}


def test_the_dev_set_rows_on_the_simulator():
    with open(dev_validation.DATA, newline="", encoding="utf-8") as f:
        loads = {r["id"]: dev_validation.serving_load(r) for r in csv.DictReader(f)}
    c8 = {"concurrency": 8, "requests": 150}
    assert {i: load for i, load in loads.items() if load is not None} == {
        "DEV-093": c8, "DEV-094": c8, "DEV-095": c8, "DEV-096": c8, "DEV-097": c8, "DEV-098": c8,
        "DEV-123": {"rate_rps": 1000.0, "lengths": "sharegpt"}, "DEV-124": {"rate_rps": 16.0, "lengths": "sharegpt"}}


@pytest.mark.parametrize("changes", [
    # DEV-099: a fitted intercept over a sweep at concurrency 1, not a load that was run
    {"scenario": "concurrency-1 ITL intercept of linear fit ITL = slope*input_len + intercept",
     "category": "inference_llm_latency", "metric": "ms_per_token"},
    # DEV-110: offline throughput of 1000 requests (a batch run to completion)
    {"scenario": "offline max-throughput (1000 requests)", "metric": "tokens_per_s_total"},
    # DEV-101: TensorRT-LLM static batch
    {"framework_and_version": "TensorRT-LLM (2024 pre-release)", "scenario": "static-batch end-to-end generation "
                                                                             "throughput"},
    # DEV-062: gpt-fast batch-1 decode (no serving engine)
    {"framework_and_version": "gpt-fast (torch.compile)", "scenario": "batch-1 decode latency"},
    # an eager engine at a concurrency: no scheduler to simulate, stays on predict
    {"framework_and_version": "HF Accelerate 0.12"},
    # training rows never serve
    {"category": "training_llm"},
])
def test_rows_that_stay_on_predict(changes):
    assert dev_validation.serving_load(_row(**changes)) is None


def test_serve_readings():
    read = dev_validation.serve_reading
    assert read(_row()) == {"field": "output_tokens_per_s", "stat": None, "scale": 1.0, "what": "output_tokens_per_s"}
    assert read(_row(**SHAREGPT))["field"] == "requests_per_s"
    assert read(_row(metric="tokens_per_s_total"))["field"] == "total_tokens_per_s"
    # DEV-094: median inter-token latency -> itl_s.p50 in ms
    assert read(_row(metric="ms_per_token", scenario="median inter-token latency at concurrency 8")) == {
        "field": "itl_s", "stat": "p50", "scale": 1e3, "what": "itl_s.p50 x 1000"}
    tpot = read(_row(metric="ms_per_token", scenario="mean TPOT at concurrency 8"))
    assert (tpot["field"], tpot["stat"], tpot["scale"]) == ("tpot_s", "mean", 1e3)
    ttft = read(_row(metric="ttft_ms", scenario="p99 TTFT at concurrency 8"))
    assert (ttft["field"], ttft["stat"], ttft["scale"]) == ("ttft_s", "p99", 1e3)
    # the statistic from the notes when the scenario does not say it
    itl = read(_row(metric="ms_per_token", scenario="inter-token latency at concurrency 8", notes="median ITL"))
    assert (itl["field"], itl["stat"]) == ("itl_s", "p50")
    with pytest.raises(dev_validation.NotExpressed, match="which statistic of ITL"):
        read(_row(metric="ms_per_token", scenario="inter-token latency at concurrency 8", notes=""))
    with pytest.raises(dev_validation.NotExpressed, match="metric not produced: s_per_batch"):
        read(_row(metric="s_per_batch"))


def test_serve_plans():
    plan = dev_validation.plan_serve(_row(), dev_validation.serving_load(_row()))
    assert plan.kind == "serve" and plan.device == "h100-sxm"
    assert plan.settings["load"] == {"concurrency": 8, "requests": 150}
    request = plan.settings["request"]
    assert (request["model"], request["engine"], request["dtype"], request["tp"]) == ("llama-3.1-8b", "vllm", "bf16", 1)
    assert (request["input_len"], request["output_len"]) == (20000, 2000)
    assert "lengths varied by +-15% in the measurement: simulated at the stated 20,000 / 2,000 tokens" in plan.notes
    # no stated count: 10 x concurrency, at least 100
    row = _row(notes="")
    assert dev_validation.plan_serve(row, dev_validation.serving_load(row)).settings["load"]["requests"] == 100
    row = _row(scenario="online serving, concurrency 32", notes="")
    assert dev_validation.plan_serve(row, dev_validation.serving_load(row)).settings["load"]["requests"] == 320
    # DEV-123: ShareGPT preset, no fixed lengths, benchmark_serving's default 1000 requests, settings noted
    row = _row(**SHAREGPT)
    plan = dev_validation.plan_serve(row, dev_validation.serving_load(row))
    assert plan.settings["load"] == {"rate_rps": 1000.0, "lengths": "sharegpt", "requests": 1000}
    assert "input_len" not in plan.settings["request"] and plan.settings["request"]["tp"] == 8
    assert ("engine settings stated as 'optimized settings (multi-step scheduling, chunked prefill off, etc.)': "
            "the engine file's scheduler defaults are simulated") in plan.notes
