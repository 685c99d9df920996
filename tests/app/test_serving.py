"""The app's Serving page (planner/app/serving.py) through streamlit.testing: what it shows, that it
reacts to the rate and the SLOs, its highest rate within the SLOs against planner.serve.sweep.max_rate,
and messages (never a traceback, never headline numbers) for what cannot be served.

The page's calls are cached (st.cache_data is process-wide), so after the first test the default
inputs cost nothing: each test starts a fresh app on the Start page (cheap) and opens Serving."""

import pytest
from streamlit.testing.v1 import AppTest

from planner.app.serving_charts import SATURATED
from tests.app.conftest import APP, chart_specs, metrics, table

MAX_RATE = "Max rate in SLOs (requests/s)"


@pytest.fixture
def serving():
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    at.sidebar.radio(key="page").set_value("Serving").run()
    assert not at.exception, at.exception
    return at


def _chart_rows(at) -> list[dict]:
    """Every row of every chart's data (Vega-Lite specs name their datasets; the rows travel beside them
    as Arrow)."""
    import pyarrow as pa
    return [row for el in at.get("vega_lite_chart") for d in el.proto.datasets
            for row in pa.ipc.open_stream(d.data.data).read_pandas().to_dict("records")]


def _errors(at) -> list[str]:
    return [e.value for e in at.error]


def _set(at, key: str, value):
    at.number_input(key=key).set_value(value).run()
    assert not at.exception, at.exception
    return at


def test_the_page_shows_the_curve_the_cdfs_and_the_cost(serving):
    assert not _errors(serving)
    shown = metrics(serving)
    assert {MAX_RATE, "Saturation (requests/s)", "Tier", "TTFT p90", "TPOT p90"} <= set(shown)
    assert shown["TTFT p90"].endswith("ms") and float(shown[MAX_RATE]) > 0
    bands = {m.label: m.delta for m in serving.metric}
    assert bands["TTFT p90"].startswith("band ") and "–" in bands["TTFT p90"]  # a low–high range
    specs = chart_specs(serving)
    assert len(specs) == 4  # TTFT and TPOT against load, TTFT and TPOT CDFs
    assert all('"rule"' in s for s in specs) and sum("share of requests" in s for s in specs) == 2
    labels = {row.get("label"): row for row in _chart_rows(serving)}
    assert labels["SLO TTFT 2000 ms"]["ms"] == 2000 and labels["SLO TPOT 100 ms"]["ms"] == 100  # horizontal rules
    rule = next(row for label, row in labels.items() if str(label).startswith("highest rate within SLOs"))
    assert rule["x"] == pytest.approx(float(shown[MAX_RATE]), abs=0.005)  # the vertical rule at the max rate
    shares = [row["share of requests"] for row in _chart_rows(serving) if "share of requests" in row]
    assert min(shares) == 0 and max(shares) == 1  # CDFs from 0 to every request
    curve = table(serving, "TTFT p90 (ms)")
    assert {"offered rate (requests/s)", "throughput (output tokens/s)", "TPOT p99 (ms)"} <= set(curve.columns)
    assert len(curve) == 8
    # TTFT is text: "1,234.5" below saturation, SATURATED past it (the last point, 110% of saturation)
    steady = curve[curve["TTFT p50 (ms)"] != SATURATED]
    assert list(curve["TTFT p90 (ms)"]).count(SATURATED) == len(curve) - len(steady) >= 1
    assert curve["TTFT p90 (ms)"].iloc[-1] == SATURATED
    p50, p99 = (steady[c].str.replace(",", "").astype(float) for c in ("TTFT p50 (ms)", "TTFT p99 (ms)"))
    assert p50.le(p99).all() and (p50 > 0).all()
    cost = table(serving, "$ per 1M output tokens, band")
    assert list(cost["run"]) == ["chosen rate", "highest rate within SLOs"]
    assert (cost["$ per 1M output tokens"] > 0).all() and (cost["energy (MJ per 1M output tokens)"] > 0).all()
    assert any("price of 20" in c.value for c in serving.caption)  # the price's date


