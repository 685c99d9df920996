"""Write the shipped PyTorch-eager profile of a GPU from planner's own measurements of it.

    .venv/bin/python scripts/eager_profile.py h100-sxm
    .venv/bin/python scripts/eager_profile.py h200-sxm

Reads benchmarks/data/measured/<device>/profile.json (`planner calibrate --device cuda` on the real GPU)
and benchmarks/data/measured/<device>/probe/gpu_probe.json (benchmarks/gpu_probe.py on a lent GPU of the
same model) and writes hardware_specs/calibration/<device>/pytorch-eager.json: the calibration
measurements, the library that ran them, where each number comes from, and a `dispatch` block:

- kernel_floor_s: GPU time of the smallest GEMM kernel (probe: CUPTI kernel durations of 1x256x256,
  16x256x256 and 128x256x256 bf16, median): the per-kernel fixed cost on the device.
- isolated_call_s and after_launch_s: calibrate times each call alone with CUDA events around it; the
  GPU waits isolated_call_s for the host to launch the kernel, and the closing event is recorded
  after_launch_s after the launch, so event time = isolated_call_s + max(kernel, after_launch_s).
  after_launch_s is the probe's: its tiniest GEMMs' event time (kernel about the floor) less
  isolated_call_s measured on its GEMMs of 10-100 us (event - kernel); isolated_call_s of the
  calibrate machine is its own tiniest GEMMs' event time (under 2^24 FLOP) less after_launch_s.
- host_per_op_s: host time to issue one aten op that launches a kernel in model code (Python modules,
  the dispatcher, cudaLaunchKernel): probe's host issue time of a step of three small models whose
  kernels are too short to hold the host up (gpt2 decode b=1 c=128, bert-base b=1 s=32, vit-b-16 b=1),
  less their views at view_host_s, over their captured kernel ops; the median of the three.
- view_host_s: host time of a view (probe: tensor.view in a loop).

Kernel-timed measurements (`"timing": "kernel"`, CUPTI durations) are added where calibrate's event
timing cannot resolve the kernel or timed another one:
- bf16 attention (F.scaled_dot_product_attention: cuDNN's fused kernels, the eager default; calibrate
  timed only fp32 attention, another kernel), from gpu_probe.json;
- bf16 GEMMs in nn.Linear's layout over M x N x K per alignment of the inner dimensions (16, 8, 4 and 2
  bytes: cuBLAS runs its Hopper kernels only on 16-byte rows, older cutlass kernels otherwise), from
  gpu_grid.json. They replace calibrate's event-timed bf16 and fp16 GEMMs under LONG_EVENT_S, whose
  kernel time is hidden under the call's dispatch (an event-timed call takes dispatch + max(kernel,
  the host's work after the launch): under about 25 us nothing of the kernel shows);
- bf16 NCHW convolutions (all kernels of one call, cuDNN's layout transposes included), gpu_grid.json;
- eval-mode bf16 batch norm at CNN activation shapes (gpu_bn.json), replacing calibrate's fp32 batch
  norm of one 64-channel image, whose kernel had too few planes to spread (0.6 TB/s on the H100);
- training-mode batch norm (forward and backward), EfficientNet-B0's depthwise convolutions (forward
  and backward) and dense convolutions' backward at ResNet's shapes, depthwise-probe/ (training_kernels).
Writes atomically; prints what it wrote. `--no-loo` skips the leave-one-out report (minutes).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.calibration.dispatch import DISPATCH_CASES  # noqa: E402
from planner.files import write_text_atomic  # noqa: E402

FLOOR_SHAPES = ((1, 256, 256), (16, 256, 256), (128, 256, 256))
SMALL_SHAPES = {(m, nk, nk) for m in (1, 16, 128, 1024) for nk in (256, 1024, 4096)}
"""The probe's own GEMM grid (benchmarks/gpu_probe.py SMALL_GEMMS), none of validate's shapes."""
TINY_FLOP = 2.0 ** 24
LONG_EVENT_S = 200e-6
"""Event-timed 16-bit GEMMs at least this long are kept beside the kernel-timed grid (dispatch < 10%)."""


def captured_ops(spec: str) -> tuple[int, int]:
    """(kernel ops, view ops) of one step of a validate-style model case, as planner captures it."""
    from planner.calibration.dispatch import case_workload
    from planner.workload.device_graph import device_graph

    return device_graph(*case_workload(spec)).launches()


def build(device: str) -> dict:
    base = ROOT / "benchmarks" / "data" / "measured" / device
    raw = json.loads((base / "profile.json").read_text())
    probe = json.loads((base / "probe" / "gpu_probe.json").read_text())
    floor = statistics.median(g["kernel_s"] for g in probe["gemm"] if (g["m"], g["n"], g["k"]) in FLOOR_SHAPES)
    small = [g for g in probe["gemm"] if (g["m"], g["n"], g["k"]) in SMALL_SHAPES]
    probe_before = statistics.median(g["event_s"] - g["kernel_s"] for g in small if 10e-6 <= g["kernel_s"] <= 100e-6)
    probe_tiny = statistics.median(g["event_s"] for g in small if g["kernel_s"] <= 3e-6)
    after_launch = probe_tiny - probe_before
    tiny = [m["time_s"] for m in raw["measurements"] if m["kind"] == "gemm" and m["flop"] <= TINY_FLOP]
    isolated = statistics.median(tiny) - after_launch
    view_host = probe["host_per_call_s"]["tensor.view"]
    per_op = []
    for row in probe["models"]:
        if row["case"] in DISPATCH_CASES:
            kernels, views = captured_ops(row["case"])
            per_op.append((row["issue_s"] - views * view_host) / kernels)
    host = statistics.median(per_op)
    probe_src = (f"benchmarks/gpu_probe.py on a lent {probe['gpu']} ({probe['nvidia_smi']}), torch {probe['torch']}, "
                 f"CUDA {probe['cuda']}, cuDNN {probe['cudnn']}, {probe['date'][:10]} "
                 f"(benchmarks/data/measured/{device}/probe/gpu_probe.json)")
    raw["library"] = "pytorch-eager"
    raw["provenance"] = {
        "calibrate": {"gpu": raw["device_name"], "versions": raw["versions"], "date": raw["date"],
                      "command": f"planner calibrate --device cuda --budget-s {raw.get('budget_s')}",
                      "planner_commit": "febe8d8", "driver": "580.159.04",
                      "copied_from": f"benchmarks/data/measured/{device}/profile.json"},
        "probe": {"gpu": probe["gpu"], "nvidia_smi": probe["nvidia_smi"], "torch": probe["torch"],
                  "cuda": probe["cuda"], "cudnn": probe["cudnn"], "date": probe["date"], "command": probe["command"],
                  "copied_from": f"benchmarks/data/measured/{device}/probe/gpu_probe.json"},
        "note": "The calibrate run and the probe ran on two machines with the same GPU model, driver and "
                "software; kernel times are the GPU's, host times the machine's (another host differs by "
                "up to about 25%: benchmarks/gpu_validate.py)."}
    raw["dispatch"] = {
        "kernel_floor_s": floor, "kernel_floor_source": f"median CUPTI kernel time of bf16 GEMMs "
        f"{', '.join('x'.join(map(str, s)) for s in FLOOR_SHAPES)}; {probe_src}",
        "isolated_call_s": isolated, "isolated_call_source": f"median event time of the {len(tiny)} GEMMs of this "
        f"profile under 2^24 FLOP (calibrate's own machine) - after_launch_s",
        "after_launch_s": after_launch, "after_launch_source": f"probe: median event time of its GEMMs whose kernel "
        f"takes <= 3 us ({probe_tiny * 1e6:.1f} us) - median event - kernel of its GEMMs of 10-100 us "
        f"({probe_before * 1e6:.1f} us); {probe_src}",
        "host_per_op_s": host, "host_per_op_source": "median over " + ", ".join(
            f"{c} {v * 1e6:.1f} us" for c, v in zip(DISPATCH_CASES, per_op)) + " of (host issue time of one step - "
        f"views x view_host_s) / captured kernel ops; {probe_src}",
        "view_host_s": view_host, "view_host_source": f"tensor.view, 200 calls in a loop, median of 15; {probe_src}"}
    added = []
    for a in probe["attention"]:
        added.append({"kind": "attention", "dtype": a["dtype"], "bh": a["b"] * a["h"], "sq": a["sq"], "sk": a["sk"],
                      "d": a["d"], "causal": a["causal"], "group": a["h"] // a["hkv"], "time_s": a["kernel_s"],
                      "timing": "kernel", "kernel": a["kernels"][0][0] if a["kernels"] else "",
                      "flop": _attention_flop(a), "bytes": _attention_bytes(a), "source": "probe"})
    grid = json.loads((base / "probe" / "gpu_grid.json").read_text())
    for g in grid["gemm_grid"]:
        m, n, k = g["m"], g["n"], g["k"]
        added.append({"kind": "gemm", "dtype": "bf16", "layout": "nt", "m": m, "n": n, "k": k,
                      "align_bytes": g["align_bytes"], "time_s": g["kernel_s"], "timing": "kernel",
                      "kernel": g["kernel"], "flop": 2.0 * m * n * k, "bytes": 2.0 * (m * k + n * k + m * n),
                      "source": "grid"})
    for c in grid["conv"]:
        out = (c["hw"] + 2 * c["pad"] - c["ksize"]) // c["stride"] + 1
        flop = 2.0 * c["n"] * c["cout"] * out * out * c["cin"] * c["ksize"] ** 2
        nbytes = 2.0 * (c["n"] * c["cin"] * c["hw"] ** 2 + c["cout"] * c["cin"] * c["ksize"] ** 2
                        + c["n"] * c["cout"] * out * out)
        added.append({"kind": "conv", "dtype": "bf16", "n": c["n"], "cin": c["cin"], "cout": c["cout"], "hw": c["hw"],
                      "ksize": c["ksize"], "stride": c["stride"], "pad": c["pad"], "time_s": c["kernel_s"],
                      "timing": "kernel", "flop": flop, "bytes": nbytes, "source": "grid"})
    bn = json.loads((base / "probe" / "gpu_bn.json").read_text())
    for b in bn["batch_norm"]:
        added.append({"kind": "batch_norm", "dtype": "bf16", "n": b["n"], "c": b["c"], "hw": b["hw"],
                      "bytes": b["bytes"], "flop": 2.0 * b["n"] * b["c"] * b["hw"] ** 2, "time_s": b["kernel_s"],
                      "timing": "kernel", "kernel": b["kernel"], "source": "bn"})
    added += training_kernels(device, raw)
    kept = [x for x in raw["measurements"] if not (x["kind"] == "gemm" and x["dtype"] in ("bf16", "fp16")
                                                    and x["time_s"] < LONG_EVENT_S)
            and x["kind"] != "batch_norm"]
    raw["replaced"] = (f"{len(raw['measurements']) - len(kept)} measurements: event-timed bf16/fp16 GEMMs under "
                       f"{LONG_EVENT_S * 1e6:.0f} us, replaced by the kernel-timed bf16 grid (fp16 runs at its rate), "
                       "and the fp32 batch norm of one 64-channel image, replaced by bf16 batch norm at CNN shapes "
                       "(gpu_bn.json)")
    for name in ("gpu_depthwise_probe.json", "gpu_bn_train.json", "gpu_conv_backward.json"):
        probe = json.loads((base / "depthwise-probe" / name).read_text())
        raw["provenance"][f"depthwise-probe/{name}"] = {
            "gpu": probe["gpu"], "nvidia_smi": probe["nvidia_smi"], "torch": probe["torch"], "date": probe["date"],
            "command": probe["command"], "copied_from": f"benchmarks/data/measured/{device}/depthwise-probe/{name}",
            "note": "backward times less one gradient accumulation the probe ran (training_kernels)"}
    raw["provenance"]["grid"] = {"gpu": grid["gpu"], "nvidia_smi": grid["nvidia_smi"], "torch": grid["torch"],
                                 "date": grid["date"], "command": grid["command"],
                                 "copied_from": f"benchmarks/data/measured/{device}/probe/gpu_grid.json"}
    raw["measurements"] = kept + added
    raw.pop("leave_one_out", None)  # recomputed below over the measurements as shipped
    if "--no-loo" not in sys.argv:
        from planner.hardware.fit_report import fit_report
        raw["leave_one_out"] = fit_report(raw)
    return raw


def training_kernels(device: str, raw: dict) -> list[dict]:
    """Kernel-timed training-mode batch norm (forward with batch statistics, and backward), depthwise
    convolutions (forward, and backward: input and weight gradients) and dense convolutions' backward from
    benchmarks/data/measured/<device>/depthwise-probe/ (benchmarks/gpu_depthwise_probe.py): eval-mode
    batch norm and dense convolutions run other kernels, 2-6x faster per byte. Bytes as planner counts
    the aten op: every input and output tensor.

    The probe's backward calls ran on leaf tensors whose .grad it did not clear, so each also ran one
    gradient accumulation (x.grad += dx: reads two activations, writes one, 3 |x| bytes) that a training
    step never runs. It is subtracted at this GPU's own measured rates: the kernel floor plus 3 |x| at the
    streaming rate of calibrate's largest elementwise add (weight and bias gradients are per channel)."""
    adds = sorted((m["bytes"], m["time_s"]) for m in raw["measurements"] if m["kind"] == "add")
    rate = adds[-1][0] / adds[-1][1]
    floor = raw["dispatch"]["kernel_floor_s"]

    def backward_s(measured_s: float, x_bytes: float) -> float:
        accumulate = floor + 3 * x_bytes / rate
        if measured_s - accumulate <= 0.2 * measured_s:
            raise SystemExit(f"{device}: a backward of {measured_s * 1e6:.1f} us cannot hold a {accumulate * 1e6:.1f} us "
                             "accumulation: re-measure")
        return measured_s - accumulate

    base = ROOT / "benchmarks" / "data" / "measured" / device / "depthwise-probe"
    rows = []
    for b in json.loads((base / "gpu_bn_train.json").read_text())["batch_norm_train"]:
        elements = b["n"] * b["c"] * b["hw"] ** 2
        shape = {"dtype": "bf16", "n": b["n"], "c": b["c"], "hw": b["hw"], "timing": "kernel", "source": "bn_train"}
        rows.append({"kind": "batch_norm_train", **shape, "bytes": b["bytes_fwd"], "flop": 7.0 * elements,
                     "time_s": b["fwd_kernel_s"]})
        rows.append({"kind": "batch_norm_backward", **shape, "bytes": b["bytes_bwd"], "flop": 14.0 * elements,
                     "time_s": backward_s(b["bwd_kernel_s"], 2.0 * elements)})
    for d in json.loads((base / "gpu_depthwise_probe.json").read_text())["depthwise"]:
        n, c, hw, out, k = d["n"], d["c"], d["hw"], d["out_hw"], d["ksize"]
        shape = {"dtype": "bf16", "n": n, "c": c, "hw": hw, "ksize": k, "stride": d["stride"], "pad": d["pad"],
                 "timing": "kernel", "source": "depthwise"}
        # forward reads x and w, writes y; backward reads dy, x and w, writes dx and dw
        rows.append({"kind": "depthwise", **shape, "bytes": d["bytes_fwd"], "flop": d["flop_fwd"],
                     "time_s": d["fwd_kernel_s"]})
        rows.append({"kind": "depthwise_backward", **shape,
                     "bytes": 2.0 * (n * c * out * out + 2 * n * c * hw * hw + 2 * c * k * k),
                     "flop": 2.0 * d["flop_fwd"], "time_s": backward_s(d["bwd_kernel_s"], 2.0 * n * c * hw * hw)})
    for c in json.loads((base / "gpu_conv_backward.json").read_text())["conv_backward"]:
        n, cin, cout, hw, out, k = c["n"], c["cin"], c["cout"], c["hw"], c["out_hw"], c["ksize"]
        # input and weight gradients: each one forward's FLOP; reads dy, x and w, writes dx and dw
        rows.append({"kind": "conv_backward", "dtype": "bf16", "n": n, "cin": cin, "cout": cout, "hw": hw, "ksize": k,
                     "stride": c["stride"], "pad": c["pad"], "flop": 2.0 * c["flop_fwd"],
                     "bytes": 2.0 * (n * cout * out * out + 2 * n * cin * hw * hw + 2 * cout * cin * k * k),
                     "time_s": backward_s(c["bwd_kernel_s"], 2.0 * n * cin * hw * hw), "timing": "kernel",
                     "source": "conv_backward"})
    return rows


