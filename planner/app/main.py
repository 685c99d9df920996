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
    _page_of_link()
    page = st.sidebar.radio("Page", list(PAGES), key="page")
    if st.session_state.get("link_page", page) != page:  # a link's query belongs to the page that wrote it
        st.query_params.clear()
    st.session_state["link_page"] = page
    st.sidebar.caption("Predictions, prices and plans from the planner library; every price shows its date.")
    shown(PAGES[page].page)


def _page_of_link() -> None:
    """Once a session: open the page a link names (?page=Workload&..., written by a page that puts its inputs
    in the address bar); a name that is not a page is ignored."""
    ss = st.session_state
    if ss.get("link_read"):
        return
    ss["link_read"] = True
    wanted = st.query_params.get("page")
    if wanted in PAGES:
        ss["page"] = wanted
