"""Benchmark the predictor's speed targets (issue 3), on this machine:

1. one prediction once its graphs are counted: under 5 ms (llama-2-7b serving on h100-sxm: a
   prefill and two decode graphs, each timed op by op);
2. `compare` over every catalog device at 10 batch sizes (1..512), graphs captured inside the
   timing: under 2 s. The process's imports are frozen out of the garbage collector first, as the
   `planner` command does (planner/cli/__init__.py, entry());
3. the same `compare` again in the same process, its graphs cached (median of 3; issue 17): under 0.5 s;
4. 1,000 rows of `planner predict --configs` in a fresh process, start-up included: under 10 s.

Prints its result; --out PATH writes it as JSON, --save to benchmarks/results/predict_speed.json.
Run: .venv/bin/python benchmarks/predict_speed.py [--out PATH | --save]
"""

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.predict import (  # noqa: E402
    Request,
    compare,
    default_context,  # noqa: E402
    predict,
)
from planner.workload.device_graph import clear_graph_caches  # noqa: E402

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def one_prediction_ms() -> float:
    req = Request("llama-2-7b", "h100-sxm", batch=8, input_len=1024, output_len=256)
    predict(req)  # counts the graphs
    runs = []
    for _ in range(50):
        start = time.perf_counter()
        predict(req)
        runs.append((time.perf_counter() - start) * 1e3)
    return statistics.median(runs)


def compare_s() -> tuple[float, int]:
    gc.freeze()  # as `planner` does once its imports are done: a full collection then skips torch's objects
    clear_graph_caches()
    ctx = default_context()
    start = time.perf_counter()
    rows = 0
    for b in BATCHES:
        rows += len(compare("llama-2-7b", batch=b, input_len=512, output_len=128, ctx=ctx))
    return time.perf_counter() - start, rows


def compare_cached_s() -> float:
    """compare_s's work again once its graphs are captured and timed (what a sweep repeats)."""
    ctx = default_context()
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for b in BATCHES:
            compare("llama-2-7b", batch=b, input_len=512, output_len=128, ctx=ctx)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def configs_s() -> float:
    models = ["llama-2-7b", "llama-3.1-8b", "mistral-7b", "gpt2", "resnet50", "bert-base"]
    devices = ["h100-sxm", "a100-sxm-80gb", "l4", "mi300x", "h200-sxm", "l40s", "a10g", "b200"]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for i in range(1000):
            model = models[i % len(models)]
            row = {"id": i, "model": model, "device": devices[(i // len(models)) % len(devices)],
                   "batch": 2 ** (i % 6)}
            if model == "gpt2":
                row["input_len"] = 512
            f.write(json.dumps(row) + "\n")
        path = f.name
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "planner.cli", "predict", "--configs", path, "--json"], cwd=ROOT,
                         capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    os.unlink(path)
    lines = out.stdout.splitlines()
    errors = [l for l in lines if '"error"' in l]
    if out.returncode != 0 or len(lines) != 1000 or errors:
        sys.exit(f"configs run failed: rc={out.returncode}, {len(lines)} lines, {len(errors)} errors: "
                 f"{errors[:2]} {out.stderr[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    output.add_arguments(parser)
    args = parser.parse_args()
    one = one_prediction_ms()
    comp, rows = compare_s()
    cached = compare_cached_s()
    conf = configs_s()
    result = {"one_prediction_ms_median": one, "compare_all_devices_10_batches_s": comp, "compare_rows": rows,
              "compare_cached_s": cached, "configs_1000_rows_s": conf,
              "targets": {"one_prediction_ms": 5, "compare_s": 2, "compare_cached_s": 0.5, "configs_s": 10},
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "date": datetime.date.today().isoformat()}
    output.write(args, "predict_speed", result)
    print(f"one prediction (graphs counted):         {one:.2f} ms   (target < 5 ms)")
    print(f"compare, {rows} rows (all devices x 10 batches): {comp:.2f} s   (target < 2 s)")
    print(f"the same compare, graphs cached:         {cached:.3f} s  (target < 0.5 s)")
    print(f"1,000 rows of --configs incl. start-up:  {conf:.2f} s   (target < 10 s)")
    ok = one < 5 and comp < 2 and cached < 0.5 and conf < 10
    print("targets:", "met" if ok else "MISSED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
