"""Predictions against planner's own measurements of a real H100 and H200, on any machine.

    .venv/bin/python benchmarks/gpu_validate.py [--out FILE] [--rebuild-data]

The measured cases are data (benchmarks/data/gpu_validate.json, built by --rebuild-data from the raw
runs under benchmarks/data/measured/<device>/):

- "calibrate-day": `planner validate --device cuda` on the machines that made the calibration
  profiles (validate.log: 12 off-grid bf16 GEMMs and 10 model cases, each timed with CUDA events around
  one call: dispatch + kernel). Its "before" column is what planner predicted then (commit febe8d8).
- "probe": benchmarks/gpu_probe.py on another lent machine of the same GPU: the same model cases, timed
  the same way and also read back from the profiler (kernel sum, host issue time), and the GEMMs with
  their CUPTI kernel time; its GEMMs are predicted with that machine's isolated-call wait (its tiny
  GEMMs, none of validate's shapes).
- "depthwise-probe": benchmarks/gpu_depthwise_probe.py on lent machines (2026-11-26): EfficientNet-B0/B4
  and ResNet-50 training steps (CNN training: batch statistics, depthwise convolutions) and EfficientNet-B0
  inference, GPU-bound, timed as the probe times its models.
- "cnn-holdout": the same probe's --models run on the H100, after the curves were added: batches and
  models none of them was fitted on (ResNet-50 and EfficientNet-B0 at 64 and 128, ConvNeXt-B with 7x7
  depthwise filters, ViT-B/16 as a control without batch norm).
- "validate-<date>": `planner validate` runs that measured their own machine's dispatch (the isolated
  call before the GEMMs, the host per op right before each model case, as their log records). The
  first H200 run (validate-2026-11-26) measured the host only at its start; its model cases are left
  out (its log has them, predicted 2x too slow for the decode steps: the host sped up mid-run).

Each case is predicted as `planner validate` predicts it now: engine eager, the device's pytorch-eager
profile (tier measured), its dispatch (host per op) where the step is host-bound, and for a single GEMM
the isolated call's wait plus the kernel. Prints a table per device and run, the groups' median and
largest |error|, and the H100 <-> H200 transfer error per op kind (each device predicted from the
other's eager profile alone, against its own measurements). Writes JSON to --out (default: print only).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "benchmarks" / "data" / "gpu_validate.json"
_VALIDATE_SHAPES = {(100, 700, 3000), (37, 1500, 600), (512, 3000, 768), (1, 5000, 2000), (200, 200, 200),
                    (2000, 300, 1200), (48, 12000, 768), (700, 700, 700), (3, 30000, 500), (1500, 1500, 96),
                    (128, 2304, 768), (300, 5000, 40)}
DEVICES = ("h100-sxm", "h200-sxm")
_LINE = re.compile(r"^\s+(?P<name>.+?)\s+predicted\s+(?P<pred>[\d.]+) ms\s+measured\s+(?P<meas>[\d.]+) ms")


def _spec_of(name: str) -> tuple[str, dict]:
    """validate.log's case name -> (kind, config)."""
    parts = name.split()
    if parts[0] == "gemm":
        m, n, k = (int(v) for v in parts[1].split("x"))
        return "gemm", {"m": m, "n": n, "k": k, "dtype": parts[2]}
    sizes = dict(p.split("=") for p in parts[2:])
    spec = ":".join([parts[0]] + ([parts[1]] if parts[1] != "forward" else []) + [f"{k}={v}" for k, v in sizes.items()])
    return "model", {"spec": spec, "dtype": "bf16", "engine": "eager"}


_HOST = re.compile(r"host now: ([\d.]+) us per kernel op, ([\d.]+) us per view")
_HERE = re.compile(r"dispatch measured here: ([\d.]+) us per kernel op, ([\d.]+) us per view, isolated call ([\d.]+) us")


def _validate_run(device: str, run_dir: Path) -> list[dict]:
    """The cases of a `planner validate` run that measured its machine's dispatch (validate.log): each
    with the dispatch it was predicted with (isolated call for GEMMs, host per op right before a model)."""
    cases, host = [], None
    isolated = None
    for line in (run_dir / "validate.log").read_text().splitlines():
        if hit := _HERE.search(line):
            isolated = float(hit[3]) * 1e-6
        elif hit := _HOST.search(line):
            host = (float(hit[1]) * 1e-6, float(hit[2]) * 1e-6)
        elif hit := _LINE.match(line):
            kind, config = _spec_of(hit["name"])
            row = {"device": device, "run": run_dir.name, "kind": kind, **config,
                   "measured_s": float(hit["meas"]) / 1e3, "before_s": None,
                   "source": f"benchmarks/data/measured/{device}/{run_dir.name}/validate.log"}
            if kind == "gemm" and isolated is not None:
                row["isolated_call_s"] = isolated
            if kind == "model":
                if host is None:
                    # a run that measured its host only at the start (the first, 2026-11-26): its host ran 2x
                    # faster later, and it did not record how fast at each case; not expressible
                    continue
                row["host_per_op_s"], row["view_host_s"] = host
            cases.append(row)
    return cases


