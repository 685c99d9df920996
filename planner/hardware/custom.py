"""A user's own hardware: the catalog extended with devices, rental prices and servers given as catalog
rows, each checked by the catalog's own loader (the app's Your hardware page), and those rows as CSV
text to paste into hardware_specs/.

Rows are dicts of column -> text, exactly as the CSV files hold them (human units, as the header names
them: memory_gib, mem_bw_gb_per_s, bf16_tflop_per_s, price_usd_per_h...). Nothing here evaluates a cell:
the loader parses each one as a plain decimal, date, slug or choice, and refuses anything else.
"""

from __future__ import annotations

import csv
import io
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from planner.errors import ConfigError
from planner.files import read_text
from planner.hardware.catalog import DEFAULT_ROOT, Catalog, load_catalog
from planner.hardware.cells import CatalogError

FILES = ("devices.csv", "instances.csv", "onprem_servers.csv", "sites.csv", "power_model.csv", "carbon.csv",
         "discounts.csv", "onprem_costs.csv")
"""The files load_catalog reads from a hardware_specs folder (onprem_costs.csv where the folder has it)."""
TABLES = {"device": "devices.csv", "instance": "instances.csv", "server": "onprem_servers.csv"}
"""What a user may add, and the file each row joins."""
MAX_ROWS = 200
"""Rows of one kind a session may add: far more than anyone types, and a bound on the work of a check."""


def columns(kind: str, root: str | Path | None = None) -> list[str]:
    """The header of the catalog file a `kind` row joins ("device", "instance" or "server"), in file order."""
    path = Path(root or DEFAULT_ROOT) / TABLES[kind]
    return next(csv.reader(io.StringIO(read_text(path, "catalog file"))))


def _records(path: Path) -> int:
    """CSV records in a file, header included (multi-line quoted cells count once, as the loader counts)."""
    return sum(1 for _ in csv.reader(io.StringIO(read_text(path, "catalog file"), newline="")))


def _append(path: Path, kind: str, rows: Sequence[Mapping[str, str]]) -> int:
    """Append `rows` to the CSV file at `path`; return the record number of the first appended row."""
    header = columns(kind, path.parent)
    first = _records(path) + 1
    for i, row in enumerate(rows):
        unknown = sorted(set(row) - set(header))
        if unknown:
            raise ConfigError(f"your {kind} {i + 1}: unknown column '{unknown[0]}'; valid: {', '.join(header)}")
    text = path.read_text(encoding="utf-8")
    out = io.StringIO()
    if text and not text.endswith("\n"):
        out.write("\n")
    writer = csv.DictWriter(out, fieldnames=header, restval="", lineterminator="\n")
    for row in rows:
        writer.writerow({k: "" if v is None else str(v) for k, v in row.items()})
    with path.open("a", encoding="utf-8", newline="") as f:
        f.write(out.getvalue())
    return first


def extend_catalog(devices: Sequence[Mapping[str, str]] = (), instances: Sequence[Mapping[str, str]] = (),
                   servers: Sequence[Mapping[str, str]] = (), root: str | Path | None = None) -> Catalog:
    """The catalog of `root` (default: the shipped hardware_specs/) with the given rows added, loaded and
    checked as the shipped files are. Raise ConfigError naming the added row ("your device 'x'"), the
    column, the bad value and what is valid; a row may clash with a shipped one (a taken id or alias)."""
    added = {"device": list(devices), "instance": list(instances), "server": list(servers)}
    for kind, rows in added.items():
        if len(rows) > MAX_ROWS:
            raise ConfigError(f"{len(rows)} {kind} rows; at most {MAX_ROWS} may be added")
    base = Path(root) if root else DEFAULT_ROOT
    with tempfile.TemporaryDirectory(prefix="planner-catalog-") as tmp:
        for name in FILES:
            if name == "onprem_costs.csv" and not (base / name).exists():
                continue  # optional: a folder without it loads with no renting-versus-owning defaults
            shutil.copyfile(base / name, Path(tmp) / name)
        first = {kind: _append(Path(tmp) / TABLES[kind], kind, rows) for kind, rows in added.items()}
        try:
            return load_catalog(tmp)
        except CatalogError as err:
            raise _named(err, first, added) from None


def _named(err: CatalogError, first: dict[str, int], added: dict[str, list]) -> ConfigError:
    """The loader's error, about an added row when it is one, named as the user knows it."""
    for kind, table in TABLES.items():
        if err.file == table and err.row >= first[kind] and added[kind]:
            row = added[kind][min(err.row - first[kind], len(added[kind]) - 1)]
            name = row.get("id") or row.get("instance") or f"row {err.row - first[kind] + 1}"
            # the loader's message names the temporary file and row: say which of the user's rows instead
            return ConfigError(f"your {kind} '{name}': " + str(err).split(", ", 2)[2])
    return ConfigError(str(err))


def rows_csv(kind: str, rows: Sequence[Mapping[str, str]]) -> str:
    """`rows` as CSV text with the header of the file they join (to append to hardware_specs/)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns(kind), restval="", lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else str(v) for k, v in row.items()})
    return out.getvalue()


def shipped_row(kind: str, key: str, root: str | Path | None = None) -> dict[str, str] | None:
    """The row of the shipped catalog file for `kind` whose first column (id, or provider for an instance)
    equals `key`, as text; None when there is none. A starting point for a user's own row."""
    path = Path(root or DEFAULT_ROOT) / TABLES[kind]
    for row in csv.DictReader(io.StringIO(read_text(path, "catalog file"), newline="")):
        if row.get("id") == key:
            return dict(row)
    return None
