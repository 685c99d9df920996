"""Load and validate hardware_specs/: devices, cloud instances with prices, on-prem servers and sites.

The CSV files use human units named in their column keys (`memory_gib`, `mem_bw_gb_per_s`,
`bf16_tflop_per_s`, `scaleup_gb_per_s_per_direction`); this module converts them to SI once
(bytes, bytes/s, FLOP/s) and checks every cell. A bad cell raises CatalogError naming the file,
the row (header = row 1, first data row = 2), the column, the value and what would be valid.
A blank cell means "no source gave it" and becomes None (or is left out of `peak_flop_per_s`).
Reading rows and cells (files as data only, numbers finite, dates real) is planner/hardware/cells.py.

Prices go stale: `is_stale` says whether a price's date is more than STALE_AFTER_MONTHS months before
the date the program runs (`run_date`: PLANNER_TODAY where set, else the system's date), and `dated`
is how a price's date is shown everywhere ("2024-01, stale").
"""

from __future__ import annotations

import calendar
import datetime
import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from planner.errors import ConfigError, UnknownNameError, UnsupportedError, shorten
from planner.files import shipped_specs
from planner.hardware.cells import CatalogError as CatalogError  # re-exported: callers catch it from here
from planner.hardware.cells import Row, parse_float, read_rows
from planner.hardware.costs import CostFact, load_costs
from planner.units import GB, GIB, MEGA, MIB, TERA

DEFAULT_ROOT = shipped_specs()
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
CONFIDENCE = ("high", "medium", "low")
KINDS = ("gpu", "tpu", "accelerator", "cpu")
PRICINGS = ("on_demand", "spot", "reserved_1y", "reserved_3y", "savings_plan_1y", "savings_plan_3y",
            "committed_1y", "committed_3y")
"""Every pricing a price can have. A row of instances.csv may give any of them (reserved instances,
savings plans and commitments with their term in years); committed_1y/_3y are also derived from
discounts.csv (on-demand less the provider's discount) where no row of the instance gives one."""
COMMITTED = {"committed_1y": 12, "committed_3y": 36}
STALE_AFTER_MONTHS = 12
"""A price dated more than this many months before the date the program runs is shown as stale."""


@dataclass(frozen=True, slots=True)
class Device:
    """One accelerator or CPU socket, in SI units. Peaks are dense (no sparsity)."""

    id: str
    """Canonical id, e.g. "h100-sxm"."""
    name: str
    """Vendor product name."""
    vendor: str
    """Vendor, e.g. "NVIDIA"."""
    generation: str
    """Lowercase family used to transfer calibrations, e.g. "hopper", "cdna3", "tpu"."""
    kind: str
    """"gpu", "tpu", "accelerator" or "cpu"."""
    memory_bytes: float | None
    """Device memory in bytes (GiB * 2**30); for CPUs the maximum supported, None where not sourced."""
    mem_bytes_per_s: float
    """Peak memory bandwidth in bytes/s (decimal GB/s * 1e9)."""
    peak_flop_per_s: dict[str, float]
    """Dense peak FLOP/s per dtype (int8 in op/s); only dtypes with a sourced figure are present."""
    llc_bytes: float | None
    """Last-level on-chip cache in bytes (MiB * 2**20)."""
    compute_units: int | None
    """SMs, CUs, TPCs, TensorCores, NeuronCores or CPU cores."""
    clock_hz: float | None
    """Boost clock in Hz."""
    tdp_w: float | None
    """Board/module max power in W; None where no source gives it (TPU v5e/v5p/v6e, AWS chips)."""
    idle_w: float | None
    """Idle power in W where measured by a source."""
    scaleup_bytes_per_s: float | None
    """Scale-up link bandwidth (NVLink, xGMI, ICI, ...) in bytes/s, per direction, per device."""
    devices_per_node: int
    """Devices in one scale-up domain / server (1 for PCIe-only cards)."""
    scaleout_bytes_per_s: float | None
    """Network bandwidth per device in bytes/s, per direction, in the typical server."""
    pcie_bytes_per_s: float | None
    """Host link bandwidth in bytes/s, per direction."""
    release_year: int | None
    """First announcement or launch year."""
    confidence: str
    """"high", "medium" or "low" (the row's notes say which cells are uncertain)."""
    source: str
    """Where the numbers come from."""
    date: str
    """When the row was compiled from its sources (YYYY-MM)."""
    power_limit_w: float | None = None
    """A power limit below TDP the device is run at (nvidia-smi -pl; --power-limit-w), W; None: its TDP."""

    def peak(self, dtype: str) -> float:
        """Return the dense peak FLOP/s (op/s for int8) for `dtype`, e.g. "bf16"."""
        try:
            return self.peak_flop_per_s[dtype]
        except KeyError:
            have = ", ".join(self.peak_flop_per_s) or "none"
            raise UnsupportedError(f"device '{self.id}' has no {dtype} peak in the catalog (unsupported or not "
                                   f"published); dtypes with a peak: {have}") from None

    def same_chip(self, other: Device) -> bool:
        """True when `other` has this device's figures: the same vendor (any case) and kind, the same memory
        bandwidth and the same dense peak of every dtype but fp64 (a user's copy of a catalog row under another id or
        generation). Equal to 1 part in 10^6, as the same decimal text parses."""
        close = lambda a, b: abs(a - b) <= 1e-6 * max(abs(a), abs(b))
        # fp64 runs no op of an AI workload (and the app's device form does not ask for it)
        mine, theirs = ({k: v for k, v in d.peak_flop_per_s.items() if k != "fp64"} for d in (self, other))
        return (self.vendor.lower() == other.vendor.lower() and self.kind == other.kind
                and close(self.mem_bytes_per_s, other.mem_bytes_per_s)
                and mine.keys() == theirs.keys() and all(close(v, theirs[k]) for k, v in mine.items()))


