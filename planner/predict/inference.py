"""Inference: LLM serving (TTFT, TPOT, latency, tokens/s) and non-generative models (latency, samples/s).

LLM, for a batch of B sequences of I input and O output tokens on one model copy (tp·pp devices):
    TTFT       = prefill time, summed over pipeline stages, + TP/EP communication + pipeline hops
    TPOT       = mean decode step as the context grows from I to I+O−1: the decode step is affine in
                 the context (attention reads the cache), so the mean of its two ends is exact for the
                 memory and FLOP terms
    latency    = TTFT + (O − 1)·TPOT
    throughput = dp · B · O / latency output tokens per second (an offline, max-throughput scenario:
                 each replica runs batches back to back)
Stages run one after another for one batch (no pipelining across batches: conservative for pp > 1).
Energy of a batch: each device's op energy plus idle power for the rest of the batch's time.
`batch="auto"` tries powers of two and keeps the highest throughput that fits in memory.
"""

from __future__ import annotations

from dataclasses import replace

from planner.errors import ConfigError
from planner.memo import IdentityMemo
from planner.predict.context import Target
from planner.predict.memory import kv_capacity_tokens, serving_memory
from planner.predict.diagnosis import StepParts, notes, pass_parts
from planner.predict.parallel import layer_collectives, layer_comm_s, pipeline_hop_s
from planner.predict.prediction import CostOptions, Prediction, make_prediction, price
from planner.predict.timing import stage_times
from planner.workload.device_graph import DeviceGraph, device_graph
from planner.workload.graphs import LIMITS, Workload, resolve_workload
from planner.workload.parallelism import Parallelism, validate
from planner.workload.zoo import Model

AUTO_BATCHES = tuple(2**i for i in range(13))  # 1 .. 4096


def pass_time(target: Target, dg: DeviceGraph, tokens: int, stages=None) -> tuple[float, list[float], list[float]]:
    """(wall time, per-stage busy time, per-stage op energy) of one pass of `dg` through every stage
    (`stages`: its stage_times when the caller has them already). Busy is the device's kernel time: a
    stage waiting on host dispatch (eager, host-bound) is idle for that wait."""
    if stages is None:  # memoized: a sweep passes the same graph through the same target many times
        wall, busy, energy = _PASSES.get(
            (dg.layer, dg.first, dg.last, target),
            # by tp, pp and ep: data parallelism and ZeRO replicate a pass, they do not change it
            (dg.parallelism.tp, dg.parallelism.pp, dg.parallelism.ep, dg.num_layers, dg.dtype, dg.workload.engine,
             dg.workload.mode, tokens),
            lambda: _pass_time(target, dg, tokens, None))
        return wall, list(busy), list(energy)
    return _pass_time(target, dg, tokens, stages)


_PASSES = IdentityMemo(8192)


def _pass_time(target: Target, dg: DeviceGraph, tokens: int, stages) -> tuple[float, list[float], list[float]]:
    device, defaults, node = target.device, target.defaults, target.node_size
    stages = stages if stages is not None else stage_times(dg, device, target.efficiency, target.power)
    busy, energy = [], []
    wall = 0.0
    for s, st in enumerate(stages):
        comm = layer_comm_s(dg, s, tokens, device, defaults, node)
        busy.append(st.time_s - st.bound_s.get("launch", 0.0))
        energy.append(st.energy_j)
        wall += st.time_s + comm
    wall += (dg.parallelism.pp - 1) * pipeline_hop_s(dg, tokens, device, defaults, node)
    return wall, busy, energy


def step_parts(target: Target, dg: DeviceGraph, tokens: int) -> StepParts:
    """Where the wall time of pass_time's pass goes (planner/predict/diagnosis.py): from the same stage
    times, collectives and pipeline sends that pass_time adds up."""
    device, defaults, node = target.device, target.defaults, target.node_size
    stages = stage_times(dg, device, target.efficiency, target.power)
    comm = [layer_comm_s(dg, s, tokens, device, defaults, node) for s in range(len(stages))]
    return pass_parts(stages, comm, [layer_collectives(dg, s) for s in range(len(stages))],
                      pipeline_hop_s(dg, tokens, device, defaults, node))


def _diagnosis(parts: StepParts, step: str, engine: str, pp: int) -> tuple[dict[str, float], list[str]]:
    """The shares of a diagnosed step (metrics) and its notes."""
    schedule = f"a batch passes the {pp} stages one after another" if pp > 1 else ""
    return parts.metrics(), notes(parts, step, engine, schedule)


def batch_energy(target: Target, par: Parallelism, wall_s: float, busy: list[float], energy: list[float]) -> float:
    # per model copy: tp devices per stage, each busy for its ops and idle for the rest of the wall time
    idle = target.power.idle_w(target.device)
    per_copy = par.tp * sum(e + idle * max(0.0, wall_s - b) for b, e in zip(busy, energy))
    return per_copy * par.dp


