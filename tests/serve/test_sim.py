"""The event loop against closed forms: one request at a time, M/D/1, Little's law, KV bookkeeping,
and monotonic properties (a higher rate never lowers p90 TTFT, more KV never adds preemptions)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.predict.api import Request
from planner.predict.context import default_context
from planner.serve import load as loads
from planner.serve.api import _step_model
from planner.serve.metrics import summarize
from planner.serve.policies import Sglang, Static, Trtllm, Vllm
from planner.serve.sim import simulate
from planner.workload.zoo import resolve

PROMPT, OUTPUT = 512, 64


@pytest.fixture(scope="module")
def steps():
    ctx = default_context()
    req = Request("llama-3.1-8b", "h100-sxm", input_len=PROMPT, output_len=OUTPUT)
    return _step_model(req, ctx, resolve("llama-3.1-8b"), "vllm", (PROMPT,), (PROMPT, PROMPT + OUTPUT - 1))


def _run(steps, policy, kv_blocks, arrivals, clients=0):
    return simulate(steps, policy, kv_blocks, arrivals.arrival_s, arrivals.input_len, arrivals.output_len, clients)


def test_one_request_at_a_time_is_prefill_then_decode_steps(steps):
    # arrivals 10 s apart, each request done in well under a second: nothing ever queues, so
    # TTFT = prefill of 512 tokens and TPOT = the mean decode step over contexts 512 .. 574
    n = 20
    arrivals = loads.Arrivals(np.arange(n) * 10.0, np.full(n, PROMPT), np.full(n, OUTPUT))
    m = summarize([_run(steps, Vllm(8192, 256, 16), 10_000, arrivals)])
    prefill = steps.linear_s(PROMPT) + steps.attention_s(PROMPT)
    contexts = PROMPT + np.arange(OUTPUT - 1)  # KV tokens before each of the 63 decode steps
    tpot = np.mean([steps.decode(1, c)[0] for c in contexts])
    assert m.ttft_s.mean == pytest.approx(prefill, rel=1e-12)
    assert m.ttft_s.p99 == pytest.approx(prefill, rel=1e-12)
    assert m.tpot_s.mean == pytest.approx(tpot, rel=1e-9)
    assert m.e2e_s.mean == pytest.approx(prefill + (OUTPUT - 1) * tpot, rel=1e-9)
    assert m.preemptions == 0 and m.completed == n


@pytest.mark.parametrize("policy", [Vllm(8192, 256, 16), Static(0, 16, 1, chunked=False, mixed=False)],
                         ids=lambda p: p.name)
def test_a_frontend_delay_adds_to_ttft_and_e2e_and_counts_in_the_system(steps, policy):
    # f = 4 ms in the HTTP server before the scheduler: alone, each request's TTFT and E2E grow by exactly f and
    # its TPOT not at all; N closed-loop clients with no think time keep N requests in the system (f included),
    # so requests/s = N / mean E2E (Little's law with L = N)
    f, n = 0.004, 20
    arrivals = loads.Arrivals(np.arange(n) * 10.0, np.full(n, PROMPT), np.full(n, OUTPUT))
    run = lambda **kw: simulate(steps, policy, 10_000, arrivals.arrival_s, arrivals.input_len,  # noqa: E731
                                arrivals.output_len, **kw)
    plain, late = summarize([run()]), summarize([run(frontend_s=f)])
    assert late.ttft_s.mean == pytest.approx(plain.ttft_s.mean + f, rel=1e-12)
    assert late.e2e_s.mean == pytest.approx(plain.e2e_s.mean + f, rel=1e-12)
    assert late.tpot_s.mean == pytest.approx(plain.tpot_s.mean, rel=1e-12)
    assert late.little_error < 1e-9
    closed = summarize([run(clients=4, frontend_s=f)])
    assert closed.requests_per_s == pytest.approx(4 / closed.e2e_s.mean, rel=0.05)
    assert closed.little_error < 1e-9 and closed.mean_concurrency <= 4 * (1 + 1e-12)
    # a request too long for the cache is rejected: it counts in neither the mean E2E nor the time in the system
    long = loads.Arrivals(np.arange(4) * 10.0, np.array([PROMPT, 4000, PROMPT, PROMPT]), np.full(4, OUTPUT))
    rejected = summarize([simulate(steps, Vllm(8192, 256, 16), 100, long.arrival_s, long.input_len,
                                   long.output_len, frontend_s=f)])
    assert rejected.rejected == 1 and rejected.little_error < 1e-9


@pytest.mark.parametrize("policy", [Vllm(8192, 256, 16), Sglang(8192, 256, 16), Trtllm(8192, 256, 16),
                                    Static(0, 16, 1, chunked=False, mixed=False)], ids=lambda p: p.name)
@pytest.mark.parametrize("rate", [5.0, 40.0, 400.0])
def test_littles_law_holds_on_every_run(steps, policy, rate):
    # L (time-average in the system, integrated by the loop) = λ W (completions per s x mean E2E)
    arrivals = loads.poisson(rate, 600, loads.fixed_lengths(PROMPT, OUTPUT), seed=3)
    m = summarize([_run(steps, policy, 4000, arrivals)])
    assert m.completed == 600
    assert m.little_error < 0.02
    assert m.mean_concurrency == pytest.approx(m.requests_per_s * m.e2e_s.mean, rel=0.02)


def test_md1_matches_pollaczek_khinchine(steps):
    # one slot (max_seqs 1), one output token: each request is served by one prefill step of fixed
    # length S, so the queue is M/D/1 and the mean wait is Wq = ρ S / (2 (1 − ρ)) (P-K with Var = 0)
    service = steps.linear_s(PROMPT) + steps.attention_s(PROMPT)
    rho = 0.6
    arrivals = loads.poisson(rho / service, 60_000, loads.fixed_lengths(PROMPT, 1), seed=11)
    m = summarize([_run(steps, Vllm(8192, 1, 16), 10_000, arrivals)])
    wait = m.ttft_s.mean - service
    expected = rho * service / (2 * (1 - rho))  # 0.6 S / 0.8 = 0.75 S
    assert wait == pytest.approx(expected, rel=0.05)


def test_kv_blocks_balance_and_preemption_recomputes(steps):
    # a KV cache of 400 blocks (6,400 tokens) against 64 requests of 576 tokens at once: preemptions
    # happen, every block is returned at the end, and every request still completes
    arrivals = loads.Arrivals(np.zeros(64), np.full(64, PROMPT), np.full(64, OUTPUT))
    run = _run(steps, Vllm(8192, 256, 16), 400, arrivals)
    assert run.preemptions.sum() > 0
    assert np.isfinite(run.finish_s).all()
    assert run.step_kv_blocks.max() <= 400
    assert run.step_kv_blocks[-1] == 0
    assert run.prefill_tokens > 64 * PROMPT  # recomputation prefilled some prompts twice


def test_trtllm_reserves_and_never_preempts(steps):
    arrivals = loads.Arrivals(np.zeros(64), np.full(64, PROMPT), np.full(64, OUTPUT))
    run = _run(steps, Trtllm(8192, 256, 16), 400, arrivals)
    assert run.preemptions.sum() == 0
    # 400 blocks hold floor(400 / ceil(576 / 16)) = floor(400 / 36) = 11 requests at once
    assert run.step_running.max() <= 11


def test_sequence_too_long_for_the_cache_is_rejected(steps):
    arrivals = loads.Arrivals(np.array([0.0, 1.0]), np.array([PROMPT, 4000]), np.array([OUTPUT, OUTPUT]))
    run = _run(steps, Vllm(8192, 256, 16), 100, arrivals)  # 1,600 tokens of KV
    assert np.isfinite(run.finish_s[0]) and np.isnan(run.finish_s[1])


@settings(max_examples=int(__import__('os').environ.get('PLANNER_EXAMPLES', 12)), deadline=None)
@given(low=st.floats(1.0, 60.0), factor=st.floats(1.05, 3.0), seed=st.integers(0, 50),
       policy=st.sampled_from([Vllm(8192, 256, 16), Sglang(8192, 256, 16), Trtllm(8192, 256, 16)]))
def test_higher_rate_never_lowers_p90_ttft(steps, low, factor, seed, policy):
    # the same requests (the same seed: gaps are the same unit draws scaled by 1/rate), only faster
    lengths = loads.fixed_lengths(PROMPT, OUTPUT)
    slow = summarize([_run(steps, policy, 3000, loads.poisson(low, 300, lengths, seed))])
    fast = summarize([_run(steps, policy, 3000, loads.poisson(low * factor, 300, lengths, seed))])
    # not pathwise exact at light load: an arrival that lands later in a running step waits less for
    # it, so p90 may move the "wrong" way by less than one step (one decode step: about 7 ms here);
    # anything beyond that would be a real inversion
    one_step = steps.decode(1, PROMPT)[0]
    assert fast.ttft_s.p90 >= slow.ttft_s.p90 - one_step


@settings(max_examples=12, deadline=None)
@given(blocks=st.integers(40, 2000), extra=st.integers(1, 2000), seed=st.integers(0, 50))
def test_reserving_the_output_never_preempts_whatever_the_kv(steps, blocks, extra, seed):
    # TensorRT-LLM's GUARANTEED_NO_EVICT: a request starts only with KV for its whole output, so no
    # amount of KV memory (more or less) can cause a preemption
    arrivals = loads.poisson(200.0, 200, loads.fixed_lengths(PROMPT, OUTPUT), seed)
    for kv in (blocks, blocks + extra):
        assert _run(steps, Trtllm(8192, 256, 16), kv, arrivals).preemptions.sum() == 0


@pytest.mark.parametrize("policy", [Vllm(8192, 256, 16), Sglang(8192, 256, 16)], ids=lambda p: p.name)
@pytest.mark.parametrize("blocks", [200, 400, 750, 1500, 3000])
def test_more_kv_never_adds_preemptions(steps, policy, blocks):
    # on-demand allocation: twice the KV never adds preemptions (ShareGPT lengths, 4 seeds, 300
    # requests each at 100 requests/s, an overload that keeps the cache full)
    lengths = loads.preset_lengths("sharegpt")

    def preemptions(kv):
        return sum(_run(steps, policy, kv, loads.poisson(100.0, 300, lengths, seed)).preemptions.sum()
                   for seed in range(4))

    assert preemptions(2 * blocks) <= preemptions(blocks)


def test_on_demand_allocation_is_not_monotone_path_by_path(steps):
    # The pathwise form of the property is false for vLLM's algorithm, as it is in vLLM: with 80 blocks
    # two 512-token prompts (32 blocks each) are admitted and grow to 36 blocks each (72 <= 80): no
    # preemption; with 97 blocks a third is admitted (96), and the three cannot all grow (108 > 97), so
    # the latest admitted is preempted, recomputed, re-admitted, preempted again. Kept as a test so a
    # change of this behaviour is noticed.
    arrivals = loads.poisson(200.0, 200, loads.fixed_lengths(PROMPT, OUTPUT), 0)
    assert _run(steps, Vllm(8192, 256, 16), 80, arrivals).preemptions.sum() == 0
    assert _run(steps, Vllm(8192, 256, 16), 97, arrivals).preemptions.sum() > 0


def test_prefix_cache_hits_skip_that_share_of_each_prompt(steps):
    # a hit rate of 0.5 on 512-token prompts: each request prefills 512 - floor(0.5 x 512) = 256 tokens,
    # attending to the 256 cached ones: TTFT = L(256) + A(512) - A(256) one request at a time
    n = 10
    arrivals = loads.Arrivals(np.arange(n) * 10.0, np.full(n, PROMPT), np.full(n, OUTPUT))
    run = _run(steps, Vllm(8192, 256, 16, prefix_hit_rate=0.5), 10_000, arrivals)
    assert run.prefill_tokens == n * 256
    expected = steps.linear_s(256) + steps.attention_s(512) - steps.attention_s(256)
    assert summarize([run]).ttft_s.mean == pytest.approx(expected, rel=1e-12)


LONG = 2000  # output tokens of a request that keeps decoding while another arrives


def _late_arrival(steps, policy):
    """Request A (512 + 2,000 tokens) at 0; request B (512 + 64) half way through A's first decode step.
    Returns (run, prefill s, B's arrival s, A's decode step times d_i for i = 1, 2, ... (context 512 + i - 1))."""
    prefill = steps.linear_s(PROMPT) + steps.attention_s(PROMPT)
    d = [steps.decode(1, PROMPT + i)[0] for i in range(200)]
    t_b = prefill + 0.5 * d[0]
    arrivals = loads.Arrivals(np.array([0.0, t_b]), np.array([PROMPT, PROMPT]), np.array([LONG, OUTPUT]))
    return _run(steps, policy, 10_000, arrivals), prefill, t_b, d


@pytest.mark.parametrize("interval", [1, 7, 30])
def test_sglang_recv_interval_holds_an_arrival_until_the_nth_decode_step(steps, interval):
    # SGLang --scheduler-recv-interval N: after A's prefill step (weight 1000) the counter is reset at the next
    # take; each decode step weighs 1, so new requests are taken after decode step N. B arrives during decode
    # step 1 and is prefilled alone (SGLang runs prefill steps alone) right after step N:
    #     TTFT_B = prefill_A + d_1 + ... + d_N + prefill_B - t_B
    # (N = 1, the engine's default: taken after the step it arrived in)
    run, prefill, t_b, d = _late_arrival(steps, Sglang(8192, 256, 16, recv_interval=interval))
    expected = prefill + sum(d[:interval]) + prefill - t_b
    assert run.first_token_s[1] - run.arrival_s[1] == pytest.approx(expected, rel=1e-9)
    assert run.first_token_s[0] == pytest.approx(prefill, rel=1e-12)
    assert summarize([run]).little_error < 1e-9


@pytest.mark.parametrize("iters", [1, 5, 40])
def test_trtllm_batch_wait_holds_a_prompt_for_t_steps_under_the_token_ratio(steps, iters):
    # TensorRT-LLM batch_wait_timeout_iters T, batch_wait_max_tokens_ratio 0.8 of 8,192 = 6,553.6 tokens: B's
    # 512-token prompt + A's 1 decode token = 513 stay under it, so B is held at the T step formations after it
    # arrives (decode steps 2 .. T + 1 of A, alone) and scheduled at the next, a mixed step of B's prefill and
    # A's decode at context 512 + T + 1:
    #     TTFT_B = prefill_A + d_1 + ... + d_(T+1) + step([(512, 0)], 1 decode, context 512 + T + 1) - t_B
    run, prefill, t_b, d = _late_arrival(steps, Trtllm(8192, 256, 16, batch_wait_iters=iters,
                                                       batch_wait_tokens_ratio=0.8))
    mixed = steps.step([(PROMPT, 0)], 1, PROMPT + iters + 1)[0]
    expected = prefill + sum(d[:iters + 1]) + mixed - t_b
    assert run.first_token_s[1] - run.arrival_s[1] == pytest.approx(expected, rel=1e-9)
    # a ratio the one prompt already reaches (513 >= 0.05 x 8,192 = 409.6): no wait, as with batch wait off
    free, *_ = _late_arrival(steps, Trtllm(8192, 256, 16, batch_wait_iters=iters, batch_wait_tokens_ratio=0.05))
    off, *_ = _late_arrival(steps, Trtllm(8192, 256, 16))
    assert free.first_token_s[1] == pytest.approx(off.first_token_s[1], rel=1e-12)
    assert off.first_token_s[1] - t_b == pytest.approx(d[0] - 0.5 * d[0] + steps.step([(PROMPT, 0)], 1, PROMPT + 1)[0],
                                                       rel=1e-9)


@pytest.mark.parametrize("policy", [Sglang(8192, 256, 16, recv_interval=30),
                                    Trtllm(8192, 256, 16, batch_wait_iters=40, batch_wait_tokens_ratio=0.8)],
                         ids=lambda p: p.name)
def test_littles_law_and_closed_loop_throughput_hold_with_server_waits(steps, policy):
    arrivals = loads.poisson(20.0, 400, loads.fixed_lengths(PROMPT, OUTPUT), seed=5)
    m = summarize([_run(steps, policy, 4000, arrivals)])
    assert m.completed == 400 and m.little_error < 0.02
    # N closed-loop clients with no think time: requests/s = N / mean E2E
    requests = loads.Arrivals(np.zeros(200), np.full(200, PROMPT), np.full(200, OUTPUT))
    closed = summarize([_run(steps, policy, 4000, requests, clients=16)])
    assert closed.requests_per_s == pytest.approx(16 / closed.e2e_s.mean, rel=0.05)


def test_sglang_recv_counter_keeps_its_phase_through_a_decode_stretch(steps):
    # two closed-loop clients: A (512 + 2,000) and B (512 + 64) start together and share one prefill step (weight
    # 1000: the counter restarts at the next take). B's 63 decode steps end its request; with N = 30 SGLang has
    # taken (nothing) after steps 30 and 60, so its counter stands at 3 when C is sent, and C waits 27 more decode
    # steps of A alone (contexts 575 .. 601) before its prefill step: TTFT_C = Σ d(575 + j), j < 27, + prefill.
    # With N = 1, C is taken at once: TTFT_C = prefill.
    prefill = steps.linear_s(PROMPT) + steps.attention_s(PROMPT)
    requests = loads.Arrivals(np.zeros(3), np.full(3, PROMPT), np.array([LONG, OUTPUT, OUTPUT]))
    for interval, waits in ((30, 27), (1, 0)):
        run = _run(steps, Sglang(8192, 256, 16, recv_interval=interval), 10_000, requests, clients=2)
        expected = sum(steps.decode(1, PROMPT + OUTPUT - 1 + j)[0] for j in range(waits)) + prefill
        assert run.first_token_s[2] - run.arrival_s[2] == pytest.approx(expected, rel=1e-9)


def test_trtllm_batch_wait_counts_only_steps_that_held_a_schedulable_prompt(steps):
    # max_seqs 2: A (long) and B (64 tokens) run, C waits for a seat from time 0. TensorRT-LLM waits only when its
    # scheduler scheduled context requests, so no step counts while C has no seat; once B finishes, C is held the
    # full T = 10 decode steps of A, then prefilled in a mixed step with A's decode
    requests = loads.Arrivals(np.zeros(3), np.full(3, PROMPT), np.array([LONG, OUTPUT, OUTPUT]))
    run = _run(steps, Trtllm(8192, 2, 16, batch_wait_iters=10, batch_wait_tokens_ratio=0.9), 10_000, requests)
    context = PROMPT + OUTPUT - 1  # A's context at the first step after B's last
    held = sum(steps.decode(1, context + j)[0] for j in range(10))
    mixed = steps.step([(PROMPT, 0)], 1, context + 10)[0]
    assert run.first_token_s[2] - run.finish_s[1] == pytest.approx(held + mixed, rel=1e-9)
