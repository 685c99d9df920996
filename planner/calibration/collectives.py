"""Measure collectives across local devices with torch.distributed, and fit the alpha-beta model.

One process per device (NCCL on GPUs; gloo on CPU processes, which is how the tests exercise this
code without several GPUs), rendezvous on the loopback address. Each collective runs at message
sizes from 1 KiB up, after warm-up, timed between barriers with device synchronization; rank 0
reports the median. The fit (least squares on the nccl-tests formulas of planner/predict/parallel.py):

    all-reduce                              t = 2(n-1)·α + 2(n-1)/n · M / B
    all-gather, reduce-scatter, all-to-all  t = (n-1)·α + (n-1)/n · M / B
gives the per-step latency α and the achieved per-direction bandwidth B of the local link.
"""

from __future__ import annotations

import os
import socket
import statistics
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

OPS = ("allreduce", "allgather", "reducescatter", "alltoall")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, backend: str, sizes: list[int], repeats: int, out: str) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    device = f"cuda:{rank}" if backend == "nccl" else "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank)
    rows = []
    try:
        for nbytes in sizes:
            elements = max(world, nbytes // 4 // world * world)
            full = torch.rand(elements, device=device) + 0.5
            shard = torch.rand(elements // world, device=device) + 0.5
            calls = {
                "allreduce": lambda: dist.all_reduce(full),
                "allgather": lambda: dist.all_gather_into_tensor(full, shard),
                "reducescatter": lambda: dist.reduce_scatter_tensor(shard, full),
                "alltoall": lambda: dist.all_to_all_single(torch.empty_like(full), full),
            }
            for op, call in calls.items():
                samples = []
                for i in range(repeats + 2):
                    dist.barrier()
                    if backend == "nccl":
                        torch.cuda.synchronize(device)
                    start = time.perf_counter()
                    call()
                    if backend == "nccl":
                        torch.cuda.synchronize(device)
                    elapsed = time.perf_counter() - start
                    if i >= 2:  # the first two are warm-up
                        samples.append(elapsed)
                rows.append({"kind": "collective", "op": op, "ranks": world, "bytes": float(elements * 4),
                             "time_s": statistics.median(samples), "backend": backend})
    finally:
        dist.destroy_process_group()
    if rank == 0:
        import json
        with open(out, "w") as f:
            json.dump(rows, f)


def measure_collectives(world: int, backend: str = "nccl", sizes: list[int] | None = None,
                        repeats: int = 10) -> list[dict]:
    """Run every collective at every size over `world` local processes; return rank 0's rows."""
    sizes = sizes or [2**e for e in range(10, 29, 2)]
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "collectives.json")
        mp.start_processes(_worker, args=(world, port, backend, sizes, repeats, out), nprocs=world, join=True,
                           start_method="spawn")
        import json
        with open(out) as f:
            return json.load(f)


def fit_alpha_beta(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Least-squares α (s per step) and B (bytes/s per direction) per collective from measured rows."""
    fits: dict[str, dict[str, float]] = {}
    for op in OPS:
        points = [r for r in rows if r["op"] == op]
        if len(points) < 2:
            continue
        n = points[0]["ranks"]
        steps = 2 * (n - 1) if op == "allreduce" else (n - 1)
        share = 2 * (n - 1) / n if op == "allreduce" else (n - 1) / n
        a = np.array([[steps, share * r["bytes"]] for r in points])
        t = np.array([r["time_s"] for r in points])
        (alpha, inverse_bw), *_ = np.linalg.lstsq(a, t, rcond=None)
        alpha = max(float(alpha), 0.0)
        inverse_bw = max(float(inverse_bw), 1e-15)
        predicted = a @ np.array([alpha, inverse_bw])
        fits[op] = {"ranks": n, "latency_s": alpha, "bytes_per_s": 1.0 / inverse_bw,
                    "median_abs_error": float(np.median(np.abs(predicted / t - 1)))}
    return fits
