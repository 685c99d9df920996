"""The app's server log stays clean (issue 43): `streamlit run app.py` as `make demo` starts it, with the
repository's .streamlit/config.toml, serves the page and runs the app for one browser session; its log then
holds no traceback and no "Inotify queue overflowed" (the default file watcher walked the virtual
environment under the repository and choked on torch's modules: 85k lines in 45 minutes)."""

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN_S = 15
"""How long the server runs before its log is read."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode("utf-8", "replace")


def _session(port: int) -> list[str]:
    """Open one browser session over the app's websocket and run the script once, as a browser does; the
    kinds of element it drew. Streamlit runs the script (and starts any file watcher) only for a session."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    websockets = pytest.importorskip("websockets.sync.client")

    drawn = []
    with websockets.connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"],
                            max_size=None, open_timeout=30) as ws:
        msg = BackMsg()
        msg.rerun_script.query_string = ""
        ws.send(msg.SerializeToString())
        deadline = time.time() + 120
        while time.time() < deadline:
            forward = ForwardMsg()
            forward.ParseFromString(ws.recv(timeout=120))
            if forward.WhichOneof("type") == "delta" and forward.delta.WhichOneof("type") == "new_element":
                drawn.append(forward.delta.new_element.WhichOneof("type"))
            if forward.WhichOneof("type") == "script_finished":
                return drawn
    raise AssertionError("the app's script did not finish in 120 s")


def test_the_server_log_holds_no_traceback_and_no_inotify_overflow(tmp_path):
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                                 "--server.port", str(port), "--server.address", "127.0.0.1"],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            start, url = time.time(), f"http://127.0.0.1:{port}"
            while True:
                try:
                    assert _get(f"{url}/_stcore/health") == (200, "ok")
                    break
                except OSError:
                    assert proc.poll() is None and time.time() - start < 120, log.read_text()
                    time.sleep(0.5)
            status, html = _get(f"{url}/")
            assert status == 200 and "<html" in html.lower()
            drawn = _session(port)
            assert "exception" not in drawn and "heading" in drawn, drawn  # the Start page, no traceback shown
            time.sleep(max(0.0, RUN_S - (time.time() - start)))
            assert _get(f"{url}/_stcore/health") == (200, "ok")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]
    assert "Inotify" not in text and "inotify" not in text.lower(), text[-3000:]
    assert "You can now view your Streamlit app" in text  # the log read is the server's