def rebuild_data() -> dict:
    """The measured cases of both GPUs from the raw runs (validate.log, probe/gpu_probe.json)."""
    cases = []
    for device in DEVICES:
        base = ROOT / "benchmarks" / "data" / "measured" / device
        for line in (base / "validate.log").read_text().splitlines():
            hit = _LINE.match(line)
            if not hit:
                continue
            kind, config = _spec_of(hit["name"])
            cases.append({"device": device, "run": "calibrate-day", "kind": kind, **config,
                          "measured_s": float(hit["meas"]) / 1e3, "before_s": float(hit["pred"]) / 1e3,
                          "source": f"benchmarks/data/measured/{device}/validate.log"})
        for run_dir in sorted(base.glob("validate-*")):
            cases += _validate_run(device, run_dir)
        probe = json.loads((base / "probe" / "gpu_probe.json").read_text())
        # the probe machine's own isolated-call wait: its tiny GEMMs (none of validate's shapes) end before
        # the closing event, so their event time is the wait + after_launch_s (the profile's)
        tiny = statistics.median(g["event_s"] for g in probe["gemm"] if g["kernel_s"] <= 3e-6
                                 and (g["m"], g["n"], g["k"]) not in _VALIDATE_SHAPES)
        for g in probe["gemm"]:
            cases.append({"device": device, "run": "probe", "kind": "gemm", "m": g["m"], "n": g["n"], "k": g["k"],
                          "dtype": g["dtype"], "measured_s": g["event_s"], "kernel_s": g["kernel_s"],
                          "tiny_gemm_event_s": tiny,
                          "source": f"benchmarks/data/measured/{device}/probe/gpu_probe.json"})
        for row in probe["models"]:
            spec = row["case"]
            amp = spec.endswith(":amp")
            cases.append({"device": device, "run": "probe", "kind": "model", "spec": spec.removesuffix(":amp"),
                          "dtype": "amp-bf16" if amp else "bf16", "engine": "eager", "measured_s": row["event_s"],
                          "kernel_s": row["kernel_sum_s"], "host_issue_s": row["issue_s"], "kernels": row["kernels"],
                          "source": f"benchmarks/data/measured/{device}/probe/gpu_probe.json"})
        dw = json.loads((base / "depthwise-probe" / "gpu_depthwise_probe.json").read_text())
        for row in dw["models"]:
            cases.append({"device": device, "run": "depthwise-probe", "kind": "model", "spec": row["case"],
                          "dtype": "amp-bf16" if row["amp"] else "bf16", "engine": "eager",
                          "measured_s": row["event_s"], "kernel_s": row["kernel_sum_s"], "host_issue_s": row["issue_s"],
                          "kernels": row["kernels"],
                          "source": f"benchmarks/data/measured/{device}/depthwise-probe/gpu_depthwise_probe.json"})
        held = base / "depthwise-probe" / "gpu_models.json"
        for row in json.loads(held.read_text())["models"] if held.exists() else ():
            cases.append({"device": device, "run": "cnn-holdout", "kind": "model", "spec": row["case"],
                          "dtype": "amp-bf16" if row["amp"] else "bf16", "engine": "eager",
                          "measured_s": row["event_s"], "kernel_s": row["kernel_sum_s"], "host_issue_s": row["issue_s"],
                          "kernels": row["kernels"],
                          "source": f"benchmarks/data/measured/{device}/depthwise-probe/gpu_models.json"})
    return {"what": "planner's measurements of a real H100 SXM and H200 SXM: model steps and single GEMMs timed "
                    "with CUDA events around one call (measured_s); probe rows also the profiler's kernel sum "
                    "(kernel_s) and the host's issue time of the step (host_issue_s)",
            "cases": cases}


