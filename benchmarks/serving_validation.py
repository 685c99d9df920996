"""Serving validation: every published serving run of benchmarks/data/serving/*.csv that planner can express,
simulated as its benchmark client ran it, against the measured TTFT, TPOT and throughput.

    .venv/bin/python benchmarks/serving_validation.py [--source NAME] [--stat median|mean] [--limit N]
                                                      [--out PATH | --save]

Data. benchmarks/data/serving/*.csv (one file per kind of source, the same 33 columns; each file's .md names
its sources, dates, terms and how each source defines its metrics). The serving runs that ship inside
NVIDIA aiconfigurator's package (silicon_sample.csv) are held back for judging and are not in it.

Expressed. A row runs when its model maps to a zoo model (MODELS), its device is in the catalog, its engine
has a scheduler (vllm, sglang, trtllm), it states a load (a client concurrency, or a request rate) and fixed
input and output lengths (or ShareGPT with the run's mean lengths stated: simulated at those means, see
SHAREGPT), and it ran on one node without speculative decoding or disaggregated prefill (the notes say so):
every other row is listed under "not expressed" with the reason.

Launch settings. Where a source has a <stem>_server.csv (inferencemax_server.csv: every single-node InferenceX row,
read from the launch script the run used), the step budget, sequence limit, SGLang's recv interval and TensorRT-LLM's
batch wait are the run's (SERVER), and so is the EP degree where the script chose it; --defaults runs every engine
at its defaults instead.

Simulated. `planner.serve.api.serve` with the row's model, device, tp, ep, dtype recipe and engine; the load
as the row's client ran it (planner/serve/clients.py: how many requests, warm-up left out, all clients
starting at once); the metric read as the source reports it (mean or median; TPOT per request without the
first token; ITL where only ITL is given, read as the simulator's ITL). Where a row gives both a mean and a
median, the median is read (--stat mean for the mean; see STAT).

Reported. |ln(predicted / measured)| per row and metric; median and p90 by metric, engine, device,
concurrency bucket and prompt length bucket; rows whose prediction does not fit in memory are counted apart.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import output

from planner.errors import PlannerError
from planner.predict import Request, default_context
from planner.serve.api import Load, Scheduling, serve

DATA = Path(__file__).resolve().parent / "data" / "serving"

MODELS = (  # (pattern on the Hugging Face id, zoo id)
    (r"(?i)llama-3\.1-8b", "llama-3.1-8b"),
    (r"(?i)meta-llama-3-8b", "llama-3.1-8b"),  # Llama 3 8B: the 3.1 architecture at 8k context
    (r"(?i)llama-3\.[13]-70b", "llama-3.1-70b"),  # 3.3 70B is 3.1 70B's architecture
    (r"(?i)meta-llama-3-70b", "llama-3.1-70b"),
    (r"(?i)llama-3\.1-405b", "llama-3.1-405b"),
    (r"(?i)mistral-7b", "mistral-7b"),
    (r"(?i)mixtral-8x7b", "mixtral-8x7b"),
    (r"(?i)qwen2\.5-7b", "qwen2.5-7b"),
    (r"(?i)qwen3-8b", "qwen3-8b"),
    (r"(?i)qwen3-14b", "qwen3-14b"),
    (r"(?i)qwen3-32b", "qwen3-32b"),
    (r"(?i)qwen3-30b-a3b", "qwen3-30b-a3b"),
    (r"(?i)gpt-oss-20b", "gpt-oss-20b"),
    (r"(?i)deepseek-(r1|v3)", "deepseek-v3"),  # R1 is V3's architecture
)
"""Zoo models the published ids map to."""

DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp4": "nvfp4", "nvfp4": "nvfp4", "int4": "w4a16"}
"""weights_dtype column -> planner dtype recipe (hardware_specs/quant/recipes.json)."""

SKIP = ((r"(?i)\bMTP\b|speculative|eagle", "speculative decoding"),
        (r"(?i)dp_attention=true", "attention data-parallel across the TP ranks (DP attention)"),
        (r"(?i)disagg|prefill GPUs|decode GPUs|\bxP\b|\d+P\d*D", "disaggregated prefill"),
        (r"(?i)multi-?node", "more than one node"))
"""(pattern on the notes or client, reason a row is not expressed)."""

SERVE_ENGINES = ("vllm", "sglang", "trtllm")

CONCURRENCY_BUCKETS = ((1, "1"), (8, "2-8"), (32, "9-32"), (128, "33-128"), (math.inf, "129+"))
PROMPT_BUCKETS = ((2048, "<=2k"), (16384, "2k-16k"), (math.inf, ">16k"))


SHAREGPT = True
"""A row on ShareGPT conversations whose notes state the run's mean prompt and output tokens ("mean input X
tok, mean output Y tok": its benchmark's totals over its requests) is simulated at those means, fixed: the
lengths of each conversation are not published with the result. Rows without them are not expressed."""

PLAIN = False
"""--plain: no client and no engine version (the simulator as it was before both)."""

STAT = "median"
"""--stat: which published statistic a row is read by where it gives both. The median by default: the
typical request, which a model of steady service predicts; a closed-loop run's mean is moved by rare
stalls no performance model has (InferenceX rows with a p99 TTFT of 75 s and a mean ten times the
median). --stat mean reads the mean first."""


SERVER = {  # engine_args key of a <source>_server.csv -> (Scheduling field, parse)
    "max_num_batched_tokens": ("max_num_batched_tokens", int),
    "max_num_seqs": ("max_num_seqs", int),
    "recv_interval": ("recv_interval", int),
    "batch_wait_timeout_iters": ("batch_wait_iters", int),
    "batch_wait_max_tokens_ratio": ("batch_wait_tokens_ratio", float),
}
"""Server settings a run's launch script gave that the simulator takes (benchmarks/data/serving/<source>_server.csv,
one row per result id, read from the script the run used: see its .md). SGLang's prefill batch is capped by
both --chunked-prefill-size and --max-prefill-tokens: the smaller is its step budget. Other settings there
(memory fractions, CUDA-graph sizes, stream interval) are recorded, not simulated."""

SERVER_ARGS = True
"""--defaults: the engines' defaults instead of each run's launch settings."""


class NotExpressed(Exception):
    """A row planner cannot express; the message is the reason."""


@dataclass(frozen=True)
class Case:
    """One row as the simulator runs it."""

    request: Request
    load: Load
    scheduling: Scheduling
    client: str
    readings: tuple[tuple[str, str, float], ...]
    """(metric, statistic, measured): ttft/tpot/itl in s, output_tok_s in tokens/s."""


def _float(row: dict, key: str) -> float | None:
    text = (row.get(key) or "").strip()
    return float(text) if text else None


def _int(row: dict, key: str) -> int | None:
    value = _float(row, key)
    return None if value is None else int(round(value))


def _match(table, text: str) -> str | None:
    for pattern, value in table:
        if re.search(pattern, text):
            return value
    return None


def client_of(row: dict) -> str:
    """The client id of planner/serve/clients.py that the row's client text names."""
    text = f"{row['client']} {row['source_name']}".lower()
    for pattern, client in ((r"inferencemax|inferencex|sa-bench", "inferencemax"), (r"aiperf", "aiperf"),
                            (r"genai-perf", "genai-perf"), (r"sglang", "sglang-bench-serving"),
                            (r"trtllm-bench", "trtllm-bench"), (r"vllm|benchmark_serving", "vllm-bench-serve")):
        if re.search(pattern, text):
            return client
    return ""