@dataclass(frozen=True, slots=True)
class Instance:
    """A cloud instance type in one region with its hourly prices."""

    provider: str
    """Lowercase provider, e.g. "aws"."""
    instance: str
    """Provider's instance name, e.g. "p5.48xlarge"."""
    device_id: str
    """Id of the device in devices.csv."""
    device_count: int
    """Devices in the instance."""
    vcpus: int | None
    """Host vCPUs."""
    ram_bytes: float | None
    """Host RAM in bytes (GiB * 2**30)."""
    region: str
    """Region, or "all" (same price everywhere), "unrecorded", or a provider tier."""
    price_usd_per_h: dict[str, float]
    """USD per hour by pricing (PRICINGS): the instance's rows, plus committed_1y/_3y derived from discounts.csv."""
    price_date: str
    """Oldest of `price_dates` (YYYY-MM[-DD]): prices go stale."""
    price_dates: dict[str, str]
    """Date of each price by pricing (a derived committed price: the older of on-demand and the discount)."""
    source: str
    """Where the prices come from."""
    confidence: str
    """Lowest confidence among this instance's price rows."""

    @property
    def key(self) -> str:
        """Unique key "provider:instance:region", e.g. "aws:p5.48xlarge:us-east-1"."""
        return f"{self.provider}:{self.instance}:{self.region}"

    def stale(self, pricing: str | None = None, today: datetime.date | None = None) -> bool:
        """Whether the `pricing` price (None: any of the instance's prices) is more than STALE_AFTER_MONTHS
        months old on `today` (default: `run_date()`)."""
        dates = self.price_dates.values() if pricing is None else (self.price_dates[pricing],)
        return any(is_stale(d, today) for d in dates)


@dataclass(frozen=True, slots=True)
class Server:
    """An on-prem server that can be bought."""

    id: str
    """Catalog id, e.g. "dgx-h100"."""
    name: str
    """Description."""
    device_id: str
    """Id of the device in devices.csv."""
    device_count: int
    """Devices in the server."""
    capex_usd: float
    """Purchase price in USD."""
    power_w: float | None
    """Maximum system power in W where sourced."""
    date: str
    """Date of the price (YYYY-MM or YYYY-MM-DD)."""
    source: str
    """Where the numbers come from."""
    confidence: str
    """"high", "medium" or "low"."""

    def stale(self, today: datetime.date | None = None) -> bool:
        """Whether the capex figure is more than STALE_AFTER_MONTHS months old on `today` (default: `run_date()`)."""
        return is_stale(self.date, today)


