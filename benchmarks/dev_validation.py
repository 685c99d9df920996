"""Validate planner's predictions against 250 published measurements (issue 12, item 6).

Reads benchmarks/data/dev_measurements.csv (a copy of the development validation set; see
benchmarks/data/README.md for its columns and sources; nothing outside the repository is read). For
every row planner can express, it predicts the row's metric through the public API (`planner.predict`:
Request, predict, default_context; `planner.predict.ops.predict_op` for GEMMs, device copies and
collectives, as `planner op` does; `planner.serve.api.serve` for rows measured under a serving load)
and compares it with the published value. Rows it cannot express are listed with the reason; no number
is ever filled in for them.

Run (about 25-35 s on 2 cores, start-up included):
    .venv/bin/python benchmarks/dev_validation.py                          # print the tables
    .venv/bin/python benchmarks/dev_validation.py --limit 20               # the first 20 rows only
    .venv/bin/python benchmarks/dev_validation.py --category gemm --category membw
    .venv/bin/python benchmarks/dev_validation.py --out benchmarks/results/dev_validation_before.json
    .venv/bin/python benchmarks/dev_validation.py --save                   # benchmarks/results/dev_validation.json

What is expressed. A row is predicted when its model is a zoo id, its device maps to a catalog device,
its precision to a planner precision, its parallel layout to tp/pp/dp/ZeRO, and its metric can be computed
from a prediction. Each row runs on its engine (see "engine" below). The line is drawn at *what* runs:
features that change the work and planner cannot express (context
parallelism, grouped GEMMs, a request length distribution, an unstated batch or GPU count) make a row not
expressed; features that change how efficiently the same work runs (async TP, an unstated power limit)
do not, and are listed in the row's notes. A stated power limit ("at 500W power limit") is passed as
--power-limit-w. Mapping decisions:
- models: Llama 3 8B/70B are predicted as llama-3.1-8b/70b (the same layers; only the context length
  differs); timm resnet50 and DLE ResNet-50 v1.5 as resnet50; vit_base_patch16_224 as vit-b-16.
- devices: `device_match` is "exact" when the catalog holds the stated SKU, "nearest" when the row
  names a variant the catalog does not hold but whose chip it does (H800 -> h100-sxm, V100 16GB ->
  v100-sxm2-32gb, Grand Teton H100 96GB 500 W -> h100-sxm, power-limited A100/B200, unstated form
  factors -> SXM); the note says what differs. Other devices are not expressed.
- precision (planner/workload/quant.py): TF32 -> tf32 (planner runs tf32 matmuls on TF32 tensor peaks),
  AMP FP16 -> fp16, BF16 mixed -> bf16, FP8 (tensorwise, rowwise, block-scaled) -> weights=fp8,activations=fp8
  (FP8 GEMMs, attention and KV at bf16), MXFP8 -> mxfp8, NVFP4 -> nvfp4, INT4/INT8 weight-only ->
  weights=int4 / weights=int8, an FP8 KV cache under BF16 weights -> kv=fp8 (training keeps fp32 master
  weights and optimizer state).
- engine (hardware_specs/engines): TensorRT-LLM -> trtllm, vLLM -> vllm, SGLang -> sglang, Megatron/NeMo
  -> megatron, TensorRT -> tensorrt, torch.compile / Inductor / gpt-fast -> compile, anything else -> eager.
- paths: a row measured by an online serving benchmark under a load (its scenario states a concurrency,
  "N concurrent requests" or a request rate; engine vllm, sglang or trtllm; not a fitted value) runs
  through the serving simulator (path "serve", below); every other row through `predict` or `planner op`
  (path "predict"). For a serve row the predict path is computed as well and kept beside it
  (`predict_path`), so that the summary shows both on the same rows.
- workloads: LLM rows on the predict path are one static batch (offline runs of N prompts: the batch of
  all N when it fits in memory, else the largest power of two below N that fits, run in waves; static
  batches, batch-1 decode); serve rows run `serve(Request, Load)` with the row's engine, device, tp and
  precision under the engine file's scheduler defaults: concurrency C is a closed loop of C clients
  (`Load(concurrency=C, requests=K)`, K the stated request count, else max(10 C, 100)), a request rate R
  an open Poisson loop (`Load(rate_rps=R, requests=K)`, K stated, else 1000: the --num-prompts default
  of vLLM's benchmark_serving.py / vllm bench serve), fixed lengths from input_len/output_len, or a
  length preset where the row names a dataset (ShareGPT -> sharegpt, hardware_specs/serving/lengths.csv);
  training rows use the stated per-GPU micro-batch, one micro-batch per step unless
  gradient accumulation is stated, ZeRO-3 for FSDP, ZeRO-0 for DDP, and the stated activation
  checkpointing (per-op SAC -> selective); an LLM training row that does not state it is not expressed.
- metrics: images/sequences per s = samples per s of the deployment (per GPU where the metric says so);
  tokens_per_s_total = batch x (input + output) / latency; output_tokens_per_s and TRT-LLM's tokens_per_s
  = batch x output / latency (generated tokens; see the data README); tokens_per_s_per_user = output /
  latency of a batch-1 request; ms_per_token = TPOT; s_per_batch = latency; tokens_per_s_per_gpu =
  training tokens/s / GPUs; mfu_fraction = planner's MFU; tflop_per_s = 2MNK / time (the best over the
  stated sizes for "best of" rows); gb_per_s = 2 x bytes / time of a device copy; busbw_gb_per_s =
  nccl-tests bus bandwidth; time_us = collective time. Serve rows read the simulated benchmark client
  (planner/serve/metrics.py, as vllm bench serve defines them): output_tokens_per_s, tokens_per_s_total
  and requests_per_s = output tokens, prompt + output tokens and completed requests / the run's span;
  ms_per_token = the stated statistic of inter-token latency (every gap between two streamed tokens,
  pooled over requests: ServeMetrics.itl_s) or of TPOT ((E2E - TTFT) / (output - 1) per request:
  tpot_s); a TTFT metric = the stated statistic of ttft_s.

Output. stdout: median and p90 of |ln(predicted / measured)| and the median signed ln ratio (bias: > 0 =
planner predicts more of the metric than measured) per category, per engine family and per GPU; the
count expressed out of the rows read; per path; for the rows on the serving simulator, the median error
per category on the predict path (before) and on the simulator (after); the rows not expressed, grouped
by reason; planner errors with their inputs. With --out PATH or --save, JSON with one record per row:
    id, category, model, hardware, engine (the framework_and_version column), engine_family, metric,
    measured (the published value), path ("predict" or "serve": which path produced, or would produce,
    the prediction), expressed (bool), and when expressed: predicted, ln_ratio =
    ln(predicted / measured), abs_ln_ratio, device, device_match, gpu (the GPU label used for grouping),
    fits (planner's memory check; the measured run did fit), tier, settings (the planner call: Request
    fields or op arguments, plus notes on approximations); when not expressed: reason (the first check that
    fails, "kind: detail"), the planner call when the library refused it, and traceback for an unexpected
    library error. A serve row also has predict_path: expressed, and predicted, ln_ratio, abs_ln_ratio or
    reason of the predict path on the same row; its settings hold the Load, what was read and a summary
    of the simulated run. The JSON summary's serve_vs_predict gives, per category and overall, the median
    |ln| of the rows on both paths before (predict) and after (serve).
"""

