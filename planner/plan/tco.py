"""Cloud versus on-prem for one device type: cumulative cost month by month, break-even month and
utilization, an itemized bill of the term, with optional overrides (the app's Cost page, `planner tco` and
`planner plan` use this).

Everything is per server: one on-prem server and the same number of devices rented in the cloud.

    C0  purchase price of one server (USD, the catalog's or an override)
    n   network fabric (switches, NICs, cabling) as a fraction of C0, bought with each server
    C   capex of one server with its share of the fabric: C = C0 (1 + n)
    L   months a server lasts: 12 x lifetime_years (the site's figure)
    V   residual (resale) value of a server at the end of its life: V = r C, credited then
    F   fixed opex per month: colocation (the server's rated kW x $/kW-month) + staff W + support S
        + on-prem storage D
    W   staff per month: the site's ops_usd_per_server_per_year / 12 where the site gives one (it is the
        same thing: the people who run the servers), else devices x FTE per device x loaded USD per
        FTE-year / 12; counted once
    S   support contract per month: s C / 12 (s: fraction of capex per year)
    D   on-prem storage per month: TB kept x USD per TB-month (no sourced default: 0 unless given)
    P   power opex per month at full use: the server's power at load (its rating, or what the plan
        predicts it draws serving) x PUE x $/kWh x 730.5 h
    I   power opex per month idle: its devices at idle + the rest of the server (planner/plan/power.py)
        x PUE x $/kWh x 730.5 h; an owned server draws it every hour, used or not
    R   renting per month, full time: cloud $/h for the server's devices x 730.5 h
    G   the cloud's other bill per month, whatever the utilization: storage (TB kept x USD per TB-month)
        + egress (GB out per month x USD per GB)
    u   utilization in (0, 1]: the share of hours the devices are used; the cloud bills only those
        hours, and an owned server draws I + (P - I) u on average

Per month over the server's life (the capex less its resale spread over it):

    renting(u) = R u + G
    owning(u)  = (C - V) / L + F + I + (P - I) u

Break-even utilization, renting(u*) = owning(u*), with a = (C - V) / L + F + I - G (owning less renting
at u = 0) and b = R - P + I (what each unit of utilization saves by owning):

    u* = a / b                renting is cheaper below u*, owning above.

It is None when renting is cheaper at every u in (0, 1]: b <= 0 with a >= 0, or a / b > 1 (even at full
use owning costs (C - V) / L + F + P > R + G a month). It is 0 when owning is cheaper at every u: a <= 0
< b, or b <= 0 with a < b. (With b <= 0 and b <= a < 0 owning would be cheaper only below a / b, when the
power above idle costs more than renting; that is reported as None too.)

Cumulative cost at the chosen utilization u, month by month (the chart):

    cloud(m)  = (R u + G) m
    onprem(m) = C n(m) - V k(m) + (F + I + (P - I) u) m
                n(m) = servers bought by month m: one at month 0, another each time the last one's life ends
                k(m) = floor(m / L): servers whose life has ended (and been sold) by month m; a server still
                       in service at the end of the horizon is not credited

Break-even month, cloud(m*) = onprem(m*) with the first server, s = (R - P + I) u + G - F - I the
monthly saving of owning:

    m* = C / s                when s > 0 and C / s <= L;
    m* = L                    when s > 0, C / s > L but (C - V) / s <= L: the resale at the end of the
                              life pays it off;

None otherwise: owning never pays off within the server's life. The two agree: m* <= L exactly when
u >= u*, since (C - V) / s <= L  <=>  b u - (F + I - G) >= (C - V) / L  <=>  b u >= a.

Itemized over a horizon of M months (TcoComparison.lines; the on-prem lines add up to onprem(M), the
cloud ones to cloud(M)): cloud compute R u M, cloud storage and egress G M; servers C0 n(M), network
n C0 n(M), power (I + (P - I) u) M, colocation, staff W M, support S M, storage D M, residual -V k(M).
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
class TcoLine:
    """One line of the term's bill: what it is, on which side, its total over the horizon and its source."""

    side: str
    """"cloud" or "on-prem"."""
    item: str
    """What the line counts ("compute", "network fabric", "staff", "residual value", ...)."""
    usd: float
    """Total over the horizon at the chosen utilization (USD); a credit (the residual value) is negative."""
    source: str
    """Where its figure comes from, with the date; "your override" for a figure the user gave; "excluded (0)"
    for a line set to 0; "not sourced (0)" for a default no source gives."""


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
    """C0: one server's purchase price (USD), without its share of the network fabric."""
    capex_date: str | None
    """Date of the server's capex figure; None when the capex is overridden."""
    lifetime_months: float
    """L: months a server lasts (the site's amortization period)."""
    onprem_fixed_usd_per_month: float
    """F: colocation, staff, support and on-prem storage per month (USD), whatever the utilization."""
    onprem_power_usd_per_month: float
    """P: electricity per month at full use (USD), facility overhead (PUE) included."""
    onprem_opex_usd_per_month: float
    """F + I + (P - I) u: opex per month at the chosen utilization (USD)."""
    onprem_usd_per_month_full_use: float
    """(C - V) / L + F + P: owning per month at full use, the capex less its resale spread over the life (USD)."""
    cloud_usd_per_month_full_use: float
    """R + G: renting the server's devices every hour of a month, with the cloud's storage and egress (USD)."""
    breakeven_month: float | None
    """m*: month after which owning is cheaper at the chosen utilization; None when owning never pays
    off within the server's life."""
    breakeven_utilization: float | None
    """u* in [0, 1]: renting only the hours used is cheaper below it, owning above; 0 when owning is cheaper
    at every utilization; None when renting is cheaper at every utilization (owning costs more a month
    than renting even at full use)."""
    breakeven_why: str
    """Both break-evens in words, with the numbers behind a None (`explain_breakeven`)."""
    notes: tuple[str, ...]
    """What the owning cost leaves out (no sourced power, colocation or storage figure)."""
    table: pd.DataFrame
    """month, cloud_usd, onprem_usd (cumulative USD at the chosen utilization)."""
    onprem_idle_power_usd_per_month: float = 0.0
    """I: electricity per month of the server held idle (USD), PUE included."""
    utilization: float = 1.0
    """u: the utilization compared at."""
    network_usd: float = 0.0
    """n C0: the network fabric bought with each server (USD)."""
    residual_usd: float = 0.0
    """V: resale value of a server at the end of its life (USD), credited then."""
    staff_usd_per_month: float = 0.0
    """W: the people who run the server, per month (USD); part of F."""
    support_usd_per_month: float = 0.0
    """S: the support contract per month (USD); part of F."""
    cloud_other_usd_per_month: float = 0.0
    """G: the cloud's storage and egress per month (USD), whatever the utilization."""
    lines: tuple[TcoLine, ...] = ()
    """The horizon's bill, line by line (cloud first, then on-prem): each side's lines add up to the
    table's last month."""

    def lines_frame(self) -> pd.DataFrame:
        """side, item, usd, source: `lines` as a table (USD over the horizon)."""
        return pd.DataFrame([{"side": x.side, "item": x.item, "usd": x.usd, "source": x.source} for x in self.lines],
                            columns=["side", "item", "usd", "source"])


