"""planner.plan.tco: renting against owning one server, the break-even closed form (module docstring)."""


import pytest

from planner.errors import ConfigError
from planner.hardware.catalog import load_catalog
from planner.plan.tco import breakeven_month, breakeven_utilization, compare_tco, explain_breakeven

H = 730.5  # hours per month


def test_breakeven_utilization_closed_form():
    # C = 360,000 over L = 36 months: 10,000/month; F = 2,000; P = 1,000; R = 16,000
    # u* = (10,000 + 2,000) / (16,000 - 1,000) = 12,000 / 15,000 = 0.8
    assert breakeven_utilization(360_000, 36, 2_000, 1_000, 16_000) == pytest.approx(0.8)
    # renting at full time for 12,000/month: u* = 12,000 / 11,000 > 1, renting is cheaper at every u
    assert breakeven_utilization(360_000, 36, 2_000, 1_000, 12_000) is None
    # R <= P: the power alone costs as much as renting
    assert breakeven_utilization(360_000, 36, 2_000, 1_000, 1_000) is None
    # exactly at full use: u* = 12,000 / (13,000 - 1,000) = 1, still a break-even
    assert breakeven_utilization(360_000, 36, 2_000, 1_000, 13_000) == pytest.approx(1.0)


def test_breakeven_month_closed_form():
    # m* = C / (R u - F - P u): at u = 1, 360,000 / (16,000 - 2,000 - 1,000) = 360,000 / 13,000 = 27.69
    assert breakeven_month(360_000, 36, 2_000, 1_000, 16_000, 1.0) == pytest.approx(360_000 / 13_000)
    # at u = u* = 0.8: 360,000 / (15,000 x 0.8 - 2,000) = 360,000 / 10,000 = 36 = L, the last month of its life
    assert breakeven_month(360_000, 36, 2_000, 1_000, 16_000, 0.8) == pytest.approx(36)
    # at u = 0.79: 360,000 / (11,850 - 2,000) = 36.5 > L: never within the server's life
    assert breakeven_month(360_000, 36, 2_000, 1_000, 16_000, 0.79) is None
    # renting cheaper every month (R u <= F + P u): never
    assert breakeven_month(360_000, 36, 2_000, 1_000, 2_500, 1.0) is None


@pytest.mark.parametrize("rent", [2_500, 12_000, 13_000, 16_000, 40_000])
def test_month_within_life_exactly_when_utilization_is_above_the_break_even(rent):
    u_star = breakeven_utilization(360_000, 36, 2_000, 1_000, rent)
    for u in (0.05, 0.2, 0.5, 0.79, 0.81, 0.95, 1.0):
        within = breakeven_month(360_000, 36, 2_000, 1_000, rent, u) is not None
        assert within == (u_star is not None and u >= u_star), (rent, u)


