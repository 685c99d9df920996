"""Benchmark (issues 7 and 18): how long the app takes to show results, through streamlit.testing.

A warm server: one session has opened every page, so the library, the catalog, the profiles and the
models are loaded (st.cache_resource) and the predictor's graphs are captured. Then, for each page:
- first results: the page opened in a new session with every page cache cleared (st.cache_data), so
  its predictions, simulations and solves are made again: target under 5 s;
- a page switch once its results are cached: target under 0.5 s;
- for reference, a cold server: the page opened first thing in a fresh process (imports, catalog and
  profiles loaded, graphs captured);
and a few interactions (a new batch size, a utilization change, a re-run of a solved plan).

The Plan page's first results need its Solve button: that time (capacities predicted, then a dozen
MILPs) is reported apart, as the solve of a new scenario.

Prints its result; --out PATH writes it as JSON, --save to benchmarks/results/app_speed.json.
Run: .venv/bin/python benchmarks/app_speed.py
"""

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save
import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("Start", "Workload", "Serving", "Cost", "Plan", "Your hardware", "Sweep", "Trace", "Calibration and accuracy")
FIRST_TARGET_S = 5.0
SWITCH_TARGET_S = 0.5


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def session() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900)
    at.run()
    return at


COLD = """
import time
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({app!r}, default_timeout=900)
start = time.perf_counter()
at.run()
at.sidebar.radio(key="page").set_value({page!r}).run()
print("SECONDS", time.perf_counter() - start, bool(at.exception))
"""


def cold_s(page: str) -> float:
    """Seconds from a fresh process's first run of the app to `page`'s results (imports included)."""
    out = subprocess.run([sys.executable, "-c", COLD.format(app=str(ROOT / "app.py"), page=page)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    line = next((l for l in out.stdout.splitlines() if l.startswith("SECONDS")), None)
    if line is None or line.endswith("True"):
        raise SystemExit(f"{page} in a fresh process failed: {out.stdout[-300:]} {out.stderr[-500:]}")
    return float(line.split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    output.add_arguments(parser)
    args = parser.parse_args()
    warm = session()
    for page in PAGES:
        warm.sidebar.radio(key="page").set_value(page).run()
    cold = {page: cold_s(page) for page in PAGES}
    first, switch = {}, {}
    for page in PAGES:
        st.cache_data.clear()
        at = session()
        first[page] = timed(lambda: at.sidebar.radio(key="page").set_value(page).run())
        if at.exception:
            raise SystemExit(f"{page}: {at.exception}")
        at.sidebar.radio(key="page").set_value("Start").run()
        switch[page] = timed(lambda: at.sidebar.radio(key="page").set_value(page).run())
    at = session()
    at.sidebar.radio(key="page").set_value("Workload").run()
    actions = {
        "Workload: batch 16 (new)": timed(lambda: at.number_input(key="batch").set_value(16).run()),
        "Workload: batch 8 (seen)": timed(lambda: at.number_input(key="batch").set_value(8).run()),
        "Workload: detail device h200-sxm": timed(lambda: at.selectbox(key="detail_device").set_value("h200-sxm").run()),
    }
    at.sidebar.radio(key="page").set_value("Cost").run()
    actions["Cost: utilization 0.5"] = timed(lambda: at.slider(key="cost_utilization").set_value(0.5).run())
    at.sidebar.radio(key="page").set_value("Plan").run()
    at.radio(key="plan_mode").set_value("Scenario YAML (advanced)").run()  # the form is the page's first way in
    st.cache_data.clear()
    actions["Plan: solve of a new scenario (mixed.yaml)"] = timed(lambda: at.button(key="plan_solve").click().run())
    actions["Plan: re-run of the solved scenario"] = timed(lambda: at.button(key="plan_solve").click().run())
    result = {"first_results_s": first, "page_switch_s": switch, "cold_process_s": cold, "actions_s": actions,
              "targets_s": {"first_results": FIRST_TARGET_S, "page_switch": SWITCH_TARGET_S},
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "date": datetime.date.today().isoformat()}
    output.write(args, "app_speed", result)
    print(f"{'page':<26} {'first results':>14} {'switch':>8} {'cold process':>13}")
    for page in PAGES:
        print(f"{page:<26} {first[page]:>12.2f} s {switch[page]:>6.2f} s {cold[page]:>11.2f} s")
    for name, seconds in actions.items():
        print(f"{name:<44} {seconds:6.2f} s")
    ok = all(s < FIRST_TARGET_S for s in first.values()) and all(s < SWITCH_TARGET_S for s in switch.values())
    print(f"targets (first results < {FIRST_TARGET_S:g} s, switches < {SWITCH_TARGET_S:g} s):",
          "met" if ok else "MISSED")


if __name__ == "__main__":
    main()
