"""Benchmark: count deepseek-v3 (671B, MLA + 256-expert MoE) prefill (batch 1, 2048 tokens) from a fresh process.

Same method as benchmarks/count_405b.py (wall time from process start to exit, peak resident memory of
`planner count` as a child process, best of --repeats). The capture is exact: every layer runs on meta
tensors; experts given the same number of rows under balanced routing run the same ops on same-shaped
weights, so one runs and is counted for each of them (planner_models.moe.MoE.capture_repeat).
Target (issue 16): under 15 s and under 2 GB on a 2-core machine.

Run: .venv/bin/python benchmarks/count_671b.py [--repeats 3] [--out PATH | --save]
"""

import argparse
import datetime
import os
import platform
import sys

import output  # benchmarks/output.py: --out PATH, --save
from count_405b import run_once

COMMAND = ["-m", "planner.cli", "count", "deepseek-v3", "--mode", "prefill", "--batch", "1", "--seq-len", "2048",
           "--json"]
TARGET_S, TARGET_BYTES = 15, 2e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    output.add_arguments(parser)
    args = parser.parse_args()
    runs = [run_once(COMMAND) for _ in range(args.repeats)]
    walls, peaks, counted = [r[0] for r in runs], [r[1] for r in runs], runs[0][2]
    result = {
        "command": "planner count deepseek-v3 --mode prefill --batch 1 --seq-len 2048 --json",
        "wall_s_best": min(walls), "wall_s_all": walls, "peak_rss_bytes_max": max(peaks),
        "ops_counted": counted["ops"], "flop": counted["flop"], "params": counted["params"],
        "exact": "all 61 layers run on meta tensors; same-shaped experts counted once each per layer",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "date": datetime.date.today().isoformat(), "target": {"wall_s": TARGET_S, "peak_rss_bytes": TARGET_BYTES},
    }
    output.write(args, "count_671b", result)
    print(f"deepseek-v3 prefill, batch 1, 2048 tokens: {counted['ops']} ops, {counted['flop']:.4e} FLOP, "
          f"{counted['params']:,} parameters")
    print(f"wall time best of {args.repeats}: {min(walls):.2f} s (all: {', '.join(f'{w:.2f}' for w in walls)})")
    print(f"peak memory: {max(peaks) / 1e9:.3f} GB")
    ok = min(walls) < TARGET_S and max(peaks) < TARGET_BYTES
    print(f"target (< {TARGET_S} s, < 2 GB):", "met" if ok else "MISSED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
