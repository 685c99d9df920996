"""Leave-one-out of a fresh calibration profile within a deadline: the same errors as
planner/hardware/fit_report.py, on a bounded, seeded sample of the points.

fit_report refits the whole efficiency model once per point. That is quadratic in the number of points,
and a GEMM grid cut short by the budget has holes that every refit fills from a Delaunay mesh: on the
2-core development VM 477 points took 170 s and a full 600 s run's 1,400 points about 5 minutes
(benchmarks/calibrate_fit_speed.py). Two changes make it fit a budget without changing any error it
reports:

- a point left out changes only the curve of its own model key (gemm:fp32, mem:add, ...), so each refit
  fits that key's measurements alone (the others' curves are not read): the same error, bit for bit,
  as fit_report's whole-profile refit;
- the points are taken in a seeded order, round-robin over the model keys (every kind is judged
  however early the deadline comes), up to `max_points`, until `deadline_s` on `clock`. The report
  states how many were judged (`n`) of how many could be (`eligible`), and the seconds it took.

With `max_points` at least the number of points and no deadline, the report is fit_report's (tested).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable

import numpy as np

from planner.hardware.profile import Profile, ProfileModel, _features, profile_device
from planner.hardware.profile_table import measurement_rows

SKIPPED_KINDS = ("launch", "view", "h2d")
"""Kinds with no efficiency curve (fit_report judges none of them)."""


def _stats(values: list[float]) -> dict:
    a = np.abs(np.asarray(values))
    return {"n": len(values), "median_abs_error": float(np.median(a)) if len(a) else float("nan"),
            "p90_abs_error": float(np.percentile(a, 90)) if len(a) else float("nan")}


def sample_order(keys: list[str], seed: int = 0) -> list[int]:
    """Indices 0..len(keys)-1 in the order leave-one-out judges them: each key's indices shuffled with
    `seed`, then taken round-robin over the keys (keys in order of first appearance), so a prefix of
    any length spreads over every key. E.g. keys [a, a, a, b] -> one of a's, b's, then a's other two."""
    rng = random.Random(seed)
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    for members in groups.values():
        rng.shuffle(members)
    order: list[int] = []
    queues = list(groups.values())
    depth = 0
    while len(order) < len(keys):
        order.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return order


def leave_one_out(raw_profile: dict, max_points: int | None = None, deadline_s: float = math.inf,
                  clock: Callable[[], float] = time.perf_counter, seed: int = 0) -> dict:
    """Leave-one-out errors of the efficiency model on a profile's own measurements, within a deadline.

    Error = predicted time / measured time - 1 for a point predicted from a model fitted to the others
    (fit_report's definition). At most `max_points` points (None: all) are judged, in `sample_order`,
    and none is started once `clock()` has passed `deadline_s` (seconds on `clock`). Returns fit_report's
    {"n", "median_abs_error", "p90_abs_error", "interior", "by_kind"} plus "eligible" (points that could
    be judged), "max_points", "seed" and "seconds" (on `clock`).
    """
    from planner.hardware.efficiency import load_defaults

    began = clock()
    profile = Profile(raw_profile["device_id"], raw_profile["device_name"], raw_profile["kind"],
                      raw_profile.get("properties", {}), raw_profile["ceilings"],
                      measurement_rows(raw_profile["measurements"]), raw_profile["date"], "(in memory)", raw_profile)
    device = profile_device(profile)
    empty = {"n": 0, "median_abs_error": float("nan"), "p90_abs_error": float("nan"), "by_kind": {},
             "interior": _stats([]), "eligible": 0, "max_points": max_points, "seed": seed, "seconds": 0.0}
    if device is None or "copy_bytes_per_s" not in profile.ceilings:
        return empty
    defaults = load_defaults().for_device(device)
    rows = list(profile.measurements)
    full = ProfileModel(defaults).fit(profile, device)
    features: dict[int, tuple] = {}
    bounds: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    members: dict[str, list[int]] = {}  # profile indices of each model key's measurements, in file order
    for i, m in enumerate(rows):
        if m["kind"] in SKIPPED_KINDS:
            continue
        key, feats, _ = features[i] = _features(m)
        lo, hi = bounds.get(key, (np.asarray(feats), np.asarray(feats)))
        bounds[key] = (np.minimum(lo, feats), np.maximum(hi, feats))
        members.setdefault(key, []).append(i)
    eligible = [i for i in features if not full.censored(rows[i]) and features[i][0] in full.models_
                and full.efficiency_of(rows[i], device) is not None]
    order = [eligible[j] for j in sample_order([features[i][0] for i in eligible], seed)]
    if max_points is not None:
        order = order[:max_points]
    # one profile per key: a point left out refits its own key's curve only
    alone: dict[str, Profile] = {}
    errors: dict[int, tuple[str, float, bool]] = {}
    for i in order:
        if clock() > deadline_s:
            break
        key, feats, _ = features[i]
        if key not in alone:
            alone[key] = Profile(profile.device_id, profile.device_name, profile.kind, profile.properties,
                                 profile.ceilings, tuple(rows[j] for j in members[key]), profile.date,
                                 profile.path, raw_profile)
        loo = ProfileModel(defaults).fit(alone[key], device, exclude=members[key].index(i))
        if key not in loo.models_:
            continue
        predicted = math.exp(loo.models_[key](feats))
        lo, hi = bounds[key]
        inside = bool(np.all((np.asarray(feats) > lo) & (np.asarray(feats) < hi)))
        errors[i] = (key if key.startswith(("mem", "gemm")) else key.split(":")[0],
                     full.efficiency_of(rows[i], device) / predicted - 1, inside)
    by_kind: dict[str, list[float]] = {}
    for i in sorted(errors):  # in file order, as fit_report lists them
        by_kind.setdefault(errors[i][0], []).append(errors[i][1])
    every = [e for es in by_kind.values() for e in es]
    interior = [errors[i][1] for i in sorted(errors) if errors[i][2]]
    return {**_stats(every), "interior": _stats(interior), "by_kind": {k: _stats(v) for k, v in by_kind.items()},
            "eligible": len(eligible), "max_points": max_points, "seed": seed, "seconds": round(clock() - began, 3)}
