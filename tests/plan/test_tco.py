"""planner.plan.tco: renting against owning one server, the break-even closed form (module docstring)."""


import pytest

from planner.errors import ConfigError
from planner.hardware.catalog import load_catalog
from planner.plan.tco import breakeven_month, breakeven_utilization, compare_tco, explain_breakeven, line_defaults

H = 730.5  # hours per month
TB, GB = 1e12, 1e9
NONE = {"network_fraction": 0.0, "support_fraction_per_year": 0.0, "staff_usd_per_server_per_year": 0.0,
        "residual_fraction": 0.0}
"""Every line the plan's rows do not bill left out: capex, colocation and power only."""


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
    t = compare_tco("h100-sxm", site.id, months=36, utilization=0.9, price_usd_per_device_h=2.69, server=server.id,
                    **NONE)
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
    # $0.50 per device-hour: R = 0.5 x 8 x 730.5 = 2,922/month, less than owning's (C - V) / L + F + P
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
    t = compare_tco("h100-sxm", "us-virginia-colo", months=80, capex_usd=100_000.0, server="dgx-h100", **NONE)
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


# ---------------------------------------------------------------------------------------------
# The other lines (issue 43 item 7): network, support, staff, residual, storage, egress


def test_residual_and_the_cloud_s_other_bill_in_the_closed_forms():
    # C = 360,000, V = 72,000 (20%), L = 36: (C - V) / L = 288,000 / 36 = 8,000; F = 2,000; P = 1,000; R = 16,000
    # G = 1,000: u* = (8,000 + 2,000 - 1,000) / (16,000 - 1,000) = 9,000 / 15,000 = 0.6
    kw = {"residual_usd": 72_000, "cloud_other_usd_per_month": 1_000}
    assert breakeven_utilization(360_000, 36, 2_000, 1_000, 16_000, **kw) == pytest.approx(0.6)
    # G = 11,000: a = 8,000 + 2,000 - 11,000 = -1,000 <= 0: owning is cheaper at every utilization
    assert breakeven_utilization(360_000, 36, 2_000, 1_000, 16_000, residual_usd=72_000,
                                 cloud_other_usd_per_month=11_000) == 0.0
    # u = 1: s = 15,000 + 1,000 - 2,000 = 14,000; m* = 360,000 / 14,000 = 25.71 months
    assert breakeven_month(360_000, 36, 2_000, 1_000, 16_000, 1.0, **kw) == pytest.approx(360_000 / 14_000)
    # u = u* = 0.6: s = 9,000 + 1,000 - 2,000 = 8,000; C / s = 45 > 36 but (C - V) / s = 288,000 / 8,000 = 36:
    # the resale at the end of the life pays it off, at month L
    assert breakeven_month(360_000, 36, 2_000, 1_000, 16_000, 0.6, **kw) == pytest.approx(36)
    # u = 0.59: s = 8,850 - 1,000 = 7,850; (C - V) / s = 36.69 > 36: never within the life
    assert breakeven_month(360_000, 36, 2_000, 1_000, 16_000, 0.59, **kw) is None
    assert explain_breakeven(10.0, 0.0).endswith("owning is cheaper at any utilization")


@pytest.mark.parametrize("other", [0, 1_000, 5_000, 11_000])
@pytest.mark.parametrize("residual", [0, 72_000, 180_000])
def test_with_resale_and_cloud_extras_the_month_is_within_life_exactly_above_the_utilization(other, residual):
    kw = {"residual_usd": residual, "cloud_other_usd_per_month": other}
    u_star = breakeven_utilization(360_000, 36, 2_000, 1_000, 16_000, **kw)
    for u in (0.05, 0.2, 0.4, 0.5, 0.59, 0.61, 0.8, 1.0):
        within = breakeven_month(360_000, 36, 2_000, 1_000, 16_000, u, **kw) is not None
        assert within == (u_star is not None and u >= u_star), (other, residual, u, u_star)