def test_compare_tco_closed_form_on_the_catalog():
    cat = load_catalog()
    server, site = cat.server("dgx-h100"), cat.site("us-virginia-colo")
    t = compare_tco("h100-sxm", site.id, months=36, utilization=0.9, price_usd_per_device_h=2.69, server=server.id)
    kw = server.power_w / 1000  # 10.2 kW rated
    fixed = kw * site.colocation_usd_per_kw_month  # 10.2 x 184.06 = 1,877.41 (no sourced ops figure)
    power = kw * site.pue * site.electricity_usd_per_kwh * H  # 10.2 x 1.42 x 0.0892 x 730.5 = 943.79
    rent = 2.69 * server.device_count * H  # 2.69 x 8 x 730.5 = 15,720.36
    life = site.lifetime_years * 12  # 36
    assert t.cloud_usd_per_h == pytest.approx(2.69 * 8) and t.devices == 8 and t.lifetime_months == life
    assert t.onprem_fixed_usd_per_month == pytest.approx(fixed)
    assert t.onprem_power_usd_per_month == pytest.approx(power)
    # held idle the server draws 8 x 122.7 W (H100 idle) + (10,200 - 8 x 700) W (the rest of the DGX) = 5,581.6 W
    idle = 5.5816 * site.pue * site.electricity_usd_per_kwh * H  # 5.5816 x 1.42 x 0.0892 x 730.5 = 516.45
    assert t.onprem_idle_power_usd_per_month == pytest.approx(idle)
    # F + I + (P - I) u = 1,877.41 + 516.45 + 427.33 x 0.9 = 2,778.46
    assert t.onprem_opex_usd_per_month == pytest.approx(fixed + idle + 0.9 * (power - idle))
    assert t.onprem_usd_per_month_full_use == pytest.approx(server.capex_usd / life + fixed + power)
    assert t.cloud_usd_per_month_full_use == pytest.approx(rent)
    # u* = (270,000 / 36 + 1,877.41 + 516.45) / (15,720.36 - 943.79 + 516.45) = 9,893.86 / 15,293.02 = 0.6470
    assert t.breakeven_utilization == pytest.approx((server.capex_usd / life + fixed + idle) / (rent - power + idle))
    # m* = 270,000 / (15,293.02 x 0.9 - 1,877.41 - 516.45) = 270,000 / 11,369.86 = 23.75
    assert t.breakeven_month == pytest.approx(server.capex_usd / (0.9 * (rent - power + idle) - fixed - idle))
    assert t.breakeven_why.startswith(f"buying pays off after {t.breakeven_month:.1f} months")
    assert f"renting is cheaper below {t.breakeven_utilization:.0%} utilization" in t.breakeven_why
    # the table's crossing is the break-even month
    table = t.table.set_index("month")
    m = int(t.breakeven_month)
    assert table.loc[m, "cloud_usd"] < table.loc[m, "onprem_usd"]
    assert table.loc[m + 1, "cloud_usd"] > table.loc[m + 1, "onprem_usd"]


def test_a_low_price_gives_no_break_even_and_says_why():
    # $0.50 per device-hour: R = 0.5 x 8 x 730.5 = 2,922/month, less than owning's C / L + F + P = 10,321
    t = compare_tco("h100-sxm", "us-virginia-colo", utilization=0.8, price_usd_per_device_h=0.5, server="dgx-h100")
    assert t.breakeven_utilization is None and t.breakeven_month is None
    assert t.cloud_usd_per_month_full_use == pytest.approx(0.5 * 8 * H)
    assert t.onprem_usd_per_month_full_use > t.cloud_usd_per_month_full_use
    assert "never pays off within the server's 3-year life" in t.breakeven_why
    assert (f"renting is cheaper at any utilization: owning costs ${t.onprem_usd_per_month_full_use:,.0f}/month at "
            f"full use") in t.breakeven_why and f"vs ${t.cloud_usd_per_month_full_use:,.0f}/month renting" in t.breakeven_why


@pytest.mark.parametrize("price", [0.01, 0.5, 1.0, 2.0, 3.0, 10.0, 100.0])
@pytest.mark.parametrize("u", [0.05, 0.5, 1.0])
def test_break_even_utilization_is_never_above_one(price, u):
    t = compare_tco("h100-sxm", "us-california-onprem", utilization=u, price_usd_per_device_h=price)
    assert t.breakeven_utilization is None or 0 < t.breakeven_utilization <= 1
    assert t.breakeven_month is None or 0 < t.breakeven_month <= t.lifetime_months


def test_per_device_and_per_instance_prices_agree():
    inst = load_catalog().instance("aws:p5.48xlarge:us-east-1")  # 8 devices
    # $80 per instance-hour of 8 devices = $10 per device-hour; x 8 devices of the server = $80/h, x 0.7 = $56/h
    a = compare_tco("h100-sxm", "us-texas-colo", inst.key, price_usd_per_h=80.0, discount=0.3)
    b = compare_tco("h100-sxm", "us-texas-colo", inst.key, price_usd_per_device_h=10.0, discount=0.3)
    assert a.cloud_usd_per_h == pytest.approx(80 * 0.7) == b.cloud_usd_per_h
    assert a.cloud_usd_per_device_h == pytest.approx(7.0) == b.cloud_usd_per_device_h
    assert a.breakeven_utilization == pytest.approx(b.breakeven_utilization)
    assert "per instance-hour" in a.cloud_price and "per device-hour" in b.cloud_price
    # a one-device instance at $10 per instance-hour is the same price
    one = compare_tco("h100-sxm", "us-texas-colo", "lambda:gpu_1x_h100_sxm5:all", price_usd_per_h=10.0, discount=0.3)
    assert one.cloud_usd_per_h == pytest.approx(56.0)