import argparse
import csv
import datetime
import math
import os
import platform
import re
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "dev_measurements.csv"
# the dev set: the shared 250 rows, and the project's own published AMD Instinct and collective rows (same columns)
DEV_SET = tuple(p for p in (DATA, ROOT / "benchmarks" / "data" / "amd_measurements.csv",
                            ROOT / "benchmarks" / "data" / "collective_measurements.csv") if p.is_file())
sys.path.insert(0, str(ROOT))

from planner.errors import PlannerError  # noqa: E402
from planner.predict import Request, default_context, predict  # noqa: E402
from planner.predict.ops import predict_op  # noqa: E402
from planner.serve.api import Load, serve  # noqa: E402
from planner.workload.quant import precision  # noqa: E402

NAME = "dev_validation"


class NotExpressed(Exception):
    """A row planner cannot express; the message is the reason (kind: detail)."""


# ---------------------------------------------------------------- mappings (first match wins)

MODELS = (  # (pattern on the model column, zoo id, note)
    (r"^ResNet-50 v1\.5$|^resnet50$", "resnet50", None),
    (r"^vit_base_patch16_224$", "vit-b-16", None),
    (r"(?i)^BERT-large", "bert-large", None),
    (r"(?i)^BERT-base", "bert-base", None),
    (r"^Llama-2-7B", "llama-2-7b", None),
    (r"^Llama-2-13B", "llama-2-13b", None),
    (r"^Llama-2-70B", "llama-2-70b", None),
    (r"^Llama-3\.1-8B", "llama-3.1-8b", None),
    (r"^(Meta-)?Llama-3-8B", "llama-3.1-8b", "Llama 3 8B as llama-3.1-8b (same layers; context length differs)"),
    (r"^Llama-3\.1-70B", "llama-3.1-70b", None),
    (r"^(Meta-)?Llama-3-70B", "llama-3.1-70b", "Llama 3 70B as llama-3.1-70b (same layers; context length differs)"),
    (r"^Llama-3\.1-405B", "llama-3.1-405b", None),
    (r"^Mistral-7B-v0\.1", "mistral-7b", None),
    (r"^Mixtral-8x7B", "mixtral-8x7b", None),
    (r"^GPT-3 175B", "gpt-3-175b", "vocabulary 131072 in the row, 50257 in the zoo config"),
    (r"^gpt-oss-20b", "gpt-oss-20b", None),
    (r"^Llama-4-Scout", "llama-4-scout", "the text model (107.8B; the row's 109B counts the vision encoder)"),
    (r"^EfficientNet-B0$", "efficientnet-b0", "NVIDIA DLE EfficientNet-B0 as timm efficientnet_b0 (same network)"),
    (r"^EfficientNet-B4$", "efficientnet-b4", "NVIDIA DLE EfficientNet-B4 as timm efficientnet_b4 (same network)"),
    (r"^efficientnet_b0$", "efficientnet-b0", None),
    (r"^convnext_base$", "convnext-base", None),
    (r"^swin_base_patch4_window7_224$", "swin-base", None),
    (r"^vit_large_patch16_224$", "vit-l-16", None),
    (r"^Stable Diffusion XL base 1\.0$", "sdxl-base-1.0", "the whole pipeline: 2 text encoders, 50 UNet steps at "
     "batch 2 x images (classifier-free guidance), the VAE decoder"),
)

HARDWARE = (  # (pattern on the hardware column, catalog id or None, GPU label, note: what differs / why not)
    (r"MI250X, one GCD", None, "MI250X (1 GCD)", "one GCD of an MI250X; catalog mi250x is the whole 2-GCD OAM"),
    (r"^RTX 3090 24GB", "rtx-3090", "RTX 3090", None),
    (r"^RTX 4090 24GB", "rtx-4090", "RTX 4090", None),
    (r"^RTX 5090 32GB", "rtx-5090", "RTX 5090", None),
    (r"^RTX|Radeon|MI210|^L20\b", None, None, "not in the catalog"),
    (r"A100 PCIe 40GB", None, "A100 PCIe 40GB",
     "not in the catalog (a100-pcie-80gb has other bandwidth and TDP)"),
    (r"^H800", "h100-sxm", "H800 SXM5", "H800 SXM5 as h100-sxm (same compute and HBM3; NVLink 400 GB/s)"),
    (r"^H100 SXM 96GB HBM2e", "h100-sxm", "H100 96GB HBM2e 500W (Grand Teton)",
     "96 GB HBM2e part as h100-sxm (80 GB HBM3, 700 W TDP)"),
    (r"^H100 PCIe", "h100-pcie", "H100 PCIe", None),
    (r"^H100 SXM5? 80GB", "h100-sxm", "H100 SXM5 80GB", None),
    (r"^H100", "h100-sxm", "H100 (variant not stated)", "H100 variant not stated: as h100-sxm"),
    (r"^H200 SXM", "h200-sxm", "H200 SXM", None),
    (r"^H200", "h200-sxm", "H200 (form factor not stated)", "H200 form factor not stated: as h200-sxm"),
    (r"^GB200", "gb200", "GB200", None),
    (r"^B200 180GB", "b200", "B200", None),
    (r"^B200.*power-limited", "b200", "B200 (power-limited)", "power limit (not stated) not modelled"),
    (r"^B200", "b200", "B200 (variant not stated)", "B200 variant not stated: as b200 (HGX, 1000 W)"),
    (r"^A100 SXM4 80GB", "a100-sxm-80gb", "A100 SXM4 80GB", None),
    (r"^A100 SXM4 40GB", "a100-sxm-40gb", "A100 SXM4 40GB", None),
    (r"^A100 80GB.*330W", "a100-sxm-80gb", "A100 80GB at 330W", "SXM4 presumed"),
    (r"^A100 80GB", "a100-sxm-80gb", "A100 80GB (form factor not stated)", "form factor not stated: as SXM4"),
    (r"^A100 40GB", "a100-sxm-40gb", "A100 40GB (form factor not stated)", "form factor not stated: as SXM4"),
    (r"^V100 SXM2 16GB", "v100-sxm2-32gb", "V100 SXM2 16GB",
     "16 GB part as v100-sxm2-32gb (same chip, clocks and bandwidth)"),
    (r"^V100 32GB", "v100-sxm2-32gb", "V100 32GB (form factor not stated)", "form factor not stated: as SXM2"),
    (r"MI325X", "mi325x", "MI325X", None),
    (r"MI355X", "mi355x", "MI355X", None),
    (r"MI300X", "mi300x", "MI300X", None),
    (r"^T4\b", "t4", "T4", None),
    (r"^L4\b", "l4", "L4", None),
    (r"^L40S\b", "l40s", "L40S", None),
    (r"^A10\b", "a10", "A10", None),
)