def predict_case(case: dict, device_id: str, profile_device: str | None = None) -> tuple[float, float | None, str]:
    """(predicted event time, predicted kernel time, tier) of one case on `device_id`, from the pytorch-eager
    profile of `profile_device` (default: the device's own)."""
    from planner.calibration.dispatch import with_dispatch
    from planner.calibration.validate import isolated_call_s, parse_model_case
    from planner.predict.context import default_context
    from planner.predict.ops import gemm_record
    from planner.predict.roofline import op_time
    from planner.predict.timing import stage_times
    from planner.workload.device_graph import device_graph
    from planner.workload.graphs import Workload, resolve_workload
    from planner.workload.zoo import resolve

    ctx = default_context()
    device = ctx.device(device_id)
    eff = _efficiency(ctx, device, profile_device)
    # the dispatch the case's own machine measured, where the run recorded it
    here = {k: case[k] for k in ("host_per_op_s", "view_host_s", "isolated_call_s") if case.get(k) is not None}
    if "tiny_gemm_event_s" in case:
        here["isolated_call_s"] = max(0.0, case["tiny_gemm_event_s"] - eff.dispatch["after_launch_s"])
    if here and getattr(eff, "dispatch", None):
        eff = with_dispatch(eff, here)
    if case["kind"] == "gemm":
        rec, category, cost = gemm_record(case["m"], case["n"], case["k"], case["dtype"])
        kernel = op_time(rec, category, cost, case["dtype"], device, eff).time_s
        return isolated_call_s(eff, kernel), kernel, eff.tier
    name, w = parse_model_case(case["spec"])
    model = resolve(name)
    # validate and the probe train bf16 rows with the model and fused AdamW in bf16 ("pure"), amp rows
    # under torch.autocast over fp32 weights ("amp"), fused AdamW
    amp = case["dtype"] == "amp-bf16"
    w = resolve_workload(model, Workload(w.mode, w.batch, w.seq_len, w.context_len, w.image_size, "bf16",
                                         mixed_precision="amp" if amp else "pure", optimizer="fused"))
    dg = device_graph(model, w)
    stage = stage_times(dg, device, eff, ctx.power)[0]
    return stage.time_s, stage.time_s - stage.bound_s.get("launch", 0.0), eff.tier


def _efficiency(ctx, device, profile_device: str | None):
    from planner.hardware.profile import recorded_band
    from planner.hardware.profile_select import ProfileEfficiency, _fitted
    from planner.workload.engines import get_engine

    own = ctx.efficiency(device, get_engine("eager").libraries)
    if profile_device is None or profile_device == device.id:
        return own
    other = ctx.profiles.library(profile_device, "pytorch-eager")
    ref = ctx.device(profile_device)
    kind_defaults = ctx.defaults.kinds["gpu"]
    # transferred: the other GPU's efficiencies on this GPU's peaks; its dispatch is a host's, kept
    return ProfileEfficiency(_fitted(other, ref, kind_defaults), other, "transferred", recorded_band(other),
                             own.fallback)


def _supported(case: dict) -> bool:
    return case["dtype"] in ("bf16", "fp16", "amp-bf16") or case["kind"] == "gemm"


def run(data: dict) -> dict:
    rows = []
    for case in data["cases"]:
        if not _supported(case):
            continue
        pred, kernel, tier = predict_case(case, case["device"])
        row = {**case, "predicted_s": pred, "error": pred / case["measured_s"] - 1, "tier": tier}
        if case.get("kernel_s"):
            row["predicted_kernel_s"] = kernel
            row["kernel_error"] = kernel / case["kernel_s"] - 1
        if case.get("before_s"):
            row["before_error"] = case["before_s"] / case["measured_s"] - 1
        rows.append(row)
    groups = {}
    for row in rows:
        key = f"{row['device']} {row['run']} {'gemm' if row['kind'] == 'gemm' else 'model'}"
        groups.setdefault(key, {"event": [], "kernel": [], "before": []})
        groups[key]["event"].append(abs(row["error"]))
        if "kernel_error" in row:
            groups[key]["kernel"].append(abs(row["kernel_error"]))
        if "before_error" in row:
            groups[key]["before"].append(abs(row["before_error"]))
    summary = {k: {name: {"n": len(v), "median_abs_error": statistics.median(v), "max_abs_error": max(v)}
                   for name, v in g.items() if v} for k, g in groups.items()}
    return {"rows": rows, "summary": summary, "transfer": transfer(data)}


