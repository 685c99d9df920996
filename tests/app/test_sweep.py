"""The app's Sweep page (planner/app/sweep.py) through streamlit.testing."""

from tests.app.conftest import metrics


def test_sweep_page_shows_the_example_front_and_reacts_to_filters(app):
    app.sidebar.radio(key="page").set_value("Sweep").run()
    assert not app.exception and not app.error
    shown = metrics(app)
    points, front = int(shown["Points"].replace(",", "")), int(shown["Pareto-optimal"].replace(",", ""))
    assert 0 < front < points and len(app.dataframe) == 2  # the front and the best point per device
    app.multiselect(key="sweep_devices").set_value(["h100-sxm"]).run()
    assert not app.exception and int(metrics(app)["Points"].replace(",", "")) < points


def test_sweep_page_bad_path_is_a_message(app):
    app.sidebar.radio(key="page").set_value("Sweep").run()
    app.radio(key="sweep_source").set_value("Parquet file on this machine").run()
    app.text_input(key="sweep_path").set_value("no/such/sweep.parquet").run()
    assert not app.exception and any("does not exist" in e.value for e in app.error)
