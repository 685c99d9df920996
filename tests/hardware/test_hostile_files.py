"""Hostile hardware files (issue 11): a damaged catalog CSV, calibration profile or efficiency defaults file is
one ConfigError line naming the file (and the row, column or key), never a traceback, never a hang, never NaN, and
never loaded silently. The catalog is damaged in a copy under tmp_path and loaded directly and through the CLI
(PLANNER_HARDWARE_SPECS points the CLI at the copy)."""

import csv
import io
import json
import math
import shutil
from pathlib import Path

import pytest

from planner.cli import main
from planner.errors import ConfigError
from planner.hardware.catalog import DEFAULT_ROOT, CatalogError, load_catalog
from planner.hardware.efficiency import DEFAULTS_PATH, DatasheetEfficiency, load_defaults
from planner.hardware.profile import PROFILE_ROOT, load_profiles, profile_device, read_profile
from planner.hardware.profile_select import efficiency_for
from planner.predict.context import default_context
from planner.predict.ops import gemm_record
from planner.predict.roofline import op_time

CSV_FILES = ("devices.csv", "instances.csv", "onprem_servers.csv", "sites.csv", "carbon.csv", "discounts.csv",
             "power_model.csv")
H100 = {"id": "h100-sxm"}
P5 = {"instance": "p5.48xlarge", "region": "us-east-1", "pricing": "on_demand"}
OP = ["op", "gemm", "--m", "64", "--n", "64", "--k", "64", "--device", "h100", "--json"]


def _one_line(message: str) -> bool:
    return "\n" not in message.strip() and "Traceback" not in message


@pytest.fixture
def specs(tmp_path) -> Path:
    """A copy of hardware_specs/ without the calibration profiles (the profile tests add their own)."""
    root = tmp_path / "hardware_specs"
    shutil.copytree(DEFAULT_ROOT, root, ignore=shutil.ignore_patterns("calibration"))
    return root


@pytest.fixture
def cli_specs(specs, monkeypatch):
    """`specs`, with the CLI pointed at it; the cached default context is rebuilt before and after."""
    monkeypatch.setenv("PLANNER_HARDWARE_SPECS", str(specs))
    default_context.cache_clear()
    load_profiles.cache_clear()
    yield specs
    default_context.cache_clear()
    load_profiles.cache_clear()


def _edit(root: Path, file: str, match: dict, column: str, value: str) -> int:
    """Set `column` to `value` in the first row of `file` matching `match`; return its row number (header = 1)."""
    path = root / file
    rows = list(csv.DictReader(io.StringIO(path.read_text(), newline="")))
    number = next(i for i, row in enumerate(rows, start=2) if all(row[k] == v for k, v in match.items()))
    rows[number - 2][column] = value
    out = io.StringIO()
    writer = csv.DictWriter(out, list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue())
    return number


def _cli(capsys, argv) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------ catalog CSV files


@pytest.mark.parametrize("file", CSV_FILES)
def test_a_non_utf8_byte_names_the_file_and_the_offset(specs, file):
    # 0xE9 is "e acute" in Latin-1, a lone continuation-less byte in UTF-8: the file as an editor in cp1252 saves it
    path = specs / file
    data = path.read_bytes()
    offset = data.index(b"\n") + 3  # inside the first data row
    path.write_bytes(data[:offset] + b"\xe9" + data[offset:])
    with pytest.raises(ConfigError) as info:
        load_catalog(specs)
    message = str(info.value)
    assert file in message and "not UTF-8" in message and f"offset {offset}" in message and _one_line(message)


def test_a_utf8_bom_loads_the_same_values_as_without(specs, tmp_path):
    # Excel writes "UTF-8 with BOM": the BOM must not become part of the first column's name ("\ufeffid")
    plain = tmp_path / "plain"
    shutil.copytree(specs, plain)
    for file in CSV_FILES:
        path = specs / file
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_catalog(specs) == load_catalog(plain)


