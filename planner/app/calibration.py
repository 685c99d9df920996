"""Calibration page: the profiles predictions come from, how far predictions land from 250 published
measurements (benchmarks/dev_validation.py), and predicted against measured on this machine
(`planner validate`)."""

from __future__ import annotations

import json
import math

import pandas as pd
import streamlit as st

from planner.app.common import ROOT, band_text, context, purpose, table

RESULTS = ROOT / "benchmarks" / "results"


@st.cache_data(show_spinner=False)
def validation_results() -> pd.DataFrame:
    """Every case of benchmarks/results/validate_*.json (`planner validate --json`), with its run."""
    rows = []
    for file in sorted(RESULTS.glob("validate_*.json")):
        data = json.loads(file.read_text())
        for case in data["cases"]:
            rows.append({"run": file.stem, **case})
    return pd.DataFrame(rows)


@st.cache_data(show_spinner=False)
def dev_validation() -> dict | None:
    """benchmarks/results/dev_validation.json: predictions against 250 published measurements."""
    path = RESULTS / "dev_validation.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _profiles() -> pd.DataFrame:
    rows = []
    profiles = context().profiles
    for device_id in sorted(profiles):
        files = [(None, profiles[device_id])]
        libraries = getattr(profiles, "libraries", lambda _: ())(device_id)
        files += [(library, profiles.library(device_id, library)) for library in libraries
                  if library != getattr(profiles[device_id], "raw", {}).get("library")]
        for library, profile in files:
            if profile is None:
                continue
            raw = profile.raw
            held = raw.get("held_out") or raw.get("leave_one_out") or {}
            source = raw.get("source") or raw.get("provenance") or {}
            rows.append({
                "device": device_id, "profile": library or "default", "tier": raw.get("tier", "measured"),
                "measured on": str(raw.get("date", ""))[:10],
                "by": source.get("repository", "planner calibrate") if isinstance(source, dict) else str(source),
                "measurements": raw.get("measured", len(profile.measurements)),
                "held-out median error (%)": 100 * held["median_abs_error"] if "median_abs_error" in held else None,
                "held-out p90 error (%)": 100 * held["p90_abs_error"] if "p90_abs_error" in held else None,
                "torch": (raw.get("versions") or {}).get("torch", ""),
                "measuring took (s)": raw.get("duration_s")})
    return pd.DataFrame(rows)


def _summary_table(groups: dict, name: str) -> pd.DataFrame:
    """A dev_validation summary (group -> n, median |ln|, p90 |ln|, median ln) with its units named."""
    # |ln| is |ln(predicted / measured)| (the caption above says so): short headers keep the table within the page
    return pd.DataFrame([{name: key, "rows": v["n"],
                          "median |ln|": v["median_abs_ln_ratio"],
                          "p90 |ln|": v["p90_abs_ln_ratio"],
                          "median bias ln": v["median_ln_ratio"]}
                         for key, v in groups.items()])


def bands_frame() -> pd.DataFrame:
    """The measured band of each tier on each device family (hardware_specs/efficiency/measured_bands.json) and
    whether predictions use it (a family with fewer rows takes its tier's figure over every family)."""
    bands = context().bands
    return pd.DataFrame([{
        "tier": g.tier, "device family": "every family" if g.family == "*" else g.family, "rows": g.rows,
        "median error (x)": round(math.exp(g.median_abs_ln), 2), "p90 error (x)": round(math.exp(g.p90_abs_ln), 2),
        "band (either way)": band_text(g.band_fraction),
        "used": "yes" if g.family == "*" or g.rows >= bands.min_rows else f"no: under {bands.min_rows} rows, the tier's"}
        for g in bands.groups])


def _bands() -> None:
    frame = bands_frame()
    if frame.empty:
        return
    st.subheader("Bands by tier and device family")
    st.caption("Every time and rate the app shows carries a band: the 90th percentile of how far planner's predictions "
               "on that tier and device family landed from the published measurements above (in sample), or the "
               "kernels' own error where that is wider. A family with too few results takes its tier's figure over "
               "every family. `benchmarks/measured_bands.py` derives the table from the run above.")
    table(frame)


def page() -> None:
    purpose("Calibration and accuracy", "Where each device's efficiencies come from (measured, published or "
            "transferred profiles), and how far predictions land from measurements.")
    st.subheader("Calibration profiles")
    st.caption("measured: `planner calibrate` on that device; published: converted from published kernel "
               "measurements (their repository, commit and license in the profile). A device without one takes a "
               "profiled neighbour of its generation (transferred) or its datasheet.")
    profiles = _profiles()
    if profiles.empty:
        st.info("No calibration profile yet: run `planner calibrate`.")
    else:
        table(profiles)
    report = dev_validation()
    if report is not None:
        overall = report["summary"]["overall"]["all"]
        st.subheader("Against published measurements")
        st.caption(f"`benchmarks/dev_validation.py` on {report['date']}: {report['expressed']} of "
                   f"{report['rows_read']} published results (MLPerf, vendor and paper figures with their configs) "
                   f"predicted; median |ln(predicted / measured)| {overall['median_abs_ln_ratio']:.3f} (predictions "
                   f"within {math.exp(overall['median_abs_ln_ratio']):.2f}x of the "
                   f"measurement for half the rows), p90 {overall['p90_abs_ln_ratio']:.3f}. The rest are not "
                   "expressed: " + "; ".join(f"{k} ({len(v) if isinstance(v, list) else v})"
                                                for k, v in report["not_expressed_by_reason"].items()) + ". In "
                   "the tables, |ln| is |ln(predicted / measured)| and bias ln its signed median (above 0: predicted "
                   "above the measurement).")
        table(_summary_table(report["summary"]["by_category"], "category"))
        table(_summary_table(report["summary"]["by_gpu"], "GPU"))
        _bands()
    results = validation_results()
    if results.empty:
        st.info("No validation results yet: run `planner validate --json > benchmarks/results/validate_<device>.json`.")
        return
    st.subheader("Predicted versus measured on this machine")
    st.caption("`planner validate`: single ops and small models timed here against their predictions")
    shown = pd.DataFrame({"run": results["run"], "case": results["name"], "kind": results["kind"],
                          "op": results["op_kind"], "predicted (ms)": results["predicted_s"] * 1e3,
                          "measured (ms)": results["measured_s"] * 1e3,
                          "error (% of measured)": results["error"] * 100, "tier": results["tier"]})
    table(shown)
    summary = results.assign(abs_error=results["error"].abs() * 100).groupby(["run", "tier", "kind"])["abs_error"].agg(
        ["median", "max", "count"]).reset_index().rename(columns={
            "median": "median |error| (%)", "max": "max |error| (%)", "count": "cases"})
    table(summary)
