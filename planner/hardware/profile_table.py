"""A calibration profile's measurements by kind and by column, in either layout a profile file holds.

Rows: `"measurements": [{"kind": "gemm", "m": 64, ...}, ...]`, what `planner calibrate` writes (a few
thousand measurements). Columns: `"measurements": {"kind": [...], "m": [...], ...}`, equal-length lists,
null where a measurement lacks the key (no measurement holds a null: profile_check refuses one), what a
published profile is converted into (ten to sixteen thousand measurements). Both give the same
measurements in the same order.

Reading a published profile is most of the first prediction on its device, and of a cold `compare`: a
list of 16,000 objects costs a dict per measurement to parse and a dict lookup per field to read back,
where a column parses as one list and is sliced per kind (benchmarks/predict_speed.py). The check
(profile_check.py) and the fit (profile.py) both read a KindTable: one kind's measurements, each field
read once, as a list.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MISSING = object()
"""What a KindTable of rows holds where a measurement lacks a key (a KindTable of columns holds None)."""


class KindTable:
    """The measurements of one kind: `index` (their positions in the profile, ascending), `rows` (as dicts,
    built on first use for a table of columns), and `column(key)`, each key's values read once."""

    __slots__ = ("_base", "_columns", "_floats", "_rows", "_source", "absent", "index", "kind")

    def __init__(self, kind: str, index: np.ndarray, rows: list[dict] | None = None,
                 source: dict[str, list] | None = None):
        """`rows`: this kind's measurements (a file of rows); else `source`: the whole profile's columns."""
        self.kind, self.index, self._rows, self._source = kind, index, rows, source
        self.absent = MISSING if rows is not None else None
        self._base: dict[str, list] = {}
        self._columns: dict[tuple, list] = {}
        self._floats: dict[str, np.ndarray] = {}

    @property
    def rows(self) -> list[dict]:
        if self._rows is None:
            self._rows = _dicts({key: self.column(key) for key in self._source})
        return self._rows

    def column(self, key: str, default=MISSING) -> list:
        """Each measurement's value of `key`: `default` where one lacks it, else the table's `absent`."""
        base = self._base.get(key)
        if base is None:
            base = self._base[key] = self._read(key)
        if default is MISSING or self.absent not in base:
            return base
        found = self._columns.get((key, default))
        if found is None:
            absent = self.absent
            found = self._columns[key, default] = [default if value is absent else value for value in base]
        return found

    def floats(self, key: str) -> np.ndarray:
        """`key`'s values as a float array, converted once (the check and the fit both read time_s, flop and
        bytes): every measurement must hold a number there. Not to be written to."""
        found = self._floats.get(key)
        if found is None:
            found = self._floats[key] = np.array(self.column(key), dtype=float)
        return found

    def value_set(self, key: str, default) -> set:
        """The distinct values of `key`, `default` where a measurement lacks it: set(column(key, default))
        without building that column."""
        values = set(self.column(key))
        if self.absent in values:
            values.discard(self.absent)
            values.add(default)
        return values

    def equals(self, key: str, value) -> np.ndarray:
        """A bool per measurement: its `key` is `value` (False where it lacks the key)."""
        base = self.column(key)
        if value not in base:  # a published profile's "timing" is absent throughout
            return np.zeros(len(base), dtype=bool)
        return np.array([v == value for v in base], dtype=bool)

    def _read(self, key: str) -> list:
        if self._rows is not None and self._source is None:
            return [m.get(key, MISSING) for m in self._rows]
        values = self._source.get(key)
        if values is None:
            return [None] * len(self.index)
        first, last = int(self.index[0]), int(self.index[-1])
        if last - first + 1 == len(self.index):  # the kind's measurements lie together: a slice
            return values[first:last + 1]
        return [values[i] for i in self.index.tolist()]