def case_of(row: dict, ctx) -> Case:
    """The row as a simulated run; NotExpressed with the reason where it cannot be one."""
    reason = _match(SKIP, f"{row['notes']} {row['client']}")
    if reason:
        raise NotExpressed(reason)
    model = _match(MODELS, row["model"])
    if model is None:
        raise NotExpressed(f"model not in the zoo: {row['model']}")
    try:
        ctx.device(row["device"])
    except PlannerError:
        raise NotExpressed(f"device not in the catalog: {row['device']}") from None
    engine = row["engine"].strip()
    if engine not in SERVE_ENGINES:
        raise NotExpressed(f"engine without a scheduler: {engine or 'not stated'}")
    dtype = DTYPES.get(row["weights_dtype"].strip().lower())
    if dtype is None:
        raise NotExpressed(f"weights dtype not expressed: {row['weights_dtype'] or 'not stated'}")
    if row["kv_dtype"].strip().lower() == "fp8" and dtype in ("bf16", "fp16"):
        dtype = f"weights={dtype},activations={dtype},kv=fp8"
    if dtype == "nvfp4" and model == "deepseek-v3":
        dtype = "nvfp4-mlp"  # NVIDIA's DeepSeek-R1 FP4 checkpoints: attention projections BF16 (recipes.json)
    input_len, output_len = _int(row, "input_len"), _int(row, "output_len")
    means = re.search(r"mean input (\d+(?:\.\d+)?) tok(?:ens)?, mean output (\d+(?:\.\d+)?) tok", row["notes"])
    sharegpt = bool(re.match(r"(?i)sharegpt", row["length_dist"].strip()) and means)
    if sharegpt:  # ShareGPT conversations: simulated at the run's own mean prompt and output (SHAREGPT)
        input_len, output_len = round(float(means.group(1))), round(float(means.group(2)))
    if not input_len or not output_len or not (sharegpt or re.fullmatch(r"(?i)|fixed|random.*",
                                                                         row["length_dist"].strip())):
        raise NotExpressed(f"lengths not fixed: {row['length_dist'] or 'not stated'}")
    tp, gpus = _int(row, "tp") or 1, _int(row, "gpus") or _int(row, "tp") or 1
    if gpus % tp:
        raise NotExpressed(f"gpus {gpus} not a multiple of tp {tp}")
    concurrency, rate = _int(row, "concurrency"), _float(row, "request_rate_rps")
    client = client_of(row) or None
    if re.search(r"(?i)\bburst\b", row["notes"]) and not concurrency and not rate and _int(row, "num_prompts"):
        concurrency = _int(row, "num_prompts")  # every prompt sent at once: as many clients as prompts
    ratio = re.search(r"ratio\s*([0-9.]+)", row["length_dist"])
    ratio = float(ratio.group(1)) if ratio and client else None
    if sharegpt and client:  # the client's random-length rule is for its random dataset: fixed at the means
        from planner.serve.clients import get_client

        ratio = 1.0 if get_client(client).range == "below" else 0.0
    requests = _int(row, "num_prompts")
    if not concurrency and not rate:
        raise NotExpressed("no load stated (neither concurrency nor request rate)")
    if PLAIN:  # planner's own load and the engine file's defaults, as before clients and versions existed
        load = Load(concurrency=concurrency, rate_rps=None if concurrency else rate,
                    requests=requests or (max(10 * concurrency, 100) if concurrency else 1000))
        client = None
    else:
        load = Load(concurrency=concurrency, rate_rps=None if concurrency else rate, client=client, range_ratio=ratio,
                    requests=requests or (None if client else (max(10 * concurrency, 100) if concurrency else 1000)))
        engine = with_version(engine, row["engine_version"])
    readings = []
    for metric, columns, scale in (("ttft", ("ttft_ms_mean", "ttft_ms_median"), 1e-3),
                                   ("tpot", ("tpot_ms_mean", "tpot_ms_median"), 1e-3),
                                   ("output_tok_s", ("output_tok_s",), 1.0)):
        for column in (columns[::-1] if STAT == "median" else columns):
            value = _float(row, column)
            if value:
                readings.append((metric, "p50" if column.endswith("median") else "mean", value * scale))
                break
    if not any(m == "tpot" for m, _, _ in readings):
        for column in (("itl_ms_median", "itl_ms_mean") if STAT == "median" else ("itl_ms_mean", "itl_ms_median")):
            if value := _float(row, column):
                readings.append(("itl", "p50" if column.endswith("median") else "mean", value * 1e-3))
                break
    if not readings:
        raise NotExpressed("no TTFT, TPOT, ITL or output throughput measured")
    ep = _int(row, "ep") or 1
    scheduling = Scheduling()
    if SERVER_ARGS and not PLAIN:
        launched = dict(part.split("=", 1) for part in row.get("engine_args", "").split(";") if "=" in part)
        if launched.get("attention_dp") == "true":
            raise NotExpressed("attention data-parallel across the TP ranks (DP attention)")
        ep = int(launched.get("ep", ep))  # the EP the server ran with where the script chose it itself
        scheduling = scheduling_of(launched)
    request = Request(model=model, device=row["device"], gpus=gpus, tp=tp, ep=ep, input_len=input_len,
                      output_len=output_len, dtype=dtype, engine=engine)
    return Case(request, load, scheduling, client or "", tuple(readings))


