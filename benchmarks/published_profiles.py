"""How well the published profiles (tier published) predict: held-back points, transfers, and planner's own
measurements of a real H100 and H200 (issue 13, items 2 and 6).

1. Held-back: each shipped published profile's `held_out` report (a seeded 20% of its points per op
   kind predicted from the rest; written by `planner calibrate --import aiconfigurator`).
2. Transfer: hardware_specs/calibration/transfer.json (H100 predicted from the H200 profile and back).
3. Measured: benchmarks/data/measured/<device>/profile.json are `planner calibrate` runs on a real H100
   and H200 (2026-11-23, PyTorch 2.11 eager, clocks as found; see benchmarks/data/measured/README.md).
   Each of their bf16, fp16 and fp8 GEMMs and cold copies is predicted from the published profile of
   the same device and compared: error = predicted / measured − 1, on the kernel time (each side's
   fixed per-op cost taken out: eager's measured launch cost, the published profile's 1.5 us).

Run:  .venv/bin/python benchmarks/published_profiles.py [--out PATH | --save]
"""

import argparse
import datetime
import json
import math
import sys
from pathlib import Path

import numpy as np
import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.hardware.efficiency import load_defaults  # noqa: E402
from planner.hardware.profile import (  # noqa: E402
    PROFILE_ROOT,
    ProfileModel,
    _features,
    load_profiles,
    profile_device,
    read_profile,
)

NAME = "published_profiles"
MEASURED = ROOT / "benchmarks" / "data" / "measured"
_ALIAS = {"fp16": "bf16"}


def _stats(values: list[float]) -> dict:
    a = np.abs(np.asarray(values))
    return {"n": len(values), "median_abs_error": round(float(np.median(a)), 4) if len(a) else None,
            "p90_abs_error": round(float(np.percentile(a, 90)), 4) if len(a) else None,
            "median_error": round(float(np.median(values)), 4) if len(a) else None}


def against_measured(device_id: str) -> dict:
    """Errors of the published profile of `device_id` on planner's own measurements of that device."""
    published = load_profiles()[device_id]
    measured = read_profile(MEASURED / device_id / "profile.json")
    device = profile_device(published)
    model = ProfileModel(load_defaults().kinds["gpu"]).fit(published, device)
    eager_launch_s = measured.ceilings.get("launch_overhead_s", 0.0)
    errors: dict[str, list[float]] = {}
    for m in measured.measurements:
        if m["kind"] == "gemm" and m.get("layout", "nt") == "nt" and m["dtype"] in ("bf16", "fp16", "fp8"):
            probe = {**m, "dtype": _ALIAS.get(m["dtype"], m["dtype"])}
            # below ~50 us an eager call is bound by its host dispatch, not by the kernel
            label = f"gemm:{m['dtype']} " + ("(>= 50 us)" if m["time_s"] >= 50e-6 else "(< 50 us)")
        elif m["kind"] == "copy" and not m.get("warm", True):
            probe = {**m, "warm": True}  # the published memory-bound curve is the profile's `copy`
            label = "copy (cold, >= 8x L2)" if m["bytes"] > 8 * (device.llc_bytes or 0) else "copy (cold, < 8x L2)"
        else:
            continue
        key, feats, shape = _features(probe)
        eta = model.predict_eta(key, feats, shape, device)
        if eta is None:
            continue
        peak = device.peak_flop_per_s.get(probe.get("dtype", "bf16")) if m["kind"] == "gemm" else None
        ideal = max(m["flop"] / peak if peak else 0.0, m["bytes"] / device.mem_bytes_per_s)
        measured_core = m["time_s"] - min(eager_launch_s, 0.5 * m["time_s"])
        errors.setdefault(label, []).append(ideal / eta / measured_core - 1)
    every = [e for v in errors.values() for e in v]
    return {"device": device_id, "measured_profile": str((MEASURED / device_id / "profile.json").relative_to(ROOT)),
            "measured_on": measured.date, "eager_launch_overhead_s": eager_launch_s, **_stats(every),
            "by_kind": {k: _stats(v) for k, v in sorted(errors.items())}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    output.add_arguments(parser)
    args = parser.parse_args()
    profiles = load_profiles()
    held = {}
    for device_id in sorted(profiles):
        if profiles.tier_of(device_id) != "published":
            continue
        report = profiles[device_id].raw["held_out"]
        held[device_id] = report
    print("held-back 20% of each published profile (error = predicted / published time - 1)")
    print(f"{'device':<15}{'op kind':<20}{'n':>6}{'median':>9}{'p90':>9}")
    for device_id, report in held.items():
        for kind, st in report["by_kind"].items():
            print(f"{device_id:<15}{kind:<20}{st['n']:>6}{st['median_abs_error']:>9.1%}{st['p90_abs_error']:>9.1%}")
    transfer = json.loads((PROFILE_ROOT / "transfer.json").read_text())
    print("\ntransferred tier: one profiled device predicted from another of its generation")
    for pair in transfer["pairs"]:
        kinds = ", ".join(f"{k} {v['median_abs_error']:.0%}" for k, v in pair["by_kind"].items())
        print(f"  {pair['from']} -> {pair['to']}: median {pair['median_abs_error']:.1%}, p90 "
              f"{pair['p90_abs_error']:.1%}  ({kinds})")
    measured = {}
    print("\npublished profile against planner's own measurements of the same GPU (eager PyTorch, clocks as found)")
    for device_id in sorted(p.name for p in MEASURED.glob("*") if (p / "profile.json").is_file()):
        report = against_measured(device_id)
        measured[device_id] = report
        for kind, st in report["by_kind"].items():
            print(f"  {device_id:<13}{kind:<24}n={st['n']:>4}  median |error| {st['median_abs_error']:.1%}  "
                  f"p90 {st['p90_abs_error']:.1%}  median error {st['median_error']:+.1%}")
    result = {"date": datetime.date.today().isoformat(), "held_out": held, "transfer": transfer,
              "against_measured": measured}
    output.write(args, NAME, result)
    return 0 if all(not math.isnan(r["median_abs_error"] or 0.0) for r in measured.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
