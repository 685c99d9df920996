"""Run a sweep: predict every point of a grid in chunks, on one of four backends, into Parquet.

The unit of work is `predict_chunk`, a plain function of (points, keep, texts) that every backend runs
unchanged: in this process, in local worker processes (`--workers N`), on a Dask cluster or on Ray.
Each worker keeps planner's caches (captured graphs by model, workload shape and parallel layout;
op timings by graph part and device), so a graph is captured once per worker.

Resumable and never half written: each finished chunk is written at once, atomically, as
`<out>.parts/chunk-NNNNNNNN.parquet` beside a manifest naming the grid (its sha256). A sweep run again
with the same grid and --out skips the chunks on disk; when all are there they are joined into `<out>`
(a temporary file renamed over it), Parquet or CSV as its suffix says (FORMATS), and the parts folder is
removed. Rows are those of `planner predict
--configs` on the same points: `id`, the prediction's keys as columns (nested mappings flattened as
`memory.weights_bytes`, lists as JSON text), `error` for a point that cannot be predicted, and the point's
own values as `in.<key>`. `keep` filters the predicted rows; a point that could not be predicted is
always written, so that a filter never hides a failure.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from math import isfinite
from pathlib import Path

from planner.errors import ConfigError, PlannerError, shorten
from planner.files import exclusive_lock, new_file_mode, write_error
from planner.sweep.grid import Grid
from planner.units import json_safe

BACKENDS = ("local", "processes", "dask", "ray")
FORMATS = {".parquet": "Parquet", ".csv": "CSV"}
"""The formats a sweep writes, by the suffix of --out (case-insensitive)."""
_MANIFEST = "manifest.json"
_GRID_KEY = b"planner.grid_sha256"
"""Parquet schema metadata key of a chunk file: the sha256 of the grid it belongs to."""


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What a sweep did."""

    out: Path
    points: int
    """Points the grid holds (after its constraints)."""
    rows: int
    """Rows written (after `keep`)."""
    errors: int
    """Points that could not be predicted (their row holds `error`)."""
    resumed_chunks: int
    """Chunks found on disk from an interrupted run and not predicted again."""
    wall_s: float
    backend: str
    predicted: int = 0
    """Points predicted by this run (the others were resumed from disk)."""


_ENCODER = json.JSONEncoder(default=str)  # one encoder: json.dumps(..., default=str) builds one per call
_TEXTS: dict[tuple, str] = {}


def flatten(out: dict, prefix: str = "") -> dict:
    """A prediction's JSON as one flat row: nested mappings as `a.b`, lists as JSON text, a non-finite
    number as None (null, as `predict --configs` prints it)."""
    row = {}
    for key, value in out.items():
        kind = type(value)
        name = prefix + key if prefix else key
        if kind is float:
            row[name] = value if isfinite(value) else None
        elif kind is str or kind is int or kind is bool or value is None:
            row[name] = value
        elif kind is dict:
            row.update(flatten(value, name + "."))
        elif kind is list or kind is tuple:
            row[name] = _list_text(key, value)
        else:
            row[name] = value
    return row


def _list_text(key: str, value) -> str:
    """A list as the JSON text json.dumps writes: a range (two finite floats) and the recurring lists of
    texts (notes, catalog rows) without the encoder's cost."""
    if len(value) == 2 and type(value[0]) is float and type(value[1]) is float and isfinite(value[0]) \
            and isfinite(value[1]):
        return f"[{value[0]!r}, {value[1]!r}]"
    if value and all(type(v) is float and isfinite(v) for v in value):
        return "[" + ", ".join(map(float.__repr__, value)) + "]"
    if all(type(v) is str for v in value):
        text = _TEXTS.get(texts := tuple(value))
        if text is None:
            if len(_TEXTS) >= 4096:
                _TEXTS.clear()
            text = _TEXTS[texts] = _ENCODER.encode(value)
        return text
    return _ENCODER.encode(json_safe(value))


