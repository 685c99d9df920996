"""Collectives from published measurements: the curve model in closed form, the shipped curve files,
and how collective_time_s uses them (planner/predict/collectives.py, planner/predict/parallel.py)."""

import json
import math
from pathlib import Path

import pytest

from planner.errors import ConfigError
from planner.hardware.catalog import load_catalog
from planner.hardware.efficiency import load_defaults
from planner.predict.collectives import (
    Curve,
    DeviceCurves,
    bus_factor,
    collectives_root,
    device_curves,
    holdout,
    load_curves,
    parse_curves,
    summary,
)
from planner.predict import nccl_model
from planner.predict.ops import predict_op
from planner.predict.parallel import _flat, collective_estimate, collective_time_s, links

SHIPPED = Path(__file__).resolve().parents[2] / "hardware_specs" / "collectives"


def toy(op="allreduce", gpus=8, nodes=1, b=(1e3, 4e3), t=(10e-6, 40e-6), engine=None):
    return Curve(op, gpus, nodes, "s", tuple(b), tuple(t), engine)


# ------------------------------------------------------------------ the curve model, closed form

def test_interpolation_is_linear_in_log_bytes_and_log_time():
    c = toy()
    # 2 kB is halfway between 1 and 4 kB in ln(bytes): w = ln 2 / ln 4 = 0.5, so
    # t = exp(ln 10us + 0.5 (ln 40us - ln 10us)) = sqrt(10 x 40) us = 20 us
    assert c.time_at_s(2e3) == pytest.approx(20e-6)
    # measured points come back exactly
    assert c.time_at_s(1e3) == 10e-6 and c.time_at_s(4e3) == 40e-6
    # 1/4 of the way (1e3 * 4^0.25 = 1414 B): 10us * 4^0.25 = 14.14 us
    assert c.time_at_s(1e3 * 4**0.25) == pytest.approx(10e-6 * 4**0.25)


def test_below_the_smallest_size_the_smallest_time():
    # latency-bound: 8 B and 1 kB both take the 1 kB point's 10 us
    assert toy().time_at_s(8) == toy().time_at_s(1e3) == 10e-6


def test_a_curve_that_dips_with_size_is_read_as_its_lower_envelope():
    # measured 20 us at 16 kB, 15 us at 64 kB (an algorithm switch), 40 us at 256 kB: a 16 kB message can be
    # padded to 64 kB, so it takes at most 15 us; 32 kB is halfway in ln(bytes) between 16 and 64 kB:
    # interpolated sqrt(20 x 15) = 17.3 us, held at 15 us; every size reads non-decreasing
    c = toy(b=(16e3, 64e3, 256e3), t=(20e-6, 15e-6, 40e-6))
    assert c.time_at_s(16e3) == c.time_at_s(32e3) == c.time_at_s(8e3) == 15e-6
    # 128 kB: between 64 and 256 kB, sqrt(15 x 40) = 24.5 us, below the larger point: as interpolated
    assert c.time_at_s(128e3) == pytest.approx((15e-6 * 40e-6) ** 0.5)
    sizes = [2 ** i for i in range(8, 22)]
    times = [c.time_at_s(x) for x in sizes]
    assert times == sorted(times)


def test_above_the_largest_size_the_asymptotic_bus_bandwidth():
    c = toy(b=(1e6, 2e6), t=(10e-6, 15e-6))
    # 8-GPU all-reduce, f = 2·7/8 = 1.75; β = 1.75 · (2e6 - 1e6) / (15e-6 - 10e-6) = 3.5e11 B/s;
    # α = 15e-6 - 2e6 · 1.75 / 3.5e11 = 15e-6 - 10e-6 = 5e-6 s
    latency_s, bus = c.asymptote()
    assert bus == pytest.approx(3.5e11) and latency_s == pytest.approx(5e-6)
    # at 4 MB: 5e-6 + 4e6 · 1.75 / 3.5e11 = 5e-6 + 20e-6 = 25 us
    assert c.time_at_s(4e6) == pytest.approx(25e-6)
    # a falling last pair (noise) extrapolates at the largest point's own rate, no latency:
    # β = 1.75 · 2e6 / 12e-6, so t(4 MB) = 12 us · 4e6 / 2e6 = 24 us
    flat = toy(b=(1e6, 2e6), t=(15e-6, 12e-6))
    assert flat.asymptote()[0] == 0 and flat.time_at_s(4e6) == pytest.approx(24e-6)