@dataclass(frozen=True, slots=True)
class Site:
    """Where on-prem servers run: facility efficiency, energy and space prices, carbon."""

    id: str
    """Catalog id, e.g. "us-virginia-colo"."""
    name: str
    """Description."""
    region: str
    """Geographic region."""
    pue: float
    """Power usage effectiveness (facility power / IT power)."""
    electricity_usd_per_kwh: float
    """Electricity price in USD per kWh."""
    colocation_usd_per_kw_month: float | None
    """Colocation price in USD per kW of IT capacity per month; None for an own facility."""
    ops_usd_per_server_per_year: float | None
    """Operations cost per server per year in USD, where sourced."""
    lifetime_years: float
    """Amortization period in years."""
    carbon_kg_per_kwh: float | None
    """Grid carbon intensity in kg CO2e per kWh (from carbon.csv); None where no region is given."""
    date: str
    """Date of the newest fact in the row (YYYY-MM)."""
    source: str
    """Where the numbers come from."""
    confidence: str
    """"high", "medium" or "low"."""


@dataclass(frozen=True, slots=True)
class Catalog:
    """Everything in hardware_specs/, validated and in SI units."""

    devices: dict[str, Device]
    """Devices by id."""
    instances: tuple[Instance, ...]
    """Cloud instances, one per (provider, instance, region), in file order."""
    servers: dict[str, Server]
    """On-prem servers by id."""
    sites: dict[str, Site]
    """On-prem sites by id."""
    power_model: dict[str, float]
    """Energy heuristics by key; the key names the unit (fractions, W per core, W per byte)."""
    carbon_kg_per_kwh: dict[str, float]
    """Carbon intensity in kg CO2e per kWh by region ("aws:us-east-1", "world", ...)."""
    aliases: dict[str, str]
    """Normalized device name (id, alias or product name) -> device id."""
    costs: dict[str, CostFact] = field(default_factory=dict)
    """Sourced defaults of the renting-versus-owning comparison by SI key (onprem_costs.csv; empty where a
    hardware_specs folder has no such file)."""

    def device(self, name: str) -> Device:
        """Return a device by id, alias or product name (case-insensitive; spaces, _ and - are alike)."""
        device_id = self.aliases.get(_norm(name))
        if device_id is None:
            raise UnknownNameError("device", name, self.devices, aliases=self.aliases)
        return self.devices[device_id]

    def instance(self, name: str, region: str | None = None) -> Instance:
        """Return an instance by key ("aws:p5.48xlarge:us-east-1"), by provider and name ("aws:p5.48xlarge")
        or by name ("p5.48xlarge"), case-insensitive.

        A name sold in several regions returns the first one listed in instances.csv unless
        `region` is given.
        """
        wanted = name.strip().lower()
        if wanted.count(":") == 2:
            for inst in self.instances:
                if inst.key.lower() == wanted:
                    return inst
            raise UnknownNameError("instance", name, (i.key for i in self.instances))
        if wanted.count(":") == 1:  # provider:instance, the provider checked against the catalog's row
            found = [i for i in self.instances if f"{i.provider}:{i.instance}".lower() == wanted]
            if not found:
                raise UnknownNameError("instance", name, {f"{i.provider}:{i.instance}" for i in self.instances})
        else:
            found = [i for i in self.instances if i.instance.lower() == wanted]
        if not found:
            raise UnknownNameError("instance", name, {i.instance for i in self.instances})
        if region is None:
            return found[0]
        for inst in found:
            if inst.region.lower() == region.strip().lower():
                return inst
        raise UnknownNameError("region", region, (i.region for i in found))

    def instances_for(self, device_id: str) -> list[Instance]:
        """Return the instances carrying a device (id or alias), in file order."""
        target = self.device(device_id).id
        return [i for i in self.instances if i.device_id == target]

    def server(self, name: str) -> Server:
        """Return an on-prem server by id (case-insensitive)."""
        return _by_id(self.servers, name, "server")

    def site(self, name: str) -> Site:
        """Return an on-prem site by id (case-insensitive)."""
        return _by_id(self.sites, name, "site")


