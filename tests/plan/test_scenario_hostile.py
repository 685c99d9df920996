"""Hostile scenario files (issue 11): a scenario never makes planner import code, YAML bombs and deep nesting stop
early with one line, and every bad value is a ConfigError naming the key and what would be valid, through the
library, the CLI (exit 2, one line on stderr) and the app's upload."""

import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from planner.app.plan import ADVANCED
from planner.cli import main
from planner.errors import ConfigError
from planner.plan.scenario import MAX_BYTES, load, loads

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
TEMPLATE = """name: hostile
workloads:
  - name: chat
    model: {model}
    demand_rps: {demand_rps}
    buckets: [{{input_len: 512, output_len: 128, share: {share}}}]
    slo: {{ttft_s: {ttft_s}, tpot_s: {tpot_s}}}
candidates:
  cloud: {{providers: [runpod], pricing: [on_demand]}}
constraints: {{monthly_budget_usd: {monthly_budget_usd}}}
horizon_months: {horizon_months}
utilization: {utilization}
"""
GOOD = dict(model="gpt2", demand_rps=1, share=1.0, ttft_s=1.0, tpot_s=0.05, monthly_budget_usd=100000,
            horizon_months=12, utilization=0.8)


def scenario_text(**changes) -> str:
    """A small valid scenario (gpt2 on RunPod: plans in well under a second once gpt2 is captured) with `changes`."""
    return TEMPLATE.format(**{**GOOD, **changes})


def _cli(capsys, tmp_path, text: str | bytes) -> tuple[int, str, float]:
    path = tmp_path / "scenario.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    start = time.perf_counter()
    rc = main(["plan", str(path)])
    seconds = time.perf_counter() - start
    out, err = capsys.readouterr()
    return rc, err, seconds


def _clean(rc: int, err: str) -> None:
    """Exit 2 with one line `planner: error: ...` and no traceback."""
    assert rc == 2 and err.startswith("planner: error:") and err.count("\n") == 1 and "Traceback" not in err, err


LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))
"""A billion laughs: nine levels of nine aliases, 9^9 = 387,420,489 strings once expanded, from 450 bytes."""
LAUGHS_BYTES = LAUGHS.encode()

# ------------------------------------------------------------------ no code from data


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A module `planted_xyz` on sys.path whose import writes a marker file: the marker proves an import."""
    marker = tmp_path / "imported.marker"
    (tmp_path / "planted_xyz.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n\n\n"
        "def build():\n    raise SystemExit\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("planted_xyz", None)
    yield marker
    sys.modules.pop("planted_xyz", None)


def _not_imported(marker: Path) -> None:
    assert not marker.exists(), "planted_xyz was imported"
    assert "planted_xyz" not in sys.modules


PLANTED_TRAINING = """training:
  - {name: ft, model: "planted_xyz:build", tokens: 1.0e9, deadline_days: 7}
candidates: {cloud: {providers: [runpod]}}
"""


@pytest.mark.parametrize("text, where", [
    (scenario_text(model='"planted_xyz:build"'), "scenario.workloads[0].model"),
    (scenario_text(model='"os:abort"'), "scenario.workloads[0].model"),
    (PLANTED_TRAINING, "scenario.training[0].model"),
])
def test_cli_refuses_a_model_that_names_code_without_importing_it(planted, capsys, tmp_path, text, where):
    rc, err, _ = _cli(capsys, tmp_path, text)
    _clean(rc, err)
    assert f"{where}: " in err and "names Python code (package.module:function)" in err
    _not_imported(planted)


def test_a_bare_module_name_is_an_unknown_model_not_an_import(planted, capsys, tmp_path):
    rc, err, _ = _cli(capsys, tmp_path, scenario_text(model="planted_xyz"))
    _clean(rc, err)
    assert "unknown model 'planted_xyz'" in err
    _not_imported(planted)


def _app_upload(data: bytes) -> AppTest:
    """The Plan page with `data` uploaded through the "scenario_upload" file uploader: the scenario box checks
    it at once (planner.plan.scenario.loads), and Solve stays disabled while it is invalid."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["page"] = "Plan"
    at.session_state["plan_mode"] = ADVANCED  # the scenario YAML, not the form
    at.session_state["plan_source"] = "Upload YAML"
    at.run()
    at.file_uploader(key="scenario_upload").set_value(("scenario.yaml", data, "application/x-yaml")).run()
    assert at.button(key="plan_solve").disabled
    return at


def test_app_upload_refuses_a_model_that_names_code_without_importing_it(planted):
    at = _app_upload(scenario_text(model='"planted_xyz:build"').encode())
    assert not at.exception, at.exception
    [error] = [e.value for e in at.error]
    assert "scenario.workloads[0].model" in error and "names Python code" in error
    _not_imported(planted)


