"""The app's Sweep page (planner/app/sweep.py) through streamlit.testing."""

import pandas as pd
import pyarrow as pa
import pytest

from planner.app.sweep import FORM_DEFAULTS, MAX_FORM_POINTS, form_grid
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


def _define(app):
    app.sidebar.radio(key="page").set_value("Sweep").run()
    app.radio(key="sweep_source").set_value("Define a grid").run()
    assert not app.exception and not app.error, (app.exception, app.error)
    return app


def test_a_grid_defined_in_the_page_is_counted_run_and_shown_with_its_front(app, tmp_path):
    import yaml

    from planner.sweep.grid import load_grid
    from planner.sweep.run import run_sweep
    from planner.sweep.summary import read_sweep
    _define(app)
    [count] = [c.value for c in app.caption if " before the constraints" in c.value]
    points = int(count.split()[0].replace(",", ""))
    assert 0 < points <= MAX_FORM_POINTS and not app.dataframe  # counted before anything runs
    app.button(key="sg_run").click().run()
    assert not app.exception and not app.error
    shown = metrics(app)
    assert int(shown["Pareto-optimal"].replace(",", "")) > 0 and len(app.dataframe) == 2
    assert [b.proto.label for b in app.get("download_button")] == ["Grid as YAML", "Result as Parquet",
                                                                   "Result as CSV"]
    # the grid as YAML is the form's grid, and `planner sweep` on it writes the rows the page shows
    kept = app.session_state["sg_result"]
    text = kept["yaml"]
    assert yaml.safe_load(text) == form_grid({k: app.session_state[k] for k in FORM_DEFAULTS})
    (tmp_path / "grid.yaml").write_text(text)
    cli = read_sweep(str(run_sweep(load_grid(str(tmp_path / "grid.yaml")), tmp_path / "sweep.parquet").out))
    page = read_sweep(kept["parquet"])
    assert len(page) == len(cli) and page["id"].tolist() == cli["id"].tolist()
    assert page["usd_per_unit"].round(12).tolist() == cli["usd_per_unit"].round(12).tolist()
    # a change to the form hides the old result until it is run again
    app.text_input(key="sg_batch").set_value("1, 16").run()
    assert not app.dataframe and any("run it again" in i.value for i in app.info)


def test_the_grid_tables_are_formatted_and_say_idle_gpus_in_the_pages_words(app):
    _define(app)
    app.multiselect(key="sg_devices").set_value(["h100-sxm"]).run()
    app.text_input(key="sg_gpus").set_value("4").run()
    app.text_input(key="sg_tp").set_value("4").run()
    app.text_input(key="sg_batch").set_value("8").run()
    app.button(key="sg_run").click().run()
    assert not app.exception and not app.error
    frame = app.dataframe[0].value
    assert "latency (s)" in frame.columns and "$ per 1M output tokens" in frame.columns
    assert "the other 4 GPUs of the instance sit idle but are paid for" in frame["price note"].iloc[0]
    shown = pa.ipc.open_stream(app.dataframe[0].proto.arrow_data.styler.display_values).read_pandas()
    for column in ("$ per 1M output tokens", "latency (s)", "throughput (output tokens/s)"):
        text = shown[column].iloc[0]  # as the browser shows it: three significant digits, no exponent
        assert "e" not in text and len(text.replace(",", "").replace(".", "").lstrip("0")) >= 3, text
    assert any("scroll the table sideways" in c.value for c in app.caption)


@pytest.mark.parametrize("key, value, words", [
    ("sg_batch", "1, x", "Batch sizes: 'x' is not a whole number from 1 to 4,096"),
    ("sg_gpus", "1, 1", "GPU counts: 1 is listed twice"),
    ("sg_tp", "", "TP sizes: give at least one whole number"),
    ("sg_models", [], "Models: pick at least one"),
    ("sg_input_len", "0", "Input tokens: '0' is not a whole number from 1 to 131,072"),
])
def test_a_bad_grid_is_one_line_naming_the_field(app, key, value, words):
    _define(app)
    widget = app.multiselect(key=key) if isinstance(value, list) else app.text_input(key=key)
    widget.set_value(value).run()
    assert not app.exception
    [error] = [e.value for e in app.error]
    assert error.startswith(words) and "\n" not in error and "Traceback" not in error
    assert not any(b.key == "sg_run" for b in app.button)  # nothing to run


def test_a_grid_over_the_cap_is_counted_and_not_run(app):
    _define(app)
    app.text_input(key="sg_batch").set_value("1, 2, 4, 8, 16, 32, 64, 128, 256, 512").run()
    app.multiselect(key="sg_dtypes").set_value(["bf16", "fp16", "fp8"]).run()
    assert not app.exception and not app.error
    [count] = [c.value for c in app.caption if " before the constraints" in c.value]
    assert int(count.split()[0].replace(",", "")) > MAX_FORM_POINTS and "over the" in count
    assert app.button(key="sg_run").disabled and any("at most" in w.value for w in app.warning)


def test_a_library_error_on_the_grid_names_the_form_field():
    from planner.app.sweep import checked_grid
    from planner.errors import ConfigError
    grid = form_grid(dict(FORM_DEFAULTS))
    grid["axes"]["device"] = ["h100-sxm", "no-such-gpu"]
    with pytest.raises(ConfigError, match=r"^Devices \(axis device\): unknown device 'no-such-gpu'"):
        checked_grid(grid)