def transfer(data: dict) -> dict:
    """Each GPU's probe kernel times (GEMMs, model kernel sums) predicted from the other's eager profile."""
    out = {}
    for src, dst in (("h100-sxm", "h200-sxm"), ("h200-sxm", "h100-sxm")):
        by_kind: dict[str, list[float]] = {}
        for case in data["cases"]:
            if case["device"] != dst or case["run"] != "probe" or not case.get("kernel_s") or not _supported(case):
                continue
            _, kernel, _ = predict_case(case, dst, src)
            kind = "gemm" if case["kind"] == "gemm" else "model kernels"
            by_kind.setdefault(kind, []).append(kernel / case["kernel_s"] - 1)
        # the profiles' own kinds: each measurement of dst's profile predicted from src's
        out[f"{src} -> {dst}"] = {k: {"n": len(v), "median_abs_error": statistics.median(map(abs, v)),
                                      "p90_abs_error": sorted(map(abs, v))[int(0.9 * (len(v) - 1))]}
                                  for k, v in by_kind.items()}
        out[f"{src} -> {dst}"].update(_profile_transfer(src, dst))
    return out


def _profile_transfer(src: str, dst: str) -> dict:
    """Per op kind of dst's eager profile: |predicted from src's profile / measured - 1| (median, p90)."""
    import math

    from planner.hardware.profile import ProfileModel, _features
    from planner.predict.context import default_context

    ctx = default_context()
    a, b = ctx.profiles.library(src, "pytorch-eager"), ctx.profiles.library(dst, "pytorch-eager")
    kd = ctx.defaults.kinds["gpu"]
    dev_a, dev_b = ctx.device(src), ctx.device(dst)
    model_a = ProfileModel(kd).fit(a, dev_a)
    model_b = ProfileModel(kd).fit(b, dev_b)
    errors: dict[str, list[float]] = {}
    for m in b.measurements:
        if m["kind"] in ("launch", "view", "h2d") or model_b.censored(m):
            continue
        key, feats, shape = _features(m)
        measured = model_b.efficiency_of(m, dev_b)
        if measured is None or key not in model_a.models_:
            continue
        predicted = math.exp(model_a.models_[key](feats))
        kind = key.split(":")[0] if not key.startswith(("gemm", "mem")) else key
        errors.setdefault(kind, []).append(measured / predicted - 1)
    return {f"profile {k}": {"n": len(v), "median_abs_error": statistics.median(map(abs, v)),
                             "p90_abs_error": sorted(map(abs, v))[int(0.9 * (len(v) - 1))]}
            for k, v in sorted(errors.items()) if len(v) >= 5}


def _pooled_transfer() -> dict:
    """Median and p90 |error| over every measurement of both eager profiles predicted from the other's."""
    import math

    from planner.hardware.profile import ProfileModel, _features
    from planner.predict.context import default_context

    ctx = default_context()
    errors = []
    for src, dst in (("h100-sxm", "h200-sxm"), ("h200-sxm", "h100-sxm")):
        a, b = ctx.profiles.library(src, "pytorch-eager"), ctx.profiles.library(dst, "pytorch-eager")
        kd = ctx.defaults.kinds["gpu"]
        model_a, model_b = ProfileModel(kd).fit(a, ctx.device(src)), ProfileModel(kd).fit(b, ctx.device(dst))
        for m in b.measurements:
            if m["kind"] in ("launch", "view", "h2d") or model_b.censored(m):
                continue
            key, feats, _ = _features(m)
            measured = model_b.efficiency_of(m, ctx.device(dst))
            if measured is not None and key in model_a.models_:
                errors.append(abs(measured / math.exp(model_a.models_[key](feats)) - 1))
    errors.sort()
    return {"n": len(errors), "median_abs_error": statistics.median(errors),
            "p90_abs_error": errors[int(0.9 * (len(errors) - 1))]}


COMPILE_RUNS = ("compile-probe", "compile-probe-2")
"""benchmarks/gpu_compile_probe.py on a lent H100 (2026-11-26): the first run timed the steps; the second
also the host's issue time of each eager and compiled step (the host of that machine drifted from 10 to
17 us per tiny op within the run, so each case is set against its own eager step)."""


def _launches(dg, device, eff, power) -> tuple[float, float]:
    """(kernel launches, views) of one step of `dg`, every stage part times its repeats."""
    from planner.predict.timing import _part_time
    kernels = views = 0.0
    for part, n in dg.stage_parts(0):
        for key, count in _part_time(part, dg, device, eff, power)[8].items():
            if key.endswith(":view"):
                views += n * count
            else:
                kernels += n * count
    return kernels, views


