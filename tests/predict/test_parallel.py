"""Parallelism: validation, sharding, and collectives in closed form (alpha-beta).

An AMD Instinct node without published curves (mi300x here: xGMI 448 GB/s per direction, 8 per node, 50 GB/s
scale-out) gets RCCL's ring for all-reduce, all-gather and reduce-scatter and the alpha-beta formula otherwise;
devices with curves are tested in test_collectives.py."""

import pytest

from planner.errors import ConfigError
from planner.hardware.catalog import load_catalog
from planner.hardware.efficiency import load_defaults
from planner.predict.parallel import bus_bytes_per_s, collective_time_s
from planner.workload.parallelism import Parallelism, shard_config, validate
from planner.workload.zoo import resolve


def test_ring_allreduce_inside_a_node():
    # 8 MI300X on xGMI, RCCL's ring (nccl_model.rccl_best): B = 448e9 B/s per direction x 0.8; a 1 GB message is
    # above RCCL's 1 MiB LL limit, so Simple: (17 + 2·7·2.1) us + 2·7/8·M/B
    d, defaults = load_catalog().device("mi300x"), load_defaults()
    m = 1e9
    b = d.scaleup_bytes_per_s * defaults.collective_bandwidth_efficiency
    expected = (17 + 14 * 2.1) * 1e-6 + 2 * 7 / 8 * m / b
    assert collective_time_s("allreduce", m, 8, d, defaults) == pytest.approx(expected)
    # nccl-tests bus bandwidth approaches B as the message grows (latency 46.4 us against 28 ms)
    big = collective_time_s("allreduce", 1e10, 8, d, defaults)
    assert bus_bytes_per_s("allreduce", 1e10, 8, big) == pytest.approx(b, rel=0.01)


def test_allgather_and_alltoall_inside_a_node():
    d, defaults = load_catalog().device("mi300x"), load_defaults()
    b = d.scaleup_bytes_per_s * defaults.collective_bandwidth_efficiency
    for kind in ("allgather", "reducescatter"):
        # RCCL's ring, Simple (4e8 B is above its LL limits) over the 3 of 7 mesh links 4 GPUs use:
        # (17 + 3·2.1) us + (n−1)/n·M/(3/7·B), n = 4
        assert collective_time_s(kind, 4e8, 4, d, defaults) == pytest.approx(
            (17 + 3 * 2.1) * 1e-6 + 0.75 * 4e8 / (b * 3 / 7))
    # all-to-all has no RCCL model here: the alpha-beta formula (n−1)·α + (n−1)/n·M/B
    assert collective_time_s("alltoall", 4e8, 4, d, defaults) == pytest.approx(
        3 * defaults.scaleup_latency_s + 0.75 * 4e8 / b)


def test_groups_across_nodes_are_slower_than_inside():
    d, defaults = load_catalog().device("h100-sxm"), load_defaults()
    inside = collective_time_s("allreduce", 1e9, 8, d, defaults)
    across = collective_time_s("allreduce", 1e9, 16, d, defaults)
    assert across > inside
    assert collective_time_s("allreduce", 1e9, 1, d, defaults) == 0


def test_tp_must_divide_heads_and_experts():
    llama = resolve("llama-2-7b")
    with pytest.raises(ConfigError, match="does not divide the 32 attention heads"):
        validate(Parallelism(tp=3), llama.family, llama.config)
    mix = resolve("mixtral-8x7b")
    with pytest.raises(ConfigError, match="does not divide the 8 experts"):
        validate(Parallelism(ep=3, dp=3), mix.family, mix.config)
    with pytest.raises(ConfigError, match="decoder LMs"):
        validate(Parallelism(tp=2), "vision", resolve("resnet50").config)


