"""Audit physics over a grid of configurations (issue 38): no prediction faster than its hardware allows,
power between idle and the limit, memory and times monotone where physics says they must be.

The grid (6,912 rows: six LLMs, DeepSeek-V3's latent attention at tp 8, vision and training) goes through `planner predict --configs FILE --json` in one process, as a
user's would; each row that predicts is then checked (planner/predict/physics.py states the floors):
- floors: TTFT, TPOT and latency of LLM serving, latency of a forward pass, a training step's time, each
  >= its roofline floor (the bytes no fusion avoids / bandwidth, the FLOP / the highest peak);
- power: average power per device between the device's idle power and its power limit;
- monotone: memory per device non-decreasing in batch and in context; TPOT non-decreasing in batch and
  in context; TTFT non-decreasing in prompt length; per-device throughput never superlinear in tp (at
  tp 4, throughput / 4 <= throughput at tp 1);
- ops: on a sample of rows, `planner predict ... --ops --json`: every op's time >= max(FLOP / the
  highest peak of the precision, bytes / bandwidth).
Rows that do not predict (a recipe the device lacks, say) are counted with their error, not checked.

Run: .venv/bin/python benchmarks/physics_audit.py [--quick] [--out PATH | --save]
(--save writes benchmarks/results/physics_audit.json). Exit status 1 when any invariant is violated.
"""

import argparse
import datetime
import itertools
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import output  # benchmarks/output.py: --out PATH, --save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.predict import default_context  # noqa: E402
from planner.predict.physics import (  # noqa: E402
    RELATIVE_SLACK,
    forward_floors,
    llm_floors,
    top_peak,
    training_floors,
    violations,
)
from planner.workload.parallelism import Parallelism  # noqa: E402
from planner.workload.zoo import resolve  # noqa: E402

PLANNER = str(Path(sys.executable).parent / "planner")
LLMS = ["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen3-30b-a3b", "gemma-2-9b", "phi-3-mini"]
DEVICES = ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "b200", "mi300x"]
LLM_ENGINES = ["eager", "vllm", "sglang", "trtllm"]
RECIPES = ["bf16", "fp8", "w4a16"]
BATCHES = [1, 16, 128]
LENGTHS = [(128, 128), (1000, 1000), (4000, 256)]
TPS = [1, 4]
VISION = ["resnet50", "vit-b-16", "bert-base"]
VISION_ENGINES = ["eager", "compile", "tensorrt"]
TRAINING = [("gpt2", 1), ("resnet50", 1), ("llama-3.1-8b", 8)]
TRAINING_ENGINES = ["eager", "compile", "megatron", "mlperf"]
MLA = ("deepseek-v3", ["h200-sxm", "b200"], ["vllm", "sglang", "trtllm"], ["bf16", "fp8"], 8)
"""Multi-head latent attention with MoE, at tp 8 (671B parameters): a smaller grid of its own."""


def grid(quick: bool) -> list[dict]:
    """The configurations, each a --configs row with an id."""
    rows = []
    llms, devices = (LLMS[:2], DEVICES[:2]) if quick else (LLMS, DEVICES)
    for model, device, engine, recipe, batch, (inp, out), tp in itertools.product(
            llms, devices, LLM_ENGINES, RECIPES, BATCHES, LENGTHS, TPS):
        rows.append({"model": model, "device": device, "engine": engine, "quant" if recipe != "bf16" else "dtype":
                     recipe, "batch": batch, "input_len": inp, "output_len": out, "tp": tp, "gpus": tp})
    model, mla_devices, mla_engines, mla_recipes, tp = MLA
    for device, engine, recipe, batch, (inp, out) in itertools.product(
            mla_devices[:1] if quick else mla_devices, mla_engines, mla_recipes, BATCHES, LENGTHS[:2]):
        rows.append({"model": model, "device": device, "engine": engine, "quant" if recipe != "bf16" else "dtype":
                     recipe, "batch": batch, "input_len": inp, "output_len": out, "tp": tp, "gpus": tp})
    for model, device, engine, dtype, batch in itertools.product(VISION, devices, VISION_ENGINES,
                                                                 ["bf16", "fp16", "quant=int8"],
                                                                 [1, 32, 256]):
        rows.append({"model": model, "device": device, "engine": engine, "dtype": dtype, "batch": batch})
    for (model, tp), device, engine, batch in itertools.product(TRAINING, devices, TRAINING_ENGINES, [1, 8]):
        rows.append({"model": model, "device": device, "engine": engine, "mode": "training", "micro_batch": batch,
                     "tp": tp, "gpus": tp})
    for i, row in enumerate(rows):
        row["id"] = f"r{i}"
    return rows


