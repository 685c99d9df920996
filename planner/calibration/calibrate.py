"""`planner calibrate`: microbenchmarks on the local device, within a time budget, resumable.

The plan is a list of measurements in priority order (coarse grids first, so a short budget still
covers every op kind): GEMM over a log-spaced (M, N, K) grid per dtype, batched GEMM, attention
(prefill and decode, causal and not), convolutions from CNN families, memory-bound kernels
(binary and transcendental elementwise, reduction, layer norm, softmax, copy) against bytes,
host-to-device copy (GPUs), and per-op dispatch overhead. Each finished measurement is appended and
flushed to `<out>/<device-id>/partial.jsonl`; an interrupted run picks up where it stopped (see
resume.py: a line cut by the interruption is dropped, and the measuring time adds up across runs).
The profile is written to `profile.json` through a temporary file and an atomic rename: it is never
half written, and a run that measured too little to fit (no GEMM rate or no copy bandwidth) writes
none, so a tiny budget cannot replace a good profile with an empty one.

Memory-bound kernels are timed on warm buffers (their input was just written, as in a model where
the previous op produced it); GEMM, convolution and attention inputs are rotated beyond the last
level cache (weights stream from memory in a real model); the copy kernel is timed both ways and
its cold large-buffer rate is the device's memory-bandwidth ceiling.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from planner.calibration.bench import (
    LocalDevice,
    check_seconds,
    local_device,
    measure,
    random_tensor,
    rotation,
    synchronize,
    versions,
)
from planner.calibration.budget import (
    BUSY_CV,
    LOO_MAX_POINTS,
    MIN_LOO_S,
    PROBE_ROUNDS,
    PROBES,
    BusyMachineError,
    _steal_ticks,
    loo_seconds,
    reserve_s,
    variation,
)
from planner.calibration.loo import leave_one_out
from planner.calibration.plan import MEMORY_KINDS, build_plan
from planner.calibration.resume import (
    BOOKKEEPING,
    device_folder,
    json_safe,
    profile_root,
    read_partial,
    read_profile_json,
    write_partial,
)
from planner.errors import ConfigError
from planner.units import percent_or_na as pct
from planner.files import exclusive_lock, shipped_specs, write_text_atomic

DEFAULT_OUT = shipped_specs() / "calibration"
SCHEMA = 1
MAX_BUDGET_S = 86400.0
"""Largest --budget-s, one day: the full plan takes well under an hour on any device, so a larger
budget would only ever be a typo."""
_TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
TRANSCENDENTAL = frozenset({"aten.gelu", "aten.silu", "aten.tanh", "aten.exp", "aten.sigmoid", "aten.erf",
                            "aten.pow", "aten.rsqrt", "aten.sqrt", "aten.log", "aten.sin", "aten.cos",
                            "aten.gelu_backward", "aten.silu_backward", "aten.tanh_backward", "aten.sigmoid_backward"})


def _cache_bytes(device: LocalDevice) -> float:
    if device.kind == "gpu":
        return float(device.properties.get("L2_cache_size", 64 * 2**20))
    return 64 * 2**20  # above any L3 slice this machine class has (32 MiB here)


def _footprint_bytes(entry: dict) -> float:
    """Bytes one plan entry allocates per input set (random_tensor builds each float input 3x over)."""
    kind = entry["kind"]
    if kind == "gemm":
        return 3 * 4.0 * (entry["m"] * entry["k"] + entry["k"] * entry["n"]) + 4.0 * entry["m"] * entry["n"]
    if kind == "bmm":
        return 3 * 4.0 * entry["b"] * (entry["m"] * entry["k"] + entry["k"] * entry["n"])
    return 3 * float(entry.get("bytes", 0))


def memory_limit_bytes(device: LocalDevice) -> float:
    """The largest footprint a benchmark may take: a tenth of host memory (CPU), a quarter of the GPU's."""
    total = device.properties.get("memory_bytes") or 16e9
    return total / (10 if device.kind == "cpu" else 4)


