"""Argument types and flags shared by several subcommands; human units appear only in the CLI."""

from __future__ import annotations

import argparse

from planner.cli.names import DTYPES, PRICINGS
from planner.errors import ConfigError, PlannerError, shorten

MAX_INT = 2**53
"""Largest whole number a flag takes: every count becomes a float in the model, exact up to 2^53.
Sizes that drive work have lower limits of their own, checked where they are used."""


def positive_int(text: str) -> int:
    """A whole number from 1 to MAX_INT written in ASCII digits; argparse's error otherwise."""
    digits = text.strip().lstrip("+")
    if not digits.isascii() or not digits.isdigit() or len(digits) > 16:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {MAX_INT:,}, got '{shorten(text)}'")
    value = int(digits)
    if not 1 <= value <= MAX_INT:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {MAX_INT:,}, got {shorten(str(value))}")
    return value


def finite_float(text: str) -> float:
    """A finite number (not nan or inf); argparse's error otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{shorten(text)}'") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got '{shorten(text)}'")
    return value


def _batch(text: str) -> int | str:
    if text == "auto":
        return "auto"
    from planner.workload.graphs import LIMITS  # the batch a graph is built at: 2^20, not MAX_INT
    digits = text.strip().lstrip("+")
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 16 and 1 <= int(digits) <= LIMITS["batch"]):
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {LIMITS['batch']:,} or 'auto', "
                                         f"got '{shorten(text)}'")
    return int(digits)


def deployment_flags(p: argparse.ArgumentParser) -> None:
    """The flags that place a workload on devices (predict, advise): model, device, layout, network, power."""
    p.add_argument("model", nargs="?", help="zoo id, config.json path, path/to/model.py:function, or "
                                            "package.module:function with --allow-code")
    code_flag(p)
    p.add_argument("--device", help="catalog device id or alias (e.g. h100-sxm, H100, mi300x)")
    p.add_argument("--gpus", type=positive_int, help="devices in the deployment (default tp x pp x dp)")
    for name, text in (("tp", "tensor-parallel degree"), ("pp", "pipeline stages"), ("ep", "expert-parallel degree")):
        p.add_argument(f"--{name}", type=positive_int, default=1, help=text)
    p.add_argument("--dp", type=positive_int, help="data-parallel replicas (default gpus / (tp x pp))")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage (3 = FSDP)")
    p.add_argument("--overlap", type=float, default=0.8, help="share of data-parallel communication hidden (0-1)")
    p.add_argument("--scaleout-gbps", type=finite_float, metavar="GBPS",
                   help="scale-out network per device in Gb/s per direction (e.g. 200 = one HDR InfiniBand port "
                        "per GPU); replaces the catalog's figure, needed where the catalog has none sourced")
    p.add_argument("--power-limit-w", type=finite_float, metavar="W",
                   help="run the device at a power limit below its TDP (as nvidia-smi -pl sets): kernels that "
                        "would draw more run at the clocks it sustains")
    workload_flags(p)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--instance", help="cloud instance to price on (default: the cheapest with the device)")
    where.add_argument("--site", help="on-prem site id to price on (TCO)")
    p.add_argument("--utilization", type=float, default=1.0, help="on-prem: share of hours doing useful work")


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
    p.add_argument("--mixed-precision", choices=("auto", "amp", "master", "pure"), default="auto",
                   help="training at bf16/fp16: amp = torch.autocast over fp32 weights (eager, torch.compile), "
                        "master = 16-bit weights + fp32 master in the optimizer (Megatron, FSDP), pure = all "
                        "16-bit; auto = the engine's")
    p.add_argument("--optimizer", choices=("auto", "fused", "foreach", "loop"), default="auto",
                   help="training: the AdamW implementation (auto = the engine's: foreach for eager, fused for "
                        "Megatron)")
    p.add_argument("--train-tokens", type=finite_float, help="training: tokens to train on (time, energy and cost to train)")
    p.add_argument("--dtype", choices=DTYPES, default="bf16")
    precision_flags(p)
    p.add_argument("--pricing", choices=PRICINGS, default="on_demand",
                   help="price type: on_demand, spot, reserved_1y/_3y (reserved instances), savings_plan_1y/_3y, "
                        "committed_1y/_3y (commitments; derived from discounts.csv where a provider has one)")
    p.add_argument("--engine", metavar="NAME",
                   help="execution engine: eager, compile, tensorrt, trtllm, vllm, sglang, megatron (hardware_specs/"
                        "engines); default vllm for LLM inference on GPUs, eager otherwise")


def _recipe(text: str) -> str:
    from planner.workload.quant import recipe_names

    try:
        names = recipe_names()
    except PlannerError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if text.strip().lower() not in names:
        raise argparse.ArgumentTypeError(f"unknown quantization recipe '{shorten(text)}'; valid: {', '.join(names)}")
    return text.strip().lower()


def _part(part: str):
    def check(text: str) -> str:
        from planner.workload.quant import part_dtype

        try:
            return part_dtype(part, text)
        except PlannerError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    check.__name__ = part.replace("_", "-") + " dtype"
    return check


def precision_flags(p: argparse.ArgumentParser) -> None:
    """--quant, --weights, --activations, --kv-cache (planner/workload/quant.py; recipes in
    hardware_specs/quant/recipes.json)."""
    p.add_argument("--quant", type=_recipe, metavar="RECIPE",
                   help="quantization recipe instead of --dtype: fp8, int8, w4a16, nvfp4, mxfp8 (hardware_specs/quant)")
    for part, what in (("weights", "Linear weights"), ("activations", "GEMM inputs (16/32-bit: every activation)"),
                       ("kv_cache", "the KV cache")):
        p.add_argument(f"--{part.replace('_', '-')}", type=_part(part), metavar="DTYPE",
                       help=f"dtype of {what}, overriding that part of --dtype or --quant")


def precision_of(args: argparse.Namespace) -> str:
    """The canonical precision string of --dtype, --quant, --weights, --activations, --kv-cache."""
    from planner.workload.quant import compose

    return compose(args.dtype, args.quant, args.weights, args.activations, args.kv_cache)


def fmt_time(seconds: float) -> str:
    if seconds >= 3600 * 24:
        return f"{seconds / 86400:.2f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if 0 < seconds < 1e-4:  # a kernel of a few microseconds is not "0.00 ms"
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.2f} ms"


def code_flag(p: argparse.ArgumentParser) -> None:
    """--allow-code: a model named package.module:function is imported (and its code run) only with it."""
    p.add_argument("--allow-code", action="store_true",
                   help="let MODEL be package.module:function: imports that module and runs its code "
                        "(path/to/model.py:function needs no flag: the file is named explicitly)")


def cli_model(name: str, allow_code: bool):
    """The Model of a command-line MODEL: a zoo id, a config.json path, path/to/model.py:function (a file the
    user named), or package.module:function with --allow-code only, so that a name pasted from elsewhere cannot
    import a module of the environment (code:interact, os:abort); ConfigError saying how otherwise."""
    from pathlib import Path

    from planner.workload.zoo import is_file_function, resolve

    text = name.strip() if isinstance(name, str) else ""
    named_code = ":" in text and not text.lower().endswith(".json") and not is_file_function(text)
    try:
        exists = Path(text).exists()
    except (OSError, ValueError):
        exists = False
    if named_code and not exists and not allow_code:
        from planner.workload.zoo import planner_models

        module, _, attr = text.partition(":")
        if text.lower() in planner_models.zoo_ids():
            pass
        elif module and attr and all(part.isidentifier() for part in module.split(".") + [attr]):
            raise ConfigError(f"'{shorten(text)}' names Python code (package.module:function): importing it runs that "
                              "module's code; add --allow-code to run it, or name your file as "
                              "path/to/model.py:function")
        else:
            raise ConfigError(f"'{shorten(text)}' is not package.module:function (dotted Python identifiers, then a "
                              "colon and a function name), nor a zoo id, a config.json path or path/to/model.py:function")
    return resolve(name, allow_code=allow_code or is_file_function(text), echo=True)