"""Hostile workloads and model configs: every size that drives work is bounded before anything is
built, and a model name can never make planner run code unless the caller allows it."""

import json
import sys

import pytest

import planner_models
from planner.errors import ConfigError, PlannerError
from planner.workload.graphs import LIMITS, MAX_TOKENS_PER_STEP, Workload, build_graph, resolve_workload
from planner.workload.zoo import MAX_NAME_CHARS, from_config, resolve


def _llama(**fields) -> dict:
    base = {"model_type": "llama", "vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "intermediate_size": 128}
    return {**base, **fields}


@pytest.mark.parametrize("field,value", [("num_hidden_layers", 1_000_000), ("hidden_size", 2**40),
                                         ("vocab_size", 10**12), ("max_position_embeddings", 2**40)])
def test_config_sizes_above_their_limit_are_refused_naming_the_limit(field, value):
    with pytest.raises(ConfigError, match=f"'{field}' is .* above the limit of"):
        from_config(_llama(**{field: value}), "cfg")


def test_experts_times_layers_is_bounded():
    # 256 layers x 512 experts = 131,072 expert blocks > 16,384
    raw = _llama(model_type="mixtral", num_hidden_layers=256, num_local_experts=512)
    with pytest.raises(ConfigError, match="expert blocks, above the limit of 16,384"):
        from_config(raw, "cfg")
    with pytest.raises(ConfigError, match="num_local_experts.*above the limit of 512"):
        from_config(_llama(model_type="mixtral", num_local_experts=1_000_000), "cfg")


def test_non_finite_and_odd_types_in_a_config_are_clean_errors():
    for raw in (_llama(rope_theta=float("inf")), _llama(rms_norm_eps=float("nan")), _llama(model_type=["llama"]),
                _llama(hidden_size="64"), _llama(num_hidden_layers=True), [1, 2], "llama"):
        with pytest.raises(ConfigError):
            from_config(raw, "cfg")


def test_vision_sizes_are_bounded():
    resnet = {"model_type": "resnet", "depths": [1, 1], "hidden_sizes": [6, 10]}
    with pytest.raises(ConfigError, match="multiples of 4"):
        from_config(resnet, "cfg")
    with pytest.raises(ConfigError, match="image_size"):
        from_config({"model_type": "vit", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
                     "intermediate_size": 64, "image_size": 2**40}, "cfg")


@pytest.mark.parametrize("field", sorted(LIMITS))
def test_workload_sizes_above_their_limit_are_refused(field):
    model = resolve("gpt2") if field != "image_size" else resolve("resnet50")
    with pytest.raises(ConfigError, match="above the limit"):
        resolve_workload(model, Workload("forward" if field == "image_size" else "decode",
                                         **{field: LIMITS[field] + 1}))


def test_tokens_per_step_are_bounded():
    # 2**20 sequences x 2**13 tokens = 2**33 > 2**32 tokens in one step
    with pytest.raises(ConfigError, match=f"above the limit of {MAX_TOKENS_PER_STEP:,}"):
        resolve_workload(resolve("llama-3.1-8b"), Workload("prefill", batch=2**20, seq_len=2**13))


def test_a_huge_batch_is_an_error_not_a_torch_overflow():
    with pytest.raises(ConfigError, match="batch 99,999,999,999,999,999,999,999 is above the limit"):
        build_graph(resolve("gpt2"), Workload("prefill", batch=99999999999999999999999, seq_len=8))


def test_long_and_malformed_names_are_clean_errors():
    with pytest.raises(ConfigError, match=f"limit is {MAX_NAME_CHARS:,}"):
        resolve("x" * 10_000)
    for name in (":", "..:x", "a:", ":b", "os :abort", ""):
        with pytest.raises(PlannerError):
            resolve(name, allow_code=True)


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A module `planted_mod` whose import writes a marker file, on sys.path."""
    marker = tmp_path / "imported.txt"
    (tmp_path / "planted_mod.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\n"
        "import sys\n"
        "def fine():\n    import torch\n    return torch.nn.Linear(4, 4), (torch.zeros(2, 4),)\n"
        "def exits():\n    sys.exit(0)\n"
        "def needs(x):\n    return x\n"
        "def boom():\n    raise RuntimeError('boom')\n"
        "NOT_CALLABLE = 3\n")
    (tmp_path / "raising_mod.py").write_text("raise SystemExit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield marker
    for name in ("planted_mod", "raising_mod"):
        sys.modules.pop(name, None)


def test_code_is_never_imported_unless_the_caller_allows_it(planted):
    with pytest.raises(ConfigError, match="names Python code"):
        resolve("planted_mod:fine")
    assert not planted.exists()
    model = resolve("planted_mod:fine", allow_code=True)
    assert planted.exists() and model.family == "custom"


@pytest.mark.parametrize("spec,why", [("planted_mod:exits", "SystemExit"), ("planted_mod:needs", "TypeError"),
                                      ("planted_mod:boom", "RuntimeError: boom"),
                                      ("planted_mod:NOT_CALLABLE", "not a function"),
                                      ("raising_mod:f", "cannot import 'raising_mod:f': SystemExit"),
                                      ("planted_mod:missing", "AttributeError")])
def test_a_misbehaving_user_module_is_a_clean_error(planted, spec, why):
    with pytest.raises(ConfigError, match=why):
        build_graph(resolve(spec, allow_code=True), Workload("forward", dtype="fp32"))


def test_config_files_are_read_safely(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ConfigError, match="nested deeper"):
        resolve(str(deep))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"model_type": "llama", "name": "caf\xe9"}')
    with pytest.raises(ConfigError, match="not UTF-8 text: byte 0xe9"):
        resolve(str(latin))
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(planner_models.zoo_config("gpt2")).encode())
    assert resolve(str(bom)).config.num_layers == 12
