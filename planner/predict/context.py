"""What a prediction is made with: the catalog, defaults, power model and calibration profiles
(Context), and what one device resolves to once (Target).

The API (planner/predict/api.py) resolves a device name into a Target once per request; the
step timing, memory, energy and cost below it take that plain value and never reach back up.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from planner.errors import UnknownNameError
from planner.hardware.catalog import Catalog, Device, load_catalog
from planner.hardware.cpu import HostCpu, host_device, load_flop_rules, read_host
from planner.hardware.efficiency import DatasheetEfficiency, Defaults, EfficiencyModel, load_defaults
from planner.hardware.measured_bands import NO_BANDS, MeasuredBands, load_measured_bands
from planner.predict.energy import PowerModel

ALL_TIERS = None
"""No engine: the device's default profile, then any other it has: what a single op (`planner op`) or a
caller with no engine is predicted from (an engine passes Engine.libraries)."""


@dataclass(frozen=True, slots=True)
class Target:
    """One device as a prediction needs it, resolved once: its efficiency model, power model,
    defaults, node size and the catalog that prices it."""

    device: Device
    efficiency: EfficiencyModel
    """Measured, transferred or datasheet: its tier decides the uncertainty band."""
    power: PowerModel
    defaults: Defaults
    node_size: int
    """Devices that talk over the fast link of one server (count)."""
    catalog: Catalog
    """Instances, servers, sites and carbon intensities: what pricing and footprint read."""
    band_fraction: float = 0.0
    """Relative half-width of the band of every end-to-end time and rate predicted on this target: the wider of
    its kernels' band (efficiency.band_fraction) and the measured error of its tier on its device family
    (planner/hardware/measured_bands.py)."""
    band_basis: str = ""
    """Where band_fraction comes from (one line)."""


@dataclass(frozen=True)
class Context:
    """Catalog, defaults, calibration profiles and models a prediction is made with."""

    catalog: Catalog
    defaults: Defaults
    power: PowerModel
    profiles: Mapping = field(default_factory=dict)
    """Calibration profiles by device id (hardware_specs/calibration/)."""
    cross_library: bool = True
    """Whether an engine with no profile of its own libraries on a device may take another library's
    (tier cross-library, Engine.libraries' second part, for the op categories its third names); False: the
    datasheet tier with the engine's rules
    (benchmarks/dev_validation.py --no-cross-library compares the two)."""
    bands: MeasuredBands = NO_BANDS
    """The measured end-to-end error of each tier on each device family (hardware_specs/efficiency/
    measured_bands.json); NO_BANDS: a prediction keeps its kernels' band."""
    host: Callable[[], HostCpu] = read_host
    """What `--device cpu` names: the local CPU as the system describes it (planner/hardware/cpu.py; a test
    passes a reader of fixture text)."""
    cpu_rules: str | None = None
    """The FLOP-per-cycle table of CPUs without a profile (hardware_specs/cpu/flop_per_cycle.csv); None: the
    shipped one."""
    _efficiency: dict = field(default_factory=dict, repr=False)
    _targets: dict = field(default_factory=dict, repr=False)
    _caches: dict = field(default_factory=dict, repr=False)

    def cache(self, name: str) -> dict:
        """A dict that callers above the predictor (serving step models, plan capacities) keep results of
        this context in, by `name`: a result lives and dies with the data it came from, and another
        context (another catalog) never sees it."""
        return self._caches.setdefault(name, {})

    def device(self, name: str) -> Device:
        """A catalog device by id or alias, a profiled device that is not in the catalog (a CPU), or "cpu": the
        local CPU (local_cpu)."""
        if name.strip().lower() == "cpu":
            return self.local_cpu()
        try:
            return self.catalog.device(name)
        except UnknownNameError as exc:
            key = name.strip().lower()
            if key in self.profiles:
                from planner.hardware.profile import profile_device
                device = profile_device(self.profiles[key])
                if device is not None:
                    return device
            if key == self.local_cpu().id:
                return self.local_cpu()
            raise UnknownNameError("device", name, {*exc.valid, *self.profiles, "cpu"}, aliases=exc.aliases) from None

    def local_cpu(self) -> Device:
        """This machine's CPU: its calibration profile's device where it has one (tier measured), else its
        datasheet figures read from the system (planner/hardware/cpu.py; tier datasheet). Read once per context."""
        cache = self.cache("local_cpu")
        if "device" not in cache:
            cache["device"] = host_device(self.host(), load_flop_rules(self.cpu_rules), self.profiles)
        return cache["device"]

    def efficiency(self, device: Device, tiers=ALL_TIERS) -> EfficiencyModel:
        """The efficiency model of `device` for an engine's kernel libraries (Engine.libraries: own, other, the
        op categories the other libraries time):
        its own profile, a transferred neighbour's, another library's, or datasheet; its tier decides the
        uncertainty band."""
        if not self.cross_library and tiers is not None and len(tiers) >= 2 and tiers[1]:
            tiers = (tiers[0], ())
        key = (device.id, tiers)
        if key not in self._efficiency:
            from planner.hardware.profile_select import efficiency_for
            self._efficiency[key] = efficiency_for(device, self.defaults, self.profiles,
                                                   DatasheetEfficiency(self.defaults), tiers)
        return self._efficiency[key]

    def _family_device(self, device: Device, eff) -> Device:
        """The device whose family the band is measured on: a copy of a catalog device (Device.same_chip) that
        takes that device's own profile is that chip, whatever generation a user named; else itself."""
        profile = getattr(eff, "profile", None)
        owner = self.catalog.devices.get(profile.device_id) if profile is not None else None
        return owner if owner is not None and owner.id != device.id and owner.same_chip(device) else device

    def node_size(self, device: Device) -> int:
        """Devices that talk over the fast link of one server: the scale-up domain, or for PCIe cards
        the largest catalog instance or on-prem server holding the device."""
        sizes = [device.devices_per_node]
        if not device.scaleup_bytes_per_s:
            # by id, not catalog.instances_for: a profiled local device is not in the catalog (no instance)
            sizes += [i.device_count for i in self.catalog.instances if i.device_id == device.id]
            sizes += [s.device_count for s in self.catalog.servers.values() if s.device_id == device.id]
        return max(sizes)

    def target(self, device: str | Device, tiers=ALL_TIERS, gemm_dtype: str | None = None) -> Target:
        """The Target of a device (name, alias or Device) whose efficiency comes from the profiles of
        `tiers` that measured GEMMs at `gemm_dtype` (any dtype when None), resolved once and cached."""
        dev = device if isinstance(device, Device) else self.device(device)
        key = (dev.id, tiers, gemm_dtype)
        known = self._targets.get(key)
        if known is None or (known.device is not dev and known.device != dev):
            eff = self.efficiency(dev, tiers)
            # a published table names its dtypes: GEMMs at another dtype were never timed there (a
            # measured profile keeps its fp32 curve for them, as calibrate measured what the device runs)
            if gemm_dtype and getattr(getattr(eff, "profile", None), "tier", "") == "published" \
                    and not eff.measures(gemm_dtype):
                eff = eff.fallback
            band, basis = self.bands.band(eff.tier, self._family_device(dev, eff), eff.band_fraction)
            self._targets[key] = Target(dev, eff, self.power, self.defaults, self.node_size(dev), self.catalog,
                                        band, basis)
        return self._targets[key]


def with_catalog(ctx: Context, catalog: Catalog) -> Context:
    """`ctx` over another catalog (the shipped one with a user's own devices added): the same profiles
    and defaults, the power model of the new catalog, and empty caches."""
    return Context(catalog, ctx.defaults, PowerModel.from_catalog(catalog), ctx.profiles, bands=ctx.bands,
                   host=ctx.host, cpu_rules=ctx.cpu_rules)


@lru_cache(maxsize=1)
def default_context() -> Context:
    """The context built from the shipped hardware_specs/, or from the directory named by the
    environment variable PLANNER_HARDWARE_SPECS (cached)."""
    from planner.files import check_specs_env
    from planner.hardware.profile import load_profiles

    check_specs_env()
    root = os.environ.get("PLANNER_HARDWARE_SPECS") or None
    catalog = load_catalog(root)
    profiles = load_profiles(str(Path(root) / "calibration") if root else None)
    defaults = load_defaults(str(Path(root) / "efficiency" / "defaults.json") if root else None)
    bands_file = Path(root) / "efficiency" / "measured_bands.json" if root else None
    # a specs folder of its own without measured bands: its predictions keep their kernels' bands
    bands = NO_BANDS if bands_file is not None and not bands_file.is_file() else \
        load_measured_bands(str(bands_file) if bands_file else None)
    rules = Path(root) / "cpu" / "flop_per_cycle.csv" if root else None
    return Context(catalog, defaults, PowerModel.from_catalog(catalog), profiles, bands=bands,
                   cpu_rules=str(rules) if rules is not None and rules.is_file() else None)