def scheduling_of(pairs: dict[str, str]) -> Scheduling:
    """The Scheduling overrides of an engine_args cell's key=value pairs (SERVER keys; others ignored)."""
    given = {SERVER[k][0]: SERVER[k][1](v) for k, v in pairs.items() if k in SERVER}
    if "max_prefill_tokens" in pairs and "max_num_batched_tokens" in given:
        given["max_num_batched_tokens"] = min(given["max_num_batched_tokens"], int(pairs["max_prefill_tokens"]))
    return Scheduling(**given)


def with_version(engine: str, published: str) -> str:
    """`engine@version`: the newest release with recorded scheduler defaults at or below the published version
    (an engine's own version number, e.g. "v0.10.2", "0.5.3.post3"; a container tag's other numbers are not
    read), else `engine` (its latest recorded defaults)."""
    from planner.serve import versions
    from planner.workload.engines import _release_order

    m = re.fullmatch(r"v?(\d+\.\d+(?:\.\d+)?(?:\.?post\d+)?)(?:rc\d+)?", published.strip())
    if not m:
        return engine
    at_most = [v for v in versions.known(engine) if _release_order(v) <= _release_order(m.group(1))]
    return f"{engine}@{at_most[-1]}" if at_most else engine


def read_rows(source: str | None) -> list[dict]:
    rows = []
    for path in sorted(DATA.glob("*.csv")):
        if source and path.stem != source:
            continue
        if path.stem.endswith("_server"):
            continue
        server = {}
        side = path.with_name(f"{path.stem}_server.csv")
        if side.exists():
            with side.open(newline="", encoding="utf-8") as f:
                server = {r["id"]: r["engine_args"] for r in csv.DictReader(f)}
        with path.open(newline="", encoding="utf-8") as f:
            rows += [dict(r, file=path.name, engine_args=server.get(r["id"], "")) for r in csv.DictReader(f)]
    return rows


