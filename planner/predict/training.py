"""Training: step time, tokens/s, samples/s, MFU, memory, time and cost to train on N tokens.

One step processes the global batch G = micro_batch · dp · M in M micro-batches per pipeline:
    per micro-batch on a stage  t_mb = forward + backward (+ recompute) + TP/EP comm (forward and
                                backward) + pipeline hops (activation forward, gradient back)
    pipeline (1F1B)             (M + pp − 1) · max over stages of t_mb     (bubble (pp−1)/(M+pp−1))
    optimizer                   the stage's fused AdamW update once per step (/dp under ZeRO >= 1)
    data parallel               gradients: all-reduce (ZeRO 0) or reduce-scatter + all-gather of
                                weights (ZeRO 1-2); ZeRO-3 also all-gathers weights in forward and
                                backward; a share `overlap` of it hides behind the backward pass
    step = pipeline + optimizer + exposed data-parallel communication
Recompute: "full" re-runs each layer's forward in backward; "selective" re-runs attention only
(with fused attention the scores were never stored, so it saves little memory).
MFU = model FLOP of forward and backward (no recompute) per step / (step · devices · dense peak).
"""

from __future__ import annotations

import math
from dataclasses import replace

from planner.errors import ConfigError
from planner.predict.context import Target
from planner.predict.memory import stage_params, training_memory
from planner.predict.diagnosis import StepParts, comm_parts, notes, op_parts
from planner.predict.parallel import collective_time_s, layer_collectives, layer_comm_s, pipeline_hop_s
from planner.predict.prediction import CostOptions, Prediction, make_prediction, price
from planner.predict.timing import stage_times
from planner.units import si
from planner.workload.device_graph import device_graph
from planner.workload.graphs import Workload, resolve_workload
from planner.workload.parallelism import MAX_DEGREE, Parallelism, validate
from planner.workload.quant import precision
from planner.workload.zoo import Model

RECOMPUTE = ("none", "selective", "full")


