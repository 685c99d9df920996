"""`planner count`: FLOP and bytes of a model's workload, op by op."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import TYPE_CHECKING

from planner.cli import progress
from planner.cli.args import code_flag, positive_int, precision_flags, precision_of
from planner.cli.names import DTYPES, MODES
from planner.errors import ConfigError
from planner.units import count as fmt_count
from planner.units import json_safe, si

if TYPE_CHECKING:  # torch and pandas are imported when the command runs, not when the parser is built
    import pandas as pd

    from planner.workload.counting import Counts
    from planner.workload.graphs import WorkloadGraph

BY = ("op", "module", "category", "phase", "kernel")

def add_count(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("count", help="count FLOP and bytes of a model's workload, op by op",
                       description="Capture the aten op graph of MODEL on meta tensors and count FLOP "
                                   "(2 per multiply-add) and bytes read and written.")
    p.add_argument("model", help="zoo id (e.g. llama-3.1-8b), path to a config.json, path/to/model.py:function, or "
                                 "package.module:function with --allow-code")
    code_flag(p)
    p.add_argument("--mode", choices=MODES, default="inference",
                   help="inference = prefill for LMs, a forward pass otherwise (default: inference)")
    p.add_argument("--batch", type=positive_int,
                   help="batch (micro-batch in training); default 1, or a package.module:function model's example "
                        "batch (dim 0 of its inputs, or its `batch` parameter's default)")
    p.add_argument("--seq-len", type=positive_int, help="prompt or sequence length (default 2048 for LMs, 128 for encoders)")
    p.add_argument("--context-len", type=positive_int, help="decode: tokens already in the KV cache (default 2048)")
    p.add_argument("--image-size", type=positive_int, help="vision: image side in pixels (default: the model's)")
    p.add_argument("--steps", type=positive_int,
                   help="diffusion pipelines: denoising steps of one image (default: the model's, e.g. 50)")
    p.add_argument("--dtype", choices=DTYPES, default="bf16", help="default bf16")
    precision_flags(p)
    p.add_argument("--engine", metavar="NAME", default="eager",
                   help="lower the graph to this engine's kernels (hardware_specs/engines); default eager: every "
                        "aten op its own kernel")
    p.add_argument("--by", choices=BY, default="op",
                   help="group the table by op, module, category, phase, or kernel (the engine's kernels after "
                        "lowering, with the aten ops each absorbed)")
    p.add_argument("--top", type=int, default=20, help="rows of the table to print (0: all); default 20")
    p.add_argument("--counter", choices=("planner", "fvcore"), default="planner",
                   help="fvcore: also run fvcore's FlopCountAnalysis and compare")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_count)


def _totals(wg: WorkloadGraph, counts: Counts) -> dict:
    from planner.workload.quant import describe

    w = wg.workload
    return {
        "model": wg.model.name, "source": wg.model.source, "mode": w.mode, "batch": w.batch, "seq_len": w.seq_len,
        "context_len": w.context_len, "image_size": w.image_size, "dtype": w.dtype, "precision": describe(w.dtype),
        "params": wg.params, "active_params": wg.active_params, "flop": counts.total.flop,
        "bytes_read": counts.total.bytes_read, "bytes_written": counts.total.bytes_written,
        "arithmetic_intensity_flop_per_byte": counts.total.intensity, "ops": len(counts.ops),
        "unsupported": [{"op": op, "calls": n} for op, n in counts.unsupported],
    } | ({"steps": w.steps} if w.steps is not None else {}) | _takes(wg)


def _takes(wg: WorkloadGraph) -> dict:
    """A user's model: what it takes ("tokens", "images", "samples") and its batch as a phrase."""
    from planner.workload.user_model import example_of

    example = example_of(wg.model)
    if example is None:
        return {}
    return {"takes": example.takes, "example_batch": example.batch, "inputs": example.label(wg.workload.batch)}


def _describe(wg: WorkloadGraph) -> str:
    from planner.workload.quant import describe
    from planner.workload.user_model import example_of

    w = wg.workload
    example = example_of(wg.model)
    if example is not None:  # a user's model: its own inputs, scaled in dim 0
        return f"{w.mode}, {example.label(w.batch)}, {describe(w.dtype)}"
    sizes = {"prefill": f"{w.seq_len} prompt tokens", "decode": f"one token on a {w.context_len}-token KV cache",
             "training": f"sequence {w.seq_len}" if w.seq_len else f"{w.image_size}px images"}
    size = sizes.get(w.mode) or (f"sequence {w.seq_len}" if w.seq_len else f"{w.image_size}px images" if w.image_size else "")
    if w.steps is not None:  # a diffusion pipeline: one image per batch row, text to pixels
        size = f"{w.image_size}px images, {w.steps} denoising steps"
    return f"{w.mode}, batch {w.batch}, {size}, {describe(w.dtype)}".replace(", ,", ",")


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


