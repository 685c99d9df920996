"""Predictions: closed forms, memory fit, invariants, tiers and rows used, the API."""

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.predict import Request, compare, default_context, predict, request_from_row
from planner.predict.memory import kv_bytes_per_token
from planner.predict.timing import op_rows, stage_times
from planner.workload.device_graph import device_graph
from planner.workload.graphs import Workload
from planner.workload.zoo import resolve


def test_llama_2_7b_decode_on_a100_is_memory_bound_and_at_least_weights_over_bandwidth():
    # 13.2e9 B (every weight but the embedding) / 2.039e12 B/s = 6.48 ms is the floor of a decode step
    p = predict(Request("llama-2-7b", "a100-sxm-80gb", batch=1, input_len=128, output_len=2))
    assert p.metrics["tpot_s"] >= 13.2e9 / 2.039e12
    ctx = default_context()
    dg = device_graph(resolve("llama-2-7b"), Workload("decode", 1, context_len=128))
    a100 = ctx.catalog.device("a100-sxm-80gb")
    [stage] = stage_times(dg, a100, ctx.efficiency(a100), ctx.power)
    assert stage.bound_s["memory"] > stage.bound_s["compute"]


def test_llama_2_70b_does_not_fit_one_h100_and_fits_two_with_tp():
    alone = predict(Request("llama-2-70b", "h100-sxm", batch=1))
    assert not alone.fits
    # 68.98e9 parameters x 2 B = 138 GB of weights against 80 GiB x 0.9 usable
    assert alone.memory.shortfall_bytes > 138e9 - 80 * 2**30 * 0.9 - 1
    assert "short by" in " ".join(alone.notes)
    pair = predict(Request("llama-2-70b", "h100-sxm", gpus=2, tp=2, batch=1))
    assert pair.fits


def test_kv_cache_bytes_per_token():
    # 2 · layers · kv_heads · head_dim · bytes: llama-3.1-8b bf16 = 2·32·8·128·2 = 131,072 B
    dg = device_graph(resolve("llama-3.1-8b"), Workload("prefill", 1, 16))
    assert kv_bytes_per_token(dg) == 2 * 32 * 8 * 128 * 2 == 131_072
    p = predict(Request("llama-3.1-8b", "h100-sxm", batch=4, input_len=1000, output_len=24))
    assert p.memory.kv_cache_bytes == 4 * 1024 * 131_072


def test_more_tensor_parallel_devices_never_raise_weight_memory():
    weights = [predict(Request("llama-2-70b", "h100-sxm", gpus=t, tp=t)).memory.weights_bytes for t in (1, 2, 4, 8)]
    assert weights == sorted(weights, reverse=True)


@settings(max_examples=20, deadline=None)
@given(bw=st.floats(1.0, 8.0), flops=st.floats(1.0, 8.0),
       case=st.sampled_from([("llama-2-7b", "decode"), ("llama-2-7b", "prefill"), ("resnet50", "forward")]))
def test_more_bandwidth_or_flops_never_slower(bw, flops, case):
    ctx = default_context()
    model_id, mode = case
    h100 = ctx.catalog.device("h100-sxm")
    faster = replace(h100, mem_bytes_per_s=h100.mem_bytes_per_s * bw,
                     peak_flop_per_s={k: v * flops for k, v in h100.peak_flop_per_s.items()})
    w = Workload(mode, 4, 256 if mode == "prefill" else None, context_len=256 if mode == "decode" else None)
    dg = device_graph(resolve(model_id), w)
    eff = ctx.efficiency(h100)
    base = sum(s.time_s for s in stage_times(dg, h100, eff, ctx.power))
    quick = sum(s.time_s for s in stage_times(dg, faster, eff, ctx.power))
    assert quick <= base * (1 + 1e-12)