def test_overrides_carry_no_catalog_date():
    catalog = compare_tco("h100-sxm", "us-virginia-colo", "aws:p5.48xlarge:us-east-1")
    assert catalog.cloud_price_date and catalog.capex_date and catalog.cloud_price.startswith("catalog")
    over = compare_tco("h100-sxm", "us-virginia-colo", "aws:p5.48xlarge:us-east-1", price_usd_per_h=50.0,
                       capex_usd=200_000.0)
    assert over.cloud_price_date is None and over.capex_date is None and over.capex_usd == 200_000


def test_a_device_no_instance_carries_needs_a_price_per_device_hour():
    with pytest.raises(ConfigError, match="per device-hour"):
        compare_tco("gb200", "us-virginia-colo")
    with pytest.raises(ConfigError, match="per device-hour"):
        compare_tco("gb200", "us-virginia-colo", price_usd_per_h=400.0)  # per instance of how many devices?
    t = compare_tco("gb200", "us-virginia-colo", price_usd_per_device_h=6.0)
    # 72 devices in the rack: $6 x 72 = $432/h
    assert t.instance is None and t.devices == 72 and t.cloud_usd_per_h == pytest.approx(432.0)
    assert t.cloud_price_date is None and any("TDP" in n for n in t.notes)


def test_the_server_can_be_chosen():
    t = compare_tco("h100-sxm", "us-virginia-colo", server="hgx-h100")
    assert t.server == "hgx-h100" and t.capex_usd == load_catalog().server("hgx-h100").capex_usd
    with pytest.raises(ConfigError, match="holds h100-sxm"):
        compare_tco("b200", "us-virginia-colo", server="hgx-h100")
    with pytest.raises(ConfigError, match="carries"):
        compare_tco("b200", "us-virginia-colo", "aws:p5.48xlarge:us-east-1")


def test_a_new_server_is_bought_when_the_last_one_s_life_ends():
    t = compare_tco("h100-sxm", "us-virginia-colo", months=80, capex_usd=100_000.0, server="dgx-h100")
    table = t.table.set_index("month")
    opex = t.onprem_opex_usd_per_month
    # one server to month 36 (its life), two from month 37, three from month 73
    assert table.loc[36, "onprem_usd"] == pytest.approx(100_000 + 36 * opex)
    assert table.loc[37, "onprem_usd"] == pytest.approx(200_000 + 37 * opex)
    assert table.loc[73, "onprem_usd"] == pytest.approx(300_000 + 73 * opex)


@pytest.mark.parametrize("kwargs", [{"price_usd_per_h": 1.0, "price_usd_per_device_h": 1.0},
                                    {"price_usd_per_device_h": float("nan")}, {"price_usd_per_h": -1.0},
                                    {"capex_usd": 0.0}, {"capex_usd": float("inf")}, {"utilization": 0.0},
                                    {"discount": 1.0}, {"months": 0}])
def test_bad_inputs_raise_a_config_error(kwargs):
    with pytest.raises(ConfigError):
        compare_tco("h100-sxm", "us-virginia-colo", **kwargs)


def test_explain_without_the_numbers_the_cli_may_lack():
    assert explain_breakeven(23.64, 0.6346) == ("buying pays off after 23.6 months; renting is cheaper below 63% "
                                                "utilization, owning above")
    assert explain_breakeven(None, None) == ("buying never pays off within the server's life at this utilization; "
                                             "renting is cheaper at any utilization")