def kernel_table(wg: WorkloadGraph, engine: str) -> pd.DataFrame:
    """One row per distinct kernel of `engine` (a fused kernel named "fused.<op>+<op>..."): calls, aten ops
    per call, FLOP (padded channels included) and bytes over every call, the padded channels' FLOP, sorted by
    FLOP then bytes."""
    import pandas as pd

    from planner.workload.device_graph import kernels

    ks = kernels(wg.graph, ["first"] * len(wg.graph.records), engine)
    rows: dict[str, list[float]] = {}
    for k in ks:
        if k.category == "view":
            continue
        row = rows.setdefault(k.record.op, [0, 0, 0.0, 0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += k.absorbed
        row[2] += k.cost.flop
        row[3] += k.cost.bytes_read
        row[4] += k.cost.bytes_written
        row[5] += k.padding_flop
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=["calls", "aten_ops", "flop", "bytes_read",
                                                                  "bytes_written", "padding_flop"])
    total = frame["flop"].sum()
    frame["flop_share"] = frame["flop"] / total if total else 0.0
    frame["aten_ops"] = frame["aten_ops"] / frame["calls"]
    return frame.sort_values(["flop", "bytes_read"], ascending=False)


def _print_kernels(frame: pd.DataFrame, top: int) -> None:
    shown = frame.head(top) if top > 0 else frame
    width = min(70, max([len(str(i)) for i in shown.index] + [6]))
    print(f"\n{'kernel':<{width}}  {'calls':>7}  {'ops':>4}  {'FLOP':>12}  {'read':>10}  {'written':>10}  {'FLOP %':>6}")
    for key, row in shown.iterrows():
        name = str(key) if len(str(key)) <= width else str(key)[:width - 3] + "..."
        print(f"{name:<{width}}  {int(row['calls']):>7}  {row['aten_ops']:>4.0f}  {si(row['flop'], 'FLOP'):>12}  "
              f"{si(row['bytes_read'], 'B'):>10}  {si(row['bytes_written'], 'B'):>10}  {100 * row['flop_share']:>6.2f}")
    if len(frame) > len(shown):
        print(f"... {len(frame) - len(shown)} more rows (--top 0 shows all)")


def _check_lengths(args: argparse.Namespace) -> None:
    """Refuse a length flag the mode does not read (it would be ignored without a word): a decode step reads
    --context-len only, every other mode --seq-len only."""
    from planner.errors import ConfigError

    if args.mode == "decode" and args.seq_len is not None:
        raise ConfigError(f"--seq-len does not apply to --mode decode (one new token on a KV cache); give the tokens "
                          f"already in the cache with --context-len {args.seq_len}")
    if args.mode != "decode" and args.context_len is not None:
        raise ConfigError(f"--context-len applies to --mode decode only; for --mode {args.mode} give the sequence "
                          f"length with --seq-len {args.context_len}")


def cmd_count(args: argparse.Namespace) -> int:
    _check_lengths(args)
    if not 0 <= args.top <= 1_000_000:
        raise ConfigError(f"--top must be a whole number from 0 (all rows) to 1,000,000, got {args.top:,}")
    progress.step("importing", of=5 + (args.counter == "fvcore"))
    from planner.cli import imported
    from planner.workload.counting import OpCost, count
    from planner.workload.graphs import Workload, build_graph, context_note
    from planner.workload.user_model import default_batch
    from planner.cli.args import cli_model

    imported()
    progress.step("reading the model")
    model = cli_model(args.model, args.allow_code)  # package.module:function only with --allow-code
    batch = args.batch if args.batch is not None else default_batch(model)
    progress.step("capturing its graph")
    wg = build_graph(model, Workload(mode=args.mode, batch=batch, seq_len=args.seq_len,
                                     context_len=args.context_len, image_size=args.image_size, dtype=precision_of(args),
                                     engine=args.engine, steps=args.steps))
    engine = wg.workload.engine
    progress.step("counting")
    counts = count(wg.graph)
    progress.step(f"lowering to {engine}'s kernels")
    lowered = kernel_table(wg, engine)
    padding = float(lowered["padding_flop"].sum())  # the kernels' work on zero-padded channels
    if engine != "eager" or args.by == "kernel":
        # the engine's kernels: bytes are each kernel's external inputs and outputs; FLOP stay the model's (the
        # zeros of padded channels are reported apart)
        counts = replace(counts, total=OpCost(float(lowered["flop"].sum()) - padding,
                                              float(lowered["bytes_read"].sum()), float(lowered["bytes_written"].sum())))
    comparison = None
    if args.counter == "fvcore":
        progress.step("fvcore's count")
        from planner.workload.fvcore_check import compare
        comparison = compare(wg, counts)
    progress.done()
    if args.json:
        out = _totals(wg, counts)
        frame = counts.table(args.by)
        out["engine"] = engine
        out["kernels"] = int(lowered["calls"].sum())
        out["padding_flop"] = padding
        out["by"] = args.by
        if args.by == "kernel":
            frame = lowered
        out["table"] = [{args.by: str(k), **{c: (int(v) if c == "calls" else float(v)) for c, v in row.items()}}
                        for k, row in frame.iterrows()]
        if comparison is not None:
            out["fvcore"] = {"by_operator_flop": comparison.fvcore_by_operator, "unsupported": comparison.fvcore_unsupported,
                             "ours_compared_flop": comparison.ours_compared_flop,
                             "fvcore_compared_flop": comparison.fvcore_compared_flop, "ratio": comparison.ratio}
        print(json.dumps(json_safe(out), indent=2, allow_nan=False))
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
    note = "every aten op its own kernel" if engine == "eager" else "bytes above are the kernels' external I/O"
    if padding:
        note += f"; its kernels do {si(padding, 'FLOP')} more on zero-padded channels"
    print(f"engine         {engine}: {int(lowered['calls'].sum())} kernels ({note}; --engine to change)")
    if counts.unsupported:
        listed = ", ".join(f"{op} x{n}" for op, n in counts.unsupported)
        print(f"UNSUPPORTED    {listed}  (no formula: their cost is not in the totals)")
    else:
        print("unsupported    none")
    w = wg.workload
    tokens = (w.context_len + 1) if w.mode == "decode" and w.context_len else w.seq_len
    note = context_note(model, tokens, f"{tokens or 0:,} tokens", "counted")
    if note:
        print(f"note           {note}")
    if args.by == "kernel":
        _print_kernels(lowered, args.top)
    else:
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


