"""The app's Calibration page (planner/app/calibration.py) through streamlit.testing."""

def test_calibration_page_lists_profiles_and_validation(app):
    app.sidebar.radio(key="page").set_value("Calibration and accuracy").run()
    assert not app.exception
    assert any("cpu-amd-epyc" in h.value for h in app.subheader)
    assert len(app.dataframe) >= 1
