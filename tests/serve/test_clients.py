"""Benchmark clients (planner/serve/clients.py): each client's request count, length spread and ITL, and the
closed forms of a closed-loop run under a client: N clients with no think time complete N / (mean E2E)
requests per second while all N are busy, and the run obeys Little's law over its whole span."""

import json

import numpy as np
import pytest

from planner.errors import ConfigError, PlannerError
from planner.predict.api import Request
from planner.serve.api import Load, serve, serve_row
from planner.serve.clients import get_client, load_clients

REQ = Request("llama-3.1-8b", "h100-sxm", input_len=512, output_len=128)


def test_every_client_loads_with_a_source_for_what_is_simulated():
    clients = load_clients()
    assert set(clients) == {"vllm-bench-serve", "sglang-bench-serving", "genai-perf", "aiperf", "trtllm-bench",
                            "inferencemax"}
    from planner.serve.load import serving_root
    data = json.loads((serving_root() / "clients.json").read_text())
    for cid in clients:
        for fact in data["clients"][cid]["simulated"].values():
            assert fact["source"]


def test_request_counts_follow_each_clients_rule():
    # vllm bench serve: 1,000 whatever the concurrency; genai-perf and aiperf max(10, 2 N); InferenceMAX 10 N;
    # trtllm-bench the dataset's size (left to the run)
    assert get_client("vllm-bench-serve").requests(64) == 1000
    assert get_client("genai-perf").requests(3) == 10 and get_client("genai-perf").requests(64) == 128
    assert get_client("aiperf").requests(100) == 200
    assert get_client("inferencemax").requests(32) == 320
    assert get_client("trtllm-bench").requests(32) is None


def test_lengths_spread_as_each_client_draws_them():
    rng = np.random.default_rng(0)
    # InferenceMAX, range ratio 0.8 "below": integer-uniform in [int(0.8 x 1,000), 1,000] = [800, 1,000]
    x = get_client("inferencemax").lengths(1000, None, 20_000, rng)
    assert x.min() == 800 and x.max() == 1000 and abs(x.mean() - 900) < 2
    # SGLang's default ratio 0 "below": uniform in [max(int(0), 1), L] = [1, 1,000]: mean (1 + 1,000) / 2
    y = get_client("sglang-bench-serving").lengths(1000, None, 20_000, rng)
    assert y.min() >= 1 and y.max() == 1000 and abs(y.mean() - 500.5) < 8
    # vllm bench serve "around": ratio 0 is fixed; 0.5 spreads over [500, 1,500]
    assert set(get_client("vllm-bench-serve").lengths(1000, None, 100, rng)) == {1000}
    z = get_client("vllm-bench-serve").lengths(1000, 0.5, 20_000, rng)
    assert z.min() == 500 and z.max() == 1500


def test_a_client_run_is_its_request_count_started_all_at_once():
    result = serve(REQ, Load(concurrency=4, client="genai-perf"))
    m = result.metrics
    assert m.requests == 10 and m.completed == 10  # max(10, 2 x 4)
    assert any(n.startswith("client genai-perf") and "all 4 clients at once" in n for n in result.notes)
    # genai-perf's "ITL" is each request's (E2E - TTFT) / (output - 1): the TPOT
    assert m.itl_s == m.tpot_s


def test_n_closed_loop_clients_complete_n_over_the_mean_e2e_per_second():
    # 8 clients, no think time, 2,000 requests of fixed lengths (vllm bench serve with --num-prompts 2000): every
    # client is busy from 0 until the last wave, so requests/s = 8 / mean E2E up to the drain at the end, which
    # Little's law counts exactly: requests/s = mean requests in the system / mean E2E
    result = serve(REQ, Load(concurrency=8, requests=2000, client="vllm-bench-serve"))
    m = result.metrics
    assert m.requests_per_s == pytest.approx(m.mean_concurrency / m.e2e_s.mean, rel=0.02)
    assert m.requests_per_s == pytest.approx(8 / m.e2e_s.mean, rel=0.02)
    assert m.mean_concurrency <= 8 * (1 + 1e-12)


