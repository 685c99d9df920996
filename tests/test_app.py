"""The Streamlit app through streamlit.testing: each page renders real numbers, inputs change them,
bad input shows a message and never a traceback."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


@pytest.fixture
def app():
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    assert not at.exception, at.exception
    return at


def _metrics(at):
    return {m.label: m.value for m in at.metric}


def test_workload_page_predicts_and_reacts_to_the_batch(app):
    before = _metrics(app)
    assert before["TTFT"].endswith(("ms", "s")) and "tier" in before
    app.number_input(key="batch").set_value(32).run()
    after = _metrics(app)
    assert not app.exception and after["TTFT"] != before["TTFT"]
    assert len(app.dataframe) >= 2  # the device table and the per-op table


def test_cost_page_break_even_moves_with_utilization(app):
    app.sidebar.radio(key="page").set_value("Cost").run()
    before = _metrics(app)["Break-even"]
    app.slider(key="cost_utilization").set_value(0.3).run()
    after = _metrics(app)["Break-even"]
    assert not app.exception and before != after
    assert "price of" in " ".join(c.value for c in app.caption)


def test_plan_page_solves_the_mixed_example_and_reports_the_saving(app):
    app.sidebar.radio(key="page").set_value("Plan").run()
    app.button(key="plan_solve").click().run()
    assert not app.exception and not app.error
    assert _metrics(app)["$/month"].startswith("$")
    assert any("saves" in s.value for s in app.success)


def test_plan_page_bad_yaml_is_a_message(app):
    app.sidebar.radio(key="page").set_value("Plan").run()
    app.text_area(key="plan_text").set_value("workloads: [{name: a}]\ncandidates: {cloud: {}}\n").run()
    app.button(key="plan_solve").click().run()
    assert not app.exception
    assert any("scenario.workloads[0].model" in e.value for e in app.error)


def test_calibration_page_lists_profiles_and_validation(app):
    app.sidebar.radio(key="page").set_value("Calibration and accuracy").run()
    assert not app.exception
    assert any("cpu-amd-epyc" in h.value for h in app.subheader)
    assert len(app.dataframe) >= 1


def test_workload_page_with_gpt2_defaults_shows_numbers_not_a_stack(app):
    # gpt2 has 1,024 learned positions: the default 1,024 input + 256 output tokens do not fit, so every
    # device row fails; the page must say why in a box (it once raised KeyError 'usd_per_unit').
    app.selectbox(key="model").set_value("gpt2").run()
    assert not app.exception
    app.selectbox(key="dtype").set_value("fp4").run()
    assert not app.exception


def test_an_unexpected_failure_is_an_error_box_asking_for_a_report(app, monkeypatch):
    # Any exception that is not a PlannerError becomes one box naming it as an internal error, with no
    # stack trace; PLANNER_DEBUG=1 would let it through to Streamlit instead.
    import planner.plan.solve

    def broken(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(planner.plan.solve, "solve", broken)
    app.sidebar.radio(key="page").set_value("Plan").run()
    app.text_area(key="plan_text").set_value(app.text_area(key="plan_text").value + "\n# a new cache key\n").run()
    app.button(key="plan_solve").click().run()
    assert not app.exception
    [box] = [e.value for e in app.error]
    assert box.startswith("internal error: ZeroDivisionError: float division by zero") and "report" in box


def test_picking_another_example_replaces_the_scenario_box(app):
    # the keyed text area once kept the first scenario's text after another was picked or uploaded
    app.sidebar.radio(key="page").set_value("Plan").run()
    assert "chat + summarization" in app.text_area(key="plan_text").value
    app.selectbox(key="plan_example").set_value("hybrid.yaml").run()
    assert not app.exception and "hybrid on-prem + cloud" in app.text_area(key="plan_text").value
    # an edit survives reruns until the source changes again
    app.text_area(key="plan_text").set_value("name: edited\n").run()
    app.radio(key="plan_source").set_value("Example").run()
    assert app.text_area(key="plan_text").value == "name: edited\n"


def test_trace_page_reads_a_bundled_h100_trace(app):
    app.sidebar.radio(key="page").set_value("Trace").run()
    app.selectbox(key="trace_bundled").set_value("h100_resnet50_train_b32_amp_bf16.json.gz").run()
    assert not app.exception and not app.error
    metrics = _metrics(app)
    assert metrics["device"] == "h100-sxm" and metrics["wall time"] == "35.0 ms"
    tables = {tuple(d.value.columns): d.value for d in app.dataframe}
    breakdown = tables[("part", "time (ms)", "share of wall (%)")]
    assert abs(breakdown["share of wall (%)"].sum() - 100) < 0.1
    ops = next(t for cols, t in tables.items() if "flagged (ratio > 2)" in cols)
    assert {"measured (ms)", "attainable (ms)", "achieved (TFLOP/s)"} <= set(ops.columns) and len(ops) == 20
    whatif = next(t for cols, t in tables.items() if "predicted wall (ms)" in cols)
    assert list(whatif["device"]) == ["h200-sxm", "b200", "mi300x"]
    # a host that never makes the device wait: every device predicts a shorter step than measured
    app.slider(key="trace_host_scale").set_value(0.0).run()
    whatif = next(d.value for d in app.dataframe if "speedup (x)" in d.value.columns)
    assert not app.exception and (whatif["speedup (x)"] > 1).all()


def test_trace_page_bad_or_oversized_upload_is_a_message(app):
    app.sidebar.radio(key="page").set_value("Trace").run()
    app.radio(key="trace_source").set_value("Upload").run()
    assert not app.exception and app.info
    app.file_uploader(key="trace_upload").set_value(("bad.json", b"{not json", "application/json")).run()
    assert not app.exception
    [box] = [e.value for e in app.error]
    assert box.startswith("trace 'bad.json': not valid JSON")
    app.file_uploader(key="trace_upload").set_value(("big.json.gz", b"\0" * (50 * 2**20 + 1), "application/gzip")).run()
    assert not app.exception
    [box] = [e.value for e in app.error]
    assert "big.json.gz is 52,428,801 bytes; the limit is 52,428,800 bytes" in box


def test_sweep_page_shows_the_example_front_and_reacts_to_filters(app):
    app.sidebar.radio(key="page").set_value("Sweep").run()
    assert not app.exception and not app.error
    metrics = _metrics(app)
    points, front = int(metrics["Points"].replace(",", "")), int(metrics["Pareto-optimal"].replace(",", ""))
    assert 0 < front < points and len(app.dataframe) == 2  # the front and the best point per device
    app.multiselect(key="sweep_devices").set_value(["h100-sxm"]).run()
    assert not app.exception and int(_metrics(app)["Points"].replace(",", "")) < points


def test_sweep_page_bad_path_is_a_message(app):
    app.sidebar.radio(key="page").set_value("Sweep").run()
    app.radio(key="sweep_source").set_value("Parquet file on this machine").run()
    app.text_input(key="sweep_path").set_value("no/such/sweep.parquet").run()
    assert not app.exception and any("does not exist" in e.value for e in app.error)