def predict_point(ident: int, point: dict, texts: tuple[str, ...] = ()) -> dict:
    """One point as `planner predict --configs` predicts it (its JSON line), flattened, with `in.<key>`
    (as text for the keys in `texts`: an axis mixing texts and numbers, Grid.texts)."""
    from planner.predict.api import predict, request_from_row

    try:
        out = {"id": ident, **predict(request_from_row(point)).as_dict(safe=False)}  # flatten makes it JSON-safe
    except PlannerError as exc:
        out = {"id": ident, "error": " ".join(str(exc).split())}
    row = flatten(out)
    row.update({f"in.{k}": str(v) if k in texts else v for k, v in point.items()})
    return row


def predict_chunk(points: list[tuple[int, dict]], keep: tuple[tuple[str, object], ...] = (),
                  texts: tuple[str, ...] = ()) -> list[dict]:
    """Rows of `points` ((id, point) pairs) that pass `keep`, and every point that could not be
    predicted (its row holds `error`: a filter never hides a failure); what every backend runs (a worker
    process through worker_chunk)."""
    rows = []
    for ident, point in points:
        row = predict_point(ident, point, texts)
        if "error" in row or all(row.get(column) == value for column, value in keep):
            rows.append(row)
    return rows


def worker_chunk(points: list[tuple[int, dict]], keep: tuple[tuple[str, object], ...] = (),
                 texts: tuple[str, ...] = ()) -> list[dict]:
    """predict_chunk in a worker process of the processes, dask or ray backend, which is set up for it
    first (_one_thread). The local backend runs predict_chunk in the caller's process, which it leaves as
    it is: the process belongs to the caller (the CLI, the app's server, a user's script)."""
    _one_thread()
    return predict_chunk(points, keep, texts)


_SET_UP = False


def _one_thread() -> None:
    """Once per process: one torch thread (a worker counts graphs on meta tensors: more threads would
    only contend), and what the process holds so far frozen out of the garbage collector, as the `planner`
    command does for its own (a collection then skips torch's objects and the graphs cached so far:
    benchmarks/sweep_speed.py's one-core rate 8,550 -> 9,000 points/s)."""
    global _SET_UP
    if _SET_UP:
        return
    import gc

    import torch
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    gc.freeze()
    _SET_UP = True


def run_sweep(grid: Grid, out: str | Path, backend: str = "local", workers: int = 1, address: str | None = None,
              progress: Callable[[int], None] | None = None, total: Callable[[int, int], None] | None = None,
              checking: Callable[[int, int], None] | None = None) -> SweepResult:
    """Predict every point of `grid` into the file `out` (Parquet or CSV by its suffix: FORMATS) on `backend`
    ("local", "processes", "dask" or "ray"; `address` a cluster's, None to start a local one of `workers`
    workers). `total(points, done)` is called once the grid is counted, `progress(n)` as each chunk of n points
    lands."""
    from planner.sweep.grid import check_names

    start = time.perf_counter()
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend '{backend}'; valid: {', '.join(BACKENDS)}")
    out = _out_path(out)
    check_names(grid)
    # evaluates every constraint: a bad one stops here, before any file; `checking(seen, size)` reports progress
    # through a large grid (10^8 points take minutes)
    points = sum(1 for _ in grid.points(None if checking is None else (lambda seen: checking(seen, grid.size))))
    _check_keep(grid)
    # one writer per --out: a second sweep of the same output stops here, naming the first
    with exclusive_lock(out.with_name(f".{out.name}.lock"), f"--out '{out}'"):
        return _run_locked(grid, out, points, backend, workers, address, progress, total, start)


def _run_locked(grid: Grid, out: Path, points: int, backend: str, workers: int, address: str | None,
                progress, total, start: float) -> SweepResult:
    """run_sweep's work once --out is locked."""
    _remove_stale_joins(out)
    parts = _parts_dir(out, grid)
    done = {int(p.stem.split("-")[1]) for p in parts.glob("chunk-*.parquet")}
    resumed = min(points, sum(_chunk_len(k, points, grid.chunk) for k in done))
    if total is not None:
        total(points, resumed)
    # no point kept: nothing to predict, and the grid is not walked a second time
    todo = ((k, chunk) for k, chunk in grid.chunks() if k not in done) if points else iter(())
    for number, rows in _map(backend, todo, (grid.keep, grid.texts), workers, address):
        _write_part(parts, number, rows, grid.digest)
        if progress is not None:
            progress(_chunk_len(number, points, grid.chunk))
    written, errors = _join(parts, out, [f"in.{k}" for k, _ in grid.axes])
    shutil.rmtree(parts, ignore_errors=True)
    return SweepResult(out, points, written, errors, len(done), time.perf_counter() - start, backend,
                       points - resumed)


