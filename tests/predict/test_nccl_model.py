"""NCCL's cost model per algorithm and protocol in closed form (planner/predict/nccl_model.py), with the
constants of hardware_specs/collectives/tuning/nccl_tuning.json (NVIDIA/nccl src/graph/tuning.cc) written out."""

import json
from pathlib import Path

import pytest

from planner.hardware.catalog import load_catalog
from planner.hardware.efficiency import load_defaults
from planner.predict import nccl_model
from planner.predict.nccl_model import Topology, best, choices
from planner.predict.parallel import collective_estimate

TUNING = Path(__file__).resolve().parents[2] / "hardware_specs" / "collectives" / "tuning" / "nccl_tuning.json"
# 8 A100 behind NVSwitch: 12 NVLink links x NCCL's 20 GB/s = 240 GB/s, 12 channels, no NVLS (Ampere)
A100 = Topology(ranks=8, nodes=1, cc=1, intra="nvlink", intra_gbps=240.0, intra_channels=12, nvls=False)


def pick(op, nbytes, topo, algo, proto):
    return next(c for c in choices(op, nbytes, topo) if (c.algorithm, c.protocol) == (algo, proto))


def test_the_constants_name_nccls_source_and_commit():
    data = json.loads(TUNING.read_text())
    assert data["source"]["repository"] == "https://github.com/NVIDIA/nccl"
    assert len(data["source"]["commit"]) == 40 and "tuning.cc" in data["source"]["paths"][0]
    assert data["base_latency_us"]["ring"] == [6.6, 14.0, 8.4] and data["hw_latency_us"]["nvlink"]["ring"] == [0.6, 1.9, 3.4]


def test_ring_simple_allreduce_closed_form():
    # latency = base 8.4 us + 2(n-1) = 14 steps x NVLink Simple 3.4 us = 56.0 us
    # bandwidth = busBw x n / 2(n-1) = 240 x 8/14 GB/s; time = 56 us + M / that
    m = 1e9
    c = pick("allreduce", m, A100, "ring", "Simple")
    assert c.latency_s == pytest.approx(56.0e-6)
    assert c.time_s == pytest.approx(56.0e-6 + m / (240e9 * 8 / 14))
    # equivalently 2(n-1)/n x M / busbw + 2(n-1) x per-hop latency + base
    assert c.time_s == pytest.approx(2 * 7 / 8 * m / 240e9 + 14 * 3.4e-6 + 8.4e-6)


def test_ring_ll_and_ll128_closed_form():
    m = 2**20
    ll = pick("allreduce", m, A100, "ring", "LL")
    # LL: busBw = min(llMax 87.7 (Ampere, 1 node), 240 / 2) = 87.7; latency 6.6 + 14 x 0.6 = 15.0 us
    assert ll.time_s == pytest.approx(15.0e-6 + m / (87.7e9 * 8 / 14))
    ll128 = pick("allreduce", m, A100, "ring", "LL128")
    # LL128: busBw = min(0.92 x 240, 12 channels x 20) = 220.8; latency 14 + 14 x 1.9 = 40.6 us
    assert ll128.time_s == pytest.approx(40.6e-6 + m / (220.8e9 * 8 / 14))


def test_algorithm_and_protocol_by_size():
    # small messages: LL (lowest latency); large: Simple (highest bandwidth)
    assert (best("allreduce", 1024, A100).protocol, best("allreduce", 4e9, A100).protocol) == ("LL", "Simple")
    # Hopper behind NVSwitch: NVLS for large all-reduces, a ring for tiny ones
    h100 = Topology(8, 1, 2, "nvlink", 18 * 20.6, 18, True)
    assert best("allreduce", 8e9, h100).algorithm == "NVLS"
    assert best("allreduce", 64, h100).algorithm == "ring"
    # NVLS: 8 heads, b_intra = 40 (fastest Hopper search speed <= 370.8 / 8), b_inter = 60 (<= 80):
    # busBw = 8 x min(2 x 0.85 x 7/8 x 40, 60) = 476 GB/s, latency 25 us
    c = pick("allreduce", 8e9, h100, "NVLS", "Simple")
    assert c.time_s == pytest.approx(25e-6 + 8e9 / (476e9 * 8 / 14))
    # 2 nodes of 8 H100 with a 50 GB/s NIC each: NVLS tree, 8 x min(59.5, 48 x 2, cap 57.7) = 461.6 GB/s
    two = Topology(16, 2, 2, "nvlink", 18 * 20.6, 18, True, 50.0)
    c = best("allreduce", 4e9, two)
    assert c.algorithm == "NVLS tree" and c.time_s == pytest.approx((25 + 2 * 20.9) * 1e-6 + 4e9 / (461.6e9 * 16 / 30))