PRECISIONS = (  # (pattern on the precision column, planner precision (planner/workload/quant.py) or None, note)
    (r"INT4", "weights=int4", "INT4 weight-only as weights=int4 (group 128 scales; the row's group may differ)"),
    (r"INT8", "weights=int8", "INT8 weight-only as weights=int8 (per-channel scales)"),
    (r"FP8 KV", "kv=fp8", "BF16 weights with an FP8 KV cache as kv=fp8 (attention at bf16)"),
    (r"MXFP4 weights\+activations", None, "MXFP4 weights and activations on every GEMM (W4A4) has no planner "
     "recipe (mxfp4-moe is MXFP4 experts only)"),
    (r"MXFP4|native weights", "mxfp4-moe", "gpt-oss's native checkpoint: MXFP4 experts, BF16 attention and "
     "embeddings (recipe mxfp4-moe)"),
    (r"NVFP4", "nvfp4", None),
    (r"MXFP8", "mxfp8", None),
    (r"FP8(?! not claimed)", "weights=fp8,activations=fp8",
     "FP8 GEMMs (weights and GEMM inputs at fp8); attention, KV cache and other tensors at bf16"),
    (r"TF32", "tf32", None),
    (r"BF16", "bf16", None),
    (r"AMP|FP16", "fp16", None),
    (r"FP32", "fp32", None),
)

ENGINES = (  # (pattern on framework_and_version, engine family)
    (r"TensorRT-LLM", "TensorRT-LLM"), (r"vLLM", "vLLM"), (r"DeepSpeed", "DeepSpeed"),
    (r"Accelerate|diffusers", "Hugging Face (Accelerate, diffusers)"), (r"Megatron|NeMo", "Megatron/NeMo"),
    (r"torchtitan", "torchtitan (PyTorch)"), (r"fms-fsdp", "PyTorch FSDP (IBM fms-fsdp)"),
    (r"simple eager", "PyTorch"), (r"gpt-fast", "gpt-fast (PyTorch)"), (r"DeepGEMM", "DeepGEMM"),
    (r"hipBLASLt", "hipBLASLt"), (r"cuBLAS|CUBLAS", "cuBLAS/cuBLASLt"), (r"hand-written", "custom CUDA kernel"),
    (r"BabelStream", "BabelStream"), (r"nvbandwidth", "nvbandwidth"), (r"TransferBench", "TransferBench"),
    (r"RCCL", "RCCL (rccl-tests)"), (r"NCCL", "NCCL (nccl-tests)"), (r"PyTorch|timm", "PyTorch"),
)

PLANNER_ENGINES = (  # (pattern on framework_and_version and notes, planner engine: hardware_specs/engines)
    (r"TensorRT-LLM", "trtllm"), (r"vLLM", "vllm"), (r"SGLang", "sglang"), (r"Megatron|NeMo", "megatron"),
    (r"TensorRT", "tensorrt"), (r"torch\.compile|inductor|gpt-fast|\bcompile", "compile"),
    (r"MLPerf Training", "mlperf"),
)
"""The engine each row ran, as planner names it; every other framework runs eager PyTorch kernels."""


MLPERF_BERT_TOKENS = 254
"""Real tokens per sequence of MLPerf Training BERT's phase-2 Wikipedia set, which NVIDIA's code packs (two
sequences per 512-token row) or unpads: 512 - 4.04e10 padding tokens / 156,726,829 sequences = 254.2
(mlcommons/training_results_v3.1@d06288b NVIDIA/benchmarks/bert/implementations/pytorch/input_preprocessing/
packed_data/README.md: 'original 156726829', 'Original dataset used 4.04e+10 padding tokens'). GEMMs and
LayerNorms then run on the real tokens (99.3% of a packed row) and attention per sequence over its own."""


def engine_of(row: dict) -> str:
    found = first_match(PLANNER_ENGINES, row["framework_and_version"])
    return found[0] if found else "eager"


# ---------------------------------------------------------------- serving loads (path "serve")

SERVE_ENGINES = ("vllm", "sglang", "trtllm")
"""Engines with a scheduler block (hardware_specs/engines): the simulator runs their policies."""

RATE_DEFAULT_REQUESTS = 1000
"""Requests of a request-rate row that does not state its count: the --num-prompts default of vLLM's
benchmarks/benchmark_serving.py ("By default <num_prompts> is 1000", its docstring) and vllm bench serve."""

LENGTH_PRESETS = ((r"^ShareGPT$", "sharegpt"),)
"""(pattern on the input_len column, length preset of hardware_specs/serving/lengths.csv)."""


def serving_load(row: dict) -> dict | None:
    """The load a serving row was measured under, as `Load` fields: {"concurrency": C} (closed loop) or
    {"rate_rps": R} (open loop), with "requests" where the notes state the count and "lengths" where the
    row names a dataset; None for every other row (offline and static batches, batch-1 decode, fitted
    values, engines without a scheduler)."""
    if not row["category"].startswith("inference_llm") or engine_of(row) not in SERVE_ENGINES:
        return None
    scenario = row["scenario"]
    if re.search(r"\bintercept\b|\bfit\b", scenario):
        return None  # a value fitted over a sweep (an extrapolation), not a load that was run
    if m := re.search(r"request rate (\d+(?:\.\d+)?) ?(?:QPS|req(?:uests)?/s)", scenario):
        load: dict = {"rate_rps": float(m.group(1))}
    elif m := re.search(r"\bconcurrency[ -]?(\d+)\b|\b(\d+) concurrent (?:requests|clients|users)\b", scenario):
        load = {"concurrency": int(m.group(1) or m.group(2))}
    else:
        return None
    if m := re.search(r"\b(\d[\d,]*) (?:requests|prompts)\b(?!\s*/)", row["notes"]):
        load["requests"] = int(m.group(1).replace(",", ""))
    if found := first_match(LENGTH_PRESETS, row["input_len"].strip()):
        load["lengths"] = found[0]
    return load


STATS = ((r"\bmedian\b|\bp50\b", "p50"), (r"\bmean\b|\baverage\b", "mean"), (r"\bp90\b", "p90"), (r"\bp99\b", "p99"))
"""(pattern on the scenario, then the notes; Percentiles field)."""

SERVE_RATES = {  # metric -> ServeMetrics field; each as vllm bench serve prints it, over the run's span
    "output_tokens_per_s": "output_tokens_per_s",  # "Output token throughput": generated tokens / duration
    "tokens_per_s_total": "total_tokens_per_s",  # "Total Token throughput": (prompt + generated) / duration
    "requests_per_s": "requests_per_s",  # "Request throughput": completed requests / duration
}


