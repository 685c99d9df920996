"""The time a calibration may take and whether its machine is quiet enough: the budget's reserve for
the fit and leave-one-out, the process's own start-up counted against it, and the busy-machine probes
(their coefficient of variation, the hypervisor's stolen time). Numbers in, seconds and ratios out."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from planner.errors import ConfigError

PROBES = ({"kind": "gemm", "dtype": "fp32", "layout": "nt", "m": 256, "n": 256, "k": 256},
          {"kind": "add", "dtype": "fp32", "bytes": 2**22, "warm": True})
"""Fixed points measured again at the start and at the end of every run (not plan entries: they are not
in the profile): a compute-bound GEMM of 34 MFLOP and a memory-bound add over 4 MiB, each a few ms."""
PROBE_ROUNDS = 3
"""Rounds of the probes at each end of a run: 6 times per probe in a whole run, 2 x 3 x ~0.05 s."""
BUSY_CV = 0.10
"""The coefficient of variation of a probe's repeated times above which the machine is called busy.
Measured with benchmarks/calibrate_busy.py on the 2-core development VM (which other jobs share, load
average 1-6 during the runs): the largest probe CV per trial was 1.1-2.5% with no added load in 3 trials of
4 (the fourth caught a burst of the VM's other jobs: 194%); beside one busy-loop process 92-218% in all 9
trials (a GEMM's two threads share the cores with it, some rounds and not others). Beside two busy loops it
was 2-4% in 4 trials of 4 when the VM was otherwise quiet: an even load on every core slows the probes
steadily, and a coefficient of variation cannot see it. 10% lies well above the quiet figures."""


def variation(rounds: list[list[float]]) -> float:
    """The largest coefficient of variation (sample standard deviation / mean) over the probes of
    `rounds` (one list of times per round, one time per probe); 0 with fewer than two rounds.
    E.g. [[1, 10], [3, 10]]: the first probe's CV is sqrt(2) / 2 = 0.707, the second's 0."""
    if len(rounds) < 2:
        return 0.0
    worst = 0.0
    for times in zip(*rounds):
        mean = sum(times) / len(times)
        if mean > 0:
            worst = max(worst, statistics.stdev(times) / mean)
    return worst


def _steal_ticks() -> int | None:
    """CPU time stolen by the hypervisor so far (/proc/stat), in clock ticks; None off Linux."""
    try:
        fields = open("/proc/stat").readline().split()
        return int(fields[8]) if fields[0] == "cpu" and len(fields) > 8 else None
    except OSError:
        return None


LOO_MAX_POINTS = 400
"""Most points a calibration's leave-one-out judges (a seeded sample, round-robin over the model keys:
planner/calibration/loo.py); the profile's `leave_one_out` says how many it judged of how many."""
LOO_SHARE = 0.05
"""Share of the budget leave-one-out may take, at most LOO_MAX_S: 30 s of the default 600 s. At 0.025 s
a point (1,431 points on a full GEMM grid; 1-6 ms below 400 points; benchmarks/calibrate_fit_speed.py on
the 2-core VM) that judges every point of the sample; a GEMM grid with holes takes up to ~0.1 s a point
on a busy host, and the deadline then cuts the sample short."""
LOO_MAX_S = 30.0
FIT_S_PER_POINT = 1.4e-4
"""Seconds of the ceilings and one fit of the model per measured point: 0.20 s for 1,431 points, 0.036 s
for 400 (benchmarks/calibrate_fit_speed.py, the 2-core development VM, other jobs running)."""
FIT_FIXED_S = 3.0
"""Seconds kept for the rest of the end of a run whatever its size: the first fit's imports and catalog
load (~1 s), the end probes (~0.25 s idle) and writing the profile (~0.1 s), with room for a busy host."""
MIN_LOO_S = 2.0
"""Leave-one-out gets at least min(MIN_LOO_S, LOO_SHARE x budget) even when the budget is spent (a resumed
run whose earlier runs used it up): a profile always records some band, the overrun bounded."""


def reserve_s(points: int, budget_s: float) -> float:
    """Seconds of `budget_s` kept back from measuring for what comes after it, for a plan of `points`:
    the fit (10x its measured cost per point, for a busy host), FIT_FIXED_S, and leave-one-out's share.
    E.g. 1,674 points and 600 s: 3 + 10 x 1.4e-4 x 1,674 + 30 = 35.3 s; 60 s: 3 + 2.34 + 3 = 8.3 s."""
    return FIT_FIXED_S + 10 * FIT_S_PER_POINT * points + loo_seconds(budget_s)


def loo_seconds(budget_s: float) -> float:
    """Seconds leave-one-out may take in a run of `budget_s`: LOO_SHARE of it, at most LOO_MAX_S."""
    return min(LOO_MAX_S, LOO_SHARE * budget_s)


def process_age_s() -> float:
    """Seconds since this process started (Linux /proc; 0 elsewhere): the interpreter's start-up and
    imports count against the budget of the command that ran them."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in ticks since boot
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return min(max(uptime - started, 0.0), 600.0)


class BusyMachineError(ConfigError):
    """The busy-machine probes varied more than BUSY_CV between repeats: no profile was written."""
