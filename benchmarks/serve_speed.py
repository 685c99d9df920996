"""Benchmark the serving simulator's speed targets (issue 14), on one core of this machine:

1. 10,000 requests simulated in under 1 s (issue 39; 2 s in issue 14) once step times are cached: llama-3.1-8b on h100-sxm
   under vLLM, 512 prompt + 128 output tokens, Poisson at 20 requests/s (moderate load), 5 and
   1 requests/s. The event loop's cost is per step, not per request, and a lower rate means fewer
   sequences per step, so more steps: at 1 request/s nearly every request runs alone (1 prefill +
   127 decode steps each, about 1.28 million steps), the worst case for this workload;
2. a rate sweep of 20 points under 20 s: `planner.serve.sweep.sweep(points=20)` with 1,000 requests a
   point (a closed-loop saturation run, 20 open-loop points and 8 bisections for the highest rate
   within a p90 TTFT SLO of 200 ms: 29 simulations);
3. 1,000 serving rows of `planner predict --configs` in under 60 s (issue 39), in a fresh process pinned to the
   same core, start-up included: llama-3.1-8b (tp 1) and llama-3.1-70b (tp 4) x h100-sxm, h200-sxm, b200 x
   vllm, sglang, trtllm x bf16, fp8 x 1,000 + 1,000 and 8,000 + 1,000 tokens x 14 client concurrencies from 1
   to 512 (the first 1,000 of 1,008 rows), 1,000 requests a row (the --configs default).

Also reported: the first serve call of the process (model graphs captured and the step-time grid
filled), which the targets exclude. "Simulation" is the event loop alone (planner.serve.sim.simulate,
timed by wrapping it); "serve call" adds drawing the arrivals, the KV budget, the summary and pricing.
Cached runs are the median of --repeats after one warm-up run of the same load (which fills the grid
points that load needs).

Prints its result; --out PATH writes it as JSON, --save to benchmarks/results/serve_speed.json.
Run: .venv/bin/python benchmarks/serve_speed.py [--out PATH | --save] [--all-cores]
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

# one core: numpy's thread pools are sized at import, so before anything imports numpy
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import output  # noqa: E402  benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner.serve.api as serve_api  # noqa: E402
from planner.predict.api import Request  # noqa: E402
from planner.predict.context import default_context  # noqa: E402
from planner.serve.api import Load, Scheduling, Slo, serve  # noqa: E402
from planner.serve.sweep import sweep  # noqa: E402

MODEL, DEVICE, ENGINE, PROMPT, OUTPUT = "llama-3.1-8b", "h100-sxm", "vllm", 512, 128
REQUESTS = 10_000
RATES = (20.0, 5.0, 1.0)
SWEEP_POINTS, SWEEP_REQUESTS, SWEEP_SLO_TTFT_S = 20, 1000, 0.2
TARGET_SIM_S, TARGET_SWEEP_S, TARGET_CONFIGS_S = 1.0, 20.0, 60.0
CONFIG_ROWS = 1000


class SimClock:
    """Wraps planner.serve.api.simulate to add up the seconds spent in the event loop."""

    def __init__(self):
        self.seconds, self.calls, self.steps = 0.0, 0, 0
        self._inner = serve_api.simulate
        serve_api.simulate = self

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        run = self._inner(*args, **kwargs)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        self.steps += int(run.step_end_s.size)
        return run

    def reset(self) -> None:
        self.seconds, self.calls, self.steps = 0.0, 0, 0


def timed_serve(clock: SimClock, req: Request, load: Load) -> tuple[float, float, int, object]:
    """(serve call s, simulation s, engine steps, result) of one call."""
    clock.reset()
    start = time.perf_counter()
    result = serve(req, load)
    return time.perf_counter() - start, clock.seconds, clock.steps, result


def configs_rows() -> list[dict]:
    """The serving rows of target 3, in order."""
    rows = []
    for model, tp in (("llama-3.1-8b", 1), ("llama-3.1-70b", 4)):
        for device in ("h100-sxm", "h200-sxm", "b200"):
            for engine in ("vllm", "sglang", "trtllm"):
                for dtype in ("bf16", "fp8"):
                    for input_len, output_len in ((1000, 1000), (8000, 1000)):
                        for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 3, 6, 12, 24):
                            rows.append({"model": model, "device": device, "tp": tp, "gpus": tp, "engine": engine,
                                         "dtype": dtype, "input_len": input_len, "output_len": output_len,
                                         "concurrency": c})
    return rows[:CONFIG_ROWS]


def configs_s(pinned: int | None) -> float:
    """Seconds of `planner predict --configs` over configs_rows() in a fresh process (start-up included)."""
    import json
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for row in configs_rows():
            f.write(json.dumps(row) + "\n")
        path = f.name
    command = [sys.executable, "-m", "planner.cli", "predict", "--configs", path, "--json"]
    if pinned is not None:
        command = ["taskset", "-c", str(pinned), *command]
    start = time.perf_counter()
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    os.unlink(path)
    lines = out.stdout.splitlines()
    errors = [line for line in lines if '"error"' in line]
    if out.returncode != 0 or len(lines) != CONFIG_ROWS or errors:
        sys.exit(f"configs run failed: rc={out.returncode}, {len(lines)} lines, {len(errors)} errors: "
                 f"{errors[:2]} {out.stderr[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    output.add_arguments(parser)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each cached load (median; default 3)")
    parser.add_argument("--all-cores", action="store_true", help="do not pin the process to one core")
    args = parser.parse_args()
    pinned = None
    if not args.all_cores and hasattr(os, "sched_setaffinity"):
        pinned = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {pinned})

    clock = SimClock()
    req = Request(MODEL, DEVICE, input_len=PROMPT, output_len=OUTPUT, engine=ENGINE)
    default_context().cache("serve.steps").clear()  # the first call fills the step-time grid
    first_load = Load(rate_rps=RATES[0], requests=1000)
    first_s, first_sim_s, _, first = timed_serve(clock, req, first_load)
    again_s = timed_serve(clock, req, first_load)[0]
    print(f"first serve call (1,000 requests at {RATES[0]:g}/s; graphs captured, step-time grid filled): "
          f"{first_s:.2f} s, of which in the event loop (grid points filled as steps need them) {first_sim_s:.2f} s; "
          f"the same call again: {again_s:.2f} s")

    runs = []
    for rate in RATES:
        load = Load(rate_rps=rate, requests=REQUESTS)
        warm_s, warm_sim_s, _, _ = timed_serve(clock, req, load)  # fills the grid points this load needs
        timings = [timed_serve(clock, req, load) for _ in range(max(1, args.repeats))]
        call_s = statistics.median(t[0] for t in timings)
        sim_s = statistics.median(t[1] for t in timings)
        steps, m = timings[-1][2], timings[-1][3].metrics
        runs.append({"rate_rps": rate, "requests": REQUESTS, "warm_up_serve_s": warm_s, "warm_up_sim_s": warm_sim_s,
                     "serve_s": call_s, "sim_s": sim_s, "sim_requests_per_s": REQUESTS / sim_s, "steps": steps,
                     "us_per_step": sim_s / steps * 1e6,
                     "completed": m.completed, "ttft_p90_s": m.ttft_s.p90, "mean_concurrency": m.mean_concurrency,
                     "pass": sim_s < TARGET_SIM_S})

    load = Load(rate_rps=1.0, requests=SWEEP_REQUESTS)
    slo = Slo(ttft_s=SWEEP_SLO_TTFT_S)
    sweeps = []
    for label in ("first", "repeat"):
        clock.reset()
        start = time.perf_counter()
        curve, capacity = sweep(req, load, Scheduling(), slo, points=SWEEP_POINTS)
        wall = time.perf_counter() - start
        sweeps.append({"run": label, "points": len(curve), "requests_per_point": SWEEP_REQUESTS,
                       "simulations": clock.calls, "wall_s": wall, "sim_s": clock.seconds,
                       "saturation_rps": capacity.saturation_rps, "max_rate_within_slo_rps": capacity.rate_rps,
                       "pass": wall < TARGET_SWEEP_S})

    conf_s = configs_s(pinned)
    result = {"configs_rows": CONFIG_ROWS, "configs_s": conf_s, "target_configs_s": TARGET_CONFIGS_S, "model": MODEL, "device": DEVICE, "engine": ENGINE, "prompt_tokens": PROMPT, "output_tokens": OUTPUT,
              "first_call_s": first_s, "first_call_sim_s": first_sim_s, "first_call_requests": 1000,
              "first_call_again_s": again_s,
              "kv_blocks_per_copy": first.kv_blocks_per_copy,
              "cached_runs": runs, "sweeps": sweeps, "sweep_slo_ttft_p90_s": SWEEP_SLO_TTFT_S,
              "target_sim_s": TARGET_SIM_S, "target_sweep_s": TARGET_SWEEP_S,
              "machine": {"cpus": os.cpu_count(), "pinned_to_cpu": pinned, "platform": platform.platform(),
                          "python": platform.python_version()},
              "date": datetime.date.today().isoformat()}
    output.write(args, "serve_speed", result)

    print(f"\n{'measure':<58} {'time':>8} {'target':>8}  verdict")
    for r in runs:
        what = f"10,000 requests at {r['rate_rps']:g}/s, simulation (cached)"
        print(f"{what:<58} {r['sim_s']:>7.2f}s "
              f"{'< 1 s':>8}  {'PASS' if r['pass'] else 'MISS'}")
        print(f"{'  the whole serve call':<58} {r['serve_s']:>7.2f}s {'':>8}  "
              f"({r['sim_requests_per_s']:,.0f} requests/s simulated; {r['steps']:,} steps, "
              f"{r['us_per_step']:.1f} us a step)")
    for s in sweeps:
        what = f"sweep, {s['points']} points x {s['requests_per_point']:,} requests ({s['run']}, {s['simulations']} sims)"
        print(f"{what:<58} {s['wall_s']:>7.2f}s {'< 20 s':>8}  {'PASS' if s['pass'] else 'MISS'}")
    what = f"{CONFIG_ROWS:,} serving rows of --configs (fresh process)"
    print(f"{what:<58} {conf_s:>7.2f}s {'< 60 s':>8}  {'PASS' if conf_s < TARGET_CONFIGS_S else 'MISS'}")
    print(f"{'first serve call (capture + grid; not a target)':<58} {first_s:>7.2f}s")
    ok = all(r["pass"] for r in runs) and all(s["pass"] for s in sweeps) and conf_s < TARGET_CONFIGS_S
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