def test_the_highest_rate_shown_is_the_librarys(serving):
    # closed comparison: the same request, load, SLOs and points straight into planner.serve.sweep.sweep (whose
    # answer is bisected from its own table's rows, so that the two agree)
    from planner.predict import Request
    from planner.serve.api import Load, Scheduling, Slo
    from planner.serve.sweep import sweep
    req = Request("llama-3.1-8b", "h100-sxm", gpus=1, tp=1, input_len=1024, output_len=256)
    _, capacity = sweep(req, Load(requests=1000), Scheduling(), Slo(2.0, 0.1, "p90"), 8)  # the page's 1,000 requests
    assert capacity.rate_rps > 0
    shown = metrics(serving)
    assert float(shown[MAX_RATE]) == pytest.approx(capacity.rate_rps, abs=0.005)
    assert float(shown["Saturation (requests/s)"]) == pytest.approx(capacity.saturation_rps, abs=0.005)


def test_the_chosen_rate_is_the_run_a_plan_and_its_check_make(serving):
    # issue 43: the page's run at a rate, with its default request count, is planner.serve.sweep.run_at_rate on
    # standard_load(), which a plan's capacity and its check run: the same p90 TTFT and TPOT, to the digit shown
    from planner.app.common import fmt_s
    from planner.predict import Request
    from planner.serve.api import Slo
    from planner.serve.sweep import run_at_rate
    req = Request("llama-3.1-8b", "h100-sxm", gpus=1, tp=1, input_len=1024, output_len=256)
    m = run_at_rate(req, 5.0, slo=Slo(2.0, 0.1, "p90")).metrics  # the page's default rate, 5 requests/s
    shown = metrics(serving)
    assert shown["TTFT p90"] == fmt_s(m.ttft_s.p90) and shown["TPOT p90"] == fmt_s(m.tpot_s.p90)


def test_the_rate_and_the_slos_change_what_is_shown(serving):
    before = metrics(serving)
    after = metrics(_set(serving, "serve_rate_rps", 15.0))
    assert after["TTFT p90"] != before["TTFT p90"] and after[MAX_RATE] == before[MAX_RATE]
    assert any(s.value == "At 15 requests/s" for s in serving.subheader)
    # a TPOT objective of 20 ms binds sooner: a lower highest rate, the rest of the run unchanged
    tight = metrics(_set(serving, "serve_slo_tpot_ms", 20.0))
    assert 0 < float(tight[MAX_RATE]) < float(after[MAX_RATE])
    assert tight["TTFT p90"] == after["TTFT p90"]


def test_a_model_that_does_not_fit_is_a_message_not_numbers(serving):
    serving.selectbox(key="serve_model").set_value("llama-3.1-405b").run()
    serving.selectbox(key="serve_device").set_value("l4").run()
    assert not serving.exception
    errors = _errors(serving)
    assert len(errors) == 1 and "does not fit on 1 x l4" in errors[0] and "GB short" in errors[0]
    assert metrics(serving) == {} and not chart_specs(serving)


def test_slos_no_rate_meets_are_a_message_with_the_shortfall(serving):
    shown = metrics(_set(serving, "serve_slo_ttft_ms", 1.0))  # no prefill of 1,024 tokens takes 1 ms
    errors = _errors(serving)
    assert len(errors) == 1 and "No request rate meets the SLOs" in errors[0] and "over)" in errors[0]
    assert MAX_RATE not in shown


@pytest.mark.parametrize("values, words", [
    ({"serve_tp": 2, "serve_gpus": 3}, "GPUs 3 is not a multiple"),  # copies of 2 GPUs do not make 3 (in the page's
    # words: the library's "--gpus 3" is the GPUs input, planner/app/wording.py)
    ({"serve_rate_rps": 0.0}, "rate_rps"),                          # no Poisson process at 0 requests/s
])
def test_bad_values_are_messages_not_tracebacks(serving, values, words):
    for key, value in values.items():
        _set(serving, key, value)
    errors = _errors(serving)
    assert errors and any(words in e for e in errors), errors
    assert not any("internal error" in e for e in errors)