def _attention_flop(a: dict) -> float:
    """4·B·H·Sq·Sk·d (QKᵀ and PV), halved when causal and Sq = Sk, as planner counts it."""
    flop = 4.0 * a["b"] * a["h"] * a["sq"] * a["sk"] * a["d"]
    return flop / 2 if a["causal"] and a["sq"] == a["sk"] else flop


def _attention_bytes(a: dict) -> float:
    """Q and O at query heads, K and V at KV heads, bf16."""
    return 2.0 * a["d"] * (2 * a["b"] * a["h"] * a["sq"] + 2 * a["b"] * a["hkv"] * a["sk"])


def main() -> None:
    for device in [a for a in sys.argv[1:] if not a.startswith("--")] or ("h100-sxm", "h200-sxm"):
        raw = build(device)
        out = ROOT / "hardware_specs" / "calibration" / device / "pytorch-eager.json"
        write_text_atomic(out, json.dumps(raw, separators=(",", ":")))
        d = raw["dispatch"]
        print(f"{out.relative_to(ROOT)}: {len(raw['measurements'])} measurements; kernel floor "
              f"{d['kernel_floor_s'] * 1e6:.2f} us, isolated call {d['isolated_call_s'] * 1e6:.2f} us + max(kernel, "
              f"{d['after_launch_s'] * 1e6:.2f} us), host per op "
              f"{d['host_per_op_s'] * 1e6:.2f} us, view {d['view_host_s'] * 1e6:.2f} us; leave-one-out median "
              f"{raw.get('leave_one_out', {}).get('median_abs_error', float('nan')):.1%}")


if __name__ == "__main__":
    main()