def test_inferencemax_lengths_desynchronize_the_clients():
    # fixed lengths keep 16 clients in lockstep (each wave of 16 prompts queues behind itself); InferenceMAX's
    # [0.8 L, L] lengths spread their completions, so the later waves arrive staggered and wait less
    fixed = serve(REQ, Load(concurrency=16, requests=160)).metrics
    spread = serve(REQ, Load(concurrency=16, client="inferencemax")).metrics
    assert spread.requests == 160
    assert spread.ttft_s.mean < fixed.ttft_s.mean


def test_a_configs_row_names_its_client_and_range_ratio():
    row = {"model": "llama-3.1-8b", "device": "h100-sxm", "input_len": 512, "output_len": 128, "concurrency": 4,
           "client": "aiperf"}
    out = serve_row(row)
    assert out["requests"] == 10 and out["itl_s"] == out["tpot_s"]
    with pytest.raises(PlannerError, match="unknown benchmark client"):
        serve_row(dict(row, client="locust"))


@pytest.mark.parametrize("load,match", [
    (Load(concurrency=2, client="nope"), "unknown benchmark client"),
    (Load(concurrency=2, range_ratio=0.5), "--range-ratio needs --client"),
    (Load(concurrency=2, client="inferencemax", range_ratio=1.5), "--range-ratio must be in"),
])
def test_bad_client_inputs_are_one_line_errors(load, match):
    with pytest.raises(PlannerError, match=match):
        serve(REQ, load)


def test_a_malformed_client_file_names_the_client(tmp_path):
    data = {"clients": {"x": {"title": "x", "version": "1", "simulated": {"requests": {"value": {"fixed": 5}},
                                                                         "lengths": {"value": {"range": "sideways",
                                                                                               "ratio": 0}},
                                                                         "itl": {"value": "pooled_gaps"}}}}}
    (tmp_path / "clients.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="client 'x'"):
        load_clients(tmp_path)


def test_a_client_server_flag_must_be_true_or_false(tmp_path):
    sim = {"requests": {"value": {"fixed": 5}}, "lengths": {"value": {"range": "fixed", "ratio": 0}},
           "itl": {"value": "pooled_gaps"}, "server": {"value": "yes"}}
    (tmp_path / "clients.json").write_text(json.dumps({"clients": {"x": {"title": "x", "version": "1",
                                                                          "simulated": sim}}}))
    with pytest.raises(ConfigError, match="client 'x'.*true/false server"):
        load_clients(tmp_path)


def test_an_open_loop_rate_above_saturation_is_warned_of_under_a_clients_count():
    # vllm bench serve's 1,000 requests at 60 requests/s, above the ~19/s llama-3.1-8b sustains on one H100 with
    # 512 + 128 tokens: the client's count is a stated run, and still an overload to warn of
    result = serve(REQ, Load(rate_rps=60.0, client="vllm-bench-serve"))
    assert result.overloaded and result.saturation_rps < 60.0
    assert any(w.startswith("overloaded") for w in result.warnings)


@pytest.mark.parametrize("load,match", [
    (Load(concurrency=2, client="inferencemax", range_ratio=0.5, lengths="sharegpt"), "has lengths of its own"),
    (Load(concurrency=20_001, client="inferencemax"), "runs 200,010 requests"),
])
def test_a_clients_impossible_load_is_refused(load, match):
    with pytest.raises(PlannerError, match=match):
        serve(REQ, load)


@pytest.mark.parametrize("requests,lengths", [
    ({"per_concurrency": "Infinity"}, {"range": "fixed", "ratio": 0}),
    ({"fixed": 1.5}, {"range": "fixed", "ratio": 0}),
    ({"fixed": 10}, {"range": "below", "ratio": True}),
])
def test_a_client_file_with_odd_numbers_is_refused(tmp_path, requests, lengths):
    text = json.dumps({"clients": {"x": {"title": "x", "version": "1", "simulated": {
        "requests": {"value": requests}, "lengths": {"value": lengths}, "itl": {"value": "pooled_gaps"}}}}})
    (tmp_path / "clients.json").write_text(text.replace('"Infinity"', "Infinity"))
    with pytest.raises(ConfigError):
        load_clients(tmp_path)
