"""Benchmark the serving simulator's speed targets (issue 14), on one core of this machine:

1. 10,000 requests simulated in under 2 s once step times are cached: llama-3.1-8b on h100-sxm
   under vLLM, 512 prompt + 128 output tokens, Poisson at 20 requests/s (moderate load), 5 and
   1 requests/s. The event loop's cost is per step, not per request, and a lower rate means fewer
   sequences per step, so more steps: at 1 request/s nearly every request runs alone (1 prefill +
   127 decode steps each, about 1.28 million steps), the worst case for this workload;
2. a rate sweep of 20 points under 20 s: `planner.serve.sweep.sweep(points=20)` with 1,000 requests a
   point (a closed-loop saturation run, 20 open-loop points and 8 bisections for the highest rate
   within a p90 TTFT SLO of 200 ms: 29 simulations).

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
from planner.serve.api import Load, Scheduling, Slo, serve  # noqa: E402
from planner.serve.sweep import sweep  # noqa: E402

MODEL, DEVICE, ENGINE, PROMPT, OUTPUT = "llama-3.1-8b", "h100-sxm", "vllm", 512, 128
REQUESTS = 10_000
RATES = (20.0, 5.0, 1.0)
SWEEP_POINTS, SWEEP_REQUESTS, SWEEP_SLO_TTFT_S = 20, 1000, 0.2
TARGET_SIM_S, TARGET_SWEEP_S = 2.0, 20.0


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
    serve_api._STEPS.clear()
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

    result = {"model": MODEL, "device": DEVICE, "engine": ENGINE, "prompt_tokens": PROMPT, "output_tokens": OUTPUT,
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
              f"{'< 2 s':>8}  {'PASS' if r['pass'] else 'MISS'}")
        print(f"{'  the whole serve call':<58} {r['serve_s']:>7.2f}s {'':>8}  "
              f"({r['sim_requests_per_s']:,.0f} requests/s simulated; {r['steps']:,} steps, "
              f"{r['us_per_step']:.1f} us a step)")
    for s in sweeps:
        what = f"sweep, {s['points']} points x {s['requests_per_point']:,} requests ({s['run']}, {s['simulations']} sims)"
        print(f"{what:<58} {s['wall_s']:>7.2f}s {'< 20 s':>8}  {'PASS' if s['pass'] else 'MISS'}")
    print(f"{'first serve call (capture + grid; not a target)':<58} {first_s:>7.2f}s")
    ok = all(r["pass"] for r in runs) and all(s["pass"] for s in sweeps)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
