"""Depthwise convolutions on a real GPU: EfficientNet's steps and its depthwise kernels, eager PyTorch.

Note: the runs of 2026-11-26 under benchmarks/data/measured/*/depthwise-probe/ were made before `both`
cleared the leaf tensors' .grad, so their backward times hold one gradient accumulation each, which
scripts/eager_profile.py subtracts.

planner's published-row validation has EfficientNet-B0/B4 training on an A100 2.3-2.8x faster than
NVIDIA's measurements (DEV-016..019), and the calibration profiles time only dense convolutions: a
depthwise convolution (groups = channels) is predicted from the dense curves. This script measures,
on the machine it runs on:

- model steps (EfficientNet-B0 and B4, ResNet-50 as a dense control), eager, synthetic data, timed with
  CUDA events around one step, the host's issue time, and the profiler's kernels with the share of the
  depthwise kernels (named by cuDNN/ATen: "depthwise", "conv_depthwise", "dgrad"/"wgrad" of grouped
  convolutions);
- EfficientNet-B0's depthwise shapes alone, bf16 NCHW as timm runs them: the forward kernel time, and
  the backward (input and weight gradients) as the kernel time of forward + backward minus forward.

Run on the GPU machine: `python3 benchmarks/gpu_depthwise_probe.py --out DIR` (about 2 minutes on an
H100). Writes DIR/gpu_depthwise_probe.json after each part, and DIR/gpu_depthwise_probe.log. `--bn`:
training-mode batch norm at CNN shapes (gpu_bn_train.json); `--conv`: dense convolutions' backward at
ResNet's shapes (gpu_conv_backward.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:  # the zoo's package, installed as planner_models; on a bare machine, the models/ folder
    import planner_models  # noqa: F401
except ImportError:
    import importlib
    sys.modules["planner_models"] = importlib.import_module("models")

from gpu_probe import file_log, nvidia_smi, profiled  # noqa: E402

from planner.calibration.bench import measure  # noqa: E402

MODELS = (("efficientnet-b0:training:b=256", True), ("efficientnet-b0:training:b=256", False),
          ("efficientnet-b0:b=256", False), ("efficientnet-b4:training:b=64:r=380", True),
          ("resnet50:training:b=256", True))
"""(validate-style case, amp: fp32 weights under bf16 autocast, else the bf16 model)."""
DEPTHWISE = ((32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1), (144, 56, 5, 2), (240, 28, 5, 1), (240, 28, 3, 2),
             (480, 14, 3, 1), (480, 14, 5, 1), (672, 14, 5, 1), (672, 14, 5, 2), (1152, 7, 5, 1), (1152, 7, 3, 1))
"""EfficientNet-B0's depthwise convolutions: (channels, input height = width, kernel, stride)."""
BATCHES = (32, 256)
TINY_MODELS = (("efficientnet-b0:training:b=2:r=64", True),)
TINY_DEPTHWISE = ((32, 16, 3, 1), (96, 16, 5, 2))


def is_depthwise(name: str) -> bool:
    n = name.lower()
    return "depthwise" in n or "dw_conv" in n or "conv_depthwise" in n


