"""Cost page: renting against owning one server's worth of a device (planner.plan.tco). Every number shown
comes from the library's TcoComparison; the page picks the inputs and says which prices, and which dates,
are in effect."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from planner.app.common import context, dated, hardware_key, purpose, shown

PER = {"device": "device-hour (one GPU or accelerator)", "instance": "instance-hour (the whole instance)"}
"""What a price override is per: the radio's options."""
OPTIONS = {"cloud_usd": "rent (cloud)", "onprem_usd": "own (on-prem)"}
"""The chart's lines: the library table's columns."""


def _shown(labels: dict):
    """A select box's format_func: a choice's label; a label (what streamlit.testing may pass back) as itself."""
    return lambda choice: labels.get(choice, choice)


LINES = (  # key, compare_tco keyword, label (its unit first), factor from the shown unit to SI, max, step, help
    ("cost_network", "network_fraction", "Network fabric (% of server capex)", 0.01, 100.0, 0.5,
     "Switches, NICs and cabling bought with each server, as a share of its price"),
    ("cost_support", "support_fraction_per_year", "Support contract (% of capex per year)", 0.01, 100.0, 0.5,
     "The vendor's support/maintenance contract per year, as a share of the capex (server and network)"),
    ("cost_staff", "staff_usd_per_server_per_year", "Staff ($ per server per year)", 1.0, 1e7, 1000.0,
     ("The people who run the servers: the site's operations figure where it has one, else FTE per 1000 "
      "devices x loaded salary. Counted once (it is the site's operations cost, not added to it)")),
    ("cost_residual", "residual_fraction", "Residual value (% of capex at end of life)", 0.01, 99.0, 1.0,
     ("Resale value of a server when its life ends, credited then; a server still in service at the end of "
      "the horizon is not credited")),
    ("cost_storage_tb", "storage_bytes", "Storage kept (TB, both sides)", 1e12, 1e6, 10.0,
     "Data kept next to the devices, billed on both sides at their prices below"),
    ("cost_onprem_storage", "onprem_storage_usd_per_byte_month", "On-prem storage ($ per TB-month)", 1e-12,
     1e6, 1.0, "No sourced default: give your price per TB-month, or on-prem storage counts as 0"),
    ("cost_cloud_storage", "cloud_storage_usd_per_byte_month", "Cloud storage ($ per TB-month)", 1e-12, 1e6, 1.0,
     "The cloud's price per TB-month of storage"),
    ("cost_egress_gb", "egress_bytes_per_month", "Cloud egress (GB per month)", 1e9, 1e9, 100.0,
     "Data sent out of the cloud each month (results, checkpoints, responses)"),
    ("cost_egress_price", "egress_usd_per_byte", "Cloud egress price ($ per GB)", 1e-9, 100.0, 0.01,
     "The cloud's price per GB sent to the internet"),
)
"""The other cost lines' overrides: empty = the catalog's sourced default, 0 leaves the line out."""


@st.cache_data(show_spinner=False)
def tco(hw: str, device: str, site: str, server: str, instance: str | None, months: int, utilization: float,
        price: float | None, per: str, discount: float, capex: float | None, lines: tuple = ()):
    """compare_tco with the page's inputs; `lines`: (compare_tco keyword, SI value) of each other line overridden."""
    from planner.plan.tco import compare_tco
    override = {"price_usd_per_device_h": price} if per == "device" else {"price_usd_per_h": price}
    return compare_tco(device, site, instance, months, utilization, discount=discount, capex_usd=capex,
                       ctx=context(), server=server, **override, **dict(lines))


