"""Convert published collective measurements into hardware_specs/collectives/<device-id>.json.

Sources (copies in the shared reference folder; the planner itself never reads them):
- aiconfigurator (ai-dynamo/aiconfigurator @095f58a, Apache-2.0): `nccl_perf.parquet` per system,
  nccl-tests out-of-place times on one node (2, 4, 8 GPUs), and `custom_allreduce_perf.parquet`, the
  serving engines' own all-reduce kernels (TensorRT-LLM, vLLM, SGLang).
- Vidur (microsoft/vidur @7d47513, MIT): `all_reduce.csv` and `send_recv.csv` of torch.distributed
  (NCCL) captured in a CUDA graph, on DGX A100 (incl. two nodes), DGX H100, and 4-GPU VMs of NVLink
  pairs (A100 PCIe, H100 NVL).

What is kept, per device: for each (op, GPUs, nodes) one measured curve of time (s) against message
bytes (the full buffer as nccl-tests counts it: the all-reduce buffer, the gathered output of an
all-gather, the input of a reduce-scatter, one rank's send buffer of an all-to-all, the message of a
send/recv), and per engine the custom all-reduce curve. Methods:
- aiconfigurator NCCL: the newest NCCL version folder per system; `half` rows only (16-bit, as planner's
  activations and gradients; int8 rows left out); bytes = elements x 2; time = latency ms / 1000; every
  point kept (21 sizes, 512 B .. 512 MiB).
- aiconfigurator custom all-reduce: per engine the newest version folder whose rows name that
  engine (a folder holding another engine's rows is skipped); vLLM and SGLang rows measured inside a
  CUDA graph (`*_graph`; the eager rows are left out: nccl-tests times are back-to-back launches too);
  bf16, bytes = elements x 2; every point kept (23 sizes, 256 B .. 1 GiB).
- Vidur: the median column (ms); ~1,000 sizes per curve are subsampled to one point per half-octave
  bin of bytes (2^(k/2) <= bytes < 2^((k+1)/2)): the measured point whose time is the bin's median
  (the lower median for an even count); bytes = fp16 elements x 2.
- Where both sources measured the same (op, GPUs, nodes), aiconfigurator's curve is kept (newer
  NCCL, nccl-tests), so each key has exactly one curve.
- Times are written with 6 significant digits.

Run:  .venv/bin/python scripts/import_collectives.py [--src /work/shared/public_profiles] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from datetime import date
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.hardware.catalog import load_catalog  # noqa: E402

AIC = {"repository": "https://github.com/ai-dynamo/aiconfigurator",
       "commit": "095f58a51c4ca8e61b66ec108d86f223f8d559ce", "license": "Apache-2.0",
       "copied": "2026-11-23"}
AIC_DATA = "aic-core/src/aiconfigurator_core/systems/data"
VIDUR = {"repository": "https://github.com/microsoft/vidur",
         "commit": "7d47513363ec447a741ac5e47241580b47724fbf", "license": "MIT", "copied": "2026-11-23"}
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200", "a100_sxm": "a100-sxm-80gb",
           "l40s": "l40s"}
OPS = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
       "alltoall": "alltoall", "send_recv": "p2p"}
ENGINES = {"trtllm": ("TRTLLM", None), "vllm": ("vLLM", "vllm_graph"), "sglang": ("SGLang", "sglang_graph")}
NCCL_METHOD = ("nccl-tests {op}_perf binaries run by aiconfigurator's collector/collect_nccl.py: one process, "
               "-t GPUs threads, one node, -w 40 -n 1000/500/100 (by size) -c 0; time = the out-of-place "
               "time column; dtype half (message_size elements x 2 = bytes); every point kept")
CUSTOM_METHOD = ("the engine's own tensor-parallel all-reduce as aiconfigurator's collector/collect_all_reduce.py "
                 "calls it ({impl}), captured in a CUDA graph; bf16, one node; message_size elements x 2 = bytes; "
                 "every point kept. The engine picks its custom one-/two-shot kernel or NCCL by size, so at large "
                 "sizes these curves meet the NCCL curve")
VIDUR_METHOD = ("Vidur's collectives profiler (vidur/profiling/collectives): torch.distributed {op} on NCCL "
                "captured in a CUDA graph (GraphedCollective), fp16; time = the median column (ms); size "
                "elements x 2 = bytes; subsampled to one point per half-octave bin of bytes: the measured "
                "point with the bin's median time (lower median for an even count)")

# (vidur node folder, file, num_workers, vidur devices_per_node, device id, gpus, nodes, setup)
# nodes = scale-up domains (the catalog's devices_per_node): DGX A100 = 8 GPUs, an NVLink pair = 2.
VIDUR_CURVES = (
    ("a100_dgx", "all_reduce", 2, 1, "a100-sxm-80gb", 2, 2, "two DGX A100 (8x A100-SXM4-80GB), 1 GPU each"),
    ("a100_dgx", "all_reduce", 4, 2, "a100-sxm-80gb", 4, 2, "two DGX A100, 2 GPUs each"),
    ("a100_dgx", "all_reduce", 8, 4, "a100-sxm-80gb", 8, 2, "two DGX A100, 4 GPUs each"),
    ("a100_dgx", "all_reduce", 16, 8, "a100-sxm-80gb", 16, 2, "two DGX A100, 8 GPUs each"),
    ("a100_dgx", "send_recv", 2, 1, "a100-sxm-80gb", 2, 2, "two DGX A100, 1 GPU each"),
    ("a100_dgx", "send_recv", 2, 2, "a100-sxm-80gb", 2, 1, "one DGX A100, 2 GPUs (NVSwitch)"),
    ("h100_dgx", "send_recv", 2, 2, "h100-sxm", 2, 1, "one DGX H100, 2 GPUs (NVSwitch)"),
    ("a100_pairwise_nvlink", "all_reduce", 2, 2, "a100-pcie-80gb", 2, 1,
     "Azure Standard_NC96ads_A100_v4 (4x A100 80GB PCIe in NVLink pairs): one NVLink pair"),
    ("a100_pairwise_nvlink", "all_reduce", 4, 4, "a100-pcie-80gb", 4, 2,
     "Azure Standard_NC96ads_A100_v4: all 4 GPUs, i.e. two NVLink pairs joined by PCIe inside one VM"),
    ("a100_pairwise_nvlink", "send_recv", 2, 2, "a100-pcie-80gb", 2, 1,
     "Azure Standard_NC96ads_A100_v4: inside one NVLink pair"),
    ("a100_pairwise_nvlink", "send_recv", 2, 1, "a100-pcie-80gb", 2, 2,
     "Azure Standard_NC96ads_A100_v4: between two NVLink pairs (PCIe inside one VM)"),
    ("h100_pairwise_nvlink", "all_reduce", 2, 2, "h100-nvl", 2, 1,
     "Azure VM with 4x H100 NVL in NVLink pairs: one NVLink pair"),
    ("h100_pairwise_nvlink", "all_reduce", 4, 4, "h100-nvl", 4, 2,
     "Azure VM with 4x H100 NVL: all 4 GPUs, two NVLink pairs joined by PCIe inside one VM"),
)
VIDUR_LEFT_OUT = {  # device -> what of Vidur's data for it is not used, and why
    "h100-nvl": ["vidur h100_pairwise_nvlink/send_recv.csv: byte-identical to a100_pairwise_nvlink/send_recv.csv, "
                 "so not an H100 measurement"],
    "h100-sxm": ["vidur h100_dgx/send_recv.csv with 1 device per node: Vidur's docs describe h100_dgx as one DGX "
                 "H100, and its 72 GB/s at 128 MiB exceeds one 400 Gb/s NIC, so whether it crossed nodes is unknown",
                 "vidur h100_dgx/all_reduce.csv (2, 4, 8 GPUs, one node): aiconfigurator measured the same keys "
                 "with a newer NCCL through nccl-tests; its curves are kept"],
    "a100-sxm-80gb": ["vidur a100_dgx/all_reduce.csv on one node (2, 4, 8 GPUs): aiconfigurator measured the same "
                      "keys with a newer NCCL through nccl-tests; its curves are kept"],
}


def version_key(text: str) -> tuple:
    """Sort key of a version folder name: 1.3.0rc20 < 1.3.0 < 1.3.0.post1."""
    m = re.match(r"(\d+(?:\.\d+)*)(?:rc(\d+))?(?:\.post(\d+))?", text)
    if not m:
        return ((-1,), 0, 0)
    nums = tuple(int(x) for x in m.group(1).split("."))
    rc = int(m.group(2)) if m.group(2) else 10**6
    return (nums + (0,) * (4 - len(nums)), rc, int(m.group(3) or 0))


def sig(x: float) -> float:
    return float(f"{x:.6g}")


def curve(op: str, gpus: int, nodes: int, source: str, points: list[tuple[float, float]]) -> dict:
    points = sorted(points)
    return {"op": op, "gpus": gpus, "nodes": nodes, "source": source,
            "bytes": [int(b) for b, _ in points], "time_s": [sig(t) for _, t in points]}


def newest(folder: Path) -> list[Path]:
    return sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: version_key(p.name), reverse=True)


def aic_nccl(src: Path, system: str, today: str) -> tuple[dict, list[dict]]:
    folder = newest(src / AIC_DATA / system / "comm" / "nccl")[0]
    path = folder / "nccl_perf.parquet"
    df = pd.read_parquet(path)
    df = df[df.nccl_dtype == "half"]
    file_versions = sorted(set(df["version"])) if "version" in df else []
    key = "aic-nccl"
    source = {**AIC, "path": f"{AIC_DATA}/{system}/comm/nccl/{folder.name}/nccl_perf.parquet",
              "library": f"NCCL {folder.name}", "device_string": min(df.get("device", ["?"])),
              "provenance": _provenance(folder), "imported": today,
              "method": NCCL_METHOD.format(op="{all_reduce,all_gather,reduce_scatter,alltoall}")}
    if file_versions and file_versions != [folder.name]:
        source["note"] = f"the rows' version column says {', '.join(file_versions)}"
    curves = []
    for (op, gpus), g in df.groupby(["op_name", "num_gpus"]):
        if g.message_size.duplicated().any():
            raise SystemExit(f"{path}: duplicate sizes for {op} {gpus} GPUs")
        pts = [(m * 2, lat / 1e3) for m, lat in zip(g.message_size, g.latency)]
        curves.append(curve(OPS[op], int(gpus), 1, key, pts))
    return {key: source}, curves


def aic_custom(src: Path, system: str, today: str) -> tuple[dict, list[dict]]:
    sources, curves = {}, []
    for engine, (framework, backend) in ENGINES.items():
        base = src / AIC_DATA / system / "comm" / engine
        if not base.is_dir():
            continue
        for folder in newest(base):
            path = folder / "custom_allreduce_perf.parquet"
            if not path.is_file():
                continue
            df = pd.read_parquet(path)
            if set(df.framework) != {framework}:
                continue  # a folder holding another engine's rows (e.g. h100 sglang/0.5.6.post2 holds TRT-LLM's)
            if backend is not None:
                df = df[df.backend == backend]
            key = f"aic-custom-{engine}"
            impl = (f"tensor_model_parallel_all_reduce, rows of backend {backend}" if backend else
                    "tensorrt_llm AllReduce, strategy AUTO, no fusion, interleaved with a small GEMM that is timed "
                    "alone and subtracted")
            rel = f"{AIC_DATA}/{system}/comm/{engine}/{folder.name}/custom_allreduce_perf.parquet"
            sources[key] = {**AIC, "path": rel, "library": f"{framework} {folder.name}",
                            "device_string": min(df.device), "provenance": _provenance(folder), "imported": today,
                            "method": CUSTOM_METHOD.format(impl=impl)}
            versions = sorted(set(df.version))
            if versions != [folder.name]:
                sources[key]["note"] = f"the rows' version column says {', '.join(versions)}"
            for gpus, g in df.groupby("num_gpus"):
                pts = [(m * 2, lat / 1e3) for m, lat in zip(g.message_size, g.latency)]
                c = curve("allreduce", int(gpus), 1, key, pts)
                del c["op"]
                curves.append({"engine": engine, **c})
            break
    return sources, curves


def _provenance(folder: Path) -> str:
    meta = folder / "collection_meta.yaml"
    m = re.search(r"^provenance:\s*(\S+)", meta.read_text(), flags=re.MULTILINE) if meta.is_file() else None
    return m.group(1) if m else "not recorded"


def half_octave_subsample(sizes_bytes: list[float], times_s: list[float]) -> list[tuple[float, float]]:
    """One measured point per half-octave bin of bytes: the point whose time is the bin's (lower) median."""
    bins: dict[int, list[tuple[float, float]]] = {}
    for b, t in zip(sizes_bytes, times_s):
        bins.setdefault(math.floor(2 * math.log2(b)), []).append((t, b))
    out = []
    for k in sorted(bins):
        pts = sorted(bins[k])
        t, b = pts[(len(pts) - 1) // 2]
        out.append((b, t))
    return out


def vidur(src: Path, today: str) -> dict[str, tuple[dict, list[dict]]]:
    by_device: dict[str, tuple[dict, list[dict]]] = {}
    for node, coll, workers, dpn, device, gpus, nodes, setup in VIDUR_CURVES:
        rel = f"data/profiling/network/{node}/{coll}.csv"
        df = pd.read_csv(src / rel)
        g = df[(df.num_workers == workers) & (df.devices_per_node == dpn) & (df["rank"] == 0)].sort_values("size")
        col = f"time_stats.{coll}.median"
        pts = half_octave_subsample([s * 2 for s in g["size"]], [t / 1e3 for t in g[col]])
        key = f"vidur-{node}-{coll}-{workers}x{dpn}"
        source = {**VIDUR, "path": rel, "library": "torch.distributed NCCL (version not recorded)",
                  "setup": setup, "rows_read": int(len(g)), "points_kept": len(pts), "imported": today,
                  "method": VIDUR_METHOD.format(op=coll)}
        sources, curves = by_device.setdefault(device, ({}, []))
        sources[key] = source
        curves.append(curve(OPS[coll], gpus, nodes, key, pts))
    return by_device


def dump(doc: dict) -> str:
    """JSON with 2-space indent, each list of numbers on one line."""
    text = json.dumps(doc, indent=2)
    def one_line(m: re.Match) -> str:
        return "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]"

    return re.sub(r"\[\s*([-0-9.e+,\s]+?)\s*\]", one_line, text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", type=Path, default=Path("/work/shared/public_profiles"))
    p.add_argument("--out", type=Path, default=ROOT / "hardware_specs" / "collectives")
    args = p.parse_args(argv)
    today = date.today().isoformat()
    catalog = load_catalog()
    docs: dict[str, dict] = {}

    def doc(device: str) -> dict:
        catalog.device(device)  # raises for an id the catalog does not hold
        return docs.setdefault(device, {"device": device, "date": today, "sources": {}, "curves": [],
                                        "custom_allreduce": []})

    for system, device in SYSTEMS.items():
        d = doc(device)
        srcs, curves = aic_nccl(args.src / "aiconfigurator", system, today)
        d["sources"].update(srcs)
        d["curves"] += curves
        srcs, customs = aic_custom(args.src / "aiconfigurator", system, today)
        d["sources"].update(srcs)
        d["custom_allreduce"] += customs
    for device, (srcs, curves) in vidur(args.src / "vidur", today).items():
        d = doc(device)
        have = {(c["op"], c["gpus"], c["nodes"]) for c in d["curves"]}
        for c in curves:
            if (c["op"], c["gpus"], c["nodes"]) in have:
                raise SystemExit(f"{device}: two curves for {c['op']} {c['gpus']} GPUs {c['nodes']} nodes")
            d["curves"].append(c)
        d["sources"].update(srcs)
        if device in VIDUR_LEFT_OUT:
            d["left_out"] = VIDUR_LEFT_OUT[device]
    args.out.mkdir(parents=True, exist_ok=True)
    for device, d in sorted(docs.items()):
        d["curves"].sort(key=lambda c: (c["op"], c["nodes"], c["gpus"]))
        d["custom_allreduce"].sort(key=lambda c: (c["engine"], c["gpus"]))
        path = args.out / f"{device}.json"
        path.write_text(dump(d) + "\n")
        n = sum(len(c["bytes"]) for c in d["curves"] + d["custom_allreduce"])
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {len(d['curves'])} curves, "
              f"{len(d['custom_allreduce'])} custom all-reduce curves, {n} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
