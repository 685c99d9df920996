"""torch.compile (TorchInductor) on a real GPU: the same model steps as eager, timed and profiled.

planner's `compile` engine (hardware_specs/engines/compile.json) fuses pointwise chains, norms and
reductions into Triton kernels and replays the LLM decode step as a CUDA graph (mode='reduce-overhead',
as gpt-fast runs it); prefill, encoders, CNNs and training run in default mode. This script measures
what that engine predicts, on the machine it runs on: each case eager and compiled, timed with CUDA
events around one step (as `planner validate` times eager), and read back from the PyTorch profiler
(kernels per step, their summed time, CUDA graph launches), with the compile time and Dynamo's graph
count and graph breaks.

Decoders and encoders keep their real widths but fewer layers (the `layers` column), so that
Inductor's compile of every case fits one short lease; planner predicts the same truncated model
(benchmarks/gpu_validate.py). Decode's KV cache is marked as a static address (as a module buffer
would be) so that CUDA graph trees neither copy it nor skip the graph.

Run on the GPU machine: `python3 benchmarks/gpu_compile_probe.py --out DIR` (about 4 minutes on an
H100). Writes DIR/gpu_compile_probe.json after every case (a cut-off run keeps what it measured) and
DIR/gpu_compile_probe.log. `--tiny --device cpu` runs small shapes on the CPU: a dry run of the code.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:  # the zoo's package, installed as planner_models; on a bare machine, the models/ folder
    import planner_models  # noqa: F401
except ImportError:
    import importlib
    sys.modules["planner_models"] = importlib.import_module("models")

from gpu_probe import file_log, nvidia_smi  # noqa: E402

from planner.calibration.bench import measure  # noqa: E402

CASES = (("llama-3.1-8b:prefill:b=1:s=2048", 2, None), ("llama-3.1-8b:decode:b=1:c=2048", 2, None),
         ("llama-3.1-8b:decode:b=32:c=2048", 2, None), ("llama-3.1-8b:decode:b=128:c=2048", 2, None),
         ("bert-large:b=1:s=384", 4, None), ("bert-large:b=32:s=384", 4, None),
         ("resnet50:b=1", None, None), ("resnet50:b=256", None, None), ("gpt2:training:b=8:s=1024", 4, None),
         # Inductor's own launches, no CUDA graph: the host's issue time per kernel at 2 and 32 layers
         ("llama-3.1-8b:decode:b=1:c=2048", 2, "default"), ("llama-3.1-8b:decode:b=1:c=2048", None, "default"),
         ("bert-large:b=1:s=384", None, None), ("llama-3.1-8b:decode:b=1:c=2048", None, None))
"""(validate's case, decoder/encoder layers kept (None: the whole model), compile mode (None: the engine's:
reduce-overhead for decode, default otherwise))."""
TINY = (("gpt2:decode:b=2:c=64", 1, None), ("gpt2:training:b=1:s=64", 1, None))


def profiled(fn, steps: int, device: str) -> dict:
    """Per step: kernels, their summed time (s), busy time, and CUDA graph launches (gpu_probe.trace_stats
    on the exported Chrome trace, as the eager probe reads it)."""
    from gpu_probe import trace_stats
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    sync(device)
    with profile(activities=activities) as prof:
        for i in range(steps):
            fn(i)
        sync(device)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    prof.export_chrome_trace(path)
    events = json.load(open(path))["traceEvents"]
    stats = trace_stats(path)
    os.unlink(path)
    launches = sum(1 for e in events if e.get("name") in ("cudaGraphLaunch", "cuGraphLaunch") and e.get("ph") == "X")
    return {"kernels": stats["kernels"] / steps, "kernel_sum_s": stats["kernel_sum_s"] / steps,
            "busy_s": stats["busy_s"] / steps, "graph_launches": launches / steps,
            "top_kernels": stats["top_kernels"][:8]}


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def build(spec: str, layers: int | None, device: str):
    """(model, workload, module, step function) of one case: bf16 weights and inputs as validate runs
    them; training is the bf16 model with fused AdamW (validate's "pure")."""
    from planner.calibration.validate import parse_model_case
    from planner.workload.graphs import Workload, build_inputs, resolve_workload
    from planner.workload.zoo import resolve
    name, w = parse_model_case(spec)
    model = resolve(name)
    if layers is not None:
        model = replace(model, config=replace(model.config, num_layers=layers))
    w = resolve_workload(model, Workload(w.mode, w.batch, w.seq_len, w.context_len, w.image_size, "bf16",
                                         mixed_precision="pure", optimizer="fused"))
    torch.manual_seed(0)
    module, args, kwargs, labels = build_inputs(model, w, device=device)
    for k_cache, v_cache in kwargs.get("kv_cache") or ():
        k_cache.normal_()
        v_cache.normal_()
    return model, w, module, args, kwargs, labels


def step_fn(model, w, module, args, kwargs, labels, device: str):
    from planner.workload.graphs import _loss
    if w.mode == "training":
        opt = torch.optim.AdamW(module.parameters(), lr=1e-4, fused=device == "cuda")

        def fn(_):
            opt.zero_grad(set_to_none=True)
            loss = _loss(model, module(*args, **kwargs), labels)
            loss.backward()
            opt.step()
        return fn

    def fn(_):
        with torch.no_grad():
            module(*args, **kwargs)
    return fn


def issue_s(fn, device: str) -> float:
    """Median host seconds to issue one step, the GPU idle before it and not waited on after."""
    samples = []
    for i in range(5):
        sync(device)
        t0 = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t0)
    sync(device)
    return statistics.median(samples)


