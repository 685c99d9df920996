"""Kernel time apart from dispatch on a real GPU: what `planner calibrate` cannot separate by itself.

`planner calibrate` and `planner validate` time each call with CUDA events around one call: the time
from the first event to the second holds the host's dispatch of the call (Python, the dispatcher,
cudaLaunchKernel: the GPU waits for it) and then the kernel. This script times the same calls that
way *and* reads each kernel's own duration from the PyTorch profiler (CUPTI), so that

    isolated call (event)  = dispatch latency + kernel
    model step (event)     = max(host issue of every op, the kernels back to back) + edges

can be measured apart: off-grid GEMMs (validate's), a small-GEMM grid, bf16 flash attention (the
kernel eager SDPA runs; the calibration profile timed only fp32 attention), a tiny-op loop (host
cost per call), and validate's model cases (wall, kernel sum, kernels, top-level aten ops).

Run on the GPU machine: `python3 benchmarks/gpu_probe.py --out DIR` (about 3-4 minutes on an H200).
Writes DIR/gpu_probe.json and two gzip'd Chrome traces. Not used at run time: the numbers it wrote
on the lent H100/H200 are copied, with this provenance, into the profiles they belong to.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
try:  # the zoo's package, installed as planner_models; on a bare machine, the models/ folder
    import planner_models  # noqa: F401
except ImportError:
    import importlib
    sys.modules["planner_models"] = importlib.import_module("models")

from planner.calibration.bench import measure, random_tensor, rotation  # noqa: E402
from planner.calibration.validate import GPU_MODELS, OFF_GRID_GEMMS, parse_model_case  # noqa: E402

SMALL_GEMMS = [(m, nk, nk) for m in (1, 16, 128, 1024) for nk in (256, 1024, 4096)] + [(4096, 4096, 4096),
                                                                                       (8192, 8192, 8192)]
ATTENTION = ([("prefill", b, 32, 32, s, s, True) for b, s in ((1, 512), (1, 2048), (4, 2048), (1, 8192), (32, 384))]
             + [("prefill-bert", b, 16, 16, 384, 384, False) for b in (1, 32)]
             + [("decode", b, 32, 8, 1, c, False) for b, c in ((1, 2048), (32, 2048), (128, 2048), (8, 8192))])


def trace_stats(path: str) -> dict:
    """Kernels, their summed and busy time, top-level CPU ops and the wall span of a Chrome trace."""
    events = json.load(open(path))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    cpu = sorted((e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"),
                 key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    top, end_by_tid = 0, {}
    for e in cpu:  # outermost ops: not inside another op of the same thread
        if e["ts"] >= end_by_tid.get(e["tid"], -1):
            top += 1
            end_by_tid[e["tid"]] = e["ts"] + e["dur"]
    spans = sorted((k["ts"], k["ts"] + k["dur"]) for k in kernels)
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    by_name: dict[str, list] = {}
    for k in kernels:
        entry = by_name.setdefault(k["name"][:90], [0, 0.0])
        entry[0] += 1
        entry[1] += k["dur"] * 1e-6
    start = min([e["ts"] for e in cpu] + [s for s, _ in spans]) if spans else 0
    end = max([e["ts"] + e["dur"] for e in cpu] + [e for _, e in spans]) if spans else 0
    return {"kernels": len(kernels), "kernel_sum_s": sum(k["dur"] for k in kernels) * 1e-6, "busy_s": busy * 1e-6,
            "top_level_ops": top, "cpu_ops": len(cpu), "span_s": (end - start) * 1e-6,
            "top_kernels": sorted(([n, c, t] for n, (c, t) in by_name.items()), key=lambda r: -r[2])[:12]}


def nvidia_smi() -> str:
    """The GPU's name, driver, power limit and top SM clock as nvidia-smi reports them."""
    return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,power.limit,clocks.max.sm",
                           "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()


