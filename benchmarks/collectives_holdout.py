"""Held-out error of the measured collective curves (issue 13, item 3).

For every curve in hardware_specs/collectives/ (NCCL per device, op, GPU count and node count, and the
serving engines' own all-reduce), a random 20% of its points (at least one, leaving at least two) is held
back with a fixed seed (planner.predict.collectives.HOLDOUT_SEED; one generator per curve, seeded with
the seed and the curve's name), the curve is rebuilt from the remaining points, and each held-back point
is predicted the way planner predicts any size: log-log interpolation between neighbours, the smallest
point's time below the smallest size, the asymptotic bus bandwidth of the two largest points above the
largest. Error = |predicted / measured - 1|. Reported: median and p90 per device and op (curves across
nodes apart), per device, and over everything; target median <= 15%.

Run:  .venv/bin/python benchmarks/collectives_holdout.py [--out PATH | --save]
      (--save writes benchmarks/results/collectives_holdout.json; the figures go in
      hardware_specs/collectives/README.md)
"""

import argparse
import collections
import datetime
import platform
import sys
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.predict.collectives import (  # noqa: E402
    HOLDOUT_FRACTION,
    HOLDOUT_SEED,
    collectives_root,
    holdout,
    load_curves,
    summary,
)

NAME = "collectives_holdout"
TARGET_MEDIAN = 0.15


def evaluate() -> dict:
    curves = load_curves(str(collectives_root()))
    everything, by_device, by_op = [], {}, {}
    for device, dc in sorted(curves.items()):
        points = holdout(dc)
        everything += points
        by_device[device] = summary(points)
        groups = collections.defaultdict(list)
        for p in points:
            groups[p.op if p.nodes == 1 else f"{p.op} ({p.nodes} nodes)"].append(p)
        by_op[device] = {op: {**summary(ps), "curves": sorted({f"{p.gpus} GPUs / {p.nodes} node(s)" for p in ps})}
                         for op, ps in sorted(groups.items())}
    overall = summary(everything)
    return {"name": NAME, "date": datetime.date.today().isoformat(),
            "method": __doc__.split("\n\n")[1].replace("\n", " "),
            "holdout_fraction": HOLDOUT_FRACTION, "seed": HOLDOUT_SEED,
            "error": "|predicted / measured - 1| (a fraction)",
            "overall": overall, "by_device": by_device, "by_device_and_op": by_op,
            "target_median": TARGET_MEDIAN,
            "target_met": all(s["median_abs_error"] <= TARGET_MEDIAN for s in by_device.values()),
            "machine": {"platform": platform.platform()}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    output.add_arguments(p)
    args = p.parse_args(argv)
    result = evaluate()
    print(f"{'device':16} {'op':26} {'n':>4} {'median':>8} {'p90':>8}")
    for device, ops in result["by_device_and_op"].items():
        for op, s in ops.items():
            print(f"{device:16} {op:26} {s['n']:4d} {s['median_abs_error']:8.1%} {s['p90_abs_error']:8.1%}")
        d = result["by_device"][device]
        print(f"{device:16} {'(all)':26} {d['n']:4d} {d['median_abs_error']:8.1%} {d['p90_abs_error']:8.1%}")
    o = result["overall"]
    print(f"{'all devices':43} {o['n']:4d} {o['median_abs_error']:8.1%} {o['p90_abs_error']:8.1%}")
    print(f"target: median <= {TARGET_MEDIAN:.0%} per device: {'met' if result['target_met'] else 'NOT met'}")
    output.write(args, NAME, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
