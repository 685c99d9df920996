"""Serving page: continuous batching under arrivals (planner.serve)."""

from __future__ import annotations

import streamlit as st

from planner.app.common import purpose


def page() -> None:
    purpose("Serving", "Continuous batching under arrivals.")
    st.info("Being built.")