def file_log(path: Path):
    """A log(line) that prints each line and rewrites `path` with every line so far: a run cut off by its
    lease keeps the log of what it measured."""
    lines: list[str] = []

    def log(line: str) -> None:
        print(line, flush=True)
        lines.append(line)
        path.write_text("\n".join(lines) + "\n")
    return log


def profiled(fn, steps: int, keep: str | None = None) -> dict:
    """Run fn `steps` times under the profiler (CPU + CUDA) and return trace_stats per step."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=keep is not None) as prof:
        for i in range(steps):
            fn(i)
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    prof.export_chrome_trace(path)
    stats = trace_stats(path)
    if keep:
        with open(path, "rb") as src, gzip.open(keep, "wb") as dst:
            dst.write(src.read())
    os.unlink(path)
    return {k: (v / steps if k in ("kernels", "kernel_sum_s", "busy_s", "top_level_ops", "cpu_ops", "span_s")
                else v) for k, v in stats.items()}


def gemms(log) -> list[dict]:
    rows = []
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for m, n, k in list(OFF_GRID_GEMMS) + SMALL_GEMMS:
        sets = rotation(lambda: (random_tensor((m, k), torch.bfloat16, "cuda"),
                                 random_tensor((n, k), torch.bfloat16, "cuda").t()), (m * k + k * n) * 2, l2, "cuda")
        fn = lambda i: torch.mm(*sets[i % len(sets)])  # noqa: E731
        event_s, _ = measure(fn, "cuda", warmup=2, repeats=30, budget_s=0.5)
        p = profiled(fn, 20)
        rows.append({"m": m, "n": n, "k": k, "dtype": "bf16", "event_s": event_s, "kernel_s": p["kernel_sum_s"],
                     "kernels_per_call": p["kernels"], "kernel": p["top_kernels"][0][0] if p["top_kernels"] else ""})
        log(f"gemm {m}x{n}x{k}: event {event_s * 1e6:.1f} us, kernel {p['kernel_sum_s'] * 1e6:.1f} us")
    return rows


GRID_M = (1, 16, 128, 1024, 8192)
GRID_NK = {16: (256, 1024, 4096, 16384), 8: (252, 1020, 4092, 16380), 4: (250, 1018, 4090, 16378),
           2: (251, 1021, 4093, 16381)}
"""Inner dimensions per alignment in bytes of bf16 rows (16: multiples of 8 elements, the sm90 kernels'
requirement; 2: odd sizes). None of validate's shapes."""
CONVS = [(n, cin, cout, hw, ks, st) for n in (2, 32, 128)
         for cin, cout, hw, ks, st in ((3, 64, 224, 7, 2), (64, 64, 56, 3, 1), (64, 256, 56, 1, 1),
                                       (128, 128, 28, 3, 1), (256, 256, 14, 3, 1), (256, 1024, 14, 1, 1),
                                       (512, 512, 7, 3, 1))]


def gemm_grid(log) -> list[dict]:
    """Kernel time (CUPTI) of bf16 nn.Linear-layout GEMMs over M x (N, K) per alignment of N and K, inputs
    rotated beyond the L2."""
    rows = []
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for align, sizes in GRID_NK.items():
        for m in GRID_M:
            for n in sizes:
                for k in sizes:
                    # inputs rotated beyond twice the L2 (as calibrate and validate do): a weight read
                    # from L2 on every call would time the cache, not a model's cold weights
                    sets = rotation(lambda: (random_tensor((m, k), torch.bfloat16, "cuda"),
                                             random_tensor((n, k), torch.bfloat16, "cuda").t()),
                                    (m * k + k * n) * 2, l2, "cuda")
                    fn = lambda i: torch.mm(*sets[i % len(sets)])  # noqa: E731
                    fn(len(sets) - 2)  # warm-up on sets the timed calls reach last, if at all
                    fn(len(sets) - 1)
                    p = profiled(fn, 5)
                    rows.append({"m": m, "n": n, "k": k, "align_bytes": align, "dtype": "bf16",
                                 "kernel_s": p["kernel_sum_s"], "kernels_per_call": p["kernels"],
                                 "kernel": p["top_kernels"][0][0] if p["top_kernels"] else ""})
                    sets = None
        log(f"gemm grid align {align} B: {sum(r['align_bytes'] == align for r in rows)} shapes, e.g. "
            f"{rows[-1]['m']}x{rows[-1]['n']}x{rows[-1]['k']} {rows[-1]['kernel_s'] * 1e6:.1f} us {rows[-1]['kernel'][:50]}")
    return rows