def test_unmeasured_gpu_counts_scale_the_nearest_by_the_ring_factor():
    dc = DeviceCurves("x", (("s", "toy"),), (toy(gpus=2), toy(gpus=4), toy(gpus=8)), ())
    # 6 GPUs: nearest measured 4 and 8 tie, the larger is taken: f(6)/f(8) = (2·5/6) / (2·7/8) = 20/21
    six = dc.lookup("allreduce", 2e3, 6)
    assert six.time_s == pytest.approx(20e-6 * 20 / 21) and not six.exact
    # 3 GPUs from 4: (2·2/3) / (2·3/4) = 8/9
    assert dc.lookup("allreduce", 2e3, 3).time_s == pytest.approx(20e-6 * 8 / 9)
    # a measured count is read as is
    assert dc.lookup("allreduce", 2e3, 4).time_s == pytest.approx(20e-6) and dc.lookup("allreduce", 2e3, 4).exact
    assert dc.lookup("alltoall", 2e3, 4) is None
    assert bus_factor("allgather", 4) == 0.75 and bus_factor("p2p", 2) == 1


# ------------------------------------------------------------------ the shipped files

def test_shipped_files_load_with_provenance_and_name_catalog_devices():
    curves = load_curves(str(SHIPPED))
    assert {"h100-sxm", "h200-sxm", "b200", "a100-sxm-80gb", "l40s"} <= set(curves)
    catalog = load_catalog()
    for device, dc in curves.items():
        catalog.device(device)
        raw = json.loads((SHIPPED / f"{device}.json").read_text())
        for src in raw["sources"].values():
            assert src["license"] in ("Apache-2.0", "MIT") and len(src["commit"]) == 40 and src["copied"]
            assert not src["path"].startswith("/"), "paths are the upstream repository's"
        for c in dc.curves + dc.custom:
            assert all(t > 0 for t in c.time_s) and list(c.message_bytes) == sorted(c.message_bytes)
    # nccl-tests sizes: 256 .. 268435456 half elements = 512 B .. 512 MiB, 21 points per curve
    h100 = curves["h100-sxm"].find("allreduce", 8, 1)
    assert h100.message_bytes[0] == 512 and h100.message_bytes[-1] == 2**29 and len(h100.message_bytes) == 21


def test_acceptance_16_kib_allreduce_on_8_h100_within_25_percent_of_the_nearest_measurement():
    # the published point nearest 16384 B in the shipped file, read with plain json
    raw = json.loads((SHIPPED / "h100-sxm.json").read_text())
    curve = next(c for c in raw["curves"] if (c["op"], c["gpus"], c["nodes"]) == ("allreduce", 8, 1))
    i = min(range(len(curve["bytes"])), key=lambda j: abs(math.log(curve["bytes"][j] / 16384)))
    measured_s = curve["time_s"][i]
    p = predict_op("allreduce", "h100-sxm", nbytes=16384, gpus=8)
    assert abs(p.time_s / measured_s - 1) <= 0.25
    assert p.tier == "published" and 0 < p.band_fraction < 0.4
    assert "aiconfigurator" in p.source and "measured point" in p.source


def test_held_out_median_error_is_at_most_15_percent_per_device():
    for device, dc in load_curves(str(SHIPPED)).items():
        points = holdout(dc)
        assert summary(points)["median_abs_error"] <= 0.15, device
        # a fixed seed: the same draw every time
        assert [p.message_bytes for p in holdout(dc)] == [p.message_bytes for p in points]


# ------------------------------------------------------------------ how collective_time_s uses them

def test_devices_with_curves_read_them_and_the_rest_keep_the_formula():
    cat, defaults = load_catalog(), load_defaults()
    h100 = cat.device("h100-sxm")
    est = collective_estimate("allreduce", 16384, 8, h100, defaults)
    assert est.tier == "published" and est.time_s == device_curves("h100-sxm").find("allreduce", 8, 1).time_at_s(16384)
    # no curve on the MI300X: RCCL's ring for an all-reduce, the alpha-beta formula for an all-to-all
    mi300x = cat.device("mi300x")
    up, _ = links(mi300x, defaults)
    est = collective_estimate("allreduce", 1e9, 8, mi300x, defaults)
    assert est.tier == "datasheet" and "RCCL model: ring/Simple picked" in est.basis
    assert est.time_s == pytest.approx(nccl_model.rccl_best("allreduce", 1e9, 8, up.bytes_per_s).time_s)
    est = collective_estimate("alltoall", 1e9, 8, mi300x, defaults)
    assert est.tier == "datasheet" and est.time_s == pytest.approx(_flat("alltoall", 1e9, 8, up))