def test_a_recipe_the_device_cannot_run_is_a_message(serving):
    serving.selectbox(key="serve_recipe").set_value("nvfp4").run()  # H100 has no fp4 tensor cores
    assert not serving.exception
    assert any("fp4" in e for e in _errors(serving)) and metrics(serving) == {}


def test_the_start_page_preset_opens_serving_with_its_inputs():
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    at.button(key="start_serve").click().run()
    assert not at.exception and not _errors(at)
    assert at.sidebar.radio(key="page").value == "Serving"
    assert at.selectbox(key="serve_model").value == "llama-3.1-70b"
    assert at.number_input(key="serve_gpus").value == 8 and at.number_input(key="serve_tp").value == 8
    assert float(metrics(at)[MAX_RATE]) > 0 and not at.warning


# ---------- request lengths: a preset of lengths.csv, or a mix table

def _lengths(at, mode: str):
    at.radio(key="serve_length_mode").set_value(mode).run()
    assert not at.exception, at.exception
    return at


def _library_capacity(load, input_len=1024, output_len=256):
    from planner.predict import Request
    from planner.serve.api import Scheduling, Slo
    from planner.serve.sweep import sweep
    req = Request("llama-3.1-8b", "h100-sxm", gpus=1, tp=1, input_len=input_len, output_len=output_len)
    return sweep(req, load, Scheduling(), Slo(2.0, 0.1, "p90"), 8)[1]


def test_a_preset_draws_its_lengths_and_shows_its_source(serving):
    from planner.serve.api import Load
    at = _lengths(serving, "preset")
    at.selectbox(key="serve_preset").set_value("azure-conv").run()
    assert not at.exception and not _errors(at)
    assert any("Source:" in c.value and "splitwise" in c.value.lower() and "input mean 1,155 tokens" in c.value
               for c in at.caption)
    assert any("lengths azure-conv" in m.value for m in at.markdown)  # the load the runs were made under
    capacity = _library_capacity(Load(requests=1000, lengths="azure-conv"), 1155, 211)  # the preset's rounded means
    assert float(metrics(at)[MAX_RATE]) == pytest.approx(capacity.rate_rps, abs=0.005)


def test_a_mix_table_is_simulated_as_the_librarys_mix(serving):
    from planner.serve.api import Load
    at = _lengths(serving, "mix")
    assert not _errors(at)
    assert list(at.data_editor(key="serve_mix").value.columns) == ["input_len", "output_len", "share"]
    # the table's first rows (the Plan page's): 70% of 512 + 128 tokens, 30% of 1,024 + 256; the request carries
    # the longest bucket
    capacity = _library_capacity(Load(requests=1000, mix=((512, 128, 0.7), (1024, 256, 0.3))))
    assert float(metrics(at)[MAX_RATE]) == pytest.approx(capacity.rate_rps, abs=0.005)
    assert any("length mix 512 + 128 tokens x 70%, 1,024 + 256 tokens x 30%" in m.value for m in at.markdown)


@pytest.mark.parametrize("edits, message", [
    ({"edited_rows": {1: {"share": 0.5}}}, "Length mix: shares add up to 1.2, not 1"),
    ({"edited_rows": {1: {"input_len": None}}}, "Length mix, row 2: input (tokens) is empty"),
    ({"edited_rows": {}, "added_rows": [{"input_len": 64, "output_len": 64, "share": 0.0}]},
     "Length mix, row 3: share (0-1) must be above 0"),
])
def test_a_bad_mix_is_one_line_naming_its_row(serving, edits, message):
    at = _lengths(serving, "mix")
    at.session_state["serve_mix"] = {"added_rows": [], "deleted_rows": [], **edits}
    at.run()
    assert not at.exception
    errors = _errors(at)
    assert len(errors) == 1 and errors[0].startswith(message) and "\n" not in errors[0], errors
    assert metrics(at) == {}


