"""The app's Plan page (planner/app/plan.py) through streamlit.testing."""

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from planner.app.plan import ADVANCED
from tests.app.conftest import APP, metrics

HYBRID = "hybrid on-prem + cloud"


def _plan_page(app):
    """The Plan page on its advanced way in: the scenario YAML (the form has tests/app/test_plan_form.py)."""
    app.sidebar.radio(key="page").set_value("Plan").run()
    assert not app.exception, app.exception
    app.radio(key="plan_mode").set_value(ADVANCED).run()
    assert not app.exception, app.exception
    return app


def _solve(app):
    app.button(key="plan_solve").click().run()
    assert not app.exception and not app.error, (app.exception, [e.value for e in app.error])
    return app


def _heading(app) -> str:
    return " ".join(s.value for s in app.subheader)


def _shown(app) -> dict:
    """The plan the page shows (the result it keeps in session_state)."""
    return app.session_state["plan_result"]["result"]["plan"]


def test_plan_page_solves_the_mixed_example_and_reports_the_saving(app):
    _solve(_plan_page(app))
    assert metrics(app)["$/month"].startswith("$")
    assert any("saves" in s.value for s in app.success)
    assert _heading(app) == "Plan for 'chat + summarization'"


def test_plan_page_bad_yaml_is_a_message_before_solve_and_solve_is_disabled(app):
    _plan_page(app)
    assert any(c.value.startswith("valid: 'chat + summarization': 2 workloads, ") and " candidates" in c.value
               for c in app.caption)
    assert not app.button(key="plan_solve").disabled
    app.text_area(key="plan_text").set_value("workloads: [{name: a}]\ncandidates: {cloud: {}}\n").run()
    assert not app.exception
    [error] = [e.value for e in app.error]  # shown as typed, Solve not pressed
    assert "scenario.workloads[0].model" in error and "\n" not in error
    assert app.button(key="plan_solve").disabled
    app.text_area(key="plan_text").set_value("workloads: [\n").run()  # not YAML at all
    [error] = [e.value for e in app.error]
    assert error.startswith("scenario") and "\n" not in error and app.button(key="plan_solve").disabled


def test_an_unexpected_failure_is_an_error_box_asking_for_a_report(app, monkeypatch):
    # Any exception that is not a PlannerError becomes one box naming it as an internal error, with no
    # stack trace; PLANNER_DEBUG=1 would let it through to Streamlit instead.
    import planner.plan.solve

    def broken(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(planner.plan.solve, "solve", broken)
    _plan_page(app)
    app.text_area(key="plan_text").set_value(app.text_area(key="plan_text").value + "\n# a new cache key\n").run()
    app.button(key="plan_solve").click().run()
    assert not app.exception
    [box] = [e.value for e in app.error]
    assert box.startswith("internal error: ZeroDivisionError: float division by zero") and "report" in box


def test_picking_another_example_replaces_the_scenario_box(app):
    # the keyed text area once kept the first scenario's text after another was picked or uploaded
    _plan_page(app)
    assert "chat + summarization" in app.text_area(key="plan_text").value
    app.selectbox(key="plan_example").set_value("hybrid.yaml").run()
    assert not app.exception and HYBRID in app.text_area(key="plan_text").value
    # an edit survives reruns until the source changes again
    app.text_area(key="plan_text").set_value("name: edited\n").run()
    app.radio(key="plan_source").set_value("Example").run()
    assert app.text_area(key="plan_text").value == "name: edited\n"
    # and leaving the page and coming back (Streamlit drops an undrawn widget's value: the box came back
    # empty, and the picker back on mixed.yaml)
    app.sidebar.radio(key="page").set_value("Workload").run()
    _plan_page(app)
    assert app.selectbox(key="plan_example").value == "hybrid.yaml"
    assert app.text_area(key="plan_text").value == "name: edited\n"


def test_picking_hybrid_then_solve_solves_hybrid(app):
    # what a user does: open Plan (mixed.yaml), pick hybrid.yaml, press Solve
    _plan_page(app)
    app.selectbox(key="plan_example").set_value("hybrid.yaml").run()
    assert any(c.value.startswith(f"valid: '{HYBRID}'") for c in app.caption)
    _solve(app)
    assert _heading(app) == f"Plan for '{HYBRID}'" and _shown(app)["scenario"] == HYBRID


def test_the_start_pages_preset_opens_and_solves_hybrid():
    # planner/app/start.py PRESETS["plan"] sets these before the Plan page first draws
    from planner.app.start import PRESETS
    at = AppTest.from_file(APP, default_timeout=300)
    for key, value in PRESETS["plan"][1].items():
        at.session_state[key] = value
    at.run()
    at.sidebar.radio(key="page").set_value("Plan").run()
    assert at.radio(key="plan_mode").value == ADVANCED
    assert not at.warning  # no "default value and Session State" warning from the picker
    assert at.selectbox(key="plan_example").value == "hybrid.yaml" and HYBRID in at.text_area(key="plan_text").value
    _solve(at)
    assert _heading(at) == f"Plan for '{HYBRID}'"


def test_the_start_button_after_a_visit_to_plan_opens_hybrid(app):
    # Plan visited first (mixed.yaml), then the Start page's "Plan a fleet" button
    _plan_page(app)
    app.sidebar.radio(key="page").set_value("Start").run()
    app.button(key="start_plan").click().run()
    assert not app.exception and app.sidebar.radio(key="page").value == "Plan"
    assert app.radio(key="plan_mode").value == ADVANCED
    assert app.selectbox(key="plan_example").value == "hybrid.yaml" and HYBRID in app.text_area(key="plan_text").value


def test_results_stay_through_every_download_and_rerun_until_the_text_changes(app):
    _solve(_plan_page(app))
    shown = metrics(app)
    assert [b.label for b in app.get("download_button")] == ["Plan as CSV", "Plan as JSON", "Scenario as YAML"]
    for key in ("dl_csv", "dl_json", "dl_yaml"):
        [button] = [b for b in app.get("download_button") if b.key == key]
        button.click().run()
        assert not app.exception and metrics(app) == shown, f"the plan vanished after {key}"
    app.radio(key="plan_source").set_value("Example").run()  # any other rerun
    assert metrics(app) == shown
    app.sidebar.radio(key="page").set_value("Cost").run()  # another page and back
    _plan_page(app)
    assert metrics(app) == shown
    app.text_area(key="plan_text").set_value(app.text_area(key="plan_text").value + "\n# edited\n").run()
    assert "$/month" not in metrics(app) and any(c.value == "Press Solve to run the optimizer." for c in app.caption)


def _chart_data(app) -> list:
    """The DataFrames of the Pareto chart's layers (the front, then the plan's own point)."""
    [chart] = app.get("vega_lite_chart")
    return [pa.ipc.open_stream(d.data.data).read_pandas() for d in chart.proto.datasets]


@pytest.mark.parametrize("example", ["mixed.yaml", "hybrid.yaml"])
def test_the_pareto_chart_holds_no_dominated_point_and_the_plans_own_totals(app, example):
    _plan_page(app)
    app.selectbox(key="plan_example").set_value(example).run()
    _solve(app)
    front, own = _chart_data(app)
    points = list(zip(front["cost_usd"], front["energy_kwh"]))
    assert not [p for p in points if any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in points)]
    totals = _shown(app)["totals"]
    cost, energy = totals["cost_over_horizon_usd"], totals["energy_kwh"]
    assert (own["cost_usd"][0], own["energy_kwh"][0]) == (cost, energy)  # the plan's own point, marked
    if any("is not one of its points" in n for n in _shown(app)["notes"]):
        # the plan runs on a candidate without a sourced TDP: its kWh leave that candidate out, the front's
        # points are solved without it (planner/plan/solve.py pareto), and the note says so on the page
        assert not front["this_plan"].any()
        assert any("is not one of its points" in c.value for c in app.caption)
    else:
        # a cost plan's weight-0 point is the plan itself: the totals, and the marked point
        zero = front[front["energy_weight"] == 0.0].iloc[0]
        assert (zero["cost_usd"], zero["energy_kwh"]) == (cost, energy) and zero["this_plan"]
    # the metrics above the chart show the same numbers
    assert metrics(app)["over the horizon"] == f"${cost:,.0f}" and metrics(app)["energy"] == f"{energy:,.0f} kWh"


