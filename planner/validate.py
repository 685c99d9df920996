"""`planner validate`: run real models and off-grid op shapes on the local device, measure them, predict
the same configurations from the device's calibration profile, and report the error.

Models run with random weights in eval mode under no_grad; inputs are random token ids, images or
(for decode) a KV cache filled with random values. Each case is timed with warm-up and the median
of repeats (planner.bench.measure). The op shapes lie between the calibration grid's points
(GEMM dimensions like 100, 700, 3000 against a grid of powers of 4), so they test interpolation.
error = predicted / measured − 1.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from planner.bench import local_device, measure, random_tensor, rotation
from planner.device_graph import device_graph
from planner.errors import ConfigError
from planner.graphs import Workload, build_inputs, resolve_workload
from planner.ops import gemm_record
from planner.prediction import Context, default_context
from planner.roofline import op_time
from planner.timing import stage_times
from planner.zoo import resolve

CPU_MODELS = ("resnet50:b=1", "resnet50:b=8", "bert-base:b=1:s=128", "gpt2:prefill:b=1:s=256",
              "gpt2:decode:b=1:c=256", "vit-b-16:b=1")
GPU_MODELS = ("resnet50:b=1", "resnet50:b=64", "resnet50:b=256", "bert-large:b=1:s=384", "bert-large:b=32:s=384",
              "llama-3.1-8b:prefill:b=1:s=2048", "llama-3.1-8b:decode:b=1:c=2048", "llama-3.1-8b:decode:b=32:c=2048",
              "llama-3.1-8b:decode:b=128:c=2048", "gpt2:training:b=8:s=1024")
OFF_GRID_GEMMS = ((100, 700, 3000), (37, 1500, 600), (512, 3000, 768), (1, 5000, 2000), (200, 200, 200),
                  (2000, 300, 1200), (48, 12000, 768), (700, 700, 700), (3, 30000, 500), (1500, 1500, 96),
                  (128, 2304, 768), (300, 5000, 40))


@dataclass(frozen=True, slots=True)
class Case:
    """One validated configuration."""

    name: str
    kind: str
    """"op" or "model"."""
    op_kind: str
    """gemm, attention, copy..., or the model's mode."""
    predicted_s: float
    measured_s: float
    tier: str

    @property
    def error(self) -> float:
        """predicted / measured − 1."""
        return self.predicted_s / self.measured_s - 1

    def as_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "op_kind": self.op_kind, "predicted_s": self.predicted_s,
                "measured_s": self.measured_s, "error": self.error, "tier": self.tier}


def parse_model_case(spec: str) -> tuple[str, Workload]:
    """"gpt2:decode:b=1:c=256" -> ("gpt2", Workload("decode", 1, context_len=256)); modes default to inference."""
    parts = spec.split(":")
    name, mode, sizes = parts[0], "inference", {}
    for part in parts[1:]:
        if "=" in part:
            key, _, value = part.partition("=")
            if key not in ("b", "s", "c", "r") or not value.isdigit():
                raise ConfigError(f"model case '{spec}': '{part}' is not b=N, s=N, c=N or r=N")
            sizes[key] = int(value)
        elif part in ("inference", "prefill", "decode", "forward", "training"):
            mode = part
        else:
            raise ConfigError(f"model case '{spec}': unknown part '{part}' (modes: prefill, decode, training)")
    return name, Workload(mode, sizes.get("b", 1), sizes.get("s"), sizes.get("c"), sizes.get("r"))


def _measure_model(name: str, workload: Workload, device: str, dtype: str, budget_s: float) -> tuple[float, Workload]:
    model = resolve(name)
    w = resolve_workload(model, Workload(workload.mode, workload.batch, workload.seq_len, workload.context_len,
                                         workload.image_size, dtype))
    torch.manual_seed(0)
    module, args, kwargs, labels = build_inputs(model, w, device=device)
    for k_cache, v_cache in kwargs.get("kv_cache") or ():
        k_cache.normal_()
        v_cache.normal_()
    if w.mode == "training":
        opt = torch.optim.AdamW(module.parameters(), lr=1e-4, fused=device.startswith("cuda"))

        def step(_):
            from planner.graphs import _loss
            opt.zero_grad(set_to_none=True)
            _loss(model, module(*args, **kwargs), labels).backward()
            opt.step()
        fn = step
    else:
        def forward(_):
            with torch.no_grad():
                module(*args, **kwargs)
        fn = forward
    t, _ = measure(fn, device, warmup=2, repeats=30, budget_s=budget_s, min_repeats=5)
    return t, w


