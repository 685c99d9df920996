"""Power of a provisioned unit (a cloud instance or an on-prem server) as a server draws it: every
device at its idle power whether or not it carries load, plus the rest of the server (CPUs, DRAM,
NICs, switches, fans, power-supply losses), with the facility's PUE on top.

The rest of the server comes from the vendor's maximum system power of a reference system
(hardware_specs/energy/server_power.csv, or an on-prem server's own `power_w`), less its devices'
TDP: for a DGX H100, 10,200 W - 8 x 700 W = 4,600 W, 575 W per GPU. Vendors publish the maximum
only, so it is counted at that rating at every load (an upper bound). A unit of n devices takes
n x the per-device share of its device's reference system; a device without one counts its
devices only, and the plan says so.

Facility power of one unit carrying a share u in [0, 1] of what it sustains within the SLOs:

    P(u) = PUE x (n x P_gpu(u) + P_rest),   P_gpu(u) = P_idle + u x (P_serving - P_idle)

P_idle is the device's idle power (planner/predict/energy.py `idle_w`), P_serving its average power
while serving at capacity (the predictor's `average_power_w_per_gpu`): a unit busy a share u of
the time at capacity and idle otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from planner.hardware.catalog import CONFIDENCE, Device, Server
from planner.hardware.cells import read_rows
from planner.memo import IdentityMemo
from planner.predict.context import Context
from planner.predict.energy import energy_root

COLUMNS = ("device", "system", "device_count", "system_power_w", "date", "source", "confidence", "notes")
MAX_SYSTEM_W = 1e6


@dataclass(frozen=True, slots=True)
class ReferenceSystem:
    """A vendor's reference server of one device type and its maximum system power."""

    device: str
    """Catalog id of the device it holds."""
    system: str
    device_count: int
    system_power_w: float
    """Maximum system power from the vendor's specification, W."""
    date: str
    source: str
    confidence: str

    def rest_w_per_device(self, device_tdp_w: float) -> float:
        """Non-GPU power per device, W: (system power - devices x TDP) / devices, at least 0."""
        return max(0.0, self.system_power_w - self.device_count * device_tdp_w) / self.device_count


def load_reference_systems(path: Path) -> dict[str, ReferenceSystem]:
    """The rows of server_power.csv by device (an absent file: none; energy then counts devices only)."""
    if not path.exists():
        return {}
    out: dict[str, ReferenceSystem] = {}
    for row in read_rows(path, COLUMNS):
        device = row.slug("device")
        if device in out:
            row.fail("device", "a device listed once")
        out[device] = ReferenceSystem(device, row.text("system"), row.integer("device_count", 1, 1024),
                                      row.number("system_power_w", 1.0, MAX_SYSTEM_W), row.date(),
                                      row.text("source"), row.choice("confidence", CONFIDENCE))
    return out


_SYSTEMS = IdentityMemo(8)


def reference_systems(ctx: Context) -> dict[str, ReferenceSystem]:
    """server_power.csv of the context's hardware specs, read once per context."""
    return _SYSTEMS.get((ctx,), (), lambda: load_reference_systems(energy_root() / "server_power.csv"))


@dataclass(frozen=True, slots=True)
class UnitPower:
    """What one unit draws besides the load it carries, W (IT side, before PUE)."""

    idle_w: float | None
    """Devices at idle plus the rest of the server; None when the device has no sourced TDP."""
    rest_w: float
    """The rest of the server (0 where not sourced)."""
    rest_source: str | None
    """Where the rest comes from ("onprem_servers.csv:dgx-h100", "server_power.csv:h100-sxm"); None: not sourced."""


def unit_power(ctx: Context, device: Device, device_count: int, server: Server | None = None) -> UnitPower:
    """Idle and non-GPU power of a unit of `device_count` `device`s (an on-prem `server` uses its own
    maximum power where sourced, else its device's reference system)."""
    rest, source = 0.0, None
    tdp = device.tdp_w or 0.0
    if server is not None and server.power_w:
        rest, source = max(0.0, server.power_w - server.device_count * tdp), f"onprem_servers.csv:{server.id}"
    elif device.id in reference_systems(ctx) and tdp:
        rest = device_count * reference_systems(ctx)[device.id].rest_w_per_device(tdp)
        source = f"server_power.csv:{device.id}"
    gpu_idle = ctx.power.idle_w(device)
    idle = device_count * gpu_idle + rest if device.tdp_w and not math.isnan(gpu_idle) else None
    return UnitPower(idle, rest, source)


def rated_w(ctx: Context, server: Server, device: Device) -> float:
    """Maximum power of an on-prem server, W: its sourced power_w, else its devices' TDP plus the rest of
    the server from its device's reference system (what colocation bills and a power cap must hold)."""
    if server.power_w:
        return server.power_w
    return server.device_count * (device.tdp_w or 0.0) + unit_power(ctx, device, server.device_count, server).rest_w
