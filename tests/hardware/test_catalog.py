"""Catalog: the shipped hardware_specs/ loads, names resolve, units convert once, bad rows are caught."""

import csv
import shutil
from pathlib import Path

import pytest

from planner.errors import UnknownNameError, UnsupportedError
from planner.hardware.catalog import DEFAULT_ROOT, CatalogError, load_catalog

REQUIRED_IDS = (
    "v100-sxm2-32gb", "t4", "a10g", "l4", "l40s", "a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-80gb", "h100-sxm",
    "h100-pcie", "h100-nvl", "h200-sxm", "gh200", "b200", "mi250x", "mi300x", "mi325x", "gaudi2", "gaudi3",
    "tpu-v5e", "tpu-v5p", "tpu-v6e", "trn2", "inf2", "xeon-8480", "epyc-9654",
)
FILES = {"devices.csv", "instances.csv", "discounts.csv", "onprem_servers.csv", "sites.csv", "carbon.csv",
         "power_model.csv", "onprem_costs.csv"}


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_every_file_is_loaded(cat):
    # the loader reads exactly these files; a new CSV here must get a loader (and this set updated)
    assert {p.name for p in DEFAULT_ROOT.glob("*.csv")} == FILES
    assert len(cat.devices) >= len(REQUIRED_IDS)
    assert cat.instances and cat.servers and cat.sites and cat.power_model and cat.carbon_kg_per_kwh
    assert load_catalog() is load_catalog()  # default load is cached
    assert load_catalog(DEFAULT_ROOT) == cat


@pytest.mark.parametrize("device_id", REQUIRED_IDS)
def test_required_device_resolves(cat, device_id):
    device = cat.device(device_id.upper())
    assert device.id == device_id
    assert device.source and device.date and device.confidence in ("high", "medium", "low")
    assert device.mem_bytes_per_s > 0 and device.devices_per_node >= 1


@pytest.mark.parametrize("name", ["H100", "h100-sxm5-80gb", "H100 SXM5 80GB", "h100_sxm", "NVIDIA H100 80GB HBM3"])
def test_aliases_resolve_case_insensitively(cat, name):
    assert cat.device(name).id == "h100-sxm"


def test_h100_units_convert_once(cat):
    h100 = cat.device("h100-sxm")
    assert h100.mem_bytes_per_s == 3350 * 1e9  # 3.35 TB/s, decimal
    assert h100.memory_bytes == 80 * 2**30  # "80GB" of HBM is 80 GiB
    assert h100.peak("bf16") == pytest.approx(989.4e12)  # 1979 sparse / 2
    assert h100.peak("fp8") == pytest.approx(1978.9e12)
    assert h100.scaleup_bytes_per_s == 450e9  # NVLink 900 GB/s bidirectional / 2
    assert h100.pcie_bytes_per_s == 64e9  # Gen5 x16 128 GB/s bidirectional / 2
    assert h100.scaleout_bytes_per_s == 50e9  # one 400 Gb/s NIC per GPU = 50 GB/s
    assert h100.llc_bytes == 50 * 2**20
    assert h100.clock_hz == 1980e6
    assert (h100.tdp_w, h100.devices_per_node) == (700, 8)


def test_other_conversions(cat):
    assert cat.device("H200").memory_bytes == 141 * 2**30
    assert cat.device("a10g").pcie_bytes_per_s == 32e9  # Gen4 x16 64 / 2
    assert cat.device("mi300x").scaleup_bytes_per_s == 448e9  # 7 links x 128 GB/s = 896 / 2
    assert cat.device("tpu-v5e").scaleout_bytes_per_s == 3.125e9  # 2 x 100 Gb/s per 8-chip host
    assert cat.device("t4").peak("int8") == 130e12


