"""The app's Workload page (planner/app/workload.py) through streamlit.testing."""

import json

from streamlit.testing.v1 import AppTest

from planner.predict import Request
from planner.predict.api import predict
from planner.predict.search import smallest_fit
from tests.app.conftest import APP, chart_specs, metrics, table


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


def test_the_train_preset_shows_step_time_and_the_training_runs_cost_with_its_band_and_energy(app):
    from planner.app.workload import DEFAULTS
    app.sidebar.radio(key="page").set_value("Start").run()
    app.button(key="start_train").click().run()
    assert not app.exception and not app.error
    frame = table(app, "deployment")
    assert "step time (ms)" in frame.columns and "step time range (ms)" in frame.columns
    assert not any(c.startswith("latency") for c in frame.columns)  # a step is not a request's latency
    assert {"time to train (h)", "run cost ($)", "run cost range ($)", "run energy (kWh)"} <= set(frame.columns)
    shown = {m.label: m for m in app.metric}
    assert shown["training run cost"].value.startswith("$") and "–" in shown["training run cost"].proto.delta
    assert shown["training run energy"].value.endswith(("kWh", "MWh")) and "time to train" in shown
    # the run's cost is the library's: steps x step time x $/h of the deployment, for the tokens asked for
    row = frame.iloc[0]
    tokens = DEFAULTS["wl_train_btokens"] * 1e9
    p = predict(Request("llama-3.1-8b", row["device"], "training", gpus=64, seq_len=8192, micro_batch=1, zero=1,
                        recompute="full", engine="megatron", train_tokens=tokens)).as_dict()
    assert abs(row["run cost ($)"] - p["cost_to_train_usd"]) < 1e-6 * p["cost_to_train_usd"]
    assert abs(row["time to train (h)"] - p["time_to_train_s"] / 3600) < 1e-6 * row["time to train (h)"]
    low, high = (float(v.replace(",", "")) for v in row["run cost range ($)"].split("\u2013"))
    assert low < row["run cost ($)"] < high
    # no run total without its tokens
    app.number_input(key="wl_train_btokens").set_value(0.0).run()
    assert not app.exception and "training run cost" not in metrics(app)
    assert "run cost ($)" not in table(app, "deployment").columns


def test_training_a_model_without_sequences_counts_samples_per_million(app):
    # resnet50 trains on images: its throughput is samples/s and its cost per 1M of them (summary_row's $/h over
    # units per hour x 1e6), not per 1k as the header once said
    app.selectbox(key="model").set_value("resnet50").run()
    app.radio(key="mode").set_value("training").run()
    app.multiselect(key="devices").set_value(["h100-sxm"]).run()
    assert not app.exception and not app.error
    frame = table(app, "deployment")
    assert "throughput (samples/s)" in frame.columns and "$ per 1M samples" in frame.columns


def test_the_price_per_million_tokens_says_what_it_assumes_and_points_to_the_serving_page(app):
    said = [c.value for c in app.caption if c.value.startswith("$ per 1M output tokens here")]
    assert len(said) == 1 and "fixed batch of 8 requests" in said[0] and "every slot busy" in said[0]
    assert "prefill and decode" in said[0] and "Serving page" in said[0]
    [metric] = [m for m in app.metric if m.label == "$ per 1M output tokens"]
    assert metric.value.startswith("$") and "Serving page" in metric.proto.help


def test_the_inputs_go_into_the_link_and_a_link_restores_them(app):
    app.selectbox(key="model").set_value("mistral-7b").run()
    app.number_input(key="batch").set_value(32).run()
    app.multiselect(key="devices").set_value(["h100-sxm", "l4"]).run()
    link = dict(app.query_params)
    assert link["page"] == "Workload" and link["model"] == "mistral-7b" and link["batch"] == "32"
    assert link["devices"] == "h100-sxm,l4" and "gpus" not in link  # the smallest that fits: no layout
    opened = AppTest.from_file(APP, default_timeout=300)
    opened.query_params.update(link)
    opened.run()
    assert not opened.exception and not opened.warning
    assert opened.sidebar.radio(key="page").value == "Workload"
    assert opened.selectbox(key="model").value == "mistral-7b" and opened.number_input(key="batch").value == 32
    assert opened.multiselect(key="devices").value == ["h100-sxm", "l4"]
    assert table(opened, "device")["device"].tolist() == ["h100-sxm", "l4"]


def test_a_link_with_bad_values_ignores_them_with_one_warning():
    opened = AppTest.from_file(APP, default_timeout=300)
    opened.query_params.update({"page": "Workload", "batch": "lots", "devices": "h100-sxm,nope", "mode": "training",
                                "gpus": "-3", "deploy": "set", "tp": "2"})
    opened.run()
    assert not opened.exception and not opened.error
    [warning] = [w.value for w in opened.warning if w.value.startswith("Ignored from the link")]
    assert "batch=lots" in warning and "devices=h100-sxm,nope" in warning and "gpus=-3" in warning
    assert "\n" not in warning
    assert opened.radio(key="mode").value == "training" and opened.number_input(key="wl_tp").value == 2
    assert opened.number_input(key="wl_gpus").value == 8  # the first value kept


def test_a_half_used_instance_is_said_to_pay_for_its_idle_gpus(app):
    app.radio(key="wl_deploy").set_value("Set GPUs and layout").run()
    app.number_input(key="wl_gpus").set_value(4).run()
    app.number_input(key="wl_tp").set_value(4).run()
    app.multiselect(key="devices").set_value(["h100-sxm"]).run()
    assert not app.exception and not app.error
    note = table(app, "note").iloc[0]["note"]
    assert "the other 4 GPUs of the instance sit idle but are paid for" in note
    assert "--dp" not in note and "planner compare" not in note
    said = "\n".join(m.value for m in app.markdown)
    assert "the other 4 GPUs of the instance sit idle but are paid for" in said and "(--" not in said
