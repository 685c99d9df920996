"""The lowering pass: fused kernels' bytes in closed form, and invariants on every zoo workload."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from planner.workload.capture import capture
from planner.workload.counting import OpCost, classified, classify, pointwise_packets
from planner.workload.device_graph import kernels
from planner.workload.engines import engines, get_engine
from planner.workload.graphs import Workload, build_graph
from planner.workload.lowering import lower
from planner.workload.zoo import resolve


def _lower(module: nn.Module, inputs: tuple, engine: str):
    """(aten cost list, kernels) of `module(*inputs)` captured in bf16 at inference."""
    module = module.to(device="meta", dtype=torch.bfloat16).eval()
    params = tuple(module.parameters())

    def run(_cap):
        with torch.no_grad():
            module(*inputs)

    graph = capture(run, torch.bfloat16, 16, "bf16", parameters=params)
    tags = pointwise_packets(graph)
    classified = [classify(r, r.packet in tags) for r in graph.records]
    ks = lower(graph.records, [c for c, _ in classified], [c for _, c in classified], ["first"] * len(classified),
               get_engine(engine))
    return classified, [k for k in ks if k.category != "view"]


def test_conv_bn_relu_is_one_kernel_under_tensorrt():
    # x [8, 64, 56, 56] -> conv 3x3 (128 out, no bias) -> BN -> ReLU -> y [8, 128, 56, 56], bf16 (2 B)
    n, cin, cout, hw = 8, 64, 128, 56
    block = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())
    x = torch.empty(n, cin, hw, hw, device="meta", dtype=torch.bfloat16)
    aten, ks = _lower(block, (x,), "tensorrt")
    assert len(ks) == 1 and ks[0].absorbed == 3
    k = ks[0]
    x_bytes = n * cin * hw * hw * 2            # input:  8·64·56·56·2  = 3,211,264
    w_bytes = cout * cin * 3 * 3 * 2           # weight: 128·64·9·2    = 147,456
    bias_bytes = cout * 2                      # the folded BN shift becomes the conv bias: 128·2 = 256
    y_bytes = n * cout * hw * hw * 2           # output: 8·128·56·56·2 = 6,422,528
    assert k.cost.bytes_read == x_bytes + w_bytes + bias_bytes
    assert k.cost.bytes_written == y_bytes
    # FLOP are the sum of the three ops: conv 2·N·Cout·H·W·Cin·9 + BN 2 + ReLU 1 per output element
    conv = 2 * n * cout * hw * hw * cin * 9
    assert k.cost.flop == conv + 3 * n * cout * hw * hw
    assert k.cost.flop == sum(c.flop for _, c in aten)
    # eager runs three kernels that move the conv output and BN output through memory twice more
    _, eager = _lower(block, (x,), "eager")
    assert len(eager) == 3


def test_tensorrt_pools_in_the_conv_kernel_and_never_writes_the_pool_indices():
    # x [8, 64, 56, 56] -> conv 3x3 (64 out) -> BN -> ReLU -> max pool 2x2 -> [8, 64, 28, 28], bf16 (2 B):
    # TensorRT runs it as one ConvActPool kernel that stores only the pooled result; eager writes the conv output,
    # then the pool reads it and writes its result and its int64 indices
    n, c, hw = 8, 64, 56
    block = nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2))
    x = torch.empty(n, c, hw, hw, device="meta", dtype=torch.bfloat16)
    _, ks = _lower(block, (x,), "tensorrt")
    assert len(ks) == 1 and ks[0].absorbed == 4 and ks[0].category == "conv"
    pooled = n * c * (hw // 2) ** 2             # 8·64·28·28 = 401,408 elements
    assert ks[0].cost.bytes_written == pooled * 2  # 802,816 B: no conv output, no indices
    assert ks[0].cost.bytes_read == n * c * hw * hw * 2 + c * c * 9 * 2 + c * 2  # x, weight, folded bias
    _, eager = _lower(block, (x,), "eager")
    pool = next(k for k in eager if "max_pool" in k.record.op)
    assert pool.cost.bytes_written == pooled * 2 + pooled * 8  # result (bf16) + indices (int64)
    # the indices are written where something reads them: a training step's backward
    assert get_engine("tensorrt").fuses("dead_outputs", "forward")
    assert not get_engine("tensorrt").fuses("dead_outputs", "backward")


def test_tensorrt_pads_a_three_channel_convolution_to_four():
    # x [2, 3, 224, 224] -> conv 7x7 / 2 (64 out) -> y [2, 64, 112, 112]: the model's FLOP are
    # 2·(2·64·112·112)·(3·7·7) = 472,055,808; TensorRT runs the 3 channels as a 4-wide vector, so its kernel does
    # 4/3 of that, 157,351,936 FLOP more on zeros, reads the reduction as 4·7·7 = 196 deep and moves the same bytes
    conv = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
    x = torch.empty(2, 3, 224, 224, device="meta", dtype=torch.bfloat16)
    aten, ks = _lower(conv, (x,), "tensorrt")
    (k,), (_, single) = ks, aten[0]
    model_flop = 2 * (2 * 64 * 112 * 112) * (3 * 7 * 7)
    assert single.flop == model_flop == 472_055_808
    assert k.padding_flop == model_flop / 3 == 157_351_936 and k.cost.flop == model_flop * 4 / 3
    assert k.cost.bytes == single.bytes and "[C 3->4]" in k.record.op
    assert k.record.arg("weight").shape == (64, 4, 7, 7) and k.record.arg("input").shape == (2, 4, 224, 224)
    # eager pads nothing
    _, eager = _lower(conv, (x,), "eager")
    assert eager[0].padding_flop == 0 and eager[0].cost.flop == model_flop
    # the vectorized formats pad a tensor's C, not C per group: a depthwise conv (weight [32, 1, 3, 3]) is not
    # padded 1 -> 4
    depthwise = nn.Conv2d(32, 32, 3, padding=1, groups=32, bias=False)
    _, (dk,) = _lower(depthwise, (torch.empty(8, 32, 56, 56, device="meta", dtype=torch.bfloat16),), "tensorrt")
    assert dk.padding_flop == 0 and "[C" not in dk.record.op


def test_a_pool_after_no_convolution_fuses_with_nothing():
    # y = relu(max_pool2d(x) * 2): the pool is a kernel of its own under every engine (only conv_pool joins a pool,
    # to the convolution before it); compile fuses the multiply and the ReLU into one pointwise kernel
    class PoolThen(nn.Module):
        def forward(self, x):
            return torch.relu(F.max_pool2d(x, 2) * 2)

    x = torch.empty(8, 64, 56, 56, device="meta", dtype=torch.bfloat16)
    _, ks = _lower(PoolThen(), (x,), "compile")
    assert [k.absorbed for k in ks] == [1, 2] and ks[0].category == "pool"


class _AddRMSNorm(nn.Module):
    """A decoder layer's residual step: s = hidden + residual; y = RMSNorm(s); the MLP reads y and the
    next residual add reads s."""

    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.mlp = nn.Linear(d, d, bias=False)

    def forward(self, hidden, residual):
        s = hidden + residual
        y = F.rms_norm(s, (s.shape[-1],), self.weight, 1e-6)
        return self.mlp(y) + s


def test_residual_rmsnorm_reads_residual_and_hidden_once_under_vllm():
    # hidden, residual [T=16, D=4096] bf16: vLLM's fused_add_rms_norm reads both once, writes the new
    # residual (the next layer reads it) and the normed output; the sum is never re-read from memory
    t, d = 16, 4096
    h = torch.empty(t, d, device="meta", dtype=torch.bfloat16)
    r = torch.empty(t, d, device="meta", dtype=torch.bfloat16)
    aten, ks = _lower(_AddRMSNorm(d), (h, r), "vllm")
    assert [k.absorbed for k in ks] == [2, 1, 1]  # add+norm, the Linear, the next residual add
    k = ks[0]
    assert k.cost.bytes_read == t * d * 2 + t * d * 2 + d * 2          # hidden + residual + weight
    # the sum s and y, each T·D·2; and the fp32 rstd [T, 1] the norm kernel returns (T·4)
    assert k.cost.bytes_written == t * d * 2 + t * d * 2 + t * 4
    add, norm = aten[0][1], next(c for cat, c in aten if cat == "norm")
    assert add.bytes_read + norm.bytes_read - k.cost.bytes_read == t * d * 2   # the norm's re-read of s is gone
    assert k.cost.flop == add.flop + norm.flop


ZOO_CASES = [
    ("llama-2-7b", Workload(mode="decode", context_len=512)),
    ("llama-2-7b", Workload(mode="prefill", seq_len=256)),
    ("mixtral-8x7b", Workload(mode="decode", context_len=256)),
    ("bert-base", Workload()),
    ("resnet50", Workload()),
    ("vit-b-16", Workload()),
    ("gpt2", Workload(mode="training", seq_len=128)),
    ("resnet50", Workload(mode="training", batch=2)),
]


def _one_layer(name: str):
    model = resolve(name)
    if hasattr(model.config, "num_layers") and model.family in ("decoder", "encoder") or hasattr(model.config, "patch_size"):
        model = replace(model, config=replace(model.config, num_layers=1))
    return model


@pytest.mark.parametrize("name,workload", ZOO_CASES, ids=[f"{n}-{w.mode}" for n, w in ZOO_CASES])
def test_lowering_never_adds_bytes_or_kernels_and_keeps_flop(name, workload):
    model = _one_layer(name)
    wg = build_graph(model, workload)
    tags = pointwise_packets(wg.graph)
    aten = [classify(r, r.packet in tags)[1] for r in wg.graph.records]
    aten_total = sum(aten, OpCost())
    aten_kernels = sum(1 for r in wg.graph.records if classify(r, r.packet in tags)[0] != "view")
    checked = 0
    for engine in engines().values():
        mode = "training" if workload.mode == "training" else "inference"
        if mode not in engine.modes or model.family not in engine.families:
            continue
        # a second read of a training batch norm's activations (compile: Engine.batch_norm_reads) and a
        # dynamic cache's concatenation (hf-generate: Engine.kv_update) are traffic the kernels add on
        # purpose, tested below; every other byte is conserved
        ks = [k for k in lower(wg.graph.records, *classified(wg.graph), ["first"] * len(wg.graph.records),
                               replace(engine, batch_norm_reads=1, kv_update="in_place")) if k.category != "view"]
        total = sum((k.cost for k in ks), OpCost())
        assert len(ks) <= aten_kernels, engine.name
        assert total.bytes_read <= aten_total.bytes_read + 1e-6, engine.name
        assert total.bytes_written <= aten_total.bytes_written + 1e-6, engine.name
        # FLOP are the model's, plus only the zero lanes an engine pads a convolution's channels with (TensorRT:
        # ResNet-50's 3-channel image to 4; planner/workload/lowering.py _padded)
        padding = sum(k.padding_flop for k in ks)
        assert padding == 0 or (engine.conv_channel_multiple > 1 and model.family == "vision"), engine.name
        assert total.flop == pytest.approx(aten_total.flop + padding, rel=1e-12), engine.name
        assert sum(k.absorbed for k in ks) == aten_kernels, engine.name
        checked += 1
    assert checked >= 2


def test_every_fusing_engine_fuses_a_decoder_layer():
    # an engine with any elementwise rule runs fewer kernels than aten ops on a llama decode layer
    wg = build_graph(_one_layer("llama-2-7b"), Workload(mode="decode", context_len=128))
    eager = len([k for k in kernels(wg.graph, ["first"] * len(wg.graph.records), "eager") if k.category != "view"])
    for engine in engines().values():
        if "inference" in engine.modes and "decoder" in engine.families and engine.fusions:
            fused = [k for k in kernels(wg.graph, ["first"] * len(wg.graph.records), engine.name)
                     if k.category != "view"]
            assert len(fused) < eager, engine.name


def _moe_kernels(engine, workload: Workload):
    from planner.workload.device_graph import _captured
    _, _, captured, roles, _, _ = _captured(resolve("qwen3-30b-a3b"), replace(workload, engine="eager"), 1, 1)
    records = captured.graph.records
    tags = pointwise_packets(captured.graph)
    classified = [classify(rec, rec.packet in tags) for rec in records]
    return lower(records, [c for c, _ in classified], [c for _, c in classified], roles, engine)


def test_a_serving_engine_runs_each_expert_step_once_for_all_experts():
    # qwen3-30b-a3b, one decode step at batch 2: 2 tokens x top-8 = 16 (token, expert) rows, one per expert,
    # so without the rule there are 16 copies of each expert kernel (gate, up, silu*mul, down, and the gather, weighting and
    # scatter of each expert's rows). vLLM's fused MoE runs each once for all 16: the same FLOP in fewer kernels;
    # the grouped GEMM is looked up as a batched GEMM [16, 1, 2048] x [16, 2048, 768]
    w = Workload(mode="decode", batch=2, context_len=64, dtype="bf16")
    engine = get_engine("vllm")
    ungrouped = replace(engine, fusions=tuple(f for f in engine.fusions if f[0] != "moe_grouped"))
    apart, vllm = _moe_kernels(ungrouped, w), _moe_kernels(engine, w)
    total = lambda ks, field: sum(getattr(k.cost, field) for k in ks)  # noqa: E731
    assert total(vllm, "flop") == pytest.approx(total(apart, "flop"), rel=1e-12)
    # and fewer bytes: 16 rows of 2048 bf16 = 65,536 B. The gather (read 65,536 + 16 x 8 B of index, write
    # 65,536) runs inside the first GEMM, which reads the index instead, the weighting (read 65,536 + 16 x 2 B of
    # weights, write 65,536) in the second's epilogue, and the scatter (read the rows, their index and 65,536 B
    # of output rows, write 65,536) becomes one sum: read 65,664 + the 32 B of weights + the output [2, 2048]
    # once (8,192), write 8,192
    read_saved = 65_536 + (65_536 + 32) + (65_664 + 65_536 - (65_664 + 32 + 8_192))
    written_saved = 65_536 + 65_536 + (65_536 - 8_192)
    assert total(apart, "bytes_read") - total(vllm, "bytes_read") == pytest.approx(read_saved, abs=1e-6)
    assert total(apart, "bytes_written") - total(vllm, "bytes_written") == pytest.approx(written_saved, abs=1e-6)
    # TensorRT-LLM's permute writes the rows out first: only the weighting and the scatter change
    trt = _moe_kernels(replace(engine, moe_gather="kernel"), w)
    assert total(apart, "bytes_read") - total(trt, "bytes_read") == pytest.approx(read_saved - 65_536, abs=1e-6)
    assert get_engine("trtllm").moe_gather == "kernel" and get_engine("sglang").moe_gather == "in_gemm"
    # under fp8, vLLM quantizes the 2 tokens once (read 2 x 2048 x 2 B, write 2 x 2048 x 1 B), not the 16 gathered
    # rows the permuting engine quantizes (read 65,536, write 32,768)
    fp8 = replace(w, dtype="quant=fp8")
    quantize = lambda ks: [k for k in ks if k.record.op == "fused.experts:quant.quantize.default"]  # noqa: E731
    (q,) = quantize(_moe_kernels(engine, fp8))
    assert (q.cost.bytes_read, q.cost.bytes_written) == (8_192, 4_096)
    (q,) = quantize(_moe_kernels(replace(engine, moe_gather="kernel"), fp8))
    assert (q.cost.bytes_read, q.cost.bytes_written) == (65_536, 32_768)
    experts = lambda ks: [k for k in ks if ".experts." in k.record.module or k.record.op.startswith("fused.experts:")]  # noqa: E731
    assert len([k for k in experts(apart) if k.category == "matmul"]) == 16 * 3
    grouped = [k for k in experts(vllm) if k.category == "matmul"]
    assert len(grouped) == 3  # gate, up and down, each once
    gate = grouped[0]
    assert gate.record.packet == "aten.bmm" and gate.absorbed == 16 + 16  # and the 16 gathers it runs
    assert [t.shape for t in gate.record.tensors()] == [(16, 1, 2048), (16, 2048, 768)]
    # without the rule (eager, megatron) every expert keeps its kernels: the rule is the serving engines'
    assert not any(k.record.op.startswith("fused.experts:") for k in apart)
    assert not any(k.record.op.startswith("fused.experts:") for k in _moe_kernels(get_engine("eager"), w))
    assert all(get_engine(e).fuses("moe_grouped", "forward") for e in ("vllm", "sglang", "trtllm"))


def test_a_moe_block_of_one_row_per_layer_is_routed_like_a_grouped_one():
    # llama-4-scout routes each token to 1 of 16 experts: at batch 1 one expert runs, so every group has a single
    # member. Its gather still runs inside the first GEMM and its weighting in the sum: the same kernels and
    # bytes as a layer of many rows would get (3 block kernels become 1 per MoE layer)
    from planner.workload.device_graph import _captured

    w = Workload(mode="decode", batch=1, context_len=64, dtype="bf16")
    _, _, captured, roles, _, _ = _captured(resolve("llama-4-scout"), replace(w, engine="eager"), 1, 1)
    records = captured.graph.records
    tags = pointwise_packets(captured.graph)
    pairs = [classify(rec, rec.packet in tags) for rec in records]
    lowered = lower(records, [c for c, _ in pairs], [c for _, c in pairs], roles, get_engine("vllm"))
    block = [k for k in lowered if k.record.module.endswith(".feed_forward") or k.record.module.endswith(".mlp")]
    packets = [k.record.packet for k in block if k.category != "view"]
    assert "aten.index_add_" in packets and "aten.index_select" not in packets and "aten.mul" not in packets
    assert sum(k.absorbed for k in lowered if k.category != "view") == sum(1 for c, _ in pairs if c != "view")


def test_a_grouped_expert_gemm_streams_no_faster_than_the_bandwidth():
    # deepseek-v3 fp8 decode on 8 x H200 (tp 8): each grouped expert GEMM moves its experts' weights at
    # most at 4.8 TB/s, and the step is far from the 445 ms it took as 14,848 kernels per projection
    from planner.predict import Request, predict
    from planner.predict.api import op_rows
    req = Request("deepseek-v3", "h200-sxm", gpus=8, tp=8, batch=32, dtype="quant=fp8")
    h200 = predict(req).metrics
    rows = [r for r in op_rows(req)["decode"] if r.op.startswith("fused.experts:")]
    from planner.hardware.catalog import load_catalog
    bw = load_catalog().device("h200-sxm").mem_bytes_per_s
    assert rows and all(r.bytes / r.time_s <= bw * (1 + 1e-9) for r in rows if r.bound == "memory")
    assert h200["tpot_s"] < 0.1


def test_single_op_kernels_are_shared_between_engines_and_equal_a_fresh_lowering():
    # the kernels of ops no fusion takes are memoized by the identity of lower's arguments: a second engine
    # lowering the same capture reuses them, and the result equals a lowering from fresh arguments
    from planner.workload.counting import classified
    from planner.workload.lowering import Kernel

    wg = build_graph(_one_layer("llama-2-7b"), Workload(mode="decode", context_len=64, batch=2))
    records = wg.graph.records
    categories, costs = classified(wg.graph)
    roles = ["first"] * len(records)
    lowered = {}
    for name in ("eager", "vllm", "eager"):
        lowered[name] = lower(records, categories, costs, roles, get_engine(name))
        fresh = lower(records, list(categories), list(costs), list(roles), get_engine(name))  # other objects
        assert lowered[name] == fresh, name
    assert lowered["eager"] == [Kernel(r, c, cost, 0 if c == "view" else 1, "first")
                                for r, c, cost in zip(records, categories, costs)]
    unfused = [k for k in lowered["vllm"] if k.absorbed <= 1]
    assert unfused and all(any(k is e for e in lowered["eager"]) for k in unfused)


def _training_convs(module: nn.Module, x_shape: tuple, engine):
    """Kernels `engine` (a name or an Engine) runs for one training step (forward and backward, no
    optimizer) of `module` on x, in bf16."""
    module = module.to(device="meta", dtype=torch.bfloat16).train()
    x = torch.empty(*x_shape, device="meta", dtype=torch.bfloat16)

    def run(_cap):
        module(x).float().pow(2).mean().backward()

    graph = capture(run, torch.bfloat16, 16, "bf16", parameters=tuple(module.parameters()))
    return lower(graph.records, *classified(graph), ["first"] * len(graph.records),
                 get_engine(engine) if isinstance(engine, str) else engine)


def test_compile_runs_convolutions_channels_last_where_inductor_would():
    # conv 3x3 96 -> 128 -> BN -> ReLU: no grouped conv, 128·2 > 96 (not "in_out"), channels above 64:
    # Inductor's decide_layout_opt takes the training graph, so both the forward conv and its backward
    # are NHWC kernels; eager keeps NCHW
    block = nn.Sequential(nn.Conv2d(96, 128, 3, padding=1, bias=False), nn.BatchNorm2d(128), nn.ReLU())
    names = [k.record.op for k in _training_convs(block, (8, 96, 28, 28), "compile") if k.category == "conv"]
    assert names == ["aten.convolution[NHWC].default", "aten.convolution_backward[NHWC].default"]
    eager = [k.record.op for k in _training_convs(block, (8, 96, 28, 28), "eager") if k.category == "conv"]
    assert all("[NHWC]" not in n for n in eager) and len(eager) == 2


@pytest.mark.parametrize("conv, why", [
    (nn.Conv2d(256, 96, 3, padding=1), "in_out: 96·2 <= 256 input channels at k = 3"),
    (nn.Conv2d(128, 128, 3, padding=1, groups=4), "grouped, 32 channels per group"),
    (nn.Conv2d(64, 32, 1), "every conv of 64 channels or fewer"),
    (nn.Sequential(nn.Conv2d(64, 256, 1), nn.Conv2d(256, 64, 1), nn.Conv2d(64, 32, 3, padding=1)),
     "in_out: 32·2 <= 64 at k = 3, though also 'small'"),
])
def test_compile_keeps_nchw_where_inductor_skips_the_layout_optimization(conv, why):
    channels = next(m for m in conv.modules() if isinstance(m, nn.Conv2d)).in_channels
    kernels = _training_convs(conv, (4, channels, 14, 14), "compile")
    assert all("[NHWC]" not in k.record.op for k in kernels if k.category == "conv"), why


def test_compiled_resnet50_inference_is_channels_last():
    # inference: conv FLOP weighted by Inductor's channels-last multipliers (0.823 default, 0.783 small,
    # 0.725 in_out) is below the unweighted FLOP for ResNet-50 (no grouped conv, weighted 1.358)
    wg = build_graph(resolve("resnet50"), Workload("forward", 2, image_size=224, engine="compile"))
    convs = [k for k in kernels(wg.graph, ["first"] * len(wg.graph.records), "compile") if k.category == "conv"]
    assert len(convs) == 53 and all("[NHWC]" in k.record.op for k in convs)


def test_compile_reads_a_training_batch_norms_activations_twice():
    # conv 3x3 96 -> 128, BN (training), ReLU on x [8, 96, 28, 28] bf16: the per-channel reduction runs over
    # N·H·W = 8·28·28 = 6,272 > 64 elements (an outer reduction, not persistent), so Inductor's statistics pass and its
    # normalize pass each read the conv's output y [8, 128, 28, 28] = 8·128·28·28·2 = 1,605,632 B; backward,
    # the sums and the input-gradient pass each read the gradient and y: 2 · 1,605,632 B more
    def block():
        return nn.Sequential(nn.Conv2d(96, 128, 3, padding=1, bias=False), nn.BatchNorm2d(128), nn.ReLU())

    compile_ = get_engine("compile")
    assert compile_.batch_norm_reads == 2

    def norms(engine, hw: int):
        return [k for k in _training_convs(block(), (8, 96, hw, hw), engine) if k.category == "norm"]

    twice, once = norms(compile_, 28), norms(replace(compile_, batch_norm_reads=1), 28)
    y = 8 * 128 * 28 * 28 * 2
    assert [k.record.phase for k in twice] == ["forward", "backward"]
    assert [a.cost.bytes_read - b.cost.bytes_read for a, b in zip(twice, once)] == [y, 2 * y]
    assert [a.cost.bytes_written for a in twice] == [b.cost.bytes_written for b in once]
    # at 8·2·2 = 32 elements per channel the reduction is persistent: one read, as counted; at 8·4·4 = 128 not
    assert [k.cost for k in norms(compile_, 2)] == [k.cost for k in norms(replace(compile_, batch_norm_reads=1), 2)]
    assert [k.cost for k in norms(compile_, 4)] != [k.cost for k in norms(replace(compile_, batch_norm_reads=1), 4)]


def test_hf_generate_concatenates_its_dynamic_cache_every_decode_step():
    # llama-3.1-8b decode, batch 16, 768 tokens in the cache: per layer the new key [16, 8, 1, 128] bf16 is
    # 16·8·128·2 = 32,768 B; in place (eager) the copy_ reads and writes that, 65,536 B. transformers'
    # DynamicCache makes torch.cat([past, new]): it also reads the 768 past positions and writes them again,
    # 2 · 16·8·768·128·2 = 50,331,648 B more, for the keys and for the values
    from planner.workload.device_graph import device_graph
    from planner.workload.parallelism import Parallelism
    model = resolve("llama-3.1-8b")

    def cache_writes(engine: str):
        dg = device_graph(model, Workload("decode", 16, context_len=768, engine=engine), Parallelism())
        return [op for op in dg.layer.ops if op.record.packet == "aten.copy_"]

    [eager], [dynamic] = cache_writes("eager"), cache_writes("hf-generate")
    assert eager.count == dynamic.count == 2  # keys and values
    assert eager.cost.bytes == 65_536
    assert dynamic.cost.bytes == 65_536 + 2 * 16 * 8 * 768 * 128 * 2
    assert get_engine("hf-generate").kv_update == "concatenate" and get_engine("eager").kv_update == "in_place"


def test_hf_generate_leaves_a_prefill_into_an_empty_cache_as_it_is():
    # prefill of 64 tokens: the cache holds nothing before (P = 0), so the concatenation moves what the
    # in-place write moves
    from planner.workload.device_graph import device_graph
    from planner.workload.parallelism import Parallelism
    model = resolve("llama-3.1-8b")
    costs = {e: [op.cost for op in device_graph(model, Workload("prefill", 2, 64, engine=e), Parallelism()).layer.ops
                 if op.record.packet == "aten.copy_"] for e in ("eager", "hf-generate")}
    assert costs["eager"] and costs["eager"] == costs["hf-generate"]
