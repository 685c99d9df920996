"""planner/hardware/profile_check.py and profile_table.py: the check by columns (KindTable, _sound) clears exactly
the kinds whose every measurement the row-by-row check clears, in both layouts of a profile file (rows, columns);
a profile of columns is refused with the message its rows would get; a profile read by columns fits the same
model as one read row by row (planner/hardware/profile.py)."""

import copy
import random
from pathlib import Path

import numpy as np
import pytest

from planner.errors import ConfigError
from planner.hardware.efficiency import load_defaults
from planner.hardware.profile import PROFILE_ROOT, Profile, ProfileModel, profile_device, read_profile
from planner.hardware.profile_check import _plainly_sound, _sound, check_profile
from planner.hardware.profile_table import ColumnRows, kind_tables, measurement_rows, rows_by, rows_by_pair, to_columns

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


def test_rows_by_pair_groups_as_rows_by_of_the_pairs():
    """rows_by_pair(a, b) == rows_by(zip(a, b)): the same groups, in the same order, the same rows; values
    equal as dict keys group together (8 and 8.0), on random lists and edge cases."""
    import random

    rng = random.Random(7)
    cases = [([], []), (["g"], ["bf16"]), (["g"] * 5, ["bf16"] * 5), (["g"] * 4, ["bf16", "fp8", "bf16", "fp8"]),
             ([8, 8.0, 16, 8], ["x", "x", "y", "x"])]
    for _ in range(200):
        n = rng.randint(1, 40)
        cases.append(([rng.choice("abc") for _ in range(n)], [rng.choice([None, "bf16", "fp8", 1]) for _ in range(n)]))
    for a, b in cases:
        got, want = rows_by_pair(a, b), rows_by(list(zip(a, b)))
        assert list(got) == list(want)
        assert all(got[k].tolist() == want[k].tolist() for k in want)


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
    raw = {"schema": 1, "device_id": "x", "device_name": "x", "date": "2026-11-27", "kind": "gpu",
           "ceilings": {"copy_bytes_per_s": 1e12}, "measurements": copy.deepcopy(ROWS)}
    raw["measurements"][2]["bytes"] = 10**400
    with pytest.raises(ConfigError, match=r"measurements\[2\] \(copy\): bytes must be a number"):
        check_profile(raw, "p")


def _raw(measurements) -> dict:
    return {"schema": 1, "device_id": "x", "device_name": "x", "date": "2026-11-27", "kind": "gpu",
            "ceilings": {"copy_bytes_per_s": 1e12}, "measurements": measurements}


def _verdict(raw) -> str:
    try:
        check_profile(raw, "p")
    except ConfigError as exc:
        return str(exc)
    return "sound"


def test_a_profile_of_columns_gets_the_verdict_and_message_of_its_rows():
    # the same damaged measurements in both layouts: the same ConfigError (naming the same measurement) or
    # both sound; and the columns read back as the rows. A null has no place in the columns layout (it reads
    # as an absent key), so mutants holding one are left out, and so are those where no measurement has a kind
    # (the columns layout needs a 'kind' column: test_malformed_columns_are_one_line_errors).
    compared = 0
    for rows in _mutants(seed=29, n=1500):
        if any(value is None for m in rows for value in m.values()) or not any("kind" in m for m in rows):
            continue
        columns = to_columns(rows)
        assert list(ColumnRows(columns)) == rows
        assert _verdict(_raw(columns)) == _verdict(_raw(rows)), rows
        compared += 1
    assert compared > 500


def test_column_tables_match_row_tables():
    rows = [dict(m) for m in ROWS] * 3
    by_rows, by_columns = kind_tables(rows), kind_tables(to_columns(rows))
    assert list(by_rows) == list(by_columns)
    for kind in by_rows:
        a, b = by_rows[kind], by_columns[kind]
        assert a.index.tolist() == b.index.tolist() and a.rows == b.rows
        for key in ("time_s", "dtype", "m", "timing", "group"):
            assert a.column(key, "default") == b.column(key, "default")


@pytest.mark.parametrize("columns, message", [
    ({"time_s": [1.0]}, "'measurements' must be a list, or an object of columns with a 'kind' column"),
    ({"kind": ["copy", "copy"], "bytes": [1, 2], "time_s": [1e-6], "flop": [0, 0]},
     r"measurements.time_s must be a list of 2 values"),
    ({"kind": "copy"}, "'kind' column"),
])
def test_malformed_columns_are_one_line_errors(columns, message):
    with pytest.raises(ConfigError, match=message):
        check_profile(_raw(columns), "p")


def test_shipped_published_profiles_hold_columns_and_measured_ones_rows():
    import json
    for path in sorted(Path(PROFILE_ROOT).glob("*/*.json")):
        raw = json.loads(path.read_text())
        if "measurements" not in raw:
            continue
        layout = dict if raw.get("tier") == "published" else list
        assert isinstance(raw["measurements"], layout), path
        assert len(measurement_rows(raw["measurements"])) > 100


def test_a_group_that_is_not_a_whole_number_is_refused():
    # attention's query heads per KV head is a feature (log2): a string or 0 would crash the fit
    for bad in ("x", 0, 2.5, True):
        rows = copy.deepcopy(ROWS)
        rows[1]["group"] = bad
        with pytest.raises(ConfigError, match=r"measurements\[1\] \(attention\): group must be a whole number"):
            check_profile(_raw(rows), "p")


def test_a_batch_norm_plane_side_that_is_not_a_whole_number_is_refused():
    # a batch norm timed at activation shapes is featured by log2(hw^2): a string would crash the fit
    rows = copy.deepcopy(ROWS) + [{"kind": "batch_norm", "bytes": 4096, "time_s": 1e-6, "flop": 0, "hw": "layer_norm"}]
    with pytest.raises(ConfigError, match=r"measurements\[5\] \(batch_norm\): hw must be a whole number"):
        check_profile(_raw(rows), "p")


def test_an_alignment_of_8_0_names_another_curve_than_8_as_row_by_row():
    # _features names a GEMM of align_bytes 8.0 "@8.0" and one of 8 "@8": the fit by columns keeps both
    from planner.hardware.catalog import load_catalog
    from planner.hardware.profile import _features

    rows = []
    for i, align in enumerate([8, 8.0] * 4):
        rows.append({"kind": "gemm", "dtype": "bf16", "m": 64 * (i + 1), "n": 128, "k": 256, "time_s": 1e-5 * (i + 1),
                     "flop": 2 * 64 * (i + 1) * 128 * 256, "bytes": 1e5, "align_bytes": align})
    profile = Profile("h100-sxm", "x", "gpu", {}, {"copy_bytes_per_s": 3e12}, tuple(rows), "2026-11-27", "(test)",
                      _raw(rows))
    model = ProfileModel(load_defaults().kinds["gpu"]).fit(profile, load_catalog().device("h100-sxm"))
    assert {_features(m)[0] for m in rows} == {"gemm:bf16@8", "gemm:bf16@8.0"}
    assert {k for k in model.models_} == {"gemm:bf16@8", "gemm:bf16@8.0"}
    assert len(model.models_["gemm:bf16@8"].idw.y) == len(model.models_["gemm:bf16@8.0"].idw.y) == 4
