"""planner/serve/steady.py: when a run has run long enough, the rule on hand-made latencies (closed forms).
The defects it fixes are in test_saturation.py."""

import numpy as np
import pytest

from planner.serve import steady


def test_agree_is_ten_percent_or_one_ms():
    # |100 - 111| = 11 <= 0.10 * 111 = 11.1; |100 - 112| = 12 > 11.2
    assert steady.agree(0.100, 0.111) and not steady.agree(0.100, 0.112)
    # |5.0 - 5.9| ms = 0.9 ms <= the 1 ms floor (10% of 5.9 ms is 0.59 ms); |5.0 - 6.1| = 1.1 ms > 1 ms
    assert steady.agree(0.0050, 0.0059) and not steady.agree(0.0050, 0.0061)


def test_constant_latencies_are_settled_and_not_growing():
    n = 40  # quarters of 10 requests
    s = steady.judge(np.arange(n, dtype=float), np.full(n, 0.05), np.full(n, 0.01))
    assert s.settled and not s.growing and s.worst == "" and s.requests == 40
    assert s.last_ttft_s["p50"] == pytest.approx(0.05)


def test_a_slow_warm_up_is_left_out_but_a_later_step_is_not():
    arrival = np.arange(8, dtype=float)  # quarters: requests 0-1 (warm-up), 2-3, 4-5, 6-7
    tpot = np.full(8, 0.01)
    # the warm-up's TTFT of 1 s is left out of the quarters; the whole run (printed) has p50 0.1 s, p90 of
    # [0.1 x 7, 1] at rank 0.9 * 7 = 6.3: 0.1 + 0.3 * (1 - 0.1) = 0.37 s, against 0.1 s in the last quarter
    warm = steady.judge(arrival, np.array([1.0] + [0.1] * 7), tpot)
    assert not warm.settled and "p90 TTFT of the last quarter and the whole run: 100.00 ms vs 370.00 ms" in warm.worst
    # so a warm-up that slow needs more requests; one of a single request in a quarter of 40 passes:
    # whole-run p90 at rank 0.9 * 39 = 35.1 among 39 x 0.1 and one 1.0: 0.1 s
    assert steady.judge(np.arange(40.0), np.array([1.0] + [0.1] * 39), np.full(40, 0.01)).settled
    # a step after the warm-up: quarter 3 at 0.1 s, quarter 4 at 0.2 s -> p50 differ by 100%
    step = steady.judge(arrival, np.array([0.1] * 6 + [0.2] * 2), tpot)
    assert not step.settled and "quarters 3 and 4" in step.worst and step.worst_fraction == pytest.approx(0.5)


def test_growth_is_the_last_quarters_p50_over_twice_the_seconds_p90():
    arrival = np.arange(8, dtype=float)
    tpot = np.full(8, 0.01)
    # quarter 2 = [0.1, 0.2]: p90 = 0.1 + 0.9 * 0.1 = 0.19 s; quarter 4 = [0.38, 0.40]: p50 0.39 > 2 x 0.19 = 0.38
    grown = steady.judge(arrival, np.array([0, 0, 0.1, 0.2, 0.3, 0.3, 0.38, 0.40]), tpot)
    assert grown.growing and grown.last_ttft_s["p50"] == pytest.approx(0.39)
    # quarter 4 = [0.36, 0.38]: p50 0.37 < 0.38
    assert not steady.judge(arrival, np.array([0, 0, 0.1, 0.2, 0.3, 0.3, 0.36, 0.38]), tpot).growing


def test_an_overloaded_run_stops_only_when_growth_and_the_ttft_slo_breach_show():
    def state(settled, growing, last_p90):
        return steady.Steadiness(8000, settled, growing, "", 0.0, {"p50": last_p90 / 2, "p90": last_p90})

    assert steady.done(state(True, False, 0.1), overloaded=False, slo_ttft_s=0.5, slo_stat="p90")
    # overloaded, settled is not enough: the growth must show
    assert not steady.done(state(True, False, 0.1), overloaded=True, slo_ttft_s=None, slo_stat="p90")
    assert steady.done(state(False, True, 0.1), overloaded=True, slo_ttft_s=None, slo_stat="p90")
    assert not steady.done(state(False, True, 0.4), overloaded=True, slo_ttft_s=0.5, slo_stat="p90")
    assert steady.done(state(False, True, 0.6), overloaded=True, slo_ttft_s=0.5, slo_stat="p90")


def test_batches_double_from_1000_to_64000():
    assert list(steady.batches()) == [1000, 2000, 4000, 8000, 16000, 32000, 64000]
    assert list(steady.batches(3, 10)) == [3, 6, 10]


def test_the_warnings_say_overloaded_above_saturation_or_not_steady():
    def state(settled, growing):
        return steady.Steadiness(64000, settled, growing, "p90 TPOT of quarters 3 and 4: 44.59 ms vs 51.64 ms", 0.14,
                                 {"p50": 2.5, "p90": 4.0})

    warnings, notes = steady.messages(state(False, True), True, False, 20.0, 18.86, True)
    assert warnings[0].startswith("overloaded: 20 requests/s offered, above the 18.86 requests/s") and \
        notes[0].startswith("ran 64,000 requests, until the queue's growth showed: p50 TTFT of the last quarter 2.50 s")
    # past saturation but no growth by the cap (the closed loop keeps every copy full; this run did not fill them)
    warnings, notes = steady.messages(state(True, False), True, False, 19.5, 18.86, False)
    assert [w.split(":")[0] for w in warnings] == ["above saturation"] and notes[0].startswith("steady after 64,000")
    warnings, notes = steady.messages(state(False, False), False, True, 10.0, None, False)
    assert warnings == ["not steady: p90 TPOT of quarters 3 and 4: 44.59 ms vs 51.64 ms (leave out --requests to run "
                        "until the latencies settle)"] and notes == []
    warnings, notes = steady.messages(state(False, False), False, False, 10.0, None, False)
    assert warnings[0].startswith("not steady after 64,000 requests (the most run): p90 TPOT")
