"""What a serving run measured, as a benchmark client reports it.

Per request (as `vllm bench serve` defines them):
    TTFT = first token − arrival
    TPOT = (completion − first token) / (output tokens − 1), requests of more than one output token
    E2E  = completion − arrival
Inter-token latency (ITL): every decode step's duration, once per token it produced (a step of B
decodes gives B gaps), so its median is the typical gap between two tokens of one stream and its
tail shows the stalls that prefills cause.
Throughput over the run's span, from the first arrival to the last completion: output tokens/s, total
(prompt + output) tokens/s, requests/s. Goodput: completed requests per second whose TTFT and TPOT
both meet the SLOs given (vllm bench serve --goodput).
Little's law: L = λ·W, with L the time-average of the requests in the system (integrated by the
event loop), λ the completions per second and W the mean E2E; `little_error` is |L − λW| / L.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.serve.sim import Run
from planner.serve.steady import PERCENTILE_METHOD

TIMELINE_POINTS = 200
"""Points kept of the KV-use and preemption timeline."""
CDF_POINTS = 201
"""Quantiles kept of each request's TTFT and TPOT: 0%, 0.5%, ..., 100% (the CDF, at most 201 numbers)."""


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Mean and percentiles of a latency, s (None when no request has it)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None

    @staticmethod
    def of(values: np.ndarray, weights: np.ndarray | None = None) -> Percentiles:
        values = np.asarray(values, dtype=float)
        if weights is not None:
            keep = weights > 0
            values, weights = values[keep], np.asarray(weights, dtype=float)[keep]
        if values.size == 0:
            return Percentiles(None, None, None, None)
        if weights is None:
            p = np.percentile(values, [50, 90, 99], method=PERCENTILE_METHOD)
            return Percentiles(float(values.mean()), float(p[0]), float(p[1]), float(p[2]))
        order = np.argsort(values)
        v, cum = values[order], np.cumsum(weights[order])
        at = lambda q: float(v[min(len(v) - 1, np.searchsorted(cum, q * cum[-1]))])  # noqa: E731
        return Percentiles(float(np.average(values, weights=weights)), at(0.5), at(0.9), at(0.99))

    def get(self, stat: str) -> float | None:
        """"mean", "p50", "p90" or "p99"."""
        return getattr(self, stat)


@dataclass(frozen=True, slots=True)
class ServeMetrics:
    """Summary of one or more model copies' runs."""

    requests: int
    completed: int
    rejected: int
    """Requests longer than a copy's whole KV cache (never scheduled)."""
    duration_s: float
    ttft_s: Percentiles
    tpot_s: Percentiles
    itl_s: Percentiles
    e2e_s: Percentiles
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    goodput_rps: float | None
    """Completed requests per second meeting every SLO given; None without SLOs."""
    slo_met_fraction: float | None
    preemptions: int
    mean_concurrency: float
    little_error: float
    kv_mean_fraction: float
    """Time-average share of the KV blocks in use (first copy)."""
    kv_peak_fraction: float
    timeline: tuple[tuple[float, float, int, int, int], ...]
    """(time s, KV share in use, running, waiting, preemptions so far) of the first copy, ≤ 200 points."""
    energy_j: float
    output_tokens: int
    steady_requests_per_s: float = 0.0
    """Completions per second between the 10th and the 60th percentile completion: the rate while the
    run is in its steady middle (a closed loop's drain at the end left out)."""
    ttft_quantiles_s: tuple[float, ...] = ()
    """The CDF of the requests' TTFT, s: its value at the quantiles 0, 1/200, ..., 1 (CDF_POINTS of them,
    computed as p50/p90/p99 are, so entry 100 is p50 and entry 180 is p90); () when no request has one."""
    tpot_quantiles_s: tuple[float, ...] = ()
    """The CDF of the requests' TPOT, s, at the same quantiles."""