@pytest.mark.parametrize("line, column, cells", [
    ("x,0.1", "date", "not 2"),  # 2 of 6 cells: the first missing column is named
    ("x,0.1,2024-01,src,high,notes,extra", "(cell 7)", "not 7"),  # a 7th cell (an unquoted comma)
])
def test_short_and_long_rows_name_the_file_and_row(specs, line, column, cells):
    path = specs / "carbon.csv"
    rows = path.read_text().splitlines()
    path.write_text("\n".join(rows[:3] + [line] + rows[3:]) + "\n")
    with pytest.raises(CatalogError) as info:
        load_catalog(specs)
    assert (info.value.file, info.value.row, info.value.key) == ("carbon.csv", 4, column)
    message = str(info.value)
    assert message.startswith("carbon.csv, row 4, ") and "6 cells" in message and cells in message
    assert _one_line(message)


BAD_NUMBERS = ("nan", "NaN", "inf", "-inf", "1e400", "-1", "abc", "0x10", "1_000", "3.5e")
"""float() takes nan, inf, 1_000 and overflows 1e400 to inf: each must still be refused; -1 is out of range."""


@pytest.mark.parametrize("file, match, column, value", [
    *[("devices.csv", H100, "mem_bw_gb_per_s", v) for v in BAD_NUMBERS],
    *[("devices.csv", H100, "bf16_tflop_per_s", v) for v in ("nan", "inf", "-989")],  # optional: blank is fine
    *[("instances.csv", P5, "price_usd_per_h", v) for v in ("nan", "inf", "-98.32", "free")],
    ("sites.csv", {"id": "us-texas-colo"}, "pue", "inf"),
    ("sites.csv", {"id": "us-texas-colo"}, "electricity_usd_per_kwh", "-0.066"),
    ("carbon.csv", {"region": "world"}, "kg_co2e_per_kwh", "nan"),
    ("onprem_servers.csv", {"id": "dgx-h100"}, "capex_usd", "-1"),
    *[("power_model.csv", {"key": "idle_fraction_of_tdp"}, "value", v) for v in ("nan", "inf", "-0.1", "x")],
])
def test_a_bad_number_names_file_row_and_column(specs, file, match, column, value):
    row = _edit(specs, file, match, column, value)
    with pytest.raises(CatalogError) as info:
        load_catalog(specs)
    message = str(info.value)
    assert (info.value.file, info.value.row, info.value.key) == (file, row, column)
    assert f"{file}, row {row}, column '{column}'" in message and "valid:" in message and _one_line(message)


@pytest.mark.parametrize("file, match, value", [
    ("devices.csv", H100, "2024-02-30"),  # matches YYYY-MM-DD, but February has no 30th
    ("devices.csv", H100, "2023-02-29"),  # not a leap year
    ("devices.csv", H100, "2024-13"),
    ("devices.csv", H100, "2024-00-01"),
    ("devices.csv", H100, "2024/01/01"),
    ("devices.csv", H100, "yesterday"),
    ("devices.csv", H100, ""),  # every row needs a date
    ("instances.csv", P5, "2025-99"),
    ("sites.csv", {"id": "us-texas-colo"}, "24-07"),
])
def test_a_malformed_date_names_file_row_and_column(specs, file, match, value):
    row = _edit(specs, file, match, "date", value)
    with pytest.raises(CatalogError) as info:
        load_catalog(specs)
    assert (info.value.file, info.value.row, info.value.key) == (file, row, "date")
    assert "YYYY-MM" in str(info.value) or "non-empty" in str(info.value)


@pytest.mark.parametrize("tail, column", [
    ('x\x00,0.1,2024-01,src,high,\n', "region"),  # a NUL in a text cell
    ('x,0.1,2024-01,src,high,"' + "a" * 200_000 + '"\n', "(row)"),  # a cell over the csv module's field limit
])
def test_control_characters_and_huge_cells_are_clean_errors(specs, tail, column):
    path = specs / "carbon.csv"
    rows = path.read_text().count("\n")
    path.write_text(path.read_text() + tail)
    with pytest.raises(CatalogError) as info:
        load_catalog(specs)
    assert (info.value.file, info.value.row, info.value.key) == ("carbon.csv", rows + 1, column)
    assert len(str(info.value)) < 400 and _one_line(str(info.value))


