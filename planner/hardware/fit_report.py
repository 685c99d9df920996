"""Leave-one-out errors of a calibration profile's efficiency model on its own measurements (the band a
profile records: `leave_one_out` in profile.json, written by `planner calibrate` and `--refit`)."""

from __future__ import annotations

import math

import numpy as np

from planner.hardware.profile import Profile, ProfileModel, _features, profile_device
from planner.hardware.profile_table import measurement_rows


def fit_report(raw_profile: dict) -> dict:
    """Leave-one-out errors of the efficiency model on a profile's own measurements.

    Each measurement is predicted from a model fitted to all the others; error = predicted time /
    measured time − 1. Returns {"n", "median_abs_error", "p90_abs_error", "by_kind": {...}}.
    """
    from planner.hardware.efficiency import load_defaults

    profile = Profile(raw_profile["device_id"], raw_profile["device_name"], raw_profile["kind"],
                      raw_profile.get("properties", {}), raw_profile["ceilings"], measurement_rows(raw_profile["measurements"]),
                      raw_profile["date"], "(in memory)", raw_profile)
    device = profile_device(profile)
    if device is None or "copy_bytes_per_s" not in profile.ceilings:
        return {"n": 0, "median_abs_error": float("nan"), "p90_abs_error": float("nan"), "by_kind": {}}
    defaults = load_defaults().for_device(device)
    errors: dict[str, list[float]] = {}
    interior: list[float] = []
    full = ProfileModel(defaults).fit(profile, device)
    bounds: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for m in profile.measurements:
        if m["kind"] in ("launch", "view", "h2d"):
            continue
        key, feats, _ = _features(m)
        lo, hi = bounds.get(key, (np.asarray(feats), np.asarray(feats)))
        bounds[key] = (np.minimum(lo, feats), np.maximum(hi, feats))
    for i, m in enumerate(profile.measurements):
        if m["kind"] in ("launch", "view", "h2d") or full.censored(m):
            continue  # a censored time is the host's: the fit does not use it, nor is it judged by it
        key, feats, shape = _features(m)
        measured_eta = full.efficiency_of(m, device)
        if measured_eta is None or key not in full.models_:
            continue
        loo = ProfileModel(defaults).fit(profile, device, exclude=i)
        if key not in loo.models_:
            continue
        predicted = math.exp(loo.models_[key](feats))
        # time is inversely proportional to η (the overhead part is common to both)
        error = measured_eta / predicted - 1
        errors.setdefault(key if key.startswith(("mem", "gemm")) else key.split(":")[0], []).append(error)
        lo, hi = bounds[key]
        # a point on the edge of its grid, left out, is an extrapolation the model never makes
        # inside its grid: the band comes from interior points
        if np.all((np.asarray(feats) > lo) & (np.asarray(feats) < hi)):
            interior.append(error)
    every = [e for es in errors.values() for e in es]

    def stats(values: list[float]) -> dict:
        a = np.abs(np.asarray(values))
        return {"n": len(values), "median_abs_error": float(np.median(a)) if len(a) else float("nan"),
                "p90_abs_error": float(np.percentile(a, 90)) if len(a) else float("nan")}

    return {**stats(every), "interior": stats(interior), "by_kind": {k: stats(v) for k, v in errors.items()}}
