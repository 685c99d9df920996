"""Is another library's profile a measurement of this engine's kernels? GEMMs on the lent H100 and H200.

    .venv/bin/python benchmarks/cross_library.py [--out FILE | --save]

A cross-library profile stands in for an engine only for the op categories where a measurement shows the
two libraries run the same kernels (hardware_specs/engines/*.json `profiles.other_categories`). This is
that measurement for GEMMs: eager PyTorch's cuBLAS GEMMs, their CUPTI kernel times on the lent H100 and
H200 (26 shapes each, benchmarks/data/gpu_validate.json, probe rows), predicted from

- the device's own eager profile (pytorch-eager, tier measured): the reference;
- the published serving-stack tables (aiconfigurator: vLLM's and TensorRT-LLM's GEMMs), as cross-library;
- the datasheet tier.

When the serving tables predict eager's kernels about as well as eager's own profile and far better than
the datasheet, the GEMMs are the same kernels and the tables may stand in for them (and eager's profile
for the serving engines' GEMMs). The measurement covers dense 16-bit cuBLAS GEMMs. A serving engine's GEMMs
at a dtype eager's profile never timed (FP8) fall back to the datasheet tier (planner/hardware/
profile_select.py reads no curve across dtypes); its 16-bit ones that are other kernels (w4a16's Marlin,
fused MoE) take the bf16 curve, which this does not measure. Prints median and p90 |ln(predicted / measured)| per device and source;
writes JSON to --out (default: print only).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.output import add_arguments, write  # noqa: E402
from planner.predict.context import default_context  # noqa: E402
from planner.predict.ops import gemm_record  # noqa: E402
from planner.predict.roofline import op_time  # noqa: E402

DEVICES = ("h100-sxm", "h200-sxm")
SOURCES = {"pytorch-eager (own)": (("pytorch-eager",), ()),
           "aiconfigurator (cross-library)": ((), ("aiconfigurator",), ("matmul",)),  # the path an engine takes
           "datasheet": ((), ())}


def measure() -> dict:
    ctx = default_context()
    cases = json.loads((ROOT / "benchmarks/data/gpu_validate.json").read_text())["cases"]
    out = {}
    for device_id in DEVICES:
        device = ctx.device(device_id)
        gemms = [c for c in cases if c["device"] == device_id and c["kind"] == "gemm" and "kernel_s" in c]
        for name, libraries in SOURCES.items():
            eff = ctx.efficiency(device, libraries)
            errors = []
            for c in gemms:
                rec, category, cost = gemm_record(c["m"], c["n"], c["k"], c["dtype"])
                errors.append(abs(math.log(op_time(rec, category, cost, c["dtype"], device, eff).time_s / c["kernel_s"])))
            errors.sort()
            out.setdefault(device_id, {})[name] = {
                "tier": eff.tier, "n": len(errors), "median_abs_ln_ratio": statistics.median(errors),
                "p90_abs_ln_ratio": errors[min(len(errors) - 1, int(0.9 * len(errors)))]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    result = measure()
    print(f"{'device':10} {'GEMM kernel times predicted from':32} {'tier':14} {'n':>3} {'median':>7} {'p90':>6}")
    for device_id, rows in result.items():
        for name, r in rows.items():
            print(f"{device_id:10} {name:32} {r['tier']:14} {r['n']:3d} {r['median_abs_ln_ratio']:7.3f} "
                  f"{r['p90_abs_ln_ratio']:6.3f}")
    write(args, "cross_library", {"what": "eager PyTorch's GEMM kernel times (CUPTI) on the lent H100 and H200, "
                                          "predicted from each source", "devices": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
