"""When a simulated serving run has run long enough: its percentiles have settled, or its queue grows
without bound.

A run that stops too early reports the empty system it started from: llama-3.1-8b on one H100 at 20
requests/s (above the 18.86 requests/s it sustains) shows p90 TTFT 135 ms and every request within a
0.5 s SLO after 1,000 requests, p90 TTFT 7.05 s and 61.9% within it after 10,000. So a run whose
request count the caller leaves open (`Load(requests=None)`, `planner serve` without `--requests`) is
made in batches, each a fresh run of the same seed with twice the requests of the last (FIRST_REQUESTS,
2·FIRST_REQUESTS, ... up to MAX_REQUESTS), until one of these holds:

    Windows.   The requests, in arrival order, are cut into WINDOWS equal windows; the first is the
               warm-up (the system filling from empty) and is left out of the comparison.
    Settled.   The p50 and the p90 of TTFT and of TPOT agree between each pair of successive windows
               after the warm-up, and between the last window and the whole run (the figures printed,
               warm-up included): |a − b| ≤ max(TOLERANCE·max(a, b), FLOOR_S).
    Overload.  The offered rate exceeds the deployment's saturation rate (the closed-loop rate with
               every copy full, planner/serve/sweep.py saturation: the same step-time model and
               scheduler), so the queue grows without bound and no percentile settles. The run is
               extended until that shows: the last window's p50 TTFT exceeds GROWTH times the p90 of
               the first window after the warm-up, and, with a TTFT SLO, the last window's SLO
               statistic of TTFT is past the SLO (so the goodput printed cannot be 100%: the SLO
               fails for the later requests, as it fails for every request of a longer run).
    The cap.   MAX_REQUESTS: the run is reported as it is, with a warning that it did not settle.
               A rate above saturation may keep up that long without its growth showing: the
               saturation run keeps every copy full, preempting, while an open-loop run can stay below
               that fill (llama-3.1-8b at 19.5 requests/s: 64,000 requests, no growth), until a burst
               fills every copy; it is warned of as above saturation, not as overloaded.

A run of a stated request count (`Load(requests=K)`: a benchmark's K, the planner's, the app's) is one
run of K requests, judged and warned of the same way but never lengthened. The warnings and notes call
the windows quarters (WINDOWS = 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_REQUESTS = 1000
"""Requests of a run at a stated rate when the caller states none: the Serving page's default, a plan's
capacity and its check (planner/serve/sweep.py standard_load and run_at_rate), a --configs row. Kept
here, with numpy its only import, so that the app's pages name it without loading the simulator."""
DEFAULT_SEED = 0
"""Seed of the arrival draws when none is given (planner.serve.api.Load.seed)."""
PERCENTILE_METHOD = "linear"
"""How p50, p90, p99 and the CDF are read off the requests' latencies: np.percentile's method, linear
interpolation between the two nearest ranks (numpy's default, as vllm bench serve reads them). Every run
reports them so (planner/serve/metrics.py): `planner serve`, the Serving page, a plan's capacity and its
check; the windows here are compared on the same."""
FIRST_REQUESTS = 1000
"""Requests of the first batch."""
MAX_REQUESTS = 64_000
"""Requests of the last batch at most (1,000 to 64,000 by doubling: 7 runs, 127,000 requests at most)."""
WINDOWS = 4
"""Windows the requests are cut into, in arrival order; the first is the warm-up."""
TOLERANCE = 0.10
"""Relative difference within which two windows' percentiles agree."""
FLOOR_S = 1e-3
"""Absolute difference within which two percentiles agree whatever their size, s."""
GROWTH = 2.0
"""An overloaded run shows its growing queue once the last window's p50 TTFT exceeds GROWTH times the
p90 TTFT of the first window after the warm-up."""
STATS = ("p50", "p90")
_Q = {"p50": 50.0, "p90": 90.0, "p99": 99.0}


@dataclass(frozen=True, slots=True)
class Steadiness:
    """How a run's latencies behave from window to window (module docstring)."""

    requests: int
    """Requests of the run."""
    settled: bool
    """p50 and p90 of TTFT and TPOT agree between successive windows and with the whole run."""
    growing: bool
    """The last window's p50 TTFT exceeds GROWTH times the first measured window's p90 TTFT."""
    worst: str
    """The largest disagreement, in words ("" when none)."""
    worst_fraction: float
    """Its size: |a − b| / max(a, b)."""
    last_ttft_s: dict
    """The last window's TTFT by statistic ("p50", "p90", "p99", "mean"), s (empty when it has none)."""


