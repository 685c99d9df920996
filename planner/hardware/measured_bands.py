"""The end-to-end uncertainty band of a prediction, from the measured error of its tier on its device family.

A profile's band (ProfileEfficiency.band_fraction) is the error of its kernels alone: it says nothing of
what the model leaves out end to end (an engine's host work, a power cap, a clock above the rated one).
`hardware_specs/efficiency/measured_bands.json` records, for each tier and device family (vendor and
generation, as devices.csv names them), the error of planner's end-to-end predictions against published
measurements: the 90th percentile of |ln(predicted / measured)| over the rows of the validation set
(benchmarks/dev_validation.py) predicted on that tier and family. `benchmarks/measured_bands.py --write`
writes it from a dev_validation run; nothing here fits a prediction, only its band.

A prediction's band is the wider of its kernels' band and the measured one:

    p90 = P90 |ln(predicted / measured)|                 (rows of the tier and family)
    f   = exp(p90) - 1                                   (relative half-width; a rate or time off by
                                                          exp(p90) either way at the 90th percentile)
    band_fraction = max(kernel band, f)

The family's figure is taken when it has at least `min_rows` rows; else the tier's over every family
(a family never validated, e.g. a user's own accelerator); else (a tier with no rows at all) the
kernels' band alone, and the basis says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from planner.errors import ConfigError
from planner.files import parse_json, read_text, shipped_specs
from planner.hardware.catalog import Device

BANDS_PATH = shipped_specs() / "efficiency" / "measured_bands.json"
ANY_FAMILY = "*"
"""The family key of a tier's figure over every family."""


def family(device: Device) -> str:
    """The device family a band is measured on: "<vendor> <generation>", lower case ("nvidia hopper")."""
    return f"{device.vendor.strip().lower()} {device.generation.strip().lower()}".strip()


@dataclass(frozen=True, slots=True)
class BandGroup:
    """The measured error of one tier on one family (or on every family: family "*")."""

    tier: str
    family: str
    rows: int
    """Validation rows predicted on this tier and family (count)."""
    median_abs_ln: float
    p90_abs_ln: float

    @property
    def band_fraction(self) -> float:
        """exp(p90 |ln|) - 1: the relative half-width of the band (dimensionless)."""
        return math.expm1(self.p90_abs_ln)

    def basis(self) -> str:
        """One line: where the band comes from."""
        where = "every family" if self.family == ANY_FAMILY else self.family
        return (f"measured error of the {self.tier} tier on {where}: p90 {math.exp(self.p90_abs_ln):.2f}x, "
                f"median {math.exp(self.median_abs_ln):.2f}x over {self.rows} published results")


@dataclass(frozen=True, slots=True)
class MeasuredBands:
    """Every (tier, family) group of measured_bands.json, and the rule that picks one."""

    groups: tuple[BandGroup, ...]
    min_rows: int
    source: str
    date: str

    def group(self, tier: str, device: Device) -> BandGroup | None:
        """The family's group with >= min_rows rows, else the tier's over every family, else None."""
        by_key = {(g.tier, g.family): g for g in self.groups}
        own = by_key.get((tier, family(device)))
        if own is not None and own.rows >= self.min_rows:
            return own
        return by_key.get((tier, ANY_FAMILY))

    def band(self, tier: str, device: Device, kernel_band: float) -> tuple[float, str]:
        """(band fraction, basis line) of a prediction on `tier` and `device` whose kernels' band is
        `kernel_band`: the wider of the two (module docstring)."""
        found = self.group(tier, device)
        if found is None:
            return kernel_band, f"kernel error of the {tier} tier (no published end-to-end result on it)"
        if found.band_fraction >= kernel_band:
            return found.band_fraction, found.basis()
        return kernel_band, f"kernel error of the {tier} tier (wider than its {found.basis()})"


NO_BANDS = MeasuredBands((), 1, "none", "")
"""No measured bands: every prediction keeps its kernels' band."""


@lru_cache(maxsize=4)
def load_measured_bands(path: str | None = None) -> MeasuredBands:
    """The measured bands of hardware_specs/efficiency/measured_bands.json (or `path`), checked; ConfigError
    naming the file and the entry when a group lacks a key or a number is out of range (rows a whole
    number >= 1, errors finite and >= 0, the median not above the p90)."""
    file = Path(path) if path else BANDS_PATH
    where = f"measured bands '{file}'"
    raw = parse_json(read_text(file, "measured bands"), where)
    if not isinstance(raw, dict) or not isinstance(raw.get("groups"), list):
        raise ConfigError(f"{where}: a JSON object with a 'groups' list expected")
    min_rows = raw.get("min_rows")
    if not isinstance(min_rows, int) or isinstance(min_rows, bool) or min_rows < 1:
        raise ConfigError(f"{where}: min_rows must be a whole number >= 1, got {min_rows!r}")
    groups = []
    for i, g in enumerate(raw["groups"]):
        at = f"{where}: groups[{i}]"
        if not isinstance(g, dict):
            raise ConfigError(f"{at}: an object expected")
        tier, fam, rows = g.get("tier"), g.get("family"), g.get("rows")
        if not isinstance(tier, str) or not isinstance(fam, str) or not tier or not fam:
            raise ConfigError(f"{at}: 'tier' and 'family' must be non-empty text")
        if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1:
            raise ConfigError(f"{at}: 'rows' must be a whole number >= 1, got {rows!r}")
        med, p90 = g.get("median_abs_ln"), g.get("p90_abs_ln")
        for key, value in (("median_abs_ln", med), ("p90_abs_ln", p90)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 20:
                raise ConfigError(f"{at}: '{key}' must be a number in [0, 20), got {value!r}")
        if med > p90:
            raise ConfigError(f"{at}: median_abs_ln {med} is above p90_abs_ln {p90}")
        groups.append(BandGroup(tier, fam.lower(), rows, float(med), float(p90)))
    return MeasuredBands(tuple(groups), min_rows, str(raw.get("source", "")), str(raw.get("date", "")))
