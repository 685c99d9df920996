"""Cloud versus on-prem for one device type: cumulative cost month by month, break-even month and
utilization, with optional price overrides (the app's Cost page and the CLI use this).

    cloud(month)  = hourly price x hours used per month x month           (pay for the hours used)
    onprem(month) = capex + (opex per month) x month                       (own the server; opex =
                    power x PUE x electricity + colocation + ops, at the utilization)
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from planner.errors import ConfigError
from planner.plan.capacity import HOURS_PER_MONTH
from planner.predict.context import Context, default_context
from planner.predict.cost import HOURS_PER_YEAR, server_for


@dataclass(frozen=True, slots=True)
class TcoComparison:
    """Monthly cumulative costs of one server's worth of devices, cloud versus on-prem."""

    device: str
    server: str
    instance: str
    devices: int
    cloud_usd_per_h: float
    """For `devices` devices (the instance price scaled to the server's device count)."""
    cloud_price_date: str
    """Date of the instance's on-demand price (planner.hardware.catalog.dated shows it, stale or not)."""
    capex_usd: float
    capex_date: str
    """Date of the server's capex figure."""
    onprem_opex_usd_per_month: float
    breakeven_month: float | None
    """Month after which owning is cheaper at this utilization; None if never within reason."""
    breakeven_utilization: float
    """Utilization below which renting only the hours used is cheaper over the server's lifetime."""
    table: pd.DataFrame
    """month, cloud_usd, onprem_usd (cumulative)."""


def compare_tco(device: str, site: str, instance: str | None = None, months: int = 36, utilization: float = 1.0,
                price_usd_per_h: float | None = None, discount: float = 0.0, capex_usd: float | None = None,
                ctx: Context | None = None) -> TcoComparison:
    """Compare renting `device` (cheapest on-demand instance, or `instance`) with owning its server at `site`.

    `price_usd_per_h` overrides the instance's on-demand price (per instance); `discount` is taken off
    the cloud price (0.3 = 30% committed-use discount); `capex_usd` overrides the server price.
    """
    ctx = ctx or default_context()
    if not 0 < utilization <= 1:
        raise ConfigError(f"utilization must be in (0, 1], got {utilization}")
    if not 0 <= discount < 1:
        raise ConfigError(f"discount must be in [0, 1), got {discount}")
    if months < 1 or months > 240:
        raise ConfigError(f"months must be between 1 and 240, got {months}")
    dev = ctx.device(device)
    server = server_for(ctx.catalog, dev)
    place = ctx.catalog.site(site)
    if instance is not None:
        inst = ctx.catalog.instance(instance)
        if "on_demand" not in inst.price_usd_per_h:
            raise ConfigError(f"{inst.key} has no on_demand price in the catalog (it has: "
                              f"{', '.join(sorted(inst.price_usd_per_h))}); renting is compared on demand")
    else:
        offers = [i for i in ctx.catalog.instances_for(dev.id) if "on_demand" in i.price_usd_per_h]
        if not offers:
            raise ConfigError(f"no cloud instance with {dev.id} in the catalog")
        inst = min(offers, key=lambda i: i.price_usd_per_h["on_demand"] / i.device_count)
    hourly = price_usd_per_h if price_usd_per_h is not None else inst.price_usd_per_h["on_demand"]
    if hourly <= 0:
        raise ConfigError(f"price must be positive, got {hourly}")
    cloud_h = hourly * (1 - discount) / inst.device_count * server.device_count
    capex = capex_usd if capex_usd is not None else server.capex_usd
    power_kw = (server.power_w or (dev.tdp_w or 0) * server.device_count) / 1000 * utilization
    opex = (power_kw * place.pue * place.electricity_usd_per_kwh * HOURS_PER_MONTH
            + (server.power_w or 0) / 1000 * (place.colocation_usd_per_kw_month or 0.0)
            + (place.ops_usd_per_server_per_year or 0.0) * HOURS_PER_MONTH / HOURS_PER_YEAR)
    cloud_month = cloud_h * HOURS_PER_MONTH * utilization
    rows = [{"month": m, "cloud_usd": cloud_month * m, "onprem_usd": capex + opex * m} for m in range(0, months + 1)]
    breakeven = capex / (cloud_month - opex) if cloud_month > opex else None
    lifetime = place.lifetime_years * 12
    full_cloud = cloud_h * HOURS_PER_MONTH
    breakeven_u = (capex / lifetime + opex) / full_cloud if full_cloud else float("inf")
    return TcoComparison(dev.id, server.id, inst.key, server.device_count, cloud_h, inst.price_dates["on_demand"],
                         capex, server.date, opex, breakeven, breakeven_u, pd.DataFrame(rows))
