"""Pausing Python's cyclic garbage collector over a burst of allocation.

A cold `compare` builds some 300,000 container objects that live on (graph records, tensor shapes, op times
kept for the next prediction) and frees almost all of its garbage by reference counting, which the cyclic
collector does not drive. With the collector running, every 700 new containers start a young collection and
every hundredth an old one that walks everything built so far: 460 + 41 + 2 collections, 0.11 s of a 0.95 s
cold `compare` on a 2-core machine (benchmarks/predict_speed.py, timed by gc.callbacks). Paused, the
collector runs once when the burst ends, over what is left.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
_STATE = {"blocks": 0, "was_enabled": False}
"""Blocks open in any thread, and whether the collector was enabled when the first of them opened."""


@contextmanager
def paused() -> Iterator[None]:
    """Disable the cyclic collector for the block. When the last open block (of any thread) ends, the
    collector is enabled again if it was enabled when the first one began: a caller that disabled it
    keeps it so, nested blocks are harmless, and two threads' blocks that overlap cannot leave it off."""
    with _LOCK:
        if _STATE["blocks"] == 0:
            _STATE["was_enabled"] = gc.isenabled()
            gc.disable()
        _STATE["blocks"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["blocks"] -= 1
            if _STATE["blocks"] == 0 and _STATE["was_enabled"]:
                gc.enable()
