"""NCCL's own cost model: time of a collective per algorithm and protocol, and the one NCCL picks.

The constants are NCCL's (hardware_specs/collectives/tuning/nccl_tuning.json, read from NVIDIA/nccl
src/graph/tuning.cc and its neighbours at the commit recorded there); the formulas follow that file's
ncclTopoTuneModel and ncclTopoGetAlgoTime, written out here. For a message of M bytes (the full buffer,
nccl-tests' definition) over n ranks on N nodes of p = n/N ranks each:

    time(algorithm, protocol) = latency + M / algorithm bandwidth
    ring all-reduce        steps s = 2(n-1), of which 2(N-1) cross nodes
        latency   = base[ring][proto] + (s - 2(N-1)) · intra + 2(N-1) · inter
                    (intra = hw[NVLink or PCI][ring][proto], at least the network post overhead when N > 1;
                     inter = hw[net][ring][proto]; Simple on N > 1 x 1.4, Ampere and later)
        bandwidth = busBw · n / s,  busBw = C · b, Simple; LL: min(llMax, busBw / 2);
                    LL128: min(0.92 · busBw, C · LL128 cap)
    tree all-reduce        latency = base[tree][proto] + 2((p-1) · intra + log2(N) · inter)
        bandwidth = 0.5 · min(0.92 · C·b, C · tree cap) (LL: / 3.8, at most llMax; LL128: · 7/9 on one node,
                    120/128 across nodes, at most C · LL128 tree cap) · tree correction(log2(M / 64))
    NVLS (NVLink SHARP, one node, Hopper and later with NVSwitch)   latency = hw[NVLink][nvls][Simple] (25 us)
        busBw = C · min(2 · eff · (C-1)/C · b_intra, b_inter), bandwidth = busBw · n / s
    NVLS tree (across nodes)  latency = hw[NVLink][nvls_tree] + 2 log2(N) · hw[net][nvls_tree]
        busBw = C · min(2 · eff · (C-1)/C · b_intra, b_net · (2 if N <= 2), NVLS tree cap), bandwidth = busBw · n / s
    all-gather, reduce-scatter: ring with s = n-1 (N-1 crossing nodes); NVLS on one node with
        busBw = C · min(eff · (C-1)/C · (p-1)/p · b_intra, b_inter), used as the bandwidth as it is

C · b is the topology search's result (channels x GB/s per channel), which this module approximates from the
catalog: inside a node, NVLink links per GPU x NCCL's per-link figure (20 / 20.6 / 40.1 GB/s for Ampere /
Hopper / Blackwell), or PCIe at 3/4 of its raw rate (NCCL's lane table), with C = links (2 on PCIe);
across nodes, one NIC per GPU at the fastest speed of NCCL's search list not above the device's scale-out
bandwidth, C = GPUs per node, C·b = min(inside, that). NVLS: C = GPUs per node (at most 32), b_intra the
fastest search speed not above the node's NVLink bandwidth / C, b_inter the fastest not above 2 b_intra.
NCCL picks the (algorithm, protocol) of least time; so does `best`. Pure functions over frozen values.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from planner.errors import ConfigError
from planner.files import parse_json, read_text, shipped_specs

PROTOCOLS = ("LL", "LL128", "Simple")
MODELLED = ("allreduce", "allgather", "reducescatter")


@dataclass(frozen=True, slots=True)
class Topology:
    """What NCCL's tuning sees of a communicator."""

    ranks: int
    """GPUs in the group (n)."""
    nodes: int
    """Nodes the group spans (N); ranks are spread evenly."""
    cc: int
    """NCCL's compute-capability index: 0 Volta (and Turing), 1 Ampere (and Ada), 2 Hopper, 3 Blackwell."""
    intra: str
    """'nvlink' or 'pci': the link between GPUs of one node."""
    intra_gbps: float
    """The node's GPU-to-GPU bandwidth per GPU as NCCL counts it, GB/s (links x per-link figure)."""
    intra_channels: int
    """Channels of the intra-node graph (NVLink links per GPU, 2 on PCIe)."""
    nvls: bool
    """NVLink SHARP available (Hopper or later behind NVSwitch)."""
    net_gbps: float = 0.0
    """One NIC's bandwidth per GPU in GB/s (the device's scale-out); 0 on one node."""


@dataclass(frozen=True, slots=True)
class Choice:
    """One (algorithm, protocol) and its modelled time."""

    algorithm: str
    protocol: str
    time_s: float
    latency_s: float
    algo_bytes_per_s: float
    """M / (time - latency): the bandwidth the message moves at."""


