"""Prices in the catalog: every row dated, the 2026 refresh present, pricing types beyond on-demand and
spot (reserved, savings plan, commitment), and the stale flag against an injected date."""

import csv
import datetime
import shutil

import pytest

from planner.errors import ConfigError
from planner.hardware.catalog import (
    DEFAULT_ROOT,
    PRICINGS,
    STALE_AFTER_MONTHS,
    CatalogError,
    dated,
    is_stale,
    load_catalog,
    run_date,
)


def _rows(name: str) -> list[dict[str, str]]:
    with (DEFAULT_ROOT / name).open(newline="") as f:
        return list(csv.DictReader(f))


def _day(date: str) -> datetime.date:
    return datetime.date.fromisoformat(date if len(date) == 10 else date + "-01")


def _months_before(day: datetime.date, months: int) -> datetime.date:
    year, month = divmod(day.year * 12 + day.month - 1 - months, 12)
    return day.replace(year=year, month=month + 1)  # tests use days <= 28


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_every_price_row_has_a_real_date_and_the_newest_is_from_the_2026_refresh():
    dates = [_day(r["date"]) for r in _rows("instances.csv")]  # raises on a date that does not parse or exist
    assert max(dates) >= datetime.date(2026, 10, 1)
    assert all(datetime.date(2023, 1, 1) <= d for d in dates)
    for r in _rows("onprem_servers.csv"):
        _day(r["date"])


def test_every_row_names_a_known_pricing_source_and_confidence():
    for r in _rows("instances.csv"):
        assert r["pricing"] in PRICINGS and r["source"].strip() and r["confidence"] in ("high", "medium", "low")


def test_reserved_savings_plan_and_commitment_rows_load_as_their_own_pricing(cat):
    kinds = {"reserved_1y", "reserved_3y", "savings_plan_3y", "committed_3y"}
    rows = [r for r in _rows("instances.csv") if r["pricing"] in kinds]
    assert {r["pricing"] for r in rows} == kinds  # AWS RIs and savings plan, Azure reservation, OCI commitment
    for r in rows:
        inst = cat.instance(f"{r['provider']}:{r['instance']}:{r['region']}")
        assert inst.price_usd_per_h[r["pricing"]] == float(r["price_usd_per_h"])
        assert inst.price_dates[r["pricing"]] == r["date"]
        if "on_demand" in inst.price_usd_per_h:  # a commitment costs less than renting by the hour
            assert inst.price_usd_per_h[r["pricing"]] < inst.price_usd_per_h["on_demand"]


def test_the_2026_instances_are_in(cat):
    devices = {i.device_id for i in cat.instances}
    assert {"b200", "h200-sxm", "mi300x", "mi325x", "l40s", "l4"} <= devices
    assert {"coreweave", "crusoe", "nebius", "hyperstack", "oci"} <= {i.provider for i in cat.instances}
    assert {"dgx-b200", "hgx-h200"} <= set(cat.servers)


@pytest.mark.parametrize("today", [datetime.date(2026, 11, 23), datetime.date(2027, 3, 1), datetime.date(2026, 1, 28)])
def test_a_price_13_months_old_is_stale_and_one_11_months_old_is_not(today):
    assert STALE_AFTER_MONTHS == 12
    assert is_stale(_months_before(today, 13).isoformat(), today)
    assert not is_stale(_months_before(today, 11).isoformat(), today)
    # the boundary: exactly 12 months is not yet stale, a day more is
    twelve = _months_before(today, 12)
    assert not is_stale(twelve.isoformat(), today)
    assert is_stale((twelve - datetime.timedelta(days=1)).isoformat(), today)


def test_a_month_alone_counts_from_its_first_day_and_month_ends_clamp():
    today = datetime.date(2026, 11, 23)
    assert is_stale("2025-11", today)  # 2025-11-01 is 12 months and 22 days before
    assert not is_stale("2025-12", today)  # 2025-12-01: 11 months and 22 days
    leap = datetime.date(2028, 2, 29)  # 12 months back: 2027-02-29 does not exist, so 2027-02-28
    assert not is_stale("2027-02-28", leap) and is_stale("2027-02-27", leap)