def _predict_model(ctx: Context, name: str, w: Workload, device) -> tuple[float, str]:
    dg = device_graph(resolve(name), w)
    eff = ctx.efficiency(device)
    return sum(s.time_s for s in stage_times(dg, device, eff, ctx.power)), eff.tier


def _gemm_case(ctx: Context, device, local: str, m: int, n: int, k: int, dtype: str, cache: float) -> Case:
    tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    elem = torch.empty((), dtype=tdtype).element_size()
    # nn.Linear's layout: x [M, K] @ W[N, K].t(), as calibrated and as models run it
    sets = rotation(lambda: (random_tensor((m, k), tdtype, local), random_tensor((n, k), tdtype, local).t()),
                    (m * k + k * n) * elem, cache, local)
    measured, _ = measure(lambda i: torch.mm(*sets[i % len(sets)]), local, warmup=2, repeats=30, budget_s=0.5)
    rec, category, cost = gemm_record(m, n, k, dtype)
    eff = ctx.efficiency(device)
    t = op_time(rec, category, cost, dtype, device, eff)
    return Case(f"gemm {m}x{n}x{k} {dtype}", "op", "gemm", t.time_s, measured, eff.tier)


def validate(device_spec: str = "auto", models: tuple[str, ...] | None = None, dtype: str | None = None,
             budget_per_case_s: float = 2.0, log=print, ctx: Context | None = None) -> list[Case]:
    """Run every case and return the predicted-vs-measured rows."""
    ctx = ctx or default_context()
    local = local_device(device_spec)
    try:
        device = ctx.device(local.id)
    except ConfigError:
        raise ConfigError(f"no catalog entry or calibration profile for the local device {local.id}: run "
                          f"`planner calibrate --device {device_spec}` first") from None
    if local.id not in ctx.profiles:
        log(f"validate: no calibration profile for {local.id}: predictions use the "
            f"{ctx.efficiency(device).tier} tier")
    dtype = dtype or ("fp32" if local.kind == "cpu" else "bf16")
    models = models if models is not None else (CPU_MODELS if local.kind == "cpu" else GPU_MODELS)
    cache = 64 * 2**20 if local.kind == "cpu" else float(local.properties.get("L2_cache_size", 64 * 2**20))
    cases: list[Case] = []
    for m, n, k in OFF_GRID_GEMMS:
        case = _gemm_case(ctx, device, local.torch_device, m, n, k, "fp32" if local.kind == "cpu" else dtype, cache)
        cases.append(case)
        log(f"  {case.name:<42} predicted {case.predicted_s * 1e3:9.3f} ms  measured {case.measured_s * 1e3:9.3f} ms"
            f"  error {case.error:+.1%}")
    for spec in models:
        name, workload = parse_model_case(spec)
        measured, w = _measure_model(name, workload, local.torch_device, dtype, budget_per_case_s)
        predicted, tier = _predict_model(ctx, name, w, device)
        case = Case(f"{name} {w.mode} b={w.batch}" + (f" s={w.seq_len}" if w.seq_len and w.mode != "decode" else "")
                    + (f" c={w.context_len}" if w.context_len else ""), "model", w.mode, predicted, measured, tier)
        cases.append(case)
        log(f"  {case.name:<42} predicted {case.predicted_s * 1e3:9.3f} ms  measured {case.measured_s * 1e3:9.3f} ms"
            f"  error {case.error:+.1%}")
    return cases


def summary(cases: list[Case]) -> dict:
    """Median and maximum |error| per op kind, for all ops, and end to end (models)."""
    groups: dict[str, list[float]] = {}
    for c in cases:
        groups.setdefault(c.op_kind if c.kind == "op" else "end-to-end", []).append(abs(c.error))
    return {k: {"n": len(v), "median_abs_error": statistics.median(v), "max_abs_error": max(v)}
            for k, v in groups.items()}


def fmt_table(cases: list[Case]) -> str:
    """The predicted-vs-measured table in Markdown."""
    rows = ["| case | kind | tier | predicted | measured | error |", "| --- | --- | --- | --- | --- | --- |"]
    for c in cases:
        rows.append(f"| {c.name} | {c.kind} | {c.tier} | {c.predicted_s * 1e3:.3f} ms | {c.measured_s * 1e3:.3f} ms | "
                    f"{c.error:+.1%} |")
    rows.append("")
    rows.append("| group | n | median abs error | max abs error |")
    rows.append("| --- | --- | --- | --- |")
    for k, s in summary(cases).items():
        rows.append(f"| {k} | {s['n']} | {s['median_abs_error']:.1%} | {s['max_abs_error']:.1%} |")
    return "\n".join(rows)