def compile_rows() -> list[dict]:
    """Each case of the compile probes predicted eager and compiled on the H100. The host of the run is
    set against the profile's: host factor = the eager step's measured issue time / its predicted issue
    (the profile's 22.1 us per kernel op and 1.19 us per view), where the run measured it (else 1). A
    compiled step is predicted as max(its kernels, launches x the compile engine's host cost x the host
    factor); `host_per_launch_s` is what this case says the compile engine's host cost is on the
    profile's host: measured issue time / host factor / predicted launches."""
    from dataclasses import replace as _replace

    from planner.calibration.validate import parse_model_case
    from planner.predict.context import default_context
    from planner.predict.timing import host_dispatch_s, stage_times
    from planner.workload.device_graph import device_graph
    from planner.workload.engines import get_engine
    from planner.workload.graphs import Workload, resolve_workload
    from planner.workload.zoo import resolve

    ctx = default_context()
    device = ctx.device("h100-sxm")
    rows = []
    for run_name in COMPILE_RUNS:
        path = ROOT / "benchmarks" / "data" / "measured" / "h100-sxm" / run_name / "gpu_compile_probe.json"
        for case in json.loads(path.read_text())["cases"]:
            if "error" in case:
                continue
            name, w = parse_model_case(case["case"])
            model = resolve(name)
            if case["layers"]:
                model = _replace(model, config=_replace(model.config, num_layers=case["layers"]))
            pred = {}
            for engine in ("eager", "compile"):
                wl = resolve_workload(model, Workload(w.mode, w.batch, w.seq_len, w.context_len, w.image_size, "bf16",
                                                      engine=engine, mixed_precision="pure", optimizer="fused"))
                dg = device_graph(model, wl)
                eff = ctx.efficiency(device, get_engine(engine).libraries)
                stage = stage_times(dg, device, eff, ctx.power)[0]
                launch_s, view_s = host_dispatch_s(dg, device, eff)
                kernels, views = _launches(dg, device, eff, ctx.power)
                pred[engine] = {"kernel_s": stage.time_s - stage.bound_s.get("launch", 0.0), "launches": kernels,
                                "issue_s": kernels * launch_s + views * view_s, "host_s": launch_s}
            factor = case["eager_issue_s"] / pred["eager"]["issue_s"] if "eager_issue_s" in case else 1.0
            replayed = case["compile_mode"] == "reduce-overhead"
            comp = pred["compile"]
            # default mode launches every step (host_dispatch_s gives 0 for a decode the engine replays)
            host_s = get_engine("compile").host_launch_s
            compiled_s = max(comp["kernel_s"], 0.0 if replayed else comp["launches"] * host_s * factor)
            eager_s = max(pred["eager"]["kernel_s"], pred["eager"]["issue_s"] * factor)
            row = {"run": run_name, "case": case["case"], "layers": case["layers"], "compile_mode": case["compile_mode"],
                   "host_factor": factor, "measured_s": case["compiled_event_s"], "predicted_s": compiled_s,
                   "error": compiled_s / case["compiled_event_s"] - 1,
                   "kernel_s": case["compiled"]["kernel_sum_s"], "predicted_kernel_s": comp["kernel_s"],
                   "kernel_error": comp["kernel_s"] / case["compiled"]["kernel_sum_s"] - 1,
                   "kernels": case["compiled"]["kernels"], "predicted_launches": comp["launches"],
                   "eager_measured_s": case["eager_event_s"], "eager_predicted_s": eager_s,
                   "speedup": case["eager_event_s"] / case["compiled_event_s"], "predicted_speedup": eager_s / compiled_s}
            host_bound = (not replayed and "compiled_issue_s" in case and case["mode"] != "training"
                          and case["compiled_issue_s"] > case["compiled"]["kernel_sum_s"]
                          and case["eager_issue_s"] > case["eager"]["kernel_sum_s"])
            if host_bound:
                row["host_per_launch_s"] = case["compiled_issue_s"] / factor / comp["launches"]
            rows.append(row)
    return rows


def compile_host_launch_s(rows: list[dict]) -> float:
    """The compile engine's host seconds per kernel launch on the profile's host: the median over the
    host-bound inference cases (eager and compiled both issued slower than their kernels ran)."""
    return statistics.median(r["host_per_launch_s"] for r in rows if "host_per_launch_s" in r)