def run_one(entry: dict, device: LocalDevice) -> dict:
    """Measure one plan entry; return it with time_s, flop, bytes and the samples.

    Raises MemoryError for an entry whose buffers would exceed memory_limit_bytes (recorded as skipped).
    """
    need = _footprint_bytes(entry)
    if need > memory_limit_bytes(device):
        raise MemoryError(f"skipped: needs {need / 1e9:.1f} GB, over the {memory_limit_bytes(device) / 1e9:.1f} GB "
                          "allowed for one benchmark")
    dev = device.torch_device
    kind = entry["kind"]
    dtype = _TORCH_DTYPES.get(entry["dtype"], torch.float32)
    cache = _cache_bytes(device)
    flop = nbytes = 0.0
    fn: Callable[[int], object]
    if kind == "gemm":
        m, n, k = entry["m"], entry["n"], entry["k"]
        if entry["dtype"] == "fp8":
            sets = rotation(lambda: (random_tensor((m, k), torch.float8_e4m3fn, dev),
                                     random_tensor((n, k), torch.float8_e4m3fn, dev).t()),
                            (m * k + k * n), cache, dev)
            one = torch.ones((), device=dev)
            fn = lambda i: torch._scaled_mm(sets[i % len(sets)][0], sets[i % len(sets)][1], scale_a=one, scale_b=one,
                                            out_dtype=torch.bfloat16)
            elem = 1
        else:
            elem = torch.empty((), dtype=dtype).element_size()
            if entry.get("layout", "nt") == "nt":
                # as nn.Linear: x [M, K] @ W[N, K].t()
                sets = rotation(lambda: (random_tensor((m, k), dtype, dev), random_tensor((n, k), dtype, dev).t()),
                                (m * k + k * n) * elem, cache, dev)
            else:
                sets = rotation(lambda: (random_tensor((m, k), dtype, dev), random_tensor((k, n), dtype, dev)),
                                (m * k + k * n) * elem, cache, dev)
            fn = lambda i: torch.mm(*sets[i % len(sets)])
        flop, nbytes = 2.0 * m * n * k, float((m * k + k * n) * elem + m * n * (2 if entry["dtype"] == "fp8" else elem))
    elif kind == "bmm":
        b, m, n, k = entry["b"], entry["m"], entry["n"], entry["k"]
        sets = rotation(lambda: (random_tensor((b, m, k), dtype, dev), random_tensor((b, k, n), dtype, dev)),
                        b * (m * k + k * n) * 4, cache, dev)
        fn = lambda i: torch.bmm(*sets[i % len(sets)])
        flop, nbytes = 2.0 * b * m * n * k, 4.0 * b * (m * k + k * n + m * n)
    elif kind == "attention":
        bh, sq, sk, d = entry["bh"], entry["sq"], entry["sk"], entry["d"]
        causal = entry["causal"]
        sets = rotation(lambda: (random_tensor((1, bh, sq, d), dtype, dev), random_tensor((1, bh, sk, d), dtype, dev),
                                 random_tensor((1, bh, sk, d), dtype, dev)), 4 * bh * d * (sq + 2 * sk), cache, dev)
        fn = lambda i: F.scaled_dot_product_attention(*sets[i % len(sets)], is_causal=causal)
        flop = 4.0 * bh * sq * sk * d * (0.5 if causal else 1.0)
        nbytes = 4.0 * bh * d * (2 * sq + 2 * sk)
    elif kind == "conv":
        n, cin, hw, cout, ks, st, pad = (entry[x] for x in ("n", "cin", "hw", "cout", "ksize", "stride", "pad"))
        out = (hw + 2 * pad - ks) // st + 1
        sets = rotation(lambda: (random_tensor((n, cin, hw, hw), dtype, dev),
                                 random_tensor((cout, cin, ks, ks), dtype, dev)), 4 * (n * cin * hw * hw), cache, dev)
        fn = lambda i: F.conv2d(sets[i % len(sets)][0], sets[i % len(sets)][1], stride=st, padding=pad)
        flop = 2.0 * n * cout * out * out * cin * ks * ks
        nbytes = 4.0 * (n * cin * hw * hw + cout * cin * ks * ks + n * cout * out * out)
    elif kind in ("batch_norm", "maxpool"):
        # NCHW activations of a CNN: [1, 64, h, h]
        side = max(4, int(math.sqrt(max(1024, entry["bytes"] // 4) / 64)))
        x = random_tensor((1, 64, side, side), torch.float32, dev)
        stats = [random_tensor((64,), torch.float32, dev).abs() for _ in range(4)]
        if kind == "maxpool":
            fn = lambda i: F.max_pool2d(x, 3, 2, 1)
            out = (side + 1) // 2
            nbytes, flop = 4.0 * 64 * (side * side + out * out), 9.0 * 64 * out * out
        else:
            fn = lambda i: F.batch_norm(x, stats[0], stats[1], stats[2], stats[3], False)
            nbytes, flop = 8.0 * 64 * side * side, 2.0 * 64 * side * side
    elif kind in MEMORY_KINDS:
        elements = max(1024, entry["bytes"] // 4)
        rows = max(1, elements // 1024)
        shape = (rows, elements // rows)
        warm = entry.get("warm", True)
        make = lambda: (random_tensor(shape, torch.float32, dev), random_tensor(shape, torch.float32, dev))
        sets = [make()] if warm else rotation(make, 2 * entry["bytes"], cache, dev)
        width = shape[1]
        ops = {"add": (lambda a, b: torch.add(a, b), 3, 1), "gelu": (lambda a, b: F.gelu(a), 2, 1),
               "sum": (lambda a, b: a.sum(-1), 1, 1), "softmax": (lambda a, b: torch.softmax(a, -1), 2, 5),
               "layer_norm": (lambda a, b: F.layer_norm(a, (width,)), 2, 7), "copy": (lambda a, b: a.clone(), 2, 0)}
        op, passes, per_element = ops[kind]
        fn = lambda i: op(*sets[i % len(sets)])
        nbytes = float(passes * shape[0] * shape[1] * 4)
        flop = float(per_element * shape[0] * shape[1])
    elif kind == "h2d":
        host = random_tensor((entry["bytes"] // 4,), torch.float32, "cpu").pin_memory()
        fn = lambda i: host.to(dev, non_blocking=True)
        nbytes = float(entry["bytes"])
    elif kind == "launch":
        a = random_tensor((1,), torch.float32, dev)
        fn = lambda i: torch.add(a, a)
    elif kind == "view":
        a = random_tensor((64, 64), torch.float32, dev)
        fn = lambda i: a.view(4096)
    else:
        raise ConfigError(f"unknown calibration kind '{kind}'")
    if kind in ("launch", "view"):
        # per-call cost of a tiny op: a loop of 200 calls, timed together, per call
        loop = lambda i: [fn(j) for j in range(200)]
        t, samples = measure(loop, dev, warmup=2, repeats=15, budget_s=0.5)
        t, samples = t / 200, [s / 200 for s in samples]
    else:
        t, samples = measure(fn, dev, warmup=2, repeats=20, budget_s=0.4 if device.kind == "cpu" else 0.2,
                             min_repeats=3)
    return {**entry, "time_s": t, "flop": flop, "bytes": nbytes, "samples": len(samples),
            "spread": (max(samples) - min(samples)) / t if t > 0 else 0.0}


def sample_power(device: LocalDevice, seconds: float = 2.0) -> dict | str:
    """Average board power (NVML) idle, during a large bf16 GEMM loop and during a large copy loop.

    Returns {"idle_w", "gemm_w", "copy_w", "tdp_limit_w"} or a string saying why nothing was sampled.
    """
    if device.kind != "gpu":
        return "not sampled: NVML reads GPUs only"
    try:
        import threading

        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(int(device.torch_device.split(":")[1]))
    except Exception as exc:  # no NVML library or no permission: say so in the profile
        return f"not sampled: NVML unavailable ({type(exc).__name__})"

    def average(work: Callable[[], object] | None) -> float:
        readings: list[float] = []
        stop = threading.Event()

        def sampler():
            while not stop.is_set():
                readings.append(pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
                time.sleep(0.02)

        thread = threading.Thread(target=sampler)
        thread.start()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            if work is not None:
                work()
                synchronize(device.torch_device)
            else:
                time.sleep(0.05)
        stop.set()
        thread.join()
        # the first quarter is the ramp: keep the steady part
        steady = readings[len(readings) // 4:] or readings
        return sum(steady) / len(steady)

    dev = device.torch_device
    a, b = random_tensor((8192, 8192), torch.bfloat16, dev), random_tensor((8192, 8192), torch.bfloat16, dev)
    big = random_tensor((2**28,), torch.float32, dev)
    out = {"idle_w": average(None), "gemm_w": average(lambda: torch.mm(a, b)), "copy_w": average(lambda: big.clone())}
    try:
        out["tdp_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
    except Exception:  # older drivers lack the call
        pass
    return out


def probe_round(device: LocalDevice, measure_one: Callable[[dict, LocalDevice], dict] | None = None) -> list[float]:
    """One round of PROBES: each one's median time, in seconds, in PROBES order."""
    measure_one = measure_one or run_one
    return [measure_one(dict(entry), device)["time_s"] for entry in PROBES]


def outliers(measurements: list[dict], threshold: float = 0.15) -> list[int]:
    """Indices of GEMM measurements whose log efficiency differs from the median of their grid
    neighbours (one step along any axis) by more than `threshold`, worst first.

    Interference on a shared machine only ever slows a kernel down, and in bursts longer than one
    measurement: such points stand out from their neighbours and are worth measuring again.
    """
    index = {}
    for i, m in enumerate(measurements):
        if m["kind"] == "gemm":
            index[(m["dtype"], m.get("layout", "nt"), m["m"], m["n"], m["k"])] = i
    rate = lambda m: m["flop"] / m["time_s"]
    flagged = []
    for (dtype, layout, mm, nn, kk), i in index.items():
        around = []
        for dm, dn, dk in ((2, 1, 1), (0.5, 1, 1), (1, 2, 1), (1, 0.5, 1), (1, 1, 2), (1, 1, 0.5)):
            j = index.get((dtype, layout, int(mm * dm), int(nn * dn), int(kk * dk)))
            if j is not None:
                # scale the neighbour's rate to this shape by the FLOP ratio only through log-rate
                around.append(math.log(rate(measurements[j])))
        if len(around) >= 2:
            deviation = abs(math.log(rate(measurements[i])) - sorted(around)[len(around) // 2])
            if deviation > threshold:
                flagged.append((deviation, i))
    return [i for _, i in sorted(flagged, reverse=True)]


def recheck(measurements: list[dict], device: LocalDevice, budget_s: float, log: Callable[[str], None]) -> int:
    """Measure outliers again within `budget_s`, keeping the lower median; return how many were redone.
    None is started that the slowest one so far would carry past `budget_s`."""
    start = time.perf_counter()
    redone = 0
    longest = 0.0
    for i in outliers(measurements):
        if time.perf_counter() - start + longest > budget_s:
            break
        m = measurements[i]
        entry = json.loads(m["key"]) if "key" in m else {k: m[k] for k in ("kind", "dtype", "layout", "m", "n", "k")
                                                          if k in m}
        began = time.perf_counter()
        try:
            again = run_one(entry, device)
        except (RuntimeError, TypeError, MemoryError):
            continue
        finally:
            longest = max(longest, time.perf_counter() - began)
        m["first_time_s"] = m.get("first_time_s", m["time_s"])
        m["rechecked"] = True
        if again["time_s"] < m["time_s"]:
            m["time_s"], m["samples"], m["spread"] = again["time_s"], again["samples"], again["spread"]
        redone += 1
    log(f"calibrate: re-measured {redone} outlying GEMM points (kept the faster median of two)")
    return redone


def _collectives(device: LocalDevice, left_s: float, log: Callable[[str], None]) -> dict | str:
    """Collectives over every visible GPU (NCCL) with their alpha-beta fit, or why none were measured."""
    count = device.properties.get("device_count", 1) if device.kind == "gpu" else 1
    if count < 2:
        return "not measured: one device visible"
    if left_s < 30:
        return "not measured: budget spent"
    from planner.calibration.collectives import fit_alpha_beta, measure_collectives

    try:
        rows = measure_collectives(count, "nccl")
    except Exception as exc:  # NCCL or spawn failures are reported in the profile, not fatal
        return f"not measured: {type(exc).__name__}: {str(exc)[:200]}"
    fit = fit_alpha_beta(rows)
    for op, f in fit.items():
        log(f"calibrate: {op} over {f['ranks']} GPUs: {f['latency_s'] * 1e6:.1f} us per step, "
            f"{f['bytes_per_s'] / 1e9:.0f} GB/s per direction (fit error {f['median_abs_error']:.1%})")
    return {"measurements": rows, "fit": fit}


def _plan_hash(plan: list[dict]) -> str:
    return hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()[:16]


def _progress(done: int, total: int, entry: dict, left_s: float) -> None:
    if not sys.stderr.isatty() and done % 10 and done != total:
        return
    width = 30
    filled = int(width * done / max(total, 1))
    label = " ".join(f"{k}={v}" for k, v in entry.items() if k not in ("kind",))[:48]
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {entry['kind']} {label:<48} "
                     f"{max(0.0, left_s):5.0f} s left")
    sys.stderr.flush()


def calibrate(device_spec: str = "auto", budget_s: float = 600.0, out: str | Path | None = None,
              plan: list[dict] | None = None, log: Callable[[str], None] | None = None,
              started_s: float | None = None, force: bool = False) -> Path:
    """Run the calibration plan on the local device within `budget_s`; return the profile path.

    `budget_s` is wall time for the whole calibration across resumes: measuring, the fit, leave-one-out
    and writing, from `started_s` (a time.perf_counter() reading when the command started; default
    now), less the seconds earlier runs of the same plan spent (recorded in partial.jsonl). Measuring
    stops `reserve_s` before the end. Resumes from `<out>/<device-id>/partial.jsonl` when it holds
    measurements of the same plan.

    Raises BusyMachineError (and writes nothing) when the probes measured at each end of the run vary
    by more than BUSY_CV, unless `force`.
    """
    log = log or (lambda text: print(text, file=sys.stderr))
    budget_s = check_seconds(budget_s, "--budget-s", MAX_BUDGET_S)
    began = time.perf_counter() if started_s is None else started_s
    root = profile_root(out, DEFAULT_OUT)
    device = local_device(device_spec)
    plan = plan if plan is not None else build_plan(device)
    folder = device_folder(root, device.id)
    # one calibration per output folder: a second writer of the same profile stops at once, naming the first
    with exclusive_lock(folder / ".calibrate.lock", f"calibration output '{folder}'"):
        return _calibrate_locked(device, plan, folder, budget_s, began, log, force)


def _calibrate_locked(device, plan: list[dict], folder: Path, budget_s: float, began: float, log,
                      force: bool) -> Path:
    partial = folder / "partial.jsonl"
    digest = _plan_hash(plan)
    plan_keys = {json.dumps(e, sort_keys=True) for e in plan}
    resumed = read_partial(partial, digest, plan_keys)
    for note in resumed.notes:
        log(f"calibrate: {note}")
    done = list(resumed.done)
    spent_before = resumed.spent_s
    invocation = resumed.invocations + 1
    spent = lambda: round(spent_before + time.perf_counter() - began, 3)  # noqa: E731
    header = {"plan": digest, "device": device.id, "spent_s": spent(), "invocations": invocation,
              "probe_cv": round(resumed.probe_cv, 4)}
    if done or resumed.invocations:
        log(f"calibrate: resuming {device.id}: {len(done)} of {len(plan)} measurements already done "
            f"({spent_before:.0f} s of the budget spent over {resumed.invocations} earlier run(s))")
    # always rewritten whole (atomically): a cut last line is gone, appends start on a fresh line, and
    # the header counts this invocation even if it is interrupted before its first measurement
    write_partial(partial, header, done)
    deadline = began + max(0.0, budget_s - spent_before)
    keep_s = reserve_s(len(plan), budget_s)
    stop_measuring = deadline - keep_s
    try:
        probe_round(device)  # warm-up, not counted: the first GEMM starts torch's thread pool (2.4 s here)
        rounds = [probe_round(device) for _ in range(PROBE_ROUNDS)]
        header.update(spent_s=spent(), probe_cv=round(max(resumed.probe_cv, variation(rounds)), 4))
        write_partial(partial, header, done)
        keys = {d["key"] for d in done}
        todo = [e for e in plan if json.dumps(e, sort_keys=True) not in keys]
        log(f"calibrate: {device.id} ({device.name}) on {device.torch_device}: {len(todo)} measurements to go, "
            f"budget {budget_s:.0f} s ({max(0.0, deadline - time.perf_counter()):.0f} s left of it; measuring "
            f"stops {keep_s:.0f} s before the end, for the fit and leave-one-out)")
        steal_before = _steal_ticks()
        measure_from = time.perf_counter()
        # a fifth of the measuring time re-measures outliers
        main_until = measure_from + 0.8 * max(0.0, stop_measuring - measure_from)
        position = 0  # todo[:position] are measured
        longest = 0.0  # the slowest measurement so far: none is started that would end past its phase's end

        def measure_plan(until: float) -> None:
            nonlocal position, longest
            with open(partial, "a") as f:
                while position < len(todo):
                    entry, now = todo[position], time.perf_counter()
                    if now + longest >= until:
                        return
                    _progress(len(done), len(plan), entry, deadline - now)
                    try:
                        result = run_one(entry, device)
                    except (RuntimeError, TypeError, MemoryError) as exc:  # a dtype or kernel the device lacks
                        result = {**entry, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                    longest = max(longest, time.perf_counter() - now)
                    result["key"] = json.dumps(entry, sort_keys=True)
                    # the time so far rides on each record: it survives a kill with no other file to keep
                    result["spent_s"] = spent()
                    result["invocation"] = invocation
                    done.append(result)
                    position += 1
                    f.write(json.dumps(result) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                    synchronize(device.torch_device)

        measure_plan(main_until)
        sys.stderr.write("\n")
        records = [{k: v for k, v in d.items() if k not in BOOKKEEPING} for d in done]
        measured = [d for d in records if "error" not in d]
        _check_enough(plan, measured, records, position < len(todo), budget_s, partial)
        recheck(measured, device, max(0.0, stop_measuring - time.perf_counter()), log)
        # what the recheck left of the measuring time goes on down the plan
        before = len(done)
        measure_plan(stop_measuring)
        records += [{k: v for k, v in d.items() if k not in BOOKKEEPING} for d in done[before:]]
        measured += [d for d in records[len(records) - (len(done) - before):] if "error" not in d]
        skipped = len(todo) - position
        sys.stderr.write("\n")
        rounds += [probe_round(device) for _ in range(PROBE_ROUNDS)]
        cv = max(resumed.probe_cv, variation(rounds))
        header.update(probe_cv=round(cv, 4))
        busy = cv > BUSY_CV
        if busy and not force:
            raise BusyMachineError(
                f"the machine is busy: the probe points' times varied by CV {cv:.0%} between repeats (above "
                f"{BUSY_CV:.0%}), so the measurements are noisy: no profile written (an existing one is kept). "
                f"Remove {partial} and run again on a quiet machine to measure afresh, or add --force to write "
                "these measurements anyway")
        if busy:
            log(f"calibrate: the machine is busy (probe CV {cv:.0%}, above {BUSY_CV:.0%}): writing anyway (--force)")
        steal_after = _steal_ticks()
        ticks = (time.perf_counter() - measure_from) * os.sysconf("SC_CLK_TCK") * (os.cpu_count() or 1)
        steal = (steal_after - steal_before) / ticks if steal_before is not None and steal_after is not None and ticks \
            else None
        profile = {
            "schema": SCHEMA, "device_id": device.id, "device_name": device.name, "kind": device.kind,
            "torch_device": device.torch_device, "properties": device.properties, "versions": versions(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "duration_s": None, "invocations": invocation, "budget_s": budget_s, "planned": len(plan),
            "measured": len(measured), "cpu_steal_fraction": steal,
            "probe_cv": round(cv, 4), "busy_cv": BUSY_CV, "forced": busy,
            "not_measured": skipped, "failed": [d for d in records if "error" in d],
            "collectives": _collectives(device, stop_measuring - time.perf_counter(), log),
            "power": sample_power(device) if stop_measuring - time.perf_counter() > 6.0 else
            "not sampled: budget spent",
            "measurements": measured,
        }
        profile["ceilings"] = ceilings(measured)
        loo_from = time.perf_counter()
        report = leave_one_out(profile, LOO_MAX_POINTS, max(deadline - 1.0, loo_from + min(MIN_LOO_S,
                                                                                             loo_seconds(budget_s))),
                               time.perf_counter)
        profile["leave_one_out"] = report
        duration = spent()
        profile["duration_s"] = round(duration, 1)
        target = folder / "profile.json"
        write_text_atomic(target, json.dumps(json_safe(profile), indent=1) + "\n")
    except BaseException:
        # Ctrl-C, a refusal, too little measured: the time spent so far counts against the budget of the
        # next run (the records written stay; a cut line is dropped by this rewrite)
        if partial.exists():
            header["spent_s"] = spent()
            write_partial(partial, header, done)
        raise
    partial.unlink()
    runs = f" over {invocation} runs" if invocation > 1 else ""
    log(f"calibrate: wrote {target} ({len(measured)} measurements, {duration:.0f} s of the {budget_s:.0f} s budget"
        f"{runs}; probe CV {cv:.1%})")
    for kind, stats in sorted(report["by_kind"].items()):
        log(f"  leave-one-out {kind:<11} n={stats['n']:>3}  median |error| {pct(stats['median_abs_error'])}  "
            f"p90 {pct(stats['p90_abs_error'])}")
    log(f"  leave-one-out all         n={report['n']:>3}  median |error| {pct(report['median_abs_error'])}  "
        f"p90 {pct(report['p90_abs_error'])}  ({report['n']} of {report['eligible']} points judged, "
        f"{report['seconds']:.1f} s)")
    inner = report.get("interior", {})
    if inner.get("n"):
        log(f"  leave-one-out interior    n={inner['n']:>3}  median |error| {pct(inner['median_abs_error'])}  "
            f"p90 {pct(inner['p90_abs_error'])}  (the measured tier's band)")
    return target


def _check_enough(plan: list[dict], measured: list[dict], records: list[dict], cut: bool, budget_s: float,
                  partial: Path) -> None:
    """Raise ConfigError when the run measured too little for a profile: nothing at all, or none of
    the plan's GEMMs or none of its cold copies (a profile without a GEMM rate and a bandwidth
    ceiling cannot be fitted). Nothing is written then: an existing profile stays, and partial.jsonl
    keeps what was measured for the next run. `cut`: the budget stopped the run before the plan's end."""
    needed = {"gemm": "a GEMM rate", "copy": "the cold copy bandwidth"}
    is_needed = lambda m, kind: m["kind"] == kind and (kind != "copy" or not m.get("warm", True))
    lacking = [what for kind, what in needed.items()
               if any(is_needed(e, kind) for e in plan) and not any(is_needed(m, kind) for m in measured)]
    if measured and not lacking:
        return
    what = " and ".join(lacking) or "anything"
    if cut:
        raise ConfigError(f"--budget-s {budget_s:g} s measured {len(measured)} of {len(plan)} points, without {what}: "
                          f"no profile written (an existing one is kept); run again to continue from {partial}, "
                          "with a larger --budget-s")
    failed = next((r["error"] for r in records if "error" in r), "no error recorded")
    raise ConfigError(f"this device measured {len(measured)} of {len(plan)} points, without {what}; the others "
                      f"failed (first: {failed[:120]}): no profile written")


def recheck_profile(path: str | Path, device_spec: str, budget_s: float, log: Callable[[str], None] | None = None) -> int:
    """Re-measure the outliers of an existing profile of the local device within `budget_s`, refit it
    and rewrite it atomically; return how many points were measured again."""
    log = log or (lambda text: print(text, file=sys.stderr))
    budget_s = check_seconds(budget_s, "--budget-s", MAX_BUDGET_S)
    file = Path(path)
    profile = read_profile_json(file)
    device = local_device(device_spec)
    if profile.get("device_id") != device.id:
        raise ConfigError(f"{file} was measured on {profile['device_id']}, not on this device ({device.id})")
    try:
        redone = recheck(profile["measurements"], device, budget_s, log)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise ConfigError(f"{file}: a malformed measurement ({type(exc).__name__}: {str(exc)[:80]})") from None
    profile["rechecked_on"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    write_text_atomic(file, json.dumps(json_safe(profile), indent=1) + "\n")
    refit(file, log)
    return redone


def refit(path: str | Path, log: Callable[[str], None] | None = None) -> dict:
    """Recompute a profile's ceilings and leave-one-out report from its measurements (after the
    efficiency model changes) and rewrite it atomically; return the report."""
    from planner.hardware.fit_report import fit_report

    log = log or (lambda text: print(text, file=sys.stderr))
    file = Path(path)
    profile = read_profile_json(file)
    if profile.get("tier") == "published":
        # converted published data: its band is the held-back report, recomputed the way the import made it
        from planner.calibration.published import held_out, published_json

        try:
            profile["held_out"] = report = held_out(profile)
            text = published_json(profile)  # as the importer writes it: the measurements by columns
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise ConfigError(f"{file}: a malformed profile ({type(exc).__name__}: {str(exc)[:80]})") from None
        write_text_atomic(file, text)
        log(f"refit {file}: held-back median |error| {pct(report['median_abs_error'])}, "
            f"p90 {pct(report['p90_abs_error'])}")
        return report
    try:
        profile["ceilings"] = {**(profile.get("ceilings") or {}), **ceilings(profile["measurements"])}
        report = fit_report(profile)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise ConfigError(f"{file}: a malformed profile ({type(exc).__name__}: {str(exc)[:80]})") from None
    profile["leave_one_out"] = report
    write_text_atomic(file, json.dumps(json_safe(profile), indent=1) + "\n")
    inner = report.get("interior", {})
    log(f"refit {file}: leave-one-out median |error| {pct(report['median_abs_error'])}, "
        f"p90 {pct(report['p90_abs_error'])}; "
        f"interior p90 {pct(inner.get('p90_abs_error', float('nan')))}")
    return report


def ceilings(measured: list[dict]) -> dict:
    """Achieved ceilings: best GEMM FLOP/s per dtype, cold copy bandwidth (read + written), overheads."""
    out: dict = {}
    for m in measured:
        if m["kind"] == "gemm":
            key = f"gemm_{m['dtype']}_flop_per_s"
            out[key] = max(out.get(key, 0.0), m["flop"] / m["time_s"])
        if m["kind"] == "copy" and not m.get("warm", True):
            out["copy_bytes_per_s"] = max(out.get("copy_bytes_per_s", 0.0), m["bytes"] / m["time_s"])
        if m["kind"] == "h2d":
            out["h2d_bytes_per_s"] = max(out.get("h2d_bytes_per_s", 0.0), m["bytes"] / m["time_s"])
        if m["kind"] in ("launch", "view"):
            out[f"{m['kind']}_overhead_s"] = m["time_s"]
    return out
