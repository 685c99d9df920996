"""`planner calibrate`, `planner validate` and `planner op`: measure this device, check predictions
against measurements, predict one op."""

from __future__ import annotations

import argparse
import json
import sys

from planner.cli.args import fmt_time, positive_int
from planner.cli.names import DTYPES, OPS
from planner.errors import ConfigError, PlannerError
from planner.units import si

MAX_DIM = 2**31 - 1
"""Largest --m, --n, --k: GEMM libraries (cuBLAS, oneDNN) take dimensions as 32-bit ints."""
MAX_BYTES = 1e15
"""Largest --bytes (1 PB): above any device's memory and any message a job sends."""
MAX_GPUS = 2**20
"""Largest --gpus (1,048,576): above the largest cluster built."""
MAX_NAME_CHARS = 200
"""Longest --device name: ids and aliases are a few dozen characters."""


def add_calibrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure how efficiently each kind of op runs on the local device",
                       description="Run microbenchmarks on the local device within a time budget (resumable) and "
                                   "write a calibration profile under hardware_specs/calibration/<device-id>/.")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    p.add_argument("--budget-s", type=float, default=600.0,
                   help="wall-time budget in seconds for the whole calibration, measuring, fit and leave-one-out, "
                        "across resumes (default 600)")
    p.add_argument("--force", action="store_true",
                   help="write the profile even when the machine is busy (the probes varied between repeats)")
    p.add_argument("--out", help="profile root directory (default hardware_specs/calibration)")
    p.add_argument("--refit", action="store_true",
                   help="measure nothing: refit the efficiency model of every profile under --out")
    p.add_argument("--recheck", action="store_true",
                   help="re-measure the outlying points of this device's profile within --budget-s, then refit")
    p.add_argument("--import", dest="import_source", choices=("aiconfigurator", "aiter"),
                   help="measure nothing: convert published kernel measurements (tier published) from --from")
    p.add_argument("--from", dest="import_from", metavar="DIR",
                   help="aiconfigurator: its aic-core/src/aiconfigurator_core/systems/data folder; "
                        "aiter: its aiter/configs folder")
    p.add_argument("--devices", nargs="+", metavar="ID",
                   help="with --import: only these catalog devices (default: every one the data holds)")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    import time

    from planner.calibration.bench import check_seconds, local_device
    from planner.calibration.budget import process_age_s
    from planner.calibration.calibrate import (
        DEFAULT_OUT,
        MAX_BUDGET_S,
        calibrate,
        recheck_profile,
        refit,
    )
    from planner.calibration.resume import profile_root
    from planner.cli import imported

    imported()
    # every flag is checked before anything is measured or written, whichever mode runs
    check_seconds(args.budget_s, "--budget-s", MAX_BUDGET_S)
    root = profile_root(args.out, DEFAULT_OUT)
    if args.import_source or args.import_from or args.devices:
        if not (args.import_source and args.import_from):
            raise PlannerError("--import, --from (and optionally --devices) go together: "
                               "planner calibrate --import aiconfigurator --from DIR")
        from planner.calibration.published import import_aiconfigurator, import_aiter

        log = lambda text: print(text, file=sys.stderr)  # noqa: E731
        if args.import_source == "aiter":
            import_aiter(args.import_from, root, log=log)
        else:
            import_aiconfigurator(args.import_from, root, args.devices, log=log)
        return 0
    if args.recheck:
        path = root / local_device(args.device).id / "profile.json"
        if not path.is_file():
            raise PlannerError(f"no profile at {path}: run `planner calibrate --device {args.device}` first")
        recheck_profile(path, args.device, args.budget_s)
        return 0
    if args.refit:
        for path in sorted(root.glob("*/profile.json")):
            refit(path)
        return 0
    try:
        # the budget runs from the command's start: the interpreter's start-up and torch's import count
        calibrate(args.device, args.budget_s, root, started_s=time.perf_counter() - process_age_s(), force=args.force)
    except KeyboardInterrupt:
        print("\nplanner: calibration interrupted; measurements so far are kept: run the same command again "
              "to resume", file=sys.stderr)
        return 130
    return 0


