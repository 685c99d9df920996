"""The app's Serving page (planner/app/serving.py) through streamlit.testing: what it shows, that it
reacts to the rate and the SLOs, its highest rate within the SLOs against planner.serve.sweep.max_rate,
and messages (never a traceback, never headline numbers) for what cannot be served.

The page's calls are cached (st.cache_data is process-wide), so after the first test the default
inputs cost nothing: each test starts a fresh app on the Start page (cheap) and opens Serving."""

import pytest
from streamlit.testing.v1 import AppTest

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
    assert len(curve) == 8 and curve["TTFT p50 (ms)"].le(curve["TTFT p99 (ms)"]).all()
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
    ({"serve_tp": 2, "serve_gpus": 3}, "--gpus 3 is not a multiple"),  # copies of 2 GPUs do not make 3
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
