"""What every prediction shares: the result it returns (Prediction), how a deployment is priced
(CostOptions, price) and how the result is assembled with its footprint and notes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from planner.errors import ConfigError
from planner.predict.context import Target
from planner.predict.cost import CostBasis, cheapest_instance, cloud_cost, no_instance_reason, onprem_cost, server_for
from planner.predict.energy import carbon_kg, facility_kwh
from planner.predict.memory import MemoryBreakdown
from planner.units import band, json_safe
from planner.workload.parallelism import Parallelism
from planner.workload.quant import describe


@dataclass(frozen=True, slots=True)
class CostOptions:
    """How to price a deployment: a cloud instance, an on-prem site, or the cheapest instance."""

    instance: str | None = None
    site: str | None = None
    pricing: str = "on_demand"
    utilization: float = 1.0
    """On-prem: fraction of hours the servers do useful work."""


@dataclass(frozen=True, slots=True)
class Prediction:
    """A prediction of one configuration. Times in s, energy in J, money in USD, bytes in B."""

    model: str
    device: str
    gpus: int
    mode: str
    dtype: str
    parallelism: Parallelism
    tier: str
    band_fraction: float
    """Relative half-width of the uncertainty band of every time (throughputs inversely)."""
    memory: MemoryBreakdown
    energy_j: float
    """Device energy of one unit of work of the whole deployment: a batch (inference) or a step."""
    cost: CostBasis | None
    metrics: dict[str, float]
    """Mode-specific figures: batch, ttft_s, tpot_s, latency_s, throughput_tokens_per_s, ... (see as_dict)."""
    rows: tuple[str, ...]
    """Catalog rows used, "file:key (date)"."""
    notes: tuple[str, ...] = field(default=())
    engine: str = "eager"
    """The execution engine predicted (hardware_specs/engines)."""
    profile: str | None = None
    """The calibration profile the efficiencies came from (hardware_specs/calibration/<device>/<file>) and
    its kernel library, or None (datasheet)."""
    power_model: str = ""
    """Which power model drew the energy: measured curve of a device, transferred from one, or datasheet
    fractions (planner/predict/energy.py, PowerModel.source)."""
    band_basis: str = ""
    """Where band_fraction comes from: the measured end-to-end error of the tier on the device family, or the
    kernels' (Target.band_basis)."""

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def band(self, value: float, inverse: bool = False) -> tuple[float, float]:
        """(low, high) of a time (or, inverse=True, a rate) under this prediction's band."""
        return band(value, self.band_fraction, inverse)

    def as_dict(self, safe: bool = True) -> dict:
        """Flat JSON-ready dict with the keys the CLI promises; an unknown number is None (null). With
        safe=False a non-finite number stays as it is (for a caller that converts every value anyway)."""
        par, memory, cost, metrics = self.parallelism, self.memory.as_dict(), self.cost, self.metrics
        out = {"model": self.model, "device": self.device, "gpus": self.gpus, "mode": self.mode, "dtype": self.dtype,
               "precision": describe(self.dtype),
               "engine": self.engine,
               "tp": par.tp, "pp": par.pp, "dp": par.dp, "ep": par.ep, "zero": par.zero, "tier": self.tier,
               "profile": self.profile, "band_fraction": self.band_fraction, "band_basis": self.band_basis,
               "fits": memory["total_bytes"] <= memory["capacity_bytes"],
               "memory_bytes_per_gpu": memory["total_bytes"], "memory": memory,
               "energy_j": self.energy_j, "power_model": self.power_model,
               "cost_usd_per_h": cost.usd_per_h if cost else None,
               "cost_basis": cost.what if cost else None,
               "price_date": cost.price_date if cost else None,
               "price_stale": cost.stale() if cost else None}
        out.update(metrics)
        for key, name in _TIME_RANGES:
            if key in metrics:
                out[name] = list(band(metrics[key], self.band_fraction))
        for key, name in _RATE_RANGES:
            if key in metrics:
                out[name] = list(band(metrics[key], self.band_fraction, True))
        out["catalog_rows"] = list(self.rows + (cost.rows if cost else ()))
        out["notes"] = list(self.notes)
        return json_safe(out) if safe else out


_TIME_RANGES = tuple((key, key.removesuffix("_s") + "_range_s")
                     for key in ("ttft_s", "tpot_s", "latency_s", "step_time_s"))
IDLE_NOTE = re.compile(r"cost pays for (\d+) idle ")
"""The note make_prediction writes where whole instances hold devices the deployment leaves idle; its
count is read back from a sweep row's notes (planner/cli/sweep.py)."""
_RATE_RANGES = tuple((key, key.replace("_per_s", "_range_per_s"))
                     for key in ("throughput_tokens_per_s", "throughput_samples_per_s", "tokens_per_s"))


def price(target: Target, devices: int, options: CostOptions, device_power_w: float,
          group: int = 1) -> CostBasis | None:
    """The cost basis of `devices` devices whose tensor-parallel groups of `group` must share an instance
    or server; None when the catalog has no instance with the device that holds a group."""
    catalog, device = target.catalog, target.device
    if options.site is not None:
        site = catalog.site(options.site)
        server = server_for(catalog, device)
        if server.device_count < group:
            raise ConfigError(f"a tensor-parallel group of {group} must fit in one server; {server.id} holds "
                              f"{server.device_count}")
        return onprem_cost(server, site, devices, device_power_w, device.tdp_w, options.utilization)
    if options.instance is not None:
        instance = catalog.instance(options.instance)
        if instance.device_id != device.id:
            raise ConfigError(f"instance {instance.key} holds {instance.device_id}, not {device.id}")
        if instance.device_count < group:
            raise ConfigError(f"a tensor-parallel group of {group} must fit in one instance; {instance.key} holds "
                              f"{instance.device_count}")
        return cloud_cost(instance, devices, options.pricing)
    instance = cheapest_instance(catalog, device, options.pricing, devices, group)
    return cloud_cost(instance, devices, options.pricing) if instance else None