def models(log, device: str, cases) -> list[dict]:
    from planner.calibration.validate import parse_model_case
    from planner.workload.graphs import Workload as W
    from planner.workload.graphs import _loss, build_inputs, resolve_workload
    from planner.workload.zoo import resolve
    rows = []
    for spec, amp in cases:
        name, w = parse_model_case(spec)
        model = resolve(name)
        w = resolve_workload(model, W(w.mode, w.batch, w.seq_len, w.context_len, w.image_size,
                                      "fp32" if amp else "bf16"))
        torch.manual_seed(0)
        module, args, kwargs, labels = build_inputs(model, w, device=device)
        if w.mode == "training":
            opt = torch.optim.AdamW(module.parameters(), lr=1e-4, fused=device == "cuda")

            def fn(_):
                opt.zero_grad(set_to_none=True)
                with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
                    loss = _loss(model, module(*args, **kwargs), labels)
                loss.backward()
                opt.step()
        else:
            def fn(_):
                with torch.no_grad():
                    module(*args, **kwargs)
        event_s, _ = measure(fn, device, warmup=2, repeats=20, budget_s=2.0, min_repeats=5)
        issue = []
        for i in range(3):
            sync(device)
            t0 = time.perf_counter()
            fn(i)
            issue.append(time.perf_counter() - t0)
        sync(device)
        p = profiled(fn, 2) if device == "cuda" else {"kernels": 0, "kernel_sum_s": 0.0, "top_kernels": []}
        depthwise = [k for k in p.get("top_kernels", []) if is_depthwise(k[0])]
        row = {"case": spec, "amp": amp, "image_size": w.image_size, "event_s": event_s,
               "issue_s": statistics.median(issue), **p,
               "depthwise_kernel_s": sum(k[2] for k in depthwise) / 2, "depthwise_kernels": sum(k[1] for k in depthwise) / 2}
        rows.append(row)
        log(f"{spec}{' amp' if amp else ''}: event {event_s * 1e3:.2f} ms, issue {row['issue_s'] * 1e3:.2f} ms, "
            f"kernels {p['kernels']:.0f} sum {p['kernel_sum_s'] * 1e3:.2f} ms, depthwise (of the top kernels) "
            f"{row['depthwise_kernel_s'] * 1e3:.2f} ms in {row['depthwise_kernels']:.0f}")
        for k in p.get("top_kernels", [])[:6]:
            log(f"    {k[0][:90]}  x{k[1] / 2:.0f}  {k[2] / 2 * 1e3:.3f} ms")
        module = args = kwargs = labels = fn = opt = None
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def depthwise_grid(log, device: str, shapes, batches) -> list[dict]:
    rows = []
    for n in batches:
        for c, hw, k, stride in shapes:
            x = torch.randn(n, c, hw, hw, device=device, dtype=torch.bfloat16, requires_grad=True)
            weight = torch.randn(c, 1, k, k, device=device, dtype=torch.bfloat16, requires_grad=True)
            out = F.conv2d(x, weight, None, stride, k // 2, 1, c)
            grad = torch.randn_like(out)

            def fwd(_):
                with torch.no_grad():
                    F.conv2d(x, weight, None, stride, k // 2, 1, c)

            def both(_):
                x.grad = weight.grad = None  # a training step never accumulates into an activation's grad
                y = F.conv2d(x, weight, None, stride, k // 2, 1, c)
                y.backward(grad)
            fwd(0)
            both(0)
            pf, pb = (profiled(fwd, 3), profiled(both, 3)) if device == "cuda" else ({}, {})
            ho = (hw + 2 * (k // 2) - k) // stride + 1
            row = {"n": n, "c": c, "hw": hw, "ksize": k, "stride": stride, "pad": k // 2, "groups": c,
                   "dtype": "bf16", "out_hw": ho,
                   "bytes_fwd": 2.0 * (n * c * hw * hw + n * c * ho * ho + c * k * k),
                   "flop_fwd": 2.0 * n * c * ho * ho * k * k,
                   "fwd_kernel_s": pf.get("kernel_sum_s", 0.0), "fwd_kernels": pf.get("kernels", 0),
                   "fwd_names": [t[0][:80] for t in pf.get("top_kernels", [])[:2]],
                   "bwd_kernel_s": pb.get("kernel_sum_s", 0.0) - pf.get("kernel_sum_s", 0.0),
                   "both_names": [t[0][:80] for t in pb.get("top_kernels", [])[:4]]}
            rows.append(row)
            log(f"depthwise n={n} c={c} {hw}x{hw} k{k} s{stride}: fwd {row['fwd_kernel_s'] * 1e6:.1f} us "
                f"({row['bytes_fwd'] / max(row['fwd_kernel_s'], 1e-9) / 1e12:.2f} TB/s), bwd {row['bwd_kernel_s'] * 1e6:.1f} us; "
                f"{row['fwd_names'][:1]}")
            x = weight = out = grad = None
    return rows


BATCH_NORMS = [(n, c, hw) for n in (2, 16, 128, 512) for c, hw in ((64, 112), (256, 56), (512, 28), (1024, 14),
                                                                   (2048, 7))]
"""gpu_probe.py's batch-norm shapes (NCHW activations of a CNN), here in training mode."""


def bn_train_grid(log, device: str, shapes) -> list[dict]:
    """Kernel time of training-mode batch norm, NCHW bf16 activations with fp32 affine parameters and
    statistics (as autocast and the zoo's bf16 CNNs run it): the forward (batch statistics, then the
    transform) and the backward (forward + backward minus forward). Bytes as planner counts an aten op:
    every input and output tensor of native_batch_norm (x, weight, bias, running mean and variance; y,
    saved mean and inverse std) and of native_batch_norm_backward (dy, x, weight, running mean and
    variance, saved mean and inverse std; dx, dweight, dbias)."""
    rows = []
    for n, c, hw in shapes:
        x = torch.randn(n, c, hw, hw, device=device, dtype=torch.bfloat16, requires_grad=True)
        weight = torch.ones(c, device=device, requires_grad=True)
        bias = torch.zeros(c, device=device, requires_grad=True)
        rm, rv = torch.zeros(c, device=device), torch.ones(c, device=device)
        grad = torch.randn_like(x)

        def fwd(_):
            with torch.no_grad():
                F.batch_norm(x, rm, rv, weight, bias, True)

        def both(_):
            x.grad = weight.grad = bias.grad = None  # a training step never accumulates into an activation's grad
            F.batch_norm(x, rm, rv, weight, bias, True).backward(grad)
        fwd(0)
        both(0)
        pf, pb = (profiled(fwd, 3), profiled(both, 3)) if device == "cuda" else ({}, {})
        act = x.numel() * 2.0
        row = {"n": n, "c": c, "hw": hw, "dtype": "bf16", "bytes_fwd": 2 * act + 6 * c * 4.0,
               "bytes_bwd": 3 * act + 7 * c * 4.0, "fwd_kernel_s": pf.get("kernel_sum_s", 0.0),
               "fwd_kernels": pf.get("kernels", 0), "bwd_kernel_s": pb.get("kernel_sum_s", 0.0) - pf.get("kernel_sum_s", 0.0),
               "names": [t[0][:80] for t in pb.get("top_kernels", [])[:4]]}
        rows.append(row)
        log(f"batch norm (training) n={n} c={c} {hw}x{hw}: fwd {row['fwd_kernel_s'] * 1e6:.1f} us "
            f"({row['bytes_fwd'] / max(row['fwd_kernel_s'], 1e-9) / 1e12:.2f} TB/s), bwd {row['bwd_kernel_s'] * 1e6:.1f} us "
            f"({row['bytes_bwd'] / max(row['bwd_kernel_s'], 1e-9) / 1e12:.2f} TB/s)")
        x = weight = bias = grad = None
    return rows


CONVS = [(n, cin, cout, hw, ks, st) for n in (2, 32, 128)
         for cin, cout, hw, ks, st in ((3, 64, 224, 7, 2), (64, 64, 56, 3, 1), (64, 256, 56, 1, 1),
                                       (128, 128, 28, 3, 1), (256, 256, 14, 3, 1), (256, 1024, 14, 1, 1),
                                       (512, 512, 7, 3, 1), (256, 64, 56, 1, 1), (1024, 256, 14, 1, 1))]
"""gpu_probe.py's convolution grid (ResNet's shapes) and two bottleneck reductions, bf16 NCHW."""


def conv_backward_grid(log, device: str, shapes) -> list[dict]:
    """Kernel time of a dense bf16 NCHW convolution's backward, input and weight gradients (all kernels of
    the call, cuDNN's layout transposes included): forward + backward minus forward, as eager training
    runs it (no bias, as ResNet's convolutions)."""
    rows = []
    for n, cin, cout, hw, ks, st in shapes:
        x = torch.randn(n, cin, hw, hw, device=device, dtype=torch.bfloat16, requires_grad=True)
        weight = torch.randn(cout, cin, ks, ks, device=device, dtype=torch.bfloat16, requires_grad=True) * 0.05
        weight = weight.detach().requires_grad_(True)
        out = F.conv2d(x, weight, None, st, ks // 2)
        grad = torch.randn_like(out)

        def fwd(_):
            with torch.no_grad():
                F.conv2d(x, weight, None, st, ks // 2)

        def both(_):
            x.grad = weight.grad = None  # a training step never accumulates into an activation's grad
            F.conv2d(x, weight, None, st, ks // 2).backward(grad)
        fwd(0)
        both(0)
        both(1)
        pf, pb = (profiled(fwd, 3), profiled(both, 3)) if device == "cuda" else ({}, {})
        ho = (hw + 2 * (ks // 2) - ks) // st + 1
        flop_fwd = 2.0 * n * cout * ho * ho * cin * ks * ks
        row = {"n": n, "cin": cin, "cout": cout, "hw": hw, "ksize": ks, "stride": st, "pad": ks // 2, "dtype": "bf16",
               "out_hw": ho, "flop_fwd": flop_fwd, "fwd_kernel_s": pf.get("kernel_sum_s", 0.0),
               "bwd_kernel_s": pb.get("kernel_sum_s", 0.0) - pf.get("kernel_sum_s", 0.0),
               "bwd_kernels": pb.get("kernels", 0) - pf.get("kernels", 0),
               "names": [t[0][:80] for t in pb.get("top_kernels", [])[:5]]}
        rows.append(row)
        log(f"conv backward n={n} {cin}->{cout} {hw}x{hw} k{ks} s{st}: fwd {row['fwd_kernel_s'] * 1e6:.1f} us, "
            f"bwd {row['bwd_kernel_s'] * 1e6:.1f} us ({2 * flop_fwd / max(row['bwd_kernel_s'], 1e-9) / 1e12:.0f} TFLOP/s) "
            f"in {row['bwd_kernels']:.0f} kernels")
        x = weight = out = grad = None
    return rows


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--tiny", action="store_true", help="small shapes (a dry run of the code)")
    ap.add_argument("--bn", action="store_true", help="only training-mode batch norm (gpu_bn_train.json)")
    ap.add_argument("--conv", action="store_true", help="only dense convolutions' backward (gpu_conv_backward.json)")
    ap.add_argument("--models", nargs="+", metavar="CASE[:amp]",
                    help="only these model steps (gpu_models.json), e.g. resnet50:training:b=64:amp")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    log = file_log(out / "gpu_depthwise_probe.log")
    smi = nvidia_smi() if a.device == "cuda" else ""
    result = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "gpu": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu", "nvidia_smi": smi,
              "torch": torch.__version__, "cuda": torch.version.cuda,
              "cudnn": torch.backends.cudnn.version() if a.device == "cuda" else None, "cpu_count": os.cpu_count(),
              "command": "python3 benchmarks/gpu_depthwise_probe.py --out $OUT"}
    log(json.dumps(result))

    def save(name: str = "gpu_depthwise_probe.json") -> None:
        tmp = out / f"{name}.tmp"
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(out / name)

    if a.models:
        result["command"] = "python3 benchmarks/gpu_depthwise_probe.py --models " + " ".join(a.models) + " --out $OUT"
        cases = [(m.removesuffix(":amp"), m.endswith(":amp")) for m in a.models]
        result["models"] = models(log, a.device, cases)
        save("gpu_models.json")
        return
    if a.conv:
        result["command"] = "python3 benchmarks/gpu_depthwise_probe.py --conv --out $OUT"
        result["conv_backward"] = conv_backward_grid(log, a.device, [(2, 3, 8, 16, 3, 1)] if a.tiny else CONVS)
        save("gpu_conv_backward.json")
        return
    if a.bn:
        result["command"] = "python3 benchmarks/gpu_depthwise_probe.py --bn --out $OUT"
        result["batch_norm_train"] = bn_train_grid(log, a.device, [(2, 8, 16)] if a.tiny else BATCH_NORMS)
        save("gpu_bn_train.json")
        return

    result["depthwise"] = depthwise_grid(log, a.device, TINY_DEPTHWISE if a.tiny else DEPTHWISE,
                                         (2,) if a.tiny else BATCHES)
    save()
    result["models"] = models(log, a.device, TINY_MODELS if a.tiny else MODELS)
    save()


if __name__ == "__main__":
    main()
