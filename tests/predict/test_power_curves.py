"""Measured power curves (hardware_specs/energy/power_curves.csv) against their held-out published
measurements (power_curve_checks.csv, both written by scripts/fit_power_curves.py from aiconfigurator's
NVML power), transfer to neighbours, the label every prediction carries, and cloud PUE."""

import csv
import math
import shutil

import pytest

from planner.hardware.catalog import CatalogError, load_catalog
from planner.plan.capacity import Candidate
from planner.plan.optimize import facility_pue
from planner.predict import Request, predict
from planner.predict.context import default_context
from planner.predict.energy import J_PER_KWH, PowerModel, energy_root, facility_kwh, utilization
from planner.predict.ops import gemm_record
from planner.predict.roofline import op_time
from planner.predict.timing import op_rows
from planner.workload.device_graph import device_graph
from planner.workload.graphs import Workload
from planner.workload.parallelism import Parallelism
from planner.workload.zoo import resolve

TOLERANCE = 0.10


def _rows(name: str) -> list[dict]:
    with (energy_root() / name).open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _published_bin(device: str, u_c: float, u_m: float) -> dict:
    """The held-out check bin (0.1 x 0.1 of u_c, u_m) holding (u_c, u_m); fails when none does."""
    for row in _rows("power_curve_checks.csv"):
        if (row["device"] == device and float(row["u_compute_low_fraction"]) <= u_c < float(row["u_compute_high_fraction"])
                and float(row["u_memory_low_fraction"]) <= u_m < float(row["u_memory_high_fraction"])):
            return row
    raise AssertionError(f"no held-out published bin of {device} at u_c {u_c:.3f}, u_m {u_m:.3f}")


class Streaming:
    """Kernels at 0.78 of the dense peak and 0.90 of HBM bandwidth, 1.5 us fixed cost per kernel (none
    for views): the datasheet tier's GPU figures (hardware_specs/efficiency/defaults.json), fixed here so
    that the decode step streams at the rate of the published decode-shaped rows (aiconfigurator's H200
    scale_matrix reaches ~4.3 of 4.8 TB/s, SOURCE.md) whatever tier the shipped profiles give."""

    tier, band_fraction = "test", 0.0

    def efficiencies(self, rec, category, device, nbytes=None):
        return 0.78, 0.90, 0.0 if category == "view" else 1.5e-6


def test_shipped_curves_carry_provenance_and_their_error():
    rows = {r["device"]: r for r in _rows("power_curves.csv")}
    assert set(rows) == {"h200-sxm", "b200"}
    for row in rows.values():
        assert row["repository"] == "ai-dynamo/aiconfigurator" and len(row["commit"]) == 40
        assert row["license"] == "Apache-2.0" and row["framework"] and row["tables"] and row["date"]
        assert int(row["train_rows_count"]) > 1000 and int(row["heldout_rows_count"]) > 100
        assert 0 < float(row["heldout_bin_weighted_mape_fraction"]) < 0.05
    assert "vllm 0.22.0" in rows["h200-sxm"]["framework"]
    assert {"vllm 0.22.0", "trtllm 1.3.0rc15"} <= set(rows["b200"]["framework"].split("; "))


@pytest.mark.parametrize("device", ["h200-sxm", "b200"])
def test_curve_replays_its_held_out_bins_at_the_stated_error(device):
    cat = load_catalog()
    pm = PowerModel.from_catalog(cat)
    curve = next(c for c in pm.curves if c.device == device)
    checks = [r for r in _rows("power_curve_checks.csv") if r["device"] == device]
    errors = [(abs(curve.power_w(float(r["u_compute_fraction"]), float(r["u_memory_fraction"]))
                   / float(r["median_power_w"]) - 1), int(r["rows_count"])) for r in checks]
    weighted = sum(e * n for e, n in errors) / sum(n for _, n in errors)
    assert weighted == pytest.approx(curve.heldout_error, abs=1e-3)


