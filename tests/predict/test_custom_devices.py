"""A user's own device (the app's Your hardware page, planner.hardware.custom) is predicted on every path:
a vendor no engine lists runs plain PyTorch, vLLM's hardware plugins cover TPUs and accelerators, and a copy
of a profiled device's figures takes that device's profiles (issue 43)."""

import math

import pytest

from planner.errors import ConfigError
from planner.hardware.custom import extend_catalog, shipped_row
from planner.predict.api import Request, compare, engine_for, predict
from planner.predict.context import default_context, with_catalog
from planner.units import band
from planner.workload.engines import default_engine
from planner.workload.zoo import resolve

H100 = shipped_row("device", "h100-sxm")
ACME = {**H100, "id": "acme-x1", "aliases": "", "name": "Acme X1", "vendor": "Acme", "generation": "x",
        "kind": "accelerator", "mem_bw_gb_per_s": "2000", "bf16_tflop_per_s": "500", "fp16_tflop_per_s": "500",
        "fp8_tflop_per_s": "", "int8_tera_op_per_s": "", "tf32_tflop_per_s": ""}
# the same figures from a vendor the engine files list: the vendor only chooses the engine
HABANA = {**ACME, "id": "habana-x1", "name": "Habana X1", "vendor": "Intel (Habana)"}
COPY = {**H100, "id": "my-h100", "aliases": "", "name": "My H100", "generation": "custom"}
TPU = {**ACME, "id": "my-tpu", "name": "My TPU", "vendor": "Google", "kind": "tpu"}


@pytest.fixture(scope="module")
def ctx():
    return with_catalog(default_context(), extend_catalog([ACME, HABANA, COPY, TPU]))


def test_a_custom_accelerator_of_an_unknown_vendor_is_predicted_on_eager_pytorch(ctx):
    llm = predict(Request("llama-3.1-8b", "acme-x1", input_len=1024, output_len=128), ctx)
    assert llm.engine == "eager" and llm.tier == "datasheet"
    # a family never validated (acme x): the datasheet tier's measured error over every family
    group = ctx.bands.group("datasheet", ctx.device("acme-x1"))
    assert group.family == "*" and llm.band_fraction == pytest.approx(math.expm1(group.p90_abs_ln))
    assert "every family" in llm.band_basis
    assert any(n.startswith("tier datasheet:") for n in llm.notes)
    assert any(n.startswith("Acme is a vendor no engine file lists: acme-x1 is assumed to run PyTorch eager")
               for n in llm.notes)
    # no decode step is faster than streaming the weights once at the entered 2,000 GB/s
    assert llm.metrics["tpot_s"] >= llm.memory.weights_bytes / 2000e9
    assert llm.metrics["ttft_s"] > 0 and math.isfinite(llm.metrics["ttft_s"])
    # the vendor only picks the engine: the same figures from Intel (Habana) on eager give the same times
    same = predict(Request("llama-3.1-8b", "habana-x1", input_len=1024, output_len=128, engine="eager"), ctx)
    assert llm.metrics["tpot_s"] == pytest.approx(same.metrics["tpot_s"], rel=1e-12)
    assert llm.metrics["ttft_s"] == pytest.approx(same.metrics["ttft_s"], rel=1e-12)
    cnn = predict(Request("resnet50", "acme-x1"), ctx)
    assert cnn.engine == "eager" and cnn.tier == "datasheet" and cnn.metrics["latency_s"] > 0
    habana = predict(Request("resnet50", "habana-x1"), ctx)
    assert cnn.metrics["latency_s"] == pytest.approx(habana.metrics["latency_s"], rel=1e-12)


def test_the_default_engine_runs_on_the_device():
    assert default_engine("decoder", "inference", "accelerator", vendor="Acme") == "eager"
    assert default_engine("decoder", "inference", "gpu", vendor="Acme") == "eager"  # vLLM lists no Acme GPU
    assert default_engine("decoder", "inference", "tpu", vendor="Google") == "vllm"  # tpu-inference plugin
    assert default_engine("decoder", "inference", "accelerator", vendor="Intel (Habana)") == "vllm"  # vllm-gaudi
    assert default_engine("decoder", "inference", "accelerator", vendor="AWS (Annapurna)") == "vllm"  # vllm-neuron
    assert default_engine("decoder", "inference", "cpu", vendor="Intel") == "eager"
    assert default_engine("vision", "inference", "accelerator", vendor="Acme") == "eager"