@pytest.mark.parametrize("data, expected", [
    (b"[" * 5000 + b"]" * 5000, "nested deeper than 32 levels"),  # yaml.safe_load alone raises RecursionError
    (LAUGHS_BYTES, "aliases expand to more than 20,000 values"),
    (b"x: !!python/object/apply:os.system ['true']\n", "python/object"),  # PyYAML's message has 3 lines
    (b"name: a\x00\n", "unacceptable character #x0000"),  # PyYAML's message has 2 lines
])
def test_app_upload_of_hostile_yaml_is_a_one_line_message(data, expected):
    # the app reads an upload through scenario.loads (safe_yaml's bounds, one-line messages)
    at = _app_upload(data)
    assert not at.exception
    [error] = [e.value for e in at.error]
    assert expected in error and "\n" not in error


def test_app_upload_names_zoo_ids_only_not_files_on_the_server(tmp_path):
    # a path in an upload would read a file on the server (its existence and JSON errors would be shown)
    secret = tmp_path / "secret.json"
    secret.write_text("{ not for the browser")
    at = _app_upload(scenario_text(model=str(secret)).encode())
    assert not at.exception
    [error] = [e.value for e in at.error]
    assert "names zoo ids only, not files" in error


def test_an_uploaded_scenario_text_names_zoo_ids_only():
    # what the app calls on an upload: a file path is refused before it is read
    with pytest.raises(ConfigError, match=r"workloads\[0\]\.model: '/etc/hostname': an uploaded scenario names zoo ids "
                                          r"only, not files"):
        loads(scenario_text(model="/etc/hostname"), "upload", allow_model_files=False)


# ------------------------------------------------------------------ bombs, depth, size


@pytest.mark.parametrize("text, expected", [
    (LAUGHS, "aliases expand to more than 20,000 values"),
    (LAUGHS + "workloads: *i\n", "aliases expand to more than 20,000 values"),
    ("a: &a [*a]\n", "an alias refers to a list or mapping that contains it"),
    ("a: &x [1]\nb: [" + ", ".join(["*x"] * 101) + "]\n", "more than 100 aliases"),
    ("[" * 5000 + "]" * 5000, "nested deeper than 32 levels"),  # flow sequences 5,000 deep
    ("a: " + "{a: " * 5000 + "1" + "}" * 5000, "nested deeper than 32 levels"),  # flow mappings
    ("- " * 5000 + "x\n", "nested deeper than 32 levels"),  # block sequences, 10 KB
    ("[" + "1, " * 20_000 + "1]", "more than 20,000 values"),
])
def test_bombs_and_deep_nesting_stop_early_with_one_line(capsys, tmp_path, text, expected):
    with pytest.raises(ConfigError, match=expected):
        loads(text, "bomb.yaml")
    rc, err, seconds = _cli(capsys, tmp_path, text)
    _clean(rc, err)
    assert expected.split(" ")[0] in err and seconds < 5  # well under 10 s: the bounds stop it while composing


def test_a_scenario_over_the_size_limit_is_refused_before_parsing(capsys, tmp_path):
    text = scenario_text() + "# " + "x" * MAX_BYTES + "\n"
    with pytest.raises(ConfigError, match="larger than 1,048,576 bytes"):
        loads(text, "big.yaml")
    rc, err, seconds = _cli(capsys, tmp_path, text)
    _clean(rc, err)
    assert "the limit is 1,048,576" in err and seconds < 5


@pytest.mark.parametrize("text, expected", [
    (b"name: caf\xe9\n", "is not UTF-8 text: byte 0xe9 at offset 9"),
    (b"name: a\x00\n", "not valid YAML (unacceptable character #x0000"),  # was a ReaderError traceback (exit 3)
    (b"name: a\x07\n", "not valid YAML (unacceptable character #x0007"),
    (b"x: !!python/object/apply:os.system ['true']\n", "could not determine a constructor"),
    (b"\xef\xbb\xbf" + b"[1, 2", "not valid YAML"),
    # the file is named once, up front: not the loader's "<unicode string>"
    (b"axes: [unclosed\n", "not valid YAML (while parsing a flow sequence at line 1, column 7"),
])
def test_bytes_that_are_not_a_yaml_scenario_are_one_line(capsys, tmp_path, text, expected):
    rc, err, _ = _cli(capsys, tmp_path, text)
    _clean(rc, err)
    assert expected in err


def test_a_bom_is_allowed(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + scenario_text().encode())
    assert load(path).workloads == loads(scenario_text()).workloads


# ------------------------------------------------------------------ keys


