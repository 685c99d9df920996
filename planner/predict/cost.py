"""Cost: $/h of a deployment in the cloud or on-prem, and $ per unit of work.

Cloud: instances = ceil(devices / devices per instance); $/h = instances x the instance's price
for the pricing asked (PRICINGS: on_demand, spot, reserved_1y/_3y, savings_plan_1y/_3y, or
committed_1y/_3y, given by a row or derived as on-demand less a sourced discount), dated by that
price's own row. Without --instance, the cheapest catalog instance with the device is taken.
A price more than 12 months old is stale (`CostBasis.stale`, planner.hardware.catalog.is_stale).

On-prem TCO per hour of a server (Barroso et al., The Datacenter as a Computer, ch. 6):
    capex / (lifetime_years x 8766 h)
  + facility power x PUE x electricity $/kWh      (facility power = devices' predicted average
                                                   draw + the rest of the server at its rating)
  + provisioned kW x colocation $/kW-month / 730 h
  + ops $/server-year / 8766 h
At a utilization u < 1 the fixed costs are spread over u of the hours: $ per useful hour = (fixed
per hour) / u + energy per useful hour (`predict --utilization`: the price of an hour of work). A plan
(planner/plan) holds each unit every hour at full capacity, and bills `onprem_fixed_usd_per_h` per
unit-hour whatever its load, with electricity on the energy it draws.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass

from planner.errors import ConfigError
from planner.hardware.catalog import PRICINGS, Catalog, Device, Instance, Server, Site, is_stale
from planner.memo import IdentityMemo

HOURS_PER_YEAR = 8766.0
HOURS_PER_MONTH = 730.5


@dataclass(frozen=True, slots=True)
class CostBasis:
    """What a deployment costs per hour and where the price comes from."""

    usd_per_h: float
    """Dollars per hour of the whole deployment (per useful hour on-prem)."""
    kind: str
    """"cloud" or "onprem"."""
    what: str
    """e.g. "2 x aws:p5.48xlarge:us-east-1 on_demand" or "1 x dgx-h100 at site va-colo"."""
    units: int
    """Instances or servers."""
    price_date: str
    """Date of the price used (the pricing's own row) or of the capex figure (YYYY-MM[-DD])."""
    rows: tuple[str, ...]
    """Catalog rows used, as "file:key"."""
    capex_usd: float = 0.0
    """On-prem: purchase price of the servers."""
    facility_power_w: float = 0.0
    """On-prem: average facility draw (PUE applied)."""
    excluded: tuple[str, ...] = ()
    """Cost terms left out because the catalog has no sourced value for them."""
    region: str | None = None
    """Where the energy is drawn, as a carbon.csv key ("aws:us-east-1"); None if unknown."""
    pue: float | None = None
    """Power usage effectiveness of the facility; None where not sourced (cloud)."""
    carbon_kg_per_kwh: float | None = None
    """Grid intensity of an on-prem site (cloud: looked up by `region`)."""
    idle_devices: int = 0
    """Devices of the rented instances the deployment leaves unused (paid for all the same)."""

    def stale(self, today: datetime.date | None = None) -> bool:
        """Whether the price or capex figure is more than 12 months old on `today` (default: the run date)."""
        return is_stale(self.price_date, today)


def cheapest_instance(catalog: Catalog, device: Device, pricing: str = "on_demand", devices: int = 1,
                      group: int = 1) -> Instance | None:
    """The catalog instance type with `device` that runs `devices` of them for the least per hour at
    `pricing` (whole instances: 4 devices on an 8-device instance pay for 8), holding at least
    `group` devices (a tensor-parallel group never spans instances)."""
    return _CHEAPEST.get((catalog,), (device.id, pricing, devices, group),
                         lambda: _cheapest(catalog, device.id, pricing, devices, group))


_CHEAPEST = IdentityMemo()


def _cheapest(catalog: Catalog, device_id: str, pricing: str, devices: int, group: int) -> Instance | None:
    # by id, not catalog.instances_for: a profiled local device is not in the catalog (no instance)
    offers = [i for i in catalog.instances if i.device_id == device_id and pricing in i.price_usd_per_h
              and i.device_count >= group]
    return min(offers, key=lambda i: (math.ceil(devices / i.device_count) * i.price_usd_per_h[pricing], i.key),
               default=None)


def no_instance_reason(catalog: Catalog, device_id: str, pricing: str, group: int = 1) -> str:
    """Why cheapest_instance found none, in one clause: no instance has the device, none of those has a
    `pricing` price (naming the pricings they have), or none at that pricing holds a group of `group`."""
    held = [i for i in catalog.instances if i.device_id == device_id]
    if not held:
        return f"no catalog instance holds {device_id}"
    priced = [i for i in held if pricing in i.price_usd_per_h]
    if not priced:
        have = sorted({p for i in held for p in i.price_usd_per_h})
        return f"no catalog instance of {device_id} has a {pricing} price (they have: {', '.join(have)})"
    return (f"no {pricing} instance of {device_id} holds a tensor-parallel group of {group} (the largest holds "
            f"{max(i.device_count for i in priced)})")


def cloud_cost(instance: Instance, devices: int, pricing: str = "on_demand") -> CostBasis:
    """$/h of `devices` devices on `instance`s at `pricing`."""
    if pricing not in PRICINGS:
        raise ConfigError(f"unknown pricing '{pricing}'; valid: {', '.join(PRICINGS)}")
    if pricing not in instance.price_usd_per_h:
        raise ConfigError(f"{instance.key} has no {pricing} price in the catalog; it has: "
                          f"{', '.join(sorted(instance.price_usd_per_h))}")
    units = math.ceil(devices / instance.device_count)
    return CostBasis(units * instance.price_usd_per_h[pricing], "cloud", f"{units} x {instance.key} {pricing}", units,
                     instance.price_dates[pricing], (f"instances.csv:{instance.key}",),
                     region=f"{instance.provider}:{instance.region}".lower(),
                     idle_devices=units * instance.device_count - devices)


def onprem_cost(server: Server, site: Site, devices: int, device_power_w: float, device_tdp_w: float,
                utilization: float = 1.0) -> CostBasis:
    """$ per useful hour of `devices` devices in `server`s at `site`, drawing `device_power_w` each on average."""
    if not 0 < utilization <= 1:
        raise ConfigError(f"utilization must be in (0, 1], got {utilization}")
    units = math.ceil(devices / server.device_count)
    # the rest of the server (CPUs, memory, NICs, fans) at its rating; unknown rating: devices only
    rest_w = max(0.0, server.power_w - server.device_count * device_tdp_w) if server.power_w else 0.0
    it_power_w = devices * device_power_w + units * rest_w
    facility_w = it_power_w * site.pue
    capex = units * server.capex_usd
    one, excluded = onprem_fixed_usd_per_h(server, site, (server.power_w or it_power_w / units) / 1000)
    fixed_per_h = units * one
    energy_per_h = facility_w / 1000 * site.electricity_usd_per_kwh
    return CostBasis(fixed_per_h / utilization + energy_per_h, "onprem",
                     f"{units} x {server.id} at site {site.id} ({utilization:.0%} utilized)", units, server.date,
                     (f"onprem_servers.csv:{server.id}", f"sites.csv:{site.id}"), capex, facility_w, tuple(excluded),
                     region=f"site:{site.id}", pue=site.pue, carbon_kg_per_kwh=site.carbon_kg_per_kwh)


def onprem_fixed_usd_per_h(server: Server, site: Site, provisioned_kw: float) -> tuple[float, tuple[str, ...]]:
    """($ per hour of one `server` at `site` that does not depend on its load, the terms left out):
    capex / (lifetime_years x 8766 h) + provisioned kW x colocation $/kW-month / 730.5 h + ops $/server-year
    / 8766 h. The unit keeps its full capacity every hour, so no utilization divides it (planner plan)."""
    excluded = []
    colocation = site.colocation_usd_per_kw_month
    if colocation is None:
        excluded.append("colocation (none at this site)")
    ops = site.ops_usd_per_server_per_year
    if ops is None:
        excluded.append("operations staff (no sourced figure for this site)")
    fixed = (server.capex_usd / (site.lifetime_years * HOURS_PER_YEAR)
             + provisioned_kw * (colocation or 0.0) / HOURS_PER_MONTH + (ops or 0.0) / HOURS_PER_YEAR)
    return fixed, tuple(excluded)


def server_for(catalog: Catalog, device: Device) -> Server:
    """The on-prem server type holding `device`; raise naming the devices that have one."""
    for server in catalog.servers.values():
        if server.device_id == device.id:
            return server
    have = sorted({s.device_id for s in catalog.servers.values()})
    raise ConfigError(f"no on-prem server type with {device.id} in hardware_specs/onprem_servers.csv; "
                      f"servers exist for: {', '.join(have)}")