def load_catalog(root: str | Path | None = None) -> Catalog:
    """Load and validate every file of a hardware_specs directory (default: the repository's own).

    devices.csv and power_model.csv need at least one data row; the other files may hold only their
    header (no instances, servers, sites, discounts or carbon regions). Raise CatalogError (a
    ConfigError) naming the file, row and column of the first bad cell."""
    if root is None:
        return _load_default()
    if not Path(root).is_dir():
        raise ConfigError(f"hardware specs folder '{root}' is not a folder (set PLANNER_HARDWARE_SPECS to a copy of "
                          "hardware_specs/)")
    return _load(Path(root))


@functools.lru_cache(maxsize=1)
def _load_default() -> Catalog:
    return _load(DEFAULT_ROOT)


def _load(root: Path) -> Catalog:
    devices, aliases = _load_devices(root / "devices.csv")
    carbon = _load_carbon(root / "carbon.csv")
    discounts = _load_discounts(root / "discounts.csv")
    return Catalog(
        devices=devices,
        instances=_load_instances(root / "instances.csv", devices, discounts),
        servers=_load_servers(root / "onprem_servers.csv", devices),
        sites=_load_sites(root / "sites.csv", carbon),
        power_model=_load_power_model(root / "power_model.csv"),
        carbon_kg_per_kwh=carbon,
        aliases=aliases,
        costs=load_costs(root / "onprem_costs.csv") if (root / "onprem_costs.csv").exists() else {},
    )


# ---------------------------------------------------------------------------------------------
# Prices go stale


def run_date() -> datetime.date:
    """The date prices are judged against: PLANNER_TODAY (YYYY-MM-DD) where set, else the system's date."""
    text = os.environ.get("PLANNER_TODAY", "")
    if not text:
        return datetime.date.today()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return datetime.date.fromisoformat(text)
    except ValueError:
        pass
    raise ConfigError(f"PLANNER_TODAY must be a date that exists, YYYY-MM-DD; got {shorten(repr(text))}")


def is_stale(date: str, today: datetime.date | None = None) -> bool:
    """Whether a price dated `date` (YYYY-MM or YYYY-MM-DD, as the catalog stores it) is more than
    STALE_AFTER_MONTHS months older than `today` (default: `run_date()`). A month alone counts from
    its first day: the catalog keeps the earliest month a source allows."""
    return _older_than_cutoff(date, today or run_date())


@functools.lru_cache(maxsize=1024)
def _older_than_cutoff(date: str, now: datetime.date) -> bool:
    """is_stale on a given day (cached: every prediction of a sweep asks it of the same few dates)."""
    day = datetime.date.fromisoformat(date if len(date) == 10 else date + "-01")
    # the same day of the month STALE_AFTER_MONTHS months back (or that month's last day)
    year, month = divmod(now.year * 12 + now.month - 1 - STALE_AFTER_MONTHS, 12)
    if year < 1:  # the cutoff falls before the calendar starts: nothing is older
        return False
    cutoff = datetime.date(year, month + 1, min(now.day, calendar.monthrange(year, month + 1)[1]))
    return day < cutoff


def dated(date: str, today: datetime.date | None = None) -> str:
    """A price's date as every output shows it: "2026-10-10", or "2024-01, stale" when `is_stale`."""
    return f"{date}, stale" if is_stale(date, today) else date


# ---------------------------------------------------------------------------------------------
# Reading cells (the rows themselves: planner/hardware/cells.py)


def _provenance(row: Row) -> tuple[str, str, str]:
    """Return (source, date, confidence), all required on every row."""
    return row.text("source"), row.date(), row.choice("confidence", CONFIDENCE)


def _norm(name: str) -> str:
    return re.sub(r"[\s_-]+", "-", name.strip().lower())


def _by_id(table: dict, name: str, kind: str):
    for key, value in table.items():
        if key.lower() == name.strip().lower():
            return value
    raise UnknownNameError(kind, name, table)