def _llm(target: Target, model: Model, par: Parallelism, batch: int, input_len: int, output_len: int,
         dtype: str, cost: CostOptions, engine: str = "eager") -> Prediction:
    # what one model copy does is the same for every dp, price and utilization: worked out once per layout
    ttft, busy, energy, tpot, decode_busy, decode_energy, memory, capacity, parts = _COPIES.get(
        (target, model), (par.tp, par.pp, par.ep, par.zero, par.microbatches, par.overlap, batch, input_len,
                          output_len, dtype, engine),
        lambda: _llm_copy(target, model, par, batch, input_len, output_len, dtype, engine))
    steps = output_len - 1
    latency = ttft + steps * tpot
    # what bounds a decode step (a prefill when there is none): shares of its time, and notes
    shares, diagnosis = _diagnosis(parts, "decode step" if output_len > 1 else "prefill", engine, par.pp)
    throughput = par.dp * batch * output_len / latency
    total_busy = [b + steps * d for b, d in zip(busy, decode_busy)]
    total_energy = [e + steps * d for e, d in zip(energy, decode_energy)]
    energy_j = batch_energy(target, par, latency, total_busy, total_energy)
    avg_power = energy_j / (par.devices * latency)
    basis = price(target, par.devices, cost, avg_power, par.tp)
    metrics = {"batch": batch, "input_len": input_len, "output_len": output_len, "ttft_s": ttft, "tpot_s": tpot,
               "latency_s": latency, "throughput_tokens_per_s": throughput,
               "j_per_output_token": energy_j / (par.dp * batch * output_len), "average_power_w_per_gpu": avg_power,
               "kv_cache_bytes_per_token_per_gpu": memory.kv_cache_bytes / max(1, batch * (input_len + output_len)),
               **shares}
    if capacity is not None:
        metrics["kv_cache_capacity_tokens"] = capacity
        metrics["max_batch_in_memory"] = capacity // (input_len + output_len)
    if basis is not None:
        metrics["usd_per_million_output_tokens"] = basis.usd_per_h / (throughput * 3600) * 1e6
    return make_prediction(target, model, par, "inference", dtype, memory, energy_j, basis, metrics, engine,
                           cost.pricing, par.tp, diagnosis)


_COPIES = IdentityMemo(8192)


def _llm_copy(target: Target, model: Model, par: Parallelism, batch: int, input_len: int, output_len: int,
              dtype: str, engine: str) -> tuple:
    """One model copy serving `batch` requests: (ttft, prefill busy and energy per stage, tpot, decode busy
    and energy per stage (means of the first and last step), memory per device, KV tokens that fit, the
    StepParts of the diagnosed step: the mean decode step, or the prefill when there is none).
    Nothing here reads dp, the price or the utilization (par.dp only replicates the copy)."""
    prefill = _prefill(model, par, batch, input_len, dtype, engine)
    ttft, busy, energy = pass_time(target, prefill, batch * input_len)
    tpot = 0.0
    decode_busy, decode_energy = [0.0] * par.pp, [0.0] * par.pp
    parts = None
    if output_len > 1:
        ends = (input_len, input_len + output_len - 1)
        graphs = [device_graph(model, Workload("decode", batch, context_len=c, dtype=dtype, engine=engine), par)
                  for c in ends]
        passes = [pass_time(target, dg, batch) for dg in graphs]
        parts = (step_parts(target, graphs[0], batch) + step_parts(target, graphs[1], batch)).scaled(0.5)
        tpot = sum(p[0] for p in passes) / 2
        decode_busy = [sum(p[1][s] for p in passes) / 2 for s in range(par.pp)]
        decode_energy = [sum(p[2][s] for p in passes) / 2 for s in range(par.pp)]
    memory = _memory(target, prefill, batch, input_len, output_len)  # after the timing: its errors come first
    capacity = kv_capacity_tokens(prefill, target.device, target.defaults)  # KV tokens that fit per model copy
    if parts is None:
        parts = step_parts(target, prefill, batch * input_len)
    return ttft, tuple(busy), tuple(energy), tpot, tuple(decode_busy), tuple(decode_energy), memory, capacity, parts


def _prefill(model: Model, par: Parallelism, batch: int, input_len: int, dtype: str, engine: str) -> DeviceGraph:
    return device_graph(model, Workload("prefill", batch, input_len, dtype=dtype, engine=engine), par)


def _memory(target: Target, prefill: DeviceGraph, batch: int, input_len: int, output_len: int):
    """Memory per device to serve `batch` sequences of input + output tokens (memory.serving_memory)."""
    return serving_memory(prefill, batch, input_len + output_len, target.device, target.defaults)