UNITLESS = {"candidate", "kind", "device", "server", "workload", "job", "trains", "mix", "plan", "cloud instance",
            "price date", "capex date", "cloud price date", "units", "GPUs", "tier"}
"""Headers that name a thing, a date, or a count (of units, of GPUs): the only ones without a unit."""


def test_every_table_has_units_in_its_headers_and_shows_everything_planner_plan_prints(app):
    _plan_page(app)
    app.selectbox(key="plan_example").set_value("hybrid.yaml").run()
    _solve(app)
    headers = [list(df.value.columns) for df in app.dataframe]
    for columns in headers:
        for name in columns:
            assert name in UNITLESS or "(" in name or "$" in name, name
    flat = {name for columns in headers for name in columns}
    assert {"$/month", "capex ($)", "power (kW)", "utilization (%)", "serves (req/s)", "share (%)", "rate (req/s)",
            "tensor parallel (GPUs)", "batch (requests)", "prices (% of catalog)", "energy (kWh)",
            "renting cheaper below (% utilization)", "buying pays off after (months)"} <= flat
    m = metrics(app)
    assert m["carbon"].endswith(" kg CO2e") and m["energy"].endswith(" kWh") and m["on-prem power"].endswith(" kW")
    rows = app.dataframe[0].value
    assert rows["price date"].str.contains("stale").any()  # dated(): a price over 12 months old says so
    captions = " ".join(c.value for c in app.caption)
    assert "Independent check passed" in captions and "h100-sxm: buying pays off after" in captions
    assert "Note: carbon excludes" in captions


def _results_page(result):
    from planner.app.plan import _results
    _results(result, "name: x\n")


def test_a_break_even_that_never_comes_is_said_as_such(app):
    # planner.plan.tco: None months = buying never pays off; None utilization = renting cheaper at any
    _plan_page(app)
    app.selectbox(key="plan_example").set_value("hybrid.yaml").run()
    _solve(app)
    result = app.session_state["plan_result"]["result"]
    plan = result["plan"]
    never = [{**b, "breakeven_months": None, "breakeven_utilization": None, "breakeven_why": None}
             for b in plan["breakeven"]]
    at = AppTest.from_function(_results_page, args=({**result, "plan": {**plan, "breakeven": never}},),
                               default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    [table] = [df.value for df in at.dataframe if "buying pays off after (months)" in df.value.columns]
    assert table["buying pays off after (months)"].tolist() == ["never"] * len(never)
    assert table["renting cheaper below (% utilization)"].tolist() == ["at any utilization"] * len(never)
    assert any("renting is cheaper at any utilization" in c.value for c in at.caption)


def test_every_control_has_help(app):
    _solve(_plan_page(app))
    controls = [*app.radio, *app.selectbox, *app.text_area, *app.button, *app.get("download_button")]
    main = [c for c in controls if c.key != "page"]  # the sidebar's page list is the frame's, not this page's
    assert len(main) >= 7 and all(c.help for c in main), [c.key for c in main if not c.help]
    app.radio(key="plan_source").set_value("Upload YAML").run()
    [uploader] = app.get("file_uploader")
    assert uploader.help