def test_across_nodes_the_measured_two_node_curve_then_nccls_model():
    cat, defaults = load_catalog(), load_defaults()
    a100 = cat.device("a100-sxm-80gb")
    two = device_curves("a100-sxm-80gb").find("allreduce", 16, 2)
    assert collective_time_s("allreduce", 1e8, 16, a100, defaults) == pytest.approx(two.time_at_s(1e8))
    # 4 nodes of 8: no measurement, so NCCL's model (planner/predict/nccl_model.py) of that topology
    est = collective_estimate("allreduce", 1e8, 32, a100, defaults)
    choice = nccl_model.best("allreduce", 1e8, nccl_model.topology(a100, 32, 8))
    assert est.time_s == pytest.approx(choice.time_s) and est.tier == "datasheet"
    assert f"{choice.algorithm}/{choice.protocol} picked" in est.basis
    # h100-sxm has no curve across nodes: the model; 1 GB on 2 x 8 H100 picks NVLink SHARP's tree
    h100 = cat.device("h100-sxm")
    est = collective_estimate("allreduce", 1e9, 16, h100, defaults)
    assert "NVLS tree/Simple picked" in est.basis
    # all-to-all is not in NCCL's model: still hierarchical over the measured curves inside each node
    dc = device_curves("h100-sxm")
    _, out = links(h100, defaults)
    est = collective_estimate("alltoall", 1e9, 16, h100, defaults)
    inner = dc.lookup("alltoall", 1e9 * 8 / 16, 8).time_s
    assert est.time_s == pytest.approx(inner + 1 * out.latency_s + 1e9 * 8 / 16 / out.bytes_per_s)


def test_a_pcie_pair_server_is_timed_from_its_measured_curve_without_a_scale_out_link():
    # a100-pcie-80gb: NVLink pairs (2 per node), no sourced scale-out; Vidur measured 4 GPUs of one VM
    cat, defaults = load_catalog(), load_defaults()
    dev = cat.device("a100-pcie-80gb")
    assert collective_estimate("allreduce", 1e8, 4, dev, defaults).tier == "published"
    with pytest.raises(ConfigError, match="--scaleout-gbps"):
        collective_time_s("allreduce", 1e8, 8, dev, defaults)


def test_engines_with_their_own_allreduce_use_it_where_faster_than_nccl():
    cat, defaults = load_catalog(), load_defaults()
    h100, dc = cat.device("h100-sxm"), device_curves("h100-sxm")
    small = 16384  # a decode step's [4 tokens, 2048] bf16 activation
    nccl = collective_time_s("allreduce", small, 8, h100, defaults)
    vllm = collective_time_s("allreduce", small, 8, h100, defaults, engine="vllm")
    assert vllm == pytest.approx(dc.custom_lookup("vllm", small, 8).time_s) and vllm < nccl
    # eager PyTorch all-reduces through NCCL only
    assert collective_time_s("allreduce", small, 8, h100, defaults, engine="eager") == nccl
    # 512 MiB: the engine's curve is no faster than NCCL's, so NCCL's is kept
    big = 2**29
    assert collective_time_s("allreduce", big, 8, h100, defaults, engine="vllm") == pytest.approx(
        min(dc.lookup("allreduce", big, 8).time_s, dc.custom_lookup("vllm", big, 8).time_s))


def test_bad_curve_files_are_refused_with_the_field_named():
    good = {"device": "x", "sources": {"s": {"repository": "r", "commit": "c", "path": "p", "license": "MIT",
                                             "method": "m"}},
            "curves": [{"op": "allreduce", "gpus": 8, "nodes": 1, "source": "s", "bytes": [1, 2],
                        "time_s": [1e-6, 2e-6]}]}
    assert parse_curves(good, "f").find("allreduce", 8, 1) is not None
    for change, message in ((("bytes", [2, 1]), "ascending"), (("time_s", [1e-6, -1]), "positive"),
                            (("op", "broadcast"), "unknown op"), (("gpus", 1), "gpus"), (("source", "t"), "source"),
                            (("bytes", [1]), "equal length")):
        bad = json.loads(json.dumps(good))
        bad["curves"][0][change[0]] = change[1]
        with pytest.raises(ConfigError, match=message):
            parse_curves(bad, "f")


def test_the_folder_follows_planner_hardware_specs(tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_HARDWARE_SPECS", str(tmp_path))
    assert collectives_root() == tmp_path / "collectives" and device_curves("h100-sxm") is None