def _stats(values: np.ndarray) -> dict:
    """{"mean", "p50", "p90", "p99"} of finite `values` (PERCENTILE_METHOD, as metrics.Percentiles)."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return {}
    out = {k: float(np.percentile(values, q, method=PERCENTILE_METHOD)) for k, q in _Q.items()}
    out["mean"] = float(values.mean())
    return out


def agree(a: float, b: float) -> bool:
    """Whether two percentiles agree: |a − b| ≤ max(TOLERANCE·max(a, b), FLOOR_S)."""
    return abs(a - b) <= max(TOLERANCE * max(abs(a), abs(b)), FLOOR_S)


def judge(arrival_s: np.ndarray, ttft_s: np.ndarray, tpot_s: np.ndarray) -> Steadiness:
    """The Steadiness of a run from each request's arrival, TTFT and TPOT (s; NaN where a request has
    none: rejected, or a TPOT of one output token)."""
    arrival_s, ttft_s, tpot_s = (np.asarray(x, dtype=float) for x in (arrival_s, ttft_s, tpot_s))
    order = np.argsort(arrival_s, kind="stable")
    n = int(order.size)
    cuts = [round(i * n / WINDOWS) for i in range(WINDOWS + 1)]
    windows = [order[cuts[i]:cuts[i + 1]] for i in range(1, WINDOWS)]  # the first (warm-up) left out
    settled, worst_fraction = n >= WINDOWS, 0.0
    worst = "" if settled else f"{n} requests, fewer than {WINDOWS} windows"
    for name, values in (("TTFT", ttft_s), ("TPOT", tpot_s)):
        measured = [_stats(values[w]) for w in windows]
        pairs = [(f"quarters {i + 2} and {i + 3}", measured[i], measured[i + 1]) for i in range(len(measured) - 1)]
        pairs.append(("the last quarter and the whole run", measured[-1] if measured else {}, _stats(values)))
        for where, a, b in pairs:
            for stat in STATS:
                if stat not in a or stat not in b:
                    continue
                x, y = a[stat], b[stat]
                if not agree(x, y):
                    settled = False
                    fraction = abs(x - y) / max(abs(x), abs(y))
                    if fraction > worst_fraction:
                        worst = f"{stat} {name} of {where}: {_time(x)} vs {_time(y)}"
                        worst_fraction = fraction
    first, last = (_stats(ttft_s[w]) for w in (windows[0], windows[-1])) if n >= WINDOWS else ({}, {})
    growing = bool(first and last and last["p50"] > GROWTH * first["p90"])
    return Steadiness(n, settled, growing, worst, worst_fraction, last)


def done(s: Steadiness, overloaded: bool, slo_ttft_s: float | None, slo_stat: str) -> bool:
    """Whether a run of the batches may stop (module docstring): settled, or, overloaded, its growth shown."""
    if not overloaded:
        return s.settled
    if not s.growing:
        return False
    return slo_ttft_s is None or s.last_ttft_s.get(slo_stat, 0.0) > slo_ttft_s


def batches(first: int = FIRST_REQUESTS, most: int = MAX_REQUESTS):
    """Request counts of the successive runs: first, 2·first, ... up to `most` (the last may be `most`)."""
    n = min(first, most)
    while True:
        yield n
        if n >= most:
            return
        n = min(2 * n, most)


def _time(seconds: float) -> str:
    return f"{seconds:,.2f} s" if seconds >= 1 else f"{seconds * 1e3:.2f} ms"


def messages(s: Steadiness, overloaded: bool, stated: bool, offered_rps: float | None, saturation_rps: float | None,
             finished: bool) -> tuple[list[str], list[str]]:
    """(warnings, notes) that say whether the run is steady, and how long it ran and why."""
    warnings, notes = [], []
    above = (f"{offered_rps:g} requests/s offered, above the {saturation_rps:.2f} requests/s the deployment sustains "
             "with every copy full (its saturation)") if overloaded else ""
    if overloaded and (s.growing or stated):
        warnings.append(f"overloaded: {above}: the queue grows without bound, so TTFT and goodput are those of these "
                        f"{s.requests:,} requests and worsen as the load lasts")
    elif overloaded:
        warnings.append(f"above saturation: {above}; these {s.requests:,} requests (the most run) kept up, but once a "
                        "burst fills every copy the queue grows without bound")
    if stated:
        if not s.settled and not overloaded:
            warnings.append(f"not steady: {s.worst} (leave out --requests to run until the latencies settle)")
        return warnings, notes
    if overloaded and finished:
        notes.append(f"ran {s.requests:,} requests, until the queue's growth showed: p50 TTFT of the last quarter "
                     f"{_time(s.last_ttft_s['p50'])}, over {GROWTH:g} x p90 of the second")
    elif s.settled:
        notes.append(f"steady after {s.requests:,} requests: in quarters of the run after the first (warm-up), p50 "
                     f"and p90 of TTFT and TPOT agree within {TOLERANCE:.0%} (or {FLOOR_S * 1e3:g} ms)")
    elif not overloaded or not s.growing:
        warnings.append(f"not steady after {s.requests:,} requests (the most run): {s.worst}")
    return warnings, notes
