"""Prices on the command line: every printed price shows its date and says `stale` when the date is
more than 12 months before the run date (PLANNER_TODAY injects it); reserved prices are a --pricing."""

import datetime
import types

import pytest

from planner.cli import main
from planner.hardware.catalog import load_catalog
from planner.plan.solve import Plan, PlanRow

# RunPod's 8x H200 row was not refreshed in 2026: its date stays the snapshot's
OLD = "runpod:8x H200 SXM (secure):secure-cloud"
PREDICT = ["predict", "llama-3.1-8b", "--device", "h200-sxm", "--gpus", "8", "--tp", "8", "--batch", "1",
           "--output-len", "4", "--instance", OLD]


def _after(date: str, months: int) -> str:
    """The day `months` months after a catalog date (YYYY-MM counts from its first day)."""
    day = datetime.date.fromisoformat(date if len(date) == 10 else date + "-01")
    year, month = divmod(day.year * 12 + day.month - 1 + months, 12)
    return day.replace(year=year, month=month + 1).isoformat()


@pytest.fixture(scope="module")
def old_date():
    return load_catalog().instance(OLD).price_dates["on_demand"]


def test_predict_cost_line_flags_a_price_13_months_old(monkeypatch, capsys, old_date):
    monkeypatch.setenv("PLANNER_TODAY", _after(old_date, 13))
    assert main(PREDICT) == 0
    assert f"on_demand; price of {old_date}, stale)" in capsys.readouterr().out
    monkeypatch.setenv("PLANNER_TODAY", _after(old_date, 11))
    assert main(PREDICT) == 0
    assert f"on_demand; price of {old_date})" in capsys.readouterr().out


def test_a_bad_planner_today_is_one_line_and_status_2(monkeypatch, capsys):
    monkeypatch.setenv("PLANNER_TODAY", "2026-02-30")
    assert main(PREDICT) == 2
    err = capsys.readouterr().err
    assert err.startswith("planner: error: PLANNER_TODAY must be a date that exists, YYYY-MM-DD") and err.count("\n") == 1


def test_predict_priced_on_a_reserved_instance(monkeypatch, capsys):
    monkeypatch.setenv("PLANNER_TODAY", "2026-11-23")
    assert main(["predict", "llama-3.1-8b", "--device", "a100-sxm-40gb", "--gpus", "8", "--tp", "8", "--batch", "1",
                 "--output-len", "4", "--instance", "p4d.24xlarge", "--pricing", "reserved_1y"]) == 0
    # one 8-GPU p4d.24xlarge at its 1-year no-upfront reserved rate of 2026-01-21 (10 months old: not stale)
    assert "cost           $13.92/h  (1 x aws:p4d.24xlarge:us-east-1 reserved_1y; price of 2026-01-21)" in \
        capsys.readouterr().out


def test_compare_flags_stale_prices(monkeypatch, capsys):
    monkeypatch.setenv("PLANNER_TODAY", "2099-01-01")  # every catalog price is then decades old
    assert main(["compare", "llama-3.1-8b", "--devices", "h100-sxm,l4", "--batch", "1", "--output-len", "4"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "(price of " in line]
    assert len(rows) == 2 and all(line.endswith(", stale)") for line in rows)


def _plan_cli(monkeypatch, capsys, plan: Plan) -> str:
    """What `planner plan` prints for `plan` (the scenario load, solve and check stubbed) on 2026-11-23."""
    import planner.plan.check
    import planner.plan.scenario
    import planner.plan.solve

    monkeypatch.setattr(planner.plan.scenario, "load", lambda path: types.SimpleNamespace(horizon_months=12))
    monkeypatch.setattr(planner.plan.solve, "solve", lambda scenario: plan)
    monkeypatch.setattr(planner.plan.check, "check", lambda plan, scenario: [])
    monkeypatch.setenv("PLANNER_TODAY", "2026-11-23")
    assert main(["plan", "any.yaml"]) == 0
    return capsys.readouterr().out


def _breakeven(instance: str, date: str, months: float | None, utilization: float | None) -> dict:
    return {"device": "h100-sxm", "onprem_over_horizon_usd": 1.0, "capex_usd": 1.0, "onprem_opex_usd_per_month": 1.0,
            "cloud_over_horizon_usd": 2.0, "cloud_instance": instance, "cloud_price_date": date,
            "breakeven_months": months, "breakeven_utilization": utilization}


def test_plan_rows_and_break_even_show_dates_and_stale(monkeypatch, capsys):
    row = lambda cand, date: PlanRow(cand, "cloud", "h100-sxm", 1, 8, 1000.0, 0.0, 0.0, 1.0, (("chat/0", 1.0),), (),
                                     date)
    plan = Plan("s", "cost", (row("a:old:r:on_demand", "2025-10-22"), row("a:new:r:on_demand", "2025-12-23")),
                2000.0, 24000.0, 0.0, 0.0, 0.0, 0.0, (), (),
                breakeven=(_breakeven("a:new:r:on_demand", "2025-10", 3.0, 0.5),))
    out = _plan_cli(monkeypatch, capsys, plan)
    assert "(price of 2025-10-22, stale)" in out  # 13 months and a day before 2026-11-23
    assert "(price of 2025-12-23)" in out  # 11 months before
    assert "(a:new:r:on_demand, price of 2025-10, stale)" in out


def test_cli_plan_says_what_a_missing_break_even_means(monkeypatch, capsys):
    plan = Plan("s", "cost", (), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, (), (),
                breakeven=(_breakeven("a:b:c:on_demand", "2026-10", None, None),))
    out = _plan_cli(monkeypatch, capsys, plan)
    assert "buying never pays off within the server's life at this utilization; renting is cheaper at any " \
           "utilization" in out
    assert "%" not in out.split("break-even")[1].split("\n")[0]
