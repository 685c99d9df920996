"""Precision keys of scenario workloads: quant, weights, activations, kv_cache (as the CLI flags)."""

import pytest

from planner.errors import ConfigError
from planner.plan.scenario import loads

TEMPLATE = """name: quantized
workloads:
  - {{name: chat, model: llama-2-7b, {precision} demand_rps: 1,
     buckets: [{{input_len: 512, output_len: 128, share: 1.0}}], slo: {{ttft_s: 1.0, tpot_s: 0.05}}}}
training:
  - {{name: ft, model: gpt2, {precision} tokens: 1.0e6, deadline_days: 7}}
candidates:
  cloud: {{providers: [runpod]}}
"""


def _scenario(precision: str):
    return loads(TEMPLATE.format(precision=precision), "quant.yaml")


def test_precision_keys_compose_into_the_workload_dtype():
    s = _scenario("quant: w4a16, kv_cache: fp8,")
    assert s.workloads[0].dtype == "w4a16,kv=fp8" and s.training[0].dtype == "w4a16,kv=fp8"
    assert _scenario("").workloads[0].dtype == "bf16"
    assert _scenario("dtype: fp16, weights: int4,").workloads[0].dtype == "fp16,weights=int4"


@pytest.mark.parametrize("precision, message", [
    ("quant: w4a17,", r"workloads\[0\]: unknown quantization recipe 'w4a17'"),
    ("quant: w4a16, dtype: fp16,", r"workloads\[0\]: .*not both"),
    ("kv_cache: fp3,", r"workloads\[0\]: unknown kv-cache dtype 'fp3'"),
    ("quant: [w4a16],", r"workloads\[0\]\.quant: expected a non-empty string"),
])
def test_bad_precision_keys_name_the_workload(precision, message):
    with pytest.raises(ConfigError, match=message):
        _scenario(precision)
