"""Timing on the local device, done right, and what the local device is.

Timing: warm-up runs first (allocation, kernel selection and caches settle), then repeats until a
time budget or a repeat count, each timed with device synchronization (CUDA events on GPUs,
perf_counter after synchronize), and the median taken. Inputs are random (never zeros: zeros can
run faster than real data) and, for memory-bound kernels, several input sets are rotated so that
the working set exceeds the last-level cache when the caller asks for it.
"""

from __future__ import annotations

import math
import os
import platform
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class LocalDevice:
    """The device a benchmark runs on."""

    id: str
    """Profile id: the catalog id for a known GPU, else a slug ("cpu-amd-epyc-25-17-2c")."""
    torch_device: str
    """"cpu" or "cuda:i"."""
    kind: str
    """"cpu" or "gpu"."""
    name: str
    """As the system reports it."""
    properties: dict
    """Cores, caches, memory, SM count, clock... whatever the system says."""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _cpu_info() -> dict:
    info: dict = {"logical_cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                  "machine": platform.machine()}
    try:
        text = open("/proc/cpuinfo").read()
        for key, field in (("model name", "model_name"), ("vendor_id", "vendor"), ("cpu family", "family"),
                           ("model", "model"), ("flags", "flags"), ("cache size", "cache_size")):
            m = re.search(rf"^{key}\s*:\s*(.*)$", text, re.MULTILINE)
            if m:
                info[field] = m.group(1).strip()
        flags = set(info.pop("flags", "").split())
        info["isa"] = sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "sse4")))
    except OSError:
        pass
    try:
        mem = open("/proc/meminfo").read()
        m = re.search(r"MemTotal:\s+(\d+) kB", mem)
        if m:
            info["memory_bytes"] = int(m.group(1)) * 1024
    except OSError:
        pass
    return info


def local_device(spec: str = "auto") -> LocalDevice:
    """Resolve "auto", "cpu", "cuda" or "cuda:i" to the local device; raise if it is not there."""
    from planner.errors import ConfigError

    if not isinstance(spec, str):
        raise ConfigError(f"--device must be auto, cpu, cuda or cuda:N, got {spec!r:.60}")
    spec = spec.strip().lower()
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    cuda = re.fullmatch(r"cuda(?::(\d{1,6}))?", spec)
    if cuda:
        if not torch.cuda.is_available():
            raise ConfigError("no CUDA device is visible (torch.cuda.is_available() is False); use --device cpu")
        index = int(cuda.group(1) or 0)
        if index >= torch.cuda.device_count():
            raise ConfigError(f"cuda:{index} does not exist; {torch.cuda.device_count()} CUDA device(s) visible")
        props = torch.cuda.get_device_properties(index)
        name = props.name
        properties = {"sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
                      "capability": f"{props.major}.{props.minor}", "cuda": torch.version.cuda,
                      "device_count": torch.cuda.device_count()}
        for attr in ("L2_cache_size", "clock_rate", "memory_clock_rate", "memory_bus_width"):
            if hasattr(props, attr):
                properties[attr] = getattr(props, attr)
        try:
            import pynvml  # noqa: F401 (only to report the driver)
            pynvml.nvmlInit()
            properties["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception:  # NVML is optional; the driver is then unknown
            pass
        return LocalDevice(catalog_id_for(name) or _slug(name), f"cuda:{index}", "gpu", name, properties)
    if spec != "cpu":
        # a hostile spec may be megabytes long: echo only its start
        shown = spec if len(spec) <= 40 else spec[:37] + "..."
        raise ConfigError(f"unknown device '{shown}'; valid: auto, cpu, cuda, cuda:N")
    from planner.hardware.cpu import cpu_profile_id

    info = _cpu_info()
    ident = cpu_profile_id(info.get("vendor", ""), info.get("model_name", ""), info.get("family", ""),
                           info.get("model", ""), os.cpu_count())
    return LocalDevice(ident, "cpu", "cpu", info.get("model_name", "CPU"), info)


def catalog_id_for(name: str) -> str | None:
    """The catalog id of a GPU named `name` by the driver ("NVIDIA H200" -> "h200-sxm"), if any."""
    from planner.errors import PlannerError
    from planner.hardware.catalog import load_catalog

    catalog = load_catalog()
    candidates = [name, name.removeprefix("NVIDIA ").strip(), name.replace("NVIDIA ", "")]
    for candidate in candidates:
        try:
            return catalog.device(candidate).id
        except PlannerError:
            continue
    return None


def check_seconds(value: object, flag: str, max_s: float) -> float:
    """`value` as seconds when it is a finite number above 0 and at most `max_s`; a ConfigError naming
    `flag` and the valid range otherwise. (A NaN budget never runs out: every comparison with it is
    false, so a loop bounded by it would run the whole plan and write NaN into the profile.)"""
    from planner.errors import ConfigError
    from planner.files import finite

    try:
        seconds = finite(value, flag)
    except ConfigError:
        seconds = math.nan
    if not 0 < seconds <= max_s:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise ConfigError(f"{flag} must be a finite number of seconds above 0 and at most {max_s:g}, got {shown}")
    return seconds


def synchronize(device: str) -> None:
    """Wait for queued work on `device` to finish."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def measure(fn: Callable[[int], object], device: str, warmup: int = 3, repeats: int = 25,
            budget_s: float = 1.0, min_repeats: int = 5) -> tuple[float, list[float]]:
    """Median seconds of fn(i) (i counts calls, for rotating inputs), and every sample.

    Runs `warmup` untimed calls, then timed calls until `repeats` or until `budget_s` is spent
    (at least `min_repeats`). GPU calls are timed with CUDA events.
    """
    for i in range(warmup):
        fn(i)
    synchronize(device)
    samples: list[float] = []
    start_all = time.perf_counter()
    i = warmup
    while len(samples) < repeats and (len(samples) < min_repeats or time.perf_counter() - start_all < budget_s):
        if device.startswith("cuda"):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn(i)
            end.record()
            end.synchronize()
            samples.append(begin.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn(i)
            samples.append(time.perf_counter() - t0)
        i += 1
    return statistics.median(samples), samples


def rotation(make: Callable[[], tuple], bytes_each: float, cache_bytes: float, device: str) -> list[tuple]:
    """Input sets to rotate so that consecutive calls do not find their inputs in cache.

    Makes enough sets to cover twice the last-level cache when one set is smaller than that
    (at most 64 sets), else a single set.
    """
    count = 1 if bytes_each >= 2 * cache_bytes else min(64, int(2 * cache_bytes // max(bytes_each, 1)) + 1)
    return [make() for _ in range(count)]


def random_tensor(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    """Random, never-zero data of `dtype` (floats in [0.5, 1.5) with random signs; integers in [1, 8))."""
    if dtype.is_floating_point or dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        base = torch.rand(shape, device=device, dtype=torch.float32) + 0.5
        sign = torch.randint(0, 2, shape, device=device, dtype=torch.float32) * 2 - 1
        return (base * sign).to(dtype)
    return torch.randint(1, 8, shape, device=device, dtype=dtype)


def versions() -> dict:
    """Library and runtime versions for a profile's metadata."""
    import numpy
    import scipy

    out = {"torch": torch.__version__, "numpy": numpy.__version__, "scipy": scipy.__version__,
           "python": platform.python_version(), "platform": platform.platform()}
    if torch.cuda.is_available():
        out["cuda_runtime"] = torch.version.cuda
        out["cudnn"] = torch.backends.cudnn.version()
    out["mkldnn"] = torch.backends.mkldnn.is_available()
    return out
