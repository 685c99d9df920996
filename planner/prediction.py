"""What every prediction shares: the context it is made in, the result it returns, the cost and
communication pieces that inference and training both use."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from functools import lru_cache

from planner.catalog import Catalog, Device, load_catalog
from planner.cost import CostBasis, cheapest_instance, cloud_cost, onprem_cost, server_for
from planner.device_graph import DeviceGraph
from planner.dtypes import get_dtype
from planner.efficiency import DatasheetEfficiency, Defaults, EfficiencyModel, load_defaults
from planner.energy import PowerModel, carbon_kg, facility_kwh
from planner.errors import ConfigError, UnknownNameError
from planner.memory import MemoryBreakdown
from planner.parallel import Parallelism, collective_time_s


@dataclass(frozen=True)
class Context:
    """Catalog, defaults, calibration profiles and models a prediction is made with."""

    catalog: Catalog
    defaults: Defaults
    power: PowerModel
    profiles: dict = field(default_factory=dict)
    """Calibration profiles by device id (hardware_specs/calibration/)."""
    _efficiency: dict = field(default_factory=dict, repr=False)

    def device(self, name: str) -> Device:
        """A catalog device by id or alias, or a profiled device that is not in the catalog (a CPU)."""
        try:
            return self.catalog.device(name)
        except UnknownNameError as exc:
            key = name.strip().lower()
            if key in self.profiles:
                from planner.profile import profile_device
                device = profile_device(self.profiles[key])
                if device is not None:
                    return device
            raise UnknownNameError("device", name, list(exc.valid) + sorted(self.profiles)) from None

    def efficiency(self, device: Device) -> EfficiencyModel:
        """The efficiency model of `device`: measured (its profile), transferred (a profiled neighbour)
        or datasheet; its tier decides the uncertainty band."""
        if device.id not in self._efficiency:
            from planner.profile import efficiency_for
            self._efficiency[device.id] = efficiency_for(device, self.defaults, self.profiles,
                                                         DatasheetEfficiency(self.defaults))
        return self._efficiency[device.id]

    def node_size(self, device: Device) -> int:
        """Devices that talk over the fast link of one server: the scale-up domain, or for PCIe cards
        the largest catalog instance or on-prem server holding the device."""
        sizes = [device.devices_per_node]
        if not device.scaleup_bytes_per_s:
            sizes += [i.device_count for i in self.catalog.instances_for(device.id)]
            sizes += [s.device_count for s in self.catalog.servers.values() if s.device_id == device.id]
        return max(sizes)


@lru_cache(maxsize=1)
def default_context() -> Context:
    """The context built from the shipped hardware_specs/, or from the directory named by the
    environment variable PLANNER_HARDWARE_SPECS (cached)."""
    from planner.profile import load_profiles

    root = os.environ.get("PLANNER_HARDWARE_SPECS") or None
    catalog = load_catalog(root)
    profiles = load_profiles(str(Path(root) / "calibration") if root else None)
    return Context(catalog, load_defaults(), PowerModel.from_catalog(catalog), dict(profiles))


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

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def band(self, value: float, inverse: bool = False) -> tuple[float, float]:
        """(low, high) of a time (or, inverse=True, a rate) under this prediction's band."""
        f = self.band_fraction
        return (value / (1 + f), value / (1 - f)) if inverse and f < 1 else (value * (1 - f), value * (1 + f))

    def as_dict(self) -> dict:
        """Flat JSON-ready dict with the keys the CLI promises."""
        out = {"model": self.model, "device": self.device, "gpus": self.gpus, "mode": self.mode, "dtype": self.dtype,
               "tp": self.parallelism.tp, "pp": self.parallelism.pp, "dp": self.parallelism.dp,
               "ep": self.parallelism.ep, "zero": self.parallelism.zero, "tier": self.tier,
               "band_fraction": self.band_fraction, "fits": self.fits,
               "memory_bytes_per_gpu": self.memory.total_bytes, "memory": self.memory.as_dict(),
               "energy_j": self.energy_j,
               "cost_usd_per_h": self.cost.usd_per_h if self.cost else None,
               "cost_basis": self.cost.what if self.cost else None,
               "price_date": self.cost.price_date if self.cost else None}
        out.update(self.metrics)
        for key in ("ttft_s", "tpot_s", "latency_s", "step_time_s"):
            if key in self.metrics:
                out[key.removesuffix("_s") + "_range_s"] = list(self.band(self.metrics[key]))
        for key in ("throughput_tokens_per_s", "throughput_samples_per_s", "tokens_per_s"):
            if key in self.metrics:
                out[key.replace("_per_s", "_range_per_s")] = list(self.band(self.metrics[key], inverse=True))
        out["catalog_rows"] = list(self.rows + (self.cost.rows if self.cost else ()))
        out["notes"] = list(self.notes)
        return out


def price(ctx: Context, device: Device, devices: int, options: CostOptions, device_power_w: float,
          group: int = 1) -> CostBasis | None:
    """The cost basis of `devices` devices whose tensor-parallel groups of `group` must share an instance
    or server; None when the catalog has no instance with the device that holds a group."""
    if options.site is not None:
        site = ctx.catalog.site(options.site)
        server = server_for(ctx.catalog, device)
        if server.device_count < group:
            raise ConfigError(f"a tensor-parallel group of {group} must fit in one server; {server.id} holds "
                              f"{server.device_count}")
        return onprem_cost(server, site, devices, device_power_w, device.tdp_w, options.utilization)
    if options.instance is not None:
        instance = ctx.catalog.instance(options.instance)
        if instance.device_id != device.id:
            raise ConfigError(f"instance {instance.key} holds {instance.device_id}, not {device.id}")
        if instance.device_count < group:
            raise ConfigError(f"a tensor-parallel group of {group} must fit in one instance; {instance.key} holds "
                              f"{instance.device_count}")
        return cloud_cost(instance, devices, options.pricing)
    instance = cheapest_instance(ctx.catalog, device, options.pricing, devices, group)
    return cloud_cost(instance, devices, options.pricing) if instance else None


