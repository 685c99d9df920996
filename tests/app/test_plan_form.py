"""The Plan page's fleet-sizing form (planner/app/plan.py _form) through streamlit.testing: filled in, solved,
exported as YAML."""

import pandas as pd
import pytest
import streamlit as st
import yaml

from planner.app.plan import FORM, form_message, form_scenario
from planner.errors import ConfigError
from planner.plan.scenario import NO_TARGET_S, loads, parse
from tests.app.conftest import metrics, table


@pytest.fixture
def exported(monkeypatch):
    """{download button key: the data it offers}: st.download_button recorded as the page calls it (AppTest
    does not hand back a download's bytes)."""
    seen = {}
    original = st.download_button

    def recording(label, data, *args, **kwargs):
        seen[kwargs.get("key")] = data
        return original(label, data, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", recording)
    return seen


def _fill(app, *, ttft_ms=1000.0, tpot_ms=100.0):
    """The form as the issue's user fills it: llama-3.1-8b, 2 requests/s, one length bucket of 512 in and 128 out
    (share 1), p90 TTFT 1 s and TPOT 0.1 s, h100-sxm on demand; then Solve."""
    app.sidebar.radio(key="page").set_value("Plan").run()
    assert not app.exception, app.exception
    assert app.radio(key="plan_mode").value == FORM  # the form is the first way in
    assert list(app.data_editor(key="pf_mix").value.columns) == ["input_len", "output_len", "share"]
    # the length table as edited in the browser: its second row deleted, the first's share set to 1
    app.session_state["pf_mix"] = {"edited_rows": {0: {"input_len": 512, "output_len": 128, "share": 1.0}},
                                   "added_rows": [], "deleted_rows": [1]}
    app.selectbox(key="pf_model").set_value("llama-3.1-8b")
    app.number_input(key="pf_demand").set_value(2.0)
    app.number_input(key="pf_ttft_ms").set_value(ttft_ms)
    app.number_input(key="pf_tpot_ms").set_value(tpot_ms)
    app.multiselect(key="pf_devices").set_value(["h100-sxm"])
    app.multiselect(key="pf_providers").set_value([])
    app.multiselect(key="pf_pricing").set_value(["on_demand"])
    app.button(key="plan_form_solve").click().run()
    assert not app.exception, app.exception
    return app


def test_the_form_solves_a_fleet_and_exports_the_scenario_it_solved(app, exported):
    _fill(app)
    assert not app.error, [e.value for e in app.error]
    built = app.session_state["plan_form_built"]["scenario"]
    [workload] = built["workloads"]
    assert workload["model"] == "llama-3.1-8b" and workload["demand_rps"] == 2.0
    assert workload["buckets"] == [{"input_len": 512, "output_len": 128, "share": 1}]
    assert workload["slo"] == {"ttft_p90_s": 1.0, "tpot_p90_s": 0.1}
    assert built["candidates"]["cloud"]["pricing"] == ["on_demand"]
    # the plan: at least one unit, on h100-sxm instances only, and the independent check passed
    rows = table(app, "units")
    assert rows["units"].sum() >= 1 and set(rows["device"]) == {"h100-sxm"}
    assert any(c.value.startswith("Independent check passed") for c in app.caption)
    plan = app.session_state["plan_form_result"]["result"]["plan"]
    total = plan["totals"]["cost_over_horizon_usd"]
    assert total > 0 and any(m.value.startswith(f"**Total cost over the 12-month term: ${total:,.0f}**")
                             for m in app.markdown)
    assert metrics(app)["$/month"] == f"${plan['totals']['usd_per_month']:,.0f}"
    # the export: one YAML download (the results' own is left out), which parses back to the same scenario
    assert [b.key for b in app.get("download_button")] == ["plan_form_yaml", "dl_csv", "dl_json"]
    text = exported["plan_form_yaml"]
    assert yaml.safe_load(text) == built
    again = loads(text, "scenario.yaml", allow_model_files=False)
    assert again == parse(built, "scenario.yaml", allow_model_files=False)
    assert again.workloads[0].ttft_s == 1.0 and again.workloads[0].tpot_s == 0.1
    assert again.workloads[0].ttft_stat == "p90" and again.workloads[0].tpot_stat == "p90"
    # the plan stays through another rerun
    app.run()
    assert metrics(app)["$/month"] == f"${plan['totals']['usd_per_month']:,.0f}"


def test_an_empty_tpot_field_is_no_tpot_target(app):
    _fill(app, tpot_ms=None)
    assert not app.error, [e.value for e in app.error]
    built = app.session_state["plan_form_built"]["scenario"]
    assert built["workloads"][0]["slo"] == {"ttft_p90_s": 1.0}  # no TPOT key at all, never a 0
    [workload] = parse(built).workloads
    assert workload.tpot_s == NO_TARGET_S and workload.ttft_s == 1.0 and workload.ttft_stat == "p90"
    assert workload.slo_text == "TTFT 1.0 s (no TPOT target)"
    assert any(c.value.startswith("Independent check passed") for c in app.caption)
    assert table(app, "units")["units"].sum() >= 1


def test_a_bad_form_is_one_line_naming_its_field_and_nothing_is_solved(app):
    _fill(app, ttft_ms=None, tpot_ms=None)
    [box] = [e.value for e in app.error]
    assert box.startswith("SLOs: give a p90 TTFT target") and "\n" not in box
    assert "plan_form_result" not in app.session_state and "$/month" not in metrics(app)


def _values(**changes):
    from planner.app.plan import FORM_FIRST
    return {**FORM_FIRST, **changes}


def test_the_parsers_messages_name_the_forms_fields():
    from planner.app.common import base_context
    catalog = base_context().catalog
    mix = pd.DataFrame([{"input_len": 512, "output_len": 128, "share": 0.5},
                        {"input_len": None, "output_len": None, "share": None},  # a row added and left empty
                        {"input_len": 1024, "output_len": 256, "share": 0.7}])
    scenario, rows = form_scenario(_values(), mix, catalog)
    assert rows == [1, 3]
    with pytest.raises(ConfigError) as bad:
        parse(scenario)
    assert form_message(str(bad.value), rows) == "Length mix: shares add up to 1.2, not 1"
    mix.loc[2, "share"] = 1.5
    with pytest.raises(ConfigError) as bad:
        parse(form_scenario(_values(), mix, catalog)[0])
    assert form_message(str(bad.value), rows) == "Length mix, row 3, share (0-1): 1.5 is out of range; valid: above 0 to 1"
    with pytest.raises(ConfigError, match=r"^Length mix, row 1: share \(0-1\) is empty$"):
        form_scenario(_values(), pd.DataFrame([{"input_len": 512, "output_len": 128, "share": None}]), catalog)
    with pytest.raises(ConfigError, match="^Pricing: pick at least one$"):
        form_scenario(_values(pf_pricing=[]), pd.DataFrame([{"input_len": 1, "output_len": 1, "share": 1}]), catalog)
    with pytest.raises(ConfigError, match="^Devices: none of the chosen devices is offered by the chosen clouds"):
        form_scenario(_values(pf_devices=["mi300x"], pf_providers=["lambda"]),
                      pd.DataFrame([{"input_len": 1, "output_len": 1, "share": 1}]), catalog)


def test_an_assignment_opens_on_the_serving_page_and_meets_its_slos_there(app):
    """Job (a) of issue 43 in AppTest: the plan's fleet, opened on the Serving page with the plan's own
    numbers, meets the p90 targets there (the page runs the simulation the plan's capacity came from)."""
    _fill(app)
    assert not app.error, [e.value for e in app.error]
    app.button(key="plan_handoff_go").click().run()
    assert not app.exception, app.exception
    state = app.session_state
    assert app.sidebar.radio(key="page").value == "Serving"
    assert (state["serve_model"], state["serve_device"], state["serve_input_len"], state["serve_output_len"]) == \
        ("llama-3.1-8b", "h100-sxm", 512, 128)
    assert (state["serve_slo_ttft_ms"], state["serve_slo_tpot_ms"], state["serve_slo_stat"]) == (1000.0, 100.0, "p90")
    from planner.predict.api import Request
    from planner.serve.api import Slo
    from planner.serve.sweep import run_at_rate
    req = Request("llama-3.1-8b", "h100-sxm", gpus=state["serve_gpus"], tp=state["serve_tp"], input_len=512,
                  output_len=128)
    m = run_at_rate(req, state["serve_rate_rps"], slo=Slo(1.0, 0.1, "p90")).metrics
    assert m.ttft_s.p90 <= 1.0 and m.tpot_s.p90 <= 0.1
    # the deployment carries the whole demand of 2 requests/s (one flow on one candidate: simulated whole)
    assert state["serve_rate_rps"] == pytest.approx(2.0, abs=0.01)
