"""Calibration page: the profiles predictions come from, and predicted versus measured."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from planner.app.common import ROOT, context, purpose


@st.cache_data(show_spinner=False)
def validation_results() -> pd.DataFrame:
    rows = []
    for file in sorted((ROOT / "benchmarks" / "results").glob("validate_*.json")):
        data = json.loads(file.read_text())
        for case in data["cases"]:
            rows.append({"run": file.stem, **case})
    return pd.DataFrame(rows)



def page() -> None:
    purpose("Calibration and accuracy", "Where each device's efficiencies come from (measured, published or transferred profiles), and how far predictions land from measurements.")
    ctx = context()
    if not ctx.profiles:
        st.info("No calibration profile yet: run `planner calibrate`.")
    for device_id, profile in sorted(ctx.profiles.items()):
        raw = profile.raw
        loo = raw.get("leave_one_out", {})
        st.subheader(device_id)
        st.write(f"{profile.device_name}, measured {raw.get('date', '?')} in {raw.get('duration_s', '?')} s: "
                 f"{raw.get('measured', len(profile.measurements))} measurements; torch "
                 f"{raw.get('versions', {}).get('torch', '?')}")
        st.json({"ceilings": raw.get("ceilings", {}), "leave_one_out": {k: v for k, v in loo.items() if k != "by_kind"}},
                expanded=False)
    results = validation_results()
    if results.empty:
        st.info("No validation results yet: run `planner validate --json > benchmarks/results/validate_<device>.json`.")
        return
    st.subheader("Predicted versus measured")
    st.dataframe(results, hide_index=True)
    summary = results.assign(abs_error=results["error"].abs()).groupby(["run", "tier", "kind"])["abs_error"].agg(
        ["median", "max", "count"]).reset_index()
    st.dataframe(summary, hide_index=True)

