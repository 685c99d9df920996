"""Energy: power per op from its utilization, facility energy (PUE) and carbon.

Power of a device running one op comes from one of three power models, and every prediction says
which (`PowerModel.source`):

- **measured curve** (hardware_specs/energy/power_curves.csv, fitted by scripts/fit_power_curves.py
  to published NVML power of kernel loops, with the source, commit, license and held-out error):

      P = min(P_limit, P_idle + a·u_c + b·u_m)

  u_c = achieved FLOP/s / the device's dense peak for the op's dtype (FLOP / (time × peak)) and
  u_m = achieved bytes/s / its memory bandwidth (bytes / (time × bandwidth)), each at most 1.
- **transferred curve**: a GPU without a curve takes the curve of a measured GPU of the same vendor
  and generation (the nearest TDP where several), scaled by TDP: P = (TDP / TDP_measured) × P_measured(u)
  (H200 -> H100 SXM/PCIe/NVL, GH200; B200 -> GB200).
- **datasheet fractions** (every other device with a sourced TDP; the linear utilization model of
  Cloud Carbon Footprint, W = W_idle + u·(W_max − W_idle), with compute and memory traffic drawing
  differently):

      P = P_idle + (TDP − P_idle) · min(1, a_c·u_c + a_m·u_m)

  where u_c = compute_s / time_s and u_m = memory_s / time_s are how much of the op's time the
  compute units and the memory system are busy at their achievable rate; a_c and a_m are the
  fractions of the idle-to-TDP range drawn by compute-bound and by memory-bound work
  (hardware_specs/power_model.csv, with sources). P_idle is the device's sourced idle power, else
  idle_fraction_of_tdp × TDP.

Power limit (`PowerModel.sustained`): profiles time kernels in short bursts; a running workload is held
to the device's limit (TDP, or --power-limit-w), and a kernel the model says would draw more runs at
the clocks the limit sustains, its time scaled by (P_demand − P_0) / (P_limit − P_0).

While a device waits (communication, pipeline bubbles) it draws P_idle above, under every model (the
curves' P_idle is the draw at locked clocks with almost no work, not the idle of a waiting device).

Facility energy = device energy × PUE: a site's PUE on-prem (sites.csv), the provider's fleet PUE in
the cloud (hardware_specs/energy/cloud_pue.csv; a provider without a row takes its `default` row).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

from planner.errors import ConfigError
from planner.hardware.catalog import CONFIDENCE, DEFAULT_ROOT, Catalog, Device
from planner.hardware.cells import read_rows
from planner.memo import IdentityMemo
from planner.predict.roofline import OpTime
from planner.workload.counting import OpCost

J_PER_KWH = 3.6e6
REQUIRED_KEYS = ("idle_fraction_of_tdp", "compute_bound_fraction_of_tdp", "memory_bound_fraction_of_tdp")
CURVE_COLUMNS = ("device", "idle_w", "compute_range_w", "memory_range_w", "power_limit_w", "train_rows_count",
                 "train_bins_count", "heldout_rows_count", "heldout_bins_count", "heldout_bin_mape_fraction",
                 "heldout_bin_weighted_mape_fraction", "heldout_bin_max_ape_fraction",
                 "heldout_row_median_ape_fraction", "framework", "tables", "repository", "commit", "license",
                 "data_date", "date", "source", "confidence", "notes")
PUE_COLUMNS = ("provider", "pue", "applies_to", "date", "source", "confidence", "notes")
DEFAULT_PROVIDER = "default"
MAX_DEVICE_W = 10_000.0
"""Largest power accepted in power_curves.csv (W): a whole 8-GPU server draws about this much."""


def energy_root() -> Path:
    """The energy data folder: $PLANNER_HARDWARE_SPECS/energy when that is set, else the repository's."""
    root = os.environ.get("PLANNER_HARDWARE_SPECS")
    return (Path(root) if root else DEFAULT_ROOT) / "energy"


