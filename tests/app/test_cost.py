"""The app's Cost page (planner/app/cost.py) through streamlit.testing."""

from tests.app.conftest import metrics


def test_cost_page_break_even_moves_with_utilization(app):
    app.sidebar.radio(key="page").set_value("Cost").run()
    before = metrics(app)["Break-even"]
    app.slider(key="cost_utilization").set_value(0.3).run()
    after = metrics(app)["Break-even"]
    assert not app.exception and before != after
    assert "price of" in " ".join(c.value for c in app.caption)