def host_now(device: str) -> dict:
    """This host's cost per call right now: a tiny torch.add and a view, each 200 back to back
    (gpu_probe.host_loop's loop): the host of a lent machine changes speed within a run."""
    a = torch.randn(64, device=device)
    out = {}
    for name, call in (("torch.add", lambda: torch.add(a, a)), ("tensor.view", lambda: a.view(8, 8))):
        for _ in range(50):
            call()
        sync(device)
        samples = []
        for _ in range(9):
            t0 = time.perf_counter()
            for _ in range(200):
                call()
            samples.append((time.perf_counter() - t0) / 200)
            sync(device)
        out[name] = statistics.median(samples)
    return out


def run_case(spec: str, layers: int | None, mode: str | None, device: str, log) -> dict:
    import torch._dynamo
    from torch._dynamo.utils import counters
    model, w, module, args, kwargs, labels = build(spec, layers, device)
    row = {"case": spec, "layers": layers, "mode": w.mode, "batch": w.batch, "host_before_s": host_now(device)}
    eager = step_fn(model, w, module, args, kwargs, labels, device)
    row["eager_event_s"], _ = measure(eager, device, warmup=2, repeats=20, budget_s=1.5, min_repeats=5)
    row["eager_issue_s"] = issue_s(eager, device)
    row["eager"] = profiled(eager, 2, device)
    torch._dynamo.reset()
    counters.clear()
    compile_mode = mode or ("reduce-overhead" if w.mode == "decode" and device == "cuda" else "default")
    for k_cache, v_cache in kwargs.get("kv_cache") or ():
        torch._dynamo.mark_static_address(k_cache)
        torch._dynamo.mark_static_address(v_cache)
    compiled_module = torch.compile(module, mode=compile_mode, dynamic=False)
    compiled = step_fn(model, w, compiled_module, args, kwargs, labels, device)
    t0 = time.perf_counter()
    compiled(0)
    sync(device)
    row["compile_s"] = time.perf_counter() - t0
    compiled(1)  # cudagraph trees record on the second call
    compiled(2)
    sync(device)
    row["compile_mode"] = compile_mode
    row["graphs"] = int(counters["stats"]["unique_graphs"])
    row["graph_breaks"] = int(sum(counters["graph_break"].values()))
    row["compiled_event_s"], _ = measure(compiled, device, warmup=2, repeats=30, budget_s=1.5, min_repeats=5)
    row["compiled_issue_s"] = issue_s(compiled, device)
    row["compiled"] = profiled(compiled, 3, device)
    row["host_after_s"] = host_now(device)
    log(f"{spec} (layers {layers or 'all'}): host add {row['host_before_s']['torch.add'] * 1e6:.1f} -> "
        f"{row['host_after_s']['torch.add'] * 1e6:.1f} us; issue eager {row['eager_issue_s'] * 1e3:.3f} ms, "
        f"compiled {row['compiled_issue_s'] * 1e3:.3f} ms")
    log(f"{spec} (layers {layers or 'all'}): eager {row['eager_event_s'] * 1e3:.3f} ms "
        f"({row['eager']['kernels']:.0f} kernels, {row['eager']['kernel_sum_s'] * 1e3:.3f} ms), compiled "
        f"{compile_mode} {row['compiled_event_s'] * 1e3:.3f} ms ({row['compiled']['kernels']:.0f} kernels, "
        f"{row['compiled']['kernel_sum_s'] * 1e3:.3f} ms, {row['compiled']['graph_launches']:.1f} graph launches), "
        f"compile {row['compile_s']:.1f} s, graphs {row['graphs']}, breaks {row['graph_breaks']}")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--tiny", action="store_true", help="small shapes (a dry run of the code)")
    ap.add_argument("--budget-s", type=float, default=330.0, help="start no case after this many seconds")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    log = file_log(out / "gpu_compile_probe.log")
    smi = nvidia_smi() if a.device == "cuda" else ""
    try:  # its version is part of what compiled (a CPU build compiles C++ instead)
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    result = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "gpu": torch.cuda.get_device_name(0) if a.device == "cuda" else platform.processor(),
              "nvidia_smi": smi, "torch": torch.__version__, "triton": triton_version, "cuda": torch.version.cuda,
              "cpu_count": os.cpu_count(), "command": "python3 benchmarks/gpu_compile_probe.py --out $OUT",
              "cases": []}
    log(json.dumps({k: v for k, v in result.items() if k != "cases"}))
    t0 = time.time()
    for spec, layers, mode in (TINY if a.tiny else CASES):
        if time.time() - t0 > a.budget_s:
            log(f"{spec}: not started, {time.time() - t0:.0f} s of the {a.budget_s:.0f} s budget spent")
            continue
        try:
            result["cases"].append(run_case(spec, layers, mode, a.device, log))
        except Exception as exc:  # noqa: BLE001 (one case failing must not lose the others)
            log(f"{spec}: failed: {type(exc).__name__}: {str(exc)[:300]}")
            result["cases"].append({"case": spec, "layers": layers, "compile_mode": mode, "error": f"{type(exc).__name__}: {exc}"[:500]})
        if a.device == "cuda":
            torch.cuda.empty_cache()
        result["duration_s"] = time.time() - t0
        tmp = out / "gpu_compile_probe.json.tmp"
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(out / "gpu_compile_probe.json")
    rows = [c for c in result["cases"] if "error" not in c]
    if rows:
        log("case | layers | mode | eager ms | compiled ms | speed-up | kernels eager -> compiled")
        for c in rows:
            log(f"{c['case']} | {c['layers'] or 'all'} | {c['compile_mode']} | {c['eager_event_s'] * 1e3:.3f} | {c['compiled_event_s'] * 1e3:.3f} | "
                f"{c['eager_event_s'] / c['compiled_event_s']:.2f} | {c['eager']['kernels']:.0f} -> "
                f"{c['compiled']['kernels']:.0f}")


if __name__ == "__main__":
    main()
