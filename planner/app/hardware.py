"""Your hardware page: add a device (peaks, memory, bandwidth, links, power, price) for as long as the
browser session lasts, checked as the catalog is (planner.hardware.custom), and export it as catalog
rows. Every page predicts with it once added: it joins the device lists as a datasheet-tier device
(or a transferred one, where a profiled device of its vendor and generation exists, or of the catalog
device whose figures it copies: profile_select.transfer_key). A device of a vendor no engine file lists
(vendor "Acme") runs plain PyTorch (engines.GENERIC_ENGINES), and its predictions say so."""

from __future__ import annotations

import datetime
import hashlib
import json

import pandas as pd
import streamlit as st

from planner.app.common import purpose, shown

STATE = "hw_rows"
"""session_state key: {"device": [row...], "instance": [row...], "server": [row...]} of catalog rows (text)."""
KINDS = ("gpu", "accelerator", "tpu")
# (column, label with its unit, default, help): the form's fields, in the order of devices.csv's columns
DEVICE_FIELDS = (
    ("memory_gib", "Memory (GiB)", "80", "Device memory (HBM or GDDR) per device, GiB"),
    ("mem_bw_gb_per_s", "Memory bandwidth (GB/s)", "3350", "Peak memory bandwidth from the datasheet, GB/s"),
    ("bf16_tflop_per_s", "BF16 dense (TFLOP/s)", "989", "Dense BF16 tensor peak (not the 2:4 sparse figure)"),
    ("fp16_tflop_per_s", "FP16 dense (TFLOP/s)", "989", "Dense FP16 tensor peak; blank if none"),
    ("fp8_tflop_per_s", "FP8 dense (TFLOP/s)", "", "Dense FP8 tensor peak; blank if the device has no FP8"),
    ("fp4_tflop_per_s", "FP4 dense (TFLOP/s)", "", "Dense FP4 tensor peak; blank if none"),
    ("int8_tera_op_per_s", "INT8 dense (TOP/s)", "", "Dense INT8 tensor peak; blank if none"),
    ("tf32_tflop_per_s", "TF32 dense (TFLOP/s)", "", "Dense TF32 tensor peak; blank if none"),
    ("fp32_tflop_per_s", "FP32 vector (TFLOP/s)", "67", "FP32 vector (non-tensor) peak"),
    ("tdp_w", "TDP (W)", "700", "Board power limit, W"),
    ("idle_w", "Idle power (W)", "", "Measured idle draw, W; blank: the power model's default share of TDP"),
    ("compute_units", "Compute units (SMs or CUs)", "", "Streaming multiprocessors or compute units: wave "
     "quantization of GEMMs uses it; blank: none applied"),
    ("boost_clock_mhz", "Boost clock (MHz)", "", "Used to scale a transferred profile; blank: none"),
    ("scaleup_link", "Scale-up link", "none (PCIe only)", "Name of the device-to-device link (NVLink 4, xGMI...)"),
    ("scaleup_gb_per_s_per_direction", "Scale-up bandwidth (GB/s per direction)", "",
     "Per device, per direction; blank: PCIe only"),
    ("devices_per_node", "Devices per node", "8", "Devices in one server on the scale-up link"),
    ("scaleout_gb_per_s_per_direction", "Scale-out bandwidth (GB/s per direction)", "50",
     "Network per device per direction (400 Gb/s = 50 GB/s)"),
    ("pcie_gb_per_s_per_direction", "PCIe (GB/s per direction)", "64", "Host link per direction"),
)


def _rows() -> dict[str, list[dict]]:
    return st.session_state.setdefault(STATE, {"device": [], "instance": [], "server": []})


def added_devices() -> list[str]:
    """Ids of the devices this session added (the Workload page selects them with its defaults)."""
    return [r["id"] for r in (st.session_state.get(STATE) or {}).get("device", [])]


def session_digest() -> str:
    """A digest of the session's own rows ("" when there are none): part of cached predictions' keys."""
    rows = st.session_state.get(STATE)
    if not rows or not any(rows.values()):
        return ""
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]


@st.cache_resource(max_entries=16, show_spinner=False)
def _extended(digest: str, _rows: str, _base):
    from planner.hardware.custom import extend_catalog
    from planner.predict.context import with_catalog
    rows = json.loads(_rows)
    return with_catalog(_base, extend_catalog(rows["device"], rows["instance"], rows["server"]))


