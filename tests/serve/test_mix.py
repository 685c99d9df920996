"""A length mix of fixed-length buckets (planner.serve.load.mix_lengths, Load.mix): the shares drawn
converge to the stated ones, one seed gives one sample, a bad row is one line naming it, and a run
under a mix of one bucket is the run of those fixed lengths."""

import math

import numpy as np
import pytest

from planner.errors import ConfigError
from planner.predict import Request
from planner.serve.api import Load, serve
from planner.serve.load import MAX_LEN_TOKENS, MAX_MIX_BUCKETS, mix_lengths, poisson

MIX = ((512, 128, 0.7), (1024, 256, 0.2), (4096, 32, 0.1))


def one_line_error(call, *needles) -> str:
    with pytest.raises(ConfigError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    return message


def test_the_drawn_shares_converge_to_the_stated_ones():
    # 100,000 draws: the share of bucket i has standard error sqrt(p (1 - p) / n), at most
    # sqrt(0.25 / 100,000) = 0.0016; 0.01 is more than 6 standard errors
    n = 100_000
    inputs, outputs = mix_lengths(MIX).sample(n, np.random.default_rng(3))
    assert inputs.dtype == np.int64 and outputs.dtype == np.int64 and len(inputs) == n
    pairs = list(zip(inputs.tolist(), outputs.tolist()))
    for i, o, share in MIX:
        assert pairs.count((i, o)) / n == pytest.approx(share, abs=0.01)
    assert set(pairs) == {(i, o) for i, o, _ in MIX}  # every request is one bucket's, input with its own output


def test_the_summary_sides_are_the_share_weighted_moments():
    # input mean 0.7 * 512 + 0.2 * 1024 + 0.1 * 4096 = 358.4 + 204.8 + 409.6 = 972.8 tokens
    lengths = mix_lengths(MIX)
    assert lengths.name == "mix" and lengths.input_len is None and lengths.buckets == MIX
    assert lengths.input.mean_tokens == pytest.approx(972.8)
    var = 0.7 * (512 - 972.8) ** 2 + 0.2 * (1024 - 972.8) ** 2 + 0.1 * (4096 - 972.8) ** 2
    assert lengths.input.std_tokens == pytest.approx(math.sqrt(var))
    assert (lengths.input.min_tokens, lengths.input.max_tokens) == (512, 4096)
    assert (lengths.output.min_tokens, lengths.output.max_tokens) == (32, 256)
    one_line_error(lambda: lengths.input.sample(3, np.random.default_rng(0)), "drawn alone")


def test_one_seed_one_sample():
    a = poisson(2.0, 500, mix_lengths(MIX), seed=11)
    b = poisson(2.0, 500, mix_lengths([list(row) for row in MIX]), seed=11)  # a list of lists is the same mix
    c = poisson(2.0, 500, mix_lengths(MIX), seed=12)
    assert np.array_equal(a.input_len, b.input_len) and np.array_equal(a.output_len, b.output_len)
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert not np.array_equal(a.input_len, c.input_len)


def test_a_single_bucket_is_fixed_lengths():
    inputs, outputs = mix_lengths([(300, 40, 1.0)]).sample(50, np.random.default_rng(0))
    assert set(inputs.tolist()) == {300} and set(outputs.tolist()) == {40}


@pytest.mark.parametrize("mix, needles", [
    ([(512, 128, 0.7), (0, 256, 0.3)], ("length mix row 2", "input tokens", "got 0")),
    ([(512, 128, 0.7), (1024, 2.5, 0.3)], ("length mix row 2", "output tokens", "2.5")),
    ([(512, 128, 0.7), (1024, MAX_LEN_TOKENS + 1, 0.3)], ("length mix row 2", "output tokens")),
    ([(512, 128, 1.5)], ("length mix row 1", "share", "1.5")),
    ([(512, 128, 0.0), (1024, 256, 1.0)], ("length mix row 1", "share must be above 0")),
    ([(512, 128, float("nan"))], ("length mix row 1", "share")),
    ([(512, 128, 0.7), (1024, 256)], ("length mix row 2", "needs (input tokens, output tokens, share)")),
    ([(512, 128, 0.7), "1024,256,0.3"], ("length mix row 2",)),
    ([(512, 128, 0.6), (1024, 256, 0.3)], ("length mix: shares add up to 0.9, not 1",)),
    ([(True, 128, 1.0)], ("length mix row 1", "input tokens")),  # a bool is not a token count
    ([], ("1 to 64 rows",)),
    ("512,128,1", ("1 to 64 rows",)),
    ([(1, 1, 1 / (MAX_MIX_BUCKETS + 1))] * (MAX_MIX_BUCKETS + 1), ("1 to 64 rows",)),
])
def test_a_bad_mix_is_one_line_naming_the_row(mix, needles):
    one_line_error(lambda: mix_lengths(mix), *needles)


REQ = Request("llama-3.1-8b", "h100-sxm", gpus=1, tp=1, input_len=1024, output_len=256)


def test_a_run_under_a_one_bucket_mix_is_the_fixed_lengths_run():
    fixed = serve(REQ, Load(rate_rps=4.0, requests=200))
    mixed = serve(REQ, Load(rate_rps=4.0, requests=200, mix=((1024, 256, 1.0),)))
    assert mixed.metrics.ttft_s.p90 == pytest.approx(fixed.metrics.ttft_s.p90, rel=1e-12)
    assert mixed.metrics.tpot_s.p90 == pytest.approx(fixed.metrics.tpot_s.p90, rel=1e-12)
    assert "length mix 1,024 + 256 tokens x 100%" in mixed.load


def test_a_run_under_a_mix_serves_its_buckets():
    # 70% of 128 and 30% of 256 output tokens: 0.7 * 128 + 0.3 * 256 = 166.4 tokens a request on average
    run = serve(REQ, Load(rate_rps=2.0, requests=400, mix=((512, 128, 0.7), (1024, 256, 0.3))))
    m = run.metrics
    assert m.completed == 400 and m.rejected == 0
    assert m.output_tokens / 400 == pytest.approx(166.4, rel=0.1)


@pytest.mark.parametrize("load, needles", [
    (Load(rate_rps=1.0, requests=10, mix=((512, 128, 1.0),), lengths="sharegpt"), ("a length preset", "not both")),
    (Load(rate_rps=1.0, requests=10, mix=((512, 128, 0.5), (64, 0, 0.5))), ("length mix row 2", "output tokens")),
    (Load(rate_rps=1.0, requests=10, mix=((512, 128, 1.0),), client="vllm-bench-serve", range_ratio=0.5),
     ("--range-ratio", "length mix")),
])
def test_bad_mixed_loads_are_one_line(load, needles):
    one_line_error(lambda: serve(REQ, load), *needles)


def test_a_bucket_past_a_learned_position_table_names_its_row():
    # gpt2 has 1,024 learned positions: 1,000 + 100 tokens overflow them
    req = Request("gpt2", "h100-sxm", gpus=1, tp=1, input_len=128, output_len=16)
    one_line_error(lambda: serve(req, Load(rate_rps=1.0, requests=10, mix=((128, 16, 0.5), (1000, 100, 0.5)))),
                   "length mix row 2", "1024 positions")
