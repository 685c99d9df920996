"""Upload limits (issue 43): the server takes the largest upload any page promises (.streamlit/config.toml
maxUploadSize), each uploader tells the browser its own page's limit, and each page checks that limit on
the bytes it receives with a message naming it."""

import tomllib
from pathlib import Path

import planner.app.sweep
from planner.app.common import MAX_UPLOAD_BYTES, UPLOAD_MIB
from planner.app.sweep import MAX_SWEEP_UPLOAD_BYTES
from planner.app.trace import MAX_TRACE_UPLOAD_BYTES

ROOT = Path(__file__).resolve().parents[2]
MIB = 2**20


def _uploader(app, page: str, radio: str, choice: str):
    app.sidebar.radio(key="page").set_value(page).run()
    if radio == "plan_source":
        app.radio(key="plan_mode").set_value("Scenario YAML (advanced)").run()
    app.radio(key=radio).set_value(choice).run()
    assert not app.exception, app.exception
    [uploader] = app.get("file_uploader")
    return uploader


def test_the_server_takes_the_largest_upload_a_page_promises():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    server_mib = config["server"]["maxUploadSize"]  # Streamlit counts it in MiB
    assert server_mib * MIB == max(MAX_SWEEP_UPLOAD_BYTES, MAX_TRACE_UPLOAD_BYTES, MAX_UPLOAD_BYTES) == 200 * MIB
    assert UPLOAD_MIB * MIB >= MAX_UPLOAD_BYTES > (UPLOAD_MIB - 1) * MIB


def test_each_uploader_tells_the_browser_its_pages_own_limit(app):
    shown = {(page, choice): _uploader(app, page, radio, choice).proto.max_upload_size_mb for page, radio, choice in (
        ("Sweep", "sweep_source", "Upload"), ("Trace", "trace_source", "Upload"),
        ("Plan", "plan_source", "Upload YAML"), ("Workload", "model_source", "Upload config.json"))}
    assert shown == {("Sweep", "Upload"): MAX_SWEEP_UPLOAD_BYTES // MIB, ("Trace", "Upload"): MAX_TRACE_UPLOAD_BYTES // MIB,
                     ("Plan", "Upload YAML"): UPLOAD_MIB, ("Workload", "Upload config.json"): UPLOAD_MIB}
    assert shown[("Sweep", "Upload")] == 200 and shown[("Trace", "Upload")] == 50


def test_an_upload_over_a_pages_limit_is_a_message_naming_it(app, monkeypatch):
    # the scenario upload: 1,000,000 bytes at most, checked by the page (the browser's limit is 1 MiB)
    uploader = _uploader(app, "Plan", "plan_source", "Upload YAML")
    uploader.set_value(("big.yaml", b"#" * (MAX_UPLOAD_BYTES + 1), "application/x-yaml")).run()
    assert not app.exception
    limit = f"big.yaml is {MAX_UPLOAD_BYTES + 1:,} bytes; the limit is {MAX_UPLOAD_BYTES:,}"
    assert [e.value for e in app.error] == [limit]
    # the sweep upload (200 MiB; a smaller limit here, not 200 MiB of test data)
    monkeypatch.setattr(planner.app.sweep, "MAX_SWEEP_UPLOAD_BYTES", 1000)
    uploader = _uploader(app, "Sweep", "sweep_source", "Upload")
    uploader.set_value(("big.parquet", b"\0" * 1001, "application/octet-stream")).run()
    assert not app.exception
    assert [e.value for e in app.error] == ["big.parquet is 1,001 bytes; the limit is 1,000"]
