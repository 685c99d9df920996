"""The app's frame: the page list in the sidebar and the error boundary around each page."""

from __future__ import annotations

import streamlit as st

from planner.app import calibration, cost, hardware, plan, serving, start, sweep, trace, workload
from planner.app.common import shown

PAGES = {"Start": start, "Workload": workload, "Serving": serving, "Cost": cost, "Plan": plan,
         "Your hardware": hardware, "Sweep": sweep, "Trace": trace, "Calibration and accuracy": calibration}
"""Sidebar label -> the module whose page() draws it."""


def main() -> None:
    st.set_page_config(page_title="planner", layout="wide")
    st.sidebar.title("planner")
    page = st.sidebar.radio("Page", list(PAGES), key="page")
    st.sidebar.caption("Predictions, prices and plans from the planner library; every price shows its date.")
    shown(PAGES[page].page)