@pytest.mark.parametrize("device", ["h200-sxm", "b200"])
def test_compute_bound_gemm_matches_the_published_curve(device):
    # 8192^3 bf16: 2 x 8192^3 = 1.1e12 FLOP; u_c = FLOP / (time x dense bf16 peak) lands near 0.7,
    # where the published rows sit at the power limit (about 690 W of 700 on the H200)
    target = default_context().target(device)
    rec, category, cost = gemm_record(8192, 8192, 8192, "bf16")
    t = op_time(rec, category, cost, "bf16", target.device, target.efficiency)
    assert t.bound == "compute"
    u_c, u_m = utilization(t, target.device, cost)
    assert u_c == pytest.approx(2 * 8192**3 / (t.time_s * target.device.peak("bf16")))
    power = target.power.power_w(t, target.device, cost)
    assert target.power.op_energy_j(t, target.device, cost) == pytest.approx(power * t.time_s)
    published = float(_published_bin(device, u_c, u_m)["median_power_w"])
    assert abs(power / published - 1) < TOLERANCE, (power, published)


def test_memory_bound_decode_step_matches_the_published_curve():
    # one decode step of llama-3.1-70b on 2 x H200 (tp 2), batch 1, 1024 tokens cached: weight reads dominate
    ctx = default_context()
    target = ctx.target("h200-sxm")
    dg = device_graph(resolve("llama-3.1-70b"), Workload("decode", 1, context_len=1024, dtype="bf16", engine="vllm"),
                      Parallelism(tp=2))
    rows = op_rows(dg, target.device, Streaming(), target.power)
    time_s = sum(r.time_s * r.count for r in rows)
    energy_j = sum(r.energy_j * r.count for r in rows)
    u_c = sum(r.flop * r.count for r in rows) / (time_s * target.device.peak("bf16"))
    u_m = sum(r.bytes * r.count for r in rows) / (time_s * target.device.mem_bytes_per_s)
    assert u_c < 0.1 < 0.7 < u_m  # memory-bound
    published = float(_published_bin("h200-sxm", u_c, u_m)["median_power_w"])
    # average power over the step's ops (no idle): energy / time
    assert abs(energy_j / time_s / published - 1) < TOLERANCE, (energy_j / time_s, published)


def test_neighbours_take_a_measured_curve_scaled_by_tdp():
    cat = load_catalog()
    pm = PowerModel.from_catalog(cat)
    h200 = next(c for c in pm.curves if c.device == "h200-sxm")
    b200 = next(c for c in pm.curves if c.device == "b200")
    for device, curve, measured in (("h100-sxm", h200, 700), ("h100-pcie", h200, 700), ("h100-nvl", h200, 700),
                                    ("gh200", h200, 700), ("gb200", b200, 1000)):
        dev = cat.device(device)
        src = pm.source(dev)
        assert (src.kind, src.curve) == ("transferred", curve)
        assert src.scale == pytest.approx(dev.tdp_w / measured)  # h100-pcie: 350 / 700 = 0.5
        assert f"transferred from {curve.device}" in src.label
    assert pm.source(cat.device("h200-sxm")).label.startswith("measured curve of h200-sxm")
    assert pm.source(cat.device("a100-sxm-80gb")).kind == "datasheet"  # ampere: no measured neighbour
    assert pm.source(cat.device("mi300x")).kind == "datasheet"
    assert pm.source(cat.device("tpu-v5e")).kind == "none"  # no sourced TDP


def test_transferred_power_is_the_curve_times_the_tdp_ratio():
    ctx = default_context()
    h200, pcie = ctx.target("h200-sxm"), ctx.target("h100-pcie")
    rec, category, cost = gemm_record(1, 8192, 8192, "bf16")
    t = op_time(rec, category, cost, "bf16", pcie.device, pcie.efficiency)
    curve = pcie.power.source(h200.device).curve
    u_c, u_m = utilization(t, pcie.device, cost)
    # P = 350 / 700 x min(700, idle + a u_c + b u_m)
    assert pcie.power.power_w(t, pcie.device, cost) == pytest.approx(0.5 * curve.power_w(u_c, u_m))


@pytest.mark.parametrize("device,kind", [("h200-sxm", "measured curve of h200-sxm"),
                                         ("h100-sxm", "transferred from h200-sxm"),
                                         ("a100-sxm-80gb", "datasheet fractions")])
