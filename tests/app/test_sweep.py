"""The app's Sweep page (planner/app/sweep.py) through streamlit.testing."""

import pandas as pd

from tests.app.conftest import metrics


def test_sweep_page_shows_the_example_front_and_reacts_to_filters(app):
    app.sidebar.radio(key="page").set_value("Sweep").run()
    assert not app.exception and not app.error
    shown = metrics(app)
    points, front = int(shown["Points"].replace(",", "")), int(shown["Pareto-optimal"].replace(",", ""))
    assert 0 < front < points and len(app.dataframe) == 2  # the front and the best point per device
    app.multiselect(key="sweep_devices").set_value(["h100-sxm"]).run()
    assert not app.exception and int(metrics(app)["Points"].replace(",", "")) < points


def _data_folder_page(app):
    app.sidebar.radio(key="page").set_value("Sweep").run()
    app.radio(key="sweep_source").set_value("A file in the app's data folder").run()
    assert not app.exception, app.exception
    return app


def test_sweep_page_reads_files_only_from_the_folder_the_app_was_started_with(app, tmp_path, monkeypatch):
    # issue 43: a path typed in the browser once read any file on the server; now only the Parquet files under
    # $PLANNER_APP_DATA (or benchmarks/results) are offered, and no path can be typed
    folder, outside = tmp_path / "data", tmp_path / "outside.parquet"
    (folder / "runs").mkdir(parents=True)
    pd.DataFrame({"a": [1]}).to_parquet(folder / "runs" / "notasweep.parquet")
    pd.DataFrame({"a": [1]}).to_parquet(outside)
    (folder / "link.parquet").symlink_to(outside)  # a link out of the folder is not offered
    monkeypatch.setenv("PLANNER_APP_DATA", str(folder))
    _data_folder_page(app)
    assert not app.text_input  # nothing to type a server path into
    assert any(str(folder) in c.value and "never read" in c.value for c in app.caption)
    assert app.selectbox(key="sweep_file").options == ["runs/notasweep.parquet"]
    assert any(e.value.startswith("not a planner sweep: no column id") for e in app.error)


def test_sweep_page_with_no_file_in_its_data_folder_says_so(app, tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_APP_DATA", str(tmp_path))
    _data_folder_page(app)
    assert not app.error and any(f"No sweep file (.parquet) in {tmp_path}" in i.value for i in app.info)
