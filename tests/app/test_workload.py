"""The app's Workload page (planner/app/workload.py) through streamlit.testing."""

from tests.app.conftest import metrics


def test_workload_page_predicts_and_reacts_to_the_batch(app):
    before = metrics(app)
    assert before["TTFT"].endswith(("ms", "s")) and "tier" in before
    app.number_input(key="batch").set_value(32).run()
    after = metrics(app)
    assert not app.exception and after["TTFT"] != before["TTFT"]
    assert len(app.dataframe) >= 2  # the device table and the per-op table


def test_workload_page_with_gpt2_defaults_shows_numbers_not_a_stack(app):
    # gpt2 has 1,024 learned positions: the default 1,024 input + 256 output tokens do not fit, so every
    # device row fails; the page must say why in a box (it once raised KeyError 'usd_per_unit').
    app.selectbox(key="model").set_value("gpt2").run()
    assert not app.exception
    app.selectbox(key="dtype").set_value("fp4").run()
    assert not app.exception