def add_validate(sub: argparse._SubParsersAction) -> None:
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
    from planner.calibration.validate import fmt_table, summary, validate
    from planner.cli import imported

    imported()
    # the library checks every flag (budget, cases, device) before it measures anything

    log = (lambda text: print(text, file=sys.stderr)) if args.json else print
    cases = validate(args.device, tuple(args.models) if args.models is not None else None, args.dtype,
                     args.budget_per_case_s, log)
    if args.json:
        print(json.dumps({"cases": [c.as_dict() for c in cases], "summary": summary(cases)}, indent=2))
    else:
        print()
        print(fmt_table(cases))
    return 0


def add_op(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("op", help="predict one GEMM, copy, host-to-device copy or collective",
                       description="Predict the time of one op on a device from its calibration profile or datasheet.")
    p.add_argument("op", choices=OPS)
    p.add_argument("--device", required=True, help="catalog id or alias, or a profiled local device id")
    p.add_argument("--m", type=positive_int)
    p.add_argument("--n", type=positive_int)
    p.add_argument("--k", type=positive_int)
    p.add_argument("--dtype", choices=DTYPES, default="fp32")
    p.add_argument("--bytes", type=float, help="message or buffer size in bytes")
    p.add_argument("--gpus", type=positive_int, help="collectives: devices taking part")
    p.add_argument("--nodes", type=positive_int, default=1, help="collectives: nodes they span")
    p.add_argument("--scaleout-gbps", type=float,
                   help="collectives across nodes: network per device in Gb/s per direction (default: the catalog's)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_op)


def _check_op_args(args: argparse.Namespace) -> None:
    """Raise ConfigError, naming the flag and what is valid, for a value the prediction cannot take:
    a non-finite or absurd --bytes (float("1e400") is inf; NaN would print "nan ms"), dimensions or
    device counts beyond MAX_DIM and MAX_GPUS, an over-long --device."""
    if len(args.device) > MAX_NAME_CHARS:
        raise ConfigError(f"--device is {len(args.device):,} characters; device ids are at most {MAX_NAME_CHARS}")
    for flag in ("m", "n", "k"):
        value = getattr(args, flag)
        if value is not None and value > MAX_DIM:
            raise ConfigError(f"--{flag} must be a whole number from 1 to {MAX_DIM:,} (a 32-bit GEMM dimension), "
                              f"got {value:.3e}")
    # NaN fails every comparison: `not` of the range test catches it with inf
    if args.bytes is not None and not 1 <= args.bytes <= MAX_BYTES:
        raise ConfigError(f"--bytes must be a finite number of bytes from 1 to {MAX_BYTES:.0e}, got {args.bytes:g}")
    if args.bytes is not None and args.bytes != int(args.bytes):
        raise ConfigError(f"--bytes must be a whole number of bytes, got {args.bytes:g}")
    if args.gpus is not None and args.gpus > MAX_GPUS:
        raise ConfigError(f"--gpus must be a whole number from 1 to {MAX_GPUS:,}, got {args.gpus:.3e}")
    if args.nodes > min(args.gpus or MAX_GPUS, MAX_GPUS):
        raise ConfigError(f"--nodes must be a whole number from 1 to --gpus ({args.gpus or MAX_GPUS:,}), "
                          f"got {args.nodes:.3e}")


def cmd_op(args: argparse.Namespace) -> int:
    from planner.cli import imported
    from planner.predict.ops import predict_op

    imported()
    _check_op_args(args)
    p = predict_op(args.op, args.device, m=args.m, n=args.n, k=args.k, dtype=args.dtype, nbytes=args.bytes,
                   gpus=args.gpus, nodes=args.nodes, scaleout_gbps=args.scaleout_gbps)
    d = p.as_dict()
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    units = {"flop_per_s": "FLOP/s", "bytes_per_s": "B/s", "bus_bytes_per_s": "B/s (bus)"}
    lo, hi = d["time_range_s"]
    print(f"{p.op} on {p.device}: {fmt_time(p.time_s)} ({fmt_time(lo)} .. {fmt_time(hi)}), "
          f"{si(p.rate, units[p.rate_key])}, {p.bound}-bound, tier {p.tier}")
    if p.source:
        print(f"source: {p.source}")
    return 0