@dataclass(frozen=True, slots=True)
class PowerCurve:
    """A device's power against utilization, fitted to published measurements:
    P = min(power_limit_w, idle_w + compute_range_w·u_c + memory_range_w·u_m)."""

    device: str
    """Catalog id of the device measured."""
    vendor: str
    generation: str
    idle_w: float
    """Power at zero utilization, W."""
    compute_range_w: float
    """W added at full compute utilization (u_c = 1)."""
    memory_range_w: float
    """W added at full memory-bandwidth utilization (u_m = 1)."""
    power_limit_w: float
    """The power limit the curve is clipped at (the device's TDP when measured), W."""
    heldout_error: float
    """Mean relative error of the curve against the held-out binned medians, weighted by rows (fraction)."""
    origin: str
    """Where the measurements come from, for labels: "aiconfigurator @095f58a, vllm 0.22.0 NVML power"."""

    def power_w(self, u_c: float, u_m: float) -> float:
        """Average power in W at compute utilization `u_c` and memory utilization `u_m` (fractions)."""
        return min(self.power_limit_w, self.idle_w + self.compute_range_w * u_c + self.memory_range_w * u_m)


@dataclass(frozen=True, slots=True)
class PowerSource:
    """Which power model a device's op energy comes from."""

    kind: str
    """"measured" (its own curve), "transferred" (a neighbour's curve), "datasheet" (fractions of TDP)
    or "none" (no sourced TDP)."""
    label: str
    """One line for output, e.g. "measured curve of h200-sxm (...)"."""
    curve: PowerCurve | None = None
    scale: float = 1.0
    """TDP of this device / the curve's power limit (1 for the device measured at its TDP)."""


@dataclass(frozen=True, slots=True)
class CloudPue:
    """A cloud provider's fleet power usage effectiveness."""

    provider: str
    """instances.csv provider ("aws"), or "default" for any provider without a row."""
    pue: float
    """Facility power / IT power."""
    date: str
    source: str
    confidence: str


_CURVES = IdentityMemo(1024)
"""PowerModel.curve_for by (model, device)."""
_ASK = object()
"""sustained_op's curve when the caller passes none: PowerModel.curve_for is asked."""


