"""Compare two dev_validation runs per category: did each category improve, hold, or get worse?

Reads two JSON files written by benchmarks/dev_validation.py (--out or --save) and, for each category,
takes the rows expressed in both runs and reports the median |ln(predicted / measured)| of each run,
the change, a paired bootstrap 95% interval of the change (rows resampled with replacement, the same
rows for both runs; 10,000 resamples, seeded, so the output is reproducible) and how many rows got
better or worse by more than 0.001.

Verdict per category:
- improved: the median error fell;
- holds: it rose, but the 95% interval of the change contains 0 (the two runs cannot be told apart on
  these rows);
- worse: it rose and the whole interval is above 0.

Run:
    .venv/bin/python benchmarks/compare_runs.py benchmarks/results/dev_validation_issue12.json \\
        benchmarks/results/dev_validation.json
Exit status 0, or 2 with a one-line message for a missing or malformed file.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys

RESAMPLES = 10_000
SEED = 0
MOVED = 1e-3


def load_rows(path: str) -> dict[str, dict]:
    """Expressed rows of a dev_validation JSON by id; SystemExit(2) naming the problem."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        rows = data["rows"]
        return {r["id"]: r for r in rows if r.get("expressed") and r.get("abs_ln_ratio") is not None}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"compare_runs: cannot read {path} as a dev_validation result ({type(exc).__name__}: {exc})"[:300],
              file=sys.stderr)
        raise SystemExit(2) from None


def compare(before: dict[str, dict], after: dict[str, dict]) -> list[dict]:
    """One record per category: n, median before and after, change, 95% interval, rows better/worse, verdict."""
    shared = sorted(set(before) & set(after))
    categories = sorted({before[i]["category"] for i in shared})
    out = []
    for cat in categories:
        ids = [i for i in shared if before[i]["category"] == cat]
        old = {i: before[i]["abs_ln_ratio"] for i in ids}
        new = {i: after[i]["abs_ln_ratio"] for i in ids}
        change = statistics.median(new.values()) - statistics.median(old.values())
        rng = random.Random(SEED)
        draws = []
        for _ in range(RESAMPLES):
            sample = [rng.choice(ids) for _ in ids]
            draws.append(statistics.median(new[i] for i in sample) - statistics.median(old[i] for i in sample))
        draws.sort()
        low, high = draws[int(0.025 * RESAMPLES)], draws[int(0.975 * RESAMPLES) - 1]
        verdict = "improved" if change < 0 else ("holds" if low <= 0 else "worse")
        out.append({"category": cat, "n": len(ids), "median_before": statistics.median(old.values()),
                    "median_after": statistics.median(new.values()), "change": change, "ci95": (low, high),
                    "better": sum(new[i] < old[i] - MOVED for i in ids),
                    "worse_rows": sum(new[i] > old[i] + MOVED for i in ids), "verdict": verdict})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="dev_validation JSON of the earlier run")
    parser.add_argument("after", help="dev_validation JSON of the later run")
    args = parser.parse_args()
    table = compare(load_rows(args.before), load_rows(args.after))
    print(f"{'category':<24} {'n':>3} {'before':>7} {'after':>7} {'change':>7}  {'95% interval':>17}  "
          f"{'better':>6} {'worse':>5}  verdict")
    for r in table:
        low, high = r["ci95"]
        print(f"{r['category']:<24} {r['n']:>3} {r['median_before']:>7.3f} {r['median_after']:>7.3f} "
              f"{r['change']:>+7.3f}  [{low:>+6.3f}, {high:>+6.3f}]  {r['better']:>6} {r['worse_rows']:>5}  "
              f"{r['verdict']}")


if __name__ == "__main__":
    main()
