"""Cloud versus on-prem for one device type: cumulative cost month by month, break-even month and
utilization, with optional price overrides (the app's Cost page and `planner plan` use this).

Everything is per server: one on-prem server and the same number of devices rented in the cloud.

    C   capex of one server (USD); a server lasts L = 12 x lifetime_years months (the site's figure)
    F   fixed opex per month: colocation (the server's rated kW x $/kW-month) + operations ($/year / 12)
    P   power opex per month at full use: the server's power at load (its rating, or what the plan
        predicts it draws serving) x PUE x $/kWh x 730.5 h
    I   power opex per month idle: its devices at idle + the rest of the server (planner/plan/power.py)
        x PUE x $/kWh x 730.5 h; an owned server draws it every hour, used or not
    R   renting per month, full time: cloud $/h for the server's devices x 730.5 h
    u   utilization in (0, 1]: the share of hours the devices are used; the cloud bills only those
        hours, and an owned server draws I + (P - I) u on average

Per month over the server's life (the capex spread over it):

    renting(u) = R u
    owning(u)  = C / L + F + I + (P - I) u

Break-even utilization, renting(u*) = owning(u*):

    u* = (C / L + F + I) / (R - P + I)      renting is cheaper below u*, owning above.

It is None when renting is cheaper at every u in (0, 1]: when R <= P - I (the power above idle alone
costs as much as renting) or when u* > 1 (even at full use owning costs C / L + F + P > R a month).

Cumulative cost at the chosen utilization u, month by month (the chart):

    cloud(m)  = R u m
    onprem(m) = C n(m) + (F + I + (P - I) u) m      n(m) = servers bought by month m: one at month 0,
                                                    another each time the last one's life ends

Break-even month, cloud(m*) = onprem(m*) with the first server:

    m* = C / (R u - F - I - (P - I) u)        when that is positive and m* <= L;

None otherwise: owning never pays off within the server's life. The two agree: m* <= L exactly when
u >= u*, since C / (u (R - P + I) - F - I) <= L  <=>  u (R - P + I) >= C / L + F + I.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from planner.errors import ConfigError
from planner.plan.capacity import HOURS_PER_MONTH
from planner.plan.power import rated_w, unit_power
from planner.predict.context import Context, default_context
from planner.predict.cost import HOURS_PER_YEAR, server_for


@dataclass(frozen=True, slots=True)
class TcoComparison:
    """Cost of one server's worth of devices, rented in the cloud versus owned (module docstring: the symbols)."""

    device: str
    server: str
    instance: str | None
    """Catalog key of the instance whose price is used or overridden; None for a device no instance carries."""
    devices: int
    """Devices in the server (and rented)."""
    cloud_usd_per_h: float
    """R / 730.5: USD per hour for `devices` devices, after the discount."""
    cloud_usd_per_device_h: float
    """USD per device-hour, after the discount."""
    cloud_price: str
    """Where the cloud price comes from: the catalog's on-demand price, or an override (per device-hour
    or per instance-hour)."""
    cloud_price_date: str | None
    """Date of the catalog's on-demand price; None when the price is overridden (an override has no date)."""
    capex_usd: float
    """C: one server's purchase price (USD)."""
    capex_date: str | None
    """Date of the server's capex figure; None when the capex is overridden."""
    lifetime_months: float
    """L: months a server lasts (the site's amortization period)."""
    onprem_fixed_usd_per_month: float
    """F: colocation and operations per month (USD), whatever the utilization."""
    onprem_power_usd_per_month: float
    """P: electricity per month at full use (USD), facility overhead (PUE) included."""
    onprem_opex_usd_per_month: float
    """F + I + (P - I) u: opex per month at the chosen utilization (USD)."""
    onprem_usd_per_month_full_use: float
    """C / L + F + P: owning per month at full use, the capex spread over the life (USD)."""
    cloud_usd_per_month_full_use: float
    """R: renting the server's devices every hour of a month (USD)."""
    breakeven_month: float | None
    """m*: month after which owning is cheaper at the chosen utilization; None when owning never pays
    off within the server's life."""
    breakeven_utilization: float | None
    """u* in (0, 1]: renting only the hours used is cheaper below it, owning above; None when renting is
    cheaper at every utilization (owning costs more a month than renting even at full use)."""
    breakeven_why: str
    """Both break-evens in words, with the numbers behind a None (`explain_breakeven`)."""
    notes: tuple[str, ...]
    """What the owning cost leaves out (no sourced power, colocation or operations figure)."""
    table: pd.DataFrame
    """month, cloud_usd, onprem_usd (cumulative USD at the chosen utilization)."""
    onprem_idle_power_usd_per_month: float = 0.0
    """I: electricity per month of the server held idle (USD), PUE included."""
    utilization: float = 1.0
    """u: the utilization compared at."""