NCCL_KEYS = ("base_latency_us", "hw_latency_us", "ll_max_bw_GBps", "per_channel_max_ring_ll128_GBps",
             "per_channel_max_tree_ll128_GBps", "per_channel_max_tree_GBps", "per_channel_max_nvls_tree_GBps",
             "nvls_efficiency", "tree_correction", "speed_intra_GBps", "speed_inter_GBps", "nvlink_bw_per_link_GBps",
             "compcap_index", "nvlink_link_rate_GBps", "source")
RCCL_KEYS = ("base_latency_us", "hw_latency_us", "ll_max_bytes", "ll_bandwidth_fraction", "net_overhead_us",
             "ll_multinode_intra_factor", "tree_bandwidth_fraction", "source")
"""The keys each tuning file must hold (a missing one is a one-line error naming the file, not a KeyError)."""


def tuning_path(name: str = "nccl_tuning.json") -> Path:
    """$PLANNER_HARDWARE_SPECS/collectives/tuning/`name` when present, else the repository's."""
    specs = os.environ.get("PLANNER_HARDWARE_SPECS")
    if specs and (p := Path(specs) / "collectives" / "tuning" / name).is_file():
        return p
    return shipped_specs() / "collectives" / "tuning" / name


@lru_cache(maxsize=8)
def _load(path: str, need: tuple[str, ...]) -> dict:
    where = f"hardware_specs/collectives/tuning/{Path(path).name}"
    data = parse_json(read_text(Path(path), where), where)
    missing = [k for k in need if k not in data] if isinstance(data, dict) else list(need)
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    return data


def constants() -> dict:
    """The tuning constants (hardware_specs/collectives/tuning/nccl_tuning.json)."""
    return _load(str(tuning_path()), NCCL_KEYS)


def source_line() -> str:
    s = constants()["source"]
    return f"NCCL tuning.cc constants, {s['repository'].removeprefix('https://')} @{s['commit'][:7]}"


def _snap(speeds: list[float], at_most: float) -> float:
    """The fastest speed of NCCL's search list not above `at_most` (the slowest when none is)."""
    fit = [s for s in speeds if s <= at_most]
    return max(fit) if fit else min(speeds)


def _log2i(x: int) -> int:
    return max(0, int(x).bit_length() - 1)


def choices(op: str, message_bytes: float, topo: Topology) -> list[Choice]:
    """Every enabled (algorithm, protocol) of `op` with its time (module docstring), unordered."""
    if op not in MODELLED:
        raise ConfigError(f"NCCL's model covers {', '.join(MODELLED)}, not '{op}'")
    k = constants()
    n, N, cc = topo.ranks, topo.nodes, topo.cc
    if n <= 1 or message_bytes <= 0:
        return [Choice("none", "none", 0.0, 0.0, math.inf)]
    p = n / N
    col = min(N, 3) - 1
    hw_intra = k["hw_latency_us"][topo.intra]
    hw_net = k["hw_latency_us"]["net"]
    base = k["base_latency_us"]
    ll_max = k["ll_max_bw_GBps"][cc if N == 1 else 0][col]
    steps = 2 * (n - 1) if op == "allreduce" else n - 1
    inter_steps = 0 if N == 1 else (2 * (N - 1) if op == "allreduce" else N - 1)
    # the graph: C channels x b GB/s
    if N == 1:
        channels, total = topo.intra_channels, topo.intra_gbps
    else:
        nic = _snap(k["speed_inter_GBps"][cc], topo.net_gbps)
        channels, total = max(1, round(p)), min(topo.intra_gbps, p * nic)
    ll128 = topo.intra == "nvlink"
    out = []

    def add(algo: str, proto: str, lat_us: float, bw_gbps: float):
        if bw_gbps > 0:
            out.append(Choice(algo, proto, (lat_us + message_bytes / (1e3 * bw_gbps)) * 1e-6, lat_us * 1e-6,
                              bw_gbps * 1e9))

    log_size = _log2i(int(message_bytes) >> 6)
    for i, proto in enumerate(PROTOCOLS):
        if proto == "LL128" and not ll128:
            continue
        # ring
        bus = total
        if proto == "LL":
            bus = min(ll_max, bus * 0.5)
        elif proto == "LL128":
            bus = min(bus * 0.92, channels * k["per_channel_max_ring_ll128_GBps"][cc][col])
        intra_lat = hw_intra["ring"][i]
        if N > 1:
            intra_lat = max(intra_lat, k.get("net_overhead_us", 1.0) * (3 if proto == "Simple" else 1))
        inter_lat = (hw_net["tree"] if p == 1 else hw_net["ring"])[i]
        lat = base["ring"][i] + (steps - inter_steps) * intra_lat + inter_steps * inter_lat
        if (proto == "Simple" and N > 1 and op == "allreduce"
                and message_bytes / (channels * n) >= 64):
            f = k.get("ring_simple_multinode_latency_factor", {})
            lat *= f.get("ampere_and_later", 1.4) if cc >= 1 else f.get("before_ampere", 1.9)
        add("ring", proto, lat, bus * n / steps)
        if op != "allreduce":
            continue
        # tree (all-reduce only)
        bus = min(total * 0.92, channels * k["per_channel_max_tree_GBps"][cc][col])
        if proto == "LL":
            bus = min(bus / 3.8, ll_max)
        elif proto == "LL128":
            bus = min(bus * (7 / 9 if N == 1 else 120 / 128), channels * k["per_channel_max_tree_ll128_GBps"][cc][col])
        if 0 <= log_size < 23:
            bus *= k["tree_correction"][proto][log_size]
        lat = base["tree"][i] + 2 * ((p - 1) * hw_intra["tree"][i] + _log2i(N) * hw_net["tree"][i])
        add("tree", proto, lat, bus * 0.5)
    if topo.nvls and topo.intra == "nvlink" and p >= 2:
        eff = k["nvls_efficiency"][cc]
        heads = min(int(p), k.get("max_nvls_arity", 32))
        b_intra = _snap(k["speed_intra_GBps"][cc], topo.intra_gbps / heads)
        if N == 1:
            b_inter = _snap(k["speed_intra_GBps"][cc], 2 * b_intra)
            per = b_intra * eff * (heads - 1) / heads
            if op == "allreduce":
                add("NVLS", "Simple", k["hw_latency_us"]["nvlink"]["nvls"][2],
                    heads * min(2 * per, b_inter) * n / steps)
            else:
                add("NVLS", "Simple", k["hw_latency_us"]["nvlink"]["nvls"][2],
                    heads * min(per * (p - 1) / p, b_inter))
        elif op == "allreduce":
            nic = _snap(k["speed_inter_GBps"][cc], topo.net_gbps)
            per = min(2 * b_intra * eff * (heads - 1) / heads, nic * (2 if N <= 2 else 1),
                      k["per_channel_max_nvls_tree_GBps"][cc][col])
            lat = (base["nvls_tree"][2] + k["hw_latency_us"]["nvlink"]["nvls_tree"][2]
                   + 2 * _log2i(N) * hw_net["nvls_tree"][2])
            add("NVLS tree", "Simple", lat, heads * per * n / steps)
    return out