def breakeven_utilization(capex_usd: float, lifetime_months: float, fixed_usd_per_month: float,
                          power_usd_per_month: float, cloud_usd_per_month: float,
                          idle_usd_per_month: float = 0.0, *, residual_usd: float = 0.0,
                          cloud_other_usd_per_month: float = 0.0) -> float | None:
    """u* = ((C - V) / L + F + I - G) / (R - P + I): 0 when owning is cheaper at every utilization in (0, 1],
    None when renting is (module docstring)."""
    a = (capex_usd - residual_usd) / lifetime_months + fixed_usd_per_month + idle_usd_per_month \
        - cloud_other_usd_per_month  # owning less renting at u = 0
    b = cloud_usd_per_month - power_usd_per_month + idle_usd_per_month  # R - (P - I): saved per unit of u
    if b <= 0:
        return 0.0 if a < b else None
    if a <= 0:
        return 0.0
    u = a / b
    return u if u <= 1 else None


def breakeven_month(capex_usd: float, lifetime_months: float, fixed_usd_per_month: float,
                    power_usd_per_month: float, cloud_usd_per_month: float, utilization: float,
                    idle_usd_per_month: float = 0.0, *, residual_usd: float = 0.0,
                    cloud_other_usd_per_month: float = 0.0) -> float | None:
    """m* = C / s with s = (R - P + I) u + G - F - I; L when the resale at the end of the life pays it off
    ((C - V) / s <= L < C / s); None when owning never pays off within the server's life."""
    saving = (cloud_usd_per_month - power_usd_per_month + idle_usd_per_month) * utilization \
        + cloud_other_usd_per_month - fixed_usd_per_month - idle_usd_per_month
    if saving <= 0:
        return None
    m = capex_usd / saving
    if m <= lifetime_months:
        return m
    return float(lifetime_months) if (capex_usd - residual_usd) / saving <= lifetime_months else None


