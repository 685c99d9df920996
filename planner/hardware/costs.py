"""hardware_specs/onprem_costs.csv: the sourced defaults of the renting-versus-owning comparison
(planner/plan/tco.py), one known key a row, the key naming its unit, SI at load (per-GB and per-TB
figures become per-byte, FTE per 1000 devices becomes FTE per device)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from planner.hardware.cells import parse_float, read_rows
from planner.units import GB, TB

CONFIDENCE = ("high", "medium", "low")


@dataclass(frozen=True, slots=True)
class CostFact:
    """One sourced default of the cloud-versus-on-prem comparison (onprem_costs.csv), in SI units."""

    key: str
    """SI key, naming its unit: "network_fraction_of_capex", "staff_usd_per_fte_year",
    "cloud_egress_usd_per_byte", ..."""
    value: float
    """The figure in the unit the key names (a fraction, USD, USD per byte, FTE per device)."""
    unit: str
    """The unit as the file states it (human units: "USD per GB")."""
    date: str
    """Date of the figure (YYYY-MM or YYYY-MM-DD)."""
    source: str
    """Where the figure comes from."""
    confidence: str
    """"high", "medium" or "low"."""



_COST_COLUMNS = ("key", "value", "unit", "date", "source", "confidence", "notes")
# key -> (range of the file's value, SI key, factor): the key names the unit; per-GB and per-TB figures
# become per-byte, FTE per 1000 devices becomes FTE per device.
_COST_KEYS = {
    "network_fraction_of_capex": ((0.0, 1.0), "network_fraction_of_capex", 1.0),
    "support_fraction_of_capex_per_year": ((0.0, 1.0), "support_fraction_of_capex_per_year", 1.0),
    "residual_fraction_of_capex": ((0.0, 1.0), "residual_fraction_of_capex", 1.0),
    "staff_fte_per_1000_devices": ((0.0, 1000.0), "staff_fte_per_device", 1 / 1000),
    "staff_usd_per_fte_year": ((0.0, 1e7), "staff_usd_per_fte_year", 1.0),
    "cloud_storage_usd_per_tb_month": ((0.0, 1e5), "cloud_storage_usd_per_byte_month", 1 / TB),
    "cloud_egress_usd_per_gb": ((0.0, 100.0), "cloud_egress_usd_per_byte", 1 / GB),
}


def load_costs(path: Path) -> dict[str, CostFact]:
    """onprem_costs.csv: the sourced defaults of planner.plan.tco, one known key a row, each at most once."""
    costs: dict[str, CostFact] = {}
    for row in read_rows(path, _COST_COLUMNS):
        key = row.text("key")
        if key not in _COST_KEYS:
            row.fail("key", "one of " + ", ".join(_COST_KEYS))
        (lo, hi), si_key, factor = _COST_KEYS[key]
        if si_key in costs:
            row.fail("key", "a key not listed twice")
        unit = row.text("unit")
        source, date, confidence = row.text("source"), row.date(), row.choice("confidence", CONFIDENCE)
        number = parse_float(row.cells["value"].strip())
        if number is None or not lo <= number < hi:
            row.fail("value", f"a number in [{lo:g}, {hi:g})")
        costs[si_key] = CostFact(si_key, number * factor, unit, date, source, confidence)
    return costs
