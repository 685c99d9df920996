"""Timing primitives: median of repeats after warm-up, rotation beyond the cache, never-zero inputs."""

import time

import torch

from planner.calibration.bench import local_device, measure, random_tensor, rotation


def test_measure_returns_the_median_after_warmup():
    calls = []

    def fn(i):
        calls.append(i)
        time.sleep(0.002 if i >= 2 else 0.05)  # the two warm-up calls are slow and must not count

    t, samples = measure(fn, "cpu", warmup=2, repeats=7, budget_s=5)
    assert len(samples) == 7 and calls[:2] == [0, 1]
    assert 0.0015 < t < 0.02


def test_rotation_covers_twice_the_cache():
    sets = rotation(lambda: (object(),), bytes_each=1e6, cache_bytes=32e6, device="cpu")
    # 2·32e6 / 1e6 + 1 = 65 sets, capped at 64
    assert len(sets) == 64
    assert len(rotation(lambda: (object(),), 1e9, 32e6, "cpu")) == 1


def test_random_inputs_are_never_zero():
    x = random_tensor((1000,), torch.float32, "cpu")
    assert (x.abs() >= 0.5).all()
    assert (random_tensor((1000,), torch.int32, "cpu") > 0).all()


def test_local_cpu_identity():
    dev = local_device("cpu")
    assert dev.id.startswith("cpu-") and dev.id.endswith(f"{dev.properties['logical_cpus']}c")
    assert dev.kind == "cpu" and dev.torch_device == "cpu"
