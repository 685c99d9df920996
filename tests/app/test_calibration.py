"""The app's Calibration page (planner/app/calibration.py) through streamlit.testing."""

import json
from pathlib import Path

from tests.app.conftest import table

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_calibration_page_lists_profiles_and_validation(app):
    app.sidebar.radio(key="page").set_value("Calibration and accuracy").run()
    assert not app.exception and not app.error
    profiles = table(app, "profile")
    assert {"cpu-amd-epyc-25-17-2c", "h100-sxm", "mi300x"} <= set(profiles["device"])
    assert set(profiles["tier"]) == {"measured", "published"}
    # the accuracy table is the committed dev_validation run, row for row
    report = json.loads((RESULTS / "dev_validation.json").read_text())
    by_category = table(app, "category")
    assert by_category["rows"].sum() == report["expressed"]
    shown = table(app, "predicted (ms)")
    assert len(shown) == sum(len(json.loads(f.read_text())["cases"]) for f in RESULTS.glob("validate_*.json"))
    for column in shown.columns:
        if shown[column].dtype.kind == "f":
            assert "(" in column, column  # every number names its unit


def test_calibration_page_shows_the_band_of_each_tier_and_family(app):
    """Issue 43 item 5: the bands the app shows come from the measured error of each tier on each family."""
    import math

    from planner.predict.context import default_context

    app.sidebar.radio(key="page").set_value("Calibration and accuracy").run()
    bands = table(app, "device family")
    shipped = default_context().bands
    assert len(bands) == len(shipped.groups)
    amd = bands[(bands["tier"] == "datasheet") & (bands["device family"] == "amd cdna3")].iloc[0]
    group = next(g for g in shipped.groups if g.tier == "datasheet" and g.family == "amd cdna3")
    assert amd["p90 error (x)"] == round(math.exp(group.p90_abs_ln), 2)
    assert amd["band (either way)"] == f"×{math.exp(group.p90_abs_ln):.2f} either way"
