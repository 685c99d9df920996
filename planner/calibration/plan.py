"""What `planner calibrate` measures: the plan, a list of measurements in priority order (coarse grids
first, round-robin over kinds, so that a budget cut anywhere still covers every op kind): GEMM over a
log-spaced (M, N, K) grid per dtype, batched GEMM, attention, convolutions of CNN families, memory-bound
kernels against bytes, host-to-device copies (GPUs) and per-op dispatch overhead. Pure: a device's
properties in, plan entries (dicts) out."""

from __future__ import annotations

import math

import torch

from planner.calibration.bench import LocalDevice

MEMORY_KINDS = ("add", "gelu", "sum", "layer_norm", "softmax", "copy", "batch_norm", "maxpool")


def _grid(kind: str, device: LocalDevice) -> list[dict]:
    cpu = device.kind == "cpu"
    max_flop = 2e10 if cpu else 4e12
    plan: list[dict] = []
    dtypes = ["fp32", "bf16"] if cpu else ["fp32", "tf32", "bf16", "fp16"]
    if not cpu and _fp8_ok(device):
        dtypes.append("fp8")
    if kind == "gemm":
        # layout "nt" is nn.Linear's (weight stored [N, K], used transposed): a grid of powers of 2, dense
        # where models' GEMMs live; "nn" (both operands row-major) and the other dtypes on powers of 4
        fine_m = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]
        fine_nk = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
        coarse_m, coarse_nk = [1, 8, 64, 256, 1024, 4096], [64, 256, 1024, 4096, 16384, 65536]
        for di, dtype in enumerate(dtypes):
            for layout in ("nt", "nn") if di == 0 else ("nt",):
                fine = di == 0 and layout == "nt"
                for m in fine_m if fine else coarse_m:
                    for n in fine_nk if fine else coarse_nk:
                        for k in (fine_nk if fine else coarse_nk)[:-1]:
                            if 2 * m * n * k <= max_flop:
                                plan.append({"kind": "gemm", "dtype": dtype, "layout": layout, "m": m, "n": n, "k": k})
        # a large square GEMM first (it sets the measured peak), then coarse to fine
        plan.sort(key=lambda e: (e["dtype"] != "fp32", e["layout"] != "nt", -(e["m"] == e["n"] == e["k"] == 1024),
                                 _coarse(e)))
    elif kind == "bmm":
        for b in (8, 48):
            for m in (64, 256, 1024):
                for k in (64, 256):
                    plan.append({"kind": "bmm", "dtype": "fp32", "b": b, "m": m, "n": m, "k": k})
    elif kind == "attention":
        for bh in (12, 48):
            for s in (64, 256, 1024):
                for causal in (True, False):
                    plan.append({"kind": "attention", "dtype": "fp32", "bh": bh, "sq": s, "sk": s, "d": 64,
                                 "causal": causal})
            for sk in (128, 512, 2048):
                plan.append({"kind": "attention", "dtype": "fp32", "bh": bh, "sq": 1, "sk": sk, "d": 64,
                             "causal": False})
    elif kind == "conv":
        plan.extend(_conv_shapes())
    elif kind == "memory":
        top = 27 if cpu else 30
        # the cold copy sets the bandwidth ceiling: large sizes first
        for exp in range(top + 1, 19, -2):
            plan.append({"kind": "copy", "dtype": "fp32", "bytes": 2**exp, "warm": False})
        # warm kernels coarse to fine: every 4th size, then the ones between
        exps = list(range(12, top + 1))
        for phase in (0, 2, 1, 3):
            for exp in exps[phase::4]:
                for kind_name in MEMORY_KINDS:
                    plan.append({"kind": kind_name, "dtype": "fp32", "bytes": 2**exp, "warm": True})
    elif kind == "overhead":
        plan += [{"kind": "launch", "dtype": "fp32"}, {"kind": "view", "dtype": "fp32"}]
    elif kind == "h2d" and not cpu:
        for exp in range(16, 31, 2):
            plan.append({"kind": "h2d", "dtype": "fp32", "bytes": 2**exp, "warm": False})
    return plan


def _coarse(entry: dict) -> int:
    # points on the coarse sub-grid (powers of 4) come first, so a cut budget keeps coverage
    return sum(int(math.log2(entry[k])) % 2 for k in ("m", "n", "k") if k in entry)


def _conv_shapes() -> list[dict]:
    """Convolutions of ResNet-style bottleneck and basic blocks and ViT patch embeddings, at batch
    2 and 16 and resolutions 160 and 224 (implicit-GEMM sizes that bracket common CNN layers)."""
    shapes = []
    for batch in (2, 16):
        for res in (160, 224):
            s = [res // 4, res // 8, res // 16, res // 32]
            shapes.append((batch, 3, res, 64, 7, 2, 3))
            for size, width in zip(s, (64, 128, 256, 512)):
                shapes += [(batch, width * 4, size, width, 1, 1, 0), (batch, width, size, width, 3, 1, 1),
                           (batch, width, size, width * 4, 1, 1, 0)]
            for size, width in zip(s[1:], (128, 256, 512)):
                shapes.append((batch, width, size * 2, width, 3, 2, 1))
            for dim in (384, 1024):
                shapes.append((batch, 3, res, dim, 16, 16, 0))
    return [{"kind": "conv", "dtype": "fp32", "n": n, "cin": cin, "hw": hw, "cout": cout, "ksize": k, "stride": st,
             "pad": pad} for n, cin, hw, cout, k, st, pad in shapes]


def _fp8_ok(device: LocalDevice) -> bool:
    cap = device.properties.get("capability", "0.0")
    return tuple(int(x) for x in cap.split(".")) >= (8, 9) and hasattr(torch, "_scaled_mm")


def build_plan(device: LocalDevice) -> list[dict]:
    """Every measurement of a full calibration, in priority order (round-robin over kinds)."""
    groups = [_grid(k, device) for k in ("overhead", "gemm", "memory", "attention", "conv", "bmm", "h2d")]
    plan: list[dict] = []
    # round-robin so that a budget cut anywhere leaves every kind covered
    while any(groups):
        for g in groups:
            if g:
                plan.append(g.pop(0))
    return plan
