"""Conservation under fusion (planner/workload/lowering.py): a fused kernel reads every tensor that existed
before it, a buffer it updates in place included, and writes every tensor that outlives it."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from planner.workload import device_graph as dg
from planner.workload.capture import capture
from planner.workload.counting import OpCost, classified, classify, pointwise_packets
from planner.workload.engines import engines, get_engine
from planner.workload.graphs import Workload
from planner.workload.lowering import conserved, lower
from planner.workload.parallelism import Parallelism
from planner.workload.zoo import resolve


class CachedAttention(nn.Module):
    """One decode step of attention over a preallocated KV cache: rotate-free q, k, v of one new token,
    k and v written into the cache in place at position `pos`, attention over the whole cache."""

    def __init__(self, batch: int, heads: int, ctx: int, dim: int):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch, heads, ctx, dim))
        self.register_buffer("v_cache", torch.zeros(batch, heads, ctx, dim))

    def forward(self, q, k, v, pos: int):
        q = q * 0.5  # an elementwise prologue the attention kernel absorbs
        self.k_cache[:, :, pos:pos + 1].copy_(k)
        self.v_cache[:, :, pos:pos + 1].copy_(v)
        return F.scaled_dot_product_attention(q, self.k_cache, self.v_cache)


def _kernels(engine: str, batch=2, heads=4, ctx=64, dim=32):
    module = CachedAttention(batch, heads, ctx, dim).to(device="meta", dtype=torch.bfloat16)
    q, k, v = (torch.empty(batch, heads, 1, dim, device="meta", dtype=torch.bfloat16) for _ in range(3))

    def run(_cap):
        with torch.no_grad():
            module(q, k, v, ctx - 1)

    graph = capture(run, torch.bfloat16, 16, "bf16", kv_cache=tuple(module.buffers()))
    tags = pointwise_packets(graph)
    pairs = [classify(r, r.packet in tags) for r in graph.records]
    cats, costs = [c for c, _ in pairs], [c for _, c in pairs]
    ks = lower(graph.records, cats, costs, ["first"] * len(pairs), get_engine(engine))
    floor = conserved(graph.records, cats, costs, ["all"] * len(pairs))["all"]
    return [k for k in ks if k.category != "view"], floor


def test_attention_fused_with_its_cache_writes_reads_the_whole_cache_and_writes_the_new_token():
    # trtllm fuses the attention prologue: q * 0.5, the two cache writes and the attention are one kernel.
    # K and V caches: 2 x 4 x 64 x 32 elements x 2 bytes = 32,768 B each. The kernel reads q (2 x 4 x 1 x 32
    # x 2 = 512 B), the new k and v (512 B each) and the caches' prior contents: 32,768 - 512 = 32,256 B each
    # (the token it wrote stays on chip) -> 512 + 2 x 512 + 2 x 32,256 = 66,048 B. It writes the two new
    # tokens into the caches (512 B each, the caches outlive the kernel) and its output (512 B), plus the
    # attention's own small side outputs.
    ks, floor = _kernels("trtllm")
    fused = [k for k in ks if k.absorbed > 1]
    assert len(fused) == 1 and fused[0].category == "attention"
    cost = fused[0].cost
    assert cost.bytes_read == pytest.approx(66_048)
    assert cost.bytes_written >= 2 * 512 + 512
    assert cost.bytes >= floor.bytes
    # unfused (eager) the same step reads the caches whole: the fused kernel never reads less than the
    # cache's size minus what it wrote itself
    eager, _ = _kernels("eager")
    attention = next(k for k in eager if k.category == "attention")
    assert cost.bytes_read >= attention.cost.bytes_read - 2 * 512 - 512 + 512


DECODERS = ("llama-3.1-8b", "deepseek-v3", "qwen3-30b-a3b", "gemma-2-9b")
"""GQA, MLA with MoE, MoE, and sliding-window layers."""
RECIPES = ("bf16", "fp8", "w4a16", "weights=int4,kv=fp8")


def _decoder_engines(model) -> list[str]:
    return [e.name for e in engines().values() if "inference" in e.modes and model.family in e.families]


def _kv_bytes(records, categories) -> float:
    """Bytes of the KV cache the attention ops of one decode step read: per attention op, per storage of its
    key and value, the largest tensor read there (MLA's value is a slice of its key's cache)."""
    total = 0.0
    for rec, category in zip(records, categories):
        if category != "attention":
            continue
        by_storage: dict[int, float] = {}
        for name in ("key", "value"):
            t = rec.arg(name)
            by_storage[t.storage] = max(by_storage.get(t.storage, 0.0), t.bytes)
        total += sum(by_storage.values())
    return total


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("name", DECODERS)
def test_every_engine_reads_the_kv_cache_and_never_moves_less_than_the_conserved_bytes(name, recipe):
    model = resolve(name)
    par = Parallelism()
    workload = Workload("decode", 4, context_len=6000, dtype=recipe)
    _, num_layers, captured, roles, fold, weights = dg._captured(model, workload, par.tp, par.ep)
    records = captured.graph.records
    categories, _ = classified(captured.graph)
    layer = [i for i, role in enumerate(roles) if role == "layer"]
    # the folded layer is the weighted mean of its distinct layer kinds (weights sum to 1)
    kv_per_layer = sum(w * _kv_bytes([records[i] for i in layer if dg._layer_index(records[i].module) == j],
                                     [categories[i] for i in layer if dg._layer_index(records[i].module) == j])
                       for j, w in enumerate(weights))
    assert kv_per_layer > 0
    floor = dg.least_cost(model, workload, par)
    checked = 0
    for engine in _decoder_engines(model):
        graph = dg.device_graph(model, Workload("decode", 4, context_len=6000, dtype=recipe, engine=engine), par)
        attention = sum(op.cost.bytes_read * op.count for op in graph.layer.ops if op.category == "attention")
        assert attention >= kv_per_layer * (1 - 1e-9), (engine, attention, kv_per_layer)
        total = graph.total()
        assert total.bytes >= floor.bytes * (1 - 1e-9), (engine, total.bytes, floor.bytes)
        assert total.flop == pytest.approx(floor.flop, rel=1e-4), engine  # the same ops, summed in another grouping
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("name,workload", [
    ("llama-3.1-8b", Workload("prefill", 2, 512)),
    ("resnet50", Workload("forward", 8)),
    ("resnet50", Workload("training", 8)),
    ("gpt2", Workload("training", 2, 256)),
    ("bert-base", Workload("forward", 4, 128)),
])
def test_no_engine_moves_fewer_bytes_than_the_conserved_floor(name, workload):
    model = resolve(name)
    floor = dg.least_cost(model, workload, Parallelism())
    mode = "training" if workload.mode == "training" else "inference"
    checked = 0
    for engine in engines().values():
        if mode not in engine.modes or model.family not in engine.families:
            continue
        total = dg.device_graph(model, Workload(workload.mode, workload.batch, workload.seq_len,
                                                engine=engine.name), Parallelism()).total()
        assert total.bytes >= floor.bytes * (1 - 1e-9), engine.name
        checked += 1
    assert checked >= 2


def test_the_conserved_floor_of_one_block_is_its_external_inputs_and_outputs():
    # y = relu(x @ w) + b on x [8, 16], w [16, 32], b [32] in bf16: one block reads x (256 B), w (1,024 B),
    # b (64 B) once and writes y (8 x 32 x 2 = 512 B): 1,344 B read, 512 B written, FLOP 2 x 8 x 16 x 32 = 8,192
    # plus the elementwise ops' (relu 256, add 256)
    w = torch.empty(16, 32, device="meta", dtype=torch.bfloat16)
    b = torch.empty(32, device="meta", dtype=torch.bfloat16)
    x = torch.empty(8, 16, device="meta", dtype=torch.bfloat16)

    def run(_cap):
        torch.relu(x @ w) + b

    graph = capture(run, torch.bfloat16, 16, "bf16")
    tags = pointwise_packets(graph)
    pairs = [classify(r, r.packet in tags) for r in graph.records]
    floor = conserved(graph.records, [c for c, _ in pairs], [c for _, c in pairs], ["all"] * len(pairs))["all"]
    assert floor.bytes_read == 256 + 1024 + 64
    assert floor.bytes_written == 512
    assert floor.flop == sum((c for _, c in pairs), OpCost()).flop


class LatentAttention(nn.Module):
    """MLA-like decode: one latent cache [B, 1, S, 40] updated in place; attention reads it whole as its key and
    its first 32 columns (a view at the same offset) as its value."""

    def __init__(self, batch: int, ctx: int):
        super().__init__()
        self.register_buffer("cache", torch.zeros(batch, 1, ctx, 40))

    def forward(self, q, kv, pos: int):
        q = q * 0.5
        self.cache[:, :, pos:pos + 1].copy_(kv)
        return F.scaled_dot_product_attention(q, self.cache, self.cache[..., :32])


def test_a_value_that_is_a_prefix_of_the_key_cache_is_read_once():
    # batch 2, 64 tokens: the key view is 2 x 64 x 40 x 2 B = 10,240 B, the value view 2 x 64 x 32 x 2 B = 8,192 B of
    # the same storage at offset 0; the new token (2 x 40 x 2 = 160 B) stays on chip. The fused kernel reads q
    # (160 B), the new token (160 B) and the cache's prior contents once: max(10,240 - 160, 8,192 - 160) = 10,080 B
    module = LatentAttention(2, 64).to(device="meta", dtype=torch.bfloat16)
    q = torch.empty(2, 1, 1, 40, device="meta", dtype=torch.bfloat16)
    kv = torch.empty(2, 1, 1, 40, device="meta", dtype=torch.bfloat16)

    def run(_cap):
        with torch.no_grad():
            module(q, kv, 63)

    graph = capture(run, torch.bfloat16, 16, "bf16", kv_cache=tuple(module.buffers()))
    tags = pointwise_packets(graph)
    pairs = [classify(r, r.packet in tags) for r in graph.records]
    ks = lower(graph.records, [c for c, _ in pairs], [c for _, c in pairs], ["first"] * len(pairs),
               get_engine("trtllm"))
    [fused] = [k for k in ks if k.absorbed > 1]
    assert fused.category == "attention"
    assert fused.cost.bytes_read == pytest.approx(160 + 160 + 10_080)