def run_configs(rows: list[dict], args: list[str]) -> list[dict]:
    """`planner predict --configs FILE --json` over `rows`: one result dict per row, in order."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "configs.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        done = subprocess.run([PLANNER, "predict", "--configs", str(path), "--json", *args], capture_output=True,
                              text=True, check=False)
    if done.returncode not in (0, 2):
        raise SystemExit(f"planner predict --configs failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


class Floors:
    """Roofline floors of each result, memoized by what they depend on (never the engine)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.memo: dict = {}

    def of(self, row: dict, result: dict) -> dict[str, float]:
        model, device = resolve(result["model"]), self.ctx.device(result["device"])
        par = Parallelism(tp=result["tp"], ep=result["ep"])
        if result["mode"] == "training":
            return training_floors(result, result["gpus"], device, result["dtype"])
        if model.family == "decoder":
            key = (result["model"], result["device"], result["tp"], result["ep"], result["batch"],
                   result["input_len"], result["output_len"], result["dtype"])
            if key not in self.memo:
                self.memo[key] = llm_floors(model, par, device, result["batch"], result["input_len"],
                                            result["output_len"], result["dtype"])
            return self.memo[key]
        key = (result["model"], result["device"], result["tp"], result["batch"], result["dtype"])
        if key not in self.memo:
            self.memo[key] = forward_floors(model, par, device, result["batch"], row.get("seq_len"),
                                            row.get("image_size"), result["dtype"])
        return self.memo[key]


def monotone(pairs: list[tuple[dict, dict]], key: str, axis: str, grouping: tuple[str, ...], found: list) -> int:
    """Check `key` non-decreasing along `axis` within groups of equal `grouping`; returns checks made."""
    groups = defaultdict(list)
    for row, result in pairs:
        if key in result and result.get(key) is not None:
            groups[tuple(json.dumps(row.get(g)) for g in grouping)].append((row[axis], result[key], row["id"]))
    checks = 0
    for items in groups.values():
        items.sort()
        for (a, x, ida), (b, y, idb) in zip(items, items[1:]):
            checks += 1
            if y < x * (1 - 1e-6):
                found.append({"id": idb, "invariant": f"{key} non-decreasing in {axis}",
                              "detail": f"{axis} {a} -> {b}: {key} {x:.6g} -> {y:.6g} ({ida} -> {idb})"})
    return checks