def best(op: str, message_bytes: float, topo: Topology) -> Choice:
    """The (algorithm, protocol) of least modelled time, as NCCL picks it."""
    return min(choices(op, message_bytes, topo), key=lambda c: c.time_s)


# ------------------------------------------------------------------ the catalog's view

def topology(device, ranks: int, per_node: int, net_bytes_per_s: float | None = None) -> Topology | None:
    """NCCL's view of `ranks` devices of `device` in nodes of `per_node`; None when the model does not apply
    (not an NVIDIA GPU with a known generation, no sourced GPU-to-GPU link, or nodes without a network)."""
    k = constants()
    cc = k["compcap_index"].get(getattr(device, "generation", None) or "")
    if cc is None or getattr(device, "vendor", "") != "NVIDIA":
        return None
    nodes = max(1, math.ceil(ranks / per_node))
    if device.scaleup_bytes_per_s and min(ranks, per_node) <= device.devices_per_node:
        # NVIDIA's scale-up link is NVLink, of the generation's per-link rate; NVSwitch (so NVLS) where more
        # than a bridged pair share the domain
        links = max(1, round(device.scaleup_bytes_per_s / 1e9 / k["nvlink_link_rate_GBps"][cc]))
        intra, gbps, channels = "nvlink", links * k["nvlink_bw_per_link_GBps"][cc], links
        nvls = cc >= 2 and device.devices_per_node >= 4
    elif device.pcie_bytes_per_s:
        intra, gbps, channels, nvls = "pci", device.pcie_bytes_per_s / 1e9 * k.get("pcie_fraction_of_raw", 0.75), 2, False
    else:
        return None
    net = net_bytes_per_s if net_bytes_per_s is not None else device.scaleout_bytes_per_s
    if nodes > 1 and not net:
        return None
    return Topology(ranks, nodes, cc, intra, gbps, channels, nvls, (net or 0.0) / 1e9)


def rccl_constants() -> dict:
    """RCCL's latency constants (hardware_specs/collectives/tuning/rccl_tuning.json)."""
    return _load(str(tuning_path("rccl_tuning.json")), RCCL_KEYS)


