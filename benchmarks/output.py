"""Where a benchmark writes its result: nowhere by default (it prints), to `--out PATH`, or with
`--save` to benchmarks/results/NAME.json, the committed record. Committed files are never
overwritten unless asked."""

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --out PATH and --save to a benchmark's parser."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--out", type=Path, help="write the result as JSON to this path")
    group.add_argument("--save", action="store_true", help="write it to benchmarks/results/ (the committed record)")


def write(args: argparse.Namespace, name: str, result: dict) -> Path | None:
    """Write `result` where the arguments say (atomically); return the path written, or None."""
    path = args.out if args.out is not None else (RESULTS / f"{name}.json" if args.save else None)
    if path is None:
        return None
    from planner.files import write_text_atomic
    write_text_atomic(path, json.dumps(result, indent=2) + "\n")
    print(f"result written to {path}")
    return path