def explain_breakeven(month: float | None, utilization: float | None, lifetime_months: float | None = None,
                      onprem_full_use_usd_per_month: float | None = None,
                      cloud_full_use_usd_per_month: float | None = None) -> str:
    """Both break-evens in one line, the same in the app and the CLI: "buying pays off after 23.6
    months; renting is cheaper below 63% utilization, owning above". A None (or a 0 utilization) is
    said as what it means, with the monthly costs behind it where given."""
    life = f"{lifetime_months / 12:g}-year " if lifetime_months else ""
    when = (f"buying pays off after {month:.1f} months" if month is not None
            else f"buying never pays off within the server's {life}life at this utilization")
    if utilization is None:
        below = "renting is cheaper at any utilization"
        if onprem_full_use_usd_per_month is not None and cloud_full_use_usd_per_month is not None:
            below += (f": owning costs ${onprem_full_use_usd_per_month:,.0f}/month at full use (capex less resale "
                      f"spread over the server's {life}life) vs ${cloud_full_use_usd_per_month:,.0f}/month renting")
    elif utilization <= 0:
        below = "owning is cheaper at any utilization"
    else:
        below = f"renting is cheaper below {utilization:.0%} utilization, owning above"
    return f"{when}; {below}"


def _devices(n: int) -> str:
    return f"{n} device" + "s" * (n != 1)


def _positive(value: float | None, what: str) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{what} must be a positive number, got {value}")
    return value


def _within(value: float | None, lo: float, hi: float, what: str, *, below: bool = False) -> float | None:
    """`value` unchanged when None or in [lo, hi] ([lo, hi) with `below`); else ConfigError in one line."""
    if value is None:
        return None
    if not (isinstance(value, (int, float)) and math.isfinite(value) and lo <= value
            and (value < hi if below else value <= hi * (1 + 1e-9))):  # a unit's conversion may round up
        raise ConfigError(f"{what} must be a number in [{lo:g}, {hi:g}{')' if below else ']'}, got {value}")
    return float(value)


def _dated(fact) -> str:
    return f"{fact.source} ({fact.date})"


OVERRIDE = "your override"
EXCLUDED = "excluded (0)"