def session_context(base):
    """`base` with the session's own devices added (checked when added, so this does not fail)."""
    digest = session_digest()
    if not digest:
        return base
    return _extended(digest, json.dumps(st.session_state[STATE], sort_keys=True), base)


def how_predicted(device_id: str, base) -> str:
    """One line on how the pages predict a device this session added (to `base`'s catalog): its tier and where
    the efficiencies come from, and for a vendor no engine file lists, the engine it is assumed to run."""
    from planner.workload.engines import GENERIC_ENGINES, known_vendor
    ctx = session_context(base)
    device = ctx.device(device_id)
    eff = ctx.efficiency(device)
    text = f"{device_id} is predicted on tier {eff.tier}: {getattr(eff, 'source', '')}"
    if not known_vendor(device.vendor):
        text += (f". {device.vendor} is a vendor no engine file lists: it is assumed to run plain PyTorch "
                 f"({', '.join(GENERIC_ENGINES)}), every other engine is refused")
    return text


def _device_row(values: dict) -> dict:
    today = datetime.date.today().isoformat()
    row = {k: str(v).strip() for k, v in values.items()}
    row.update({"source": row.get("source") or "entered in planner's app by its user", "date": today,
                "confidence": "low", "notes": "a user's own figures, not checked against a datasheet"})
    return row


def _instance_rows(device_id: str, price: float, per_node: int) -> list[dict]:
    """One-device and whole-node instances at the entered price per device-hour (a multi-device
    deployment rents the node: planner.predict prices tensor-parallel groups and training that way)."""
    sizes = sorted({1, max(1, per_node)})
    return [{"provider": "custom", "instance": f"{device_id}-{n}x", "device": device_id, "device_count": str(n),
             "region": "custom", "pricing": "on_demand", "price_usd_per_h": f"{price * n:.6g}",
             "date": datetime.date.today().isoformat(), "source": "entered in planner's app by its user",
             "confidence": "low", "notes": f"{n} x the price per device-hour as entered"} for n in sizes]


def _server_row(device_id: str, count: int, capex: float, power: float) -> dict:
    return {"id": f"{device_id}-server", "name": f"{device_id} server ({count} devices)", "device": device_id,
            "device_count": str(count), "capex_usd": f"{capex:g}", "power_w": f"{power:g}",
            "date": datetime.date.today().isoformat(), "source": "entered in planner's app by its user",
            "confidence": "low", "notes": "capex and power as entered"}


def add(device: dict, price_usd_per_h: float | None, server: tuple[int, float, float] | None) -> str:
    """Check the rows against the catalog (with the session's earlier rows) and keep them; return the
    device's id. Raise ConfigError naming the row and column when one is bad, keeping nothing."""
    from planner.hardware.custom import extend_catalog
    new = _device_row(device)
    # the same id again replaces the session's own device (an edit), never a catalog one
    rows = {k: [r for r in v if (r.get("device") or r.get("id")) != new["id"]] for k, v in _rows().items()}
    rows["device"].append(new)
    if price_usd_per_h:
        per_node = int(new["devices_per_node"]) if new.get("devices_per_node", "").isdigit() else 1
        rows["instance"] += _instance_rows(new["id"], price_usd_per_h, per_node)
    if server is not None:
        rows["server"].append(_server_row(new["id"], *server))
    extend_catalog(rows["device"], rows["instance"], rows["server"])  # raises with the bad cell named
    st.session_state[STATE] = rows
    selection = st.session_state.get("devices")
    if isinstance(selection, list) and new["id"] not in selection:  # the Workload page's selection, when kept
        st.session_state["devices"] = [*selection, new["id"]]
    return new["id"]


def remove(device_id: str) -> None:
    rows = _rows()
    st.session_state[STATE] = {"device": [r for r in rows["device"] if r["id"] != device_id],
                               "instance": [r for r in rows["instance"] if r["device"] != device_id],
                               "server": [r for r in rows["server"] if r["device"] != device_id]}