def _check_keep(grid: Grid, tries: int = 8) -> None:
    """Refuse a `keep` naming a column predictions do not have (it would drop every predicted row), read
    from the row of the first of the grid's first `tries` points that predicts; ConfigError naming it and
    the columns there are."""
    if not grid.keep:
        return
    for _, point in itertools.islice(grid.points(), tries):
        row = predict_point(0, point, grid.texts)
        if "error" not in row:
            missing = [column for column, _ in grid.keep if column not in row]
            if missing:
                columns = ", ".join(sorted(k for k in row if not k.startswith("in.") and k != "id"))
                raise ConfigError(f"keep: {', '.join(missing)} is not a column of the predictions; columns: "
                                  f"{columns}")
            return


def _out_path(out: str | Path) -> Path:
    """`out` as a Path a sweep may write: a file (not a folder) in a folder that exists, named .parquet or
    .csv (FORMATS), new or a sweep's own output (never another file overwritten); ConfigError otherwise."""
    if not str(out).strip():
        raise ConfigError("--out is empty; give a file path such as sweep.parquet")
    folder = str(out).endswith(("/", os.sep))  # Path() drops the trailing separator
    out = Path(out)
    shown = shorten(str(out))
    # the parts folder and the lock file add up to 7 characters to the name: keep it within the 255-byte limit
    if len(out.name.encode("utf-8", "surrogatepass")) > 240:
        raise ConfigError(f"--out '{shown}': a file name of {len(out.name):,} characters; the limit is 240 bytes")
    try:
        return _checked_out(out, folder, shown)
    except OSError as exc:  # a path the file system refuses (a component too long, a loop of links)
        raise ConfigError(f"--out '{shown}': {exc.strerror or type(exc).__name__}") from None


def _checked_out(out: Path, folder: bool, shown: str) -> Path:
    if folder or out.is_dir():
        raise ConfigError(f"--out '{shown}' is a folder; give a file path such as sweep.parquet")
    if not out.parent.is_dir():
        raise ConfigError(f"--out '{shown}': folder '{out.parent}' does not exist")
    if out.exists() or out.is_symlink():
        if not out.is_file() or not _is_sweep(out):
            raise ConfigError(f"--out '{shown}' exists and is not a sweep's {FORMATS.get(_suffix(out), 'Parquet')} "
                              "file; a sweep replaces only its own output: remove the file or give another --out")
    if _suffix(out) not in FORMATS:
        what = (f"suffix '{_suffix(out)}' is not a format a sweep writes" if _suffix(out)
                else "no suffix to tell the format")
        raise ConfigError(f"--out '{shown}': {what}; valid: "
                          + ", ".join(f"{suffix} ({name})" for suffix, name in FORMATS.items()))
    if not os.access(out.parent, os.W_OK):
        raise ConfigError(f"--out '{shown}': folder '{out.parent}' is not writable")
    return out


def _suffix(path: Path) -> str:
    return path.suffix.lower()


def read_out(path: str | Path):
    """The rows of a sweep's output file as a DataFrame, read as its suffix says (FORMATS)."""
    if _suffix(Path(path)) == ".csv":
        import pyarrow.csv as pc
        # an empty cell is a null, as in the Parquet file (the `error` of a point that predicted)
        return pc.read_csv(path, convert_options=pc.ConvertOptions(strings_can_be_null=True)).to_pandas()
    import pandas as pd
    return pd.read_parquet(path)