def test_every_line_in_closed_form_on_the_catalog():
    """DGX H100 at us-virginia-colo, $2.69 per device-hour, 90% utilization, 36 months, every line at its
    sourced default, 100 TB kept (on prem at $10/TB-month, given), 1,000 GB of egress a month."""
    cat = load_catalog()
    t = compare_tco("h100-sxm", "us-virginia-colo", months=36, utilization=0.9, price_usd_per_device_h=2.69,
                    server="dgx-h100", storage_bytes=100 * TB, onprem_storage_usd_per_byte_month=10 / TB,
                    egress_bytes_per_month=1_000 * GB)
    assert cat.costs["network_fraction_of_capex"].value == 0.125 and cat.costs["residual_fraction_of_capex"].value == 0.3
    # C = 270,000 x (1 + 0.125) = 270,000 + 33,750 = 303,750; V = 0.3 x 303,750 = 91,125
    assert t.capex_usd == 270_000 and t.network_usd == pytest.approx(33_750) and t.residual_usd == pytest.approx(91_125)
    # W = 8 devices x 11.71875 / 1000 FTE x $264,550 / 12 = 0.09375 x 264,550 / 12 = 24,801.56 / 12 = 2,066.80
    assert t.staff_usd_per_month == pytest.approx(2_066.796875)
    # S = 0.125 x 303,750 / 12 = 37,968.75 / 12 = 3,164.06
    assert t.support_usd_per_month == pytest.approx(3_164.0625)
    # F = colocation 10.2 x 184.06 + W + S + D = 1,877.41 + 2,066.80 + 3,164.06 + 100 x 10 = 8,108.27
    assert t.onprem_fixed_usd_per_month == pytest.approx(8_108.271375)
    # G = 100 TB x $23 + 1,000 GB x $0.09 = 2,300 + 90 = 2,390
    assert t.cloud_other_usd_per_month == pytest.approx(2_390)
    power, idle, rent = 943.7861304, 516.4545750, 15_720.36  # P, I, R as in the test above
    # u* = ((303,750 - 91,125) / 36 + 8,108.27 + 516.45 - 2,390) / (15,720.36 - 943.79 + 516.45)
    #    = (5,906.25 + 8,108.27 + 516.45 - 2,390) / 15,293.03 = 12,140.98 / 15,293.03 = 0.7939
    assert t.breakeven_utilization == pytest.approx(0.7938895814)
    # s = 15,293.03 x 0.9 + 2,390 - 8,108.27 - 516.45 = 7,529.00; C / s = 303,750 / 7,529 = 40.3 > 36 but
    # (C - V) / s = 212,625 / 7,529 = 28.2 <= 36: the resale at month 36 pays it off
    assert t.breakeven_month == pytest.approx(36)
    # full use: (C - V) / L + F + P = 5,906.25 + 8,108.27 + 943.79 = 14,958.31; R + G = 15,720.36 + 2,390 = 18,110.36
    assert t.onprem_usd_per_month_full_use == pytest.approx(5_906.25 + 8_108.271375 + power)
    assert t.cloud_usd_per_month_full_use == pytest.approx(rent + 2_390)
    last = t.table.iloc[-1]
    # onprem(36) = C - V + (F + I + (P - I) u) 36 = 212,625 + 9,009.32 x 36 = 536,960.68
    assert last["onprem_usd"] == pytest.approx(212_625 + (8_108.271375 + idle + (power - idle) * 0.9) * 36)
    assert last["onprem_usd"] == pytest.approx(536_960.68, abs=0.01)
    # cloud(36) = (R u + G) 36 = (14,148.32 + 2,390) x 36 = 595,379.66
    assert last["cloud_usd"] == pytest.approx(595_379.664)
    lines = {(x.side, x.item.split(" (")[0]): x for x in t.lines}
    assert lines["on-prem", "network fabric"].usd == pytest.approx(33_750)
    assert lines["on-prem", "staff"].usd == pytest.approx(2_066.796875 * 36)  # 74,404.69
    assert lines["on-prem", "support contract"].usd == pytest.approx(3_164.0625 * 36)  # 113,906.25
    assert lines["on-prem", "storage"].usd == pytest.approx(36_000)  # 100 TB x $10 x 36
    assert lines["on-prem", "residual value"].usd == pytest.approx(-91_125)
    assert lines["cloud", "storage"].usd == pytest.approx(82_800)  # 100 TB x $23 x 36
    assert lines["cloud", "egress"].usd == pytest.approx(3_240)  # 1,000 GB x $0.09 x 36
    assert "2026-05" in lines["on-prem", "staff"].source and "hedgehog" in lines["on-prem", "staff"].source.lower()
    assert lines["on-prem", "storage"].source == "your override"
    assert lines["cloud", "egress"].source.endswith("(2026-04)")


@pytest.mark.parametrize("months", [12, 36, 37, 80])
@pytest.mark.parametrize("kwargs", [{}, NONE, {"storage_bytes": 5 * TB, "egress_bytes_per_month": 300 * GB},
                                    {"network_fraction": 0.3, "residual_fraction": 0.5, "support_fraction_per_year": 0}])
