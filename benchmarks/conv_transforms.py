"""How fast cuDNN's NCHW <-> NHWC layout transforms run, read from a PyTorch Profiler trace of eager convolutions.

For each aten::cudnn_convolution and aten::convolution_backward call of the trace, the kernels its runtime
calls launched are split into transforms (nchwToNhwc / nhwcToNchw) and the rest. Over the calls that ran any
transform, the bytes the transforms are counted to move, one read and one write of each operand of the call
(forward: input, weight, output; backward: grad_output, input and weight read, grad_input and grad_weight
written), are set against the transforms' kernel time. The rate, as a fraction of the GPU's bandwidth, is
planner/hardware/profile_select.py NCHW_TRANSFORM_BANDWIDTH_FRACTION.

    .venv/bin/python benchmarks/conv_transforms.py [--trace benchmarks/data/traces/h100_resnet50_train_b32_amp_bf16.json.gz]
        [--bandwidth-tb-s 3.35]
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "benchmarks" / "data" / "traces" / "h100_resnet50_train_b32_amp_bf16.json.gz"
BF16_BYTES = 2


def transform_rates(trace: dict) -> dict[str, tuple[int, float, float]]:
    """{"forward" | "backward": (calls with transforms, bytes moved as counted, transform seconds)}."""
    events = trace["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
           and e["name"] in ("aten::cudnn_convolution", "aten::convolution_backward")]
    launches = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver"):
            launches[e["tid"]].append(e)
    kernels = {e["args"].get("correlation"): e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"}
    out = {"forward": [0, 0.0, 0.0], "backward": [0, 0.0, 0.0]}
    for op in ops:
        names = [(k["name"], k["dur"]) for r in launches[op["tid"]] if op["ts"] <= r["ts"] <= op["ts"] + op["dur"]
                 if (k := kernels.get(r["args"].get("correlation")))]
        transform_us = sum(d for n, d in names if "ToNhwc" in n or "ToNchw" in n)
        if not transform_us:
            continue
        dims = op["args"]["Input Dims"]
        if op["name"] == "aten::cudnn_convolution":
            x, w = dims[0], dims[1]
            stride = ast.literal_eval(op["args"]["Concrete Inputs"][3])[0]
            y = x[0] * w[0] * (x[2] // stride) * (x[3] // stride)  # same padding, as ResNet's convs
            elements, phase = math.prod(x) + math.prod(w) + y, "forward"
        else:
            dy, x, w = dims[0], dims[1], dims[2]
            elements, phase = math.prod(dy) + 2 * math.prod(x) + 2 * math.prod(w), "backward"
        row = out[phase]
        row[0] += 1
        row[1] += 2 * elements * BF16_BYTES
        row[2] += transform_us * 1e-6
    return {k: (int(v[0]), v[1], v[2]) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=TRACE, help="a gzipped Chrome/Kineto trace of bf16 eager convolutions")
    ap.add_argument("--bandwidth-tb-s", type=float, default=3.35, help="the GPU's memory bandwidth (H100 SXM: 3.35)")
    a = ap.parse_args()
    rates = transform_rates(json.loads(gzip.open(a.trace).read()))
    total_bytes = sum(r[1] for r in rates.values())
    total_s = sum(r[2] for r in rates.values())
    for phase, (calls, nbytes, seconds) in rates.items():
        print(f"{phase:9} {calls:3} calls  {nbytes / 1e9:.2f} GB in {seconds * 1e3:.2f} ms: {nbytes / seconds / 1e12:.2f} TB/s")
    rate = total_bytes / total_s / 1e12
    print(f"all       {sum(r[0] for r in rates.values()):3} calls  {total_bytes / 1e9:.2f} GB in {total_s * 1e3:.2f} ms: "
          f"{rate:.2f} TB/s, {rate / a.bandwidth_tb_s:.2f} of {a.bandwidth_tb_s:g} TB/s")


if __name__ == "__main__":
    main()