def _lines(site: str, server: str) -> tuple:
    """The other lines' inputs, in an expander: (compare_tco keyword, SI value) of each one given."""
    from planner.plan.tco import line_defaults
    defaults = line_defaults(site, server, context())
    given = []
    with st.expander("Other cost lines: network, support, staff, resale, storage, egress (empty = sourced default, "
                     "0 = leave out)"):
        cols = st.columns(3)
        for i, (key, kw, label, factor, top, step, text) in enumerate(LINES):
            default = defaults.get(kw)
            shown_default = "none" if default is None else f"{default / factor:,.4g}"
            value = cols[i % 3].number_input(label, min_value=0.0, max_value=top, value=None, step=step, key=key,
                                             placeholder=f"default {shown_default}",
                                             help=f"{text}. Empty: the default ({shown_default}; sources in the "
                                                  "table below); 0 leaves the line out")
            if value is not None:
                given.append((kw, value * factor))
    return tuple(given)


def page() -> None:
    purpose("Cost: renting or owning", "Cumulative cost of renting a server's worth of devices against buying and "
            "running the server, month by month, and where they cross.")
    ctx = context()
    servers = sorted(ctx.catalog.servers.values(), key=lambda s: s.id)
    owned = sorted({s.device_id for s in servers})
    if not owned:
        st.info("No on-prem server in the catalog: add one with a device on the Your hardware page.")
        return
    top = st.columns(3)
    device = top[0].selectbox("Device (one with an on-prem server)", owned, key="cost_device",
                              help="Every device with a server in hardware_specs/onprem_servers.csv, and your own "
                                   "devices from the Your hardware page that came with a server")
    boxes = {s.id: s for s in servers if s.device_id == device}
    server = top[1].selectbox(
        "On-prem server (devices, capex $)", list(boxes), key="cost_server",
        format_func=_shown({i: f"{i}: {s.device_count} devices, ${s.capex_usd:,.0f} (price of {dated(s.date)})"
                            for i, s in boxes.items()}),
        help="The server bought and run on prem; the cloud side rents as many devices as it holds")
    sites = ctx.catalog.sites
    site = top[2].selectbox(
        "Site ($/kWh, PUE, server life in years)", sorted(sites), key="cost_site",
        format_func=_shown({i: f"{i}: ${s.electricity_usd_per_kwh:.3f}/kWh, PUE {s.pue:g}, {s.lifetime_years:g} years"
                            for i, s in sites.items()}),
        help="Where the server runs: electricity price, facility overhead (PUE), colocation fee per kW, and the "
             "years over which the capex is spread (the server's life)")

    offers = sorted((i for i in ctx.catalog.instances_for(device) if "on_demand" in i.price_usd_per_h),
                    key=lambda i: i.price_usd_per_h["on_demand"] / i.device_count)
    by_key = {i.key: i for i in offers}
    instance = None
    if offers:
        instance = st.selectbox(
            "Cloud instance (on-demand $/h for the whole instance)", list(by_key), key="cost_instance",
            format_func=_shown({k: f"{k}: ${i.price_usd_per_h['on_demand']:,.2f}/h for {i.device_count} "
                                   f"device{'s' * (i.device_count > 1)} (price of {dated(i.price_dates['on_demand'])})"
                                for k, i in by_key.items()}),
            help="Cheapest per device first. Its price is scaled to the server's device count, so a one-device "
                 "instance and an eight-device one compare alike")
    else:
        st.info(f"No cloud instance in the catalog carries {device} with an on-demand price: enter a price per "
                "device-hour below to compare owning with.")

    a = st.columns(3)
    months = a[0].slider("Horizon (months)", 6, 120, 36, 6, key="cost_months",
                         help="How many months the chart shows; past the server's life a new server is bought")
    percent = a[1].slider("Utilization (% of hours used)", 5, 100, 80, 5, key="cost_utilization",
                          help="Share of the hours the devices do work: the cloud bills only those hours, an owned "
                               "server draws power only in them and costs its capex and fixed fees regardless")
    discount = a[2].slider("Committed-use discount (% off the cloud price)", 0, 70, 0, 5, key="cost_discount",
                           help="Taken off the cloud price, overridden or not (30 = a 30% commitment discount)")
    b = st.columns(3)
    per = b[0].radio("Price override is per", list(PER) if offers else ["device"], format_func=_shown(PER),
                     key="cost_price_per", horizontal=True,
                     help="Per device-hour: the price of one GPU or accelerator for an hour. Per instance-hour: "
                          "the price of the chosen instance (all its devices) for an hour")
    override = b[1].number_input(
        "Cloud price override ($/h, 0 = catalog price)", min_value=0.0, max_value=1_000_000.0, value=0.0, step=0.5,
        key="cost_price", help="A quoted or negotiated price in place of the catalog's on-demand price, per "
                               "device-hour or per instance-hour as chosen to the left")
    capex = b[2].number_input("Server capex override ($ per server, 0 = catalog)", min_value=0.0,
                              max_value=1e9, value=0.0, step=1000.0, key="cost_capex",
                              help="A quoted purchase price for one server in place of the catalog's")
    lines = _lines(site, server)
    if not offers and not override:
        return
    result = shown(tco, hardware_key(), device, site, server, instance, months, percent / 100, override or None,
                   per, discount / 100, capex or None, lines)
    if result is None:
        return
    _stale(result)
    cols = st.columns(3)
    cols[0].metric("Break-even", f"after {result.breakeven_month:.1f} months" if result.breakeven_month is not None
                   else "never", help="Month after which owning has cost less in all than renting, at this "
                                      "utilization, within the server's life")
    u_star = result.breakeven_utilization
    cols[1].metric("Break-even utilization", "none: renting is cheaper" if u_star is None
                   else "none: owning is cheaper" if u_star <= 0 else f"{u_star:.0%}",
                   help="Renting only the hours used is cheaper below it, owning above (over the server's life)")
    cols[2].metric(f"Cloud $/h for the server's {result.devices} devices", f"${result.cloud_usd_per_h:,.2f}",
                   help=f"${result.cloud_usd_per_device_h:,.4g} per device-hour x {result.devices} devices, after "
                        "the discount")
    last = result.table.iloc[-1]  # cumulative USD at the end of the horizon (month `months`)
    totals = st.columns(3)
    totals[0].metric(f"Renting over {months} months", f"${last['cloud_usd']:,.0f}",
                     help="Cloud cost of the hours used over the whole term, at this utilization and discount")
    totals[1].metric(f"Owning over {months} months", f"${last['onprem_usd']:,.0f}",
                     help="Capex of every server bought in the term with its network, power, colocation, staff, "
                          "support and storage, less the resale of the servers whose life ended")
    cheaper = "owning" if last["onprem_usd"] < last["cloud_usd"] else "renting"
    # the amount under the answer: "owning, by $181,249" is cut to "owning, by $18…" at 1,280 px
    totals[2].metric("Cheaper over the term", cheaper, f"by ${abs(last['cloud_usd'] - last['onprem_usd']):,.0f}",
                     delta_color="off", delta_arrow="off", help="The difference of the two totals to the left")
    later = (result.breakeven_month is not None and result.breakeven_month > months)
    st.info(result.breakeven_why[0].upper() + result.breakeven_why[1:]
            + (f" (past the {months}-month horizon shown)" if later else "") + ".")
    st.caption(_sources(result, ctx.catalog.site(site), override, per, discount))
    _itemized(result, months)
    _chart(result)