def test_never_faster_than_bytes_over_link_bandwidth():
    cat = load_catalog()
    for dev, n, per_node in (("a100-sxm-80gb", 8, 8), ("h100-sxm", 8, 8), ("b200", 32, 8), ("l4", 8, 8),
                             ("h100-sxm", 16, 8)):
        d = cat.device(dev)
        topo = nccl_model.topology(d, n, per_node)
        for m in (8, 2**10, 2**20, 2**27, 2**33):
            t = best("allreduce", m, topo).time_s
            # each rank must at least send (n-1)/n of the buffer once (reduce-scatter half) over its links
            link = (d.scaleup_bytes_per_s if topo.intra == "nvlink" else d.pcie_bytes_per_s)
            assert t >= (n - 1) / n * m / link
            if topo.nodes > 1:  # the node's data leaving over its NICs
                assert t >= (topo.nodes - 1) / topo.nodes * m / (per_node * d.scaleout_bytes_per_s)


def test_the_prediction_note_names_algorithm_and_protocol():
    cat, defaults = load_catalog(), load_defaults()
    # a100-sxm-40gb has no measured curves: NCCL's model on one node
    est = collective_estimate("allreduce", 10 * 2**30, 8, cat.device("a100-sxm-40gb"), defaults)
    assert "NCCL model: ring/Simple picked" in est.basis and "NVIDIA/nccl @5067397" in est.basis
    # h100-sxm's curve ends at 512 MiB: 8 GiB is NCCL's model (NVLS), 1 MiB stays the measurement
    h100 = cat.device("h100-sxm")
    assert "NVLS/Simple" in collective_estimate("allreduce", 8 * 2**30, 8, h100, defaults).basis
    assert collective_estimate("allreduce", 2**20, 8, h100, defaults).tier == "published"


def test_amd_and_alltoall_stay_outside_the_model():
    cat = load_catalog()
    assert nccl_model.topology(cat.device("mi300x"), 8, 8) is None
    with pytest.raises(Exception):
        choices("alltoall", 1e6, A100)


def test_rccl_ring_on_one_node_is_the_faster_of_ll_and_simple_in_closed_form():
    # 8 ranks, all-reduce: s = 2(8-1) = 14 steps; bus 358.4 GB/s (448 x 0.8)
    # LL:     12 + 14 x 0.8 = 23.2 us, algorithm bandwidth 0.5 x 358.4e9 x 8 / 14 = 102.4 GB/s
    # Simple: 17 + 14 x 2.1 = 46.4 us, algorithm bandwidth 358.4e9 x 8 / 14 = 204.8 GB/s
    from planner.predict.nccl_model import rccl_best

    bus = 358.4e9
    small = rccl_best("allreduce", 8192, 8, bus)
    assert (small.protocol, small.latency_s) == ("LL", pytest.approx(23.2e-6))
    assert small.time_s == pytest.approx(23.2e-6 + 8192 / 102.4e9)
    # above RCCL's 1 MiB LL limit only Simple runs: 46.4 us + 16 MiB / 204.8 GB/s
    big = rccl_best("allreduce", 16 * 2**20, 8, bus)
    assert big.protocol == "Simple"
    assert big.time_s == pytest.approx(46.4e-6 + 16 * 2**20 / 204.8e9)
    # all-gather: s = 7 steps, LL up to 98,304 B: 12 + 7 x 0.8 = 17.6 us
    assert rccl_best("allgather", 65536, 8, bus).latency_s == pytest.approx(17.6e-6)
    assert rccl_best("allreduce", 8192, 1, bus).time_s == 0.0


def test_rccl_across_nodes_takes_the_nics_and_rccls_network_latencies_in_closed_form():
    from planner.predict.nccl_model import rccl_best

    # 2 nodes x 8 ranks, all-reduce, intra bus 358.4 GB/s, one 50 GB/s NIC per GPU: bus = min(358.4, 8 x 50)
    bus, nic = 358.4e9, 50e9
    # tree LL (8 KiB <= 1 MiB): 12 + 2((8-1) x 0.9 x 1.8 + log2(2) x 10.5) = 55.68 us, algorithm bw 0.5 x 0.5 x bus
    small = rccl_best("allreduce", 8192, 16, bus, nodes=2, nic_bytes_per_s=nic)
    assert (small.algorithm, small.protocol) == ("tree", "LL")
    assert small.time_s == pytest.approx(55.68e-6 + 8192 / (0.25 * bus))
    # 16 GiB: ring Simple, s = 30 steps of which 2 cross nodes:
    # 17 + 28 x max(2.1, 2 x 3) + 2 x 320 = 825 us; algorithm bw = bus x 16 / 30
    big = rccl_best("allreduce", 16 * 2**30, 16, bus, nodes=2, nic_bytes_per_s=nic)
    assert (big.algorithm, big.protocol) == ("ring", "Simple")
    assert big.time_s == pytest.approx(825e-6 + 16 * 2**30 / (bus * 16 / 30))
    # NICs slower than the node: 8 x 25 GB/s = 200 GB/s bounds the bus
    slow = rccl_best("allreduce", 16 * 2**30, 16, bus, nodes=2, nic_bytes_per_s=25e9)
    assert slow.algo_bytes_per_s == pytest.approx(200e9 * 16 / 30)