def rows_by(values) -> dict:
    """Row indices (ascending numpy int arrays) by value, the values in order of first appearance."""
    values = values if type(values) is list else list(values)
    if values and values.count(values[0]) == len(values):  # one value (count compares as a dict's keys do)
        return {values[0]: np.arange(len(values))}
    codes = {value: code for code, value in enumerate(dict.fromkeys(values))}
    coded = np.fromiter(map(codes.__getitem__, values), dtype=np.int64, count=len(values))
    return {value: np.flatnonzero(coded == code) for value, code in codes.items()}


def rows_by_pair(first: list, second: list) -> dict:
    """rows_by(zip(first, second)): row indices by (first, second) value pair, pairs in order of first
    appearance, without building the pairs (each list is coded on its own, then the two codes combined)."""
    if not first:
        return {}
    (a, a_values), (b, b_values) = _coded(first), _coded(second)
    if len(a_values) == len(b_values) == 1:  # a published profile's kind: one curve at one dtype
        return {(a_values[0], b_values[0]): np.arange(len(first))}
    pair = a * len(b_values) + b
    codes, at = np.unique(pair, return_index=True)
    return {(a_values[code // len(b_values)], b_values[code % len(b_values)]): np.flatnonzero(pair == code)
            for code in codes[np.argsort(at)].tolist()}


def _coded(values: list) -> tuple[np.ndarray, list]:
    """(a code per value, the distinct values in order of first appearance), values grouped as a dict's keys."""
    if values.count(values[0]) == len(values):
        return np.zeros(len(values), dtype=np.int64), [values[0]]
    codes = {value: code for code, value in enumerate(dict.fromkeys(values))}
    return np.fromiter(map(codes.__getitem__, values), dtype=np.int64, count=len(values)), list(codes)


def kind_tables(measurements) -> dict[str, KindTable] | None:
    """The measurements (a list of rows, or a dict of columns whose shape profile_check has checked) as a
    KindTable per kind, kinds in order of first appearance; None when a row is not a JSON object or a kind
    is not a string (the row-by-row check then says which)."""
    if isinstance(measurements, dict):
        kinds = measurements["kind"]
        if not set(map(type, kinds)) <= {str}:
            return None
        return {kind: KindTable(kind, index, source=measurements) for kind, index in rows_by(kinds).items()}
    if not all(type(m) is dict for m in measurements):
        return None
    kinds = [m.get("kind") for m in measurements]
    if not all(type(kind) is str for kind in kinds):
        return None
    return {kind: KindTable(kind, index, [measurements[i] for i in index]) for kind, index in rows_by(kinds).items()}


class ColumnRows(Sequence):
    """The measurements of a profile of columns as dicts (keys whose value is null left out), built on first
    use: what `Profile.measurements` holds for such a file (leave-one-out reports and transfers read rows;
    a prediction reads the KindTables)."""

    def __init__(self, columns: dict[str, list]):
        self._columns = columns
        self._rows: list[dict] | None = None

    def _all(self) -> list[dict]:
        if self._rows is None:
            self._rows = _dicts(self._columns)
        return self._rows

    def __len__(self) -> int:
        return len(self._columns["kind"])

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self):
        return iter(self._all())


def _dicts(columns: dict[str, list]) -> list[dict]:
    """One dict per position of `columns` (equal-length lists), keys whose value is null left out."""
    keys = list(columns)
    return [{k: v for k, v in zip(keys, values) if v is not None} for values in zip(*columns.values())]


def measurement_rows(measurements) -> Sequence[dict]:
    """A profile's measurements as a sequence of dicts, in file order, whichever layout it holds."""
    return ColumnRows(measurements) if isinstance(measurements, dict) else tuple(measurements)


def to_columns(rows: list[dict]) -> dict[str, list]:
    """`rows` (measurements as dicts, none holding a null) in the columns layout: each key met, in order of
    first appearance, with one value per measurement, None where a measurement lacks the key."""
    keys = list(dict.fromkeys(key for m in rows for key in m))
    if any(value is None for m in rows for value in m.values()):
        raise ValueError("a measurement holds a null: the columns layout reads null as an absent key")
    return {key: [m.get(key) for m in rows] for key in keys}
