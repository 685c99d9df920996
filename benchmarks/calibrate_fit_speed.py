"""Benchmark (issue 44 item 4): seconds the end of `planner calibrate` takes for N measured points: the
ceilings and one fit of the efficiency model (`fit_s`), and leave-one-out per point judged (`loo_s_per_point`,
planner/calibration/loo.py), with fit_report's whole-profile leave-one-out (`fit_report_s`) beside it up to
--old-up-to points. The points are the first N of the local CPU's plan order taken from the committed CPU
profile (what a run cut by its budget after N points holds: coarse grids of every kind, GEMM grid holes).
calibrate.py sets its reserve for the fit from these figures.

Run: .venv/bin/python benchmarks/calibrate_fit_speed.py [--sizes 100 400 1431] [--old-up-to 200] [--save]
"""

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.calibration.bench import local_device  # noqa: E402
from planner.calibration.calibrate import build_plan, ceilings  # noqa: E402
from planner.calibration.loo import leave_one_out  # noqa: E402
from planner.calibration.resume import read_profile_json  # noqa: E402
from planner.hardware.efficiency import load_defaults  # noqa: E402
from planner.hardware.fit_report import fit_report  # noqa: E402
from planner.hardware.profile import Profile, ProfileModel, profile_device  # noqa: E402

SOURCE = ROOT / "hardware_specs" / "calibration" / "cpu-amd-epyc-25-17-2c" / "profile.json"


def first_points(n: int) -> dict:
    """The committed CPU profile cut to the first `n` of its measurements in the local plan's order."""
    raw = read_profile_json(SOURCE)
    rank = {json.dumps(e, sort_keys=True): i for i, e in enumerate(build_plan(local_device("cpu")))}
    rows = sorted((m for m in raw["measurements"] if m.get("key") in rank), key=lambda m: rank[m["key"]])[:n]
    return {**raw, "measurements": rows, "ceilings": ceilings(rows)}


def fit_seconds(raw: dict) -> float:
    """Seconds of the ceilings and one fit of the model on every point (the fit calibrate makes)."""
    start = time.perf_counter()
    raw = {**raw, "ceilings": ceilings(raw["measurements"])}
    profile = Profile(raw["device_id"], raw["device_name"], raw["kind"], raw["properties"], raw["ceilings"],
                      tuple(raw["measurements"]), raw["date"], "(bench)", raw)
    device = profile_device(profile)
    ProfileModel(load_defaults().kinds[device.kind]).fit(profile, device)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400, 800, 1431])
    parser.add_argument("--loo-points", type=int, default=60, help="points judged per size for the per-point cost")
    parser.add_argument("--old-up-to", type=int, default=200, help="run fit_report only up to this many points")
    output.add_arguments(parser)
    args = parser.parse_args()
    fit_seconds(first_points(50))  # the first fit imports and loads the defaults: not the fit's cost
    rows = []
    for n in args.sizes:
        raw = first_points(n)
        fit_s = min(fit_seconds(raw) for _ in range(3))
        report = leave_one_out(raw, max_points=args.loo_points)
        per_point = report["seconds"] / max(report["n"], 1)
        row = {"points": len(raw["measurements"]), "fit_s": round(fit_s, 3), "loo_points": report["n"],
               "loo_eligible": report["eligible"], "loo_s": report["seconds"], "loo_s_per_point": round(per_point, 4)}
        if n <= args.old_up_to:
            start = time.perf_counter()
            fit_report(raw)
            row["fit_report_s"] = round(time.perf_counter() - start, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"benchmark": "calibrate_fit_speed", "date": datetime.date.today().isoformat(),
              "host": f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs",
              "note": "a shared 2-core VM with other jobs running: seconds are noisy", "rows": rows}
    output.write(args, "calibrate_fit_speed", result)


if __name__ == "__main__":
    main()
