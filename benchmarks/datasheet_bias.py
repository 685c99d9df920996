"""Is the datasheet tier biased against the measured and published profiles? (issue 43, item 2)

    .venv/bin/python benchmarks/datasheet_bias.py [--quick] [--solve] [--cases] [--out FILE | --save]

A device with no calibration profile is predicted from the defaults of hardware_specs/efficiency/
defaults.json (tier datasheet). Those defaults should be neither faster nor slower, in the middle, than
the profiles of the devices that have one. For each catalog device with a profile (the CPU's profile has
no catalog row, so no datasheet-tier prediction, and is left out), every case below is predicted twice
with the shipped context: with its profiles, and with a Context whose `profiles` is empty (the datasheet
tier). A case counts only where the first is on a profile's own tier (measured or published: a
transferred or cross-library prediction is not a profile's measurement of that op). The bias of a case
is ln(datasheet-tier time / profiled time): > 0 the datasheet is slower. Reported: its median per device
and per group, and over every case (the figure the defaults are set by: |median| <= 0.05).

The fixed set of cases:
- gemm: bf16 GEMMs as nn.Linear runs them (B stored transposed), M in 1, 16, 128, 1024, 8192 against the
  Llama-3.1-8B layer shapes N x K = 4096 x 4096 (attention out), 6144 x 4096 (QKV), 28672 x 4096
  (gate+up), 4096 x 14336 (down): 20 GEMMs, from each profile of the device (`op` level,
  planner/predict/roofline.py op_time);
- copy: device-to-device copies of 1 MiB, 16 MiB, 256 MiB and 1 GiB, from each profile;
- workloads: `planner.predict` with the default engine: llama-3.1-8b serving (input 1,024, output 128
  tokens; batch 1 and 16: TTFT and TPOT), resnet50 inference (batch 1 and 64), bert-base inference
  (batch 8, 128 tokens).
`--quick` keeps 3 GEMM rows (M 1, 128, 8192 at 4096 x 4096), the 16 MiB and 1 GiB copies and llama-3.1-8b
at batch 1 (what tests/hardware/test_datasheet_bias.py asserts on, in a few seconds).
FP8 GEMMs are not in the set: the datasheet tier has one GEMM ceiling for every dtype, and the profiles time
FP8 GEMMs much further below their peak (printed apart by --solve, not set by it).
`--solve` prints, for the GPU defaults the op cases isolate (SOLVED), the value at which its own cases are
unbiased: what hardware_specs/efficiency/defaults.json records. `--cases` prints every case.
Prints the table; writes JSON only with --out (or --save: benchmarks/results/datasheet_bias.json).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import replace
from dataclasses import replace as dc_replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.output import add_arguments, write  # noqa: E402
from planner.hardware.efficiency import DatasheetEfficiency, Defaults  # noqa: E402
from planner.predict.api import Request, predict  # noqa: E402
from planner.predict.context import Context, default_context  # noqa: E402
from planner.predict.ops import copy_record, gemm_record  # noqa: E402
from planner.predict.roofline import op_time  # noqa: E402

OWN_TIERS = ("measured", "published")
GEMM_M = (1, 16, 128, 1024, 8192)
GEMM_NK = ((4096, 4096), (6144, 4096), (28672, 4096), (4096, 14336))
COPY_BYTES = (2**20, 2**24, 2**28, 2**30)
WORKLOADS = (("llama-3.1-8b", {"batch": 1, "input_len": 1024, "output_len": 128}, ("ttft_s", "tpot_s")),
             ("llama-3.1-8b", {"batch": 16, "input_len": 1024, "output_len": 128}, ("ttft_s", "tpot_s")),
             ("resnet50", {"batch": 1}, ("latency_s",)),
             ("resnet50", {"batch": 64}, ("latency_s",)),
             ("bert-base", {"batch": 8, "seq_len": 128}, ("latency_s",)))
QUICK = {"gemm": ((1, 4096, 4096), (128, 4096, 4096), (8192, 4096, 4096)), "copy": (2**24, 2**30),
         "workloads": WORKLOADS[:1]}
LIMIT = 0.05
"""|median ln(datasheet / profiled)| over every case that counts as unbiased."""


def datasheet_context(ctx: Context) -> Context:
    """`ctx` with no profiles: every device on the datasheet tier."""
    return Context(ctx.catalog, ctx.defaults, ctx.power, {})


def profiled_devices(ctx: Context) -> list[str]:
    """Catalog devices with a profile (the datasheet tier needs the catalog row)."""
    return sorted(d for d in ctx.profiles if d in ctx.catalog.devices)


def _profiles_of(ctx: Context, device_id: str) -> list:
    """Every profile of the device: its default one, then each other library's."""
    found = [ctx.profiles[device_id]]
    for library in getattr(ctx.profiles, "libraries", lambda _: ())(device_id):
        other = ctx.profiles.library(device_id, library)
        if other is not None and other is not found[0]:
            found.append(other)
    return found