def activation_bytes(dg: DeviceGraph, tokens: int) -> float:
    """Bytes of a [tokens, hidden] activation in the workload dtype (a TP all-reduce message)."""
    return tokens * dg.config.hidden_size * get_dtype(dg.dtype).bits / 8


def layer_comm_s(dg: DeviceGraph, stage: int, tokens: int, device: Device, defaults: Defaults, node: int,
                 passes: int = 1) -> float:
    """Tensor- and expert-parallel communication of one stage for `tokens` tokens, per pass.

    TP (Megatron): one all-reduce of [tokens, d] after attention and one after the MLP per layer
    (one per layer for a parallel block), one for the vocabulary-parallel embedding on the first
    stage. EP: an all-to-all to dispatch and one to combine the [tokens·k, d] routed rows per
    MoE layer. `node`: devices per server on the fast link. `passes`: 1 for a forward, 2 for forward
    and backward.
    """
    par, cfg = dg.parallelism, dg.config
    if dg.model.family != "decoder" or (par.tp == 1 and par.ep == 1):
        return 0.0
    layers = dg.layers_on_stage(stage)
    message = activation_bytes(dg, tokens)
    total = 0.0
    if par.tp > 1:
        per_layer = 1 if cfg.parallel_block else 2
        count = layers * per_layer + (1 if stage == 0 else 0)
        total += count * collective_time_s("allreduce", message, par.tp, device, defaults, node)
    if par.ep > 1 and cfg.num_experts:
        routed = message * cfg.experts_per_token
        per_node = max(1, node // par.pp)
        total += layers * 2 * collective_time_s("alltoall", routed, par.ep, device, defaults, per_node)
    return total * passes


def pipeline_hop_s(dg: DeviceGraph, tokens: int, device: Device, defaults: Defaults, node: int) -> float:
    """One point-to-point send of [tokens, d] between consecutive pipeline stages."""
    if dg.parallelism.pp == 1:
        return 0.0
    crosses = dg.parallelism.model_devices > node
    per_node = 1 if crosses else node
    return collective_time_s("p2p", activation_bytes(dg, tokens), 2, device, defaults, per_node)


def _footprint(ctx: Context, basis, metrics: dict, energy_j: float, per: str, scale: float, notes: list) -> None:
    """Add facility kWh (PUE applied) and kg CO2e at the regional intensity for `scale` x the unit of work."""
    if basis is None or energy_j != energy_j:
        return
    pue = basis.pue
    if pue is None:
        pue = 1.0
        notes.append("cloud facility overhead (PUE) is not in the catalog: kWh and carbon count device energy only")
    kwh = facility_kwh(energy_j * scale, pue)
    metrics[f"kwh_per_{per}"] = kwh
    intensity = basis.carbon_kg_per_kwh
    if intensity is None and basis.region:
        intensity = ctx.catalog.carbon_kg_per_kwh.get(basis.region)
    if intensity is None:
        notes.append(f"no grid carbon intensity for region {basis.region!r} in carbon.csv: no carbon figure")
        return
    metrics[f"carbon_kg_per_{per}"] = carbon_kg(kwh, intensity)
    metrics["carbon_kg_co2e_per_kwh"] = intensity


def make_prediction(ctx: Context, model, device: Device, par: Parallelism, mode: str, dtype: str,
                    memory: MemoryBreakdown, energy_j: float, basis: CostBasis | None, metrics: dict) -> Prediction:
    """Assemble a Prediction: energy footprint per job, notes on what is missing, tier and rows used."""
    eff = ctx.efficiency(device)
    notes = []
    if "j_per_output_token" in metrics:
        _footprint(ctx, basis, metrics, metrics["j_per_output_token"], "million_output_tokens", 1e6, notes)
    elif "j_per_sample" in metrics:
        _footprint(ctx, basis, metrics, metrics["j_per_sample"], "thousand_samples", 1e3, notes)
    elif "energy_to_train_j" in metrics:
        _footprint(ctx, basis, metrics, metrics["energy_to_train_j"], "training_run", 1.0, notes)
    elif "j_per_step" in metrics:
        _footprint(ctx, basis, metrics, metrics["j_per_step"], "step", 1.0, notes)
    if not device.tdp_w:
        notes.append(f"{device.id} has no sourced TDP: energy is not predicted")
    if basis is None:
        notes.append(f"no catalog instance holds {device.id}: no cost (pass --site for on-prem)")
    elif basis.excluded:
        notes.append("cost excludes: " + "; ".join(basis.excluded))
    if not memory.fits:
        notes.append(f"does not fit: {memory.total_bytes / 1e9:.1f} GB needed per device, "
                     f"{memory.capacity_bytes / 1e9:.1f} GB usable; short by {memory.shortfall_bytes / 1e9:.1f} GB")
    return Prediction(model.name, device.id, par.devices, mode, dtype, par, eff.tier, eff.band_fraction, memory,
                      energy_j, basis, metrics, (f"devices.csv:{device.id} ({device.date})",), tuple(notes))