def test_each_side_s_lines_add_up_to_its_total(months, kwargs):
    t = compare_tco("h100-sxm", "us-texas-colo", months=months, utilization=0.7, server="dgx-h100", **kwargs)
    frame, last = t.lines_frame(), t.table.iloc[-1]
    assert frame[frame.side == "cloud"].usd.sum() == pytest.approx(last["cloud_usd"])
    assert frame[frame.side == "on-prem"].usd.sum() == pytest.approx(last["onprem_usd"])
    # 80 months, 36-month life: three servers bought (months 0, 37, 73), two sold (months 36, 72)
    if months == 80:
        assert any(x.item == "servers (3 bought)" for x in t.lines)
        assert any("2 sold" in x.item for x in t.lines)


def test_zero_excludes_a_line_and_an_override_is_said():
    t = compare_tco("h100-sxm", "us-virginia-colo", server="dgx-h100", network_fraction=0.0, staff_usd_per_server_per_year=12_000.0)
    src = {x.item.split(" (")[0]: x.source for x in t.lines if x.side == "on-prem"}
    assert src["network fabric"] == "excluded (0)" and t.network_usd == 0
    assert src["staff"] == "your override" and t.staff_usd_per_month == pytest.approx(1_000)  # 12,000 / 12


def test_the_site_s_operations_figure_is_the_staff_line_counted_once():
    """sites.csv's ops_usd_per_server_per_year is the people who run the servers: where a site gives it,
    it is the staff line (not added to the FTE default), and the plan's rows bill the same figure."""
    from dataclasses import replace

    from planner.predict.context import default_context, with_catalog
    ctx = default_context()
    cat = ctx.catalog
    site = replace(cat.site("us-virginia-colo"), ops_usd_per_server_per_year=30_000.0)
    ctx = with_catalog(ctx, replace(cat, sites={**cat.sites, site.id: site}))
    t = compare_tco("h100-sxm", site.id, server="dgx-h100", ctx=ctx)
    assert t.staff_usd_per_month == pytest.approx(2_500)  # 30,000 / 12, not 30,000 / 12 + 2,066.80
    assert line_defaults(site.id, "dgx-h100", ctx)["staff_usd_per_server_per_year"] == 30_000
    # colocation 1,877.41 + staff 2,500 + support 0.125 x 303,750 / 12 = 3,164.06
    assert t.onprem_fixed_usd_per_month == pytest.approx(10.2 * 184.06 + 2_500 + 3_164.0625)


def test_the_defaults_shown_are_the_ones_used():
    d = line_defaults("us-virginia-colo", "dgx-h100")
    t = compare_tco("h100-sxm", "us-virginia-colo", server="dgx-h100")
    assert d["staff_usd_per_server_per_year"] / 12 == pytest.approx(t.staff_usd_per_month)
    assert d["network_fraction"] * t.capex_usd == pytest.approx(t.network_usd)
    assert d["onprem_storage_usd_per_byte_month"] == 0  # not sourced


@pytest.mark.parametrize("kwargs", [{"network_fraction": 1.5}, {"network_fraction": -0.1},
                                    {"support_fraction_per_year": float("nan")}, {"residual_fraction": 1.0},
                                    {"staff_usd_per_server_per_year": -1.0}, {"staff_usd_per_server_per_year": 1e12},
                                    {"storage_bytes": float("inf")}, {"egress_bytes_per_month": -1.0},
                                    {"egress_usd_per_byte": 1.0}, {"cloud_storage_usd_per_byte_month": -1e-12}])
def test_an_override_out_of_range_is_one_clear_line(kwargs):
    with pytest.raises(ConfigError) as err:
        compare_tco("h100-sxm", "us-virginia-colo", **kwargs)
    assert "\n" not in str(err.value) and "must be a number in [" in str(err.value)


def test_the_cli_prints_every_line_and_refuses_an_override_out_of_range(capsys):
    from planner.cli import main
    assert main(["tco", "h100-sxm", "--server", "dgx-h100", "--utilization", "0.9", "--price-usd-per-device-h", "2.69",
                 "--storage-tb", "100", "--onprem-storage-usd-per-tb-month", "10", "--egress-gb-per-month", "1000"]) == 0
    out = capsys.readouterr().out
    for item in ("compute", "egress", "network fabric", "staff", "support contract", "residual value", "power"):
        assert item in out, item
    assert "536,961" in out and "595,380" in out  # the totals of test_every_line_in_closed_form_on_the_catalog
    assert "-91,125" in out
    assert main(["tco", "h100-sxm", "--network-fraction", "0", "--json"]) == 0
    import json
    data = json.loads(capsys.readouterr().out)
    assert next(x for x in data["lines"] if x["item"].startswith("network"))["usd"] == 0
    assert main(["tco", "h100-sxm", "--residual-fraction", "1.2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "residual value" in err and "Traceback" not in err