def llm_fits(target: Target, model: Model, par: Parallelism, batch: int, input_len: int | None, output_len: int,
             dtype: str, engine: str) -> bool:
    """Whether serving `batch` requests fits in memory: the `fits` of what _llm predicts (the same memory of
    the same prefill graph), without timing a graph. Raises as predict_inference would on the same values."""
    validate(par, model.family, model.config)
    input_len = prompt_len(model, input_len, output_len, dtype)
    _check_batch(batch)
    return _memory(target, _prefill(model, par, batch, input_len, dtype, engine), batch, input_len, output_len).fits


def _check_batch(batch) -> None:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"--batch must be a positive integer or 'auto', got {batch!r}")


def _forward(target: Target, model: Model, par: Parallelism, batch: int, seq_len: int | None,
             image_size: int | None, dtype: str, cost: CostOptions, engine: str = "eager") -> Prediction:
    dg = device_graph(model, Workload("forward", batch, seq_len, image_size=image_size, dtype=dtype, engine=engine),
                      par)
    latency, busy, energy = pass_time(target, dg, batch * (seq_len or 1))
    shares, diagnosis = _diagnosis(step_parts(target, dg, batch * (seq_len or 1)), "forward pass", engine,
                                   par.pp)
    throughput = par.dp * batch / latency
    energy_j = batch_energy(target, par, latency, busy, energy)
    memory = serving_memory(dg, batch, 0, target.device, target.defaults)
    avg_power = energy_j / (par.devices * latency)
    basis = price(target, par.devices, cost, avg_power, par.tp)
    metrics = {"batch": batch, "latency_s": latency, "throughput_samples_per_s": throughput,
               "j_per_sample": energy_j / (par.dp * batch), "average_power_w_per_gpu": avg_power, **shares}
    if basis is not None:
        metrics["usd_per_thousand_samples"] = basis.usd_per_h / (throughput * 3600) * 1e3
    return make_prediction(target, model, par, "inference", dtype, memory, energy_j, basis, metrics, engine,
                           cost.pricing, par.tp, diagnosis)


def prompt_len(model: Model, input_len: int | None, output_len: int, dtype: str) -> int:
    """Prompt tokens of an LLM request: `input_len`, or 1024 (less the output where a learned position
    table would overflow); raise ConfigError when prompt + output exceed a learned position table."""
    if isinstance(output_len, bool) or not isinstance(output_len, int) or output_len < 1:
        raise ConfigError(f"--output-len must be a positive integer, got {output_len!r}")
    cfg = model.config
    learned = cfg.position == "learned"
    default_prompt = min(1024, cfg.max_position_embeddings - output_len) if learned else 1024
    resolved = resolve_workload(model, Workload("prefill", 1, input_len or max(1, default_prompt), dtype=dtype))
    if learned and resolved.seq_len + output_len > cfg.max_position_embeddings:
        raise ConfigError(f"input ({resolved.seq_len}) + output ({output_len}) tokens exceed the "
                          f"{cfg.max_position_embeddings} positions of {model.name}")
    if resolved.seq_len + output_len > LIMITS["context_len"]:
        raise ConfigError(f"input + output = {resolved.seq_len + output_len:,} tokens, above the limit of "
                          f"{LIMITS['context_len']:,}")
    return resolved.seq_len


def predict_inference(target: Target, model: Model, par: Parallelism, batch: int | str = 1,
                      input_len: int | None = None, output_len: int = 256, seq_len: int | None = None,
                      image_size: int | None = None, dtype: str = "bf16", cost: CostOptions = CostOptions(),
                      engine: str = "eager") -> Prediction:
    """Predict serving `model` on `par.devices` devices of `target.device` run by `engine`; batch may be
    "auto"."""
    validate(par, model.family, model.config)
    if model.family == "decoder":
        input_len = prompt_len(model, input_len or seq_len, output_len, dtype)
        run = lambda b: _llm(target, model, par, b, input_len, output_len, dtype, cost, engine)
        key = "throughput_tokens_per_s"
    else:
        resolved = resolve_workload(model, Workload("forward", 1, seq_len, image_size=image_size, dtype=dtype))
        run = lambda b: _forward(target, model, par, b, resolved.seq_len, resolved.image_size, dtype, cost, engine)
        key = "throughput_samples_per_s"
    if batch != "auto":
        _check_batch(batch)
        return run(batch)
    best = None
    for b in AUTO_BATCHES:
        p = run(b)
        if not p.fits:
            break
        if best is None or p.metrics[key] > best.metrics[key]:
            best = p
    if best is None:
        first = run(1)
        return replace(first, notes=first.notes + ("batch auto: not even batch 1 fits",))
    return replace(best, notes=best.notes + (f"batch auto: {best.metrics['batch']} gives the highest throughput "
                                             "that fits (powers of two up to 4096 tried)",))
