"""A user's own model (`package.module:function`): its batch is found, scaled and re-captured
(planner/workload/user_model.py); where it cannot be found, a batch other than 1 is refused. The tests
of the counts import only what existed before the rule, so that they ran (and failed) without it."""

import pytest
import torch

from planner.errors import ConfigError
from planner.workload.counting import count
from planner.workload.graphs import Workload, build_graph
from planner.workload.zoo import resolve


def _flop(spec: str, batch: int, mode: str = "forward") -> float:
    return count(build_graph(resolve(spec, allow_code=True), Workload(mode, batch, dtype="fp32")).graph).total.flop


@pytest.mark.parametrize("batch", [1, 3, 8, 100])
def test_flop_of_a_linear_model_is_batch_times_its_flop_at_batch_1(batch):
    # Linear 64 -> 32, no bias, example x [8, 64]: 2·B·64·32 = B x 4,096 FLOP
    assert _flop("custom_model:linear_64_to_32", 1) == 2 * 64 * 32 == 4_096
    assert _flop("custom_model:linear_64_to_32", batch) == batch * 4_096


def test_training_flop_scales_with_the_batch():
    # forward X·Wᵀ 2·B·64·32 plus backward dW = dYᵀ·X 2·32·B·64: B x 8,192 matmul FLOP
    def matmul(batch: int) -> float:
        graph = build_graph(resolve("custom_model:linear_64_to_32", allow_code=True),
                            Workload("training", batch, dtype="fp32")).graph
        return sum(c.cost.flop for c in count(graph).ops if c.category == "matmul")

    assert matmul(2) == 2 * 8_192 and matmul(40) == 40 * 8_192


def test_the_example_batch_is_dim_0_of_its_inputs_and_the_default():
    from planner.workload.user_model import default_batch, example_of

    model = resolve("custom_model:linear_64_to_32", allow_code=True)
    example = example_of(model)
    assert (example.batch, example.takes, example.item, example.by_argument) == (8, "samples", (64,), False)
    assert default_batch(model) == 8
    assert default_batch(resolve("gpt2")) == 1 and example_of(resolve("gpt2")) is None


def test_scaled_inputs_repeat_the_example_rows_on_a_real_device():
    model = resolve("custom_model:linear_64_to_32", allow_code=True)
    with torch.device("cpu"):
        _, (x,) = model.factory(10)
    # 10 rows from the example's 8: row i is row i mod 8
    assert x.shape == (10, 64) and torch.equal(x[8], x[0]) and torch.equal(x[9], x[1])


def test_a_function_with_a_batch_parameter_is_called_with_it():
    from planner.workload.user_model import example_of

    model = resolve("custom_model:token_classifier", allow_code=True)
    example = example_of(model)
    assert (example.batch, example.takes, example.item, example.by_argument) == (8, "tokens", (128,), True)
    with torch.device("meta"):
        assert model.factory(3)[1][0].shape == (3, 128)
    # every op of embedding -> mean over S -> Linear scales with B: FLOP at 2 is a quarter of FLOP at 8
    assert _flop("custom_model:token_classifier", 8) == 4 * _flop("custom_model:token_classifier", 2) > 0


def test_what_the_model_takes_labels_its_batch():
    from planner.workload.user_model import example_of

    labels = {spec: example_of(resolve(f"custom_model:{spec}", allow_code=True)).label(4)
              for spec in ("linear_64_to_32", "token_classifier", "tiny_cnn", "causal_attention")}
    assert labels == {"linear_64_to_32": "batch 4 samples of shape [64]",
                      "token_classifier": "batch 4 sequences of 128 tokens",
                      "tiny_cnn": "batch 4 images of 3x32x32 (CxHxW)",
                      # q [B, 8, 64, 32]: 8 "channels" is not an image
                      "causal_attention": "batch 4 samples of shape [8, 64, 32]"}


def test_a_model_without_a_batch_dimension_runs_its_example_and_refuses_other_batches():
    from planner.workload.user_model import default_batch, example_of

    model = resolve("custom_model:masked", allow_code=True)
    example = example_of(model)
    assert example.batch is None and example.why == "dim 0 of its example input tensors differs (2, 16)"
    assert default_batch(model) == 1
    # batch 1 is the example as given: x·xᵀ [2, 16, 8] @ [2, 8, 16] = 2·2·16·16·8 = 8,192 FLOP, masked_fill 512
    assert _flop("custom_model:masked", 1) == 8_192 + 512
    with pytest.raises(ConfigError, match=r"cannot run 'custom_model:masked' at batch 4: the batch dimension .* "
                                          r"\(dim 0 of its example input tensors differs \(2, 16\)\)"):
        _flop("custom_model:masked", 4)