def compare_tco(device: str, site: str, instance: str | None = None, months: int = 36, utilization: float = 1.0,
                price_usd_per_h: float | None = None, discount: float = 0.0, capex_usd: float | None = None,
                ctx: Context | None = None, *, price_usd_per_device_h: float | None = None,
                server: str | None = None, idle_w: float | None = None, load_w: float | None = None,
                network_fraction: float | None = None, support_fraction_per_year: float | None = None,
                staff_usd_per_server_per_year: float | None = None, residual_fraction: float | None = None,
                storage_bytes: float = 0.0, onprem_storage_usd_per_byte_month: float | None = None,
                cloud_storage_usd_per_byte_month: float | None = None, egress_bytes_per_month: float = 0.0,
                egress_usd_per_byte: float | None = None) -> TcoComparison:
    """Compare renting `device` (cheapest on-demand instance per device, or `instance`) with owning its
    server (the first in the catalog, or `server`) at `site`, over `months` months at `utilization`.

    Price overrides, at most one: `price_usd_per_h` per instance-hour (for the instance's devices; needs
    an instance), `price_usd_per_device_h` per device-hour (works for a device no instance carries).
    `discount` is taken off the cloud price (0.3 = 30% committed-use discount); `capex_usd` overrides
    the server's price. `idle_w` and `load_w` (the server's power before PUE, W) replace its idle draw
    (its devices at idle + the rest of the server) and its draw at full use (its rating): `planner plan`
    passes what it predicts the server draws.

    The other lines (module docstring), each None for the catalog's sourced default
    (hardware_specs/onprem_costs.csv) and 0 to exclude it: `network_fraction` n of the server's price,
    `support_fraction_per_year` s of the capex, `staff_usd_per_server_per_year` (default: the site's
    operations figure, else FTE per device x devices x loaded USD per FTE-year), `residual_fraction` r of
    the capex at the end of a server's life, the storage kept on both sides `storage_bytes` (default 0)
    at `onprem_storage_usd_per_byte_month` (no sourced default: 0) and `cloud_storage_usd_per_byte_month`,
    and the cloud's egress `egress_bytes_per_month` (default 0) at `egress_usd_per_byte`. Raise
    ConfigError, in one line, for a bad input or a device with nothing to compare.
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
    _within(network_fraction, 0, 1, "the network fabric's share of the server's capex")
    _within(support_fraction_per_year, 0, 1, "the support contract's share of capex per year")
    _within(residual_fraction, 0, 1, "the residual value's share of capex", below=True)
    _within(staff_usd_per_server_per_year, 0, 1e7, "staff USD per server per year")
    _within(storage_bytes, 0, 1e18, "the storage kept (bytes; 1e18 = 1,000,000 TB)")
    _within(onprem_storage_usd_per_byte_month, 0, 1e-6, "on-prem storage USD per byte-month (1e-6 = $1,000,000/TB)")
    _within(cloud_storage_usd_per_byte_month, 0, 1e-6, "cloud storage USD per byte-month (1e-6 = $1,000,000/TB)")
    _within(egress_bytes_per_month, 0, 1e18, "egress bytes per month (1e18 = 1,000,000 TB)")
    _within(egress_usd_per_byte, 0, 1e-7, "egress USD per byte (1e-7 = $100/GB)")
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
    price = capex_usd if capex_usd is not None else box.capex_usd
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

    costs = ctx.catalog.costs

    def pick(given: float | None, key: str) -> tuple[float, str]:
        """(value, source) of a line's figure: the override, else the catalog's sourced default, else 0."""
        if given is not None:
            return given, (OVERRIDE if given else EXCLUDED)
        fact = costs.get(key)
        if fact is None:
            return 0.0, "not sourced (0)"
        return fact.value, _dated(fact)

    n_frac, n_src = pick(network_fraction, "network_fraction_of_capex")
    s_frac, s_src = pick(support_fraction_per_year, "support_fraction_of_capex_per_year")
    r_frac, r_src = pick(residual_fraction, "residual_fraction_of_capex")
    if staff_usd_per_server_per_year is not None:
        staff_year, w_src = staff_usd_per_server_per_year, (OVERRIDE if staff_usd_per_server_per_year else EXCLUDED)
    elif place.ops_usd_per_server_per_year is not None:
        staff_year, w_src = place.ops_usd_per_server_per_year, f"site {place.id}: operations per server ({place.date})"
    elif "staff_fte_per_device" in costs and "staff_usd_per_fte_year" in costs:
        fte, pay = costs["staff_fte_per_device"], costs["staff_usd_per_fte_year"]
        staff_year = box.device_count * fte.value * pay.value
        w_src = (f"{box.device_count} devices x {fte.value * 1000:.2f} FTE per 1000 devices ({fte.source}, {fte.date}) "
                 f"x ${pay.value:,.0f} per FTE-year ({pay.source}, {pay.date})")
    else:
        staff_year, w_src = 0.0, "not sourced (0)"
        notes.append(f"operations staff not sourced for {place.id} (0)")
    d_price, d_src = (onprem_storage_usd_per_byte_month, OVERRIDE) if onprem_storage_usd_per_byte_month is not None \
        else (0.0, "not sourced (0): give your USD per TB-month")
    g_price, g_src = pick(cloud_storage_usd_per_byte_month, "cloud_storage_usd_per_byte_month")
    e_price, e_src = pick(egress_usd_per_byte, "cloud_egress_usd_per_byte")
    if storage_bytes and onprem_storage_usd_per_byte_month is None:
        notes.append("on-prem storage has no sourced price: it counts as 0 until you give one")

    network = n_frac * price  # n C0
    capex = price + network  # C
    residual = r_frac * capex  # V
    per_month = HOURS_PER_MONTH / HOURS_PER_YEAR  # 730.5 / 8766 = 1/12 of a year
    staff = staff_year * per_month  # W
    support = s_frac * capex * per_month  # S
    colocation = rated_kw * (place.colocation_usd_per_kw_month or 0.0)
    storage_onprem = storage_bytes * d_price  # D
    fixed = colocation + staff + support + storage_onprem  # F
    storage_cloud = storage_bytes * g_price
    egress = egress_bytes_per_month * e_price
    other = storage_cloud + egress  # G
    power = load_kw * place.pue * place.electricity_usd_per_kwh * HOURS_PER_MONTH
    idle = min(idle_kw, load_kw) * place.pue * place.electricity_usd_per_kwh * HOURS_PER_MONTH
    rent = cloud_h * HOURS_PER_MONTH
    opex = fixed + idle + (power - idle) * utilization

    def bought(m: int) -> int:  # n(m)
        return max(1, math.ceil(m / lifetime - 1e-9))

    def sold(m: int) -> int:  # k(m)
        return math.floor(m / lifetime + 1e-9)

    rows = [{"month": m, "cloud_usd": (rent * utilization + other) * m,
             "onprem_usd": capex * bought(m) - residual * sold(m) + opex * m} for m in range(months + 1)]
    when = breakeven_month(capex, lifetime, fixed, power, rent, utilization, idle, residual_usd=residual,
                           cloud_other_usd_per_month=other)
    below = breakeven_utilization(capex, lifetime, fixed, power, rent, idle, residual_usd=residual,
                                  cloud_other_usd_per_month=other)
    full_own = (capex - residual) / lifetime + fixed + power
    full_rent = rent + other
    why = explain_breakeven(when, below, lifetime, full_own, full_rent)

    cloud_src = f"{where}{f', less {discount:.0%}' if discount else ''}" + (f" ({date})" if date else "")
    capex_src = f"catalog {box.id} ({box.date})" if capex_usd is None else OVERRIDE
    site_src = f"site {place.id} ({place.date})"
    m = months
    lines = (
        TcoLine("cloud", "compute", rent * utilization * m, cloud_src),
        TcoLine("cloud", "storage", storage_cloud * m, g_src if storage_bytes else "no storage given (0)"),
        TcoLine("cloud", "egress", egress * m, e_src if egress_bytes_per_month else "no egress given (0)"),
        TcoLine("on-prem", f"servers ({bought(m)} bought)", price * bought(m), capex_src),
        TcoLine("on-prem", f"network fabric ({n_frac:.1%} of server capex)", network * bought(m), n_src),
        TcoLine("on-prem", "power", (idle + (power - idle) * utilization) * m, site_src),
        TcoLine("on-prem", "colocation", colocation * m,
                site_src if place.colocation_usd_per_kw_month is not None else f"none at {place.id} (0)"),
        TcoLine("on-prem", "staff (operations)", staff * m, w_src),
        TcoLine("on-prem", f"support contract ({s_frac:.1%} of capex a year)", support * m, s_src),
        TcoLine("on-prem", "storage", storage_onprem * m, d_src if storage_bytes else "no storage given (0)"),
        TcoLine("on-prem", f"residual value ({r_frac:.0%} of capex, {sold(m)} sold)", -residual * sold(m), r_src),
    )
    return TcoComparison(dev.id, box.id, inst.key if inst else None, box.device_count, cloud_h, per_device, where,
                         date, price, box.date if capex_usd is None else None, lifetime, fixed, power, opex,
                         full_own, full_rent, when, below, why, tuple(notes), pd.DataFrame(rows), idle, utilization,
                         network, residual, staff, support, other, lines)


def line_defaults(site: str, server: str, ctx: Context | None = None) -> dict[str, float]:
    """The defaults compare_tco uses for its other lines at `site` with `server`, by keyword (SI: fractions,
    USD per server-year, USD per byte-month, USD per byte): the catalog's sourced figure, the staff
    figure as compare_tco derives it; 0 where nothing is sourced (on-prem storage). The app shows them
    beside its overrides."""
    ctx = ctx or default_context()
    costs, place, box = ctx.catalog.costs, ctx.catalog.site(site), ctx.catalog.server(server)

    def of(key: str) -> float:
        return costs[key].value if key in costs else 0.0

    if place.ops_usd_per_server_per_year is not None:
        staff = place.ops_usd_per_server_per_year
    else:
        staff = box.device_count * of("staff_fte_per_device") * of("staff_usd_per_fte_year")
    return {"network_fraction": of("network_fraction_of_capex"),
            "support_fraction_per_year": of("support_fraction_of_capex_per_year"),
            "staff_usd_per_server_per_year": staff, "residual_fraction": of("residual_fraction_of_capex"),
            "onprem_storage_usd_per_byte_month": 0.0,
            "cloud_storage_usd_per_byte_month": of("cloud_storage_usd_per_byte_month"),
            "egress_usd_per_byte": of("cloud_egress_usd_per_byte")}
