"""`planner predict` and `planner compare`: one configuration, a file of them, or every device."""

from __future__ import annotations

import argparse
import json
import math

from planner.cli import progress
from planner.cli.args import code_flag, deployment_flags, fmt_time, positive_int, precision_of, workload_flags
from planner.errors import ConfigError, PlannerError
from planner.units import band_label, json_safe, si, usd


def add_predict(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict latency, throughput, memory, energy and cost on a catalog device",
                       description="Predict a workload on a catalog device from its counted graph, the device's "
                                   "datasheet or calibration, parallelism and prices.")
    deployment_flags(p)
    p.add_argument("--ops", action="store_true", help="print the per-op table with bounds")
    p.add_argument("--roofline", metavar="FILE.png", help="draw the device roofline with every op as a point")
    p.add_argument("--configs", metavar="FILE", help="JSONL or CSV of configurations, one per row (keys: flag names "
                                                     "with underscores, plus an optional id)")
    p.add_argument("--json", action="store_true", help="print JSON")
    # no --batch: 1, or a package.module:function model's example batch (user_model.default_batch)
    p.set_defaults(func=cmd_predict, batch=None)


def add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare every catalog device on one workload",
                       description="One row per device: the smallest tensor-parallel group that fits, on its "
                                   "cheapest catalog instance.")
    p.add_argument("model", help="zoo id, config.json path, path/to/model.py:function, or package.module:function "
                                 "with --allow-code")
    code_flag(p)
    p.add_argument("--devices", default="all", help="'all' or a comma-separated list of device ids")
    p.add_argument("--gpus", type=positive_int,
                   help="devices per configuration, as predict's --gpus (tp x dp: the smallest tensor-parallel "
                        "group dividing it that fits); default one group replicated to fill its cheapest instance")
    workload_flags(p)
    p.add_argument("--sort", choices=("cost", "latency", "throughput", "energy"), default="cost")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_compare, batch=None)


def _request(args: argparse.Namespace, batch: int | str | None = None):
    """The Request of the parsed flags; `batch` in place of --batch (predict's default for a user's model)."""
    from planner.predict.api import Request

    batch = args.batch if batch is None else batch
    return Request(model=args.model, device=args.device, mode=args.mode, gpus=args.gpus, tp=args.tp, pp=args.pp,
                   dp=args.dp, ep=args.ep, zero=args.zero, batch=batch, input_len=args.input_len,
                   output_len=args.output_len, seq_len=args.seq_len, image_size=args.image_size,
                   global_batch=args.global_batch, micro_batch=args.micro_batch, microbatches=args.microbatches,
                   recompute=args.recompute, mixed_precision=args.mixed_precision, optimizer=args.optimizer,
                   dtype=precision_of(args),
                   instance=args.instance, site=args.site,
                   pricing=args.pricing, utilization=args.utilization, overlap=args.overlap,
                   train_tokens=args.train_tokens, scaleout_gbps=getattr(args, "scaleout_gbps", None),
                   power_limit_w=getattr(args, "power_limit_w", None), engine=args.engine)


