"""Reading the catalog's CSV files: rows of typed, checked cells (planner/hardware/catalog.py loads them).

A file is read as data only, through files.read_text (size limit, BOM dropped, non-UTF-8 named by
byte offset), and parsed by the csv module. Every error is a CatalogError naming the file, the row
(header = row 1, first data row = 2; a blank line keeps its number), the column, the value and what
would be valid. Numbers are plain decimals (no "nan", "inf", hex or "1_000"), finite and in the range
the loader gives; dates are real calendar days; text cells hold no control characters.
"""

from __future__ import annotations

import csv
import datetime
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from planner.errors import ConfigError
from planner.files import read_text

# A numeric column must name its unit: it contains one of these tokens (a count says what it counts).
_UNIT_TOKENS = ("gib", "mib", "gb_per_s", "tflop_per_s", "tera_op_per_s", "mhz", "_w", "usd", "kwh", "pue",
                "fraction", "units", "per_node", "count", "vcpus", "year", "months", "per_cycle")
_DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?$")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9.+_-]*$")
# a plain decimal: float() alone would also take "nan", "inf", "1_000" and surrounding whitespace
# ASCII digits only: Python's float() also reads Arabic-Indic and other Unicode digits
_NUMBER = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class CatalogError(ConfigError):
    """A malformed catalog file: names the file, the row, the column, the bad value and what is valid."""

    def __init__(self, file: str, row: int, key: str, value: object, valid: str):
        self.file, self.row, self.key, self.value, self.valid = file, row, key, value, valid
        where = "row 1 (header)" if row == 1 else f"row {row}"
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        super().__init__(f"{file}, {where}, column '{key}': bad value {shown}; valid: {valid}")


@dataclass(frozen=True, slots=True)
class Row:
    """One data row of a CSV file with typed, validated accessors."""

    file: str
    index: int
    """Row number in the file: header = 1, first data row = 2."""
    cells: dict[str, str]

    def fail(self, key: str, valid: str) -> NoReturn:
        raise CatalogError(self.file, self.index, key, self.cells.get(key, ""), valid)

    def text(self, key: str, required: bool = True) -> str | None:
        value = self.cells[key].strip()
        if not value:
            if required:
                self.fail(key, "a non-empty value")
            return None
        if _CONTROL.search(value):
            self.fail(key, "text without control characters (tab, newline, NUL)")
        return value

    def slug(self, key: str) -> str:
        value = self.text(key)
        if not _SLUG.match(value):
            self.fail(key, "lowercase letters, digits and . + _ - (e.g. 'h100-sxm')")
        return value

    def choice(self, key: str, choices: Iterable[str]) -> str:
        choices = tuple(choices)
        value = self.text(key)
        if value not in choices:
            self.fail(key, "one of " + ", ".join(choices))
        return value

    def date(self, key: str = "date") -> str:
        value = self.text(key)
        if not _DATE.match(value):
            self.fail(key, "a date YYYY-MM or YYYY-MM-DD")
        try:  # the pattern alone would take 2024-02-30
            datetime.date.fromisoformat(value if len(value) == 10 else value + "-01")
        except ValueError:
            self.fail(key, "a date that exists, YYYY-MM or YYYY-MM-DD")
        return value

    def number(self, key: str, lo: float, hi: float, required: bool = True) -> float | None:
        if not any(token in key for token in _UNIT_TOKENS):
            self.fail(key, "a column name that names its unit (code error)")
        raw = self.cells[key].strip()
        if not raw:
            if required:
                self.fail(key, f"a number in [{lo:g}, {hi:g}]")
            return None
        value = parse_float(raw)
        if value is None or not lo <= value <= hi:
            self.fail(key, f"a number in [{lo:g}, {hi:g}]")
        return value

    def integer(self, key: str, lo: int, hi: int, required: bool = True) -> int | None:
        value = self.number(key, lo, hi, required)
        if value is None:
            return None
        if value != int(value):
            self.fail(key, f"a whole number in [{lo}, {hi}]")
        return int(value)


def read_rows(path: Path, columns: tuple[str, ...], rows_required: bool = False) -> list[Row]:
    """Return the data rows of a CSV file whose header is exactly `columns` (in any order).

    Rows are numbered as records (header = 1); a blank line is skipped but keeps its number. Raise
    CatalogError for a missing, empty or malformed file, a missing, unknown or repeated column, a
    row with too few or too many cells, and (where `rows_required`) a file with no data row."""
    if not path.is_file():
        raise CatalogError(path.name, 1, "(file)", str(path), "an existing file with columns " + ",".join(columns))
    reader = csv.reader(io.StringIO(read_text(path, "catalog file"), newline=""))
    header: list[str] | None = None
    rows, number = [], 0
    try:
        for number, cells in enumerate(reader, start=1):
            if header is None:
                header = _header(path.name, cells, columns)
            elif cells and len(cells) != len(header):
                key, value = (header[len(cells)], "(no cell)") if len(cells) < len(header) else \
                    (f"(cell {len(header) + 1})", ",".join(cells[len(header):]))
                raise CatalogError(path.name, number, key, value, f"{len(header)} cells, one per column, not "
                                   f"{len(cells)} (quote a cell that holds a comma)")
            elif cells:
                rows.append(Row(path.name, number, dict(zip(header, cells))))
    except csv.Error as exc:  # a cell over the csv module's size limit, a stray quote in strict mode
        raise CatalogError(path.name, number + 1, "(row)", "(unreadable)", f"well-formed CSV ({exc})") from None
    if header is None:
        raise CatalogError(path.name, 1, "(header)", "(empty file)", "a header with columns " + ",".join(columns))
    if rows_required and not rows:
        raise CatalogError(path.name, 2, "(row)", "(no data row)", "at least one data row below the header")
    return rows


def _header(file: str, cells: list[str], columns: tuple[str, ...]) -> list[str]:
    """Return the header `cells` when they name each of `columns` once; raise CatalogError otherwise."""
    for col in [c for c in columns if c not in cells] + cells:
        problem = ("(missing)" if col not in cells else "(unknown column)" if col not in columns else
                   "(listed twice)" if cells.count(col) > 1 else None)
        if problem:
            raise CatalogError(file, 1, col, problem, "a header with each of the columns " + ",".join(columns) + " once")
    return cells


def parse_float(text: str) -> float | None:
    """A finite plain decimal, or None ("nan", "inf", hex, "1e400" that overflows to inf)."""
    if not _NUMBER.match(text):
        return None
    value = float(text)
    return value if abs(value) != float("inf") else None