def _footprint(target: Target, basis, metrics: dict, energy_j: float, per: str, scale: float, notes: list) -> None:
    """Add facility kWh (PUE applied) and kg CO2e at the regional intensity for `scale` x the unit of work."""
    if basis is None or energy_j != energy_j:
        return
    pue = basis.pue
    if pue is None:  # cloud: the provider's fleet PUE (hardware_specs/energy/cloud_pue.csv), else its default row
        provider = (basis.region or "").split(":")[0]
        row = target.power.cloud_pue(provider)
        if row is None:
            pue = 1.0
            notes.append("cloud facility overhead (PUE) is not in the catalog: kWh and carbon count device energy only")
        else:
            pue = row.pue
            whose = f"{provider}'s fleet PUE" if row.provider == provider else \
                f"the default PUE of a provider without a row ({provider})"
            notes.append(f"kWh and carbon include {whose}, {pue:g} (hardware_specs/energy/cloud_pue.csv, {row.date})")
    kwh = facility_kwh(energy_j * scale, pue)
    metrics[f"kwh_per_{per}"] = kwh
    metrics["pue"] = pue
    intensity = basis.carbon_kg_per_kwh
    if intensity is None and basis.region:
        intensity = target.catalog.carbon_kg_per_kwh.get(basis.region)
    if intensity is None:
        notes.append(f"no grid carbon intensity for region {basis.region!r} in carbon.csv: no carbon figure")
        return
    metrics[f"carbon_kg_per_{per}"] = carbon_kg(kwh, intensity)
    metrics["carbon_kg_co2e_per_kwh"] = intensity


def make_prediction(target: Target, model, par: Parallelism, mode: str, dtype: str,
                    memory: MemoryBreakdown, energy_j: float, basis: CostBasis | None, metrics: dict,
                    engine: str = "eager", pricing: str = "on_demand", group: int = 1,
                    diagnosis: list[str] | tuple[str, ...] = ()) -> Prediction:
    """Assemble a Prediction: energy footprint per job, notes on what is missing, tier and rows used;
    `diagnosis`: the notes on what bounds the step (planner/predict/diagnosis.py), after the tier's."""
    device, eff = target.device, target.efficiency
    notes = [f"tier {eff.tier}: {eff.source}"] if getattr(eff, "source", "") else []
    notes.extend(diagnosis)
    if "j_per_output_token" in metrics:
        _footprint(target, basis, metrics, metrics["j_per_output_token"], "million_output_tokens", 1e6, notes)
    elif "j_per_sample" in metrics:
        _footprint(target, basis, metrics, metrics["j_per_sample"], "thousand_samples", 1e3, notes)
    elif "energy_to_train_j" in metrics:
        _footprint(target, basis, metrics, metrics["energy_to_train_j"], "training_run", 1.0, notes)
    elif "j_per_step" in metrics:
        _footprint(target, basis, metrics, metrics["j_per_step"], "step", 1.0, notes)
    if not device.tdp_w:
        notes.append(f"{device.id} has no sourced TDP: energy is not predicted")
    if basis is None:
        reason = no_instance_reason(target.catalog, device.id, pricing, group)
        notes.append(f"{reason}: no cost (pass --site for on-prem)")
    elif basis.excluded:
        notes.append("cost excludes: " + "; ".join(basis.excluded))
    if basis is not None and basis.idle_devices > 0:  # read back by IDLE_NOTE
        notes.append(f"cost pays for {basis.idle_devices} idle {device.id} of the whole instance{'s' if basis.units > 1 else ''} "
                     f"rented ({basis.what}); more replicas (--dp) or `planner compare`, which fills the instance, "
                     "use them")
    if not memory.fits:
        notes.append(f"does not fit: {memory.total_bytes / 1e9:.1f} GB needed per device, "
                     f"{memory.capacity_bytes / 1e9:.1f} GB usable; short by {memory.shortfall_bytes / 1e9:.1f} GB")
    return Prediction(model.name, device.id, par.devices, mode, dtype, par, eff.tier, target.band_fraction, memory,
                      energy_j, basis, metrics, (_catalog_row(target),), tuple(notes), engine,
                      _profile_name(eff), target.power.source(device).label, target.band_basis)


def _catalog_row(target) -> str:
    """Where the device's figures come from: its devices.csv row, or for a device not in the catalog (a CPU read
    from this host or from its calibration profile) the first clause of its source."""
    device = target.device
    if device.id in target.catalog.devices:
        return f"devices.csv:{device.id} ({device.date})"
    return f"{device.id}: {device.source.split(' (')[0]} ({device.date})"


def _profile_name(eff) -> str | None:
    """"<file> (<library>)" of the profile behind an efficiency model, None for the datasheet tier."""
    profile = getattr(eff, "profile", None)
    return f"{profile.name} ({profile.library})" if profile is not None else None
