"""The app's Workload page (planner/app/workload.py) through streamlit.testing."""

import json

from planner.predict import Request
from planner.predict.search import smallest_fit
from tests.app.conftest import chart_specs, metrics, table


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


def test_every_number_column_names_its_unit(app):
    frame = table(app, "device")
    text = {"device", "fits", "deployment", "tier", "note", "price date"}
    for column in set(frame.columns) - text:  # every number names its unit
        assert "(" in column or column.startswith(("$", "J per")), column
    assert any("range" in c for c in frame.columns)  # the band as low-high, not a +-40% label
    low, high = frame.loc[0, "latency range (ms)"].split("\u2013")
    assert float(low.replace(",", "")) < frame.loc[0, "latency (ms)"] < float(high.replace(",", ""))


def test_charts_carry_ceilings_capacity_and_error_bars(app):
    specs = chart_specs(app)
    assert any("errorbar" in s for s in specs)                         # device chart: the band as whiskers
    assert any("capacity" in s and '"rule"' in s for s in specs)       # memory chart: the capacity line
    assert any("ceiling" in s and "strokeDash" in s for s in specs)     # roofline: its ceilings


def test_a_deployment_that_does_not_fit_shows_its_shortfall_and_the_smallest_that_fits(app):
    app.selectbox(key="model").set_value("llama-3.1-70b").run()
    app.radio(key="wl_deploy").set_value("Set GPUs and layout").run()
    app.number_input(key="wl_gpus").set_value(1).run()
    app.multiselect(key="devices").set_value(["h100-sxm"]).run()
    assert not app.exception and not app.error
    assert not any(m.label in ("TTFT", "TPOT", "throughput") for m in app.metric)  # no headline numbers
    [warning] = [w.value for w in app.warning]
    found = smallest_fit(Request("llama-3.1-70b", "h100-sxm", batch=8, input_len=1024, output_len=256))
    assert "Does not fit" in warning and f"{found.request.gpus} GPUs: tp {found.request.tp}" in warning
    row = table(app, "note").iloc[0]
    assert not row["fits"] and "GB per GPU over capacity" in row["note"]
    assert row["latency (ms)"] is None  # no time shown for it (null: the Styler shows it blank)


def test_the_train_preset_opens_workload_with_64_gpus_on_megatron(app):
    app.sidebar.radio(key="page").set_value("Start").run()
    app.button(key="start_train").click().run()
    assert not app.exception and app.sidebar.radio(key="page").value == "Workload"
    shown = metrics(app)
    assert shown["step time"].endswith("s") and shown["MFU"].endswith("%")
    row = table(app, "deployment").iloc[0]
    assert row["deployment"].startswith("64 GPUs")


def test_training_70b_finds_a_layout_that_fits(app):
    app.selectbox(key="model").set_value("llama-3.1-70b").run()
    app.radio(key="mode").set_value("training").run()
    app.selectbox(key="wl_recompute").set_value("full").run()
    app.multiselect(key="devices").set_value(["h100-sxm"]).run()
    assert not app.exception and not app.error
    row = table(app, "deployment").iloc[0]
    assert row["fits"] and "MFU" in metrics(app)
    work = json.dumps({"seq_len": 2048, "micro_batch": 1, "zero": 1, "recompute": "full",
                       "mixed_precision": "auto", "dtype": "bf16"})
    found = smallest_fit(Request("llama-3.1-70b", "h100-sxm", "training", **json.loads(work)))
    assert row["deployment"].startswith(f"{found.request.gpus} GPUs: tp {found.request.tp} \u00d7 pp {found.request.pp}")