def _optional(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


# ---------------------------------------------------------------------------------------------
# One loader per file

_DEVICE_COLUMNS = (
    "id", "aliases", "name", "vendor", "generation", "kind", "memory_gib", "memory_type", "mem_bw_gb_per_s",
    *(f"{d}_tflop_per_s" for d in DTYPES if d != "int8"), "int8_tera_op_per_s", "llc_mib", "compute_units",
    "compute_unit_type", "boost_clock_mhz", "tdp_w", "idle_w", "scaleup_link", "scaleup_gb_per_s_per_direction",
    "devices_per_node", "scaleout_gb_per_s_per_direction", "pcie_gb_per_s_per_direction", "release_year",
    "confidence", "source", "date", "notes",
)


def _load_devices(path: Path) -> tuple[dict[str, Device], dict[str, str]]:
    devices: dict[str, Device] = {}
    aliases: dict[str, str] = {}
    for row in read_rows(path, _DEVICE_COLUMNS, rows_required=True):
        device_id = row.slug("id")
        if device_id in devices:
            row.fail("id", "an id not used by another row")
        kind = row.choice("kind", KINDS)
        peaks = {}
        for dtype in DTYPES:
            key = "int8_tera_op_per_s" if dtype == "int8" else f"{dtype}_tflop_per_s"
            value = row.number(key, 0.01, 20000, required=False)
            if value is not None:
                peaks[dtype] = value * TERA
        tdp = row.number("tdp_w", 10, 2000, required=False)
        idle = row.number("idle_w", 1, 2000, required=False)
        if idle is not None and tdp is not None and idle >= tdp:
            row.fail("idle_w", f"less than tdp_w ({tdp:g} W)")
        source, date, confidence = _provenance(row)
        memory_gib = row.number("memory_gib", 1, 8192 if kind == "cpu" else 2048, required=kind != "cpu")
        devices[device_id] = Device(
            id=device_id,
            name=row.text("name"),
            vendor=row.text("vendor"),
            generation=row.slug("generation"),
            kind=kind,
            memory_bytes=_optional(memory_gib, GIB),
            mem_bytes_per_s=row.number("mem_bw_gb_per_s", 10, 20000) * GB,
            peak_flop_per_s=peaks,
            llc_bytes=_optional(row.number("llc_mib", 0.1, 4096, required=False), MIB),
            compute_units=row.integer("compute_units", 1, 1_000_000, required=False),
            clock_hz=_optional(row.number("boost_clock_mhz", 100, 10000, required=False), MEGA),
            tdp_w=tdp,
            idle_w=idle,
            scaleup_bytes_per_s=_optional(row.number("scaleup_gb_per_s_per_direction", 0.1, 20000, False), GB),
            devices_per_node=row.integer("devices_per_node", 1, 1_000_000),
            scaleout_bytes_per_s=_optional(row.number("scaleout_gb_per_s_per_direction", 0.1, 20000, False), GB),
            pcie_bytes_per_s=_optional(row.number("pcie_gb_per_s_per_direction", 0.1, 1000, False), GB),
            release_year=row.integer("release_year", 1990, 2100, required=False),
            confidence=confidence,
            source=source,
            date=date,
        )
        names = [device_id, row.text("name")] + [a for a in (row.text("aliases", False) or "").split(";") if a.strip()]
        for name in names:
            key = _norm(name)
            owner = aliases.setdefault(key, device_id)
            if owner != device_id:
                row.fail("aliases", f"names not already used by device '{owner}' ('{name}' is)")
    return devices, aliases


_CARBON_COLUMNS = ("region", "kg_co2e_per_kwh", "date", "source", "confidence", "notes")


def _load_carbon(path: Path) -> dict[str, float]:
    carbon: dict[str, float] = {}
    for row in read_rows(path, _CARBON_COLUMNS):
        region = row.text("region")
        if region in carbon:
            row.fail("region", "a region not listed twice")
        _provenance(row)
        carbon[region] = row.number("kg_co2e_per_kwh", 0, 1.5)
    return carbon


_DISCOUNT_COLUMNS = ("provider", "pricing", "discount_fraction", "term_months", "date", "source", "confidence", "notes")


def _load_discounts(path: Path) -> dict[str, dict[str, tuple[float, str]]]:
    """Return provider -> {"committed_1y": (fraction off on-demand, date), ...}."""
    discounts: dict[str, dict[str, tuple[float, str]]] = {}
    for row in read_rows(path, _DISCOUNT_COLUMNS):
        provider = row.slug("provider")
        pricing = row.choice("pricing", COMMITTED)
        if row.integer("term_months", 1, 120) != COMMITTED[pricing]:
            row.fail("term_months", f"{COMMITTED[pricing]} for {pricing}")
        if pricing in discounts.get(provider, {}):
            row.fail("pricing", f"one row per provider and pricing ({provider} {pricing} is listed twice)")
        _, date, _ = _provenance(row)
        discounts.setdefault(provider, {})[pricing] = (row.number("discount_fraction", 0, 0.95), date)
    return discounts


_INSTANCE_COLUMNS = ("provider", "instance", "device", "device_count", "vcpus", "ram_gib", "region", "pricing",
                     "price_usd_per_h", "date", "source", "confidence", "notes")


def _load_instances(path: Path, devices: dict[str, Device],
                    discounts: dict[str, dict[str, tuple[float, str]]]) -> tuple[Instance, ...]:
    groups: dict[tuple[str, str, str], list[tuple[Row, str, float]]] = {}
    for row in read_rows(path, _INSTANCE_COLUMNS):
        provider = row.slug("provider")
        device = row.text("device")
        if device not in devices:
            row.fail("device", "a device id from devices.csv: " + ", ".join(devices))
        row.integer("device_count", 1, 100_000)
        row.integer("vcpus", 1, 100_000, required=False)
        row.number("ram_gib", 1, 100_000, required=False)
        pricing = row.choice("pricing", PRICINGS)
        price = row.number("price_usd_per_h", 0.01, 1000)
        _provenance(row)
        key = (provider, row.text("instance").lower(), row.text("region").lower())
        group = groups.setdefault(key, [])
        for other, other_pricing, _ in group:
            if other_pricing == pricing:
                row.fail("pricing", f"one {pricing} row per provider/instance/region (row {other.index} has it)")
            for col in ("device", "device_count", "vcpus", "ram_gib"):
                if row.cells[col].strip() != other.cells[col].strip():
                    row.fail(col, f"'{other.cells[col]}' as in row {other.index} (same instance and region)")
        group.append((row, pricing, price))
    return tuple(_instance(rows, discounts) for rows in groups.values())


def _instance(rows: list[tuple[Row, str, float]], discounts: dict[str, dict[str, tuple[float, str]]]) -> Instance:
    prices = {pricing: price for _, pricing, price in rows}
    dates = {pricing: row.cells["date"].strip() for row, pricing, _ in rows}
    first = rows[0][0]
    on_demand = prices.get("on_demand")
    if on_demand is not None:
        for row, pricing, price in rows:  # spot, reserved, savings plans and commitments cost less
            if pricing != "on_demand" and price > on_demand:
                on_demand_row = next(r.index for r, p, _ in rows if p == "on_demand")
                row.fail("price_usd_per_h", f"a {pricing} price <= the on_demand price {on_demand:g} (row {on_demand_row})")
        for pricing, (fraction, date) in discounts.get(first.cells["provider"].strip(), {}).items():
            if pricing not in prices:  # a row of the instance's own wins over the provider-wide discount
                prices[pricing] = on_demand * (1 - fraction)
                dates[pricing] = min(dates["on_demand"], date)
    ram_gib = first.number("ram_gib", 1, 100_000, required=False)
    sources = dict.fromkeys(r.cells["source"].strip() for r, _, _ in rows)
    return Instance(
        provider=first.cells["provider"].strip(),
        instance=first.cells["instance"].strip(),
        device_id=first.cells["device"].strip(),
        device_count=first.integer("device_count", 1, 100_000),
        vcpus=first.integer("vcpus", 1, 100_000, required=False),
        ram_bytes=_optional(ram_gib, GIB),
        region=first.cells["region"].strip(),
        price_usd_per_h=prices,
        price_date=min(dates.values()),
        price_dates=dates,
        source=" | ".join(sources),
        confidence=max((r.cells["confidence"].strip() for r, _, _ in rows), key=CONFIDENCE.index),
    )


_SERVER_COLUMNS = ("id", "name", "device", "device_count", "capex_usd", "power_w", "date", "source", "confidence",
                   "notes")


def _load_servers(path: Path, devices: dict[str, Device]) -> dict[str, Server]:
    servers: dict[str, Server] = {}
    for row in read_rows(path, _SERVER_COLUMNS):
        server_id = row.slug("id")
        if server_id in servers:
            row.fail("id", "an id not used by another row")
        device = row.text("device")
        if device not in devices:
            row.fail("device", "a device id from devices.csv: " + ", ".join(devices))
        source, date, confidence = _provenance(row)
        servers[server_id] = Server(
            id=server_id,
            name=row.text("name"),
            device_id=device,
            device_count=row.integer("device_count", 1, 100_000),
            capex_usd=row.number("capex_usd", 100, 1e9),
            power_w=row.number("power_w", 10, 1e6, required=False),
            date=date,
            source=source,
            confidence=confidence,
        )
    return servers


_SITE_COLUMNS = ("id", "name", "region", "pue", "electricity_usd_per_kwh", "colocation_usd_per_kw_month",
                 "ops_usd_per_server_per_year", "lifetime_years", "carbon_region", "date", "source", "confidence",
                 "notes")


def _load_sites(path: Path, carbon: dict[str, float]) -> dict[str, Site]:
    sites: dict[str, Site] = {}
    for row in read_rows(path, _SITE_COLUMNS):
        site_id = row.slug("id")
        if site_id in sites:
            row.fail("id", "an id not used by another row")
        carbon_region = row.text("carbon_region", required=False)
        if carbon_region is not None and carbon_region not in carbon:
            row.fail("carbon_region", "blank or a region from carbon.csv: " + ", ".join(carbon))
        source, date, confidence = _provenance(row)
        sites[site_id] = Site(
            id=site_id,
            name=row.text("name"),
            region=row.text("region"),
            pue=row.number("pue", 1.0, 3.0),
            electricity_usd_per_kwh=row.number("electricity_usd_per_kwh", 0.001, 2),
            colocation_usd_per_kw_month=row.number("colocation_usd_per_kw_month", 1, 5000, required=False),
            ops_usd_per_server_per_year=row.number("ops_usd_per_server_per_year", 1, 1e6, required=False),
            lifetime_years=row.number("lifetime_years", 0.5, 30),
            carbon_kg_per_kwh=None if carbon_region is None else carbon[carbon_region],
            date=date,
            source=source,
            confidence=confidence,
        )
    return sites


_POWER_COLUMNS = ("key", "value", "unit", "date", "source", "confidence", "notes")
# key suffix -> (range, SI key suffix, factor): the key names the unit; per-GB figures become per-byte.
_POWER_UNITS = {
    "_fraction_of_tdp": ((0.0, 1.0), "_fraction_of_tdp", 1.0),
    "_fraction": ((0.0, 1.0), "_fraction", 1.0),
    "_w_per_gb": ((0.0, 100.0), "_w_per_byte", 1 / GB),
    "_w_per_core": ((0.0, 1000.0), "_w_per_core", 1.0),
}


def _load_power_model(path: Path) -> dict[str, float]:
    model: dict[str, float] = {}
    for row in read_rows(path, _POWER_COLUMNS, rows_required=True):
        key = row.text("key")
        suffix = next((s for s in _POWER_UNITS if key.endswith(s)), None)
        if suffix is None:
            row.fail("key", "a key ending in its unit: " + ", ".join(_POWER_UNITS))
        (lo, hi), si_suffix, factor = _POWER_UNITS[suffix]
        si_key = key[: -len(suffix)] + si_suffix
        if si_key in model:
            row.fail("key", "a key not listed twice")
        row.text("unit")
        _provenance(row)
        number = parse_float(row.cells["value"].strip())
        if number is None or not lo < number <= hi:
            row.fail("value", f"a number in ({lo:g}, {hi:g}]")
        model[si_key] = number * factor
    return model