def breakeven_utilization(capex_usd: float, lifetime_months: float, fixed_usd_per_month: float,
                          power_usd_per_month: float, cloud_usd_per_month: float,
                          idle_usd_per_month: float = 0.0) -> float | None:
    """u* = (C / L + F + I) / (R - P + I), or None when renting is cheaper at every utilization in (0, 1]."""
    # R - (P - I): what each unit of utilization saves by owning
    margin = cloud_usd_per_month - power_usd_per_month + idle_usd_per_month
    if margin <= 0:
        return None
    u = (capex_usd / lifetime_months + fixed_usd_per_month + idle_usd_per_month) / margin
    return u if u <= 1 else None


def breakeven_month(capex_usd: float, lifetime_months: float, fixed_usd_per_month: float,
                    power_usd_per_month: float, cloud_usd_per_month: float, utilization: float,
                    idle_usd_per_month: float = 0.0) -> float | None:
    """m* = C / (R u - F - I - (P - I) u), or None when owning never pays off within the server's life (m* > L)."""
    saving = (cloud_usd_per_month - power_usd_per_month + idle_usd_per_month) * utilization \
        - fixed_usd_per_month - idle_usd_per_month
    if saving <= 0:
        return None
    m = capex_usd / saving
    return m if m <= lifetime_months else None


def explain_breakeven(month: float | None, utilization: float | None, lifetime_months: float | None = None,
                      onprem_full_use_usd_per_month: float | None = None,
                      cloud_full_use_usd_per_month: float | None = None) -> str:
    """Both break-evens in one line, the same in the app and the CLI: "buying pays off after 23.6
    months; renting is cheaper below 63% utilization, owning above". A None is said as what it means,
    with the monthly costs behind it where given."""
    life = f"{lifetime_months / 12:g}-year " if lifetime_months else ""
    when = (f"buying pays off after {month:.1f} months" if month is not None
            else f"buying never pays off within the server's {life}life at this utilization")
    if utilization is None:
        below = "renting is cheaper at any utilization"
        if onprem_full_use_usd_per_month is not None and cloud_full_use_usd_per_month is not None:
            below += (f": owning costs ${onprem_full_use_usd_per_month:,.0f}/month at full use (capex spread over "
                      f"the server's {life}life) vs ${cloud_full_use_usd_per_month:,.0f}/month renting")
    else:
        below = f"renting is cheaper below {utilization:.0%} utilization, owning above"
    return f"{when}; {below}"


def _devices(n: int) -> str:
    return f"{n} device" + "s" * (n != 1)


def _positive(value: float | None, what: str) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{what} must be a positive number, got {value}")
    return value