@dataclass(frozen=True, slots=True)
class PowerModel:
    """The energy model's data: the datasheet fractions, the measured power curves and the cloud
    providers' PUE."""

    idle_fraction_of_tdp: float
    """Idle power over TDP, for devices with no sourced idle power."""
    compute_fraction: float
    """a_c: share of the idle-to-TDP range a fully compute-bound op draws (datasheet model)."""
    memory_fraction: float
    """a_m: share of the idle-to-TDP range a fully memory-bound op draws (datasheet model)."""
    curves: tuple[PowerCurve, ...] = ()
    """Measured curves of catalog devices (hardware_specs/energy/power_curves.csv)."""
    cloud_pues: tuple[CloudPue, ...] = ()
    """Fleet PUE by provider (hardware_specs/energy/cloud_pue.csv)."""

    @classmethod
    def from_catalog(cls, catalog: Catalog, energy_dir: str | Path | None = None) -> PowerModel:
        """Build from the catalog's power_model.csv and the energy folder (default: energy_root());
        raise naming the missing keys or the bad cell. A curve of a device not in `catalog` is left out."""
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
        folder = Path(energy_dir) if energy_dir is not None else energy_root()
        return cls(idle, share(pm["compute_bound_fraction_of_tdp"]), share(pm["memory_bound_fraction_of_tdp"]),
                   load_curves(folder / "power_curves.csv", catalog), load_cloud_pue(folder / "cloud_pue.csv"))

    def idle_w(self, device: Device) -> float:
        """Idle power of `device` in watts; NaN when the catalog has neither idle power nor TDP."""
        if device.idle_w:
            return device.idle_w
        return self.idle_fraction_of_tdp * device.tdp_w if device.tdp_w else math.nan

    def curve_for(self, device: Device) -> PowerCurve | None:
        """`device`'s own measured curve, else that of a measured GPU of its vendor and generation
        (the nearest TDP; a user's copy of a catalog device's figures is of that device's generation:
        profile_select.transfer_key); None for the datasheet fractions (or without a sourced TDP).
        Memoized by model and device: each op of a new graph asks it twice."""
        return _CURVES.get((self, device), (), lambda: self._find_curve(device))

    def _find_curve(self, device: Device) -> PowerCurve | None:
        if not device.tdp_w or not self.curves:
            return None
        for curve in self.curves:
            if curve.device == device.id:
                return curve
        from planner.hardware.profile_select import transfer_key
        vendor, generation = transfer_key(device)
        near = [c for c in self.curves if device.kind == "gpu" and c.vendor == vendor.lower()
                and c.generation == generation.lower()]
        return min(near, key=lambda c: (abs(math.log(device.tdp_w / c.power_limit_w)), c.device)) if near else None

    def source(self, device: Device) -> PowerSource:
        """The power model `device`'s ops are drawn by: its own measured curve, a measured neighbour's
        scaled by TDP, or the datasheet fractions; with a label for output."""
        if not device.tdp_w:
            return PowerSource("none", f"not sourced ({device.id} has no TDP in the catalog)")
        curve = self.curve_for(device)
        if curve is None:
            return PowerSource("datasheet", "datasheet fractions of TDP (hardware_specs/power_model.csv)")
        scale = device.tdp_w / curve.power_limit_w
        if curve.device == device.id:
            return PowerSource("measured", f"measured curve of {device.id} ({curve.origin}; held-out error "
                                           f"{curve.heldout_error:.1%})", curve, scale)
        return PowerSource("transferred", f"transferred from {curve.device}: its measured curve x TDP "
                                          f"{device.tdp_w:g} / {curve.power_limit_w:g} W", curve, scale)

    def limit_w(self, device: Device) -> float | None:
        """The power `device` is held to, W: its power_limit_w (--power-limit-w) where set, else its TDP."""
        return device.power_limit_w or device.tdp_w

    def _base_and_demand_w(self, t: OpTime, device: Device, cost: OpCost | None) -> tuple[float, float]:
        """(power with no work, power the op would draw with no limit), W."""
        return self._demand_w(t.time_s, t.compute_s, t.memory_s, t.peak_flop_per_s, device, cost,
                              self.curve_for(device))

    def _demand_w(self, time_s: float, compute_s: float, memory_s: float, peak_flop_per_s: float, device: Device,
                  cost: OpCost | None, curve: PowerCurve | None) -> tuple[float, float]:
        """_base_and_demand_w of an op's fields, with `device`'s curve (curve_for) given."""
        if curve is not None:  # a transferred curve is scaled by TDP / the measured device's TDP
            scale = device.tdp_w / curve.power_limit_w
            u_c, u_m = _utilization(time_s, compute_s, memory_s, peak_flop_per_s, device, cost)
            return scale * curve.idle_w, scale * (curve.idle_w + curve.compute_range_w * u_c
                                                  + curve.memory_range_w * u_m)
        idle = self.idle_w(device)
        load = self.compute_fraction * compute_s / time_s + self.memory_fraction * memory_s / time_s
        return idle, idle + (device.tdp_w - idle) * min(1.0, load)

    def sustained_op(self, time_s: float, compute_s: float, memory_s: float, overhead_s: float, bound: str,
                     peak_flop_per_s: float, device: Device, cost: OpCost, curve=_ASK) -> tuple[float, str, float]:
        """sustained_energy_j of the OpTime these fields make, as (sustained seconds, its bound, energy J):
        the same arithmetic in the same order, without building an OpTime where the limit does not slow the
        op (the per-op loop of a new graph in planner/predict/timing.py); the other cases go through it.
        `curve`: curve_for(device), where the caller has it."""
        tdp = device.tdp_w
        if tdp and time_s > 0:
            curve = self.curve_for(device) if curve is _ASK else curve
            base, demand = self._demand_w(time_s, compute_s, memory_s, peak_flop_per_s, device, cost, curve)
            limit = device.power_limit_w or tdp  # limit_w
            if not (bound not in ("none", "overhead") and limit > base and demand > limit):
                return time_s, bound, min(limit, demand) * time_s
        t, energy = self.sustained_energy_j(OpTime(time_s, compute_s, memory_s, overhead_s, bound, peak_flop_per_s),
                                            device, cost)
        return t.time_s, t.bound, energy

    def power_w(self, t: OpTime, device: Device, cost: OpCost | None = None) -> float:
        """Average power in watts while `device` runs an op timed `t` (NaN without a sourced TDP), at
        most the device's limit_w. `cost` (the op's FLOP and bytes) gives a curve its achieved
        utilizations; without it they are taken as compute_s / time_s and memory_s / time_s (an upper
        bound)."""
        if not device.tdp_w:
            return math.nan
        if t.time_s <= 0:
            return self.idle_w(device)
        return min(self.limit_w(device), self._base_and_demand_w(t, device, cost)[1])

    def sustained(self, t: OpTime, device: Device, cost: OpCost | None = None) -> OpTime:
        """`t`, an op timed at the clocks of a short kernel benchmark (what profiles and datasheet
        efficiencies describe), slowed to what `device`'s power limit sustains in a running workload.

        Where the power model says the op would draw P_demand above the limit P_limit, the clocks drop
        until it draws P_limit. Holding the energy per FLOP and per byte fixed, the power above the
        no-work draw P_0 scales with the rate, so the op's busy time grows by

            f = (P_demand − P_0) / (P_limit − P_0)

        Checked against sustained 8192³ bf16 GEMM loops at the 700 W limit (hardware_specs/energy/
        sustained_checks.csv; tests/predict/test_power_limit.py): the H200 curve gives f = 1/0.848 where
        the H200 measured 1/0.804, the H100 (the H200 curve transferred) 1/0.840 where it measured
        1/0.822. On the datasheet fractions the draw never exceeds TDP, so only a --power-limit-w
        below TDP slows an op there. Launch overhead is not slowed."""
        limit = self.limit_w(device)
        if not limit or t.time_s <= 0 or t.bound in ("none", "overhead"):
            return t
        base, demand = self._base_and_demand_w(t, device, cost)
        if demand <= limit or limit <= base:  # limit <= base is refused where the request is checked
            return t
        f = (demand - base) / (limit - base)
        busy = t.time_s - t.overhead_s
        return replace(t, time_s=busy * f + t.overhead_s, compute_s=t.compute_s * f, memory_s=t.memory_s * f)

    def op_energy_j(self, t: OpTime, device: Device, cost: OpCost | None = None) -> float:
        """Energy in joules of one op timed `t` on `device`."""
        return self.power_w(t, device, cost) * t.time_s

    def sustained_energy_j(self, t: OpTime, device: Device, cost: OpCost | None = None) -> tuple[OpTime, float]:
        """(sustained(t), op_energy_j of that): the same two numbers with the power model evaluated once
        where the limit does not slow the op, as for nearly every op (the per-op loop of a new graph)."""
        if not device.tdp_w or t.time_s <= 0:
            return self.sustained(t, device, cost), self.power_w(t, device, cost) * t.time_s
        limit = self.limit_w(device)
        base, demand = self._base_and_demand_w(t, device, cost)
        if limit and t.bound not in ("none", "overhead") and limit > base and demand > limit:
            slowed = self.sustained(t, device, cost)
            return slowed, self.op_energy_j(slowed, device, cost)
        return t, min(limit, demand) * t.time_s

    def cloud_pue(self, provider: str) -> CloudPue | None:
        """The fleet PUE of cloud `provider` (instances.csv provider name), else the default row;
        None when cloud_pue.csv has neither."""
        by_name = {p.provider: p for p in self.cloud_pues}
        return by_name.get(provider.strip().lower()) or by_name.get(DEFAULT_PROVIDER)


