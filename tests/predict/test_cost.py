"""Cloud cost at every pricing type: reserved instances, savings plans and commitments price a deployment
like on-demand and spot do, each dated by its own row, and a stale price says so."""

import datetime

import pytest

from planner.errors import ConfigError
from planner.hardware.catalog import PRICINGS, load_catalog
from planner.predict.cost import cheapest_instance, cloud_cost


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_a_reserved_price_costs_out_per_whole_instance(cat):
    p4d = cat.instance("aws:p4d.24xlarge:us-east-1")
    basis = cloud_cost(p4d, 16, "reserved_1y")
    # 16 A100s on 8-GPU p4d.24xlarge: 2 instances x 13.921094 USD/h (1-year no-upfront reserved instance)
    assert basis.units == 2 and basis.usd_per_h == pytest.approx(2 * 13.921094)
    assert basis.what == "2 x aws:p4d.24xlarge:us-east-1 reserved_1y"
    assert basis.price_date == p4d.price_dates["reserved_1y"] == "2026-01-21"  # the RI row's date, not on-demand's


def test_a_savings_plan_and_a_reservation_cost_out(cat):
    p5en = cat.instance("aws:p5en.48xlarge:us-east-1")
    plan = cloud_cost(p5en, 8, "savings_plan_3y")
    assert plan.usd_per_h == pytest.approx(23.8)  # one instance at the 3-year all-upfront effective rate
    assert plan.usd_per_h < cloud_cost(p5en, 8, "on_demand").usd_per_h
    azure = cat.instance("azure:Standard_ND96isr_H200_v5:eastus2")
    # 3-year reservation: 1,109,592 USD / (3 x 8,760 h) = 42.2219 USD/h per instance; 12 GPUs take 2
    assert cloud_cost(azure, 12, "reserved_3y").usd_per_h == pytest.approx(2 * 1_109_592 / 26_280, rel=1e-6)


def test_cheapest_instance_at_a_reserved_price_respects_the_group(cat):
    l40s = cat.device("l40s")
    # 8 L40S: 8 x g6e.xlarge at 1.17243 = 9.379 USD/h beats one g6e.48xlarge at 18.98264
    assert cheapest_instance(cat, l40s, "reserved_1y", devices=8).instance == "g6e.xlarge"
    # a tensor-parallel group of 8 must share an instance: only the 8-GPU size holds it
    assert cheapest_instance(cat, l40s, "reserved_1y", devices=8, group=8).instance == "g6e.48xlarge"
    assert cheapest_instance(cat, cat.device("tpu-v5e"), "savings_plan_3y") is None


def test_a_missing_or_unknown_pricing_is_a_one_line_error_naming_what_exists(cat):
    p5 = cat.instance("aws:p5.48xlarge:us-east-1")
    with pytest.raises(ConfigError, match="has no reserved_1y price in the catalog; it has: on_demand, spot"):
        cloud_cost(p5, 8, "reserved_1y")
    with pytest.raises(ConfigError) as info:
        cloud_cost(p5, 8, "capacity_block")
    assert str(info.value) == f"unknown pricing 'capacity_block'; valid: {', '.join(PRICINGS)}"


def test_cost_basis_stale_follows_the_price_used(cat):
    p5 = cat.instance("aws:p5.48xlarge:us-east-1")  # on demand 2026-10-10, spot 2025-06
    today = datetime.date(2026, 11, 23)
    assert not cloud_cost(p5, 8, "on_demand").stale(today)
    assert cloud_cost(p5, 8, "spot").stale(today)  # 2025-06-01 is 17 months before
    assert not cloud_cost(p5, 8, "spot").stale(datetime.date(2026, 5, 1))  # 11 months after 2025-06-01


def test_a_prediction_priced_on_a_reservation():
    from planner.predict import Request, predict

    p = predict(Request("llama-3.1-8b", "a100-sxm-40gb", batch=8, gpus=8, tp=8, instance="p4d.24xlarge",
                        pricing="reserved_1y"))
    assert p.cost.usd_per_h == pytest.approx(13.921094)  # one 8-GPU p4d.24xlarge, 1-year reserved
    assert p.cost.price_date == "2026-01-21" and "reserved_1y" in p.cost.what