@pytest.mark.parametrize("extra, expected", [
    # YAML's 1 and true are the same Python key: PyYAML would keep only `y` under 1; refused as a repeat
    ("1: x\ntrue: y\nnull: z\nname2: w\n", "the key 'true' on line 14 repeats the key '1' on line 13"),
    ("1: x\nnull: z\nname2: w\n3.5: v\n2024-01-01: d\n",
     "scenario: unknown keys 1, null, name2, 3.5, 2024-01-01; valid: name, workloads"),
    ("false: x\n", "scenario.false: unknown key; valid: name, workloads"),
    ("name: again\n", "the key 'name' on line 13 repeats the key 'name' on line 1"),
    ("? [1, 2]\n: x\n", "found unhashable key"),
    ("2024-13-45: x\n", "month must be in 1..12"),
])
def test_unknown_and_repeated_keys_of_any_type_are_one_line(extra, expected):
    with pytest.raises(ConfigError) as info:  # never a TypeError from sorting or joining keys of mixed types
        loads(scenario_text() + extra, "keys.yaml")
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_an_unknown_key_inside_a_workload_is_named_with_its_path():
    text = scenario_text().replace("    demand_rps:", "    true: 1\n    demand_rps:")
    with pytest.raises(ConfigError, match=r"^scenario\.workloads\[0\]\.true: unknown key; valid: name, model"):
        loads(text)


# ------------------------------------------------------------------ numbers


@pytest.mark.parametrize("key, valid", [
    ("demand_rps", "valid: 1e-06 to 1,000,000 requests/s"),
    ("share", "valid: above 0 to 1"),
    ("ttft_s", "valid: above 0 to 3,600 s"),
    ("tpot_s", "valid: above 0 to 3,600 s"),
    ("monthly_budget_usd", "valid: 0 to 1,000,000,000,000 USD"),
    ("horizon_months", "valid: 1 to 240 months"),
    ("utilization", "valid: 0.01 to 1"),
])
@pytest.mark.parametrize("value", [".nan", ".NaN", ".inf", "-.inf", "1e400", "-1", "-1e-9", "abc", "true", "[]"])
def test_a_non_finite_negative_or_non_numeric_value_names_its_key_and_range(key, valid, value):
    # YAML 1.1 reads .nan/.inf as floats, 1e400 (no dot) as a string that overflows to inf: all refused by range
    with pytest.raises(ConfigError) as info:
        loads(scenario_text(**{key: value}))
    message = str(info.value)
    assert message.startswith("scenario.") and key in message and valid in message and "\n" not in message


@pytest.mark.parametrize("key, expected", [
    ("demand_rps", "demand_rps: '1e-9' is out of range"),  # below 1e-6 req/s: a request every 11.6 days
    ("share", "buckets: shares add up to 1e-09, not 1"),
    ("horizon_months", "horizon_months: '1e-9' is out of range"),
    ("utilization", "utilization: '1e-9' is out of range"),
])
def test_a_tiny_value_is_refused_where_its_range_excludes_it(key, expected):
    with pytest.raises(ConfigError, match=expected):
        loads(scenario_text(**{key: "1e-9"}))


@pytest.mark.parametrize("key, expected", [
    ("ttft_s", "no candidate serves it within TTFT 1e-09 s"),  # in range (above 0) but no device is that fast
    ("tpot_s", "no candidate serves it within TTFT 1.0 s and TPOT 1e-09 s"),
    ("monthly_budget_usd", "no plan meets every constraint; relaxing any one of these makes it feasible: "
                           "constraints.monthly_budget_usd"),
])
def test_a_tiny_slo_or_budget_is_a_clean_infeasibility_from_the_cli(capsys, tmp_path, key, expected):
    rc, err, _ = _cli(capsys, tmp_path, scenario_text(**{key: "1e-9"}))
    _clean(rc, err)
    assert expected in err


def test_a_small_but_valid_demand_gets_a_unit(capsys, tmp_path):
    rc, err, _ = _cli(capsys, tmp_path, scenario_text(demand_rps="3e-3"))
    assert rc == 0, err


# ------------------------------------------------------------------ models that cannot serve


@pytest.mark.parametrize("model, expected", [
    ("bert-base", "'bert-base' is an encoder model: a serving workload with TTFT and TPOT SLOs needs a model that "
                  "generates tokens"),
    ("resnet50", "'resnet50' is a vision model: a serving workload"),
])
def test_an_encoder_or_vision_model_cannot_be_a_serving_workload(capsys, tmp_path, model, expected):
    rc, err, _ = _cli(capsys, tmp_path, scenario_text(model=model))
    _clean(rc, err)
    assert f"scenario.workloads[0].model: {expected}" in err and " a encoder" not in err
