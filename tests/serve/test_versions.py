"""Engine versions (planner/serve/versions.py): `--engine vllm@0.11` selects that release's scheduler defaults,
resolved by the device's memory as the engine's code resolves them."""

import json

import pytest

from planner.errors import ConfigError, PlannerError
from planner.hardware.catalog import load_catalog
from planner.predict.api import Request
from planner.serve import versions
from planner.serve.api import Load, serve
from planner.workload.engines import get_engine

CAT = load_catalog()


def _resolve(name, device):
    engine, version = versions.split(name)
    return versions.resolve(engine, version, get_engine(engine).scheduler, CAT.device(device))


def test_vllm_serve_budgets_by_version_and_gpu():
    # `vllm serve` (OPENAI_API_SERVER): 8,192 tokens and 1,024 sequences on a GPU of >= 70 GiB that is not an
    # A100, else 2,048 and 256 (0.9.2 on); 0.8.5 gave the A100 80 GB the large tier; 0.33 adds 16,384 at >= 160 GiB
    h100, a100 = _resolve("vllm@0.11", "h100-sxm").scheduler, _resolve("vllm@0.11", "a100-sxm-80gb").scheduler
    assert (h100.max_num_batched_tokens, h100.max_num_seqs) == (8192, 1024)
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    assert _resolve("vllm@0.8.5", "a100-sxm-80gb").scheduler.max_num_batched_tokens == 8192
    # B200: 180 GB = 167.6 GiB >= 160 GiB
    assert _resolve("vllm@0.33", "b200").scheduler.max_num_batched_tokens == 16384
    assert _resolve("vllm@0.11", "b200").scheduler.max_num_batched_tokens == 8192


def test_a_version_prefix_picks_the_newest_match_and_none_picks_the_latest():
    assert _resolve("vllm@0.11", "h100-sxm").version == "0.11.0"
    assert _resolve("sglang@0.4", "h100-sxm").version == "0.4.10.post2"
    assert _resolve("vllm", "h100-sxm").version == "0.33.0"
    assert _resolve("vllm@0.14", "h100-sxm").async_scheduling is True
    assert _resolve("vllm@0.13", "h100-sxm").async_scheduling is False


def test_sglang_cuda_graph_batches_by_version_and_gpu():
    assert _resolve("sglang@0.4.0", "h200-sxm").cuda_graph_max_batch == 160
    assert _resolve("sglang@0.4.6", "h200-sxm").cuda_graph_max_batch == 256
    assert _resolve("sglang@0.5.5", "b200").scheduler.max_num_batched_tokens == 16384


def test_serve_names_the_version_it_simulated():
    req = Request("llama-3.1-8b", "a100-sxm-80gb", input_len=512, output_len=64, engine="vllm@0.11")
    result = serve(req, Load(concurrency=2, requests=4))
    assert result.engine == "vllm"
    assert "2,048 tokens per step" in result.policy
    assert any("vllm 0.11.0 defaults" in n for n in result.notes)


@pytest.mark.parametrize("engine,match", [("vllm@9.9", "no recorded version '9.9'"),
                                          ("eager@1.0", "no recorded versions")])
def test_an_unknown_version_is_a_one_line_error(engine, match):
    req = Request("llama-3.1-8b", "h100-sxm", input_len=128, output_len=16, engine=engine)
    with pytest.raises(PlannerError, match=match):
        serve(req, Load(concurrency=1, requests=2))


def test_a_malformed_version_fact_is_refused(tmp_path):
    data = {"latest": {"vllm": "1"}, "versions": {"vllm": {"1": {"max_num_seqs": {"value": -3}}}}}
    (tmp_path / "schedulers.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="max_num_seqs"):
        versions.resolve("vllm", None, get_engine("vllm").scheduler, CAT.device("h100-sxm"), tmp_path)


@pytest.mark.parametrize("versions_table,latest", [
    ({"vllm": {"1": {"max_num_seqs": {"value": [5]}}}}, {"vllm": "1"}),  # a tier that is not an object
    ({"vllm": {"1": {"max_num_seqs": {"value": [{"min_gib": "x", "value": 4}]}}}}, {"vllm": "1"}),
    ({"vllm": {"1": {"max_num_seqs": {"value": [{"not_names": 5, "value": 4}]}}}}, {"vllm": "1"}),
    ({"vllm": {"1": ["not", "facts"]}}, {"vllm": "1"}),
    ({"vllm": {"1": {"max_num_seqs": {"value": 4}}}}, {"vllm": "9.9"}),  # latest not recorded
])
def test_a_malformed_scheduler_file_is_a_config_error(tmp_path, versions_table, latest):
    (tmp_path / "schedulers.json").write_text(json.dumps({"latest": latest, "versions": versions_table}))
    versions._load.cache_clear()
    with pytest.raises(ConfigError):
        versions.resolve("vllm", None, get_engine("vllm").scheduler, CAT.device("h100-sxm"), tmp_path)


@pytest.mark.parametrize("frontend", [{"engines": {"vllm": {"value_s": -1, "source": "x"}}},
                                      {"engines": {"vllm": {"value_s": 0.004}}},  # no source
                                      {"engines": {"vllm": {"value_s": True, "source": "x"}}},
                                      {"engines": ["vllm"]},
                                      {"engines": {"vlm": {"value_s": 0.004, "source": "x"}}}])  # no such engine
def test_a_malformed_frontend_is_a_config_error(tmp_path, frontend):
    data = {"latest": {"vllm": "1"}, "versions": {"vllm": {"1": {}}}, "frontend": frontend}
    (tmp_path / "schedulers.json").write_text(json.dumps(data))
    versions._load.cache_clear()
    with pytest.raises(ConfigError, match="frontend"):
        versions.frontend_s("vllm", tmp_path)


def test_every_command_takes_or_refuses_a_version_alike():
    # predict and compare read the engine's graph; the version is checked there as in serve
    from planner.predict.api import compare, predict

    ok = Request("llama-3.1-8b", "h100-sxm", input_len=128, output_len=16, engine="vllm@0.11")
    assert predict(ok).engine == "vllm"
    with pytest.raises(PlannerError, match="no recorded version 'garbage'"):
        predict(Request("llama-3.1-8b", "h100-sxm", input_len=128, output_len=16, engine="vllm@garbage"))
    assert not compare("llama-3.1-8b", engine="vllm@0.11", input_len=128, output_len=16).empty
