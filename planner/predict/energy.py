"""Energy: power per op between idle and TDP by its utilization, facility energy and carbon.

Power of a device running one op (the linear utilization model of Cloud Carbon Footprint,
W = W_idle + u·(W_max − W_idle), with compute and memory traffic drawing differently):

    P = P_idle + (TDP − P_idle) · min(1, a_c·u_c + a_m·u_m)

u_c = compute_s / time_s and u_m = memory_s / time_s are how much of the op's time the compute
units and the memory system are busy at their achievable rate; a_c and a_m are the fractions
of the idle-to-TDP range drawn by compute-bound and by memory-bound work
(hardware_specs/power_model.csv, with sources). P_idle is the device's sourced idle power, else
idle_fraction_of_tdp × TDP. While a device waits (communication, pipeline bubbles) it draws P_idle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import ConfigError
from planner.hardware.catalog import Catalog, Device
from planner.predict.roofline import OpTime

J_PER_KWH = 3.6e6
REQUIRED_KEYS = ("idle_fraction_of_tdp", "compute_bound_fraction_of_tdp", "memory_bound_fraction_of_tdp")


@dataclass(frozen=True, slots=True)
class PowerModel:
    """Coefficients of the per-op power model."""

    idle_fraction_of_tdp: float
    """Idle power over TDP, for devices with no sourced idle power."""
    compute_fraction: float
    """a_c: share of the idle-to-TDP range a fully compute-bound op draws."""
    memory_fraction: float
    """a_m: share of the idle-to-TDP range a fully memory-bound op draws."""

    @classmethod
    def from_catalog(cls, catalog: Catalog) -> PowerModel:
        """Build from the catalog's power_model.csv; raise naming the missing keys."""
        missing = [k for k in REQUIRED_KEYS if k not in catalog.power_model]
        if missing:
            raise ConfigError(f"hardware_specs/power_model.csv lacks {', '.join(missing)}")
        pm = catalog.power_model
        idle = pm["idle_fraction_of_tdp"]
        if idle >= 1:
            raise ConfigError(f"hardware_specs/power_model.csv: idle_fraction_of_tdp is {idle:g}; it must be below 1 "
                              "(a device drawing its TDP when idle leaves no range for load to move)")
        # the catalog gives the power drawn as a fraction of TDP; convert to the share of the
        # idle-to-TDP range: a = (f − idle) / (1 − idle)
        share = lambda f: max(0.0, min(1.0, (f - idle) / (1 - idle)))
        return cls(idle, share(pm["compute_bound_fraction_of_tdp"]), share(pm["memory_bound_fraction_of_tdp"]))

    def idle_w(self, device: Device) -> float:
        """Idle power of `device` in watts; NaN when the catalog has neither idle power nor TDP."""
        if device.idle_w:
            return device.idle_w
        return self.idle_fraction_of_tdp * device.tdp_w if device.tdp_w else math.nan

    def power_w(self, t: OpTime, device: Device) -> float:
        """Average power in watts while `device` runs an op timed `t` (NaN without a sourced TDP)."""
        idle = self.idle_w(device)
        if not device.tdp_w:
            return math.nan
        if t.time_s <= 0:
            return idle
        load = self.compute_fraction * t.compute_s / t.time_s + self.memory_fraction * t.memory_s / t.time_s
        return idle + (device.tdp_w - idle) * min(1.0, load)

    def op_energy_j(self, t: OpTime, device: Device) -> float:
        """Energy in joules of one op timed `t` on `device`."""
        return self.power_w(t, device) * t.time_s


def facility_kwh(device_energy_j: float, pue: float) -> float:
    """Facility energy in kWh: device energy x power usage effectiveness."""
    return device_energy_j * pue / J_PER_KWH


def carbon_kg(kwh: float, kg_co2e_per_kwh: float) -> float:
    """Emissions in kg CO2e of `kwh` at a grid intensity."""
    return kwh * kg_co2e_per_kwh