def serve_reading(row: dict) -> dict:
    """What to read of the simulated run for the row's metric: {"field", "stat" (latencies), "scale", "what"};
    NotExpressed when the metric is not a serving client's or its statistic is not stated."""
    metric = row["metric"]
    if metric in SERVE_RATES:
        return {"field": SERVE_RATES[metric], "stat": None, "scale": 1.0, "what": SERVE_RATES[metric]}
    if metric == "ms_per_token":
        # TPOT where the row says so: (E2E - TTFT) / (output tokens - 1) per request (ServeMetrics.tpot_s);
        # else inter-token latency (the data README's meaning of ms_per_token): every gap between two
        # streamed tokens, pooled over the requests (ServeMetrics.itl_s, decode steps weighted by their tokens)
        quantity = "tpot_s" if re.search(r"\bTPOT\b|time per output token", row["scenario"]) else "itl_s"
        scale = 1e3
    elif "ttft" in metric.lower():
        quantity = "ttft_s"  # TTFT: first token - request sent (ServeMetrics.ttft_s)
        scale = 1e3 if re.search(r"(^|_)ms(_|$)", metric) else 1.0
    else:
        raise NotExpressed(f"metric not produced: {metric} by the serving simulator")
    for text in (row["scenario"], row["notes"]):
        if found := first_match(STATS, text):
            stat = found[0]
            break
    else:
        raise NotExpressed(f"configuration not stated: which statistic of {quantity[:-2].upper()} ({metric})")
    return {"field": quantity, "stat": stat, "scale": scale, "what": f"{quantity}.{stat} x {scale:g}"}


BABELSTREAM_ARRAY_BYTES = 2**25 * 8
"""BabelStream's default array: 2^25 FP64 elements (the rows say "BabelStream default, not restated")."""


def first_match(table, text: str):
    for entry in table:
        if re.search(entry[0], text):
            return entry[1:]
    return None


def engine_family(framework: str) -> str:
    found = first_match(ENGINES, framework)
    return found[0] if found else "other"


def device_of(hardware: str) -> tuple[str, str, str | None]:
    """(catalog id, GPU label, note or None); NotExpressed when the catalog does not hold it."""
    found = first_match(HARDWARE, hardware)
    if found is None:
        raise NotExpressed(f"device not in the catalog: {hardware}")
    device, label, note = found
    if device is None:
        raise NotExpressed(f"device not in the catalog: {hardware} ({note})")
    return device, label, note


def power_limit_of(hardware: str) -> float | None:
    """The power limit a hardware column states ("at 500W power limit", "power-limited to 330W"), W."""
    if "power" in hardware and (m := re.search(r"(\d{3,4})\s?W\b", hardware)):
        return float(m.group(1))
    return None


def model_of(name: str) -> tuple[str, str | None]:
    found = first_match(MODELS, name)
    if found is None:
        raise NotExpressed(f"model not in the zoo: {name}")
    return found


def dtype_of(precision: str) -> tuple[str, str | None]:
    found = first_match(PRECISIONS, precision)
    if found is None:
        raise NotExpressed(f"precision not mapped to a planner dtype: {precision}")
    dtype, note = found
    if dtype is None:
        raise NotExpressed(f"precision not modelled: {note}")
    return dtype, note


def integer(row: dict, column: str, what: str) -> int:
    text = row[column].strip()
    if not re.fullmatch(r"\d+", text):
        raise NotExpressed(f"configuration not stated: {what} ({column} = {text!r})")
    return int(text)


# ---------------------------------------------------------------- what to run for a row

@dataclass
class Plan:
    """How to predict one row: a Request (kind "request") or op calls (kind "op"), and how to read the metric."""

    kind: str
    device: str
    gpu: str
    device_match: str
    settings: dict
    notes: list = field(default_factory=list)


def parallel_layout(row: dict, mode: str) -> dict:
    """tp, pp, dp, zero and gpus from the parallelism text and the accelerator count."""
    text = row["parallelism"]
    gpus_text = row["accelerator_count"].strip()
    if not gpus_text:
        raise NotExpressed("configuration not stated: GPU count")
    gpus = int(gpus_text)
    if "exact layout only in" in text:
        raise NotExpressed(f"configuration not stated: parallel layout ({text})")
    if "EP=" in text:
        raise NotExpressed(f"parallelism not modelled: expert-parallel / expert-FSDP hybrid ({text})")
    cp = re.search(r"CP=(\d+)", text)
    if cp and int(cp.group(1)) > 1:
        raise NotExpressed(f"parallelism not modelled: context parallelism ({text})")
    tp = int(m.group(1)) if (m := re.search(r"\bTP\s?=?\s?(\d+)", text)) else 1
    pp = int(m.group(1)) if (m := re.search(r"\bPP\s?=?\s?(\d+)", text)) else 1
    if "one model instance" in text and not re.search(r"\bTP\s?=?\s?\d", text):
        tp = gpus // pp  # one instance over every GPU, its split not stated: tensor-parallel over all of them
    if "layer-wise pipeline" in text:
        pp = gpus
    if mode == "training" and pp > 1:
        raise NotExpressed(f"configuration not stated: pipeline micro-batch size ({text})")
    zero = 3 if "FSDP" in text else 0
    fsdp = re.search(r"FSDP=(\d+)", text)
    dp = int(fsdp.group(1)) if fsdp else gpus // (tp * pp)
    if tp * pp * dp != gpus:
        raise NotExpressed(f"configuration inconsistent: layout {text!r} does not make {gpus} GPUs")
    return {"gpus": gpus, "tp": tp, "pp": pp, "dp": dp, "zero": zero}


def recompute_of(row: dict) -> str:
    notes = row["notes"]
    found = re.search(r"activation checkpointing: (none|selective|full)", notes)
    if found:
        return found.group(1)
    if re.search(r"full AC", notes):
        return "full"
    if re.search(r"selective AC|per-op SAC", notes):
        return "selective"
    if re.search(r"AC none", notes):
        return "none"
    raise NotExpressed("configuration not stated: activation checkpointing")


def mixed_precision_of(row: dict) -> tuple[str, str]:
    """How a 16-bit training row keeps its weights (planner.workload.graphs.MIXED_PRECISION), and why:
    the precision column's AMP is torch.autocast (or APEX AMP) over fp32 weights; torchtitan and FSDP
    keep fp32 sharded parameters and compute on 16-bit copies (FSDP MixedPrecision), as "master"."""
    framework = row["framework_and_version"]
    if engine_of(row) == "mlperf":
        return "auto", ""  # the engine's: FP16 weights with an FP32 master copy (hardware_specs/engines/mlperf.json)
    if "AMP" in row["precision"]:
        return "amp", "mixed precision amp (the row says AMP)"
    if "torchtitan" in framework or "FSDP" in framework:
        return "master", "mixed precision master (torchtitan / FSDP: fp32 sharded parameters, bf16 compute copies)"
    return "auto", ""


