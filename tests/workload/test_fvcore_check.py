"""fvcore cross-check: ours equals 2x fvcore's on the ops both count (matmul, conv), within 1%."""

import pytest

from planner.workload.fvcore_check import compare


@pytest.mark.parametrize("model_id", ["resnet50", "bert-base"])
def test_ours_is_twice_fvcore_on_shared_ops(run_captured, model_id):
    wg, counts = run_captured(model_id, mode="inference")
    result = compare(wg, counts)
    assert result.fvcore_compared_flop > 0
    assert result.ratio == pytest.approx(1.0, abs=0.01)


def test_fvcore_refuses_training_with_a_clear_error(run_captured):
    from planner.errors import UnsupportedError

    wg, counts = run_captured("gpt2", mode="training", seq_len=32)
    with pytest.raises(UnsupportedError, match="forward passes only"):
        compare(wg, counts)