def conv_grid(log) -> list[dict]:
    """Kernel time (all kernels of one call: cuDNN's layout transposes included) of bf16 NCHW convolutions."""
    rows = []
    for n, cin, cout, hw, ks, st in CONVS:
        x = torch.randn(n, cin, hw, hw, device="cuda", dtype=torch.bfloat16)
        conv = torch.nn.Conv2d(cin, cout, ks, st, ks // 2, bias=False, device="cuda", dtype=torch.bfloat16)

        def fn(i):
            with torch.no_grad():
                conv(x)
        fn(0)
        fn(1)
        p = profiled(fn, 5)
        rows.append({"n": n, "cin": cin, "cout": cout, "hw": hw, "ksize": ks, "stride": st, "pad": ks // 2,
                     "dtype": "bf16", "kernel_s": p["kernel_sum_s"], "kernels_per_call": p["kernels"],
                     "kernels": p["top_kernels"][:3]})
        log(f"conv n={n} {cin}->{cout} {hw}x{hw} k{ks} s{st}: {p['kernel_sum_s'] * 1e6:.1f} us in "
            f"{p['kernels']:.0f} kernels")
        x = conv = None
    return rows


BATCH_NORMS = [(n, c, hw) for n in (2, 16, 128, 512) for c, hw in ((64, 112), (256, 56), (512, 28), (1024, 14),
                                                                   (2048, 7))]


def batch_norm_grid(log) -> list[dict]:
    """Kernel time of eval-mode bf16 batch norm on NCHW activations (a CNN's, many images and channels;
    calibrate timed one fp32 image of 64 channels), inputs rotated beyond the L2."""
    rows = []
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for n, c, hw in BATCH_NORMS:
        bn = torch.nn.BatchNorm2d(c, device="cuda", dtype=torch.bfloat16).eval()
        sets = rotation(lambda: (torch.randn(n, c, hw, hw, device="cuda", dtype=torch.bfloat16),),
                        n * c * hw * hw * 2, l2, "cuda")

        def fn(i):
            with torch.no_grad():
                bn(sets[i % len(sets)][0])
        fn(len(sets) - 1)
        p = profiled(fn, 5)
        rows.append({"n": n, "c": c, "hw": hw, "dtype": "bf16", "bytes": 2.0 * 2 * n * c * hw * hw,
                     "kernel_s": p["kernel_sum_s"], "kernels_per_call": p["kernels"],
                     "kernel": p["top_kernels"][0][0] if p["top_kernels"] else ""})
        log(f"batch_norm n={n} c={c} {hw}x{hw}: {p['kernel_sum_s'] * 1e6:.1f} us "
            f"({rows[-1]['bytes'] / p['kernel_sum_s'] / 1e12:.2f} TB/s)")
        sets = bn = None
    return rows


def attention(log) -> list[dict]:
    rows = []
    for what, b, h, hkv, sq, sk, causal in ATTENTION:
        q = torch.randn(b, h, sq, 128, device="cuda", dtype=torch.bfloat16)
        kv = [torch.randn(b, hkv, sk, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        fn = lambda i: F.scaled_dot_product_attention(q, *kv, is_causal=causal, enable_gqa=hkv != h)  # noqa: E731
        event_s, _ = measure(fn, "cuda", warmup=2, repeats=20, budget_s=0.5)
        p = profiled(fn, 10)
        rows.append({"what": what, "b": b, "h": h, "hkv": hkv, "sq": sq, "sk": sk, "d": 128, "causal": causal,
                     "dtype": "bf16", "event_s": event_s, "kernel_s": p["kernel_sum_s"],
                     "kernels_per_call": p["kernels"], "kernels": p["top_kernels"][:3]})
        log(f"attention {what} b={b} h={h}/{hkv} {sq}x{sk}: event {event_s * 1e6:.1f} us, kernel "
            f"{p['kernel_sum_s'] * 1e6:.1f} us, {p['top_kernels'][0][0][:60] if p['top_kernels'] else ''}")
        q = kv = None  # freed before the next shape
    return rows


def host_loop(log) -> dict:
    """Host cost per call of tiny ops issued back to back (calibrate's launch loop), per kind of call."""
    a = torch.randn(64, device="cuda")
    x = torch.randn(1, 64, device="cuda", dtype=torch.bfloat16)
    lin = torch.nn.Linear(64, 64, device="cuda", dtype=torch.bfloat16)
    calls = {"torch.add": lambda: torch.add(a, a), "tensor.view": lambda: a.view(8, 8),
             "nn.Linear module": lambda: lin(x), "F.silu": lambda: F.silu(x)}
    out = {}
    for name, call in calls.items():
        for _ in range(50):
            call()
        torch.cuda.synchronize()
        samples = []
        for _ in range(15):
            t0 = time.perf_counter()
            for _ in range(200):
                call()
            samples.append((time.perf_counter() - t0) / 200)
            torch.cuda.synchronize()
        out[name] = statistics.median(samples)
        log(f"host {name}: {out[name] * 1e6:.2f} us per call")
    return out


POWER_CASES = ("llama-3.1-8b:decode:b=1:c=2048", "llama-3.1-8b:prefill:b=1:s=2048", "resnet50:b=256")


def power_of(fn, seconds: float) -> dict:
    """Average power (NVML total-energy counter) and median SM clock over `seconds` of fn back to back."""
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    clocks, i = [], 0
    torch.cuda.synchronize()
    e0, t0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn(i)
        i += 1
        if i % 4 == 0:
            clocks.append(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    torch.cuda.synchronize()
    e1, t1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
    return {"avg_w": (e1 - e0) / 1e3 / (t1 - t0), "sm_mhz": statistics.median(clocks) if clocks else None,
            "steps": i, "seconds": t1 - t0}


def idle_and_gemm_power(log) -> dict:
    """Idle (context held), sustained bf16 8192^3 GEMM and a 1 GiB copy: power, clock, rate."""
    time.sleep(2.0)
    idle = power_of(lambda i: time.sleep(0.05), 3.0)
    a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    g = power_of(lambda i: torch.mm(a, b), 5.0)
    g["tflop_per_s"] = 2 * 8192 ** 3 * g["steps"] / g["seconds"] / 1e12
    x = torch.randn(2 ** 28, device="cuda")
    y = torch.empty_like(x)
    c = power_of(lambda i: y.copy_(x), 4.0)
    c["tb_per_s"] = 2 * x.numel() * 4 * c["steps"] / c["seconds"] / 1e12
    out = {"idle": idle, "gemm_bf16_8192": g, "copy_1gib_fp32": c}
    log(f"power: {json.dumps(out)}")
    return out


def models(log, out_dir: Path) -> list[dict]:
    from planner.workload.graphs import Workload as W
    from planner.workload.graphs import _loss, build_inputs, resolve_workload
    from planner.workload.zoo import resolve
    rows = []
    for spec in GPU_MODELS + ("gpt2:training:b=8:s=1024:amp", "gpt2:decode:b=1:c=128", "bert-base:b=1:s=32",
                              "vit-b-16:b=1"):
        amp = spec.endswith(":amp")
        name, w = parse_model_case(spec.removesuffix(":amp"))
        try:
            model = resolve(name)
        except Exception as exc:  # noqa: BLE001 (a zoo without the model: say so and go on)
            log(f"{spec}: {exc}")
            continue
        w = resolve_workload(model, W(w.mode, w.batch, w.seq_len, w.context_len, w.image_size,
                                      "fp32" if amp else "bf16"))
        torch.manual_seed(0)
        module, args, kwargs, labels = build_inputs(model, w, device="cuda")
        for k_cache, v_cache in kwargs.get("kv_cache") or ():
            k_cache.normal_()
            v_cache.normal_()
        if w.mode == "training":
            opt = torch.optim.AdamW(module.parameters(), lr=1e-4, fused=True)

            def fn(_):
                opt.zero_grad(set_to_none=True)
                # amp: fp32 master weights, bf16 autocast of the forward and the loss (as PyTorch users run it)
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                    loss = _loss(model, module(*args, **kwargs), labels)
                loss.backward()
                opt.step()
        else:
            def fn(_):
                with torch.no_grad():
                    module(*args, **kwargs)
        event_s, _ = measure(fn, "cuda", warmup=2, repeats=30, budget_s=2.0, min_repeats=5)
        issue = []
        for i in range(5):  # host time to issue one step, the GPU not waited on (its queue far from full)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn(i)
            issue.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        power = power_of(fn, 3.0) if spec in POWER_CASES else None
        keep = None
        if spec in ("llama-3.1-8b:decode:b=1:c=2048", "gpt2:training:b=8:s=1024"):
            keep = str(out_dir / f"h200_{spec.replace(':', '_').replace('=', '')}.json.gz")
        p = profiled(fn, 1 if keep else 2, keep)
        rows.append({"case": spec, "event_s": event_s, "issue_s": statistics.median(issue), "power": power, **p})
        log(f"{spec}: event {event_s * 1e3:.3f} ms, kernels {p['kernels']:.0f} sum {p['kernel_sum_s'] * 1e3:.3f} ms "
            f"busy {p['busy_s'] * 1e3:.3f} ms, top-level ops {p['top_level_ops']:.0f}, span {p['span_s'] * 1e3:.3f} ms, "
            f"issue {statistics.median(issue) * 1e3:.3f} ms, power {power}")
        module = args = kwargs = labels = fn = None  # freed before the next case
        torch.cuda.empty_cache()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip-models", action="store_true")
    ap.add_argument("--grid", action="store_true", help="only the GEMM-alignment and convolution grids")
    ap.add_argument("--bn", action="store_true", help="only the batch-norm grid")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    log_lines: list[str] = []

    def log(line: str) -> None:
        print(line, flush=True)
        log_lines.append(line)

    smi = nvidia_smi()
    result = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": torch.cuda.get_device_name(0),
              "nvidia_smi": smi, "torch": torch.__version__, "cuda": torch.version.cuda,
              "cudnn": torch.backends.cudnn.version(), "cpu": platform.processor() or platform.machine(),
              "cpu_count": os.cpu_count(), "command": "python3 benchmarks/gpu_probe.py " + ("--grid " if "--grid" in sys.argv else "") + "--out $OUT"}
    log(json.dumps(result))
    t0 = time.time()
    if a.bn:
        result["batch_norm"] = batch_norm_grid(log)
        result["command"] = "python3 benchmarks/gpu_probe.py --bn --out $OUT"
        (out / "gpu_bn.json").write_text(json.dumps(result, indent=1))
        return
    if a.grid:
        result["gemm_grid"] = gemm_grid(log)
        result["conv"] = conv_grid(log)
        result["duration_s"] = time.time() - t0
        (out / "gpu_grid.json").write_text(json.dumps(result, indent=1))
        (out / "gpu_grid.log").write_text("\n".join(log_lines) + "\n")
        return
    result["host_per_call_s"] = host_loop(log)
    result["gemm"] = gemms(log)
    result["attention"] = attention(log)
    if not a.skip_models:
        result["models"] = models(log, out)
    result["power"] = idle_and_gemm_power(log)
    result["duration_s"] = time.time() - t0
    (out / "gpu_probe.json").write_text(json.dumps(result, indent=1))
    (out / "gpu_probe.log").write_text("\n".join(log_lines) + "\n")


if __name__ == "__main__":
    main()
