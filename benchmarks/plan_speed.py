"""Benchmark (issue 6): 100 candidates x 20 workloads x 8 buckets, built and solved to optimality
with HiGHS in under 5 s. Capacities are synthetic (seeded) so that the benchmark measures the
optimizer, not the predictor; every candidate can serve every bucket. Writes
benchmarks/results/plan_speed.json (with --save; --out PATH elsewhere).

Run: .venv/bin/python benchmarks/plan_speed.py
"""

import argparse
import datetime
import os
import platform
import random
import sys
import time
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.plan.capacity import Candidate, ServingCapacity  # noqa: E402
from planner.plan.optimize import Problem, build_model, solve_model  # noqa: E402
from planner.plan.scenario import Candidates, Constraints, Scenario  # noqa: E402


def problem(n_cand: int = 100, n_work: int = 20, n_buckets: int = 8, seed: int = 0) -> Problem:
    rng = random.Random(seed)
    cands = tuple(Candidate(f"c{i}", "onprem" if i % 10 == 0 else "cloud", "h100-sxm", rng.choice((1, 4, 8)),
                            "spot" if i % 7 == 0 else ("onprem" if i % 10 == 0 else "on_demand"),
                            rng.uniform(1, 40), 3e5 if i % 10 == 0 else 0.0, rng.uniform(1, 10), 0.3, "2026-01")
                  for i in range(n_cand))
    flows = tuple(f"w{w}/{b}" for w in range(n_work) for b in range(n_buckets))
    demand = {f: rng.uniform(0.5, 20) for f in flows}
    capacity = {(f, c.key): ServingCapacity(rng.uniform(0.5, 30) * c.device_count, 1, 8, 0.2, 0.02,
                                            rng.uniform(0.3, 6)) for f in flows for c in cands}
    constraints = Constraints(monthly_budget_usd=5e6, capex_cap_usd=3e6, power_cap_kw=200,
                              availability=(("c1", 3), ("c2", 5)), max_spot_share=0.3, min_onprem_share=0.1)
    scenario = Scenario("bench", (), (), Candidates(), constraints, horizon_months=12)
    return Problem(scenario, cands, flows, demand, capacity, (), {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    output.add_arguments(parser)
    args = parser.parse_args()
    p = problem()
    start = time.perf_counter()
    m = build_model(p, weights={"cost": 1.0})
    built = time.perf_counter() - start
    optimal = solve_model(m)
    total = time.perf_counter() - start
    result = {"candidates": len(p.candidates), "flows": len(p.flows), "arcs": len(p.capacity), "optimal": optimal,
              "build_s": built, "build_and_solve_s": total, "target_s": 5.0,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "date": datetime.date.today().isoformat()}
    output.write(args, "plan_speed", result)
    print(f"100 candidates x 20 workloads x 8 buckets ({len(p.capacity):,} assignment variables): built in "
          f"{built:.2f} s, solved to optimality: {optimal}, total {total:.2f} s (target < 5 s)")
    sys.exit(0 if optimal and total < 5 else 1)


if __name__ == "__main__":
    main()
