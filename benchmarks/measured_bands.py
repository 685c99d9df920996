"""The end-to-end band of each tier on each device family, from a dev_validation run (issue 43, item 5).

    .venv/bin/python benchmarks/measured_bands.py [--from FILE] [--write] [--out FILE | --save]

Reads the rows of a `benchmarks/dev_validation.py` result (default benchmarks/results/dev_validation.json:
the 250 published measurements of benchmarks/data/dev_measurements.csv, each with the tier planner
predicted it on and its |ln(predicted / measured)|) and groups the expressed rows by tier and device
family (devices.csv's vendor and generation). Prints, per group, the rows, the median and p90 of
|ln|, and the band exp(p90) - 1 (planner/hardware/measured_bands.py). `--write` writes them to
hardware_specs/efficiency/measured_bands.json, the file every prediction's band is read from.

Also prints the coverage: the share of rows whose measurement lies inside the band planner now gives it
(in sample: the bands are the rows' own p90, so about 90% by construction where a group is the row's
own; the figure checks the rule, it is not a held-out test).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.output import add_arguments, write  # noqa: E402
from planner.files import write_text_atomic  # noqa: E402
from planner.hardware.measured_bands import ANY_FAMILY, BANDS_PATH, BandGroup, MeasuredBands, family  # noqa: E402
from planner.predict.context import default_context  # noqa: E402

DEFAULT_FROM = ROOT / "benchmarks" / "results" / "dev_validation.json"
MIN_ROWS = 8
"""Rows a family needs for its own figure (fewer: the tier's over every family). A p90 of fewer than 8
results is the largest or second largest of them; 8 keeps it an estimate, not one outlier."""


def groups(rows: list[dict], devices: dict) -> list[BandGroup]:
    """The (tier, family) and (tier, "*") groups of the expressed rows with a device and an error."""
    errors = defaultdict(list)
    for r in rows:
        # collective rows are left out: a collective's band is its curves' held-out error (or the datasheet
        # band), and their errors, which mostly measure how networks and stacks differ between the sources
        # (a 2-node H100 over TCPXO against one over InfiniBand; 8 large NVLink all-reduces within 2%), would
        # set the band of every end-to-end prediction of the tier
        if r.get("category") == "collective":
            continue
        err, device = r.get("abs_ln_ratio"), devices.get(r.get("device"))
        if not r.get("expressed") or err is None or device is None or not r.get("tier"):
            continue
        errors[(r["tier"], family(device))].append(err)
        errors[(r["tier"], ANY_FAMILY)].append(err)
    return [BandGroup(tier, fam, len(v), round(float(np.median(v)), 4), round(float(np.percentile(v, 90)), 4))
            for (tier, fam), v in sorted(errors.items())]


def coverage(rows: list[dict], bands: MeasuredBands, devices: dict) -> dict:
    """Share of expressed rows whose measurement lies within exp(±p90) of the prediction: overall and by tier."""
    inside = defaultdict(list)
    for r in rows:
        if r.get("category") == "collective":
            continue
        err, device = r.get("abs_ln_ratio"), devices.get(r.get("device"))
        if not r.get("expressed") or err is None or device is None or not r.get("tier"):
            continue
        found = bands.group(r["tier"], device)
        if found is None:
            continue
        ok = err <= math.log1p(found.band_fraction) + 1e-12
        inside[r["tier"]].append(ok)
        inside["all"].append(ok)
    return {k: {"rows": len(v), "inside": sum(v), "share": round(sum(v) / len(v), 3)} for k, v in sorted(inside.items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", type=Path, default=DEFAULT_FROM,
                        help="a dev_validation.py result (JSON with 'rows')")
    parser.add_argument("--write", action="store_true", help=f"write the groups to {BANDS_PATH.relative_to(ROOT)}")
    add_arguments(parser)
    args = parser.parse_args()
    try:
        run = json.loads(args.source.read_text())
        rows = run["rows"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {args.source} is not a dev_validation.py result with rows ({exc})", file=sys.stderr)
        return 2
    devices = default_context().catalog.devices
    found = groups(rows, devices)
    bands = MeasuredBands(tuple(found), MIN_ROWS, "", "")
    print(f"{'tier':<14}{'family':<28}{'rows':>5}{'median x':>10}{'p90 x':>8}{'band':>8}  used")
    for g in found:
        used = "yes" if g.family == ANY_FAMILY or g.rows >= MIN_ROWS else f"no (< {MIN_ROWS} rows: tier's)"
        print(f"{g.tier:<14}{g.family:<28}{g.rows:>5}{math.exp(g.median_abs_ln):>10.2f}{math.exp(g.p90_abs_ln):>8.2f}"
              f"{g.band_fraction:>+8.0%}  {used}")
    cover = coverage(rows, bands, devices)
    print("inside the band: " + ", ".join(f"{k} {v['inside']}/{v['rows']} ({v['share']:.0%})" for k, v in cover.items()))
    source = (f"benchmarks/dev_validation.py result {args.source.relative_to(ROOT) if args.source.is_relative_to(ROOT) else args.source} "
              f"(run {run.get('date', '?')}, code {run.get('code', '?')}): published measurements of "
              "benchmarks/data/dev_measurements.csv; `.venv/bin/python benchmarks/measured_bands.py --write`")
    record = {"description": "End-to-end error of planner's predictions by tier and device family (vendor and "
                             "generation): p90 and median |ln(predicted / measured)| over the validation rows "
                             "predicted on that tier and family; a prediction's band is max(its kernels' band, "
                             "exp(p90) - 1) (planner/hardware/measured_bands.py). A family with fewer than min_rows "
                             "rows takes its tier's figure over every family (family '*').",
              "source": source, "date": date.today().isoformat(), "min_rows": MIN_ROWS,
              "groups": [{"tier": g.tier, "family": g.family, "rows": g.rows, "median_abs_ln": g.median_abs_ln,
                          "p90_abs_ln": g.p90_abs_ln} for g in found],
              "coverage_in_sample": cover}
    if args.write:
        write_text_atomic(BANDS_PATH, json.dumps(record, indent=1) + "\n")
        print(f"written to {BANDS_PATH}")
    write(args, "measured_bands", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