def _print_prediction(p, example=None, fitting_tp: int | None = None) -> None:
    """Print a prediction; `example`: a package.module:function model's (user_model.Example), which says
    what a batch holds and names the rate's unit (sequences/s, images/s, samples/s); `fitting_tp`: a wider
    tensor-parallel group that fits where this one does not (api.tp_that_fits)."""
    from planner.hardware.catalog import dated
    from planner.workload.quant import describe, precision

    d = p.as_dict()
    m = p.metrics
    par = p.parallelism
    print(f"{p.model} on {p.gpus} x {p.device}  (tp {par.tp}, pp {par.pp}, dp {par.dp}, ep {par.ep}, zero {par.zero}), "
          f"{p.mode}, {describe(p.dtype)}, engine {p.engine}")
    batch = m.get("batch", m.get("micro_batch"))
    if example is not None and isinstance(batch, int):
        scaled = ("" if example.batch is None else f"; example batch {example.batch:,}, --batch "
                  + ("calls the function with batch=B" if example.by_argument else "scales dim 0 of its inputs"))
        print(f"inputs         {example.label(batch)}{' per device' if 'micro_batch' in m else ''}{scaled}")
    per_item = f"{example.noun()}/s" if example is not None else "samples/s"
    print(f"tier           {p.tier}  (band {band_label(p.band_fraction)})")
    if p.band_basis:
        print(f"band from      {p.band_basis}")
    mem = p.memory
    status = "fits" if p.fits else f"DOES NOT FIT: short by {mem.shortfall_bytes / 1e9:.1f} GB per device"
    print(f"memory/device  {mem.total_bytes / 1e9:.1f} GB of {mem.capacity_bytes / 1e9:.1f} GB usable: {status}")
    print(f"               weights {mem.weights_bytes / 1e9:.1f}, KV cache {mem.kv_cache_bytes / 1e9:.2f}, "
          f"activations {mem.activation_bytes / 1e9:.2f}, gradients {mem.gradient_bytes / 1e9:.1f}, "
          f"optimizer {mem.optimizer_bytes / 1e9:.1f}, workspace {mem.workspace_bytes / 1e9:.1f} GB")
    if not p.fits and fitting_tp is not None:
        print(f"               does not fit in memory at tp={par.tp}; --tp {fitting_tp} fits")
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("latency_s", "latency"), ("step_time_s", "step time")):
        if key in m:
            lo, hi = p.band(m[key])
            print(f"{label:<15}{fmt_time(m[key])}  ({fmt_time(lo)} .. {fmt_time(hi)})")
    for key, label in (("throughput_tokens_per_s", "tokens out/s"), ("throughput_samples_per_s", per_item),
                       ("tokens_per_s", "tokens/s"), ("samples_per_s", per_item)):
        if key in m:
            lo, hi = p.band(m[key], inverse=True)
            print(f"{label:<15}{m[key]:,.1f}  ({lo:,.1f} .. {hi:,.1f})".replace(f"{label:<15}", f"{label:<14} ", 1)
                  if len(label) >= 15 else f"{label:<15}{m[key]:,.1f}  ({lo:,.1f} .. {hi:,.1f})")
    if "microbatches" in m:
        steps = m["microbatches"]
        print(f"micro-batch    {m['micro_batch']} per device, {steps} accumulation step{'s' if steps != 1 else ''} "
              f"per optimizer step (global batch {m['global_batch']:,})")
    if "mfu" in m:
        print(f"MFU            {m['mfu']:.1%}   (pipeline bubble {m['pipeline_bubble_fraction']:.1%})")
    if "batch" in m:
        print(f"batch          {m['batch']}")
    if "kv_cache_capacity_tokens" in m and not precision(p.dtype).plain:  # what a quantized KV cache buys
        print(f"KV capacity    {m['kv_cache_capacity_tokens']:,} tokens per model copy: at most "
              f"{m['max_batch_in_memory']:,} sequences of {m['input_len'] + m['output_len']:,} tokens")
    energy_unit = ("j_per_output_token", "J/output token"), ("j_per_sample", "J/sample"), ("j_per_step", "J/step")
    for key, label in energy_unit:
        if key in m and math.isfinite(m[key]):
            print(f"energy         {m[key]:.3g} {label}, {m['average_power_w_per_gpu']:.0f} W average per device")
        elif key in m:
            print(f"energy         not sourced ({p.device} has no TDP in the catalog)")
    for key in [k for k in m if k.startswith("kwh_per_")]:
        unit = key.removeprefix("kwh_per_").replace("_", " ")
        carbon = m.get("carbon_kg_per_" + key.removeprefix("kwh_per_"))
        carbon_text = f", {carbon:,.3g} kg CO2e at {m['carbon_kg_co2e_per_kwh']:.3f} kg/kWh" if carbon is not None else ""
        print(f"               {m[key]:,.3g} kWh per {unit}{carbon_text}")
    if any(key in m and math.isfinite(m[key]) for key, _ in energy_unit):
        print(f"power model    {p.power_model}")
    if p.cost is not None:
        print(f"cost           ${p.cost.usd_per_h:,.2f}/h  ({p.cost.what}; price of {dated(p.cost.price_date)})")
        for key, label in (("usd_per_million_output_tokens", "$ per 1M output tokens"),
                           ("usd_per_thousand_samples", "$ per 1k samples"), ("cost_to_train_usd", "$ to train")):
            if key in m:
                print(f"               {label}: {usd(m[key])}")
    if "time_to_train_s" in m:
        print(f"time to train  {fmt_time(m['time_to_train_s'])} for {m['train_tokens']:.3g} "
              f"{m.get('train_unit', 'tokens')}")
    print(f"catalog rows   {', '.join(d['catalog_rows'])}")
    for note in p.notes:
        print(f"note           {note}")


MAX_CONFIG_ROWS = 1_000_000
"""Rows of a --configs file accepted: a million predictions take about 20 minutes on one core."""