def _money(usd: float) -> str:
    """$1,234,567, or -$91,125 for a credit."""
    return f"-${-usd:,.0f}" if usd < 0 else f"${usd:,.0f}"


def _itemized(result, months: int) -> None:
    """The term's bill line by line, each side's lines adding up to its total above, with their sources."""
    frame = result.lines_frame()
    table = pd.DataFrame({"side": frame["side"], "line": frame["item"],
                          f"USD over {months} months": frame["usd"].map(_money), "source": frame["source"]})
    # tall enough for every line (35 px a row and the header): the last lines are the credit and the totals
    st.dataframe(table, hide_index=True, width="stretch", height=35 * (len(table) + 1) + 3)
    st.caption(f"The {months}-month bill line by line at this utilization: the cloud lines add up to renting's total, "
               "the on-prem lines to owning's (the residual value is a credit, for the servers whose life ended in "
               "the term). Each line's source and date is in the last column: scroll the table sideways (or enlarge "
               "it, top right) to read it all. Override a line under \"Other cost lines\"; 0 leaves it out.")


def _stale(result) -> None:
    """A warning when a catalog price in use (not an override) is over 12 months old."""
    from planner.hardware.catalog import STALE_AFTER_MONTHS, is_stale
    old = []
    if result.cloud_price_date and is_stale(result.cloud_price_date):
        old.append(f"the cloud price of {result.instance} is dated {result.cloud_price_date}")
    if result.capex_date and is_stale(result.capex_date):
        old.append(f"the capex of {result.server} is dated {result.capex_date}")
    if old:
        st.warning(f"Stale price: {' and '.join(old)}, over {STALE_AFTER_MONTHS} months ago. Prices move; check it "
                   "or enter a current quote as an override.")