def model_fields(row: dict, mode: str) -> tuple[dict, list, str, str, str | None]:
    """(Request fields of the model, device, precision, engine, layout and power limit; notes; catalog
    device; GPU label; device note), checked in that order."""
    model, model_note = model_of(row["model"])
    device, gpu, device_note = device_of(row["hardware"])
    dtype, dtype_note = dtype_of(row["precision"])
    layout = parallel_layout(row, mode)
    engine = engine_of(row)
    if engine == "tensorrt" and re.fullmatch(r"(?i)\s*(INT8|FP8)\b.*", row["precision"]):
        # TensorRT quantizes a layer's weights and inputs together (Q/DQ pairs: W8A8), not the weights alone
        dtype = "quant=" + re.match(r"(?i)\s*(INT8|FP8)", row["precision"]).group(1).lower()
        dtype_note = f"TensorRT {dtype[6:].upper()} as recipe {dtype} (weights and GEMM inputs quantized)"
    notes = [n for n in (model_note, device_note, dtype_note) if n]
    fields = {"model": model, "device": device, "mode": mode, "dtype": dtype, "engine": engine, **layout}
    if limit := power_limit_of(row["hardware"]):
        fields["power_limit_w"] = limit
        notes.append(f"stated power limit {limit:g} W as --power-limit-w")
    return fields, notes, device, gpu, device_note


def plan_model(row: dict) -> Plan:
    category, metric = row["category"], row["metric"]
    mode = "training" if category.startswith("training") else "inference"
    fields, notes, device, gpu, device_note = model_fields(row, mode)
    if metric == "requests_per_s":
        raise NotExpressed("workload not modelled: a request-length distribution (ShareGPT) needs a simulator")
    batch = integer(row, "batch_size", "batch")
    if mode == "training":
        llm = category == "training_llm"
        if llm:
            recompute = recompute_of(row)
        else:
            recompute = "none"
            notes.append("no activation checkpointing (DLE and timm scripts use none)")
        mixed, why = mixed_precision_of(row)
        fields.update(micro_batch=batch, recompute=recompute, mixed_precision=mixed)
        if why:
            notes.append(why)
        framework = row["framework_and_version"]
        if "torchtitan" in framework or "fused" in framework:
            # torchtitan's optimizer.implementation defaults to "fused"; the DLE scripts name their fused optimizer
            fields["optimizer"] = "fused"
            notes.append("fused optimizer (torchtitan's default, or named by the row)")
        if category == "training_vision":
            fields["image_size"] = integer(row, "image_size", "image size")
        else:
            fields["seq_len"] = integer(row, "input_len", "sequence length")
            if engine_of(row) == "mlperf" and re.search(r"packed sequences|unpad", row["notes"]):
                fields["seq_len"] = MLPERF_BERT_TOKENS
                notes.append(f"packed / unpadded sequences: {MLPERF_BERT_TOKENS} real tokens per sequence of at most "
                             f"{row['input_len']} (NVIDIA's packing of the MLPerf Wikipedia set)")
        accumulated = re.search(r"accumulated (\d+)", row["notes"])
        if accumulated and fields["dp"] == 1:
            fields["global_batch"] = int(accumulated.group(1))
            notes.append(f"gradient accumulation: {int(accumulated.group(1)) // batch} micro-batches per step")
        elif category == "training_bert" and not re.search(r"accumulation 1\b", row["notes"]):
            notes.append("gradient accumulation not stated: one micro-batch per optimizer step")
        if metric not in ("tokens_per_s_per_gpu", "mfu_fraction", "images_per_s", "images_per_s_total",
                          "sequences_per_s_total"):
            raise NotExpressed(f"metric not produced: {metric} for training")
        if "async TP" in row["parallelism"]:
            notes.append("async TP (communication overlap) not modelled")
    elif category in ("inference_vision", "inference_bert"):
        fields["batch"] = batch
        if category == "inference_vision":
            fields["image_size"] = integer(row, "image_size", "image size")
        else:
            fields["seq_len"] = integer(row, "input_len", "sequence length")
        if metric not in ("images_per_s", "sequences_per_s", "ms_per_pipeline_call", "samples_per_s_total",
                          "latency_p90_ms", "latency_p95_ms"):
            raise NotExpressed(f"metric not produced: {metric} for a forward pass")
        if metric in ("latency_p90_ms", "latency_p95_ms"):
            notes.append(f"{metric[8:11]} latency read as the latency of one forward pass at the row's batch")
        if category == "inference_bert" and row["notes"].startswith("MLPerf"):
            # NVIDIA's MLPerf BERT harness packs SQuAD's sequences at their own lengths (no padding to 384), and
            # the length distribution of those 10,833 samples is not in the data: no fixed length expresses it
            raise NotExpressed("workload not modelled: MLPerf BERT's SQuAD sequences run at their own lengths "
                               "(packed, not padded to 384); their distribution is not published with the result")
    else:
        output_len = integer(row, "output_len", "output length")
        if "intercept" in row["scenario"]:
            input_len = 1
            notes.append("fitted ITL intercept (zero context): predicted as TPOT with a 1-token prompt")
        else:
            input_len = integer(row, "input_len", "input length")
        fields.update(batch=batch, input_len=input_len, output_len=output_len)
        if "concurrency" in row["scenario"]:
            notes.append(f"concurrency {batch} online serving as one static batch of {batch}")
        if metric not in ("tokens_per_s_total", "output_tokens_per_s", "tokens_per_s", "tokens_per_s_per_user",
                          "ms_per_token", "s_per_batch", "ms_per_generated_token_amortized"):
            raise NotExpressed(f"metric not produced: {metric} for LLM serving")
        if metric == "tokens_per_s":
            notes.append("tokens_per_s read as generated tokens / latency (the data README: definition uncertain)")
    match = "exact" if device_note is None else "nearest"
    return Plan("request", device, gpu, match, {"request": fields, "offline": "offline" in row["scenario"]}, notes)


def plan_serve(row: dict, load: dict) -> Plan:
    """A serving row on the simulator: the Request as for predict, the row's load and what to read."""
    fields, notes, device, gpu, device_note = model_fields(row, "inference")
    reading = serve_reading(row)
    load = dict(load)
    if "lengths" in load:
        notes.append(f"{row['input_len']} lengths: the {load['lengths']} preset (hardware_specs/serving/lengths.csv: "
                     "a lognormal fit whose spread the file marks as assumed), sampled with seed 0")
    else:
        fields.update(input_len=integer(row, "input_len", "input length"),
                      output_len=integer(row, "output_len", "output length"))
        if m := re.search(r"(?:\+-|±) ?(\d+)% variance", row["notes"]):
            notes.append(f"lengths varied by +-{m.group(1)}% in the measurement: simulated at the stated "
                         f"{fields['input_len']:,} / {fields['output_len']:,} tokens")
    if "concurrency" in load:
        c = load["concurrency"]
        if "requests" not in load:
            load["requests"] = max(10 * c, 100)
            notes.append(f"request count not stated: {load['requests']} (10 x concurrency, at least 100)")
        batch = row["batch_size"].strip()
        if batch and batch != str(c):
            notes.append(f"batch_size {batch} differs from the stated concurrency {c}: concurrency used")
        what = f"closed loop: {c} clients, {load['requests']} requests"
    else:
        if "requests" not in load:
            load["requests"] = RATE_DEFAULT_REQUESTS
            notes.append(f"request count not stated: {RATE_DEFAULT_REQUESTS} (benchmark_serving.py --num-prompts "
                         "default)")
        what = f"open loop: Poisson arrivals at {load['rate_rps']:g} requests/s, {load['requests']} requests"
    if m := re.search(r"[^,(]*settings(?: \([^)]*\))?", row["framework_and_version"]):
        notes.append(f"engine settings stated as '{m.group(0).strip()}': the engine file's scheduler defaults "
                     "are simulated")
    notes.append(f"{what}; metric read as {reading['what']}")
    match = "exact" if device_note is None else "nearest"
    return Plan("serve", device, gpu, match, {"request": fields, "load": load, "read": reading}, notes)