@pytest.mark.parametrize("content", ["", "\n\n", None])
def test_an_empty_header_only_or_missing_devices_file_is_an_error(specs, content):
    # devices.csv needs at least one row (a header alone: "no data row"); None deletes the file
    path = specs / "devices.csv"
    if content is None:
        path.unlink()
    else:
        path.write_text(content or path.read_text().splitlines()[0] + "\n")
    with pytest.raises(CatalogError, match=r"devices\.csv, row [12]"):
        load_catalog(specs)


def test_cli_with_an_undamaged_copy_and_a_bom_prints_the_shipped_numbers(cli_specs, capsys, monkeypatch):
    for file in CSV_FILES:
        path = cli_specs / file
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    rc, copied, err = _cli(capsys, OP)
    assert rc == 0, err
    monkeypatch.delenv("PLANNER_HARDWARE_SPECS")
    default_context.cache_clear()
    rc, shipped, err = _cli(capsys, OP)
    assert rc == 0 and json.loads(copied) == json.loads(shipped)


def _non_utf8(root: Path) -> str:
    path = root / "sites.csv"
    path.write_bytes(path.read_bytes().replace(b"Virginia", b"Virgin\xeda", 1))
    return "sites.csv"


def _short_row(root: Path) -> str:
    with (root / "discounts.csv").open("a") as f:
        f.write("aws,committed_1y\n")
    return "discounts.csv, row"


def _nan_price(root: Path) -> str:
    row = _edit(root, "instances.csv", P5, "price_usd_per_h", "nan")
    return f"instances.csv, row {row}, column 'price_usd_per_h'"


def _not_a_folder(root: Path) -> str:
    shutil.rmtree(root)
    root.write_text("not a folder")
    return "is not a folder"


@pytest.mark.parametrize("damage", [_non_utf8, _short_row, _nan_price, _not_a_folder])
def test_cli_on_a_damaged_catalog_exits_2_with_one_line(cli_specs, capsys, damage):
    expected = damage(cli_specs)
    rc, out, err = _cli(capsys, OP)
    assert rc == 2 and out == ""
    assert err.startswith("planner: error:") and expected in err and err.count("\n") == 1 and "Traceback" not in err


# ------------------------------------------------------------------ calibration profiles

# the committed profile `planner calibrate` measured (the published ones have no launch measurement)
COMMITTED = next(p for p in sorted(PROFILE_ROOT.glob("*/profile.json")) if '"tier":"published"' not in p.read_text()[:200])
RAW = json.loads(COMMITTED.read_text())
GEMM = next(i for i, m in enumerate(RAW["measurements"]) if m["kind"] == "gemm")
LAUNCH = next(i for i, m in enumerate(RAW["measurements"]) if m["kind"] == "launch")


def _small(raw: dict) -> dict:
    """The committed profile cut to its first 120 measurements (every kind the fit needs; fits in well under 1 s)."""
    return {**raw, "measurements": raw["measurements"][:120]}


def _with(index: int, key: str, value) -> str:
    raw = json.loads(json.dumps(RAW))
    raw["measurements"][index][key] = value
    return json.dumps(raw)  # NaN and Infinity are written as the bare words Python's json writes