def utilization(t: OpTime, device: Device, cost: OpCost | None) -> tuple[float, float]:
    """(u_c, u_m) of an op timed `t`: achieved FLOP/s over the peak the roofline used and achieved
    bytes/s over the memory bandwidth, each at most 1."""
    return _utilization(t.time_s, t.compute_s, t.memory_s, t.peak_flop_per_s, device, cost)


def _utilization(time_s: float, compute_s: float, memory_s: float, peak_flop_per_s: float, device: Device,
                 cost: OpCost | None) -> tuple[float, float]:
    if cost is None:
        return min(1.0, compute_s / time_s), min(1.0, memory_s / time_s)
    u_c = cost.flop / (time_s * peak_flop_per_s) if peak_flop_per_s > 0 else 0.0
    u_m = cost.bytes / (time_s * device.mem_bytes_per_s) if device.mem_bytes_per_s > 0 else 0.0
    return min(1.0, u_c), min(1.0, u_m)


def load_curves(path: Path, catalog: Catalog) -> tuple[PowerCurve, ...]:
    """The measured power curves of power_curves.csv whose device is in `catalog` (an absent file: none)."""
    if not path.exists():
        return ()
    curves = []
    for row in read_rows(path, CURVE_COLUMNS):
        device_id = row.slug("device")
        _provenance(row)
        idle = row.number("idle_w", 0.0, MAX_DEVICE_W)
        limit = row.number("power_limit_w", 1.0, MAX_DEVICE_W)
        if idle >= limit:
            row.fail("idle_w", f"a power below power_limit_w ({limit:g} W)")
        compute = row.number("compute_range_w", 0.0, 10 * MAX_DEVICE_W)
        memory = row.number("memory_range_w", 0.0, 10 * MAX_DEVICE_W)
        error = row.number("heldout_bin_weighted_mape_fraction", 0.0, 10.0)
        if any(c.device == device_id for c in curves):
            row.fail("device", "a device listed once")
        if device_id not in catalog.devices:
            continue  # a trimmed catalog copy: the curve has no device to draw
        device = catalog.devices[device_id]
        origin = f"{row.text('repository').split('/')[-1]} @{row.text('commit')[:7]}, {row.text('framework')} NVML power"
        curves.append(PowerCurve(device_id, device.vendor.lower(), device.generation.lower(), idle, compute, memory,
                                 limit, error, origin))
    return tuple(curves)


def load_cloud_pue(path: Path) -> tuple[CloudPue, ...]:
    """The rows of cloud_pue.csv (an absent file: none, and cloud energy counts the devices only)."""
    if not path.exists():
        return ()
    rows = []
    for row in read_rows(path, PUE_COLUMNS):
        provider = row.slug("provider")
        if any(p.provider == provider for p in rows):
            row.fail("provider", "a provider listed once")
        row.text("applies_to")
        source, date, confidence = _provenance(row)
        rows.append(CloudPue(provider, row.number("pue", 1.0, 3.0), date, source, confidence))
    return tuple(rows)


def _provenance(row) -> tuple[str, str, str]:
    """(source, date, confidence) of a row: all three required."""
    return row.text("source"), row.date(), row.choice("confidence", CONFIDENCE)


def facility_kwh(device_energy_j: float, pue: float) -> float:
    """Facility energy in kWh: device energy x power usage effectiveness."""
    return device_energy_j * pue / J_PER_KWH


def carbon_kg(kwh: float, kg_co2e_per_kwh: float) -> float:
    """Emissions in kg CO2e of `kwh` at a grid intensity."""
    return kwh * kg_co2e_per_kwh
