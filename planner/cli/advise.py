"""`planner advise`: changes to one configuration ranked by the gain the predictor gives them."""

from __future__ import annotations

import argparse
import json

from planner.cli import progress
from planner.cli.args import deployment_flags, finite_float, fmt_time, positive_int
from planner.errors import ConfigError
from planner.units import json_safe, usd

OBJECTIVES = ("throughput", "latency", "cost", "energy")


def add_advise(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("advise", help="rank changes to a configuration by their predicted gain",
                       description="Re-predict a configuration under larger batches, other engines, precisions, "
                                   "parallelism and devices; list those that fit, meet the SLOs and gain on the "
                                   "objective, best first, each with the bound that moves.")
    deployment_flags(p)
    p.add_argument("--objective", choices=OBJECTIVES, default="throughput",
                   help="what to rank by: throughput per device, latency, $ per unit or J per unit")
    p.add_argument("--slo-ttft", type=finite_float, metavar="S", help="largest time to first token, s")
    p.add_argument("--slo-tpot", type=finite_float, metavar="S", help="largest time per output token, s")
    p.add_argument("--max-latency", type=finite_float, metavar="S",
                   help="largest latency: a request end to end (inference) or a step (training), s")
    p.add_argument("--top", type=positive_int, help="show the N best changes")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--trace", metavar="FILE", help="advise on a PyTorch Profiler trace instead of a MODEL (--device: "
                                                   "the device it ran on, default read from the trace)")
    p.add_argument("--on", action="append", metavar="DEVICE", help="with --trace: also weigh running on DEVICE")
    p.set_defaults(func=cmd_advise)


def cmd_advise(args: argparse.Namespace) -> int:
    if not args.trace:
        progress.step("importing", of=3)
    from planner.cli import imported
    from planner.cli.predict import _request
    from planner.trace.advise import advise
    from planner.cli.args import cli_model

    imported()
    if args.trace:
        if args.model:
            raise ConfigError("give a MODEL or --trace FILE, not both")
        return _advise_trace(args)
    if not args.model:
        raise ConfigError("give a MODEL or --trace FILE")
    if not args.device:
        raise ConfigError("advise needs --device")
    progress.step("reading the model")
    model = cli_model(args.model, args.allow_code)  # package.module:function only with --allow-code
    progress.step("predicting the configuration and each change")
    advice = advise(_request(args), objective=args.objective, slo_ttft_s=args.slo_ttft, slo_tpot_s=args.slo_tpot,
                    max_latency_s=args.max_latency, top=args.top, model=model)
    progress.done()
    if args.json:
        print(json.dumps(json_safe(advice.as_dict()), indent=2, allow_nan=False))
        return 0
    print_advice(advice)
    return 0


def print_advice(advice) -> None:
    """The baseline on one line, what was ranked and why on the next, then the ranked table."""
    b = advice.baseline
    p, req = b.prediction, b.request
    m = p.metrics
    batch = (f"micro-batch {m['micro_batch']}, global batch {m['global_batch']:,}" if "micro_batch" in m
             else f"batch {m.get('batch')}")
    times = ", ".join(f"{label} {fmt_time(v)}" for label, v in (("TTFT", b.ttft_s), ("TPOT", b.tpot_s)) if v is not None)
    print(f"baseline  {p.model} on {p.gpus} x {p.device} (tp {p.parallelism.tp}, pp {p.parallelism.pp}, "
          f"dp {p.parallelism.dp}), {req.mode}, engine {p.engine}, {p.dtype}, {batch}: "
          f"{b.throughput_per_s:,.1f} {b.throughput_unit}/s, {'step' if req.mode == 'training' else 'latency'} "
          f"{fmt_time(b.latency_s)}{f' ({times})' if times else ''}, {_usd(b.usd_per_unit)} per {b.cost_unit}, "
          f"{_num(b.j_per_unit)} J per {b.energy_unit}; {b.phase} {b.bound_share:.0%} {b.bound}-bound"
          + ("" if p.fits else f"; DOES NOT FIT (short by {p.memory.shortfall_bytes / 1e9:.1f} GB per device)"))
    slos = [f"{label} <= {fmt_time(v)}" for label, v in (("TTFT", advice.slo_ttft_s), ("TPOT", advice.slo_tpot_s),
                                                          ("latency", advice.max_latency_s)) if v is not None]
    what = {"throughput": f"{b.throughput_unit}/s per device", "latency": "latency", "cost": f"$ per {b.cost_unit}",
            "energy": f"J per {b.energy_unit}"}[advice.objective]
    n = advice.counts
    print(f"objective {advice.objective} ({what}); SLOs {', '.join(slos) or 'none'}; {n['predicted']} changes "
          f"predicted: {n['advised']} shown, {n['not_shown']} better but not shown (a better batch or device, or "
          f"--top), {n['failed']} not possible, {n['not_fitting']} do not fit, {n['over_slo']} break an SLO, "
          f"{n['not_better']} no gain, {n['within_band']} within the uncertainty band of another tier")
    if not advice.changes:
        print("\nno change is predicted to do better")
        return
    unit = "tok/s" if "token" in b.throughput_unit else "samples/s"
    width = max(len(c.title) for c in advice.changes)
    print(f"\n{'rank':>4}  {'change':<{width}}  {unit:>12}  {'latency':>9}  {'$/' + b.cost_unit:>14}  "
          f"{'J/' + b.energy_unit:>15}  {'gain':>7}  why")
    for rank, c in enumerate(advice.changes, 1):
        f = c.figures
        print(f"{rank:>4}  {c.title:<{width}}  {f.throughput_per_s:>12,.1f}  {fmt_time(f.latency_s):>9}  "
              f"{_usd(f.usd_per_unit):>14}  {_num(f.j_per_unit):>15}  {c.gain:>+7.0%}  {c.why}")


def _usd(value) -> str:
    return "not sourced" if value is None else usd(value)


def _num(value) -> str:
    return "not sourced" if value is None else f"{value:.3g}"


def _advise_trace(args: argparse.Namespace) -> int:
    """Findings of a traced run (planner/trace/findings.py), each priced by replaying the trace."""
    from planner.cli.trace import on_devices
    from planner.trace.analyze import analyze
    from planner.trace.findings import findings
    from planner.trace.read import read_trace
    from planner.trace.whatif import what_if

    report = analyze(read_trace(args.trace), args.device)
    whatifs = [what_if(report, d) for d in on_devices(args.on)]
    found = findings(report, whatifs)
    if args.json:
        print(json.dumps(json_safe({"trace": report.trace.source, "device": report.device.id, "tier": report.tier,
                                    "wall_s": report.wall_s, "findings": [f.as_dict() for f in found]}),
                         indent=2, allow_nan=False))
        return 0
    print(f"baseline  {report.trace.source} on {report.device.id} ({report.tier} ceilings): "
          f"{report.wall_s * 1e3:.2f} ms wall, as measured")
    if not found:
        print("no change the replay predicts to gain 1% or more")
    for k, f in enumerate(found, 1):
        print(f"{k:4d}  {f.title}: {f.wall_s * 1e3:.2f} ms ({100 * f.gain:+.0f}% throughput)")
        print(f"      why: {f.why}")
    return 0