def gemm_shapes(row: dict) -> tuple[list[tuple[int, int, int]], str | None]:
    """The (M, N, K) shapes of a GEMM row: one, or the stated sizes of a best-of row."""
    name = row["model"]
    if "grouped" in name:
        raise NotExpressed("kernel not in planner op: grouped GEMM (planner op times single GEMMs)")
    if m := re.search(r"M=N=K=(\d+)", name):
        n = int(m.group(1))
        return [(n, n, n)], None
    if m := re.search(r"M=(\d+) N=(\d+) K=(\d+)", name):
        return [tuple(int(g) for g in m.groups())], None
    if "best of" in name and (m := re.search(r"N in \{([\d,]+)\}", row["notes"])):
        sizes = [int(s) for s in m.group(1).split(",")]
        return [(n, n, n) for n in sizes], f"best predicted TFLOP/s over square sizes {sizes}"
    raise NotExpressed(f"GEMM shape not parsed: {name}")


def plan_op(row: dict) -> Plan:
    category, metric, name = row["category"], row["metric"], row["model"]
    notes = []
    if category == "collective":
        if not re.search(r"all_reduce", name):
            raise NotExpressed(f"kernel not in planner op: point-to-point link bandwidth ({name})")
        args = {"op": "allreduce", "nbytes": float(integer(row, "batch_size", "message size")),
                "gpus": integer(row, "accelerator_count", "GPU count"), "nodes": integer(row, "nodes", "nodes")}
        text = row["parallelism"]
        if racks := re.search(r"(\d+) NVL72 racks?", text):
            # one NVLink domain per rack: NCCL sees a rack, not its compute trays, as the node
            args["nodes"] = int(racks.group(1))
            notes.append(f"{racks.group(1)} NVL72 rack(s): one NVLink domain of 72 GPUs each, as {args['nodes']} "
                         "node(s)")
        if args["nodes"] > 1 and (net := re.search(r"(\d+)\s?x\s?(?:(\d+)\s?x\s?)?(\d+)\s?Gb/s", text)):
            # the network the row states, per GPU: NICs x ports x Gb/s per node / GPUs per node
            per_node = int(net.group(1)) * int(net.group(2) or 1) * int(net.group(3))
            args["scaleout_gbps"] = per_node / (args["gpus"] // args["nodes"])
            notes.append(f"network as stated: {net.group(0)} per node = {args['scaleout_gbps']:g} Gb/s per GPU")
        calls = [args]
    elif category == "membw":
        if "Copy" in name:
            nbytes = BABELSTREAM_ARRAY_BYTES
            notes.append("BabelStream default array (2^25 FP64 elements, not stated in the row)")
        elif "tensor copy" in name and (m := re.search(r"2\^([\d.]+) elements", row["notes"])):
            nbytes = round(2 ** float(m.group(1))) * 4
            notes.append(f"largest size of the sweep: 2^{m.group(1)} fp32 elements")
        elif "Triad" in name:
            raise NotExpressed("kernel not in planner op: BabelStream Triad (a device copy only, no 3-stream kernel)")
        else:
            raise NotExpressed(f"not a measurement: {row['scenario']} (a stated estimate)")
        calls = [{"op": "copy", "nbytes": float(nbytes)}]
    else:
        dtype, dtype_note = dtype_of(row["precision"])
        shapes, best_note = gemm_shapes(row)
        notes += [n for n in (dtype_note, best_note) if n]
        gemm_dtype = precision(dtype).gemm  # a GEMM runs at its recipe's GEMM dtype
        calls = [{"op": "gemm", "m": m, "n": n, "k": k, "dtype": gemm_dtype} for m, n, k in shapes]
    device, gpu, device_note = device_of(row["hardware"])
    if device_note:
        notes.append(device_note)
    if metric not in ("tflop_per_s", "gb_per_s", "busbw_gb_per_s", "time_us"):
        raise NotExpressed(f"metric not produced: {metric} by planner op")
    return Plan("op", device, gpu, "exact" if device_note is None else "nearest", {"ops": calls}, notes)


def plan_row(row: dict) -> Plan:
    if row["category"] in ("gemm", "membw", "collective"):
        return plan_op(row)
    return plan_model(row)


# ---------------------------------------------------------------- predicting

def run_request(fields: dict, ctx, cache: dict):
    """predict() once per distinct Request (rows that differ only in engine share one); the folded graphs
    are cached by planner itself (device_graph is memoized per model, workload, tp and ep)."""
    req = Request(**fields)
    if req not in cache:
        cache[req] = predict(req, ctx)
    return cache[req]


def predict_model(plan: Plan, metric: str, ctx, cache: dict) -> tuple[float, dict]:
    fields = dict(plan.settings["request"])
    p = run_request(fields, ctx, cache)
    if fields["mode"] == "inference" and "input_len" in fields and plan.settings["offline"] and not p.fits:
        # offline runs of N prompts: waves of the largest power-of-two batch below N that fits
        asked = fields["batch"]
        b = 2 ** int(math.log2(asked))
        b = b // 2 if b == asked else b
        while b >= 1 and not run_request({**fields, "batch": b}, ctx, cache).fits:
            b //= 2
        if b >= 1:
            fields["batch"] = b
            p = run_request(fields, ctx, cache)
            plan.notes.append(f"{asked} prompts do not fit at once: waves of batch {b}")
        else:
            plan.notes.append(f"{asked} prompts do not fit at once, nor does batch 1: predicted at {asked}")
    m = p.metrics
    if fields["mode"] == "training":
        value = {"tokens_per_s_per_gpu": lambda: m["tokens_per_s"] / p.gpus, "mfu_fraction": lambda: m["mfu"],
                 "images_per_s": lambda: m["samples_per_s"], "images_per_s_total": lambda: m["samples_per_s"],
                 "sequences_per_s_total": lambda: m["samples_per_s"]}[metric]()
    elif "input_len" not in fields:
        # a forward pass: samples per s; a diffusion pipeline call (ms_per_pipeline_call): its latency
        value = m["latency_s"] * 1e3 if metric in ("ms_per_pipeline_call", "latency_p90_ms", "latency_p95_ms") \
            else m["throughput_samples_per_s"]
    else:
        batch, tokens_in, tokens_out = m["batch"], m["input_len"], m["output_len"]
        replicas = p.parallelism.dp
        value = {"tokens_per_s_total": lambda: replicas * batch * (tokens_in + tokens_out) / m["latency_s"],
                 "output_tokens_per_s": lambda: m["throughput_tokens_per_s"],
                 "tokens_per_s": lambda: m["throughput_tokens_per_s"],
                 "tokens_per_s_per_user": lambda: tokens_out / m["latency_s"],
                 "ms_per_token": lambda: m["tpot_s"] * 1e3,
                 "s_per_batch": lambda: m["latency_s"],
                 "ms_per_generated_token_amortized": lambda: m["latency_s"] / (batch * tokens_out) * 1e3}[metric]()
    plan.settings["request"] = fields
    return value, {"fits": p.fits, "tier": p.tier, "band_fraction": p.band_fraction}


def serve_model(plan: Plan, ctx, cache: dict) -> tuple[float, dict]:
    """serve() once per distinct (Request, Load): a throughput row and a latency row of the same run share it."""
    req, load = Request(**plan.settings["request"]), Load(**plan.settings["load"])
    key = ("serve", req, load)
    if key not in cache:
        cache[key] = serve(req, load, ctx=ctx)
    r = cache[key]
    m, read = r.metrics, plan.settings["read"]
    got = getattr(m, read["field"])
    if read["stat"] is not None:
        got = got.get(read["stat"])
    if got is None:
        raise NotExpressed(f"metric not produced: the simulated run has no {read['what']} "
                           f"({m.completed} of {m.requests} requests completed)")
    plan.settings["serve"] = {
        "policy": r.policy, "load": r.load, "kv_blocks_per_copy": r.kv_blocks_per_copy, "duration_s": m.duration_s,
        "completed": m.completed, "rejected": m.rejected, "preemptions": m.preemptions,
        "ttft_p50_s": m.ttft_s.p50, "tpot_mean_s": m.tpot_s.mean, "itl_p50_s": m.itl_s.p50,
        "output_tokens_per_s": m.output_tokens_per_s, "requests_per_s": m.requests_per_s,
        "little_error": m.little_error, "notes": list(r.notes)}
    return got * read["scale"], {"fits": m.rejected == 0, "tier": r.tier, "band_fraction": r.band_fraction}


def predict_ops(plan: Plan, metric: str, ctx) -> tuple[float, dict]:
    values, tier, bands = [], None, []
    for call in plan.settings["ops"]:
        args = {k: v for k, v in call.items() if k != "op"}
        r = predict_op(call["op"], plan.device, ctx=ctx, **args)
        tier = r.tier
        bands.append(r.band_fraction)
        values.append({"tflop_per_s": r.rate / 1e12, "gb_per_s": r.rate / 1e9, "busbw_gb_per_s": r.rate / 1e9,
                       "time_us": r.time_s * 1e6}[metric])
        call.update(predicted=values[-1], time_s=r.time_s, bound=r.bound)
    return max(values), {"fits": None, "tier": tier, "band_fraction": max(bands)}


def attempt(row: dict, load: dict | None, measured: float, ctx, cache: dict) -> dict:
    """The row on one path: the simulator under `load`, or predict / planner op when None."""
    try:
        plan = plan_serve(row, load) if load is not None else plan_row(row)
    except NotExpressed as exc:
        return {"expressed": False, "reason": str(exc)}
    try:
        if plan.kind == "serve":
            predicted, extra = serve_model(plan, ctx, cache)
        elif plan.kind == "request":
            predicted, extra = predict_model(plan, row["metric"], ctx, cache)
        else:
            predicted, extra = predict_ops(plan, row["metric"], ctx)
    except NotExpressed as exc:
        return {"expressed": False, "reason": str(exc), "settings": plan.settings}
    except PlannerError as exc:
        reason = f"planner refused: {' '.join(str(exc).split())}"
        return {"expressed": False, "reason": reason, "settings": plan.settings}
    except Exception as exc:  # a library bug: keep going, record the inputs and the traceback
        reason = f"planner error: {type(exc).__name__}: {exc}"
        return {"expressed": False, "reason": reason, "settings": plan.settings, "traceback": traceback.format_exc()}
    ln_ratio = math.log(predicted / measured)
    # the printed band is log-symmetric (planner/units.py band): value / (1 + f) .. value x (1 + f)
    extra["band_covers"] = abs(ln_ratio) <= math.log1p(extra["band_fraction"])
    return {"expressed": True, "predicted": predicted, "ln_ratio": ln_ratio, "abs_ln_ratio": abs(ln_ratio),
            "device": plan.device, "device_match": plan.device_match, "gpu": plan.gpu,
            "vendor": "AMD Instinct" if re.match(r"mi\d", plan.device) else "NVIDIA" if plan.gpu else "other", **extra,
            "settings": {**plan.settings, "notes": plan.notes}}


def evaluate(row: dict, ctx, cache: dict) -> dict:
    load = serving_load(row)
    record = {"id": row["id"], "dataset": row.get("_dataset", ""), "category": row["category"], "model": row["model"], "hardware": row["hardware"],
              "engine": row["framework_and_version"], "engine_family": engine_family(row["framework_and_version"]),
              "metric": row["metric"], "measured": float(row["value"]), "path": "serve" if load else "predict"}
    out = {**record, **attempt(row, load, record["measured"], ctx, cache)}
    if load is not None:  # the predict path on the same row: the summary's "before"
        before = attempt(row, None, record["measured"], ctx, cache)
        out["predict_path"] = {k: before[k] for k in ("expressed", "predicted", "ln_ratio", "abs_ln_ratio", "reason")
                               if k in before}
    return out


# ---------------------------------------------------------------- summary and printing

def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of a non-empty list."""
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(records: list[dict], key: str) -> dict:
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(r[key], []).append(r)
    out = {}
    for name in sorted(groups, key=lambda g: (-len(groups[g]), g)):
        errs = [r["abs_ln_ratio"] for r in groups[name]]
        out[name] = {"n": len(errs), "median_abs_ln_ratio": statistics.median(errs),
                     "p90_abs_ln_ratio": percentile(errs, 0.9),
                     "median_ln_ratio": statistics.median(r["ln_ratio"] for r in groups[name]),
                     "band_coverage": sum(bool(r.get("band_covers")) for r in groups[name]) / len(errs)}
    return out


def print_table(title: str, table: dict) -> None:
    print(f"\n{title:<44} {'n':>4} {'median |ln|':>12} {'p90 |ln|':>9} {'median ln':>10} {'in band':>8}")
    for name, s in table.items():
        print(f"{name[:44]:<44} {s['n']:>4} {s['median_abs_ln_ratio']:>12.3f} {s['p90_abs_ln_ratio']:>9.3f} "
              f"{s['median_ln_ratio']:>+10.3f} {s['band_coverage']:>8.0%}")


def serve_vs_predict(records: list[dict]) -> dict:
    """The rows on the serving simulator: median |ln| per category and overall on the predict path (before)
    and on the simulator (after), over the rows expressed on both; the ids moved, newly expressed by the
    simulator, and no longer expressed."""
    serve_rows = [r for r in records if r["path"] == "serve"]
    both = [r for r in serve_rows if r["expressed"] and r["predict_path"]["expressed"]]
    table = {}
    groups: dict[str, list[dict]] = {"all": both}
    for r in both:
        groups.setdefault(r["category"], []).append(r)
    for name, rows in groups.items():
        if rows:
            table[name] = {"n": len(rows),
                           "median_abs_ln_ratio_predict": statistics.median(r["predict_path"]["abs_ln_ratio"]
                                                                            for r in rows),
                           "median_abs_ln_ratio_serve": statistics.median(r["abs_ln_ratio"] for r in rows),
                           "ids": [r["id"] for r in rows]}
    return {"by_category": table,
            "newly_expressed": [r["id"] for r in serve_rows if r["expressed"] and not r["predict_path"]["expressed"]],
            "no_longer_expressed": [r["id"] for r in serve_rows
                                    if not r["expressed"] and r["predict_path"]["expressed"]],
            "serve_rows": [r["id"] for r in serve_rows]}


def print_serve_vs_predict(s: dict) -> None:
    if not s["serve_rows"]:
        return
    print(f"\nrows on the serving simulator (path serve): {len(s['serve_rows'])}; median |ln| of the rows expressed "
          "on both paths")
    print(f"{'category':<44} {'n':>4} {'before (predict)':>17} {'after (serve)':>14}")
    for name, t in sorted(s["by_category"].items(), key=lambda kv: (kv[0] == "all", kv[0])):
        ids = ", ".join(t["ids"]) if name != "all" else ""
        print(f"{name:<44} {t['n']:>4} {t['median_abs_ln_ratio_predict']:>17.3f} "
              f"{t['median_abs_ln_ratio_serve']:>14.3f}  {ids}".rstrip())
    for label, key in (("newly expressed by the simulator", "newly_expressed"),
                       ("expressed on the predict path only", "no_longer_expressed")):
        if s[key]:
            print(f"{label}: {', '.join(s[key])}")


def reason_group(reason: str) -> str:
    return reason.split(":", 1)[0]


def code_version() -> dict:
    """The commit predictions were made with and the files that differed from it (read-only git calls)."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout

    try:
        return {"commit": git("rev-parse", "HEAD").strip(), "modified": git("status", "--porcelain").splitlines()}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "modified": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, help="only the first N rows (after --category)")
    parser.add_argument("--category", action="append", help="only rows of this category (repeatable)")
    parser.add_argument("--data", type=Path, action="append",
                        help="a file of rows in the same columns (repeatable; default: the dev set, "
                             f"{', '.join(p.name for p in DEV_SET)}; benchmarks/data/vendor_stacks.csv: TensorRT and "
                             "MLPerf-class training)")
    parser.add_argument("--no-cross-library", action="store_true",
                        help="an engine without a profile of its own libraries takes the datasheet tier, never "
                             "another library's profile (planner/predict/context.py cross_library)")
    output.add_arguments(parser)
    args = parser.parse_args()

    start = time.perf_counter()
    files = [p.resolve() for p in (args.data or DEV_SET)]
    rows = []
    for data in files:
        with open(data, newline="", encoding="utf-8") as f:
            rows += [{**r, "_dataset": data.stem} for r in csv.DictReader(f)]
    total_rows = len(rows)
    if args.category:
        rows = [r for r in rows if r["category"] in args.category]
    if args.limit is not None:
        rows = rows[:args.limit]
    ctx = default_context()
    if args.no_cross_library:
        from dataclasses import replace as _replace

        ctx = _replace(ctx, cross_library=False, _efficiency={}, _targets={})
    cache: dict = {}
    records = [evaluate(row, ctx, cache) for row in rows]
    wall_s = time.perf_counter() - start

    done = [r for r in records if r["expressed"]]
    missing = [r for r in records if not r["expressed"]]
    summary = {"overall": summarize([{**r, "all": "all"} for r in done], "all") if done else {},
               "by_category": summarize(done, "category"), "by_engine_family": summarize(done, "engine_family"),
               "by_gpu": summarize(done, "gpu"), "by_path": summarize(done, "path"),
               "by_vendor": summarize(done, "vendor"), "by_dataset": summarize(done, "dataset"),
               "collectives_by_vendor": summarize([r for r in done if r["category"] == "collective"], "vendor"),
               "exact_device_only": summarize([{**r, "all": "exact"} for r in done if r["device_match"] == "exact"],
                                              "all") if done else {},
               "serve_vs_predict": serve_vs_predict(records)}
    where = ", ".join(str(d.relative_to(ROOT) if d.is_relative_to(ROOT) else d) for d in files)
    print(f"dev validation: {len(done)} of {len(rows)} rows expressed ({total_rows} in {where}); "
          f"error = |ln(predicted / measured)|, bias = median ln (> 0: planner predicts more)")
    if done:
        print_table("all expressed rows", summary["overall"])
        print_table("rows on an exact catalog SKU", summary["exact_device_only"])
        print_table("by category", summary["by_category"])
        print_table("by engine family", summary["by_engine_family"])
        print_table("by GPU (as stated; device match)", summary["by_gpu"])
        print_table("by vendor", summary["by_vendor"])
        print_table("collective rows by vendor", summary["collectives_by_vendor"])
        print_table("by data file", summary["by_dataset"])
        print_table("by path (predict: closed forms; serve: simulator)", summary["by_path"])
        nofit = [r["id"] for r in done if r["fits"] is False]
        if nofit:
            print(f"\npredicted although planner's memory model says they do not fit ({len(nofit)}): "
                  f"{', '.join(nofit)}")
    print_serve_vs_predict(summary["serve_vs_predict"])
    groups: dict[str, list[dict]] = {}
    for r in missing:
        groups.setdefault(reason_group(r["reason"]), []).append(r)
    print(f"\nnot expressed: {len(missing)} rows")
    for name in sorted(groups, key=lambda g: -len(groups[g])):
        print(f"  {name} ({len(groups[name])})")
        for r in groups[name]:
            print(f"    {r['id']}  {r['reason'][len(name) + 2:][:150]}")
    errors = [r for r in missing if "traceback" in r]
    for r in errors:
        print(f"\n{r['id']}: {r['reason']}\n  inputs: {r['settings']}\n{r['traceback']}")
    print(f"\nrun time: {wall_s:.1f} s")

    result = {"data": str(where), "cross_library": not args.no_cross_library, "rows_read": len(rows),
              "rows_in_file": total_rows,
              "expressed": len(done), "not_expressed": len(missing), "summary": summary,
              "not_expressed_by_reason": {k: [r["id"] for r in v] for k, v in groups.items()},
              "rows": records, "wall_s": wall_s, "code": code_version(),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "date": datetime.date.today().isoformat()}
    output.write(args, NAME, result)


if __name__ == "__main__":
    main()