def test_a_custom_tpu_serves_llms_on_vllm_and_says_through_its_plugin(ctx):
    name, note = engine_for(Request("llama-3.1-8b", "my-tpu"), resolve("llama-3.1-8b"), ctx.device("my-tpu"))
    assert name == "vllm" and "the default for LLM inference on a TPU (vLLM's hardware plugin)" in note


@pytest.mark.parametrize("engine,message", [
    ("vllm", ("engine 'vllm' does not run on Acme devices (it runs on: nvidia, amd, intel (habana), google, "
              "aws (annapurna)); a vendor no engine file lists runs plain PyTorch: eager, hf-generate")),
    ("compile", "engine 'compile' does not run on accelerator devices (it runs on: gpu, cpu)"),
    ("trtllm", "engine 'trtllm' does not run on accelerator devices"),
])
def test_an_explicit_engine_that_does_not_run_there_is_a_one_line_error(ctx, engine, message):
    with pytest.raises(ConfigError) as err:
        predict(Request("llama-3.1-8b" if engine != "compile" else "resnet50", "acme-x1", engine=engine), ctx)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_explicit_plain_pytorch_engine_runs_on_an_unknown_vendor(ctx):
    p = predict(Request("llama-3.1-8b", "acme-x1", input_len=256, output_len=16, engine="hf-generate"), ctx)
    assert p.engine == "hf-generate" and p.tier == "datasheet"


@pytest.mark.parametrize("batch", [1, 32])
def test_a_copy_of_the_h100_under_another_generation_takes_its_profiles(ctx, batch):
    req = Request("llama-3.1-8b", "h100-sxm", batch=batch, input_len=1024, output_len=128)
    h100 = predict(req, ctx)
    copy = predict(Request("llama-3.1-8b", "my-h100", batch=batch, input_len=1024, output_len=128), ctx)
    # the same chip: the transfer is the identity, so the H100's profile stands with its own tier and band
    assert h100.tier == copy.tier == "published" and copy.band_fraction == h100.band_fraction
    assert any(n.startswith("tier published") and "calibration/h100-sxm/" in n for n in copy.notes)
    for key in ("ttft_s", "tpot_s"):
        lo, hi = band(h100.metrics[key], h100.band_fraction)
        assert lo <= copy.metrics[key] <= hi
        # the same chip, the same profile and power curve: the same time
        assert copy.metrics[key] == pytest.approx(h100.metrics[key], rel=1e-9)


def test_the_datasheet_tier_predicts_the_h100_within_its_band():
    # the H100 with its profiles removed (datasheet tier, unbiased defaults) against the H100 with them
    base = default_context()
    sheet = type(base)(base.catalog, base.defaults, base.power, {})
    for batch in (1, 32):
        req = Request("llama-3.1-8b", "h100-sxm", batch=batch, input_len=1024, output_len=128)
        profiled, datasheet = predict(req, base), predict(req, sheet)
        assert datasheet.tier == "datasheet"
        for key in ("ttft_s", "tpot_s"):
            lo, hi = band(profiled.metrics[key], profiled.band_fraction)
            assert lo <= datasheet.metrics[key] <= hi, (batch, key)


def test_a_comparison_across_tiers_says_so(ctx):
    rows = compare("llama-3.1-8b", ["h100-sxm", "acme-x1"], output_len=16, ctx=ctx, gpus=1)
    assert set(rows["tier"]) == {"published", "datasheet"}
    assert all("devices on different tiers (datasheet, published)" in note or
               "devices on different tiers (published, datasheet)" in note for note in rows["note"])
    one = compare("llama-3.1-8b", ["h100-sxm"], output_len=16, ctx=ctx, gpus=1)
    assert not any("different tiers" in (note or "") for note in one["note"])
