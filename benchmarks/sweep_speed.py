"""Benchmark the sweep (issue 17), on this machine:

1. predictions per second on one core over a grid of about 100,000 points whose graphs are cached
   (each of its graphs captured and each (graph, device) timed once before the clock starts): what a
   worker does, chunk by chunk (predict each point, its row of `planner predict --configs`, flattened;
   the grid's expansion included); target >= 10,000/s;
2. wall time of `planner sweep` on the same grid in a fresh process each (start-up, graph capture in
   each worker, Parquet): in one process, with 2 local worker processes, on a 2-worker Dask LocalCluster
   and on a 2-CPU local Ray.

The grid: 2 models x 2 prompt lengths x 2 output lengths x 5 batches x 2 tensor-parallel widths (80
graph sets) x 13 devices x 4 prices x 4 data-parallel widths x 2 pipeline depths x 3 utilizations.
--quick runs a 1/8 grid (CI-sized); --backends picks which sweeps to time.

Prints its result; --out PATH writes it as JSON, --save to benchmarks/results/sweep_speed.json.
Run: .venv/bin/python benchmarks/sweep_speed.py [--quick] [--backends local,processes,dask,ray] [--out PATH | --save]
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.sweep.grid import parse_grid  # noqa: E402
from planner.sweep.run import predict_chunk, predict_point  # noqa: E402

DEVICES = ["h100-sxm", "h200-sxm", "b200", "a100-sxm-80gb", "a100-sxm-40gb", "l40s", "l4", "a10g", "mi300x",
           "mi325x", "gaudi3", "h100-pcie", "v100-sxm2-32gb"]


def grid_data(quick: bool) -> dict:
    axes = {"model": ["llama-3.1-8b", "mistral-7b"], "input_len": [512, 2048], "output_len": [128, 512],
            "batch": [1, 4, 16, 64, 256], "tp": [1, 2], "device": DEVICES,
            "pricing": ["on_demand", "spot", "reserved_1y", "reserved_3y"], "dp": [1, 2, 4, 8], "pp": [1, 2],
            "utilization": [0.5, 0.8, 1.0]}
    if quick:
        axes.update(model=["llama-3.1-8b"], input_len=[512], output_len=[128])
    return {"axes": axes, "chunk": 500}


def one_core_rate(g) -> dict:
    """Points per second of one core once every graph is cached."""
    points = list(g.points())
    start = time.perf_counter()
    seen = set()
    for ident, point in points:  # warm: capture each graph, time each (graph, device) once
        key = tuple(point[k] for k in ("model", "input_len", "output_len", "batch", "tp", "device", "pp"))
        if key not in seen:
            seen.add(key)
            predict_point(ident, point)
    warm_s = time.perf_counter() - start
    start = time.perf_counter()
    errors = 0
    for _, chunk in g.chunks():  # as a worker runs them
        errors += sum("error" in row for row in predict_chunk(chunk))
    elapsed = time.perf_counter() - start
    return {"points": len(points), "warm_s": warm_s, "warm_keys": len(seen), "cached_s": elapsed,
            "points_per_s": len(points) / elapsed, "error_rows": errors}


def sweeps(data: dict, backends: list[str]) -> dict:
    """Wall time of `planner sweep` on the grid in a fresh process per backend: start-up, each worker's
    graph captures, the predictions and the Parquet file, as a user runs it."""
    out = {}
    flags = {"local": [], "processes": ["--workers", "2"], "dask": ["--cluster", "dask-local", "--workers", "2"],
             "ray": ["--cluster", "ray-local", "--workers", "2"]}
    with tempfile.TemporaryDirectory() as tmp:
        grid_file = Path(tmp) / "grid.yaml"
        grid_file.write_text(json.dumps(data))  # JSON is YAML
        for backend in backends:
            target = Path(tmp) / f"{backend}.parquet"
            start = time.perf_counter()
            run = subprocess.run([sys.executable, "-m", "planner.cli", "sweep", str(grid_file), "--out", str(target),
                                  "--no-progress", "--top", "0", *flags[backend]], cwd=ROOT, capture_output=True,
                                 text=True)
            wall = time.perf_counter() - start
            if run.returncode != 0:
                sys.exit(f"sweep on {backend} failed ({run.returncode}): {run.stderr[-500:]}")
            points = parse_grid(data).size
            workers = 1 if backend == "local" else 2
            out[backend] = {"workers": workers, "wall_s": wall, "points_per_s": points / wall}
            print(f"  planner sweep on {backend:<9} ({workers} worker{'s' if workers > 1 else ''}, fresh process): "
                  f"{wall:7.1f} s, {points / wall:8,.0f} points/s", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a 1/8 grid")
    parser.add_argument("--backends", default="local,processes,dask,ray", help="sweeps to time (comma-separated)")
    output.add_arguments(parser)
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    unknown = sorted(set(backends) - {"local", "processes", "dask", "ray"})
    if unknown:
        sys.exit(f"unknown backend(s) {', '.join(unknown)}; valid: local, processes, dask, ray")
    data = grid_data(args.quick)
    g = parse_grid(data)
    print(f"grid: {g.size:,} points")
    rate = one_core_rate(g)
    print(f"one core, cached graphs: {rate['points_per_s']:,.0f} points/s ({rate['points']:,} points in "
          f"{rate['cached_s']:.2f} s; warm-up {rate['warm_s']:.1f} s for {rate['warm_keys']:,} graph x device keys)"
          f"   (target >= 10,000/s)", flush=True)
    walls = sweeps(data, backends)
    if "local" in walls:
        for name, w in walls.items():
            w["speedup_vs_local"] = walls["local"]["wall_s"] / w["wall_s"]
    result = {"grid_points": g.size, "one_core": rate, "sweeps": walls, "target_points_per_s": 10_000,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
              "date": datetime.date.today().isoformat()}
    output.write(args, "sweep_speed", result)
    ok = rate["points_per_s"] >= 10_000
    print("target:", "met" if ok else "MISSED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