def _name(row: dict) -> str:
    if row["kind"] == "gemm":
        return f"gemm {row['m']}x{row['n']}x{row['k']} {row['dtype']}"
    return row["spec"] + (" (amp)" if row["dtype"] == "amp-bf16" else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--rebuild-data", action="store_true", help=f"rebuild {DATA.relative_to(ROOT)} from the raw runs")
    ap.add_argument("--write-transfer", action="store_true",
                    help="write hardware_specs/calibration/transfer-pytorch-eager.json (the transferred tier's band)")
    a = ap.parse_args()
    if a.rebuild_data:
        DATA.write_text(json.dumps(rebuild_data(), indent=1) + "\n")
    data = json.loads(DATA.read_text())
    result = run(data)
    for device in DEVICES:
        for run_name in sorted({r["run"] for r in result["rows"] if r["device"] == device}):
            print(f"\n{device}, {run_name}\n")
            print("| case | measured | predicted | error | before | kernel measured | kernel predicted | kernel error |")
            print("| --- | --- | --- | --- | --- | --- | --- | --- |")
            for r in result["rows"]:
                if r["device"] != device or r["run"] != run_name:
                    continue
                before = f"{r['before_error']:+.1%}" if "before_error" in r else ""
                kern = (f"{r['kernel_s'] * 1e3:.3f} ms | {r['predicted_kernel_s'] * 1e3:.3f} ms | {r['kernel_error']:+.1%}"
                        if "kernel_error" in r else " | | ")
                print(f"| {_name(r)} | {r['measured_s'] * 1e3:.3f} ms | {r['predicted_s'] * 1e3:.3f} ms | "
                      f"{r['error']:+.1%} | {before} | {kern} |")
    print("\n| group | what | n | median abs error | max abs error |\n| --- | --- | --- | --- | --- |")
    for k, g in result["summary"].items():
        for name, s in g.items():
            print(f"| {k} | {name} | {s['n']} | {s['median_abs_error']:.1%} | {s['max_abs_error']:.1%} |")
    print("\n| transfer | op kind | n | median abs error | p90 abs error |\n| --- | --- | --- | --- | --- |")
    for pair, kinds in result["transfer"].items():
        for kind, s in kinds.items():
            print(f"| {pair} | {kind} | {s['n']} | {s['median_abs_error']:.1%} | {s['p90_abs_error']:.1%} |")
    compiled = compile_rows()
    result["compile"] = {"rows": compiled, "host_per_launch_s": compile_host_launch_s(compiled)}
    print("\n| compile run | case | layers | mode | host factor | measured | predicted | error | kernels measured | "
          "predicted | kernel time error | speed-up measured | predicted | host per launch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in compiled:
        host = f"{r['host_per_launch_s'] * 1e6:.1f} us" if "host_per_launch_s" in r else ""
        print(f"| {r['run']} | {r['case']} | {r['layers'] or 'all'} | {r['compile_mode']} | {r['host_factor']:.2f} | "
              f"{r['measured_s'] * 1e3:.3f} ms | {r['predicted_s'] * 1e3:.3f} ms | {r['error']:+.1%} | {r['kernels']:.0f} | "
              f"{r['predicted_launches']:.0f} | {r['kernel_error']:+.1%} | {r['speedup']:.2f} | "
              f"{r['predicted_speedup']:.2f} | {host} |")
    errors = sorted(abs(r["error"]) for r in compiled)
    kernel_errors = sorted(abs(r["kernel_error"]) for r in compiled)
    print(f"\ncompiled steps: median |error| {statistics.median(errors):.1%}, largest {errors[-1]:.1%}; kernel time: "
          f"median {statistics.median(kernel_errors):.1%}, largest {kernel_errors[-1]:.1%} ({len(errors)} cases); "
          f"compile host cost per launch on the profile's host: "
          f"{result['compile']['host_per_launch_s'] * 1e6:.1f} us (median of the host-bound cases)")
    if a.write_transfer:
        from planner.files import write_text_atomic
        pooled = _pooled_transfer()
        path = ROOT / "hardware_specs" / "calibration" / "transfer-pytorch-eager.json"
        write_text_atomic(path, json.dumps({"method": "each pytorch-eager profile's measurements predicted from the "
                                            "other GPU's pytorch-eager profile (benchmarks/gpu_validate.py)",
                                            "pairs": result["transfer"], **pooled}, indent=1) + "\n")
        print(f"\nwrote {path.relative_to(ROOT)}: pooled median {pooled['median_abs_error']:.1%}, "
              f"p90 {pooled['p90_abs_error']:.1%} over {pooled['n']} measurements")
    if a.out:
        from planner.files import write_text_atomic
        write_text_atomic(a.out, json.dumps(result, indent=1))
        print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
