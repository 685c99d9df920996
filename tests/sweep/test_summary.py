"""planner/sweep/summary.py: measures on one scale, the Pareto front, the best point per device."""

import numpy as np
import pandas as pd
import pytest

from planner.sweep.summary import best_per_device, measures, pareto_front, pareto_mask


def test_pareto_mask_closed_form():
    # (cost, latency, throughput): b is beaten by a (cheaper, faster, more throughput); c trades latency
    # for cost; d ties a on everything (not strictly beaten, kept); e is beaten by c on all three
    cost = np.array([1.0, 2.0, 0.5, 1.0, 0.6])
    latency = np.array([1.0, 2.0, 3.0, 1.0, 4.0])
    throughput = np.array([10.0, 5.0, 8.0, 10.0, 7.0])
    assert pareto_mask(cost, latency, throughput).tolist() == [True, False, True, True, False]


def frame():
    return pd.DataFrame({
        "id": [0, 1, 2, 3, 4],
        "device": ["h100-sxm", "h100-sxm", "l4", "l4", "b200"],
        "fits": [True, True, True, False, None],
        "error": [None, None, None, None, "unknown device"],
        "throughput_tokens_per_s": [1000.0, 2000.0, 100.0, 5000.0, None],
        "latency_s": [1.0, 2.0, 5.0, 0.1, None],
        # $/1M tokens: usd_per_unit = value x 1e-6
        "usd_per_million_output_tokens": [2.0, 1.0, 3.0, 0.1, None],
    })


def test_measures_put_every_row_on_one_scale():
    m = measures(frame())
    assert m["unit"].tolist()[:4] == ["output token"] * 4
    assert m["usd_per_unit"].tolist()[:4] == [2e-6, 1e-6, 3e-6, 0.1e-6]
    assert m["latency_s_"].tolist()[:2] == [1.0, 2.0]


def test_front_leaves_out_errors_and_what_does_not_fit():
    front = pareto_front(measures(frame()))
    # row 3 would beat everything but does not fit; row 2 (l4) is beaten by row 0 on all three
    assert front["id"].tolist() == [1, 0]


def test_best_per_device_is_the_cheapest_usable_row():
    best = best_per_device(measures(frame()))
    assert dict(zip(best["device"], best["id"])) == {"h100-sxm": 1, "l4": 2}


def test_read_sweep_refuses_what_is_not_a_sweep(tmp_path):
    import pytest

    from planner.errors import ConfigError
    from planner.sweep.summary import read_sweep

    with pytest.raises(ConfigError, match="not a Parquet file"):
        read_sweep(b"PAR1 not really")
    with pytest.raises(ConfigError, match="does not exist"):
        read_sweep(str(tmp_path / "none.parquet"))
    path = tmp_path / "other.parquet"
    pd.DataFrame({"id": [0], "x": [1.0]}).to_parquet(path)
    with pytest.raises(ConfigError, match="no column in.model, in.device"):
        read_sweep(str(path))
    pd.DataFrame({"id": [0], "in.model": ["m"], "in.device": ["d"], "error": ["unknown device 'd'"]}).to_parquet(path)
    assert read_sweep(str(path))["unit"].isna().all()  # an all-error sweep still reads; its rows have no unit


def test_each_row_is_priced_in_its_own_unit():
    """A training row of an LLM is counted in tokens (its tokens_per_s), an image model's in samples, a
    failed point in none: 36 $/h at 1,000 tokens/s is 36 / (1,000 x 3,600) = 1e-5 $ per token, not per
    sample; 2 $ per thousand samples is 2e-3 $ per sample; 36 $/h at 0.25 samples/s = 0.04 $ per sample."""
    m = measures(pd.DataFrame({
        "mode": ["training", "inference", "training", None],
        "error": [None, None, None, "unknown model"],
        "tokens_per_s": [1000.0, None, None, None],
        "samples_per_s": [0.25, None, 0.25, None],
        "throughput_samples_per_s": [None, 100.0, None, None],
        "usd_per_thousand_samples": [None, 2.0, None, None],
        "cost_usd_per_h": [36.0, 7.2, 36.0, None],
        "step_time_s": [4.0, None, 4.0, None],
        "latency_s": [None, 0.01, None, None]}))
    assert m["unit"].tolist()[:3] == ["training token", "sample", "sample"] and pd.isna(m["unit"].iloc[3])
    assert m["throughput_per_s"].tolist()[:3] == [1000.0, 100.0, 0.25]
    assert m["usd_per_unit"].tolist()[:3] == pytest.approx([1e-5, 2e-3, 0.04])
    assert m["latency_s_"].tolist()[:3] == [4.0, 0.01, 4.0]


def test_each_model_has_its_own_front_and_best_points():
    """A small model's token is cheaper than a large one's on every device: one front over both would
    hold the small model alone. Each model gets its own: here each model's single best row."""
    rows = pd.DataFrame({
        "id": [0, 1, 2, 3], "in.model": ["small", "small", "large", "large"],
        "device": ["h100-sxm", "l4", "h100-sxm", "l4"], "fits": [True] * 4,
        "throughput_tokens_per_s": [2000.0, 500.0, 400.0, 100.0], "latency_s": [1.0, 3.0, 2.0, 6.0],
        "usd_per_million_output_tokens": [0.5, 0.8, 2.5, 4.0]})
    front = pareto_front(measures(rows))
    assert front["id"].tolist() == [2, 0]  # by model (large before small), each one's dominating row
    best = best_per_device(measures(rows))
    assert sorted(zip(best["in.model"], best["device"], best["id"])) == [
        ("large", "h100-sxm", 2), ("large", "l4", 3), ("small", "h100-sxm", 0), ("small", "l4", 1)]