def page() -> None:
    from planner.app.common import base_context
    from planner.hardware.custom import rows_csv, shipped_row
    purpose("Your hardware", "Add a device the catalog lacks, or a variant of one, with its price: every page then "
            "predicts and prices it, until this browser tab closes. Export it as catalog rows to keep it.")
    catalog = base_context().catalog
    start = st.selectbox("Start from", ["(blank)"] + sorted(catalog.devices), key="hw_start",
                         help="Copy a catalog device's figures into the form, then change what differs")
    base = shipped_row("device", start) if start != "(blank)" else None
    with st.form("hw_form", enter_to_submit=False):  # Enter in a field must not add a half-edited device
        c = st.columns(3)
        values = {
            "id": c[0].text_input("Id", f"{start}-custom" if base else "my-gpu", key=f"hw_id_{start}", help="Lower case letters, digits, "
                                  "'.', '+', '_' and '-'; not an id or alias already in the catalog"),
            "name": c[1].text_input("Name", f"{base['name']} (custom)" if base else "My GPU", key=f"hw_name_{start}",
                                    help="Full name; must not be an existing device's name"),
            "vendor": c[2].text_input("Vendor", base["vendor"] if base else "NVIDIA", key=f"hw_vendor_{start}",
                                      help="NVIDIA, AMD, Google, Intel (Habana), AWS (Annapurna), or any other: a "
                                           "vendor no engine lists is predicted on plain PyTorch (eager)"),
            "generation": c[0].text_input("Generation", base["generation"] if base else "custom",
                                          key=f"hw_generation_{start}",
                                          help="A catalog generation (hopper, blackwell, cdna3...) lets planner "
                                               "transfer that generation's measured efficiencies to this device, "
                                               "as do a catalog device's exact figures (same vendor, peaks and "
                                               "bandwidth); any other gives datasheet-tier predictions"),
            "kind": c[1].selectbox("Kind", KINDS, index=KINDS.index(base["kind"]) if base and base["kind"] in KINDS
                                   else 0, key=f"hw_kind_{start}", help="gpu, accelerator or tpu"),
        }
        for i, (col, label, default, help_) in enumerate(DEVICE_FIELDS):
            values[col] = c[(i + 2) % 3].text_input(label, base.get(col, "") if base else default,
                                                    key=f"hw_{col}_{start}", help=help_)
        st.markdown("**Price and ownership** (optional)")
        p = st.columns(4)
        price = p[0].number_input("Rent ($ per device-hour)", 0.0, 1000.0, 2.5, 0.1, key="hw_price", help="On-demand price of one "
                                  "device for an hour; 0: not rentable. Joins the catalog as a one-device instance")
        count = p[1].number_input("Devices per server", 1, 64, 8, key="hw_count", help="For the on-prem server row")
        capex = p[2].number_input("Server capex ($)", 0.0, 1e8, 0.0, 1000.0, key="hw_capex", help="0: not buyable")
        power = p[3].number_input("Server power (W)", 0.0, 1e6, 0.0, 100.0, key="hw_power",
                                  help="Maximum system power, W")
        submitted = st.form_submit_button("Add device", type="primary",
                                          help="Adds the device, or replaces your own device of the same id")
    if submitted:
        server = (int(count), float(capex), float(power)) if capex > 0 and power > 0 else None
        added = shown(add, values, float(price) or None, server)  # None: the error box is shown
        if added:
            st.success(f"Added {added}: pick it on the Workload, Serving, Cost and Plan pages.")
            st.caption(how_predicted(added, base_context()))
    rows = _rows()
    if not rows["device"]:
        st.info("No device of your own yet.")
        return
    st.subheader("Your devices")
    st.dataframe(pd.DataFrame(rows["device"]), hide_index=True)
    if rows["instance"]:
        st.dataframe(pd.DataFrame(rows["instance"]), hide_index=True)
    if rows["server"]:
        st.dataframe(pd.DataFrame(rows["server"]), hide_index=True)
    gone = st.selectbox("Remove", ["(none)"] + [r["id"] for r in rows["device"]], key="hw_remove")
    if gone != "(none)" and st.button(f"Remove {gone}", key="hw_remove_button"):
        remove(gone)
        st.rerun()
    st.caption("Append these to hardware_specs/ to keep them (each row keeps its source and date).")
    cols = st.columns(3)
    for col, (kind, file) in zip(cols, (("device", "devices.csv"), ("instance", "instances.csv"),
                                        ("server", "onprem_servers.csv"))):
        if rows[kind]:
            col.download_button(f"{file} rows", rows_csv(kind, rows[kind]), f"my_{file}", "text/csv",
                                key=f"hw_dl_{kind}", on_click="ignore")