def rccl_best(op: str, message_bytes: float, ranks: int, bus_bytes_per_s: float, nodes: int = 1,
              nic_bytes_per_s: float = 0.0) -> Choice:
    """RCCL on AMD GPUs over Infinity Fabric, and across `nodes` over NICs of `nic_bytes_per_s` per GPU: the
    fastest of ring LL (up to RCCL's LL size limit), ring Simple and, for an all-reduce across nodes, tree LL and
    Simple. A message of M bytes over n ranks, p = n / N per node, s = 2(n-1) ring steps for an all-reduce (n-1
    otherwise), of which i = 2(N-1) (N-1) cross nodes:

        ring  latency = base + (s - i) · max(intra, net overhead) + i · inter,   algorithm bw = bus(proto) · n / s
        tree  latency = base + 2((p - 1) · intra + log2(N) · inter),              algorithm bw = 0.5 · bus(proto)
        bus = min(`bus_bytes_per_s`, p · NIC) across nodes;  bus(LL) = 0.5 · bus, bus(Simple) = bus

    with intra x 1.8 for LL across nodes and the constants of rccl_tuning.json (ROCm/rccl tuning.cc).
    ConfigError for an op RCCL's model here does not cover."""
    if op not in MODELLED:
        raise ConfigError(f"RCCL's model covers {', '.join(MODELLED)}, not '{op}'")
    if ranks <= 1 or message_bytes <= 0:
        return Choice("none", "none", 0.0, 0.0, math.inf)
    k = rccl_constants()
    nodes = max(1, nodes)
    per_node = ranks / nodes
    steps = 2 * (ranks - 1) if op == "allreduce" else ranks - 1
    inter_steps = 0 if nodes == 1 else (2 * (nodes - 1) if op == "allreduce" else nodes - 1)
    bus_all = bus_bytes_per_s if nodes == 1 else min(bus_bytes_per_s, per_node * nic_bytes_per_s)
    out = []
    for i, proto in enumerate(PROTOCOLS):
        if proto == "LL128" or (proto == "LL" and message_bytes > k["ll_max_bytes"][op]):
            continue
        bus = bus_all * (k["ll_bandwidth_fraction"] if proto == "LL" else 1.0)
        if bus <= 0:
            continue
        intra = {a: k["hw_latency_us"]["xgmi"][a][i] * (k["ll_multinode_intra_factor"] if proto == "LL" and nodes > 1
                                                         else 1.0) for a in ("ring", "tree")}
        net = {a: k["hw_latency_us"]["net"][a][i] for a in ("ring", "tree")}
        overhead = 0.0 if nodes == 1 else k["net_overhead_us"] * (3 if proto == "Simple" else 1)
        inter = net["tree"] if per_node == 1 else net["ring"]
        lat_us = (k["base_latency_us"]["ring"][i] + (steps - inter_steps) * max(intra["ring"], overhead)
                  + inter_steps * inter)
        algo = bus * ranks / steps
        out.append(Choice("ring", proto, lat_us * 1e-6 + message_bytes / algo, lat_us * 1e-6, algo))
        if op == "allreduce" and nodes > 1:
            lat_us = k["base_latency_us"]["tree"][i] + 2 * ((per_node - 1) * intra["tree"]
                                                            + _log2i(nodes) * net["tree"])
            algo = bus * k["tree_bandwidth_fraction"]
            out.append(Choice("tree", proto, lat_us * 1e-6 + message_bytes / algo, lat_us * 1e-6, algo))
    return min(out, key=lambda c: c.time_s)


def describe_rccl(choice: Choice, ranks: int, nodes: int = 1) -> str:
    s = rccl_constants()["source"]
    where = ("on one node over xGMI" if nodes == 1 else f"on {nodes} nodes, xGMI inside each")
    return (f"RCCL model: {choice.algorithm}/{choice.protocol} picked ({ranks} GPUs {where}; "
            f"latency {choice.latency_s * 1e6:.1f} us, {choice.algo_bytes_per_s / 1e9:.0f} GB/s algorithm bandwidth; "
            f"RCCL tuning.cc latencies, {s['repository'].removeprefix('https://')} @{s['commit'][:7]})")


def describe(choice: Choice, topo: Topology) -> str:
    """One line for a prediction's notes: the algorithm and protocol picked and what they rest on."""
    where = (f"{topo.ranks} GPUs on one node over {'NVLink' if topo.intra == 'nvlink' else 'PCIe'}" if topo.nodes == 1
             else f"{topo.ranks} GPUs on {topo.nodes} nodes ({topo.net_gbps:g} GB/s network per GPU)")
    return (f"NCCL model: {choice.algorithm}/{choice.protocol} picked ({where}; latency "
            f"{choice.latency_s * 1e6:.1f} us, {choice.algo_bytes_per_s / 1e9:.0f} GB/s algorithm bandwidth; "
            f"{source_line()})")
