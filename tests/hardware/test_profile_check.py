"""planner/hardware/profile_check.py: the check by columns (KindTable, _sound) clears exactly the kinds whose
every measurement the row-by-row check clears, and a profile read by columns fits the same model as one
read row by row (planner/hardware/profile.py)."""

import copy
import random
from pathlib import Path

import numpy as np
import pytest

from planner.hardware.efficiency import load_defaults
from planner.hardware.profile import PROFILE_ROOT, Profile, ProfileModel, profile_device, read_profile
from planner.hardware.profile_check import _plainly_sound, _sound, kind_tables, rows_by

ROWS = [
    {"kind": "gemm", "dtype": "bf16", "layout": "nt", "m": 64, "n": 128, "k": 256, "time_s": 1e-5, "flop": 4194304,
     "bytes": 114688},
    {"kind": "attention", "dtype": "bf16", "bh": 32, "sq": 512, "sk": 512, "d": 128, "causal": True, "group": 4,
     "time_s": 2e-5, "flop": 2.1e9, "bytes": 1.6e7},
    {"kind": "copy", "bytes": 1048576, "time_s": 1e-6, "flop": 0, "warm": False},
    {"kind": "launch", "bytes": 0, "time_s": 0, "flop": 0},
    {"kind": "gemm", "dtype": "fp8", "m": 8, "n": 8, "k": 8, "time_s": 3e-6, "flop": 1024, "bytes": 192,
     "timing": "kernel", "align_bytes": 8},
]
# values that break one check or another: wrong types, signs, zeros, ranges, unhashables
BAD_VALUES = [None, True, False, "1", -1, 0, 0.0, -0.0, 2**60, 2.5, [1], {"a": 1}, "event", "kernel", "wallclock", 3,
              16, 16.0, 1e308, 10**400]
KEYS = ["time_s", "flop", "bytes", "m", "n", "k", "bh", "sq", "sk", "d", "causal", "dtype", "layout", "warm", "timing",
        "align_bytes", "group", "kind"]


def _mutants(seed: int, n: int):
    rng = random.Random(seed)
    for _ in range(n):
        rows = copy.deepcopy([rng.choice(ROWS) for _ in range(rng.randint(1, 6))])
        for _ in range(rng.randint(0, 2)):
            row = rng.choice(rows)
            key = rng.choice(KEYS)
            if rng.random() < 0.2:
                row.pop(key, None)
            else:
                row[key] = rng.choice(BAD_VALUES)
        yield rows


def test_the_columns_clear_a_kind_exactly_when_every_row_is_plainly_sound():
    # 3,000 random profiles of 1-6 measurements, each with up to two damaged fields: a kind's verdict by
    # columns equals the rows' verdicts all together; a kind that is not a string leaves no tables at all
    seen = {True: 0, False: 0}
    for rows in _mutants(seed=17, n=3000):
        tables = kind_tables(rows)
        if tables is None:
            assert not all(type(m.get("kind")) is str for m in rows)
            continue
        for table in tables.values():
            verdict = _sound(table)
            assert verdict == all(_plainly_sound(m) for m in table.rows), table.rows
            seen[verdict] += 1
    assert seen[True] > 100 and seen[False] > 100  # both verdicts exercised


def test_rows_by_keeps_first_appearance_order_and_ascending_rows():
    groups = rows_by(["b", "a", "b", "c", "a"])
    assert list(groups) == ["b", "a", "c"]
    assert [g.tolist() for g in groups.values()] == [[0, 2], [1, 4], [3]]
    assert rows_by(["x", "x", "x"])["x"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("device", ["a100-sxm-80gb", "mi300x"])
def test_a_profile_read_by_columns_fits_the_model_of_its_rows(device):
    # read_profile keeps the check's columns (Profile.tables); a Profile built from the same rows without
    # them (as fit_report builds one) is read afresh: both fits hold the same points and values
    read = read_profile(PROFILE_ROOT / device / "profile.json")
    assert read.tables is not None
    bare = Profile(read.device_id, read.device_name, read.kind, read.properties, read.ceilings, read.measurements,
                   read.date, read.path, read.raw)
    dev = profile_device(read)
    defaults = load_defaults().kinds["gpu"]
    a, b = ProfileModel(defaults).fit(read, dev), ProfileModel(defaults).fit(bare, dev)
    assert list(a.models_) == list(b.models_)
    for key in a.models_:
        x, y = a.models_[key], b.models_[key]
        if x.dims == 1:
            assert np.array_equal(x.x1, y.x1) and np.array_equal(x.y1, y.y1)
        else:
            assert np.array_equal(x.idw.x, y.idw.x) and np.array_equal(x.idw.y, y.idw.y)


def test_leaving_one_out_drops_exactly_that_measurement():
    # the fit with `exclude` reads the other rows by columns: the left-out GEMM leaves its curve one point short
    read = read_profile(PROFILE_ROOT / "mi300x" / "profile.json")
    dev = profile_device(read)
    defaults = load_defaults().kinds["gpu"]
    first_gemm = next(i for i, m in enumerate(read.measurements) if m["kind"] == "gemm")
    key = f"gemm:{read.measurements[first_gemm]['dtype']}"
    full = ProfileModel(defaults).fit(read, dev)
    loo = ProfileModel(defaults).fit(read, dev, exclude=first_gemm)
    assert len(loo.models_[key].idw.y) == len(full.models_[key].idw.y) - 1


def test_shipped_profiles_are_read_by_columns():
    for path in sorted(Path(PROFILE_ROOT).glob("*/profile.json")):
        assert read_profile(path).tables is not None, path


def test_an_integer_beyond_a_float_is_refused_naming_the_measurement():
    # 10**400 is valid JSON and an int below infinity, but no float holds it: the fit would overflow
    from planner.errors import ConfigError
    from planner.hardware.profile_check import check_profile

    raw = {"schema": 1, "device_id": "x", "device_name": "x", "date": "2026-11-27", "kind": "gpu",
           "ceilings": {"copy_bytes_per_s": 1e12}, "measurements": copy.deepcopy(ROWS)}
    raw["measurements"][2]["bytes"] = 10**400
    with pytest.raises(ConfigError, match=r"measurements\[2\] \(copy\): bytes must be a number"):
        check_profile(raw, "p")
