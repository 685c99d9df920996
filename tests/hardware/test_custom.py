"""planner.hardware.custom: a user's own rows join the catalog through its own loader."""

import csv
import io

import pytest

from planner.errors import ConfigError
from planner.hardware.custom import columns, extend_catalog, rows_csv, shipped_row

MY_GPU = {"id": "my-gpu", "name": "My GPU", "vendor": "NVIDIA", "generation": "custom", "kind": "gpu",
          "memory_gib": "80", "mem_bw_gb_per_s": "3350", "bf16_tflop_per_s": "989", "fp32_tflop_per_s": "67",
          "tdp_w": "700", "devices_per_node": "8", "scaleout_gb_per_s_per_direction": "50",
          "source": "a test", "date": "2026-11-26", "confidence": "low"}


def test_a_device_row_joins_the_catalog_in_si_units():
    catalog = extend_catalog([MY_GPU])
    d = catalog.device("my-gpu")
    assert d.memory_bytes == 80 * 2**30          # 80 GiB
    assert d.mem_bytes_per_s == 3350e9           # 3,350 GB/s
    assert d.peak_flop_per_s["bf16"] == 989e12   # 989 TFLOP/s
    assert d.tdp_w == 700 and d.devices_per_node == 8
    assert "h100-sxm" in catalog.devices          # the shipped rows are all still there


def test_price_and_server_rows_join_too():
    instance = {"provider": "custom", "instance": "my-gpu-1x", "device": "my-gpu", "device_count": "1",
                "region": "custom", "pricing": "on_demand", "price_usd_per_h": "2.5", "date": "2026-11-26",
                "source": "a test", "confidence": "low"}
    server = {"id": "my-gpu-server", "name": "My server", "device": "my-gpu", "device_count": "8",
              "capex_usd": "200000", "power_w": "10000", "date": "2026-11-26", "source": "a test", "confidence": "low"}
    catalog = extend_catalog([MY_GPU], [instance], [server])
    [inst] = catalog.instances_for("my-gpu")
    assert inst.price_usd_per_h["on_demand"] == 2.5 and inst.device_count == 1
    assert catalog.server("my-gpu-server").capex_usd == 200000


@pytest.mark.parametrize("change, message", [
    ({"mem_bw_gb_per_s": "fast"}, "your device 'my-gpu': column 'mem_bw_gb_per_s': bad value 'fast'"),
    ({"mem_bw_gb_per_s": "1e9"}, "your device 'my-gpu': column 'mem_bw_gb_per_s'"),
    ({"id": "h100-sxm"}, "your device 'h100-sxm': column 'id'"),
    ({"name": "NVIDIA H100 SXM5 80GB"}, "column 'aliases'"),
    ({"kind": "fpga"}, "column 'kind'"),
    ({"oops": "1"}, "unknown column 'oops'"),
])
def test_a_bad_cell_is_one_line_naming_the_row_and_column(change, message):
    with pytest.raises(ConfigError) as err:
        extend_catalog([{**MY_GPU, **change}])
    assert message in str(err.value) and "\n" not in str(err.value)


def test_exported_rows_have_the_catalog_header_and_load_back():
    text = rows_csv("device", [MY_GPU])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == columns("device") and rows[0]["id"] == "my-gpu"
    assert extend_catalog(rows).device("my-gpu").mem_bytes_per_s == 3350e9


def test_a_shipped_row_is_a_starting_point():
    row = shipped_row("device", "h100-sxm")
    assert row["id"] == "h100-sxm" and float(row["mem_bw_gb_per_s"]) > 3000
    assert shipped_row("device", "no-such-device") is None