@pytest.mark.parametrize("text, expected", [
    (_with(GEMM, "time_s", 0), f"measurements[{GEMM}] (gemm): time_s must be > 0, got 0"),  # would divide by 0
    (_with(GEMM, "time_s", -1e-3), "time_s must be > 0"),
    (_with(LAUNCH, "time_s", -1e-6), f"measurements[{LAUNCH}] (launch): time_s must be >= 0"),
    (_with(GEMM, "time_s", float("nan")), f"measurements[{GEMM}].time_s must be a finite number"),
    (_with(GEMM, "time_s", float("inf")), "must be a finite number"),
    # 1e400 is valid JSON that parses to infinity
    (_with(GEMM, "time_s", 1234.5).replace('"time_s": 1234.5,', '"time_s": 1e400,'), "must be a finite number"),
    # an overflow in a field no check reads is still located (parse refuses it; the walk then names it)
    (_with(GEMM, "spread", 1234.5).replace('"spread": 1234.5', '"spread": -1e400'),
     f"measurements[{GEMM}].spread must be a finite number"),
    (_with(GEMM, "time_s", "0.001"), "time_s must be a number, got '0.001'"),
    (_with(GEMM, "flop", float("nan")), "flop must be a finite number"),
    (_with(GEMM, "m", 0), "m must be a whole number"),
    (json.dumps({**RAW, "schema": 2}), "unknown schema 2; this planner reads schema 1"),
    (json.dumps({k: v for k, v in RAW.items() if k != "schema"}), "unknown schema None"),
    (json.dumps({**RAW, "schema": "1"}), "unknown schema '1'"),
    (json.dumps({**RAW, "schema": True}), "unknown schema True"),  # True == 1 in Python: still refused
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 64"),  # json.loads would raise RecursionError
    (json.dumps(RAW).replace('"measurements": [', '"measurements": [' + "[" * 5000 + "]" * 5000 + ", ", 1),
     "nested deeper than 64"),
    ("schema: 1\nmeasurements: []\n", "not valid JSON"),  # YAML, not JSON
    ("", "not valid JSON"),
    (json.dumps(RAW)[:5000], "not valid JSON"),  # cut short
    ("[]", "a JSON object expected, got list"),
    (json.dumps({**RAW, "measurements": {}}), "'measurements' must be a list"),
    (json.dumps({**RAW, "ceilings": {**RAW["ceilings"], "copy_bytes_per_s": 0}}), "copy_bytes_per_s must be > 0"),
    # the dispatch block and library of a pytorch-eager profile (issue 20)
    (json.dumps({**RAW, "dispatch": {"host_per_op_s": "fast"}}), "dispatch.host_per_op_s must be a number"),
    (json.dumps({**RAW, "dispatch": {"host_per_op_s": -1e-6}}), "dispatch.host_per_op_s must be >= 0"),
    (json.dumps({**RAW, "dispatch": {"host_per_op_s": 2.0}}), "a host or launch cost is under 0.01 s"),
    (json.dumps({**RAW, "dispatch": {"view_host_s": 1e-6}}), "dispatch needs host_per_op_s"),
    (json.dumps({**RAW, "library": "../../etc"}), "must be a short lower-case name"),
    (_with(GEMM, "timing", "wallclock"), f"measurements[{GEMM}].timing 'wallclock' is not event or kernel"),
    (_with(GEMM, "align_bytes", 3), f"measurements[{GEMM}].align_bytes 3 is not 2, 4, 8 or 16"),
])
def test_a_bad_profile_is_one_line_naming_file_and_measurement(tmp_path, text, expected):
    path = tmp_path / "calibration" / "cpu-x" / "profile.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    for load in (lambda: read_profile(path), lambda: load_profiles(str(tmp_path / "calibration"))["cpu-x"]):
        with pytest.raises(ConfigError) as info:  # never ZeroDivisionError, RecursionError, ValueError, KeyError
            load()
        message = str(info.value)
        assert str(path) in message and expected in message and _one_line(message) and len(message) < 400


def test_a_non_utf8_profile_names_the_byte(tmp_path):
    path = tmp_path / "profile.json"
    path.write_bytes(json.dumps(_small(RAW)).encode().replace(b'"device_name": "', b'"device_name": "\xff', 1))
    with pytest.raises(ConfigError, match=r"is not UTF-8 text: byte 0xff at offset \d+"):
        read_profile(path)


def test_a_bad_profile_is_refused_where_it_is_used_not_skipped(tmp_path):
    # profiles are read when first used (a command needs one or two of them): a bad one is refused then,
    # by its own device or as the neighbour a transfer would be fitted on, never silently skipped
    good, bad = tmp_path / "cpu-good" / "profile.json", tmp_path / "cpu-bad" / "profile.json"
    for path in (good, bad):
        path.parent.mkdir()
    good.write_text(json.dumps(_small(RAW)))
    bad.write_text(json.dumps({**_small(RAW), "schema": 99}))
    index = load_profiles(str(tmp_path))
    assert sorted(index) == ["cpu-bad", "cpu-good"] and index["cpu-good"].device_id == RAW["device_id"]
    with pytest.raises(ConfigError, match="cpu-bad"):
        index["cpu-bad"]


