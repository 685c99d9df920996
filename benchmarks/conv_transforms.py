"""How fast cuDNN's NCHW <-> NHWC layout transforms run, read from a PyTorch Profiler trace of eager convolutions.

For each aten::cudnn_convolution and aten::convolution_backward call of the trace (read by planner/trace/read.py),
the transform kernels it launched (nchwToNhwc / nhwcToNchw) are timed. Over the calls that ran any
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
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.trace.read import Trace, read_trace  # noqa: E402

TRACE = ROOT / "benchmarks" / "data" / "traces" / "h100_resnet50_train_b32_amp_bf16.json.gz"
BF16_BYTES = 2
CONVOLUTIONS = ("aten::cudnn_convolution", "aten::convolution_backward")


def transform_rates(trace: Trace) -> dict[str, tuple[int, float, float]]:
    """{"forward" | "backward": (calls with transforms, bytes moved as counted, transform seconds)}."""
    by_external = {op.external_id: op for op in trace.ops if op.external_id is not None}
    transform_ns: dict[int, int] = {}  # conv op index -> ns of the transform kernels it launched
    for event in trace.device_events:
        if "ToNhwc" not in event.name and "ToNchw" not in event.name:
            continue
        op = by_external.get(event.external_id)
        while op is not None and op.name not in CONVOLUTIONS:  # the kernel's launcher, up to its conv call
            op = trace.ops[op.parent] if op.parent is not None else None
        if op is not None:
            transform_ns[op.index] = transform_ns.get(op.index, 0) + event.dur_ns
    out = {"forward": [0, 0.0, 0.0], "backward": [0, 0.0, 0.0]}
    for index, ns in transform_ns.items():
        op = trace.ops[index]
        dims = [i.dims for i in op.inputs]
        if op.name == "aten::cudnn_convolution":
            x, w = dims[0], dims[1]
            stride = ast.literal_eval(op.inputs[3].value)[0]
            y = x[0] * w[0] * (x[2] // stride) * (x[3] // stride)  # same padding, as ResNet's convs
            elements, phase = math.prod(x) + math.prod(w) + y, "forward"
        else:
            dy, x, w = dims[0], dims[1], dims[2]
            elements, phase = math.prod(dy) + 2 * math.prod(x) + 2 * math.prod(w), "backward"
        row = out[phase]
        row[0] += 1
        row[1] += 2 * elements * BF16_BYTES
        row[2] += ns * 1e-9
    return {k: (int(v[0]), v[1], v[2]) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=TRACE, help="a Chrome/Kineto trace of bf16 eager convolutions")
    ap.add_argument("--bandwidth-tb-s", type=float, default=3.35, help="the GPU's memory bandwidth (H100 SXM: 3.35)")
    a = ap.parse_args()
    rates = transform_rates(read_trace(a.trace))
    total_bytes = sum(r[1] for r in rates.values())
    total_s = sum(r[2] for r in rates.values())
    for phase, (calls, nbytes, seconds) in rates.items():
        print(f"{phase:9} {calls:3} calls  {nbytes / 1e9:.2f} GB in {seconds * 1e3:.2f} ms: {nbytes / seconds / 1e12:.2f} TB/s")
    rate = total_bytes / total_s / 1e12
    print(f"all       {sum(r[0] for r in rates.values()):3} calls  {total_bytes / 1e9:.2f} GB in {total_s * 1e3:.2f} ms: "
          f"{rate:.2f} TB/s, {rate / a.bandwidth_tb_s:.2f} of {a.bandwidth_tb_s:g} TB/s")


if __name__ == "__main__":
    main()
