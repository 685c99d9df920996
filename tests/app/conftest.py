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
