"""`planner sweep GRID.yaml`: predict every point of a grid into Parquet, here or on a cluster."""

from __future__ import annotations

import argparse
import sys

from planner.cli.args import fmt_time
from planner.errors import ConfigError, shorten

CLUSTERS = "dask-local, ray-local, dask://HOST:PORT, tcp://HOST:PORT (Dask), ray://HOST:PORT"


def add_sweep(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="predict every point of a grid of configurations into Parquet or CSV",
                       description="Expand GRID.yaml (axes of --configs keys, constraints, filters), predict every "
                                   "point and write one row per point (Parquet, or CSV for --out *.csv); print the "
                                   "Pareto front of cost vs latency vs throughput and the best point per device. Run "
                                   "again with the same grid and --out to resume an interrupted sweep.")
    p.add_argument("grid", help="the grid file (YAML); see examples/sweeps/serving.yaml")
    p.add_argument("--out", default="sweep.parquet",
                   help="file to write: Parquet for a .parquet name, CSV for .csv (default sweep.parquet)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1: in this process)")
    p.add_argument("--cluster", default=None, help=f"run on a cluster instead: {CLUSTERS}")
    p.add_argument("--top", type=int, default=10, help="Pareto rows to print (default 10)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_sweep)


def backend_of(workers: int, cluster: str | None) -> tuple[str, str | None]:
    """(backend, cluster address or None for a local cluster) of --workers and --cluster."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 1024:
        raise ConfigError(f"--workers must be a whole number in 1..1024, got {workers!r}")
    if cluster is None:
        return ("local" if workers == 1 else "processes"), None
    if cluster == "dask-local":
        return "dask", None
    if cluster == "ray-local":
        return "ray", None
    for scheme, backend, prefix in (("dask://", "dask", "tcp://"), ("tcp://", "dask", "tcp://"),
                                    ("ray://", "ray", "ray://")):
        if cluster.startswith(scheme):
            return backend, prefix + _host_port(cluster, scheme)
    raise ConfigError(f"--cluster '{shorten(cluster)}' is not one of: {CLUSTERS}")


def _host_port(cluster: str, scheme: str) -> str:
    """HOST:PORT of a --cluster address, checked (a host name or IP, IPv6 in brackets; a port in 1..65535);
    ConfigError naming the address and what is valid."""
    from urllib.parse import urlsplit

    rest = cluster.removeprefix(scheme)
    shown = shorten(cluster)
    port_eg = 10001 if scheme == "ray://" else 8786  # Ray's client server and Dask's scheduler ports
    try:
        parts = urlsplit("tcp://" + rest)
        host, port = parts.hostname, parts.port
    except ValueError as exc:  # an unclosed '[' of an IPv6 address, a port that is not a number or out of range
        raise ConfigError(f"--cluster '{shown}' is not a valid {scheme}HOST:PORT address ({exc}); e.g. "
                          f"{scheme}10.0.0.5:{port_eg} or {scheme}[::1]:{port_eg}") from None
    if not host or port is None or parts.path or parts.query or parts.fragment or "@" in rest:
        raise ConfigError(f"--cluster '{shown}' needs a host and a port, nothing else: {scheme}HOST:PORT, e.g. "
                          f"{scheme}10.0.0.5:{port_eg}")
    if not 1 <= port <= 65535:
        raise ConfigError(f"--cluster '{shown}': port {port} is not in 1..65535")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def cmd_sweep(args: argparse.Namespace) -> int:
    from planner.sweep.grid import load_grid
    from planner.sweep.run import read_out, run_sweep
    from planner.sweep.summary import best_per_device, measures, pareto_front

    backend, address = backend_of(args.workers, args.cluster)
    if not 0 <= args.top <= 10_000:
        raise ConfigError(f"--top must be in 0..10,000, got {args.top}")
    grid = load_grid(args.grid)
    bar = None

    def total(points: int, done: int) -> None:
        nonlocal bar
        from tqdm import tqdm
        bar = tqdm(total=points, initial=done, unit="pt", file=sys.stderr, dynamic_ncols=True,
                   disable=True if args.no_progress else None)  # None: off when stderr is not a terminal

    def checking(seen: int, size: int) -> None:
        # a large grid whose constraints drop most points is silent for minutes without this: a line per
        # 2^20 points looked at (planner.sweep.grid.CHECK_REPORT), also when stderr is not a terminal
        if not args.no_progress:
            print(f"sweep: checking the grid's constraints: {seen:,} of {size:,} points looked at",
                  file=sys.stderr, flush=True)

    try:
        result = run_sweep(grid, args.out, backend, args.workers, address,
                           progress=lambda n: bar.update(n) if bar is not None else None, total=total,
                           checking=checking)
    finally:
        if bar is not None:
            bar.close()
    frame = measures(read_out(result.out))
    print(f"sweep          {_count(result.points, 'point')} ({grid.size:,} before constraints), "
          f"{_count(result.rows, 'row')} written to {result.out}, {_count(result.errors, 'error')}")
    if result.errors:
        print(f"               the {_count(result.errors, 'point')} that could not be predicted say why in the "
              "'error' column (written whatever `keep` asks)")
    rate = (result.predicted / result.wall_s) if result.wall_s > 0 else float("inf")
    resumed = f", {_count(result.resumed_chunks, 'chunk')} resumed from disk" if result.resumed_chunks else ""
    print(f"run            backend {result.backend}, {_count(result.predicted, 'point')} predicted in "
          f"{fmt_time(result.wall_s)} ({rate:,.0f} points/s){resumed}")
    # the axes that vary besides those every table shows: rows that differ only there must not look alike
    shown = {"model", "device", "gpus", "tp", "batch", "pricing", "site", "engine"}
    varying = [k for k, values in grid.axes if len(values) > 1 and k not in shown]
    front = pareto_front(frame)
    for (unit, model), group in front.groupby(["unit", "in.model"], sort=True):
        more = f", the {args.top} cheapest shown" if len(group) > args.top else ""
        print(f"\n{model}: Pareto front of cost, latency and throughput, per {unit}: "
              f"{_count(len(group), 'point')}{more}")
        _table(group.head(args.top), unit, varying)
    best = best_per_device(frame)
    for (unit, model), group in best.groupby(["unit", "in.model"], sort=True):
        print(f"\n{model}: best point per device, per {unit} (least cost)")
        _table(group, unit, varying)
    return 0


def _price_marks(row) -> list[str]:
    """What `planner predict` says of a point's price that a cost column alone hides: a price older than
    the catalog allows (price_stale), and devices paid for but idle (a 1-GPU point on an 8-GPU spot
    instance pays for 8)."""
    from planner.predict.prediction import IDLE_NOTE

    marks = ["stale price"] if row.get("price_stale") is True else []
    idle = IDLE_NOTE.search(str(row.get("notes") or ""))
    if idle:
        marks.append(f"pays for {idle.group(1)} idle")
    return marks


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _table(rows, unit: str, varying: list[str]) -> None:
    extra = "".join(f" {k[:10]:>10}" for k in varying)
    print(f"{'id':>8} {'model':<18} {'device':<14} {'gpus':>4} {'tp':>3} {'batch':>6}{extra} "
          f"{'$/1M ' + unit.split()[-1][:6]:>14} {'latency':>10} {'throughput/s':>13}  engine, pricing")
    for _, r in rows.iterrows():
        batch = r.get("batch")
        batch = "-" if batch is None or batch != batch else f"{int(batch)}"
        values = "".join(f" {str(r.get('in.' + k))[:10]:>10}" for k in varying)
        site = r.get("in.site")
        priced = f"site {site}" if isinstance(site, str) and site else (r.get("in.pricing") or "on_demand")
        marks = _price_marks(r)
        priced += f" ({'; '.join(marks)})" if marks else ""
        print(f"{int(r['id']):>8} {str(r['model'])[:18]:<18} {str(r['device'])[:14]:<14} {int(r['gpus']):>4} "
              f"{int(r['tp']):>3} {batch:>6}{values} {r['usd_per_unit'] * 1e6:>14.4f} {fmt_time(r['latency_s_']):>10} "
              f"{r['throughput_per_s']:>13,.1f}  {r.get('engine', '')}, {priced}")
