"""A memo keyed by object identity, for the predictor's hot paths.

A sweep predicts the same captured graph on the same device thousands of times. What keys those
results (graph parts, devices, efficiency and power models, catalogs) is frozen but large: hashing a
graph part hashes every op it holds, and a device holds dicts, which do not hash. So the memo keys such
objects by id() and keeps them alive in the entry: while an entry stands no other object can take one
of its ids. Small hashable values (dtypes, counts, names) key by value. A memo that reaches its limit
starts over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class IdentityMemo:
    """Results by (identity of `objects`, `values`)."""

    def __init__(self, limit: int = 4096):
        self._entries: dict[tuple, tuple] = {}
        self._limit = limit

    def get(self, objects: tuple, values: tuple, compute: Callable[[], T]) -> T:
        """The result stored for these objects and values, else `compute()`, stored."""
        key = (tuple(map(id, objects)), values)
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= self._limit:
                self._entries.clear()
            entry = self._entries[key] = (objects, compute())  # objects kept alive: their ids stay theirs
        return entry[1]

    def clear(self) -> None:
        self._entries.clear()
