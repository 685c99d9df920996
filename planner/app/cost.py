"""Cost page: renting against owning one server's worth of a device (planner.plan.tco)."""

from __future__ import annotations

import altair as alt
import streamlit as st

from planner.app.common import context, dated, hardware_key, purpose, shown


@st.cache_data(show_spinner=False)
def tco(hw: str, device: str, site: str, instance: str | None, months: int, utilization: float, price: float | None,
        discount: float, capex: float | None):
    from planner.plan.tco import compare_tco
    return compare_tco(device, site, instance, months, utilization, price, discount, capex, ctx=context())



def page() -> None:
    purpose("Cost: renting or owning", "Cumulative cost of renting a server's worth of devices against buying and running the server, month by month, and where they cross.")
    ctx = context()
    owned = sorted({s.device_id for s in ctx.catalog.servers.values()})
    device = st.selectbox("Device", owned, key="cost_device")
    site = st.selectbox("Site", sorted(ctx.catalog.sites), key="cost_site")
    offers = [i for i in ctx.catalog.instances_for(device) if "on_demand" in i.price_usd_per_h]
    labels = [f"{i.key}: ${i.price_usd_per_h['on_demand']:,.2f}/h (price of {dated(i.price_dates['on_demand'])})"
              for i in offers]
    pick = st.selectbox("Cloud instance (on demand)", labels, key="cost_instance") if offers else None
    instance = offers[labels.index(pick)] if pick else None
    months = st.slider("Horizon (months)", 6, 72, 36, key="cost_months")
    utilization = st.slider("Utilization", 0.1, 1.0, 0.8, 0.05, key="cost_utilization")
    override = st.number_input("Override the instance price ($/h, 0 = catalog)", min_value=0.0, value=0.0,
                               key="cost_price")
    discount = st.slider("Committed-use discount", 0.0, 0.7, 0.0, 0.05, key="cost_discount")
    capex = st.number_input("Override the server capex ($, 0 = catalog)", min_value=0.0, value=0.0, key="cost_capex")
    result = shown(tco, hardware_key(), device, site, instance.key if instance else None, months, utilization, override or None,
                    discount, capex or None)
    if result is None:
        return
    cols = st.columns(3)
    cols[0].metric("Break-even", f"{result.breakeven_month:.1f} months" if result.breakeven_month else "never")
    cols[1].metric("Break-even utilization", f"{result.breakeven_utilization:.0%}")
    cols[2].metric("Cloud $/h for the server's devices", f"${result.cloud_usd_per_h:,.2f}")
    st.caption(f"Cloud price of {dated(result.cloud_price_date)} ({result.instance}); server capex of "
               f"{dated(result.capex_date)} "
               f"({result.server}, {result.devices} devices); on-prem opex ${result.onprem_opex_usd_per_month:,.0f}/month")
    long = result.table.melt("month", var_name="option", value_name="cumulative USD")
    st.altair_chart(alt.Chart(long).mark_line().encode(x="month:Q", y="cumulative USD:Q", color="option:N"),
                    width="stretch")