def test_sharded_config():
    # llama-2-70b: 64 heads, 8 KV heads, 28672 intermediate, 32000 vocabulary over tp 8
    cfg = shard_config(resolve("llama-2-70b").config, Parallelism(tp=8))
    assert (cfg.num_heads, cfg.num_kv_heads, cfg.intermediate_size, cfg.vocab_size) == (8, 1, 3584, 4000)
    # KV heads fewer than tp are replicated: one per device
    assert shard_config(resolve("llama-2-70b").config, Parallelism(tp=16)).num_kv_heads == 1


def test_experts_are_tensor_sliced_without_expert_parallelism():
    # qwen3-30b-a3b: 128 experts of width 768 (moe_intermediate_size); tp 4 gives each device 768/4 = 192
    # columns of every expert, as vLLM's fused MoE does; with ep 4 each device holds 128/4 = 32 whole experts
    qwen = resolve("qwen3-30b-a3b").config
    tp = shard_config(qwen, Parallelism(tp=4))
    assert (tp.moe_intermediate_size, tp.local_experts) == (192, 128)
    ep = shard_config(qwen, Parallelism(tp=1, ep=4))
    assert (ep.moe_intermediate_size, ep.local_experts) == (768, 32)
    # deepseek-v3: routed experts 2048 wide and one shared expert of 2048 over tp 8: 256 each
    ds = shard_config(resolve("deepseek-v3").config, Parallelism(tp=8))
    assert (ds.moe_intermediate_size, ds.shared_intermediate_size) == (256, 256)


def test_weights_per_device_halve_with_tp_for_models_with_an_expert_width():
    # the bug this guards: experts sized by moe_intermediate_size stayed whole under tp (61.1 GB at tp 1,
    # 59.5 at tp 2); every weight but the replicated norms and router is now split, so tp 2 holds just over half
    from planner.predict import Request, predict
    one, two = (predict(Request("qwen3-30b-a3b", "h200-sxm", gpus=t, tp=t, batch=8)).memory.weights_bytes
                for t in (1, 2))
    assert 0.5 * one <= two < 0.51 * one


def test_every_multi_gpu_server_device_has_a_sourced_scale_out_link_or_says_so():
    # devices sold in 8-GPU servers (DGX A100: eight 200 Gb/s HDR ports for eight GPUs = 25 GB/s each)
    cat = load_catalog()
    assert cat.device("a100-sxm-80gb").scaleout_bytes_per_s == pytest.approx(200e9 / 8)
    assert cat.device("h100-sxm").scaleout_bytes_per_s == pytest.approx(400e9 / 8)
    blank = cat.device("h100-pcie")
    assert blank.scaleout_bytes_per_s is None
    with pytest.raises(ConfigError, match="--scaleout-gbps"):
        collective_time_s("allreduce", 1e9, 16, blank, load_defaults())


def test_scaleout_gbps_replaces_the_catalog_link_and_llama_trains_on_64_a100():
    from planner.predict import Request, predict

    base = dict(model="llama-2-7b", mode="training", gpus=64, seq_len=4096, global_batch=512, micro_batch=1, zero=1,
                mixed_precision="master")  # bf16 weights, fp32 master in the ZeRO-1-sharded optimizer
    # h100-sxm's catalog figure is 50 GB/s = 400 Gb/s per device: stating it changes nothing
    same = predict(Request(device="h100-sxm", **base))
    stated = predict(Request(device="h100-sxm", scaleout_gbps=400, **base))
    assert stated.metrics["step_time_s"] == pytest.approx(same.metrics["step_time_s"])
    assert any("--scaleout-gbps" in n for n in stated.notes)
    # a tenth of the network can only slow the step (the data-parallel all-reduce crosses nodes)
    slow = predict(Request(device="h100-sxm", scaleout_gbps=40, **base))
    assert slow.metrics["step_time_s"] > same.metrics["step_time_s"]
    a100 = predict(Request(device="a100-sxm-80gb", **base))
    assert a100.metrics["step_time_s"] > 0 and a100.fits
    with pytest.raises(ConfigError, match="scaleout-gbps must be in"):
        predict(Request(device="h100-sxm", scaleout_gbps=0, **base))