def test_mix_buckets_name_the_tables_row_and_header():
    import pandas as pd

    from planner.app.serving import mix_buckets
    from planner.errors import ConfigError
    frame = pd.DataFrame([{"input_len": 512.0, "output_len": 128.0, "share": 0.5},
                          {"input_len": None, "output_len": None, "share": None},  # an empty row is skipped
                          {"input_len": 0.0, "output_len": 64.0, "share": 0.5}])
    with pytest.raises(ConfigError, match=r"^Length mix, row 3: input \(tokens\) must be a whole number in \[1, "):
        mix_buckets(frame)
    frame.loc[2, "input_len"] = 2048.0
    assert mix_buckets(frame) == ((512, 128, 0.5), (2048, 64, 0.5))  # whole floats of the table become ints
    frame.loc[2, "output_len"] = 20000.0
    with pytest.raises(ConfigError, match=r"^Length mix, row 3: output \(tokens\) is 20,000, above the page's 16,384"):
        mix_buckets(frame)


# ---------- past saturation

def test_a_rate_past_saturation_reads_saturated_not_a_huge_number(serving):
    import json
    at = _set(serving, "serve_rate_rps", 1000.0)  # far past one H100's saturation (about 20 requests/s)
    shown = metrics(at)
    assert shown["TTFT p90"] == "saturated" and shown["TPOT p90"].endswith("ms")
    assert any("above the saturation rate" in w.value for w in at.warning)
    cost = table(at, "$ per 1M output tokens, band")
    assert list(cost["TTFT p90 (ms)"]) == [SATURATED, cost["TTFT p90 (ms)"].iloc[1]]
    assert cost["TTFT p90 (ms)"].iloc[1] != SATURATED and float(cost["TTFT p90 (ms)"].iloc[1].replace(",", "")) > 0
    # the TTFT axes end at max(3 x the 2,000 ms SLO, 2 x the longest value below saturation), not at the
    # saturated run's seconds: every clipped axis is clamped, and none reaches 100 s
    domains = [layer["encoding"][axis]["scale"]["domain"] for s in chart_specs(at) for layer in json.loads(s)["layer"]
               for axis in ("x", "y") if "domain" in layer.get("encoding", {}).get(axis, {}).get("scale", {})]
    assert domains and all(top <= 100_000 for _, top in domains)
    assert any("Triangles: rates past saturation" in c.value for c in at.caption)
    assert any("Why this differs from the Workload page" in c.value for c in at.caption)  # $/1M tokens explained


# ---------- deployments side by side

def test_deployments_side_by_side(serving):
    at = serving
    at.toggle(key="serve_compare").set_value(True).run()
    assert not at.exception and not _errors(at)
    frame = at.data_editor(key="serve_cmp").value
    assert list(frame["device"]) == ["h100-sxm", "h200-sxm"]  # the page's deployment and the next device
    compared = table(at, "max rate within SLOs (requests/s)")
    assert list(compared["deployment"]) == ["1 x h100-sxm, tp 1, default engine, bf16",
                                           "1 x h200-sxm, tp 1, default engine, bf16"]
    # the page's own deployment is the same (cached) sweep: the same highest rate
    assert compared["max rate within SLOs (requests/s)"].iloc[0] == pytest.approx(float(metrics(at)[MAX_RATE]),
                                                                                 abs=0.005)
    assert compared["max rate within SLOs (requests/s)"].iloc[1] > compared["max rate within SLOs (requests/s)"].iloc[0]
    assert (compared["$ per 1M output tokens at max rate"] > 0).all()
    assert len(chart_specs(at)) == 6  # two more: TTFT and TPOT of both deployments
    drawn = {row["deployment"] for row in _chart_rows(at) if "deployment" in row}
    assert drawn == set(compared["deployment"])
    assert "compare" in at.query_params and at.query_params["compare"].count(";") == 1