def test_blank_stays_blank(cat):
    v100 = cat.device("v100-sxm2-32gb")
    assert set(v100.peak_flop_per_s) == {"fp64", "fp32", "fp16"}  # no bf16/tf32/fp8 on Volta
    with pytest.raises(UnsupportedError, match="fp16"):
        v100.peak("bf16")
    assert cat.device("tpu-v5e").tdp_w is None  # not published
    # derived from cores x max boost x FLOP/cycle (hardware_specs/cpu/flop_per_cycle.csv, AMD family 25 row):
    # 96 x 3.7e9 x 32 = 11.3664e12 fp32; 96 x 3.7e9 x 16 = 5.6832e12 fp64; bf16 at the fp32 rate
    assert cat.device("epyc-9654").peak_flop_per_s == pytest.approx(
        {"fp64": 5.6832e12, "fp32": 11.3664e12, "bf16": 11.3664e12})
    assert cat.device("epyc-9654").memory_bytes is None
    # measured with a CUDA context held (planner's NVML runs, 2026-11-23); a100 has no sourced idle power
    assert cat.device("h200-sxm").idle_w == pytest.approx(128.8)
    assert cat.device("h100-sxm").idle_w == pytest.approx(122.7)
    assert cat.device("a100-sxm-80gb").idle_w is None


def test_unknown_device_suggests_close_matches(cat):
    with pytest.raises(UnknownNameError) as info:
        cat.device("h100sxm")
    assert "h100-sxm" in info.value.suggestions
    assert "Did you mean" in str(info.value)


def test_a_vendor_prefixed_device_name_suggests_the_devices_through_their_aliases(cat):
    # "nvidia-h100" is no id; the product names "NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3" (h100-sxm) and
    # "NVIDIA H100 NVL" hold both its words, so those three are suggested, before "h200-sxm" that difflib ranks high
    with pytest.raises(UnknownNameError) as info:
        cat.device("nvidia-h100")
    assert sorted(info.value.suggestions) == ["h100-nvl", "h100-pcie", "h100-sxm"]
    assert "Did you mean: h100-" in str(info.value)


def test_an_instance_by_provider_and_name(cat):
    # "aws:p5.48xlarge" is the row of "p5.48xlarge" (its first region); another provider's name is unknown
    assert cat.instance("aws:p5.48xlarge") == cat.instance("p5.48xlarge")
    assert cat.instance("AWS:P5.48xlarge", region="us-west-1").key == "aws:p5.48xlarge:us-west-1"
    with pytest.raises(UnknownNameError) as info:
        cat.instance("gcp:p5.48xlarge")
    assert info.value.suggestions[0] == "aws:p5.48xlarge" and "aws:p5.48xlarge" in info.value.valid


def test_instances(cat):
    p5 = cat.instance("P5.48xlarge")
    assert (p5.key, p5.device_id, p5.device_count) == ("aws:p5.48xlarge:us-east-1", "h100-sxm", 8)
    # 2026-10-10 on demand: 8 x 6.88 USD per GPU-hour = 55.04; spot: the low end over AZs (undated v8 snapshot)
    assert p5.price_usd_per_h == {"on_demand": 55.04, "spot": 17.6289}
    assert p5.ram_bytes == 2048 * 2**30
    assert p5.price_dates == {"on_demand": "2026-10-10", "spot": "2025-06"}
    assert p5.price_date == "2025-06" and p5.confidence == "medium"  # oldest date, lowest confidence of the rows
    assert cat.instance("p5.48xlarge", region="us-west-1").price_usd_per_h == {"on_demand": 68.8}  # 8 x 8.60
    assert cat.instance("aws:p5.48xlarge:us-west-1").region == "us-west-1"
    with pytest.raises(UnknownNameError):
        cat.instance("p9.48xlarge")
    with pytest.raises(UnknownNameError):
        cat.instance("p5.48xlarge", region="mars-1")
    assert "aws:p5.48xlarge:us-east-1" in {i.key for i in cat.instances_for("H100")}
    for inst in cat.instances:
        on_demand = inst.price_usd_per_h.get("on_demand", float("inf"))  # GCP a4 (B200) is sold spot only
        assert all(price <= on_demand for price in inst.price_usd_per_h.values())
        assert inst.device_id in cat.devices and inst.price_date == min(inst.price_dates.values())
        assert set(inst.price_dates) == set(inst.price_usd_per_h)
    providers = {i.provider for i in cat.instances}
    assert {"aws", "gcp", "azure"} <= providers and len(providers - {"aws", "gcp", "azure"}) >= 2


