"""Benchmark (issue 7): how long each app interaction takes once warm, through streamlit.testing.

Warm-up: one full run of every page. Then times: a page switch, a new batch size on the Workload
page (new graphs captured and predicted on six devices), a utilization change on Cost, and a re-run
of the Plan page on a solved scenario. Prints its result; --out PATH writes it as JSON, --save to
benchmarks/results/app_speed.json.

Run: .venv/bin/python benchmarks/app_speed.py
"""

import argparse
import datetime
import time
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    output.add_arguments(parser)
    args = parser.parse_args()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.run()
    for page in ("Cost", "Plan", "Calibration and accuracy", "Workload"):
        at.sidebar.radio(key="page").set_value(page).run()
    results = {
        "switch to Cost": timed(lambda: at.sidebar.radio(key="page").set_value("Cost").run()),
        "Cost: utilization 0.5": timed(lambda: at.slider(key="cost_utilization").set_value(0.5).run()),
        "switch to Workload": timed(lambda: at.sidebar.radio(key="page").set_value("Workload").run()),
        "Workload: batch 16 (new)": timed(lambda: at.number_input(key="batch").set_value(16).run()),
        "Workload: batch 8 (seen)": timed(lambda: at.number_input(key="batch").set_value(8).run()),
        "Workload: detail device h100-sxm": timed(lambda: at.selectbox(key="detail_device").set_value("h100-sxm").run()),
    }
    at.sidebar.radio(key="page").set_value("Plan").run()
    # not an interaction on warm data: capacities of a new scenario are predicted, then ~12 MILPs solved
    results["Plan: first solve of mixed.yaml"] = timed(lambda: at.button(key="plan_solve").click().run())
    results["Plan: re-run solved scenario"] = timed(lambda: at.button(key="plan_solve").click().run())
    output.write(args, "app_speed", {"seconds": results, "date": datetime.date.today().isoformat()})
    for name, seconds in results.items():
        print(f"{name:<38} {seconds:6.2f} s")


if __name__ == "__main__":
    main()