def _op_inputs(ctx: Context, device_id: str, gemms, copies, dtype: str = "bf16") -> list[dict]:
    """The op-level cases of one device, timed from each of its profiles on a profile's own tier: each
    with its record (`rec`, `category`, `cost`, `dtype`, `m`: a GEMM's rows, 0 for a copy) and `profiled_s`."""
    device = ctx.device(device_id)
    rows = []
    for profile in _profiles_of(ctx, device_id):
        eff = ctx.efficiency(device, ((profile.library,), ()))
        if eff.tier not in OWN_TIERS:
            continue
        records = [(f"gemm {dtype} {m}x{n}x{k}", "gemm", m, gemm_record(m, n, k, dtype), dtype) for m, n, k in gemms]
        records += [(f"copy {b / 2**20:g} MiB", "copy", 0, copy_record(b), "fp32") for b in copies]
        for name, group, m, (rec, category, cost), graph_dtype in records:
            if not eff.covers(rec, category):
                continue  # a dtype or kind this profile never timed: its own prediction is the datasheet's
            rows.append({"device": device_id, "group": group, "case": f"{name} ({profile.library})",
                         "tier": eff.tier, "m": m, "rec": rec, "category": category, "cost": cost,
                         "dtype": graph_dtype, "device_row": device,
                         "profiled_s": op_time(rec, category, cost, graph_dtype, device, eff).time_s})
    return rows


def _datasheet_ops(inputs: list[dict], defaults: Defaults) -> list[dict]:
    """`inputs` timed on the datasheet tier of `defaults`, as result rows (ln_ratio: datasheet / profiled)."""
    sheet = DatasheetEfficiency(defaults)
    rows = []
    for c in inputs:
        t = op_time(c["rec"], c["category"], c["cost"], c["dtype"], c["device_row"], sheet).time_s
        rows.append({k: c[k] for k in ("device", "group", "case", "tier", "profiled_s")}
                    | {"datasheet_s": t, "ln_ratio": math.log(t / c["profiled_s"])})
    return rows


def op_cases(ctx: Context, device_id: str, gemms, copies) -> list[dict]:
    """The op-level cases of one device: each GEMM and copy from each of its profiles and from the datasheet."""
    return _datasheet_ops(_op_inputs(ctx, device_id, gemms, copies), ctx.defaults)


SOLVED = {"matmul_max_efficiency": lambda c: c["group"] == "gemm" and c["m"] >= 1024,
          "matmul_memory_efficiency": lambda c: c["group"] == "gemm" and c["m"] <= 16,
          "memory_efficiency": lambda c: c["group"] == "copy" and c["cost"].bytes >= 2 * 2**24}
"""The GPU defaults --solve sets, each from the op cases that isolate it: GEMMs of M >= 1,024 (full waves of
tiles on every profiled device: compute-bound), GEMMs of M <= 16 (decode's skinny GEMMs: they stream their
weights) and copies of 16 MiB and more (the fixed per-kernel cost under 1%)."""


def solve(ctx: Context | None = None, bisect: bool = True) -> dict:
    """For each default of SOLVED: the median ln(datasheet / profiled) of its cases at the shipped value, and
    (with `bisect`) the value in (0, 1] at which it is 0 (bisection: a larger efficiency only shortens the
    datasheet time); with `bisect`, also the FP8 GEMMs' medians at the shipped values (not set by them)."""
    ctx = ctx or default_context()
    inputs = [c for d in profiled_devices(ctx) for c in _op_inputs(ctx, d, [(m, n, k) for n, k in GEMM_NK
                                                                              for m in GEMM_M], COPY_BYTES)]
    gpu = ctx.defaults.kinds["gpu"]
    out = {}
    for name, chosen in SOLVED.items():
        cases = [c for c in inputs if chosen(c)]

        def bias(value, cases=cases, name=name):
            kinds = dict(ctx.defaults.kinds, gpu=dc_replace(gpu, **{name: value}))
            rows = _datasheet_ops(cases, dc_replace(ctx.defaults, kinds=kinds))
            return statistics.median(r["ln_ratio"] for r in rows)

        shipped = getattr(gpu, name)
        if shipped is None:
            shipped = gpu.memory_efficiency
        out[name] = {"cases": len(cases), "devices": len({c["device"] for c in cases}), "shipped": shipped,
                     "median_ln_ratio_at_shipped": bias(shipped)}
        if not bisect:
            continue
        lo, hi = 0.05, 1.0
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if bias(mid) > 0 else (lo, mid)
        out[name]["unbiased"] = (lo + hi) / 2
    if not bisect:
        return out
    fp8 = [c for d in profiled_devices(ctx)
           for c in _op_inputs(ctx, d, [(m, n, k) for n, k in GEMM_NK for m in GEMM_M], (), "fp8")]
    for name in ("matmul_max_efficiency", "matmul_memory_efficiency"):
        rows = _datasheet_ops([c for c in fp8 if SOLVED[name](c)], ctx.defaults)
        out[f"fp8 GEMMs ({name}'s shapes, not set)"] = {
            "cases": len(rows), "devices": len({r["device"] for r in rows}),
            "median_ln_ratio_at_shipped": statistics.median(r["ln_ratio"] for r in rows) if rows else None}
    return out