def test_servers_sites_power_model(cat):
    dgx = cat.server("DGX-H100")
    assert (dgx.device_id, dgx.device_count, dgx.capex_usd, dgx.power_w) == ("h100-sxm", 8, 270000, 10200)
    site = cat.site("us-virginia-colo")
    assert site.carbon_kg_per_kwh == pytest.approx(0.3678)  # 367.8 g/kWh, from carbon.csv
    assert site.electricity_usd_per_kwh == pytest.approx(0.0892)  # 8.92 US cents
    assert cat.site("us-california-onprem").carbon_kg_per_kwh is None
    assert cat.power_model["ram_w_per_byte"] == pytest.approx(0.3725e-9)  # 0.3725 W per GB
    assert 0 < cat.power_model["idle_fraction_of_tdp"] < cat.power_model["memory_bound_fraction_of_tdp"] < 1
    with pytest.raises(UnknownNameError):
        cat.site("moon-base")


# ---------------------------------------------------------------------------------------------
# Malformed copies of the catalog


def _edit(root: Path, file: str, match: dict[str, str], column: str, value: str) -> int:
    """Set `column` to `value` in the first row of `file` matching `match`; return its row number."""
    path = root / file
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    for number, row in enumerate(rows, start=2):
        if all(row[k] == v for k, v in match.items()):
            row[column] = value
            break
    else:
        raise AssertionError(f"no row of {file} matches {match}")
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return number


@pytest.fixture
def copy(tmp_path):
    root = tmp_path / "hardware_specs"
    shutil.copytree(DEFAULT_ROOT, root)
    return root


H100 = {"id": "h100-sxm"}
P5_SPOT = {"instance": "p5.48xlarge", "region": "us-east-1", "pricing": "spot"}


@pytest.mark.parametrize("file, match, column, value", [
    ("devices.csv", H100, "mem_bw_gb_per_s", "-3350"),  # negative bandwidth
    ("devices.csv", H100, "memory_gib", "eighty"),
    ("devices.csv", H100, "source", ""),  # missing source
    ("devices.csv", H100, "date", "2026"),
    ("devices.csv", H100, "kind", "fpga"),
    ("devices.csv", {"id": "h200-sxm"}, "aliases", "H200;H100"),  # alias collides with h100-sxm (listed earlier)
    ("instances.csv", P5_SPOT, "price_usd_per_h", "200"),  # spot > on-demand (55.04)
    ("instances.csv", P5_SPOT, "device", "h900"),  # unknown device
    ("instances.csv", P5_SPOT, "device_count", "0"),
    ("instances.csv", P5_SPOT, "pricing", "on_demand"),  # two on-demand prices for one instance and region
    ("onprem_servers.csv", {"id": "dgx-h100"}, "device", "h900"),
    ("sites.csv", {"id": "us-texas-colo"}, "pue", "0.9"),
    ("sites.csv", {"id": "us-texas-colo"}, "carbon_region", "mars"),
    ("carbon.csv", {"region": "world"}, "kg_co2e_per_kwh", "2.0"),
    ("power_model.csv", {"key": "idle_fraction_of_tdp"}, "key", "idle_watts"),  # key must name its unit
])
def test_malformed_cell_names_file_row_and_key(copy, file, match, column, value):
    row = _edit(copy, file, match, column, value)
    with pytest.raises(CatalogError) as info:
        load_catalog(copy)
    message = str(info.value)
    assert file in message and f"row {row}," in message and f"'{column}'" in message
    assert (info.value.file, info.value.row) == (file, row)


def test_missing_column_is_a_header_error(copy):
    path = copy / "sites.csv"
    with path.open(newline="") as f:
        rows = [row[:-1] for row in csv.reader(f)]  # drop "notes"
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    with pytest.raises(CatalogError, match=r"sites\.csv, row 1 \(header\), column 'notes'"):
        load_catalog(copy)


def test_committed_prices_derive_from_discounts(copy):
    with (copy / "discounts.csv").open("a", newline="") as f:
        csv.writer(f, lineterminator="\n").writerow(
            ["aws", "committed_1y", "0.3", "12", "2026-01", "test fixture", "low", ""])
    p5 = load_catalog(copy).instance("p5.48xlarge")
    assert p5.price_usd_per_h["committed_1y"] == pytest.approx(55.04 * 0.7)  # 30% off on-demand (8 x 6.88)
    assert p5.price_dates["committed_1y"] == "2026-01"  # the older of the discount (2026-01) and on-demand (2026-10-10)
    assert "committed_3y" not in p5.price_usd_per_h