def test_per_op_times_and_energies_add_up_to_the_totals():
    ctx = default_context()
    dg = device_graph(resolve("llama-2-7b"), Workload("prefill", 2, 256))
    h100 = ctx.catalog.device("h100-sxm")
    eff = ctx.efficiency(h100)
    [stage] = stage_times(dg, h100, eff, ctx.power)
    rows = op_rows(dg, h100, eff, ctx.power)
    # eager prefill of 2 x 256 tokens waits on the host's launches (846 kernel ops x 22.5 us = 19.0 ms
    # plus the views, against 16.3 ms of kernels): the wait is the step's time no op row holds
    waiting = stage.bound_s["launch"]
    assert waiting > 0
    assert sum(r.time_s * r.count for r in rows) + waiting == pytest.approx(stage.time_s, rel=1e-9)
    assert sum(r.energy_j * r.count for r in rows) == pytest.approx(stage.energy_j, rel=1e-9)
    assert sum(stage.bound_s.values()) == pytest.approx(stage.time_s, rel=1e-9)


def test_every_prediction_reports_tier_and_catalog_rows():
    p = predict(Request("llama-2-7b", "h100-sxm", batch=8))
    d = p.as_dict()
    # vLLM (the default engine for LLM serving) runs the kernels of the published H100 profile
    # its band: the wider of the profile's held-back kernel p90 and the measured end-to-end p90 of the published
    # tier on NVIDIA Hopper (hardware_specs/efficiency/measured_bands.json): exp(p90 |ln|) - 1
    ctx = default_context()
    kernels = ctx.profiles["h100-sxm"].raw["held_out"]["p90_abs_error"]
    hopper = ctx.bands.group("published", ctx.device("h100-sxm"))
    assert hopper.family == "nvidia hopper"
    assert d["tier"] == "published" and d["band_fraction"] == pytest.approx(max(kernels, math.expm1(hopper.p90_abs_ln)))
    assert "nvidia hopper" in d["band_basis"]
    assert p.notes[1].startswith("tier published: https://github.com/ai-dynamo/aiconfigurator")
    assert any(r.startswith("devices.csv:h100-sxm") for r in d["catalog_rows"])
    assert any(r.startswith("instances.csv:") for r in d["catalog_rows"])
    lo, hi = d["ttft_range_s"]
    assert lo < d["ttft_s"] < hi


def test_inference_json_keys():
    d = predict(Request("llama-2-7b", "h100-sxm", batch=2)).as_dict()
    for key in ("model", "device", "gpus", "mode", "tier", "fits", "memory_bytes_per_gpu", "energy_j",
                "cost_usd_per_h", "batch", "ttft_s", "tpot_s", "latency_s", "throughput_tokens_per_s"):
        assert key in d, key
    d = predict(Request("resnet50", "l4", batch=8)).as_dict()
    assert "throughput_samples_per_s" in d and "usd_per_thousand_samples" in d


