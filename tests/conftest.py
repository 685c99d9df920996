"""Shared fixtures: captured graphs are cached per session (capture on meta takes ~0.1-2 s)."""

from functools import lru_cache

import pytest

from planner.workload.counting import Counts, count
from planner.workload.graphs import Workload, WorkloadGraph, build_graph
from planner.workload.zoo import resolve


@lru_cache(maxsize=None)
def captured(model: str, **workload) -> tuple[WorkloadGraph, Counts]:
    wg = build_graph(resolve(model), Workload(**workload))
    return wg, count(wg.graph)


@pytest.fixture
def run_captured():
    return captured
