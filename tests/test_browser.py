"""End to end: the real Streamlit server driven by headless Chromium (Debian's, through Playwright).
Opens each page, changes an input, sees a value change, and saves a screenshot of each page to
$SCREENSHOT_DIR (default tests/screenshots)."""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is installed by .ci/run")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is installed by .ci/run")
SHOTS = Path(os.environ.get("SCREENSHOT_DIR", ROOT / "tests" / "screenshots"))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200:
                break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the streamlit server did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def _wait_idle(page, timeout=180_000):
    page.wait_for_timeout(500)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)
    page.wait_for_timeout(300)


def _metric(page, label):
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def test_every_page_in_a_real_browser(server):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1800})
        page.goto(server, timeout=120_000)
        page.get_by_text("TTFT").first.wait_for(timeout=240_000)
        _wait_idle(page)
        before = _metric(page, "TTFT")
        field = page.get_by_role("spinbutton", name="Batch", exact=True)
        field.fill("32")
        field.press("Enter")
        _wait_idle(page)
        page.wait_for_function(f"() => !document.body.innerText.includes('{before}') || true")
        assert _metric(page, "TTFT") != before
        page.screenshot(path=str(SHOTS / "workload.png"), full_page=True)

        page.get_by_text("Cost", exact=True).click()
        page.get_by_text("Break-even").first.wait_for(timeout=60_000)
        _wait_idle(page)
        assert "$" in _metric(page, "Cloud $/h")
        page.screenshot(path=str(SHOTS / "cost.png"), full_page=True)

        page.get_by_text("Plan", exact=True).click()
        page.get_by_role("button", name="Solve").click()
        page.get_by_text("$/month").first.wait_for(timeout=600_000)
        _wait_idle(page, 600_000)
        assert _metric(page, "$/month").startswith("$")
        assert page.get_by_text("this plan saves").count() >= 1
        page.screenshot(path=str(SHOTS / "plan.png"), full_page=True)

        page.get_by_text("Trace", exact=True).first.click()
        page.get_by_text("Where the wall time went").wait_for(timeout=120_000)
        _wait_idle(page)
        assert page.get_by_text("h100-sxm").count() >= 1
        page.screenshot(path=str(SHOTS / "trace.png"), full_page=True)

        page.get_by_text("Calibration and accuracy", exact=True).click()
        page.get_by_text("Predicted versus measured").wait_for(timeout=60_000)
        _wait_idle(page)
        assert page.get_by_text("cpu-amd-epyc").count() >= 1
        page.screenshot(path=str(SHOTS / "calibration.png"), full_page=True)
        browser.close()
    for name in ("workload", "cost", "plan", "trace", "calibration"):
        assert (SHOTS / f"{name}.png").stat().st_size > 10_000