def test_dated_is_how_a_price_date_is_shown():
    today = datetime.date(2026, 11, 23)
    assert dated("2024-01", today) == "2024-01, stale"
    assert dated("2026-10-10", today) == "2026-10-10"


def test_instance_and_server_stale_use_their_own_dates(cat):
    p5 = cat.instance("aws:p5.48xlarge:us-east-1")
    on_demand, spot = _day(p5.price_dates["on_demand"]), _day(p5.price_dates["spot"])
    assert spot < on_demand  # the spot row is the older one
    today = _months_before(on_demand, -11)  # 11 months after the on-demand price, 13+ after the spot one
    assert (on_demand - spot).days > 60
    assert not p5.stale("on_demand", today)
    assert p5.stale("spot", today) and p5.stale(None, today)
    assert p5.stale("on_demand", _months_before(on_demand, -13))
    dgx = cat.server("dgx-h100")
    assert dgx.stale(_months_before(_day(dgx.date), -13)) and not dgx.stale(_months_before(_day(dgx.date), -11))


def test_planner_today_injects_the_run_date(monkeypatch):
    monkeypatch.setenv("PLANNER_TODAY", "2026-11-23")
    assert run_date() == datetime.date(2026, 11, 23)
    assert is_stale("2025-10-23") and not is_stale("2025-12-23")
    monkeypatch.setenv("PLANNER_TODAY", "0001-06-01")  # 12 months back is before the calendar: nothing is stale
    assert not is_stale("0001-01")
    monkeypatch.delenv("PLANNER_TODAY")
    assert run_date() == datetime.date.today()
    for bad in ("2026-13-01", "20261123", "yesterday", "2026-11-23\nrm -rf /"):
        monkeypatch.setenv("PLANNER_TODAY", bad)
        with pytest.raises(ConfigError, match="PLANNER_TODAY must be a date that exists, YYYY-MM-DD") as info:
            run_date()
        assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------
# Malformed or edited copies of the catalog


@pytest.fixture
def copy(tmp_path):
    root = tmp_path / "hardware_specs"
    shutil.copytree(DEFAULT_ROOT, root)
    return root


def _set(root, match: dict[str, str], column: str, value: str) -> int:
    path = root / "instances.csv"
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    number = next(n for n, r in enumerate(rows, start=2) if all(r[k] == v for k, v in match.items()))
    rows[number - 2][column] = value
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return number


P4D_RI = {"instance": "p4d.24xlarge", "region": "us-east-1", "pricing": "reserved_1y"}


def test_a_reserved_price_above_on_demand_is_refused(copy):
    row = _set(copy, P4D_RI, "price_usd_per_h", "100")
    with pytest.raises(CatalogError, match=f"row {row}, column 'price_usd_per_h'.*a reserved_1y price <= the on_demand"):
        load_catalog(copy)


def test_an_unknown_pricing_names_the_valid_ones(copy):
    row = _set(copy, P4D_RI, "pricing", "capacity_block")
    with pytest.raises(CatalogError, match=f"row {row}, column 'pricing'") as info:
        load_catalog(copy)
    assert "reserved_1y, reserved_3y, savings_plan_1y, savings_plan_3y" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_commitment_row_wins_over_the_providers_discount(copy):
    with (copy / "discounts.csv").open("a", newline="") as f:
        csv.writer(f, lineterminator="\n").writerow(["oci", "committed_3y", "0.1", "36", "2026-01", "test fixture",
                                                    "low", ""])
    h200 = load_catalog(copy).instance("oci:BM.GPU.H200.8:all")
    row = next(r for r in _rows("instances.csv") if r["provider"] == "oci" and r["pricing"] == "committed_3y")
    assert h200.price_usd_per_h["committed_3y"] == float(row["price_usd_per_h"])  # the row, not 0.9 x on-demand
    assert h200.price_dates["committed_3y"] == row["date"]
    h100 = load_catalog(copy).instance("oci:BM.GPU.H100.8:all")  # no row of its own: derived, dated by the older
    assert h100.price_usd_per_h["committed_3y"] == pytest.approx(h100.price_usd_per_h["on_demand"] * 0.9)
    assert h100.price_dates["committed_3y"] == "2026-01"  # discount 2026-01 is older than on-demand 2026-10-10