def _sources(result, site, override: float, per: str, discount: int) -> str:
    """Which prices are in effect, and the dates of those from the catalog (none for an override)."""
    off = f", less the {discount}% discount" if discount else ""
    if result.cloud_price_date is None:
        of = f" of {result.instance}" if per == "instance" else ""
        cloud = f"Cloud price: your override, ${override:,.2f} per {per}-hour{of}{off} (no catalog price or date applies)"
    else:
        cloud = f"Cloud price: {result.cloud_price}{off}, price of {dated(result.cloud_price_date)}"
    if result.capex_date is None:
        capex = f"server capex: your override, ${result.capex_usd:,.0f} ({result.server}, {result.devices} devices)"
    else:
        capex = (f"server capex ${result.capex_usd:,.0f} of {dated(result.capex_date)} ({result.server}, "
                 f"{result.devices} devices)")
    own = (f"on-prem opex ${result.onprem_opex_usd_per_month:,.0f}/month at this utilization "
           f"(${result.onprem_fixed_usd_per_month:,.0f} colocation, staff, support and storage + "
           f"${result.onprem_power_usd_per_month:,.0f} power at full load, scaled by the utilization); owning at "
           f"full use ${result.onprem_usd_per_month_full_use:,.0f}/month vs renting every hour "
           f"${result.cloud_usd_per_month_full_use:,.0f}/month")
    where = f"site {site.id} (figures of {dated(site.date)}, {site.lifetime_years:g}-year server life)"
    notes = f". Left out: {'; '.join(result.notes)}" if result.notes else ""
    return f"{cloud}; {capex}; {where}; {own}{notes}."


def _chart(result) -> None:
    long = (result.table.rename(columns=OPTIONS)
            .melt("month", var_name="option", value_name="usd"))
    lines = alt.Chart(long).mark_line().encode(
        x=alt.X("month:Q", title="Month from purchase", scale=alt.Scale(nice=False)),
        y=alt.Y("usd:Q", title="Cumulative cost (USD)", axis=alt.Axis(format="$,.0f")),
        color=alt.Color("option:N", title="Option"),
        tooltip=[alt.Tooltip("month:Q", title="month"), alt.Tooltip("option:N", title="option"),
                 alt.Tooltip("usd:Q", title="cumulative USD", format="$,.0f")])
    chart = lines
    if result.breakeven_month is not None and result.breakeven_month <= result.table["month"].max():
        mark = pd.DataFrame({"month": [result.breakeven_month],
                             "label": [f"break-even: {result.breakeven_month:.1f} months"]})
        rule = alt.Chart(mark).mark_rule(strokeDash=[4, 4]).encode(
            x="month:Q", tooltip=[alt.Tooltip("label:N", title="break-even")])
        text = alt.Chart(mark).mark_text(align="left", dx=4, dy=-4, baseline="top").encode(
            x="month:Q", y=alt.value(0), text="label:N")
        chart = lines + rule + text
    st.altair_chart(chart.properties(title=f"Cumulative cost of {result.devices} x {result.device}, "
                                           "renting against owning"), width="stretch")
