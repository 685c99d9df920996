"""Argument types and flags shared by several subcommands; human units appear only in the CLI."""

from __future__ import annotations

import argparse

from planner.workload.dtypes import DTYPES


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _batch(text: str) -> int | str:
    return "auto" if text == "auto" else positive_int(text)


def workload_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=("inference", "training"), default="inference")
    p.add_argument("--batch", type=_batch, default=1, help="sequences or images per batch, or 'auto' (inference)")
    p.add_argument("--input-len", type=positive_int, help="LLM prompt tokens (default 1024)")
    p.add_argument("--output-len", type=positive_int, default=256, help="LLM generated tokens (default 256)")
    p.add_argument("--seq-len", type=positive_int, help="sequence length (encoders, training)")
    p.add_argument("--image-size", type=positive_int, help="vision: image side in pixels")
    p.add_argument("--global-batch", type=positive_int, help="training: sequences per optimizer step")
    p.add_argument("--micro-batch", type=positive_int, help="training: sequences per micro-batch (default --batch)")
    p.add_argument("--micro-batches", dest="microbatches", type=positive_int,
                   help="training: pipeline micro-batches per step (default 4 x pp)")
    p.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    p.add_argument("--train-tokens", type=float, help="training: tokens to train on (time, energy and cost to train)")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    p.add_argument("--pricing", choices=("on_demand", "spot", "committed_1y", "committed_3y"), default="on_demand")


def fmt_time(seconds: float) -> str:
    if seconds >= 3600 * 24:
        return f"{seconds / 86400:.2f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 1:
        return f"{seconds:.3f} s"
    return f"{seconds * 1e3:.2f} ms"