def test_a_bad_deployment_row_is_one_line(serving):
    at = serving
    at.toggle(key="serve_compare").set_value(True).run()
    at.session_state["serve_cmp"] = {"edited_rows": {1: {"tp": None}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    assert "Deployments, row 2: tp is empty" in _errors(at)
    assert float(metrics(at)[MAX_RATE]) > 0  # the page's own results stay


# ---------- the page's address

def test_the_inputs_go_to_the_address_and_it_restores_them(serving):
    at = _set(serving, "serve_rate_rps", 3.5)
    _lengths(at, "mix")
    query = dict(at.query_params)
    assert query["page"] == "Serving" and query["model"] == "llama-3.1-8b" and query["rate"] == "3.5"
    assert query["lengths"] == "mix" and query["mix"] == "512:128:0.7,1024:256:0.3" and "input" not in query
    query.update(gpus="2", ttft_ms="1500", mix="300:50:0.25,2048:64:0.75")
    fresh = AppTest.from_file(APP, default_timeout=300)
    fresh.query_params.update(query)
    fresh.run()
    assert not fresh.exception and not fresh.warning, [w.value for w in fresh.warning]
    assert fresh.sidebar.radio(key="page").value == "Serving"
    assert fresh.number_input(key="serve_gpus").value == 2 and fresh.number_input(key="serve_rate_rps").value == 3.5
    assert fresh.number_input(key="serve_slo_ttft_ms").value == 1500.0
    assert fresh.radio(key="serve_length_mode").value == "mix"
    rows = fresh.data_editor(key="serve_mix").value.to_dict("records")
    assert rows == [{"input_len": 300, "output_len": 50, "share": 0.25}, {"input_len": 2048, "output_len": 64,
                                                                          "share": 0.75}]
    assert not _errors(fresh) and float(metrics(fresh)[MAX_RATE]) > 0


def test_bad_address_values_are_ignored_with_one_warning():
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"page": "Serving", "gpus": "abc", "model": "no-such-model", "mix": "1:2",
                            "compare": "h100-sxm:1", "rate": "4", "tp": "1e300"})
    at.run()
    assert not at.exception
    [warning] = [w.value for w in at.warning]
    assert warning.startswith("Ignored from the page's address:") and "\n" not in warning
    for name in ("gpus=abc", "model=no-such-model", "mix=1:2", "compare=h100-sxm:1", "tp=1e300"):
        assert name in warning
    assert at.number_input(key="serve_rate_rps").value == 4.0  # the good one is kept
    assert at.number_input(key="serve_gpus").value == 1 and at.selectbox(key="serve_model").value == "llama-3.1-8b"
    assert not _errors(at) and float(metrics(at)[MAX_RATE]) > 0


def test_an_empty_slo_is_no_target(serving):
    """Issue 43 item 8: no TPOT target is an empty input ("no target"), not 0 ms or 1e+06 ms: the
    simulator runs without it, no SLO line is drawn, and the page's address says 'none'."""
    from planner.app.serving_address import from_address

    capped = metrics(serving)
    free = _set(serving, "serve_slo_tpot_ms", None)
    assert not free.exception
    shown = metrics(free)
    # without the 100 ms TPOT target only the 2,000 ms TTFT target binds: the highest rate is at least as high
    assert float(shown[MAX_RATE]) >= float(capped[MAX_RATE])
    deltas = [m.proto.delta for m in free.metric]
    assert any("TPOT no target" in d and "TTFT ≤ 2,000 ms" in d for d in deltas), deltas
    rules = [spec for spec in chart_specs(free) if "SLO TPOT" in str(spec)]
    assert not rules  # no red SLO line at a target that is not there
    assert free.session_state["serve_slo_tpot_ms"] is None
    # the address carries it as "none", and "none" restores an empty input
    assert free.query_params.get("tpot_ms") in (["none"], "none"), free.query_params
    values, bad = from_address({"tpot_ms": "none", "ttft_ms": "1500"})
    assert values["serve_slo_tpot_ms"] is None and values["serve_slo_ttft_ms"] == 1500.0 and not bad
