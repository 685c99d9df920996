"""Check `planner trace` on real traces (issue 15) and time it:

1. CPU traces made here with torch.profiler (the 4-layer transformer and small CNN of tests/trace/conftest.py,
   forward and a training step): the profiler's own self-time total against the sum of planner's table,
   whether every op the profiler lists is in the table, and, read against this workplace's committed CPU
   profile (measured tier), the median |ln(attainable / measured)| over GEMM ops and the ops flagged above
   2x their attainable time;
2. the two measured H100 traces (benchmarks/data/traces/): the same GEMM figure against the h100-sxm
   ceilings planner has for eager PyTorch, the breakdown's host-bound share, the replay on their own device
   (must equal the measured wall time) and the read time.

Prints its result; --out PATH writes it as JSON, --save to benchmarks/results/trace_check.json.
Run: .venv/bin/python benchmarks/trace_check.py [--out PATH | --save]
"""

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from planner.files import write_text_atomic  # noqa: E402
from planner.trace.analyze import analyze  # noqa: E402
from planner.trace.read import read_trace  # noqa: E402
from planner.trace.whatif import what_if  # noqa: E402
from tests.trace.conftest import CPU_PROFILE, GPU_TRACES, SmallCNN, Transformer, _record  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the result as JSON to this path")
    ap.add_argument("--save", action="store_true", help="write benchmarks/results/trace_check.json")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = {"transformer_forward": (Transformer().eval(), torch.randn(2, 64, 128), False),
                 "transformer_train": (Transformer().train(), torch.randn(2, 64, 128), True),
                 "cnn_forward": (SmallCNN().eval(), torch.randn(4, 3, 32, 32), False),
                 "cnn_train": (SmallCNN().train(), torch.randn(4, 3, 32, 32), True)}
        for name, (model, x, train) in cases.items():
            rec = _record(Path(tmp), name, model, x, train)
            t0 = time.perf_counter()
            report = analyze(read_trace(rec.path), CPU_PROFILE)
            rows.append(_row(name, report, time.perf_counter() - t0, rec.self_total_us / 1e6,
                             not (rec.names - set(report.ops["name"]))))
    for path in sorted(GPU_TRACES.glob("*.json.gz")):
        t0 = time.perf_counter()
        report = analyze(read_trace(path))
        rows.append(_row(path.name, report, time.perf_counter() - t0, None, None,
                         what_if(report, report.device.id).wall_s))
    print(f"{'trace':44s} {'device':22s} {'tier':9s} {'ops':>6s} {'self total':>11s} {'profiler':>10s} "
          f"{'GEMM |ln|':>9s} {'GEMMs':>5s} {'flagged':>7s} {'replay':>9s} {'read s':>6s}")
    for r in rows:
        prof = "-" if r["profiler_self_s"] is None else f"{1e3 * r['profiler_self_s']:.3f} ms"
        gemm = "-" if r["gemm_median_abs_ln"] is None else f"{r['gemm_median_abs_ln']:.3f}"
        replay = "-" if r["replay_wall_s"] is None else f"{1e3 * r['replay_wall_s']:.3f}"
        print(f"{r['trace'][:44]:44s} {r['device']:22s} {r['tier']:9s} {r['ops']:6d} {1e3 * r['self_s']:8.3f} ms "
              f"{prof:>10s} {gemm:>9s} {r['gemm_ops']:5d} {r['flagged']:7d} {replay:>9s} {r['read_s']:6.2f}")
    out = {"date": datetime.date.today().isoformat(), "torch": torch.__version__, "rows": rows}
    target = args.out or (str(ROOT / "benchmarks" / "results" / "trace_check.json") if args.save else None)
    if target:
        write_text_atomic(target, json.dumps(out, indent=1) + "\n")
        print(f"written to {target}")
    return 0


def _row(name, report, read_s, profiler_self_s, all_ops, replay_wall_s=None) -> dict:
    gemm, n = report.gemm_abs_ln
    return {"trace": name, "device": report.device.id, "tier": report.tier, "ops": len(report.ops),
            "self_s": float(report.ops["self_s"].sum()), "profiler_self_s": profiler_self_s,
            "every_profiler_op_listed": all_ops, "wall_s": report.wall_s, "gemm_median_abs_ln": gemm, "gemm_ops": n,
            "flagged": int(report.counted["flagged"].sum()),
            "host_bound_share": dict(report.breakdown).get("idle: host-bound (dispatch, Python)", 0) / report.wall_s,
            "replay_wall_s": replay_wall_s, "read_s": read_s}


if __name__ == "__main__":
    sys.exit(main())