def _read_configs(path: str) -> list[dict]:
    """The rows of a --configs file (JSONL or CSV); a row that cannot be read becomes {"__error__": why}."""
    import csv

    from planner.errors import ConfigError, shorten
    from planner.files import parse_json, read_text

    text = read_text(path, "--configs")
    lines = text.splitlines()
    csv_file = path.endswith(".csv")
    # rows: the non-blank lines, less a CSV file's header
    rows_given = sum(1 for line in lines if line.strip()) - (1 if csv_file else 0)
    if rows_given > MAX_CONFIG_ROWS:
        raise ConfigError(f"--configs: {rows_given:,} rows; the limit is {MAX_CONFIG_ROWS:,}")
    if rows_given <= 0:
        raise ConfigError(f"--configs '{shorten(path)}' holds no configuration: give one per line (JSONL), or a "
                          "CSV header of keys and one row per configuration")
    if csv_file:
        rows = []
        reader = csv.DictReader(lines, restkey="__extra__")
        try:
            for number, row in enumerate(reader, 2):
                if "__extra__" in row:
                    row = {"__error__": f"line {number}: {len(row['__extra__'])} more cells than the header"}
                rows.append({k: v for k, v in row.items() if v is not None})
        except csv.Error as exc:  # e.g. a cell over the csv module's limit of 131,072 characters
            raise ConfigError(f"--configs: line {reader.line_num + 1}: not valid CSV ({exc}); give one configuration "
                              "per line, comma-separated, under a header of keys") from None
        return rows
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = parse_json(line, f"line {number}")
        except ConfigError as exc:
            row = {"__error__": str(exc)}
        rows.append(row if isinstance(row, dict) else {"__error__": f"line {number}: expected a JSON object"})
    return rows


def _serve_row(row: dict) -> bool:
    from planner.serve.api import is_serve_row

    return is_serve_row(row)


def _run_configs(args: argparse.Namespace) -> int:
    from planner.predict.api import predict, request_from_row

    for row in _read_configs(args.configs):
        ident = row.get("id")
        if not isinstance(ident, (str, int, type(None))) or isinstance(ident, bool) or len(str(ident)) > 200:
            ident = None  # an id is echoed back: only a short string or an integer
        try:
            if "__error__" in row:
                raise PlannerError(row["__error__"])
            if "op" in row:
                from planner.predict.ops import predict_op_row
                out = predict_op_row(row)
            elif _serve_row(row):
                from planner.serve.api import serve_row
                out = serve_row(row)
            else:
                out = predict(request_from_row(row)).as_dict()
            print(json.dumps(json_safe({"id": ident, **out}), default=str, allow_nan=False))
        except PlannerError as exc:
            print(json.dumps({"id": ident, "error": " ".join(str(exc).split())}))
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    steps = 3 + bool(args.ops or args.roofline) + bool(args.roofline)
    if not args.configs:  # a file of configurations prints each row as it is predicted
        progress.step("importing", of=steps)
    from planner.cli import imported
    from planner.errors import ConfigError
    from planner.predict.api import op_rows, predict, tp_that_fits
    from planner.workload.user_model import default_batch, example_of
    from planner.cli.args import cli_model

    imported()

    if args.configs:
        return _run_configs(args)
    if not args.model or not args.device:
        raise ConfigError("predict needs MODEL and --device (or --configs FILE)")
    if args.roofline:
        from planner.plot import check_target
        check_target(args.roofline)  # before any work
    progress.step("reading the model")
    model = cli_model(args.model, args.allow_code)  # package.module:function only with --allow-code
    req = _request(args, args.batch if args.batch is not None else default_batch(model))
    progress.step("counting its graphs and predicting")
    prediction = predict(req, model=model)
    if args.ops or args.roofline:
        progress.step("timing each op")
    rows = op_rows(req, model=model) if (args.ops or args.roofline) else {}
    if args.roofline:
        progress.step(f"drawing {args.roofline}")
        from planner.plot import draw_roofline
        from planner.predict.context import default_context
        device = default_context().device(args.device)
        everything = [r for group in rows.values() for r in group]
        draw_roofline(args.roofline, device, everything, req.dtype, f"{args.model} on {device.id} ({req.dtype}): "
                      f"{', '.join(rows)} ops")
    if args.json:
        progress.done()
        out = prediction.as_dict()
        if args.ops:
            out["ops"] = {name: [r.__dict__ if hasattr(r, "__dict__") else _row_dict(r) for r in group]
                          for name, group in rows.items()}
        print(json.dumps(json_safe(out), indent=2, default=str, allow_nan=False))
        return 0
    if not prediction.fits:
        progress.step("finding a tensor-parallel group that fits", of=steps + 1)
    fitting_tp = None if prediction.fits else tp_that_fits(req, model=model)
    progress.done()
    _print_prediction(prediction, example_of(model), fitting_tp)
    if args.roofline:
        print(f"roofline       written to {args.roofline}")
    for name, group in rows.items():
        print(f"\n{name} ops on one device (count includes every layer; time per call)")
        print(f"{'op':<52} {'role':<6} {'count':>6} {'FLOP':>10} {'bytes':>10} {'time':>10} {'bound':<9}")
        for r in sorted(group, key=lambda r: -r.time_s * r.count):
            count = f"{r.count:.0f}" if float(r.count).is_integer() else f"{r.count:.2f}"  # a mean layer's share
            print(f"{r.op[:52]:<52} {r.role:<6} {count:>6} {si(r.flop):>10} {si(r.bytes, 'B'):>10} "
                  f"{fmt_time(r.time_s):>10} {r.bound:<9}")
    return 0