def compare_tco(device: str, site: str, instance: str | None = None, months: int = 36, utilization: float = 1.0,
                price_usd_per_h: float | None = None, discount: float = 0.0, capex_usd: float | None = None,
                ctx: Context | None = None, *, price_usd_per_device_h: float | None = None,
                server: str | None = None, idle_w: float | None = None, load_w: float | None = None) -> TcoComparison:
    """Compare renting `device` (cheapest on-demand instance per device, or `instance`) with owning its
    server (the first in the catalog, or `server`) at `site`, over `months` months at `utilization`.

    Price overrides, at most one: `price_usd_per_h` per instance-hour (for the instance's devices; needs
    an instance), `price_usd_per_device_h` per device-hour (works for a device no instance carries).
    `discount` is taken off the cloud price (0.3 = 30% committed-use discount); `capex_usd` overrides
    the server's price. `idle_w` and `load_w` (the server's power before PUE, W) replace its idle draw
    (its devices at idle + the rest of the server) and its draw at full use (its rating): `planner plan`
    passes what it predicts the server draws. Raise ConfigError for a bad input or a device with
    nothing to compare.
    """
    ctx = ctx or default_context()
    if not 0 < utilization <= 1:
        raise ConfigError(f"utilization must be in (0, 1], got {utilization}")
    if not 0 <= discount < 1:
        raise ConfigError(f"discount must be in [0, 1), got {discount}")
    if months < 1 or months > 240:
        raise ConfigError(f"months must be between 1 and 240, got {months}")
    _positive(price_usd_per_h, "the price per instance-hour")
    _positive(price_usd_per_device_h, "the price per device-hour")
    _positive(capex_usd, "capex")
    if price_usd_per_h is not None and price_usd_per_device_h is not None:
        raise ConfigError("give the price override per instance-hour or per device-hour, not both")
    dev = ctx.device(device)
    if server is None:
        box = server_for(ctx.catalog, dev)
    else:
        box = ctx.catalog.server(server)
        if box.device_id != dev.id:
            raise ConfigError(f"server {box.id} holds {box.device_id}, not {dev.id}")
    place = ctx.catalog.site(site)

    inst = None
    if instance is not None:
        inst = ctx.catalog.instance(instance)
        if inst.device_id != dev.id:
            raise ConfigError(f"{inst.key} carries {inst.device_id}, not {dev.id}")
    elif price_usd_per_device_h is None:  # the catalog's price (or a per-instance override) needs an instance
        offers = [i for i in ctx.catalog.instances_for(dev.id) if "on_demand" in i.price_usd_per_h]
        if not offers:
            raise ConfigError(f"no cloud instance with {dev.id} has an on-demand price in the catalog: give a "
                              "price per device-hour to compare with")
        inst = min(offers, key=lambda i: i.price_usd_per_h["on_demand"] / i.device_count)
    if price_usd_per_device_h is not None:
        per_device, date = price_usd_per_device_h, None
        where = "override per device-hour"
    elif price_usd_per_h is not None:
        per_device, date = price_usd_per_h / inst.device_count, None
        where = f"override per instance-hour of {inst.key} ({_devices(inst.device_count)})"
    else:
        if "on_demand" not in inst.price_usd_per_h:
            raise ConfigError(f"{inst.key} has no on_demand price in the catalog (it has: "
                              f"{', '.join(sorted(inst.price_usd_per_h))}); renting is compared on demand")
        per_device, date = inst.price_usd_per_h["on_demand"] / inst.device_count, inst.price_dates["on_demand"]
        where = f"catalog on-demand price of {inst.key} ({_devices(inst.device_count)})"

    per_device *= 1 - discount
    cloud_h = per_device * box.device_count
    capex = capex_usd if capex_usd is not None else box.capex_usd
    lifetime = place.lifetime_years * 12
    notes = []
    rated_kw = rated_w(ctx, box, dev) / 1000
    held = unit_power(ctx, dev, box.device_count, box)
    if not box.power_w:
        notes.append((f"{box.id} has no sourced power: its devices' TDP is used"
                      + (" with the rest of its device's reference server" if held.rest_source else ""))
                     if dev.tdp_w else f"no sourced power for {box.id} or {dev.id}: electricity and colocation "
                                       "count as 0")
    idle_kw = (idle_w if idle_w is not None else held.idle_w or 0.0) / 1000
    load_kw = load_w / 1000 if load_w is not None else rated_kw
    if place.colocation_usd_per_kw_month is None:
        notes.append(f"no colocation fee at {place.id}")
    if place.ops_usd_per_server_per_year is None:
        notes.append(f"operations staff not sourced for {place.id} (0)")
    fixed = (rated_kw * (place.colocation_usd_per_kw_month or 0.0)
             + (place.ops_usd_per_server_per_year or 0.0) * HOURS_PER_MONTH / HOURS_PER_YEAR)
    power = load_kw * place.pue * place.electricity_usd_per_kwh * HOURS_PER_MONTH
    idle = min(idle_kw, load_kw) * place.pue * place.electricity_usd_per_kwh * HOURS_PER_MONTH
    rent = cloud_h * HOURS_PER_MONTH
    opex = fixed + idle + (power - idle) * utilization
    rows = [{"month": m, "cloud_usd": rent * utilization * m,
             "onprem_usd": capex * max(1, math.ceil(m / lifetime - 1e-9)) + opex * m} for m in range(months + 1)]
    when = breakeven_month(capex, lifetime, fixed, power, rent, utilization, idle)
    below = breakeven_utilization(capex, lifetime, fixed, power, rent, idle)
    full_own = capex / lifetime + fixed + power
    why = explain_breakeven(when, below, lifetime, full_own, rent)
    return TcoComparison(dev.id, box.id, inst.key if inst else None, box.device_count, cloud_h, per_device, where,
                         date, capex, box.date if capex_usd is None else None, lifetime, fixed, power, opex,
                         full_own, rent, when, below, why, tuple(notes), pd.DataFrame(rows), idle, utilization)