def test_expert_parallel_ranks_of_a_tp_group_run_only_their_experts_rows():
    # mixtral-8x7b decode at batch 1: T·k = 1 x 2 = 2 routed rows; an expert is 3 matrices of 4096 x 14336 bf16
    # (117,440,512 bytes each). EP within the TP group (tp 2, ep 2): each rank holds all the tokens and runs the
    # ⌈2 / 2⌉ = 1 row routed to its 4 experts: one whole expert, 3 x 117.4 MB. TP without EP: both rows on every
    # rank, each on an expert sliced in half: 2 x 3 x 58.7 MB, the same bytes. EP across replicas (tp 1, ep 2,
    # dp 2): a rank's own token sends its 2 rows out and receives 2 rows for its experts: 2 whole experts.
    from planner.workload.device_graph import device_graph
    from planner.workload.graphs import Workload

    model = resolve("mixtral-8x7b")
    assert shard_config(model.config, Parallelism(tp=2, ep=2)).routed_rows_divisor == 2
    assert shard_config(model.config, Parallelism(tp=1, ep=2, dp=2)).routed_rows_divisor == 1
    assert shard_config(model.config, Parallelism(tp=2)).routed_rows_divisor == 1
    matrix = 4096 * 14336 * 2

    def expert_weight_bytes(tp, ep, dp=1):
        dg = device_graph(model, Workload("decode", 1, context_len=128, dtype="bf16", engine="eager"),
                          Parallelism(tp=tp, ep=ep, dp=dp))
        # the expert GEMMs are the only ops reading over 50 MB (attention and router weights are far smaller)
        return sum(op.count * op.cost.bytes_read for op in dg.layer.ops
                   if op.record.op == "aten.mm.default" and op.cost.bytes_read > 50e6)

    assert expert_weight_bytes(2, 2) == pytest.approx(3 * matrix, rel=1e-3)
    assert expert_weight_bytes(2, 1) == pytest.approx(2 * 3 * matrix / 2, rel=1e-3)
    assert expert_weight_bytes(1, 2, 2) == pytest.approx(2 * 3 * matrix, rel=1e-3)
    # and no rows move within the TP group: no all-to-all there, two per MoE layer across replicas
    from planner.predict.parallel import layer_collectives

    inside = device_graph(model, Workload("decode", 1, context_len=128, dtype="bf16"), Parallelism(tp=2, ep=2))
    across = device_graph(model, Workload("decode", 1, context_len=128, dtype="bf16"), Parallelism(tp=1, ep=2, dp=2))
    assert "expert-parallel all-to-all" not in layer_collectives(inside, 0)
    assert layer_collectives(across, 0)["expert-parallel all-to-all"] == 2 * 32


def test_ep_between_1_and_tp_is_refused_naming_what_is_modelled():
    mix = resolve("mixtral-8x7b")
    with pytest.raises(ConfigError, match=r"--ep 2 below --tp 4 .* give --ep 1 .* or --ep 4 or more"):
        validate(Parallelism(tp=4, ep=2), mix.family, mix.config)


def test_an_infinity_fabric_mesh_gives_a_small_group_only_its_links():
    # MI300X: 8 GPUs in a full mesh, 448 GB/s = 7 links of 64 GB/s per GPU; 2 GPUs share one link, 4 use 3
    from planner.predict import nccl_model

    d, defaults = load_catalog().device("mi300x"), load_defaults()
    b = d.scaleup_bytes_per_s * defaults.collective_bandwidth_efficiency
    for n, links in ((2, 1), (4, 3), (8, 7)):
        expected = nccl_model.rccl_best("allreduce", 1e9, n, b * links / 7).time_s
        assert collective_time_s("allreduce", 1e9, n, d, defaults) == pytest.approx(expected)
