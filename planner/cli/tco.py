"""`planner tco`: renting one server's worth of a device against owning the server (planner/plan/tco.py),
itemized over the term, line by line with each line's source, and where the two break even. Every line's
default comes from hardware_specs/ (onprem_costs.csv, sites.csv, onprem_servers.csv, instances.csv); a
flag overrides it, and 0 leaves it out."""

from __future__ import annotations

import argparse
import json

from planner.cli import progress
from planner.cli.args import finite_float
from planner.units import GB, TB, json_safe

LINES = (  # flag, compare_tco keyword, factor from the flag's unit to SI, help
    ("--network-fraction", "network_fraction", 1.0,
     "network fabric (switches, NICs, cabling) as a fraction of the server's price, bought with it (default 0.125)"),
    ("--support-fraction-per-year", "support_fraction_per_year", 1.0,
     "support/maintenance contract as a fraction of capex per year (default 0.125)"),
    ("--staff-usd-per-server-year", "staff_usd_per_server_per_year", 1.0,
     ("people running the servers, USD per server per year (default: the site's operations figure, else "
      "FTE per 1000 devices x loaded USD per FTE-year)")),
    ("--residual-fraction", "residual_fraction", 1.0,
     "resale value at the end of a server's life as a fraction of capex, credited then (default 0.30)"),
    ("--storage-tb", "storage_bytes", TB, "storage kept on both sides, TB (default 0)"),
    ("--onprem-storage-usd-per-tb-month", "onprem_storage_usd_per_byte_month", 1 / TB,
     "on-prem storage price, USD per TB-month (no sourced default: 0)"),
    ("--cloud-storage-usd-per-tb-month", "cloud_storage_usd_per_byte_month", 1 / TB,
     "cloud storage price, USD per TB-month (default 23, S3 Standard)"),
    ("--egress-gb-per-month", "egress_bytes_per_month", GB, "data sent out of the cloud, GB per month (default 0)"),
    ("--egress-usd-per-gb", "egress_usd_per_byte", 1 / GB, "cloud egress price, USD per GB (default 0.09, AWS)"),
)


def add_tco(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tco", help="rent or own one server's worth of a device: the term's bill line by line",
                       description="Compare renting a server's worth of devices in the cloud with buying and "
                                   "running the server: each cost line over the term with its source, the "
                                   "break-even month and utilization. 0 leaves a line out.")
    p.add_argument("device", help="catalog device id or alias (one with an on-prem server)")
    p.add_argument("--site", default="us-virginia-colo", help="site id from hardware_specs/sites.csv")
    p.add_argument("--server", help="on-prem server id (default: the first in the catalog with the device)")
    p.add_argument("--instance", help="cloud instance key (default: the cheapest on demand per device)")
    p.add_argument("--months", type=int, default=36, help="term in months (default 36)")
    p.add_argument("--utilization", type=finite_float, default=1.0, help="share of hours used, (0, 1] (default 1)")
    p.add_argument("--discount", type=finite_float, default=0.0, help="fraction off the cloud price, [0, 1)")
    price = p.add_mutually_exclusive_group()
    price.add_argument("--price-usd-per-device-h", type=finite_float, help="cloud price override per device-hour")
    price.add_argument("--price-usd-per-h", type=finite_float, help="cloud price override per instance-hour")
    p.add_argument("--capex-usd", type=finite_float, help="server price override, USD")
    for flag, _, _, text in LINES:
        p.add_argument(flag, type=finite_float, help=text)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tco)


def cmd_tco(args: argparse.Namespace) -> int:
    progress.step("importing", of=2)
    from planner.cli import imported
    from planner.plan.tco import compare_tco

    imported()
    progress.step("comparing")
    lines = {key: getattr(args, flag[2:].replace("-", "_")) for flag, key, _, _ in LINES}
    scaled = {key: value * next(f for _, k, f, _ in LINES if k == key)
              for key, value in lines.items() if value is not None}
    t = compare_tco(args.device, args.site, args.instance, args.months, args.utilization,
                    price_usd_per_h=args.price_usd_per_h, discount=args.discount, capex_usd=args.capex_usd,
                    price_usd_per_device_h=args.price_usd_per_device_h, server=args.server, **scaled)
    progress.done()
    last = t.table.iloc[-1]
    if args.json:
        out = {"device": t.device, "server": t.server, "instance": t.instance, "devices": t.devices,
               "months": args.months, "utilization": t.utilization, "cloud_usd": float(last["cloud_usd"]),
               "onprem_usd": float(last["onprem_usd"]), "breakeven_months": t.breakeven_month,
               "breakeven_utilization": t.breakeven_utilization, "breakeven_why": t.breakeven_why,
               "lines": [{"side": x.side, "item": x.item, "usd": x.usd, "source": x.source} for x in t.lines],
               "notes": list(t.notes)}
        print(json.dumps(json_safe(out), indent=2, allow_nan=False))
        return 0
    print(f"{t.devices} x {t.device}: renting ({t.instance or 'price per device-hour'}) against owning {t.server} "
          f"at {args.site}, {args.months} months at {t.utilization:.0%} utilization")
    print(f"{'side':<8} {'line':<44} {'USD':>12}  source")
    for x in t.lines:
        print(f"{x.side:<8} {x.item[:44]:<44} {x.usd:>12,.0f}  {x.source}")
    print(f"{'cloud':<8} {'total':<44} {last['cloud_usd']:>12,.0f}")
    print(f"{'on-prem':<8} {'total':<44} {last['onprem_usd']:>12,.0f}")
    print(f"break-even     {t.breakeven_why}")
    for note in t.notes:
        print(f"note           {note}")
    return 0
