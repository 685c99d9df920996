"""The app's Plan page (planner/app/plan.py) through streamlit.testing."""

from tests.app.conftest import metrics


def test_plan_page_solves_the_mixed_example_and_reports_the_saving(app):
    app.sidebar.radio(key="page").set_value("Plan").run()
    app.button(key="plan_solve").click().run()
    assert not app.exception and not app.error
    assert metrics(app)["$/month"].startswith("$")
    assert any("saves" in s.value for s in app.success)


def test_plan_page_bad_yaml_is_a_message(app):
    app.sidebar.radio(key="page").set_value("Plan").run()
    app.text_area(key="plan_text").set_value("workloads: [{name: a}]\ncandidates: {cloud: {}}\n").run()
    app.button(key="plan_solve").click().run()
    assert not app.exception
    assert any("scenario.workloads[0].model" in e.value for e in app.error)


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
