"""The app's Trace page (planner/app/trace.py) through streamlit.testing."""

from tests.app.conftest import metrics


def test_trace_page_reads_a_bundled_h100_trace(app):
    app.sidebar.radio(key="page").set_value("Trace").run()
    app.selectbox(key="trace_bundled").set_value("h100_resnet50_train_b32_amp_bf16.json.gz").run()
    assert not app.exception and not app.error
    shown = metrics(app)
    assert shown["wall time"] == "35.0 ms"
    # the device and tier in a line of their own (a metric card cut them to "h100-…")
    assert any("**Roofline of** h100-sxm, **tier** measured" in m.value for m in app.markdown)
    tables = {tuple(d.value.columns): d.value for d in app.dataframe}
    breakdown = tables[("part", "time (ms)", "share of wall (%)")]
    assert abs(breakdown["share of wall (%)"].sum() - 100) < 0.1
    ops = next(t for cols, t in tables.items() if "flagged (ratio > 2)" in cols)
    assert {"measured (ms)", "attainable (ms)", "achieved (TFLOP/s)"} <= set(ops.columns) and len(ops) == 20
    whatif = next(t for cols, t in tables.items() if "predicted wall (ms)" in cols)
    assert list(whatif["device"]) == ["h200-sxm", "b200", "mi300x"]
    # a host that never makes the device wait: every device predicts a shorter step than measured
    app.slider(key="trace_host_scale").set_value(0.0).run()
    whatif = next(d.value for d in app.dataframe if "speedup (x)" in d.value.columns)
    assert not app.exception and (whatif["speedup (x)"] > 1).all()


def test_trace_page_bad_or_oversized_upload_is_a_message(app):
    app.sidebar.radio(key="page").set_value("Trace").run()
    app.radio(key="trace_source").set_value("Upload").run()
    assert not app.exception and app.info
    app.file_uploader(key="trace_upload").set_value(("bad.json", b"{not json", "application/json")).run()
    assert not app.exception
    [box] = [e.value for e in app.error]
    assert box.startswith("trace 'bad.json': not valid JSON")
    app.file_uploader(key="trace_upload").set_value(("big.json.gz", b"\0" * (50 * 2**20 + 1), "application/gzip")).run()
    assert not app.exception
    [box] = [e.value for e in app.error]
    assert "big.json.gz is 52,428,801 bytes; the limit is 52,428,800 bytes" in box