def workload_cases(ctx: Context, device_id: str, workloads) -> list[dict]:
    """The workload cases of one device whose profiled prediction is on a profile's own tier."""
    sheet_ctx = datasheet_context(ctx)
    rows = []
    for model, kwargs, metrics in workloads:
        req = Request(model, device_id, **kwargs)
        own = predict(req, ctx)
        if own.tier not in OWN_TIERS:
            continue
        other = predict(replace(req, engine=own.engine), sheet_ctx)
        label = ", ".join(f"{k} {v}" for k, v in kwargs.items())
        for metric in metrics:
            a, b = own.metrics[metric], other.metrics[metric]
            rows.append({"device": device_id, "group": "workload", "case": f"{model} {label} {metric} ({own.engine})",
                         "tier": own.tier, "profiled_s": a, "datasheet_s": b, "ln_ratio": math.log(b / a)})
    return rows


def measure(quick: bool = False, ctx: Context | None = None) -> dict:
    """Every case on every profiled catalog device, and the medians of ln(datasheet / profiled)."""
    ctx = ctx or default_context()
    gemms = QUICK["gemm"] if quick else [(m, n, k) for n, k in GEMM_NK for m in GEMM_M]
    copies = QUICK["copy"] if quick else COPY_BYTES
    workloads = QUICK["workloads"] if quick else WORKLOADS
    rows = []
    for device_id in profiled_devices(ctx):
        rows += op_cases(ctx, device_id, gemms, copies) + workload_cases(ctx, device_id, workloads)

    def median(selected):
        values = [r["ln_ratio"] for r in selected]
        return {"n": len(values), "median_ln_ratio": statistics.median(values) if values else None}

    devices = sorted({r["device"] for r in rows})
    groups = sorted({r["group"] for r in rows})
    return {"what": "ln(datasheet-tier time / profiled time) per case; > 0: the datasheet tier is slower",
            "quick": quick, "limit": LIMIT,
            "by_device": {d: median([r for r in rows if r["device"] == d]) for d in devices},
            "by_group": {g: median([r for r in rows if r["group"] == g]) for g in groups},
            "by_device_group": {f"{d} {g}": median([r for r in rows if r["device"] == d and r["group"] == g])
                                for d in devices for g in groups},
            "overall": median(rows), "devices": len(devices), "cases": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the small fixed set the test asserts on")
    parser.add_argument("--cases", action="store_true", help="print every case, not only the medians")
    parser.add_argument("--solve", action="store_true", help="also print the value of each GPU default of SOLVED "
                                                            "at which its own op cases are unbiased")
    add_arguments(parser)
    args = parser.parse_args(argv)
    result = measure(args.quick)
    if args.cases:
        for r in result["cases"]:
            print(f"{r['device']:14} {r['group']:9} {r['case']:62} {r['profiled_s'] * 1e3:10.4f} "
                  f"{r['datasheet_s'] * 1e3:10.4f} {r['ln_ratio']:+7.3f}")
    print(f"median ln(datasheet-tier time / profiled time), {result['devices']} devices "
          f"({'quick set' if args.quick else 'full set'})")
    groups = list(result["by_group"])
    print(f"{'device':14} " + " ".join(f"{g:>16}" for g in groups) + f" {'all':>16}")
    for device, stat in result["by_device"].items():
        cells = [result["by_device_group"][f"{device} {g}"] for g in groups]
        print(f"{device:14} " + " ".join(_cell(c) for c in cells) + f" {_cell(stat)}")
    print(f"{'all':14} " + " ".join(_cell(result['by_group'][g]) for g in groups) + f" {_cell(result['overall'])}")
    if args.solve:
        result["solved"] = solve()
        print("GPU defaults at which their own op cases are unbiased (median ln(datasheet / profiled) = 0):")
        for name, r in result["solved"].items():
            if "unbiased" not in r:
                print(f"  {name}: median {r['median_ln_ratio_at_shipped']:+.3f} over {r['cases']} cases on "
                      f"{r['devices']} devices")
                continue
            print(f"  {name:26} {r['unbiased']:.3f}  (shipped {r['shipped']:.3f}: median "
                  f"{r['median_ln_ratio_at_shipped']:+.3f} over {r['cases']} cases on {r['devices']} devices)")
    write(args, "datasheet_bias", result)
    return 0


def _cell(stat: dict) -> str:
    if not stat["n"]:
        return f"{'-':>16}"
    return f"{stat['median_ln_ratio']:+.3f} (n={stat['n']})".rjust(16)


if __name__ == "__main__":
    raise SystemExit(main())
