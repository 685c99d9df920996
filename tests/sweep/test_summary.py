"""planner/sweep/summary.py: measures on one scale, the Pareto front, the best point per device."""

import numpy as np
import pandas as pd

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
    assert read_sweep(str(path))["unit"].tolist() == ["sample"]  # an all-error sweep still reads