def _is_sweep(path: Path) -> bool:
    """True for a file holding a sweep's columns (summary.SWEEP_COLUMNS): a Parquet file (its footer only is
    read), or under a .csv name a CSV file (its header only)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from planner.sweep.summary import SWEEP_COLUMNS

    if _suffix(path) == ".csv":
        import csv
        try:
            with open(path, newline="", encoding="utf-8") as f:
                header = next(csv.reader([f.readline(2**20)]), [])
        except (OSError, UnicodeDecodeError, csv.Error):
            return False
        return set(SWEEP_COLUMNS) <= set(header)
    try:
        names = set(pq.read_schema(path).names)
    except (pa.ArrowException, OSError, ValueError):
        return False
    return set(SWEEP_COLUMNS) <= names


def _remove_stale_joins(out: Path) -> None:
    """Remove what a join killed before its rename left (`.<out name>.*.tmp` beside `out`)."""
    for stale in out.parent.glob(f".{glob.escape(out.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()


def _chunk_len(number: int, points: int, chunk: int) -> int:
    return max(0, min(chunk, points - number * chunk))


def _parts_dir(out: Path, grid: Grid) -> Path:
    """The parts folder of `out`, created with its manifest, or an interrupted run's of the same grid. The
    chunks on disk must each name this grid (their Parquet metadata): chunks of another grid, or that name
    none, are never merged, whatever the manifest says or if it is gone (a kill during the final clean-up
    removes it first or last); ConfigError then, nothing removed."""
    parts = out.with_name(out.name + ".parts")
    manifest = parts / _MANIFEST
    chunks = sorted(parts.glob("chunk-*.parquet")) if parts.is_dir() else []
    if chunks:
        foreign = [c.name for c in chunks if _chunk_grid(c) != grid.digest]
        if foreign:
            raise ConfigError(f"'{parts}' holds an interrupted sweep of another grid ({len(foreign):,} chunk(s) "
                              f"that do not name this grid, {foreign[0]} first): remove that folder to start this "
                              "grid there, or give another --out")
    if parts.is_dir() and manifest.is_file():
        try:
            seen = json.loads(manifest.read_text())
        except (OSError, ValueError):
            seen = {}
        if seen.get("grid_sha256") == grid.digest:
            return parts
        if seen.get("grid_sha256") and chunks:
            raise ConfigError(f"'{parts}' holds an interrupted sweep of another grid; remove that folder "
                              "to start this grid there, or give another --out")
    parts.mkdir(exist_ok=True)
    from planner.files import write_text_atomic
    write_text_atomic(manifest, json.dumps({"grid_sha256": grid.digest, "chunk": grid.chunk}))
    return parts


def _chunk_grid(path: Path) -> str | None:
    """The grid sha256 a chunk file names in its Parquet metadata; None when unreadable or absent."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError, ValueError):
        return None
    value = meta.get(_GRID_KEY)
    return value.decode("ascii", "replace") if value else None


