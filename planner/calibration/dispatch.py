"""The host's dispatch cost, measured on the machine `planner validate` runs on.

Dispatch is the host's: the same H200 step took 15.1 ms on one lent machine and 19.5 ms on another
(benchmarks/data/measured/). A profile's `dispatch` block holds the figures of the machine that made
it; validate measures its own machine's and predicts with them, so that a host-bound case is judged
against the host it ran on:

- host_per_op_s: host time to issue one step of three small models whose kernels are too short to
  hold the host up (gpt2 decode b=1 c=128, bert-base b=1 s=32, vit-b-16 b=1), less their views at
  view_host_s, over their captured kernel ops; the median of the three (as scripts/eager_profile.py);
  measured again right before each model case (DispatchProbe), since the host's speed drifts;
- view_host_s: `tensor.view` in a loop;
- isolated_call_s: the median event time of tiny bf16 GEMMs (their kernel ends before the closing
  event) less the profile's after_launch_s.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

import torch

from planner.calibration.bench import measure, random_tensor

DISPATCH_CASES = ("gpt2:decode:b=1:c=128", "bert-base:b=1:s=32", "vit-b-16:b=1")
TINY_GEMMS = ((1, 256, 256), (16, 256, 256), (64, 256, 256), (1, 512, 512), (16, 512, 512))


def _issue_s(fn, repeats: int = 7) -> float:
    """Median host time to issue fn() with the device drained before each call."""
    samples = []
    for i in range(repeats + 2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if i >= 2:
            samples.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(samples)


def case_workload(spec: str):
    """(model, resolved bf16 workload) of a validate-style case ("gpt2:decode:b=1:c=128")."""
    from planner.calibration.validate import parse_model_case
    from planner.workload.graphs import Workload, resolve_workload
    from planner.workload.zoo import resolve

    name, w = parse_model_case(spec)
    model = resolve(name)
    return model, resolve_workload(model, Workload(w.mode, w.batch, w.seq_len, w.context_len, w.image_size, "bf16"))


class DispatchProbe:
    """The three small models of DISPATCH_CASES, built once on `device`, whose host issue time gives the
    host cost per kernel op now (`host()`, about a second): the host's speed drifts within a run (2x
    between the first seconds of a lent machine's run and later, benchmarks/data/measured/h200-sxm/
    validate-2026-11-26/), so validate measures it again before each model case."""

    def __init__(self, device: str):
        from planner.workload.device_graph import device_graph
        from planner.workload.graphs import build_inputs

        self.device = device
        self.steps = []
        for spec in DISPATCH_CASES:
            model, w = case_workload(spec)
            kernels, views = device_graph(model, w).launches()
            module, args, kwargs, _ = build_inputs(model, w, device=device)
            self.steps.append((spec, module, args, kwargs, kernels, views))
        self._view = torch.randn(64, device=device)

    def host(self) -> tuple[float, float, dict]:
        """(host s per kernel op, per view, per case) measured now."""
        for _ in range(50):
            self._view.view(8, 8)
        t0 = time.perf_counter()
        for _ in range(2000):
            self._view.view(8, 8)
        view_host = (time.perf_counter() - t0) / 2000
        per_op = {}
        for spec, module, args, kwargs, kernels, views in self.steps:
            def step():
                with torch.no_grad():
                    module(*args, **kwargs)
            per_op[spec] = (_issue_s(step) - views * view_host) / kernels
        return statistics.median(per_op.values()), view_host, per_op


def measure_dispatch(device: str, after_launch_s: float, probe: DispatchProbe | None = None) -> dict:
    """This machine's dispatch block (the keys of a profile's `dispatch`), measured on CUDA `device`."""
    probe = probe or DispatchProbe(device)
    host, view_host, per_op = probe.host()
    tiny = []
    for m, n, k in TINY_GEMMS:
        x, y = random_tensor((m, k), torch.bfloat16, device), random_tensor((n, k), torch.bfloat16, device).t()
        tiny.append(measure(lambda i: torch.mm(x, y), device, warmup=3, repeats=30, budget_s=0.3)[0])
    return {"host_per_op_s": host, "view_host_s": view_host,
            "isolated_call_s": max(0.0, statistics.median(tiny) - after_launch_s),
            "measured_here": {"per_op_by_case_s": per_op, "tiny_gemm_event_s": tiny}}


def with_dispatch(eff, dispatch: dict):
    """`eff` (a ProfileEfficiency) whose dispatch block is this machine's: the kernel curves unchanged."""
    raw = {**eff.profile.raw, "dispatch": {**eff.profile.dispatch, **dispatch}}
    return replace(eff, profile=replace(eff.profile, raw=raw))