def _row_dict(r) -> dict:
    return {f: getattr(r, f) for f in r.__dataclass_fields__}


def cmd_compare(args: argparse.Namespace) -> int:
    progress.step("importing", of=3)
    from planner.cli import imported
    from planner.cli.gc_pause import paused
    from planner.hardware.catalog import dated
    from planner.predict.api import compare
    from planner.workload.user_model import default_batch
    from planner.cli.args import cli_model

    imported()

    devices = None if args.devices == "all" else [d.strip() for d in args.devices.split(",") if d.strip()]
    if devices is not None and not devices:
        raise ConfigError(f"--devices {args.devices!r} names no device: give 'all' or a comma-separated list of "
                          "catalog ids (planner devices)")
    training = {}
    if args.mode == "training":
        training = {k: getattr(args, k) for k in ("global_batch", "micro_batch", "microbatches", "recompute",
                                                   "mixed_precision", "optimizer", "train_tokens")}
    training["engine"] = args.engine
    progress.step("reading the model")
    model = cli_model(args.model, args.allow_code)  # package.module:function only with --allow-code
    batch = args.batch if args.batch is not None else default_batch(model)
    progress.step("counting its graphs and predicting on " + ("every catalog device" if devices is None else
                                                              f"{len(devices)} device{'s' * (len(devices) != 1)}"))
    with paused():  # a burst of long-lived graph and timing objects: the collector runs once after it
        frame = compare(model, devices, args.mode, batch, args.input_len, args.output_len, args.seq_len,
                        args.image_size, precision_of(args), args.pricing, args.sort, gpus=args.gpus, **training)
    progress.done()
    if args.json:
        # counts as whole numbers (a device that cannot run the workload leaves them null, which makes
        # the frame's column float)
        counts = {c: frame[c].astype("Int64") for c in ("gpus", "tp", "dp", "batch") if c in frame}
        print(frame.assign(**counts).to_json(orient="records", indent=2))
        return 0
    unit = "$/1M tok" if "ttft_s" in frame and frame["ttft_s"].notna().any() else "$/unit"
    print(f"{'device':<15} {'gpus':>4} {'tp':>3} {'dp':>4} {'batch':>6} {'fits':>5} {'engine':<8} {'tier':<10} "
          f"{'latency':>10} {'throughput':>12} {'$/h':>8} {unit:>9} {'J/unit':>8} {'GB/gpu':>7}  instance / note")
    for _, r in frame.iterrows():
        if r["tier"] is None or r.get("latency_s") is None or r["latency_s"] != r["latency_s"]:
            print(f"{r['device']:<15} {'-':>4} {'-':>3} {'-':>4} {'-':>6} {'-':>5} {'-':<8} {'-':<10} {'-':>10} "
                  f"{'-':>12} {'-':>8} {'-':>9} {'-':>8} {'-':>7}  {r['note']}")
            continue
        num = lambda v, f: "-" if v is None or v != v else format(v, f)
        print(f"{r['device']:<15} {int(r['gpus']):>4} {int(r['tp']):>3} {int(r['dp']):>4} {num(r['batch'], '.0f'):>6} "
              f"{str(bool(r['fits'])):>5} {r['engine']:<8} {r['tier']:<10} "
              f"{fmt_time(r['latency_s']):>10} {r['throughput']:>12,.1f} {num(r['usd_per_h'], '.2f'):>8} "
              f"{num(r['usd_per_unit'], '.3f'):>9} {num(r['j_per_unit'], '.3g'):>8} {r['memory_gb_per_gpu']:>7.1f}  "
              + (f"{r['instance']} (price of {dated(r['price_date'])})" if isinstance(r["instance"], str)
                 else "(no catalog instance)"))
    return 0


