"""The Streamlit app through streamlit.testing: a fresh app per test, on the Workload page."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture
def app():
    at = AppTest.from_file(APP, default_timeout=300)
    at.run()
    assert not at.exception, at.exception
    at.sidebar.radio(key="page").set_value("Workload").run()
    assert not at.exception, at.exception
    return at


def metrics(at) -> dict[str, str]:
    """Metric label -> shown value."""
    return {m.label: m.value for m in at.metric}


def chart_specs(at) -> list[str]:
    """The Vega-Lite JSON of every chart on the page (AppTest has no chart element class of its own)."""
    return [el.proto.spec for el in at.get("vega_lite_chart")]


def table(at, with_column: str):
    """The first shown table (pandas, unstyled) holding a column named `with_column`."""
    for el in at.dataframe:
        value = el.value
        frame = getattr(value, "data", value)  # a Styler shows its frame
        if with_column in frame.columns:
            return frame
    raise AssertionError(f"no table with a column {with_column!r}")