def _write_part(parts: Path, number: int, rows: list[dict], grid_digest: str) -> None:
    """Write one chunk's rows atomically (a temporary file in the same folder, renamed). Each column's
    type is read from its values alone, so a whole-number column stays int64 where an error row leaves
    it empty (pandas would make it float64)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = list(dict.fromkeys(key for row in rows for key in row)) or ["id"]
    table = pa.table({name: [row.get(name) for row in rows] for name in names}) if rows else \
        pa.table({"id": pa.array([], pa.int64())})
    # each chunk names its grid: a resume proves from the chunks themselves that they are this grid's
    table = table.replace_schema_metadata({_GRID_KEY: grid_digest.encode()})
    target = parts / f"chunk-{number:08d}.parquet"
    try:
        fd, tmp = tempfile.mkstemp(prefix=".chunk-", suffix=".tmp", dir=parts)
    except OSError as exc:
        raise write_error(target, exc) from None
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # a full disk: pyarrow's IO errors are OSErrors
            raise write_error(target, exc) from None
        raise


def _join(parts: Path, out: Path, inputs: list[str]) -> tuple[int, int]:
    """Join the chunk files in order into `out` (atomically; Parquet, or CSV for a .csv name) under one
    schema, with every `inputs` column (the grid's `in.<key>`) even when no row was kept, so that the file
    still reads as a sweep; (rows, error rows)."""
    import pyarrow as pa
    import pyarrow.csv as pc
    import pyarrow.parquet as pq

    files = sorted(parts.glob("chunk-*.parquet"))
    # the inputs as null columns: a kept row's own type wins (permissive promotion from null)
    schemas = [pq.read_schema(f) for f in files] + [pa.schema([("id", pa.int64())] + [(n, pa.null()) for n in inputs])]
    schema = pa.unify_schemas(schemas, promote_options="permissive")
    names = ["id"] + sorted(n for n in schema.names if n != "id" and not n.startswith("in.")) + sorted(
        n for n in schema.names if n.startswith("in."))
    schema = pa.schema([schema.field(n) for n in names])
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise write_error(out, exc) from None
    os.close(fd)
    rows = errors = 0
    try:
        os.chmod(tmp, new_file_mode())  # mkstemp's 0600 -> what open() would give
        with (pc.CSVWriter if _suffix(out) == ".csv" else pq.ParquetWriter)(tmp, schema) as writer:
            for f in files:
                table = pq.read_table(f)
                columns = [table.column(n).cast(schema.field(n).type) if n in table.column_names
                           else pa.nulls(table.num_rows, schema.field(n).type) for n in names]
                writer.write_table(pa.Table.from_arrays(columns, schema=schema))
                rows += table.num_rows
                if "error" in table.column_names:
                    errors += table.num_rows - table.column("error").null_count
        os.replace(tmp, out)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise write_error(out, exc) from None
        raise
    return rows, errors


def _map(backend: str, chunks: Iterator[tuple[int, list]], args: tuple, workers: int, address: str | None
         ) -> Iterator[tuple[int, list[dict]]]:
    """(chunk number, rows) as chunks finish, in any order, each chunk's rows predict_chunk(chunk, *args);
    at most 2 x workers chunks in flight."""
    if backend == "local":
        for number, chunk in chunks:
            yield number, predict_chunk(chunk, *args)
    elif backend == "processes":
        yield from _processes(chunks, args, workers)
    elif backend == "dask":
        yield from _dask(chunks, args, workers, address)
    else:
        yield from _ray(chunks, args, workers, address)


def _bounded(submit, wait_one, chunks, limit: int):
    """Submit chunks keeping at most `limit` in flight; yield (number, rows) as each completes."""
    pending = {}
    for number, chunk in chunks:
        pending[submit(chunk)] = number
        while len(pending) >= limit:
            handle, rows = wait_one(pending)
            yield pending.pop(handle), rows
    while pending:
        handle, rows = wait_one(pending)
        yield pending.pop(handle), rows


def _processes(chunks, args: tuple, workers: int):
    import multiprocessing
    import queue

    done: queue.SimpleQueue = queue.SimpleQueue()

    def submit(chunk):
        handle = object()
        pool.apply_async(worker_chunk, (chunk, *args), callback=lambda rows: done.put((handle, rows, None)),
                         error_callback=lambda exc: done.put((handle, None, exc)))
        return handle

    def wait_one(pending):
        handle, rows, exc = done.get()
        if exc is not None:
            raise exc
        return handle, rows

    # spawn: a forked child would inherit torch's thread pools mid-state. The workers ignore SIGINT (a
    # Ctrl-C reaches the whole process group): this process alone stops, and leaving the `with` on any
    # exit, an interrupt included, terminates them; a worker interrupted inside the pool's queue lock
    # would leave the others waiting on it for ever (ProcessPoolExecutor's shutdown did)
    with multiprocessing.get_context("spawn").Pool(workers, initializer=_ignore_interrupts) as pool:
        yield from _bounded(submit, wait_one, chunks, 2 * workers)


def _ignore_interrupts() -> None:
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _dask(chunks, args: tuple, workers: int, address: str | None):
    try:
        from dask.distributed import Client, LocalCluster, wait
    except ImportError:
        raise ConfigError("the Dask backend needs the dask extra: pip install 'planner[dask]'") from None
    cluster = None
    try:
        if address is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
        else:
            client = _dask_client(Client, address)
    except OSError as exc:
        raise ConfigError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        limit = 2 * max(1, len(client.scheduler_info().get("workers", {})) or workers)

        def wait_one(pending):
            finished = wait(list(pending), return_when="FIRST_COMPLETED").done
            future = next(iter(finished))
            return future, future.result()

        yield from _bounded(lambda c: client.submit(worker_chunk, c, *args, pure=False), wait_one, chunks, limit)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


DASK_CONNECT_S = 10
"""Seconds to reach a Dask scheduler and finish its handshake before the sweep stops with a message."""


def _dask_client(Client, address: str):
    """A Dask client of the scheduler at `address`, or ConfigError within about DASK_CONNECT_S seconds: no
    answer, or an answer that is not a Dask scheduler's (a web server, a closed port), which Dask would otherwise
    wait on without end or read as a frame length of exabytes (MemoryError)."""
    import dask

    _probe_dask(address)
    reason = None
    # the TCP timeout (kernel keep-alive probes) must be at least 11 s in distributed (comm/tcp.py)
    with dask.config.set({"distributed.comm.timeouts.connect": f"{DASK_CONNECT_S}s",
                          "distributed.comm.timeouts.tcp": f"{max(12, DASK_CONNECT_S)}s"}):
        try:
            return Client(address, timeout=f"{DASK_CONNECT_S}s")
        except (OSError, TimeoutError) as exc:
            reason = f"no Dask scheduler answered within {DASK_CONNECT_S} s ({type(exc).__name__})"
        except (MemoryError, ValueError, TypeError, EOFError) as exc:
            reason = f"what answered is not a Dask scheduler ({type(exc).__name__})"
    raise ConfigError(f"cannot reach the Dask scheduler at {address}: {reason}; start one with `dask scheduler` "
                      "or use --cluster dask-local")


def _probe_dask(address: str) -> None:
    """ConfigError unless what listens at tcp://HOST:PORT speaks first as a Dask scheduler does: on a connection
    it writes its handshake at once, a frame of a small length (a web server or a silent port waits for the
    client, which Dask's own client would then wait on without end)."""
    import socket
    import struct

    host, _, port = address.removeprefix("tcp://").rpartition(":")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=DASK_CONNECT_S) as sock:
            sock.settimeout(min(5, DASK_CONNECT_S))
            first = b""
            while len(first) < 8:
                more = sock.recv(8 - len(first))
                if not more:
                    break
                first += more
    except TimeoutError:
        first = b""
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot reach the Dask scheduler at {address}: {exc.__class__.__name__}"
                          f"{': ' + exc.strerror if getattr(exc, 'strerror', None) else ''}; start one with "
                          "`dask scheduler` or use --cluster dask-local") from None
    if len(first) < 8 or not 0 < struct.unpack("<Q", first)[0] <= 2**20:
        what = "sent nothing" if not first else "sent what a Dask scheduler does not"
        raise ConfigError(f"what answers at {address} is not a Dask scheduler (it {what} on connecting); give the "
                          "scheduler's address (`dask scheduler` prints it) or use --cluster dask-local")


def _ray(chunks, args: tuple, workers: int, address: str | None):
    try:
        import ray
    except ImportError:
        raise ConfigError("the Ray backend needs the ray extra: pip install 'planner[ray]'") from None
    started = False
    if not ray.is_initialized():
        try:
            if address is None:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
            else:
                ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot start or reach Ray ({address or 'local'}): {' '.join(str(exc).split())}") from None
        started = True
    try:
        remote = ray.remote(num_cpus=1)(worker_chunk)
        limit = 2 * max(1, int(ray.cluster_resources().get("CPU", workers)))

        def wait_one(pending):
            ready, _ = ray.wait(list(pending), num_returns=1)
            return ready[0], ray.get(ready[0])

        yield from _bounded(lambda c: remote.remote(c, *args), wait_one, chunks, limit)
    finally:
        if started:
            ray.shutdown()
