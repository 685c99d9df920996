"""Energy and cost models in closed form."""

import math
from dataclasses import replace

import pytest

from planner.hardware.catalog import load_catalog
from planner.predict.cost import HOURS_PER_MONTH, HOURS_PER_YEAR, cheapest_instance, cloud_cost, onprem_cost
from planner.predict.energy import PowerModel, carbon_kg, facility_kwh
from planner.predict.roofline import OpTime


def test_power_between_idle_and_tdp():
    # the datasheet-fraction model on the H200 (its measured curve set aside: tests/predict/test_power_curves.py)
    cat = load_catalog()
    pm, h200 = replace(PowerModel.from_catalog(cat), curves=()), cat.device("h200-sxm")
    assert pm.source(h200).kind == "datasheet"
    idle = pm.idle_w(h200)
    assert idle == h200.idle_w == 128.8  # measured with a CUDA context held (devices.csv)
    assert pm.power_w(OpTime(1.0, 0.0, 0.0, 1.0, "overhead", 1.0), h200) == pytest.approx(idle)
    compute = pm.power_w(OpTime(1.0, 1.0, 0.1, 0.0, "compute", 1.0), h200)
    memory = pm.power_w(OpTime(1.0, 0.05, 1.0, 0.0, "memory", 1.0), h200)
    # compute-bound work draws more than memory-bound work, both within [idle, TDP]
    assert idle < memory < compute <= h200.tdp_w
    # a fully memory-bound op draws memory_bound_fraction_of_tdp x TDP (u_c = 0)
    pure = pm.power_w(OpTime(1.0, 0.0, 1.0, 0.0, "memory", 1.0), h200)
    assert pure == pytest.approx(idle + (h200.tdp_w - idle) * pm.memory_fraction)


def test_no_sourced_tdp_gives_nan_not_a_guess():
    cat = load_catalog()
    pm, tpu = PowerModel.from_catalog(cat), cat.device("tpu-v5e")
    assert tpu.tdp_w is None
    assert math.isnan(pm.power_w(OpTime(1.0, 1.0, 0.0, 0.0, "compute", 1.0), tpu))


def test_facility_energy_and_carbon():
    # 3.6e6 J at PUE 1.5 = 1.5 kWh; at 0.4 kg/kWh = 0.6 kg
    assert facility_kwh(3.6e6, 1.5) == pytest.approx(1.5)
    assert carbon_kg(1.5, 0.4) == pytest.approx(0.6)


def test_cloud_cost_rounds_up_to_whole_instances():
    cat = load_catalog()
    inst = cheapest_instance(cat, cat.device("h100-sxm"))
    basis = cloud_cost(inst, inst.device_count + 1, "on_demand")
    assert basis.units == 2
    assert basis.usd_per_h == pytest.approx(2 * inst.price_usd_per_h["on_demand"])


def test_onprem_tco_closed_form():
    cat = load_catalog()
    server, site, h100 = cat.server("dgx-h100"), cat.site("us-virginia-colo"), cat.device("h100-sxm")
    # 8 devices at 500 W each plus the rest of the server at its rating, x PUE, x $/kWh;
    # capex over the lifetime; colocation per provisioned kW-month
    basis = onprem_cost(server, site, 8, 500.0, h100.tdp_w, 1.0)
    rest = server.power_w - 8 * h100.tdp_w
    energy = (8 * 500.0 + rest) * site.pue / 1000 * site.electricity_usd_per_kwh
    fixed = (server.capex_usd / (site.lifetime_years * HOURS_PER_YEAR)
             + server.power_w / 1000 * site.colocation_usd_per_kw_month / HOURS_PER_MONTH)
    assert basis.usd_per_h == pytest.approx(fixed + energy)
    # at 50% utilization the fixed part per useful hour doubles
    half = onprem_cost(server, site, 8, 500.0, h100.tdp_w, 0.5)
    assert half.usd_per_h == pytest.approx(2 * fixed + energy)
    assert "operations staff" in " ".join(basis.excluded)


def test_a_missing_price_says_which_pricing_is_missing_not_that_no_instance_holds_the_device():
    # the H100 has instances, none with a reserved_1y price: the note names the pricing and the ones they have
    from planner.hardware.catalog import load_catalog
    from planner.predict import Request, predict
    from planner.predict.cost import no_instance_reason
    cat = load_catalog()
    reason = no_instance_reason(cat, "h100-sxm", "reserved_1y", 8)
    have = sorted({p for i in cat.instances if i.device_id == "h100-sxm" for p in i.price_usd_per_h})
    assert reason == f"no catalog instance of h100-sxm has a reserved_1y price (they have: {', '.join(have)})"
    assert no_instance_reason(cat, "rtx-5090", "on_demand") == "no catalog instance holds rtx-5090"
    largest = max(i.device_count for i in cat.instances if i.device_id == "h100-sxm" and "on_demand" in i.price_usd_per_h)
    assert no_instance_reason(cat, "h100-sxm", "on_demand", 64) == \
        f"no on_demand instance of h100-sxm holds a tensor-parallel group of 64 (the largest holds {largest})"
    p = predict(Request("llama-3.1-8b", "h100-sxm", pricing="reserved_1y"))
    assert p.cost is None and any(n.startswith(reason + ": no cost") for n in p.notes)


def test_a_deployment_smaller_than_its_instance_says_how_many_devices_sit_idle():
    # 1 B200 priced on the cheapest spot B200 instance: if it holds n devices, n - 1 are paid for and idle
    from planner.hardware.catalog import load_catalog
    from planner.predict import Request, predict
    from planner.predict.cost import cheapest_instance
    cat = load_catalog()
    inst = cheapest_instance(cat, cat.device("b200"), "spot", 1, 1)
    p = predict(Request("mistral-7b", "b200", pricing="spot", batch=64))
    assert p.cost.idle_devices == inst.device_count - 1
    idle = [n for n in p.notes if n.startswith("cost pays for")]
    assert (len(idle) == 1) == (inst.device_count > 1)
    full = predict(Request("mistral-7b", "b200", pricing="spot", batch=64, gpus=inst.device_count,
                           dp=inst.device_count))
    assert full.cost.idle_devices == 0 and not any(n.startswith("cost pays for") for n in full.notes)