def simulated(run, metric: str, stat: str) -> float | None:
    m = run.metrics
    if metric == "output_tok_s":
        return m.output_tokens_per_s
    got = {"ttft": m.ttft_s, "tpot": m.tpot_s, "itl": m.itl_s}[metric]
    return got.get(stat)


def bucket(value: float, table) -> str:
    return next(name for top, name in table if value <= top)


def summarize(results: list[dict], key) -> dict:
    groups: dict = {}
    for r in results:
        groups.setdefault((r["metric"], key(r)), []).append(r["abs_ln"])
    out = {}
    for (metric, group), values in sorted(groups.items()):
        values.sort()
        out.setdefault(metric, {})[group] = {"n": len(values), "median": _pct(values, 0.5), "p90": _pct(values, 0.9)}
    return out


def _pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", help="only this file of benchmarks/data/serving (its stem: vendor, ...)")
    parser.add_argument("--limit", type=int, help="only the first N expressed rows")
    parser.add_argument("--plain", action="store_true", help="simulate without the rows' clients and engine versions")
    parser.add_argument("--defaults", action="store_true",
                        help="run every engine at its defaults, not at the run's launch settings (*_server.csv)")
    parser.add_argument("--stat", choices=("median", "mean"), default="median",
                        help="the published statistic read first where a row gives both (default median)")
    output.add_arguments(parser)
    args = parser.parse_args(argv)
    global PLAIN, STAT, SERVER_ARGS
    PLAIN, STAT, SERVER_ARGS = args.plain, args.stat, not args.defaults
    start = time.perf_counter()
    ctx = default_context()
    rows = read_rows(args.source)
    results, not_expressed, runs = [], {}, {}
    expressed = 0
    for row in rows:
        try:
            case = case_of(row, ctx)
        except NotExpressed as e:
            not_expressed.setdefault(str(e), []).append(row["id"])
            continue
        expressed += 1
        if args.limit and expressed > args.limit:
            break
        key = (case.request, case.load, case.scheduling)
        if key not in runs:
            try:
                runs[key] = serve(case.request, case.load, case.scheduling, ctx=ctx)
            except PlannerError as e:
                runs[key] = e
        run = runs[key]
        if isinstance(run, PlannerError):
            not_expressed.setdefault(f"planner refused: {str(run).splitlines()[0][:120]}", []).append(row["id"])
            continue
        conc = case.load.concurrency
        for metric, stat, measured in case.readings:
            got = simulated(run, metric, stat)
            if got is None or got <= 0:
                continue
            results.append({
                "id": row["id"], "file": row["file"], "engine": case.request.engine.partition("@")[0],
                "engine_version": case.request.engine.partition("@")[2], "device": case.request.device,
                "model": case.request.model, "tp": case.request.tp, "dtype": case.request.dtype,
                "input_len": case.request.input_len, "output_len": case.request.output_len,
                "concurrency": conc, "rate_rps": case.load.rate_rps, "client": case.client, "metric": metric,
                "stat": stat, "measured": measured, "predicted": got, "ln_ratio": math.log(got / measured),
                "abs_ln": abs(math.log(got / measured)),
                "conc_bucket": bucket(conc, CONCURRENCY_BUCKETS) if conc else "rate",
                "prompt_bucket": bucket(case.request.input_len, PROMPT_BUCKETS)})
    summary = {
        "by_metric": summarize(results, lambda r: "all"),
        "by_engine": summarize(results, lambda r: r["engine"]),
        "by_device": summarize(results, lambda r: r["device"]),
        "by_concurrency": summarize(results, lambda r: r["conc_bucket"]),
        "by_prompt": summarize(results, lambda r: r["prompt_bucket"]),
        "by_file": summarize(results, lambda r: r["file"]),
    }
    print(f"{len(rows)} rows read, {len({r['id'] for r in results})} expressed and simulated "
          f"({len(runs)} distinct runs)\n")
    print(f"{'metric':<14}{'group':<22}{'n':>5}{'median |ln|':>13}{'p90 |ln|':>10}")
    for title, table in summary.items():
        for metric, groups in table.items():
            for group, s in groups.items():
                label = group if title != "by_metric" else "all"
                print(f"{metric:<14}{title[3:] + ':' + label:<22}{s['n']:>5}{s['median']:>13.3f}{s['p90']:>10.3f}")
        print()
    print("not expressed:")
    for reason, ids in sorted(not_expressed.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(ids):>4}  {reason}")
    wall = time.perf_counter() - start
    print(f"\nrun time: {wall:.1f} s")
    output.write(args, "serving_validation", {
        "rows_read": len(rows), "stat": STAT, "summary": summary, "rows": results,
        "not_expressed": {k: v for k, v in not_expressed.items()}, "wall_s": wall})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