def audit(quick: bool, ops_sample: int) -> dict:
    ctx = default_context()
    rows = grid(quick)
    start = time.perf_counter()
    results = run_configs(rows, [])
    predict_s = time.perf_counter() - start
    by_id = {r["id"]: r for r in rows}
    pairs, errors, found = [], Counter(), []
    floors = Floors(ctx)
    checks = Counter()
    for result in results:
        row = by_id[result["id"]]
        if "error" in result:
            errors[result["error"].split(":")[0][:80]] += 1
            continue
        pairs.append((row, result))
        device = ctx.device(result["device"])
        limit = ctx.power.limit_w(device)
        f = floors.of(row, result)
        checks["floors"] += len([k for k in f if k in result])
        checks["power"] += 1
        for line in violations(result, f, ctx.power.idle_w(device), limit):
            found.append({"id": row["id"], "invariant": "floor or power", "detail": line})
    llm = [(r, x) for r, x in pairs if "ttft_s" in x]
    base = ("model", "device", "engine", "quant", "dtype", "tp")
    for key in ("memory_bytes_per_gpu", "tpot_s"):
        checks["monotone"] += monotone([(dict(r, length=r["input_len"] + r["output_len"]), x) for r, x in llm], key,
                                       "batch", base + ("input_len", "output_len"), found)
        checks["monotone"] += monotone([(dict(r, length=r["input_len"] + r["output_len"]), x) for r, x in llm], key,
                                       "length", base + ("batch",), found)
    checks["monotone"] += monotone(llm, "ttft_s", "input_len", base + ("batch",), found)
    vision = [(r, x) for r, x in pairs if r.get("mode") != "training" and "ttft_s" not in x]
    checks["monotone"] += monotone(vision, "memory_bytes_per_gpu", "batch", ("model", "device", "engine", "dtype"),
                                   found)
    # per-device throughput at tp 4 never above tp 1's
    per_device = {}
    for r, x in llm:
        per_device[tuple(json.dumps(r.get(g)) for g in base[:-1] + ("batch", "input_len", "output_len")), r["tp"]] = \
            (x["throughput_tokens_per_s"] / x["gpus"], r["id"])
    for (group, tp), (value, rid) in per_device.items():
        if tp == 1 or (group, 1) not in per_device:
            continue
        checks["tp"] += 1
        one, one_id = per_device[group, 1]
        if value > one * (1 + 1e-6):
            found.append({"id": rid, "invariant": "per-device throughput not superlinear in tp",
                          "detail": f"tp {tp}: {value:.6g} tokens/s per device > tp 1: {one:.6g} ({one_id})"})
    # ops on a sample: every op at least max(FLOP / highest peak, bytes / bandwidth)
    sample = random.Random(0).sample(pairs, min(ops_sample, len(pairs)))
    for row, result in sample:
        cli = {k: v for k, v in row.items() if k != "id"}
        argv = [PLANNER, "predict", cli.pop("model")]
        for k, v in cli.items():
            argv += [f"--{k.replace('_', '-')}", str(v)]
        done = subprocess.run(argv + ["--ops", "--json"], capture_output=True, text=True, check=False)
        if done.returncode:
            found.append({"id": row["id"], "invariant": "ops", "detail": done.stderr.strip()[-300:]})
            continue
        data = json.loads(done.stdout)
        device = ctx.device(result["device"])
        peak = top_peak(device, result["dtype"])
        for phase, ops in data["ops"].items():
            for op in ops:
                checks["ops"] += 1
                floor = max(op["flop"] / peak, op["bytes"] / device.mem_bytes_per_s)
                if op["time_s"] < floor * (1 - RELATIVE_SLACK):
                    found.append({"id": row["id"], "invariant": "op roofline floor",
                                  "detail": f"{phase} {op['op']}: {op['time_s']:.6g} s < {floor:.6g} s"})
    return {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "configurations": len(rows), "predicted": len(pairs), "not_predicted": sum(errors.values()),
            "not_predicted_by_reason": dict(errors.most_common()), "checks": dict(checks),
            "violations": len(found), "violations_by_invariant": dict(Counter(v["invariant"] for v in found)),
            "violation_rows": found[:200], "predict_configs_s": round(predict_s, 1),
            "wall_s": round(time.perf_counter() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two LLMs on two devices (a CI-sized grid)")
    parser.add_argument("--ops-sample", type=int, default=24, help="rows whose --ops are checked (default 24)")
    output.add_arguments(parser)
    args = parser.parse_args()
    result = audit(args.quick, args.ops_sample)
    print(f"{result['configurations']:,} configurations, {result['predicted']:,} predicted, "
          f"{result['not_predicted']:,} not predicted")
    print("checks: " + ", ".join(f"{k} {v:,}" for k, v in result["checks"].items()))
    print(f"violations: {result['violations']} {result['violations_by_invariant']}")
    for v in result["violation_rows"][:20]:
        print(f"  {v['id']} {v['invariant']}: {v['detail']}")
    output.write(args, "physics_audit", result)
    sys.exit(1 if result["violations"] else 0)


if __name__ == "__main__":
    main()