def test_a_launch_time_of_zero_loads_and_predicts_finite_times(tmp_path):
    # launch and view costs below the timer's resolution are recorded as 0: allowed, and nothing divides by them
    raw = _small(RAW)
    raw["measurements"][LAUNCH]["time_s"] = 0
    raw["ceilings"]["launch_overhead_s"] = 0
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(raw))
    profile = read_profile(path)
    device = profile_device(profile)
    defaults = load_defaults()
    eff = efficiency_for(device, defaults, {profile.device_id: profile}, DatasheetEfficiency(defaults))
    assert eff.tier == "measured"
    for size in (16, 512, 4096):
        rec, category, cost = gemm_record(size, size, size, "fp32")
        time_s = op_time(rec, category, cost, "fp32", device, eff).time_s
        assert math.isfinite(time_s) and time_s > 0


def test_cli_refuses_a_damaged_profile_of_the_predicted_device(cli_specs, capsys):
    # the profile the prediction needs (the H100's own) is damaged: refused in one line, exit 2
    path = cli_specs / "calibration" / "h100-sxm" / "profile.json"
    path.parent.mkdir(parents=True)
    path.write_text(_with(GEMM, "time_s", 0))
    rc, out, err = _cli(capsys, OP)
    assert rc == 2 and "h100-sxm/profile.json" in err and "time_s must be > 0" in err and err.count("\n") == 1


# ------------------------------------------------------------------ efficiency defaults


def _defaults(edit) -> str:
    raw = json.loads(DEFAULTS_PATH.read_text())
    edit(raw)
    return json.dumps(raw)


@pytest.mark.parametrize("text, expected", [
    ("{nope", "not valid JSON"),
    ('{"kinds": ' * 100 + "{}" + "}" * 100, "nested deeper than 64"),
    (_defaults(lambda r: r["kinds"]["gpu"].update(memory_efficiency=float("nan"))), "not valid JSON"),  # NaN refused
    (_defaults(lambda r: r["kinds"]["gpu"].update(memory_efficiency=0)), "kinds.gpu.memory_efficiency must be"),
    (_defaults(lambda r: r["kinds"]["gpu"].update(memory_efficiency=-0.5)), "in (0, 1]"),
    (_defaults(lambda r: r["kinds"]["gpu"].update(matmul_max_efficiency=1.5)), "matmul_max_efficiency"),
    (_defaults(lambda r: r["kinds"]["gpu"].update(matmul_max_efficiency="0.78")), "must be a number, got '0.78'"),
    (_defaults(lambda r: r["kinds"]["gpu"].update(tile_m=0.5)), "tile_m must be a whole number"),
    (_defaults(lambda r: r["kinds"]["gpu"].pop("k_half")), "'kinds.gpu.k_half' is missing"),
    (_defaults(lambda r: r["kinds"].pop("gpu")), "kinds lacks 'gpu'"),
    (_defaults(lambda r: r["uncertainty"].update(datasheet_band_fraction=1)), "datasheet_band_fraction"),
    (_defaults(lambda r: r.update(memory=[])), "'memory' must be a JSON object"),
    ("[]", "a JSON object expected"),
])
def test_bad_efficiency_defaults_name_the_key(tmp_path, text, expected):
    path = tmp_path / "defaults.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_defaults(str(path))
    message = str(info.value)
    assert str(path) in message and expected in message and _one_line(message)


def test_efficiency_defaults_with_a_bom_load_the_same_values(tmp_path):
    path = tmp_path / "defaults.json"
    path.write_bytes(b"\xef\xbb\xbf" + DEFAULTS_PATH.read_bytes())
    assert load_defaults(str(path)) == load_defaults()


def test_cli_reads_the_efficiency_defaults_of_the_pointed_catalog(cli_specs, capsys):
    (cli_specs / "efficiency" / "defaults.json").write_text("{nope")
    rc, out, err = _cli(capsys, OP)
    assert rc == 2 and "defaults.json" in err