def test_every_prediction_says_which_power_model_it_used(device, kind):
    p = predict(Request("gpt2", device, input_len=16, output_len=4))
    assert p.power_model.startswith(kind)
    assert p.as_dict()["power_model"] == p.power_model


def _instance(provider: str):
    cat = load_catalog()
    return next(i for i in cat.instances if i.provider == provider and cat.devices[i.device_id].tdp_w)


@pytest.mark.parametrize("provider,pue", [("aws", 1.14), ("gcp", 1.10), ("azure", 1.18), ("runpod", 1.25)])
def test_cloud_kwh_include_the_providers_pue(provider, pue):
    inst = _instance(provider)
    p = predict(Request("gpt2", inst.device_id, input_len=16, output_len=4, instance=inst.key))
    m = p.metrics
    # kWh per 1M tokens = J/token x 1e6 / 3.6e6 x PUE; e.g. 0.5 J/token x 1e6 = 5e5 J = 0.139 kWh, x 1.14 = 0.158 kWh
    assert m["pue"] == pue
    assert m["kwh_per_million_output_tokens"] == pytest.approx(m["j_per_output_token"] * 1e6 / J_PER_KWH * pue)
    if "carbon_kg_per_million_output_tokens" in m:  # carbon at the region's intensity, PUE included
        assert m["carbon_kg_per_million_output_tokens"] == pytest.approx(m["kwh_per_million_output_tokens"]
                                                                         * m["carbon_kg_co2e_per_kwh"])
    note = next(n for n in p.notes if "PUE" in n)
    assert (f"{provider}'s fleet PUE" if provider != "runpod" else "default PUE") in note


def test_facility_kwh_closed_form_with_a_cloud_pue():
    # 7.2e6 J / 3.6e6 J/kWh = 2 kWh of device energy; x AWS's PUE 1.14 = 2.28 kWh at the facility
    assert facility_kwh(7.2e6, 1.14) == pytest.approx(2.28)
    pm = default_context().power
    assert pm.cloud_pue("AWS").pue == 1.14
    assert pm.cloud_pue("lambda").provider == "default" and pm.cloud_pue("lambda").pue == 1.25  # IDC cloud average


def test_plan_counts_cloud_energy_at_the_providers_pue():
    ctx = default_context()
    inst = _instance("aws")
    cand = Candidate(f"{inst.key}:on_demand", "cloud", inst.device_id, inst.device_count, "on_demand",
                     inst.price_usd_per_h["on_demand"], 0.0, 0.0, None, "2026-01", inst.key)
    assert facility_pue(ctx, cand, site_pue=1.42) == 1.14  # the site's PUE is for on-prem candidates only
    onprem = Candidate("onprem:x@y", "onprem", inst.device_id, 8, "onprem", 10.0, 1.0, 1.0, None, "2026-01")
    assert facility_pue(ctx, onprem, site_pue=1.42) == 1.42


def test_a_bad_curve_cell_names_file_row_and_column(tmp_path):
    folder = tmp_path / "energy"
    shutil.copytree(energy_root(), folder)
    path = folder / "power_curves.csv"
    rows = list(csv.DictReader(path.open(newline="", encoding="utf-8")))
    rows[0]["idle_w"] = "nan"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(CatalogError, match=r"power_curves.csv, row 2, column 'idle_w'"):
        PowerModel.from_catalog(load_catalog(), folder)
    (folder / "cloud_pue.csv").write_text("provider,pue,applies_to,date,source,confidence,notes\n"
                                          "aws,0.9,fleet,2026-01,x,high,\n")
    path.unlink()
    with pytest.raises(CatalogError, match=r"cloud_pue.csv, row 2, column 'pue'"):
        PowerModel.from_catalog(load_catalog(), folder)


def test_without_the_energy_files_every_device_falls_back_to_the_datasheet(tmp_path):
    pm = PowerModel.from_catalog(load_catalog(), tmp_path)
    assert pm.curves == () and pm.cloud_pue("aws") is None
    assert pm.source(load_catalog().device("h200-sxm")).kind == "datasheet"
    assert not math.isnan(pm.idle_w(load_catalog().device("h200-sxm")))
