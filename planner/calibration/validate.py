"""`planner validate`: run real models and off-grid op shapes on the local device, measure them, predict
the same configurations from the device's calibration profile, and report the error.

Models run with random weights in eval mode under no_grad; inputs are random token ids, images or
(for decode) a KV cache filled with random values. Each case is timed with warm-up and the median
of repeats (planner.bench.measure). The op shapes lie between the calibration grid's points
(GEMM dimensions like 100, 700, 3000 against a grid of powers of 4), so they test interpolation.
error = predicted / measured − 1.

Every argument is checked before anything runs: each model case is parsed, resolved and predicted
first, and one whose predicted run time or memory is beyond what this device can run in a short
while (MAX_CASE_S, MAX_MEMORY_FRACTION) is refused with a one-line error, not an hour-long run or
the kernel's out-of-memory killer.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

import torch

from planner.calibration.bench import LocalDevice, check_seconds, local_device, measure, random_tensor, rotation
from planner.errors import ConfigError, PlannerError, UnknownNameError
from planner.predict.context import Context, default_context
from planner.predict.memory import serving_memory, training_memory
from planner.predict.ops import gemm_record
from planner.predict.roofline import op_time
from planner.predict.timing import stage_times
from planner.workload.device_graph import device_graph
from planner.workload.engines import get_engine
from planner.workload.graphs import Workload, build_inputs, resolve_workload
from planner.workload.zoo import resolve

CPU_MODELS = ("resnet50:b=1", "resnet50:b=8", "bert-base:b=1:s=128", "gpt2:prefill:b=1:s=256",
              "gpt2:decode:b=1:c=256", "vit-b-16:b=1")
GPU_MODELS = ("resnet50:b=1", "resnet50:b=64", "resnet50:b=256", "bert-large:b=1:s=384", "bert-large:b=32:s=384",
              "llama-3.1-8b:prefill:b=1:s=2048", "llama-3.1-8b:decode:b=1:c=2048", "llama-3.1-8b:decode:b=32:c=2048",
              "llama-3.1-8b:decode:b=128:c=2048", "gpt2:training:b=8:s=1024")
OFF_GRID_GEMMS = ((100, 700, 3000), (37, 1500, 600), (512, 3000, 768), (1, 5000, 2000), (200, 200, 200),
                  (2000, 300, 1200), (48, 12000, 768), (700, 700, 700), (3, 30000, 500), (1500, 1500, 96),
                  (128, 2304, 768), (300, 5000, 40))
MAX_CASES = 32
"""Most --models cases in one run."""
MAX_SPEC_CHARS = 200
"""Longest model case text ("llama-3.1-8b:decode:b=128:c=2048" is 32)."""
MAX_BUDGET_PER_CASE_S = 600.0
"""Largest --budget-per-case-s: a case stops at 30 repeats anyway."""
RUNS_PER_CASE = 7
"""Fewest runs of a model case: 2 warm-up and 5 timed (measure's min_repeats)."""
MAX_CASE_S = 120.0
"""Longest predicted time of those runs: a larger case is refused before it starts."""
MAX_MEMORY_FRACTION = {"cpu": 0.5, "gpu": 0.9}
"""Share of the device's memory a model case may be predicted to take (host memory is shared)."""


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
    """"gpt2:decode:b=1:c=256" -> ("gpt2", Workload("decode", 1, context_len=256)); modes default to inference.

    Raises ConfigError for an empty or over-long case, a missing model name, or a size that is not a
    positive decimal integer (the sizes' upper limits are resolve_workload's and MAX_CASE_S's)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError("model case '': give a model and sizes, like resnet50:b=8 or gpt2:decode:b=1:c=256")
    if len(spec) > MAX_SPEC_CHARS:
        raise ConfigError(f"model case '{spec[:40]}...' is {len(spec):,} characters; the limit is {MAX_SPEC_CHARS}")
    parts = spec.strip().split(":")
    name, mode, sizes = parts[0], "inference", {}
    if not name:
        raise ConfigError(f"model case '{spec}': no model name before the first ':' (like resnet50:b=8)")
    for part in parts[1:]:
        if "=" in part:
            key, _, value = part.partition("=")
            # str.isdigit() also accepts digits int() refuses ("²"): ASCII digits only, 9 at most
            if key not in ("b", "s", "c", "r") or not (value.isascii() and value.isdigit() and len(value) <= 9):
                raise ConfigError(f"model case '{spec}': '{part}' is not b=N, s=N, c=N or r=N (N a whole number "
                                  "up to 9 digits)")
            if int(value) < 1:
                raise ConfigError(f"model case '{spec}': '{part}' must be at least 1")
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
            from planner.workload.graphs import _loss
            opt.zero_grad(set_to_none=True)
            _loss(model, module(*args, **kwargs), labels).backward()
            opt.step()
        fn = step
    else:
        def forward(_):
            with torch.no_grad():
                module(*args, **kwargs)
        fn = forward
    t, _ = measure(fn, device, warmup=2, repeats=30, budget_s=budget_s, min_repeats=RUNS_PER_CASE - 2)
    return t, w


@dataclass(frozen=True, slots=True)
class _Planned:
    """A model case parsed, resolved and predicted, before anything runs."""

    spec: str
    name: str
    workload: Workload
    """Resolved: every default filled in, the dtype set."""
    predicted_s: float
    tier: str


def _plan_case(ctx: Context, spec: str, local: LocalDevice, device, dtype: str, eff=None) -> _Planned:
    """Parse, resolve and predict one model case; ConfigError when it is malformed, or predicted to
    take longer than MAX_CASE_S for its RUNS_PER_CASE runs, or more memory than this device offers."""
    name, workload = parse_model_case(spec)
    try:
        model = resolve(name)
        # validate trains the model at its dtype with fused AdamW on it (_measure_model): "pure", "fused"
        w = resolve_workload(model, Workload(workload.mode, workload.batch, workload.seq_len, workload.context_len,
                                             workload.image_size, dtype, mixed_precision="pure",
                                             optimizer="fused"))
    except PlannerError as exc:  # the same message, with the case it is about
        raise ConfigError(f"model case '{spec}': {exc}") from None
    dg = device_graph(model, w)
    eff = eff or ctx.efficiency(device, get_engine(w.engine).libraries)
    predicted_s = _predicted_s(ctx, name, w, device, eff)
    if predicted_s * RUNS_PER_CASE > MAX_CASE_S:
        raise ConfigError(f"model case '{spec}' is predicted to take {predicted_s:.3g} s a run on {local.id}, and "
                          f"validate runs it at least {RUNS_PER_CASE} times: over the {MAX_CASE_S:g} s limit; "
                          "choose a smaller batch or sequence")
    limit_bytes = (local.properties.get("memory_bytes") or 0) * MAX_MEMORY_FRACTION.get(local.kind, 0.5)
    try:
        if w.mode == "training":
            need = training_memory(dg, 1, 0, 1, "none", device, ctx.defaults)
        else:
            tokens = (w.context_len + 1) if w.mode == "decode" else (w.seq_len or 1)
            need = serving_memory(dg, w.batch, tokens, device, ctx.defaults)
    except ConfigError:  # a device without a sourced memory size: the time limit still bounds the case
        need = None
    if need is not None and limit_bytes:
        # the CUDA-context workspace is not model data (and absent on a CPU)
        need_bytes = need.total_bytes - need.workspace_bytes
        if need_bytes > limit_bytes:
            raise ConfigError(f"model case '{spec}' needs about {need_bytes / 1e9:.3g} GB; {local.id} offers "
                              f"{limit_bytes / 1e9:.3g} GB to one case: choose a smaller batch or sequence")
    return _Planned(spec, name, w, predicted_s, eff.tier)


def _predicted_s(ctx: Context, name: str, w: Workload, device, eff) -> float:
    """Predicted seconds of one run of model case `name` at resolved workload `w` with efficiency `eff`."""
    dg = device_graph(resolve(name), w)
    return sum(s.time_s for s in stage_times(dg, device, eff, ctx.power))


def _no_profile(local: LocalDevice, device_spec: str, ctx: Context) -> str:
    """Why `local` cannot be validated (it is neither in the catalog nor profiled), and the command
    that makes its profile, in one line."""
    what = "CPU" if local.kind == "cpu" else "GPU"
    spec = "cpu" if local.kind == "cpu" else local.torch_device
    root = os.environ.get("PLANNER_HARDWARE_SPECS")
    out = f" --out {os.path.join(root, 'calibration')}" if root else ""
    state = ("has a calibration profile without a GEMM rate or copy bandwidth" if local.id in ctx.profiles else
             "has no calibration profile" + ("" if local.kind == "cpu" else " and is not in the catalog"))
    return (f"this {what}, {local.name} ({local.id}), {state}: run `planner calibrate --device {spec}{out}` "
            f"to measure it (about 10 minutes), then validate again")


def _gemm_case(ctx: Context, device, local: str, m: int, n: int, k: int, dtype: str, cache: float,
               eff=None) -> Case:
    tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    elem = torch.empty((), dtype=tdtype).element_size()
    # nn.Linear's layout: x [M, K] @ W[N, K].t(), as calibrated and as models run it
    sets = rotation(lambda: (random_tensor((m, k), tdtype, local), random_tensor((n, k), tdtype, local).t()),
                    (m * k + k * n) * elem, cache, local)
    measured, _ = measure(lambda i: torch.mm(*sets[i % len(sets)]), local, warmup=2, repeats=30, budget_s=0.5)
    rec, category, cost = gemm_record(m, n, k, dtype)
    eff = eff or ctx.efficiency(device, get_engine("eager").libraries)
    t = op_time(rec, category, cost, dtype, device, eff)
    return Case(f"gemm {m}x{n}x{k} {dtype}", "op", "gemm", isolated_call_s(eff, t.time_s), measured, eff.tier)


def isolated_call_s(eff, kernel_s: float) -> float:
    """Event time of one eager call timed alone with CUDA events around it, for a kernel of `kernel_s`:
    the GPU waits isolated_call_s for the launch, and the closing event is recorded after_launch_s after
    it, so isolated_call_s + max(kernel, after_launch_s) (the profile's measured dispatch); the kernel
    time alone where the profile measured none (its times already hold the wait)."""
    d = getattr(eff, "dispatch", None) or {}
    if not d:
        return kernel_s
    return float(d["isolated_call_s"]) + max(kernel_s, float(d.get("after_launch_s", 0.0)))


def validate(device_spec: str = "auto", models: tuple[str, ...] | None = None, dtype: str | None = None,
             budget_per_case_s: float = 2.0, log=print, ctx: Context | None = None) -> list[Case]:
    """Run every case and return the predicted-vs-measured rows.

    Raises ConfigError before anything runs when an argument is bad, when the local device has neither
    a catalog entry nor a calibration profile, or when a model case is too large (see _plan_case)."""
    budget_per_case_s = check_seconds(budget_per_case_s, "--budget-per-case-s", MAX_BUDGET_PER_CASE_S)
    if models is not None and len(models) > MAX_CASES:
        raise ConfigError(f"--models: {len(models)} cases; the limit is {MAX_CASES} per run")
    for spec in models or ():
        parse_model_case(spec)  # a malformed case fails now, not after minutes of measuring
    ctx = ctx or default_context()
    local = local_device(device_spec)
    try:
        device = ctx.device(local.id)
    except UnknownNameError:
        raise ConfigError(_no_profile(local, device_spec, ctx)) from None
    if local.id not in ctx.profiles:
        log(f"validate: no calibration profile for {local.id}: predictions use the "
            f"{ctx.efficiency(device).tier} tier" + (f" ({device.source})" if local.kind == "cpu" else "")
            + "; the errors below are how far that tier is on this device")
    dtype = dtype or ("fp32" if local.kind == "cpu" else "bf16")
    eff = ctx.efficiency(device, get_engine("eager").libraries)
    probe = None
    if local.kind != "cpu" and getattr(eff, "dispatch", None):
        # dispatch is the host's: predict with this machine's (planner/calibration/dispatch.py)
        from planner.calibration.dispatch import DispatchProbe, measure_dispatch, with_dispatch
        probe = DispatchProbe(local.torch_device)
        here = measure_dispatch(local.torch_device, float(eff.dispatch.get("after_launch_s", 0.0)), probe)
        log(f"validate: dispatch measured here: {here['host_per_op_s'] * 1e6:.1f} us per kernel op, "
            f"{here['view_host_s'] * 1e6:.2f} us per view, isolated call {here['isolated_call_s'] * 1e6:.1f} us "
            f"(the profile's machine: {eff.dispatch['host_per_op_s'] * 1e6:.1f}, {eff.dispatch['view_host_s'] * 1e6:.2f}, "
            f"{eff.dispatch['isolated_call_s'] * 1e6:.1f})")
        eff = with_dispatch(eff, here)
    planned = []
    if models is not None:
        planned = [_plan_case(ctx, spec, local, device, dtype, eff) for spec in models]
    else:
        # the standard set spans devices: a case too large for this one (a 24 GB GPU) is left out, not fatal
        for spec in CPU_MODELS if local.kind == "cpu" else GPU_MODELS:
            try:
                planned.append(_plan_case(ctx, spec, local, device, dtype, eff))
            except ConfigError as exc:
                log(f"validate: left out: {exc}")
    cache = 64 * 2**20 if local.kind == "cpu" else float(local.properties.get("L2_cache_size", 64 * 2**20))
    cases: list[Case] = []
    for m, n, k in OFF_GRID_GEMMS:
        case = _gemm_case(ctx, device, local.torch_device, m, n, k, "fp32" if local.kind == "cpu" else dtype, cache,
                          eff if local.kind != "cpu" else None)
        cases.append(case)
        log(f"  {case.name:<42} predicted {case.predicted_s * 1e3:9.3f} ms  measured {case.measured_s * 1e3:9.3f} ms"
            f"  error {case.error:+.1%}")
    for plan in planned:
        name, predicted, tier = plan.name, plan.predicted_s, plan.tier
        if probe is not None:  # the host's speed now, for this case's prediction
            host, view_host, _ = probe.host()
            predicted = _predicted_s(ctx, name, plan.workload, device,
                                     with_dispatch(eff, {"host_per_op_s": host, "view_host_s": view_host}))
            log(f"  (host now: {host * 1e6:.1f} us per kernel op, {view_host * 1e6:.2f} us per view)")
        try:
            measured, w = _measure_model(name, plan.workload, local.torch_device, dtype, budget_per_case_s)
        except (torch.OutOfMemoryError, MemoryError) as exc:
            raise ConfigError(f"model case '{plan.spec}' ran out of memory on {local.id} "
                              f"({type(exc).__name__}): choose a smaller batch or sequence") from None
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
    for tier in sorted({c.tier for c in cases}):
        errors = [abs(c.error) for c in cases if c.tier == tier]
        rows.append("")
        rows.append(f"{tier} tier: median abs error {statistics.median(errors):.1%} over {len(errors)} cases")
    return "\n".join(rows)