def predict_training(target: Target, model: Model, par: Parallelism, micro_batch: int = 1,
                     global_batch: int | None = None, seq_len: int | None = None, image_size: int | None = None,
                     dtype: str = "bf16", recompute: str = "none", train_tokens: float | None = None,
                     cost: CostOptions = CostOptions(), engine: str = "eager", mixed_precision: str = "auto",
                     optimizer: str = "auto") -> Prediction:
    """Predict a training step of `model` on `par.devices` devices of `target.device` run by `engine`, a
    16-bit dtype kept as `mixed_precision` says (planner.workload.graphs.MIXED_PRECISION)."""
    device, defaults, node = target.device, target.defaults, target.node_size
    validate(par, model.family, model.config)
    if recompute not in RECOMPUTE:
        raise ConfigError(f"--recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1:
        raise ConfigError(f"--micro-batch must be a positive integer, got {micro_batch!r}")
    if global_batch is not None:
        if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
            raise ConfigError(f"--global-batch must be a positive integer, got {global_batch!r}")
        if global_batch % (micro_batch * par.dp):
            raise ConfigError(f"--global-batch {global_batch} is not a multiple of micro-batch x dp = "
                              f"{micro_batch * par.dp}")
        microbatches = global_batch // (micro_batch * par.dp)
        if microbatches > MAX_DEGREE:
            raise ConfigError(f"--global-batch {global_batch:,} makes {microbatches:,} micro-batches per step; the limit "
                              f"is {MAX_DEGREE:,} (raise --micro-batch)")
    else:
        microbatches = par.microbatches or (4 * par.pp if par.pp > 1 else 1)
    workload = resolve_workload(model, Workload("training", micro_batch, seq_len, image_size=image_size, dtype=dtype,
                                                engine=engine, mixed_precision=mixed_precision, optimizer=optimizer))
    step_graph = device_graph(model, workload, par)
    stages = stage_times(step_graph, device, target.efficiency, target.power)
    tokens = micro_batch * (workload.seq_len or 1)
    samples = micro_batch * par.dp * microbatches

    per_mb, comms = [], []
    passes = 3 if recompute == "full" else 2
    for s, st in enumerate(stages):
        forward, backward = st.phase_s("forward"), st.phase_s("backward")
        if recompute == "full":
            backward += forward
        elif recompute == "selective":
            backward += st.breakdown_s.get(("forward", "attention"), 0.0)
        comm = layer_comm_s(step_graph, s, tokens, device, defaults, node, passes=passes)
        comms.append(comm)
        per_mb.append(forward + backward + comm)
    hop = pipeline_hop_s(step_graph, tokens, device, defaults, node)
    slowest = max(per_mb) + (2 * hop if par.pp > 1 else 0.0)
    pipeline = (microbatches + par.pp - 1) * slowest
    optimizer = max(st.phase_s("optimizer") for st in stages) / (par.dp if par.zero >= 1 else 1)

    # data-parallel communication of the largest stage's gradients (and weights under ZeRO)
    # gradients are reduced in fp32 under amp (they are fp32) and master (Megatron-LM accumulates and
    # reduces main grads in fp32, --accumulate-allreduce-grads-in-fp32; torchtitan's FSDP
    # mixed_precision_reduce defaults to float32); weights are gathered at the dtype they are kept in
    stage_max = max(stage_params(step_graph, s) for s in range(par.pp))
    bits = precision(dtype).bits
    mixed = workload.mixed_precision
    grad_bytes = stage_max * (32 if mixed in ("amp", "master") else bits) / 8
    weight_bytes = stage_max * (32 if mixed == "amp" else bits) / 8
    per_node = max(1, node // par.model_devices)
    dp_comm = 0.0
    if par.dp > 1:
        if par.zero == 0:
            dp_comm = collective_time_s("allreduce", grad_bytes, par.dp, device, defaults, per_node)
        else:
            rs = collective_time_s("reducescatter", grad_bytes, par.dp, device, defaults, per_node)
            ag = collective_time_s("allgather", weight_bytes, par.dp, device, defaults, per_node)
            dp_comm = rs + ag + (2 * microbatches * ag if par.zero == 3 else 0.0)
    backward_total = microbatches * max(st.phase_s("backward") for st in stages)
    exposed = dp_comm - min(par.overlap * dp_comm, backward_total)
    step = pipeline + optimizer + exposed
    parts = _step_parts(stages, per_mb, comms, [layer_collectives(step_graph, s, passes) for s in range(par.pp)],
                        hop, par, microbatches, recompute, exposed, _dp_collectives(par, microbatches))

    # model FLOP: forward and backward of the unsharded model, per micro-batch, x micro-batches x dp
    whole = device_graph(model, workload, Parallelism())
    model_flop = sum(op.cost.flop * op.count * (whole.num_layers if part is whole.layer else 1)
                     for part in (whole.first, whole.layer, whole.last) for op in part.ops
                     if op.record.phase in ("forward", "backward")) * microbatches * par.dp
    peak = device.peak(precision(dtype).gemm)  # a quantization recipe: the peak its GEMMs run at
    mfu = model_flop / (step * par.devices * peak)

    memory = training_memory(step_graph, par.dp, par.zero, microbatches, recompute, device, defaults)
    idle = target.power.idle_w(device)
    share = 1 / par.dp if par.zero >= 1 else 1.0  # ZeRO: each device steps its 1/dp shard of the optimizer
    # the device is busy for its kernels; a wait on host dispatch (eager, host-bound) is idle time
    busy = [microbatches * (st.time_s - st.phase_s("optimizer") - st.bound_s.get("launch", 0.0))
            + share * st.phase_s("optimizer") for st in stages]
    op_energy = [microbatches * (st.energy_j - st.phase_energy_j.get("optimizer", 0.0))
                 + share * st.phase_energy_j.get("optimizer", 0.0) for st in stages]
    energy_j = par.dp * par.tp * sum(e + idle * max(0.0, step - b) for b, e in zip(busy, op_energy))
    avg_power = energy_j / (par.devices * step)
    # devices that train together exchange gradients (and activations) every step over the links the
    # time above assumes: the scale-up link within a node, the node's scale-out network across nodes.
    # Rented, they come as whole nodes: one-device instances joined over a data-centre network are
    # not what was timed (planner/plan/capacity.py keeps the same rule)
    group = max(par.tp, min(par.devices, target.node_size))
    basis = price(target, par.devices, cost, avg_power, group)
    tokens_per_step = samples * (workload.seq_len or 1)
    metrics = {"micro_batch": micro_batch, "global_batch": samples, "microbatches": microbatches,
               "seq_len": workload.seq_len, "step_time_s": step, "samples_per_s": samples / step, "mfu": mfu, "model_flop_per_step": model_flop,
               "dp_comm_exposed_s": exposed, "optimizer_s": optimizer, "average_power_w_per_gpu": avg_power,
               "j_per_step": energy_j, **parts.metrics()}
    if workload.seq_len:  # token models only: a sample of a vision model is an image, not a token
        metrics["tokens_per_s"] = tokens_per_step / step
    if train_tokens is not None:
        if not 0 < train_tokens < math.inf:
            raise ConfigError(f"--train-tokens must be positive, got {train_tokens}")
        steps = math.ceil(train_tokens / tokens_per_step)
        metrics["train_tokens"] = train_tokens
        metrics["train_unit"] = train_unit(model, workload.seq_len)
        metrics["time_to_train_s"] = steps * step
        metrics["energy_to_train_j"] = steps * energy_j
        if basis is not None:
            metrics["cost_to_train_usd"] = steps * step / 3600 * basis.usd_per_h
    schedule = (f"1F1B: {par.pp - 1} of the {microbatches + par.pp - 1} slots of {microbatches} micro-batches "
                f"through {par.pp} stages, (pp-1)/(M+pp-1) = {(par.pp - 1) / (microbatches + par.pp - 1):.0%} "
                "of the pipeline, fill and drain")
    p = make_prediction(target, model, par, "training", dtype, memory, energy_j, basis, metrics, engine, cost.pricing,
                        group, notes(parts, "training step", engine, schedule))
    from planner.workload.graphs import MIXED_PRECISION, OPTIMIZERS
    if workload.mixed_precision != "none":
        p = replace(p, notes=(*p.notes, f"mixed precision {workload.mixed_precision} (--mixed-precision): "
                                        f"{MIXED_PRECISION[workload.mixed_precision]}"))
    p = replace(p, notes=(*p.notes, f"optimizer AdamW {workload.optimizer} (--optimizer): "
                                    f"{OPTIMIZERS[workload.optimizer]}", _loss_note(model, whole)))
    return p


def train_unit(model: Model, seq_len: int | None) -> str:
    """What --train-tokens counts (one per token of each sample's sequence, else one per sample): "tokens"
    for a model of sequences, else "images" for vision, detection and diffusion models, a user's model's
    items ("sequences", "images" or "samples": user_model.Example.noun), "samples" otherwise."""
    from planner.workload.user_model import example_of

    if seq_len:
        return "tokens"
    if model.family in ("vision", "detection", "diffusion"):
        return "images"
    example = example_of(model)
    return example.noun() if example is not None else "samples"


def _loss_note(model: Model, whole) -> str:
    """The note naming the objective a step counts and what its kernels cost per micro-batch: the loss ops
    (category "loss" and LOSS_PACKETS) outside the layers of the unsharded graph, forward and backward, and
    the casts of the tensor they read (the logits' fp32 upcast and its gradient cast back: copies shaped like
    it, element count and last dimension, that change its dtype), each counted as often as it runs."""
    from planner.workload.graphs import LOSS_PACKETS, loss_text
    ops = [op for op in whole.first.ops + whole.last.ops if op.record.phase in ("forward", "backward")]
    loss = [op for op in ops if op.category == "loss" or op.record.packet in LOSS_PACKETS]
    read = {(math.prod(t.shape), t.shape[-1]) for op in loss for t in op.record.tensors() if len(t.shape) > 1}

    def cast(op) -> bool:
        rec = op.record
        if op.category != "copy" or not rec.outputs or len(rec.outputs[0].shape) < 2:
            return False
        src = rec.tensors()
        out = rec.outputs[0]
        return (math.prod(out.shape), out.shape[-1]) in read and bool(src) and src[0].dtype != out.dtype

    casts = [op for op in ops if cast(op)]
    text = f"loss {loss_text(model)}"
    if loss:
        flop = sum(op.cost.flop * op.count for op in loss + casts)
        nbytes = sum(op.cost.bytes * op.count for op in loss + casts)
        kernels = sum(op.count for op in loss)
        text += f"; counted: {kernels} loss kernels"
        if casts:
            text += f" and {sum(op.count for op in casts)} casts"
        text += f", forward and backward, {si(flop, 'FLOP')} and {si(nbytes, 'B')} per micro-batch"
    return text


def _step_parts(stages, per_mb: list[float], comms: list[float], collectives: list[dict[str, int]], hop: float,
                par: Parallelism, microbatches: int, recompute: str, dp_exposed: float,
                dp_collectives: dict[str, int]) -> StepParts:
    """Where the step's time goes (planner/predict/diagnosis.py), from the terms predict_training adds:
    M micro-batches of the slowest stage (its forward and backward ops, a recompute, its collectives, the
    two pipeline sends) and pp - 1 more slots of it idle (the bubble), the optimizer of the stage with the
    longest, and the data-parallel communication left exposed."""
    slow = max(range(len(stages)), key=per_mb.__getitem__)
    st = stages[slow]
    micro = op_parts(st, ("forward", "backward")) + comm_parts(comms[slow], collectives[slow])
    if recompute == "full":
        micro += op_parts(st, ("forward",))
    elif recompute == "selective":
        micro += op_parts(st, ("forward",), attention_only=True)
    if par.pp > 1:
        micro += comm_parts(2 * hop, {"pipeline send": 2})
    opt = max(stages, key=lambda x: x.phase_s("optimizer"))
    parts = micro.scaled(microbatches) + StepParts(bubble_s=(par.pp - 1) * micro.step_s)
    parts += op_parts(opt, ("optimizer",)).scaled(1 / (par.dp if par.zero >= 1 else 1))
    return parts + comm_parts(dp_exposed, dp_collectives)


def _dp_collectives(par: Parallelism, microbatches: int) -> dict[str, int]:
    """The data-parallel collectives of one step (predict_training's dp_comm)."""
    if par.dp == 1:
        return {}
    if par.zero == 0:
        return {"data-parallel gradient all-reduce": 1}
    return {"data-parallel gradient reduce-scatter": 1,
            "data-parallel weight all-gather": 1 + (2 * microbatches if par.zero == 3 else 0)}