def test_training_json_keys_and_relations():
    p = predict(Request("llama-2-7b", "h100-sxm", "training", gpus=8, seq_len=2048, micro_batch=1, global_batch=64,
                        zero=1, train_tokens=1e9))
    d = p.as_dict()
    for key in ("step_time_s", "tokens_per_s", "samples_per_s", "mfu", "memory_bytes_per_gpu", "energy_j"):
        assert key in d, key
    # tokens/s = global batch x sequence / step time; 0 < MFU < 1
    assert d["tokens_per_s"] == pytest.approx(64 * 2048 / d["step_time_s"])
    assert 0 < d["mfu"] < 1
    assert d["time_to_train_s"] == pytest.approx(-(-1e9 // (64 * 2048)) * d["step_time_s"])


def test_zero_stages_shrink_training_memory():
    mem = [predict(Request("llama-2-7b", "h100-sxm", "training", gpus=8, seq_len=1024, zero=z)).memory for z in range(4)]
    # 16 B/param at ZeRO-0; optimizer, then gradients, then weights are divided by dp = 8
    assert [m.optimizer_bytes for m in mem][1] == pytest.approx(mem[0].optimizer_bytes / 8)
    assert mem[2].gradient_bytes == pytest.approx(mem[0].gradient_bytes / 8)
    assert mem[3].weights_bytes == pytest.approx(mem[0].weights_bytes / 8)
    totals = [m.total_bytes for m in mem]
    assert totals == sorted(totals, reverse=True)


def test_full_recompute_trades_time_for_memory():
    none = predict(Request("llama-2-7b", "h100-sxm", "training", gpus=8, seq_len=2048, zero=3))
    full = predict(Request("llama-2-7b", "h100-sxm", "training", gpus=8, seq_len=2048, zero=3, recompute="full"))
    assert full.memory.activation_bytes < none.memory.activation_bytes
    assert full.metrics["step_time_s"] > none.metrics["step_time_s"]


def test_batch_auto_picks_a_fitting_batch_with_the_best_throughput():
    auto = predict(Request("llama-2-7b", "l4", batch="auto", input_len=512, output_len=128))
    assert auto.fits and auto.metrics["batch"] > 1
    one = predict(Request("llama-2-7b", "l4", batch=1, input_len=512, output_len=128))
    assert auto.metrics["throughput_tokens_per_s"] > one.metrics["throughput_tokens_per_s"]


def test_onprem_site_pricing():
    p = predict(Request("llama-2-7b", "h100-sxm", batch=8, site="us-virginia-colo", utilization=0.5))
    assert p.cost.kind == "onprem" and p.cost.capex_usd > 0


def test_configs_rows():
    req = request_from_row({"id": "a", "model": "gpt2", "device": "l4", "batch": "4", "input_len": "64"})
    assert req.batch == 4 and req.input_len == 64
    from planner.errors import ConfigError
    with pytest.raises(ConfigError, match="unknown key"):
        request_from_row({"model": "gpt2", "device": "l4", "bacth": 4})


def test_compare_one_row_per_device_with_fit_first():
    frame = compare("llama-2-7b", ["h100-sxm", "l4", "mi300x", "v100-sxm2-32gb"], batch=4, input_len=256, output_len=64)
    assert set(frame["device"]) == {"h100-sxm", "l4", "mi300x", "v100-sxm2-32gb"}
    v100 = frame[frame["device"] == "v100-sxm2-32gb"].iloc[0]
    assert "bf16" in v100["note"]  # no bf16 on Volta: a reason, not a number
    assert frame["fits"].iloc[0]


def test_compare_skipping_groups_that_do_not_fit_gives_the_rows_of_predicting_each(monkeypatch):
    """compare checks a tensor-parallel group's memory before timing it (api._fits) and skips it when a wider
    group follows; the rows equal those of predicting every group in turn: a group that fits, none that fits
    (the widest is reported), a device whose wider groups raise after a narrower one did not fit (tpu-v4: its
    row is that narrower prediction), a device without the dtype (t4, v100: the error)."""
    import planner.predict.api as api

    devices = ["h100-sxm", "l4", "a10g", "t4", "v100-sxm2-32gb", "tpu-v4", "mi300x", "l40s"]
    cases = [("llama-2-7b", 512, 512, 128), ("llama-3.1-70b", 64, 1024, 256), ("llama-2-7b", 8, 256, 64)]
    skipped = []
    real_fits = api._fits
    monkeypatch.setattr(api, "_fits", lambda *a: skipped.append(real_fits(*a)) or skipped[-1])
    with_skips = [compare(m, devices, batch=b, input_len=i, output_len=o) for m, b, i, o in cases]
    monkeypatch.setattr(api, "_fits", lambda *a: None)  # every group predicted, as before the check
    every = [compare(m, devices, batch=b, input_len=i, output_len=o) for m, b, i, o in cases]
    assert skipped.count(False) >= 10  # the check did skip groups
    for a, b in zip(with_skips, every):
        assert a.equals(b)
    assert every[0].set_index("device").loc["tpu-v4", "fits"] == False  # noqa: E712 (a numpy bool)


def test_in_turn_gives_the_last_prediction_before_the_first_error(monkeypatch):
    """api._in_turn: the row of predicting every group in order, where some were skipped: the skipped ones
    are predicted now; the last prediction before the first error is kept, with that error."""
    import planner.predict.api as api
    from planner.errors import UnsupportedError

    def fake(req, ctx, model):
        if req == "raises":
            raise UnsupportedError("first error")
        return f"predicted {req}"

    monkeypatch.setattr(api, "predict", fake)
    # A skipped, B predicted (did not fit), then the group that raised "later": B's prediction, "later"
    assert api._in_turn([("A", None), ("B", "B's")], None, None, "later") == ("B's", "later")
    # A skipped and predicted now, then a skipped group that raises first: A's prediction, its error
    assert api._in_turn([("A", None), ("raises", None), ("C", "C's")], None, None, "later") == \
        ("predicted A", "first error")
    assert api._in_turn([], None, None, "later") == (None, "later")


def test_energy_per_job_with_pue_and_carbon_at_the_regional_intensity():
    ctx = default_context()
    site = ctx.catalog.site("us-virginia-colo")
    p = predict(Request("llama-3.1-8b", "h100-sxm", batch=8, site="us-virginia-colo"))
    m = p.metrics
    # kWh per 1M tokens = J/token x 1e6 x PUE / 3.6e6; carbon = kWh x the site's grid intensity
    assert m["kwh_per_million_output_tokens"] == pytest.approx(m["j_per_output_token"] * 1e6 * site.pue / 3.6e6)
    assert m["carbon_kg_per_million_output_tokens"] == pytest.approx(m["kwh_per_million_output_tokens"]
                                                                     * site.carbon_kg_per_kwh)
    train = predict(Request("gpt2", "h100-sxm", "training", gpus=8, seq_len=1024, train_tokens=1e9,
                            site="us-virginia-colo"))
    assert train.metrics["kwh_per_training_run"] == pytest.approx(train.metrics["energy_to_train_j"] * site.pue / 3.6e6)


def test_cloud_carbon_uses_the_instance_region_and_says_pue_is_missing():
    p = predict(Request("llama-3.1-8b", "a100-sxm-40gb", batch=8, instance="a2-highgpu-8g"))
    # gcp:us-central1 grid intensity from carbon.csv
    assert p.metrics["carbon_kg_co2e_per_kwh"] == default_context().catalog.carbon_kg_per_kwh["gcp:us-central1"]
    assert any("PUE" in n for n in p.notes)


def test_committed_pricing_is_on_demand_less_the_sourced_discount():
    ctx = default_context()
    inst = ctx.catalog.instance("a2-highgpu-8g")
    p = predict(Request("llama-3.1-8b", "a100-sxm-40gb", batch=8, instance="a2-highgpu-8g", pricing="committed_1y"))
    # GCP 1-year resource-based CUD: 37% off (discounts.csv)
    assert p.cost.usd_per_h == pytest.approx(inst.price_usd_per_h["on_demand"] * (1 - 0.37))
    from planner.errors import ConfigError
    with pytest.raises(ConfigError, match="no committed_1y price"):
        predict(Request("llama-3.1-8b", "h100-sxm", batch=8, instance="runpod:8x H100 SXM (secure):secure-cloud",
                        pricing="committed_1y"))


def test_training_without_micro_batch_picks_the_largest_that_fits_and_divides():
    # resnet50, 8 x H100, global batch 3,200: 400 images per replica. Micro-batch 400 needs about 19 GB
    # (activations ~44 MB per image), well under 77 GB usable, so the whole replica batch is one
    # micro-batch with no accumulation (it once ran 400 micro-batches of 1 at MFU 2.3%).
    from planner.predict import Request, predict

    p = predict(Request("resnet50", "h100-sxm", mode="training", gpus=8, global_batch=3200))
    assert p.metrics["micro_batch"] == 400 and p.metrics["microbatches"] == 1 and p.fits
    assert "tokens_per_s" not in p.metrics and p.metrics["samples_per_s"] > 0
    # llama-3.1-8b at seq 8192 on 8 x H100 with ZeRO-1: 16 sequences per replica cannot all fit at once;
    # the choice divides 16, fits, and the next divisor up does not fit
    req = dict(mode="training", gpus=8, global_batch=128, seq_len=8192, zero=1, recompute="full",
               mixed_precision="master")  # bf16 weights, fp32 master sharded by ZeRO-1 (autocast's fp32 weights do not fit)
    auto = predict(Request("llama-3.1-8b", "h100-sxm", **req))
    micro = auto.metrics["micro_batch"]
    assert 16 % micro == 0 and auto.fits and auto.metrics["microbatches"] == 16 // micro
    if micro < 16:
        assert not predict(Request("llama-3.1-8b", "h100-sxm", micro_batch=micro * 2, **req)).fits
    assert any("accumulation" in n for n in auto.notes)


def test_a_model_copy_worked_out_once_serves_every_dp_price_and_utilization():
    """_llm keeps what one model copy does (planner/predict/inference.py, _COPIES) for other dp, prices and
    utilizations of the same layout: each prediction equals the one made with that memo empty, dp only
    multiplies the throughput (2 copies: 2x), and a site's price does not leak into a cloud one."""
    from planner.predict import inference

    base = dict(batch=8, input_len=512, output_len=64)
    asks = [Request("llama-3.1-8b", "h100-sxm", gpus=1, **base), Request("llama-3.1-8b", "h100-sxm", gpus=2, **base),
            Request("llama-3.1-8b", "h100-sxm", gpus=2, pricing="spot", **base)]
    warm = [predict(r).as_dict() for r in asks]  # the second and third reuse the first's copy
    fresh = []
    for r in asks:
        inference._COPIES.clear()
        fresh.append(predict(r).as_dict())
    assert warm == fresh
    one, two = warm[0], warm[1]
    assert (two["ttft_s"], two["tpot_s"]) == (one["ttft_s"], one["tpot_s"])
    assert two["throughput_tokens_per_s"] == pytest.approx(2 * one["throughput_tokens_per_s"], rel=1e-12)
    assert warm[2]["cost_basis"] != warm[1]["cost_basis"] or warm[2]["cost_usd_per_h"] != warm[1]["cost_usd_per_h"]


def test_ops_shared_between_graphs_are_timed_once_and_alike():
    """Device graphs of other layouts share their equal ops (planner/workload/device_graph.py, _interned), and
    the timing keeps each op's time per device (planner/predict/timing.py, _OP_TIMES): a prediction made
    after another layout's equals the one made with every memo and graph cache empty."""
    from planner.predict import inference, timing
    from planner.workload.device_graph import _OPS, clear_graph_caches, device_graph
    from planner.workload.graphs import Workload
    from planner.workload.parallelism import Parallelism
    from planner.workload.zoo import resolve

    model = resolve("llama-3.1-8b")
    work = Workload("decode", 4, context_len=256)
    one, two = device_graph(model, work, Parallelism(tp=1)), device_graph(model, work, Parallelism(tp=2))
    # ops on the unsharded hidden size (the RMSNorms, the residual adds) are equal at widths 1 and 2, and
    # each equal op is one object in both graphs
    shared = {id(op.record) for op in one.layer.ops} & {id(op.record) for op in two.layer.ops}
    equal = {(op.record, op.category, op.cost) for op in one.layer.ops} & \
        {(op.record, op.category, op.cost) for op in two.layer.ops}
    assert len(shared) == len(equal) > 0 and _OPS

    asks = [Request("llama-3.1-8b", "h100-sxm", gpus=g, batch=4, input_len=256, output_len=32) for g in (2, 1)]
    warm = [predict(r).as_dict() for r in asks]
    fresh = []
    for r in asks:
        inference._COPIES.clear()
        timing._OP_TIMES.clear()
        timing._PART_TIMES.clear()
        timing._STAGES.clear()
        clear_graph_caches()
        fresh.append(predict(r).as_dict())
    assert warm == fresh


def test_training_names_its_loss_and_counts_its_bytes_in_closed_form():
    # gpt2 at micro-batch 8, seq 1024 under amp: N = 8·1024 = 8,192 positions, V = 50,257 logits each.
    # Per element of the N·V logits: the bf16 -> fp32 cast reads 2 B and writes 4 (6), log_softmax reads
    # and writes fp32 (8), nll_loss's backward writes the fp32 gradient (4), log_softmax's backward reads
    # the gradient and its output and writes (12), the cast back reads 4 and writes 2 (6): 36 B, so
    # 36 · 8,192 · 50,257 = 14.82 GB (nll_loss forward's few kB are below the rounding)
    p = predict(Request("gpt2", "h100-sxm", mode="training", batch=8, seq_len=1024, dtype="bf16"))
    [note] = [n for n in p.notes if n.startswith("loss ")]
    assert "next-token cross entropy" in note and "4 loss kernels and 2 casts" in note
    assert f"{36 * 8192 * 50257 / 1e9:.2f} GB per micro-batch" in note
    # a vision model's objective is found outside a decoder's `last` part too; an encoder's is named
    vision = predict(Request("resnet50", "h100-sxm", mode="training", batch=8))
    assert any(n.startswith("loss cross entropy of the class logits") and "4 loss kernels" in n for n in vision.notes)
    encoder = predict(Request("bert-base", "h100-sxm", mode="training", batch=8, seq_len=128))
    assert any(n.startswith("loss the mean square") and "counted" not in n for n in encoder.notes)


def test_tp_that_fits_is_the_smallest_wider_group_dividing_the_devices():
    from planner.predict.api import tp_that_fits

    # Llama 3.1 70B: 141 GB of bf16 weights; an H100 holds 80 GiB x 0.9 = 77.3 GB: tp 2 (70.6 GB each) fits
    assert tp_that_fits(Request("llama-3.1-70b", "h100-sxm", gpus=8, output_len=8)) == 2
    assert tp_that_fits(Request("llama-3.1-70b", "h100-sxm", output_len=8)) == 2  # no --gpus: tp 2 on 2 devices
    # 6 devices: tp 4 and 8 do not divide them, tp 2 does; 3 devices: no tp above 1 divides them
    assert tp_that_fits(Request("llama-3.1-70b", "h100-sxm", gpus=6, output_len=8)) == 2
    assert tp_that_fits(Request("llama-3.1-70b", "h100-sxm", gpus=3, output_len=8)) is None
    # Llama 3.1 405B: 811 GB of weights, 101 GB per device at tp 8, above an L4's 24 GB
    assert tp_that_fits(Request("llama-3.1-405b", "l4", gpus=8, output_len=8)) is None


def test_train_tokens_count_the_workloads_own_unit():
    # a CNN trains on images (one per sample), an LM on tokens (the sequence of each sample)
    cnn = predict(Request("resnet50", "h100-sxm", "training", global_batch=256, train_tokens=1.28e6))
    assert cnn.metrics["train_unit"] == "images"
    assert cnn.metrics["time_to_train_s"] == pytest.approx(-(-1.28e6 // 256) * cnn.metrics["step_time_s"])
    lm = predict(Request("gpt2", "h100-sxm", "training", seq_len=128, global_batch=8, train_tokens=1e6))
    assert lm.metrics["train_unit"] == "tokens"
