"""`planner trace FILE`: read a PyTorch Profiler trace, set each op beside its roofline on the device it
ran on, break the step down, predict it on other devices (`--on`), and list what would gain most."""

from __future__ import annotations

import argparse
import json
import math

from planner.cli.args import finite_float, fmt_time, positive_int
from planner.errors import ConfigError
from planner.units import MIB, json_safe, si


def add_trace(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="read a PyTorch Profiler trace: each op beside its roofline, breakdown, what-if",
                       description="Read a PyTorch Profiler trace (Chrome/Kineto JSON, gzipped or not), count each op "
                                   "with planner's registry, set its measured time beside its attainable time on the "
                                   "device, break the step down, and predict it on other devices.")
    p.add_argument("file", help="trace file (.json or .json.gz) from torch.profiler export_chrome_trace")
    p.add_argument("--device", help="device the trace ran on (default: read from the trace; a CPU trace uses this "
                                    "machine's calibration profile)")
    p.add_argument("--engine", default="eager", help="kernel library the trace ran (default eager PyTorch)")
    p.add_argument("--on", action="append", metavar="DEVICE",
                   help="predict the same run on this device (repeat, or comma-separate, for several)")
    p.add_argument("--host-scale", type=finite_float, default=1.0, metavar="X",
                   help="what-if: host time multiplied by X (default 1: kept as measured; 0: never waits on the host)")
    p.add_argument("--top", type=positive_int, default=12, help="ops listed (default 12)")
    p.add_argument("--roofline", metavar="FILE.png", help="draw the device roofline with the measured ops as points")
    p.add_argument("--max-mb", type=positive_int, default=512, help="largest trace read, MiB decompressed (default 512)")
    p.add_argument("--json", action="store_true", help="print JSON (every op in 'ops')")
    p.set_defaults(func=cmd_trace)


def load_report(args: argparse.Namespace):
    """The TraceReport of args.file on args.device with args.engine."""
    from planner.trace.analyze import analyze
    from planner.trace.read import read_trace
    from planner.workload.engines import get_engine

    get_engine(args.engine)  # an unknown engine is one line before the trace is read
    return analyze(read_trace(args.file, args.max_mb * MIB), args.device, engine=args.engine)


def on_devices(values: list[str] | None) -> list[str]:
    """--on values split on commas, in order, each once."""
    out: list[str] = []
    for value in values or []:
        for name in value.split(","):
            if name.strip() and name.strip() not in out:
                out.append(name.strip())
    if len(out) > 64:
        raise ConfigError(f"--on names {len(out)} devices; the limit is 64")
    return out


def cmd_trace(args: argparse.Namespace) -> int:
    from planner.cli import imported
    from planner.trace.findings import findings
    from planner.trace.whatif import what_if

    imported()
    if args.host_scale != 1.0 and not args.on:
        raise ConfigError("--host-scale scales the host time of a what-if: give the devices to replay the run on "
                          "with --on (e.g. --on h100-sxm --host-scale 0.5)")
    report = load_report(args)
    plot = None
    if args.roofline:
        from planner.plot import check_target
        plot = check_target(args.roofline)
    whatifs = [what_if(report, d, host_scale=args.host_scale, engine=args.engine) for d in on_devices(args.on)]
    found = findings(report, whatifs)
    if plot is not None:
        _draw(report, str(plot))
    if args.json:
        print(json.dumps(as_json(report, whatifs, found), indent=1))
        return 0
    _print(report, whatifs, found, args.top)
    if plot is not None:
        print(f"roofline     written to {plot}")
    return 0


def as_json(report, whatifs, found) -> dict:
    """The report as JSON: summary, breakdown, categories, every op, what-ifs and findings."""
    gemm, n = report.gemm_abs_ln
    ops = report.ops.drop(columns=["index"]).to_dict(orient="records")
    return json_safe({
        "file": report.trace.source, "device": report.device.id, "device_name": report.trace.device_name or None,
        "tier": report.tier, "efficiency_source": report.source, "dtype": report.dtype, "wall_s": report.wall_s,
        "host_ops": len(report.trace.ops), "device_events": len(report.trace.device_events),
        "counted_ops": int(report.ops["counted"].sum()),
        "breakdown_s": dict(report.breakdown), "communication_overlapped_s": report.overlapped_comm_s,
        "gemm_median_abs_ln": gemm, "gemm_ops": n, "flagged_ops": int(report.counted["flagged"].sum()),
        "categories": report.by_category().reset_index().to_dict(orient="records"),
        "signatures": report.by_signature().to_dict(orient="records"),
        "what_if": [w.as_dict() for w in whatifs],
        "findings": [f.as_dict() for f in found],
        "ops": ops})