def summarize(runs: list[Run], slo_ttft_s: float | None = None, slo_tpot_s: float | None = None) -> ServeMetrics:
    """ServeMetrics of the runs of every model copy over the same span."""
    cat = lambda name: np.concatenate([getattr(r, name) for r in runs])  # noqa: E731
    arrival, first, finish = cat("arrival_s"), cat("first_token_s"), cat("finish_s")
    inp, out = cat("input_len"), cat("output_len")
    ok = np.isfinite(finish)
    completed = int(ok.sum())
    start = float(arrival[np.isfinite(arrival)].min()) if arrival.size else 0.0
    span = float(finish[ok].max() - start) if completed else 0.0
    ttft, e2e = (first - arrival)[ok], (finish - arrival)[ok]
    multi = ok & (out > 1)
    tpot = (finish - first)[multi] / (out[multi] - 1)
    gaps, weights = [], []
    for r in runs:
        if r.step_end_s.size > 1:
            gaps.append(np.diff(r.step_end_s) / r.step_count[1:])  # an entry of k steps: its mean step
            weights.append(r.step_decodes[1:])
    itl = Percentiles.of(np.concatenate(gaps), np.concatenate(weights)) if gaps else Percentiles(None, None, None, None)
    goodput = met = None
    if slo_ttft_s is not None or slo_tpot_s is not None:
        good = np.ones(completed, dtype=bool)
        if slo_ttft_s is not None:
            good &= ttft <= slo_ttft_s
        if slo_tpot_s is not None:
            per = np.where(out[ok] > 1, (finish - first)[ok] / np.maximum(1, out[ok] - 1), 0.0)
            good &= per <= slo_tpot_s
        met = float(good.mean()) if completed else 0.0
        goodput = float(good.sum()) / span if span > 0 else 0.0
    integral = sum(r.in_system_s for r in runs)
    concurrency = integral / span if span > 0 else 0.0
    little = (completed / span) * float(e2e.mean()) if span > 0 and completed else 0.0
    error = abs(concurrency - little) / concurrency if concurrency > 0 else 0.0
    kv_mean, kv_peak, timeline = _kv(runs[0])
    return ServeMetrics(
        requests=int(arrival.size), completed=completed, rejected=int(arrival.size - completed), duration_s=span,
        ttft_s=Percentiles.of(ttft), tpot_s=Percentiles.of(tpot), itl_s=itl, e2e_s=Percentiles.of(e2e),
        output_tokens_per_s=float(out[ok].sum()) / span if span > 0 else 0.0,
        total_tokens_per_s=float((out[ok] + inp[ok]).sum()) / span if span > 0 else 0.0,
        requests_per_s=completed / span if span > 0 else 0.0, goodput_rps=goodput, slo_met_fraction=met,
        preemptions=int(sum(int(r.preemptions.sum()) for r in runs)), mean_concurrency=concurrency,
        little_error=error, kv_mean_fraction=kv_mean, kv_peak_fraction=kv_peak, timeline=timeline,
        energy_j=sum(r.energy_j for r in runs), output_tokens=int(out[ok].sum()),
        steady_requests_per_s=_steady(np.sort(finish[ok])), ttft_quantiles_s=_cdf(ttft), tpot_quantiles_s=_cdf(tpot))


def _cdf(values: np.ndarray) -> tuple[float, ...]:
    """`values` at the CDF_POINTS quantiles 0, 1/200, ..., 1 (PERCENTILE_METHOD, as Percentiles);
    () for no values. Kept instead of the values themselves: a run of 200,000 requests stays small."""
    if values.size == 0:
        return ()
    quantiles = np.linspace(0.0, 100.0, CDF_POINTS)
    return tuple(float(v) for v in np.percentile(values, quantiles, method=PERCENTILE_METHOD))


def _steady(done: np.ndarray) -> float:
    """Completions per second between the 10th and 60th percentile completion (0 for fewer than 10)."""
    if done.size < 10:
        return 0.0
    a, b = int(0.1 * done.size), int(0.6 * done.size)
    span = done[b] - done[a]
    return (b - a) / span if span > 0 else 0.0


def _kv(run: Run) -> tuple[float, float, tuple]:
    """(time-average KV share, peak KV share, timeline) of one copy."""
    ends = run.step_end_s
    if ends.size == 0 or run.kv_blocks <= 0:
        return 0.0, 0.0, ()
    share = run.step_kv_blocks / run.kv_blocks
    widths = np.diff(ends, prepend=ends[0])
    mean = float(np.average(share, weights=widths)) if widths.sum() > 0 else float(share.mean())
    pick = np.unique(np.linspace(0, ends.size - 1, min(TIMELINE_POINTS, ends.size)).astype(int))
    timeline = tuple((float(ends[i]), float(share[i]), int(run.step_running[i]), int(run.step_waiting[i]),
                      int(run.step_preemptions[i])) for i in pick)
    return mean, float(share.max()), timeline


def finite_or_none(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None
