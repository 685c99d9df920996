"""The `planner` command line: argparse subcommands, each a thin function over the library.

Human units appear only here. Errors raised on purpose (PlannerError) print one line and exit 2;
argparse's own errors exit 2 with the usage line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from planner.counting import Counts, count
from planner.dtypes import DTYPES
from planner.errors import PlannerError
from planner.graphs import MODES, Workload, WorkloadGraph, build_graph
from planner.units import count as fmt_count
from planner.units import si
from planner.zoo import resolve

BY = ("op", "module", "category", "phase")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _add_count(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("count", help="count FLOP and bytes of a model's workload, op by op",
                       description="Capture the aten op graph of MODEL on meta tensors and count FLOP "
                                   "(2 per multiply-add) and bytes read and written.")
    p.add_argument("model", help="zoo id (e.g. llama-3.1-8b), path to a config.json, or package.module:function")
    p.add_argument("--mode", choices=MODES, default="inference",
                   help="inference = prefill for LMs, a forward pass otherwise (default: inference)")
    p.add_argument("--batch", type=_positive_int, default=1, help="batch (micro-batch in training); default 1")
    p.add_argument("--seq-len", type=_positive_int, help="prompt or sequence length (default 2048 for LMs, 128 for encoders)")
    p.add_argument("--context-len", type=_positive_int, help="decode: tokens already in the KV cache (default 2048)")
    p.add_argument("--image-size", type=_positive_int, help="vision: image side in pixels (default: the model's)")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16", help="default bf16")
    p.add_argument("--by", choices=BY, default="op", help="group the table by op, module, category or phase")
    p.add_argument("--top", type=int, default=20, help="rows of the table to print (0: all); default 20")
    p.add_argument("--counter", choices=("planner", "fvcore"), default="planner",
                   help="fvcore: also run fvcore's FlopCountAnalysis and compare")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_count)


def _totals(wg: WorkloadGraph, counts: Counts) -> dict:
    w = wg.workload
    return {
        "model": wg.model.name, "source": wg.model.source, "mode": w.mode, "batch": w.batch, "seq_len": w.seq_len,
        "context_len": w.context_len, "image_size": w.image_size, "dtype": w.dtype,
        "params": wg.params, "active_params": wg.active_params, "flop": counts.total.flop,
        "bytes_read": counts.total.bytes_read, "bytes_written": counts.total.bytes_written,
        "arithmetic_intensity_flop_per_byte": counts.total.intensity, "ops": len(counts.ops),
        "unsupported": [{"op": op, "calls": n} for op, n in counts.unsupported],
    }


def _describe(wg: WorkloadGraph) -> str:
    w = wg.workload
    sizes = {"prefill": f"{w.seq_len} prompt tokens", "decode": f"one token on a {w.context_len}-token KV cache",
             "training": f"sequence {w.seq_len}" if w.seq_len else f"{w.image_size}px images"}
    size = sizes.get(w.mode) or (f"sequence {w.seq_len}" if w.seq_len else f"{w.image_size}px images" if w.image_size else "")
    return f"{w.mode}, batch {w.batch}, {size}, {w.dtype}".replace(", ,", ",")


def _print_table(counts: Counts, by: str, top: int) -> None:
    frame = counts.table(by)
    if top > 0:
        frame = frame.head(top)
    width = max([len(str(i)) for i in frame.index] + [len(by)])
    print(f"\n{by:<{width}}  {'calls':>7}  {'FLOP':>12}  {'read':>10}  {'written':>10}  {'FLOP %':>6}")
    for key, row in frame.iterrows():
        print(f"{str(key):<{width}}  {int(row['calls']):>7}  {si(row['flop'], 'FLOP'):>12}  {si(row['bytes_read'], 'B'):>10}  "
              f"{si(row['bytes_written'], 'B'):>10}  {100 * row['flop_share']:>6.2f}")
    hidden = len(counts.table(by)) - len(frame)
    if hidden:
        print(f"... {hidden} more rows (--top 0 shows all)")


def cmd_count(args: argparse.Namespace) -> int:
    model = resolve(args.model)
    wg = build_graph(model, Workload(mode=args.mode, batch=args.batch, seq_len=args.seq_len,
                                     context_len=args.context_len, image_size=args.image_size, dtype=args.dtype))
    counts = count(wg.graph)
    comparison = None
    if args.counter == "fvcore":
        from planner.fvcore_check import compare
        comparison = compare(wg, counts)
    if args.json:
        out = _totals(wg, counts)
        frame = counts.table(args.by)
        out["by"] = args.by
        out["table"] = [{args.by: str(k), **{c: (int(v) if c == "calls" else float(v)) for c, v in row.items()}}
                        for k, row in frame.iterrows()]
        if comparison is not None:
            out["fvcore"] = {"by_operator_flop": comparison.fvcore_by_operator, "unsupported": comparison.fvcore_unsupported,
                             "ours_compared_flop": comparison.ours_compared_flop,
                             "fvcore_compared_flop": comparison.fvcore_compared_flop, "ratio": comparison.ratio}
        print(json.dumps(out, indent=2))
        return 0
    t = counts.total
    print(f"model          {wg.model.name}  ({wg.model.source})")
    print(f"workload       {_describe(wg)}")
    active = f"  (active per token {fmt_count(wg.active_params)})" if wg.active_params != wg.params else ""
    print(f"parameters     {fmt_count(wg.params)}{active}")
    print(f"FLOP           {t.flop:.4e}  ({si(t.flop, 'FLOP')})")
    print(f"bytes read     {t.bytes_read:.4e}  ({si(t.bytes_read, 'B')})")
    print(f"bytes written  {t.bytes_written:.4e}  ({si(t.bytes_written, 'B')})")
    print(f"intensity      {t.intensity:.1f} FLOP/byte")
    print(f"ops            {len(counts.ops)} executed")
    if counts.unsupported:
        listed = ", ".join(f"{op} x{n}" for op, n in counts.unsupported)
        print(f"UNSUPPORTED    {listed}  (no formula: their cost is not in the totals)")
    else:
        print("unsupported    none")
    _print_table(counts, args.by, args.top)
    if comparison is not None:
        print("\nfvcore cross-check (fvcore counts a multiply-add as 1 FLOP; shown x2)")
        for op, flop in sorted(comparison.fvcore_by_operator.items(), key=lambda kv: -kv[1]):
            print(f"  fvcore {op:<22} {flop:.4e}")
        print(f"  matmul+conv: ours {comparison.ours_compared_flop:.4e}, fvcore {comparison.fvcore_compared_flop:.4e}, "
              f"ratio {comparison.ratio:.4f}")
        if comparison.fvcore_unsupported:
            print("  fvcore skipped: " + ", ".join(f"{k} x{v}" for k, v in comparison.fvcore_unsupported.items()))
    return 0


def _batch(text: str) -> int | str:
    return "auto" if text == "auto" else _positive_int(text)


def _workload_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=("inference", "training"), default="inference")
    p.add_argument("--batch", type=_batch, default=1, help="sequences or images per batch, or 'auto' (inference)")
    p.add_argument("--input-len", type=_positive_int, help="LLM prompt tokens (default 1024)")
    p.add_argument("--output-len", type=_positive_int, default=256, help="LLM generated tokens (default 256)")
    p.add_argument("--seq-len", type=_positive_int, help="sequence length (encoders, training)")
    p.add_argument("--image-size", type=_positive_int, help="vision: image side in pixels")
    p.add_argument("--global-batch", type=_positive_int, help="training: sequences per optimizer step")
    p.add_argument("--micro-batch", type=_positive_int, help="training: sequences per micro-batch (default --batch)")
    p.add_argument("--micro-batches", dest="microbatches", type=_positive_int,
                   help="training: pipeline micro-batches per step (default 4 x pp)")
    p.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    p.add_argument("--train-tokens", type=float, help="training: tokens to train on (time, energy and cost to train)")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    p.add_argument("--pricing", choices=("on_demand", "spot", "committed_1y", "committed_3y"), default="on_demand")


def _add_predict(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict latency, throughput, memory, energy and cost on a catalog device",
                       description="Predict a workload on a catalog device from its counted graph, the device's "
                                   "datasheet or calibration, parallelism and prices.")
    p.add_argument("model", nargs="?", help="zoo id, config.json path or package.module:function")
    p.add_argument("--device", help="catalog device id or alias (e.g. h100-sxm, H100, mi300x)")
    p.add_argument("--gpus", type=_positive_int, help="devices in the deployment (default tp x pp x dp)")
    for name, text in (("tp", "tensor-parallel degree"), ("pp", "pipeline stages"), ("ep", "expert-parallel degree")):
        p.add_argument(f"--{name}", type=_positive_int, default=1, help=text)
    p.add_argument("--dp", type=_positive_int, help="data-parallel replicas (default gpus / (tp x pp))")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage (3 = FSDP)")
    p.add_argument("--overlap", type=float, default=0.8, help="share of data-parallel communication hidden (0-1)")
    _workload_flags(p)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--instance", help="cloud instance to price on (default: the cheapest with the device)")
    where.add_argument("--site", help="on-prem site id to price on (TCO)")
    p.add_argument("--utilization", type=float, default=1.0, help="on-prem: share of hours doing useful work")
    p.add_argument("--ops", action="store_true", help="print the per-op table with bounds")
    p.add_argument("--roofline", metavar="FILE.png", help="draw the device roofline with every op as a point")
    p.add_argument("--configs", metavar="FILE", help="JSONL or CSV of configurations, one per row (keys: flag names "
                                                     "with underscores, plus an optional id)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_predict)


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare every catalog device on one workload",
                       description="One row per device: the smallest tensor-parallel group that fits, on its "
                                   "cheapest catalog instance.")
    p.add_argument("model")
    p.add_argument("--devices", default="all", help="'all' or a comma-separated list of device ids")
    _workload_flags(p)
    p.add_argument("--sort", choices=("cost", "latency", "throughput", "energy"), default="cost")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_compare)


def _request(args: argparse.Namespace):
    from planner.predict import Request

    return Request(model=args.model, device=args.device, mode=args.mode, gpus=args.gpus, tp=args.tp, pp=args.pp,
                   dp=args.dp, ep=args.ep, zero=args.zero, batch=args.batch, input_len=args.input_len,
                   output_len=args.output_len, seq_len=args.seq_len, image_size=args.image_size,
                   global_batch=args.global_batch, micro_batch=args.micro_batch, microbatches=args.microbatches,
                   recompute=args.recompute, dtype=args.dtype, instance=args.instance, site=args.site,
                   pricing=args.pricing, utilization=args.utilization, overlap=args.overlap,
                   train_tokens=args.train_tokens)


def _fmt_time(seconds: float) -> str:
    if seconds >= 3600 * 24:
        return f"{seconds / 86400:.2f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 1:
        return f"{seconds:.3f} s"
    return f"{seconds * 1e3:.2f} ms"


def _print_prediction(p) -> None:
    d = p.as_dict()
    m = p.metrics
    par = p.parallelism
    print(f"{p.model} on {p.gpus} x {p.device}  (tp {par.tp}, pp {par.pp}, dp {par.dp}, ep {par.ep}, zero {par.zero}), "
          f"{p.mode}, {p.dtype}")
    print(f"tier           {p.tier}  (band +-{p.band_fraction:.0%})")
    mem = p.memory
    status = "fits" if p.fits else f"DOES NOT FIT: short by {mem.shortfall_bytes / 1e9:.1f} GB per device"
    print(f"memory/device  {mem.total_bytes / 1e9:.1f} GB of {mem.capacity_bytes / 1e9:.1f} GB usable: {status}")
    print(f"               weights {mem.weights_bytes / 1e9:.1f}, KV cache {mem.kv_cache_bytes / 1e9:.2f}, "
          f"activations {mem.activation_bytes / 1e9:.2f}, gradients {mem.gradient_bytes / 1e9:.1f}, "
          f"optimizer {mem.optimizer_bytes / 1e9:.1f}, workspace {mem.workspace_bytes / 1e9:.1f} GB")
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("latency_s", "latency"), ("step_time_s", "step time")):
        if key in m:
            lo, hi = p.band(m[key])
            print(f"{label:<15}{_fmt_time(m[key])}  ({_fmt_time(lo)} .. {_fmt_time(hi)})")
    for key, label in (("throughput_tokens_per_s", "tokens out/s"), ("throughput_samples_per_s", "samples/s"),
                       ("tokens_per_s", "tokens/s"), ("samples_per_s", "samples/s")):
        if key in m:
            lo, hi = p.band(m[key], inverse=True)
            print(f"{label:<15}{m[key]:,.1f}  ({lo:,.1f} .. {hi:,.1f})".replace(f"{label:<15}", f"{label:<14} ", 1)
                  if len(label) >= 15 else f"{label:<15}{m[key]:,.1f}  ({lo:,.1f} .. {hi:,.1f})")
    if "mfu" in m:
        print(f"MFU            {m['mfu']:.1%}   (pipeline bubble {m['pipeline_bubble_fraction']:.1%})")
    if "batch" in m:
        print(f"batch          {m['batch']}")
    energy_unit = ("j_per_output_token", "J/output token"), ("j_per_sample", "J/sample"), ("j_per_step", "J/step")
    for key, label in energy_unit:
        if key in m:
            print(f"energy         {m[key]:.3g} {label}, {m['average_power_w_per_gpu']:.0f} W average per device")
    for key in [k for k in m if k.startswith("kwh_per_")]:
        unit = key.removeprefix("kwh_per_").replace("_", " ")
        carbon = m.get("carbon_kg_per_" + key.removeprefix("kwh_per_"))
        carbon_text = f", {carbon:,.3g} kg CO2e at {m['carbon_kg_co2e_per_kwh']:.3f} kg/kWh" if carbon is not None else ""
        print(f"               {m[key]:,.3g} kWh per {unit}{carbon_text}")
    if p.cost is not None:
        print(f"cost           ${p.cost.usd_per_h:,.2f}/h  ({p.cost.what}; price of {p.cost.price_date})")
        for key, label in (("usd_per_million_output_tokens", "$ per 1M output tokens"),
                           ("usd_per_thousand_samples", "$ per 1k samples"), ("cost_to_train_usd", "$ to train")):
            if key in m:
                print(f"               {label}: ${m[key]:,.4g}")
    if "time_to_train_s" in m:
        print(f"time to train  {_fmt_time(m['time_to_train_s'])} for {m['train_tokens']:.3g} tokens")
    print(f"catalog rows   {', '.join(d['catalog_rows'])}")
    for note in p.notes:
        print(f"note           {note}")


def _read_configs(path: str) -> list[dict]:
    import csv
    from pathlib import Path

    from planner.errors import ConfigError

    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"--configs: file '{path}' does not exist")
    text = file.read_text()
    if file.suffix == ".csv":
        return [dict(row) for row in csv.DictReader(text.splitlines())]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            row = {"__error__": f"line {number}: not valid JSON ({exc.msg})"}
        rows.append(row if isinstance(row, dict) else {"__error__": f"line {number}: expected a JSON object"})
    return rows


def _run_configs(args: argparse.Namespace) -> int:
    from planner.predict import predict, request_from_row

    for row in _read_configs(args.configs):
        ident = row.get("id")
        try:
            if "__error__" in row:
                raise PlannerError(row["__error__"])
            if "op" in row:
                from planner.ops import predict_op_row
                out = predict_op_row(row)
            else:
                out = predict(request_from_row(row)).as_dict()
            print(json.dumps({"id": ident, **out}, default=str))
        except PlannerError as exc:
            print(json.dumps({"id": ident, "error": str(exc)}))
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from planner.errors import ConfigError
    from planner.predict import op_rows, predict

    if args.configs:
        return _run_configs(args)
    if not args.model or not args.device:
        raise ConfigError("predict needs MODEL and --device (or --configs FILE)")
    req = _request(args)
    prediction = predict(req)
    rows = op_rows(req) if (args.ops or args.roofline) else {}
    if args.roofline:
        from planner.plot import draw_roofline
        from planner.prediction import default_context
        device = default_context().device(args.device)
        everything = [r for group in rows.values() for r in group]
        draw_roofline(args.roofline, device, everything, args.dtype, f"{args.model} on {device.id} ({args.dtype}): "
                      f"{', '.join(rows)} ops")
    if args.json:
        out = prediction.as_dict()
        if args.ops:
            out["ops"] = {name: [r.__dict__ if hasattr(r, "__dict__") else _row_dict(r) for r in group]
                          for name, group in rows.items()}
        print(json.dumps(out, indent=2, default=str))
        return 0
    _print_prediction(prediction)
    if args.roofline:
        print(f"roofline       written to {args.roofline}")
    for name, group in rows.items():
        print(f"\n{name} ops on one device (count includes every layer; time per call)")
        print(f"{'op':<52} {'role':<6} {'count':>6} {'FLOP':>10} {'bytes':>10} {'time':>10} {'bound':<9}")
        for r in sorted(group, key=lambda r: -r.time_s * r.count):
            print(f"{r.op[:52]:<52} {r.role:<6} {r.count:>6} {si(r.flop):>10} {si(r.bytes, 'B'):>10} "
                  f"{_fmt_time(r.time_s):>10} {r.bound:<9}")
    return 0


def _row_dict(r) -> dict:
    return {f: getattr(r, f) for f in r.__dataclass_fields__}


def cmd_compare(args: argparse.Namespace) -> int:
    from planner.predict import compare

    devices = None if args.devices == "all" else [d.strip() for d in args.devices.split(",") if d.strip()]
    training = {}
    if args.mode == "training":
        training = {k: getattr(args, k) for k in ("global_batch", "micro_batch", "microbatches", "recompute",
                                                   "train_tokens")}
    frame = compare(args.model, devices, args.mode, args.batch, args.input_len, args.output_len, args.seq_len,
                    args.image_size, args.dtype, args.pricing, args.sort, **training)
    if args.json:
        print(frame.to_json(orient="records", indent=2))
        return 0
    unit = "$/1M tok" if "ttft_s" in frame and frame["ttft_s"].notna().any() else "$/unit"
    print(f"{'device':<15} {'gpus':>4} {'fits':>5} {'tier':<10} {'latency':>10} {'throughput':>12} {'$/h':>8} "
          f"{unit:>9} {'J/unit':>8} {'GB/gpu':>7}  instance / note")
    for _, r in frame.iterrows():
        if r["tier"] is None or r.get("latency_s") is None or r["latency_s"] != r["latency_s"]:
            print(f"{r['device']:<15} {'-':>4} {'-':>5} {'-':<10} {'-':>10} {'-':>12} {'-':>8} {'-':>9} {'-':>8} {'-':>7}  "
                  f"{r['note']}")
            continue
        num = lambda v, f: "-" if v is None or v != v else format(v, f)
        print(f"{r['device']:<15} {int(r['gpus']):>4} {str(bool(r['fits'])):>5} {r['tier']:<10} "
              f"{_fmt_time(r['latency_s']):>10} {r['throughput']:>12,.1f} {num(r['usd_per_h'], '.2f'):>8} "
              f"{num(r['usd_per_unit'], '.3f'):>9} {num(r['j_per_unit'], '.3g'):>8} {r['memory_gb_per_gpu']:>7.1f}  "
              + (f"{r['instance']} (price of {r['price_date']})" if isinstance(r["instance"], str)
                 else "(no catalog instance)"))
    return 0


def _add_calibrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure how efficiently each kind of op runs on the local device",
                       description="Run microbenchmarks on the local device within a time budget (resumable) and "
                                   "write a calibration profile under hardware_specs/calibration/<device-id>/.")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    p.add_argument("--budget-s", type=float, default=600.0, help="time budget in seconds (default 600)")
    p.add_argument("--out", help="profile root directory (default hardware_specs/calibration)")
    p.add_argument("--refit", action="store_true",
                   help="measure nothing: refit the efficiency model of every profile under --out")
    p.add_argument("--recheck", action="store_true",
                   help="re-measure the outlying points of this device's profile within --budget-s, then refit")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from planner.bench import local_device
    from planner.calibrate import DEFAULT_OUT, calibrate, recheck_profile, refit

    if args.recheck:
        path = Path(args.out or DEFAULT_OUT) / local_device(args.device).id / "profile.json"
        if not path.exists():
            raise PlannerError(f"no profile at {path}: run `planner calibrate --device {args.device}` first")
        recheck_profile(path, args.device, args.budget_s)
        return 0
    if args.refit:
        for path in sorted(Path(args.out or DEFAULT_OUT).glob("*/profile.json")):
            refit(path)
        return 0
    try:
        calibrate(args.device, args.budget_s, args.out)
    except KeyboardInterrupt:
        print("\nplanner: calibration interrupted; measurements so far are kept: run the same command again "
              "to resume", file=sys.stderr)
        return 130
    return 0


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="measure real models and ops here and compare with predictions",
                       description="Run real models (random weights) and off-grid op shapes on the local device, "
                                   "predict the same from its calibration profile, and print the error.")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--models", nargs="*", help="cases like resnet50:b=8, bert-base:b=1:s=128, gpt2:decode:b=1:c=256 "
                                               "(default: the device's standard set)")
    p.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), help="default fp32 on CPU, bf16 on GPU")
    p.add_argument("--budget-per-case-s", type=float, default=2.0, help="timing budget per model case")
    p.add_argument("--json", action="store_true", help="print one JSON row per case")
    p.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    from planner.validate import fmt_table, summary, validate

    log = (lambda text: print(text, file=sys.stderr)) if args.json else print
    cases = validate(args.device, tuple(args.models) if args.models is not None else None, args.dtype,
                     args.budget_per_case_s, log)
    if args.json:
        print(json.dumps({"cases": [c.as_dict() for c in cases], "summary": summary(cases)}, indent=2))
    else:
        print()
        print(fmt_table(cases))
    return 0


def _add_op(sub: argparse._SubParsersAction) -> None:
    from planner.ops import OPS

    p = sub.add_parser("op", help="predict one GEMM, copy, host-to-device copy or collective",
                       description="Predict the time of one op on a device from its calibration profile or datasheet.")
    p.add_argument("op", choices=OPS)
    p.add_argument("--device", required=True, help="catalog id or alias, or a profiled local device id")
    p.add_argument("--m", type=_positive_int)
    p.add_argument("--n", type=_positive_int)
    p.add_argument("--k", type=_positive_int)
    p.add_argument("--dtype", choices=list(DTYPES), default="fp32")
    p.add_argument("--bytes", type=float, help="message or buffer size in bytes")
    p.add_argument("--gpus", type=_positive_int, help="collectives: devices taking part")
    p.add_argument("--nodes", type=_positive_int, default=1, help="collectives: nodes they span")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_op)


def cmd_op(args: argparse.Namespace) -> int:
    from planner.ops import predict_op

    p = predict_op(args.op, args.device, m=args.m, n=args.n, k=args.k, dtype=args.dtype, nbytes=args.bytes,
                   gpus=args.gpus, nodes=args.nodes)
    d = p.as_dict()
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    units = {"flop_per_s": "FLOP/s", "bytes_per_s": "B/s", "bus_bytes_per_s": "B/s (bus)"}
    lo, hi = d["time_range_s"]
    print(f"{p.op} on {p.device}: {_fmt_time(p.time_s)} ({_fmt_time(lo)} .. {_fmt_time(hi)}), "
          f"{si(p.rate, units[p.rate_key])}, {p.bound}-bound, tier {p.tier}")
    return 0


def _add_plan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="recommend the instance mix and cluster size for a scenario",
                       description="Solve a procurement scenario (YAML) with a MILP over catalog instances and "
                                   "on-prem servers; capacities come from the predictor.")
    p.add_argument("scenario", help="scenario YAML (see examples/)")
    p.add_argument("--objective", choices=("cost", "energy", "carbon"), help="override the scenario's objective")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from planner.plan import solve
    from planner.plan_check import check
    from planner.scenario import load

    scenario = load(args.scenario)
    if args.objective:
        scenario = replace(scenario, objective=args.objective, weights=((args.objective, 1.0),))
    plan = solve(scenario)
    problems = check(plan, scenario)
    if args.json:
        out = plan.as_dict()
        out["check"] = {"passed": not problems, "problems": problems}
        print(json.dumps(out, indent=2, default=str))
        return 0 if not problems else 1
    print(f"plan for '{plan.scenario}' (objective {plan.objective}, {scenario.horizon_months:g} months)")
    print(f"{'candidate':<58} {'units':>5} {'GPUs':>5} {'$/month':>10} {'capex':>10} {'kW':>6} {'util':>5}  serves")
    for r in plan.rows:
        serves = ", ".join(f"{f} {rps:.2f} req/s" for f, rps in r.serves) + (f" trains {', '.join(r.trains)}" if r.trains else "")
        print(f"{r.candidate[:58]:<58} {r.units:>5} {r.devices:>5} {r.usd_per_month:>10,.0f} {r.capex_usd:>10,.0f} "
              f"{r.power_kw:>6.1f} {r.utilization:>5.0%}  {serves}  (price of {r.price_date})")
    for t in plan.training:
        print(f"training {t['job']}: {t['units']} x {t['candidate']} (tp {t['tp']}, dp {t['dp']}), "
              f"{t['days']:.2f} days, ${t['cost_usd']:,.0f}, {t['energy_kwh']:,.0f} kWh")
    print(f"total          ${plan.usd_per_month:,.0f}/month, ${plan.cost_over_horizon_usd:,.0f} over the horizon, "
          f"capex ${plan.capex_usd:,.0f}, on-prem power {plan.power_kw:.1f} kW")
    print(f"energy         {plan.energy_kwh:,.0f} kWh, {plan.carbon_kg:,.0f} kg CO2e over the horizon")
    if plan.best_single:
        b = plan.best_single
        print(f"best single    {b['device']}: ${b['cost_over_horizon_usd']:,.0f}; this plan saves ${b['saving_usd']:,.0f} "
              f"({b['saving_fraction']:.1%})")
    for pt in plan.pareto:
        print(f"pareto         energy weight {pt['energy_weight']:.2f}: ${pt['cost_usd']:,.0f}, {pt['energy_kwh']:,.0f} kWh")
    for s in plan.sensitivity:
        if s.get("feasible"):
            print(f"prices x{s['price_factor']:.1f}     ${s['cost_usd']:,.0f}; mix {'changes' if s['plan_changed'] else 'unchanged'}")
    for b in plan.breakeven:
        months = f"{b['breakeven_months']:.1f} months" if b["breakeven_months"] else "never"
        print(f"break-even     {b['device']}: over the horizon, owning one server costs "
              f"${b['onprem_over_horizon_usd']:,.0f} (capex ${b['capex_usd']:,.0f} + ${b['onprem_opex_usd_per_month']:,.0f}"
              f"/month) vs renting its devices ${b['cloud_over_horizon_usd']:,.0f} ({b['cloud_instance']}); buying "
              f"pays off after {months}; renting is cheaper below {b['breakeven_utilization']:.0%} utilization")
    for note in plan.notes:
        print(f"note           {note}")
    print("check          " + ("passed: every assignment re-predicted meets demand, SLOs, budget and power"
                               if not problems else "FAILED: " + "; ".join(problems)))
    return 0 if not problems else 1


def parser() -> argparse.ArgumentParser:
    """The argument parser of the `planner` command."""
    p = argparse.ArgumentParser(prog="planner", description="Performance model and capacity planner for AI workloads.")
    sub = p.add_subparsers(dest="command", required=True)
    _add_count(sub)
    _add_predict(sub)
    _add_compare(sub)
    _add_calibrate(sub)
    _add_validate(sub)
    _add_op(sub)
    _add_plan(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run one subcommand; return the exit status (0 ok, 2 bad input)."""
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except PlannerError as exc:
        print(f"planner: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("planner: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