def _rate(value: float, unit: str) -> str:
    return "-" if value is None or not math.isfinite(value) or value <= 0 else si(value, unit, digits=2)


def _t(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else fmt_time(seconds)


def _print(report, whatifs, found, top: int) -> None:
    tr = report.trace
    where = f"ran on {tr.device_name}" if tr.device_name else "CPU only"
    counted = report.counted
    print(f"trace        {tr.source}: {len(tr.ops):,} host ops, {len(tr.device_events):,} device events, "
          f"{fmt_time(report.wall_s)} wall ({where})")
    print(f"roofline     {report.device.id}, {report.dtype} ops at the {report.dtype} peak, {report.tier} tier "
          f"({report.source if len(report.source) <= 160 else report.source[:157] + '...'})")
    uncounted = report.uncovered
    print(f"counted      {len(counted):,} ops carry the work (every op is in --json); {len(uncounted):,} others do work "
          "no formula covers" + (f" ({', '.join(sorted(set(uncounted['name']))[:4])})" if len(uncounted) else ""))
    print(f"breakdown    of the {fmt_time(report.wall_s)}:")
    for name, seconds in report.breakdown:
        print(f"  {name:40s} {_t(seconds):>11s} {100 * seconds / report.wall_s:6.1f}%")
    if report.overlapped_comm_s:
        print(f"  {'(communication overlapped by compute)':40s} {_t(report.overlapped_comm_s):>11s}")
    cats = report.by_category()
    print("by category  measured = " + ("device time of its kernels" if tr.has_device else "host time") +
          "; attainable = roofline with the device's efficiency")
    print(f"  {'category':12s} {'ops':>5s} {'measured':>11s} {'attainable':>11s} {'ratio':>6s} {'achieved':>13s} "
          f"{'achieved':>11s}")
    for cat, r in cats.iterrows():
        print(f"  {cat:12s} {int(r['ops']):5d} {_t(r['measured_s']):>11s} {_t(r['attainable_s']):>11s} "
              f"{r['ratio']:6.2f} {_rate(r['achieved_flop_per_s'], 'FLOP/s'):>13s} {_rate(r['achieved_bytes_per_s'], 'B/s'):>11s}")
    sig = report.by_signature().head(top)
    print(f"slowest ops  (top {len(sig)} by measured time, grouped by shapes)")
    print(f"  {'op':28s} {'calls':>5s} {'measured':>11s} {'attainable':>11s} {'ratio':>6s} {'bound':8s} shapes")
    for _, r in sig.iterrows():
        flag = " !" if r["ratio"] > 2 else ""
        print(f"  {r['name'][:28]:28s} {int(r['calls']):5d} {_t(r['measured_s']):>11s} {_t(r['attainable_s']):>11s} "
              f"{r['ratio']:6.2f} {r['bound']:8s} {r['shapes'][:60]}{flag}")
    gemm, n = report.gemm_abs_ln
    if gemm is not None:
        print(f"GEMMs        median |ln(attainable/measured)| = {gemm:.3f} over {n} ops "
              f"(attainable {math.exp(gemm):.2f}x off measured, either way)")
    flagged = report.flagged
    print(f"flagged      {len(flagged)} ops above 2x their attainable time, {_t(float(flagged['measured_s'].sum()))} "
          "measured (marked ! above)")
    if whatifs:
        print(f"what-if      the same run elsewhere (host time x {whatifs[0].host_scale:g}; kernels replayed at their launch times)")
        print(f"  {'device':16s} {'tier':12s} {'wall':>11s} {'speedup':>8s} {'counted ops':>12s}")
        for w in whatifs:
            print(f"  {w.device:16s} {w.tier:12s} {_t(w.wall_s):>11s} {w.speedup:7.2f}x {_t(w.counted_s):>12s}")
    if found:
        print("advice       ranked by predicted wall-time gain (each re-predicted by the replay above)")
        for k, f in enumerate(found, 1):
            print(f"  {k}. {f.title}: {_t(f.wall_s)} ({100 * f.gain:+.0f}% throughput). {f.why}")


def _draw(report, path: str) -> None:
    from planner.plot import draw_roofline
    from planner.predict.timing import OpRow

    sig = report.by_signature()
    rows = [OpRow("trace", r["name"], r["category"], int(r["calls"]), r["flop"] / r["calls"], r["bytes"] / r["calls"],
                  r["measured_s"] / r["calls"], r["bound"], 0.0) for _, r in sig.iterrows()
            if r["measured_s"] > 0 and r["flop"] > 0 and r["bytes"] > 0]
    draw_roofline(path, report.device, rows, report.dtype,
                  f"{report.trace.source[:60]}: measured ops on the {report.device.id} roofline ({report.tier} ceilings)")
