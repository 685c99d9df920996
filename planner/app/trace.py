"""Trace page: a PyTorch Profiler trace read back, each op beside its roofline, the run replayed on
other devices (planner/trace)."""

from __future__ import annotations

import hashlib
import math

import altair as alt
import pandas as pd
import streamlit as st

from planner.app.common import ROOT, context, device_ids, fmt_s, ms, purpose, roofline_chart, table

TRACES = ROOT / "benchmarks" / "data" / "traces"
BUNDLED_TRACES = {
    "h100_llama1b_prefill_b1_s512_bf16.json.gz": "Llama-3.2-1B prefill, 512 tokens, batch 1, bf16 (H100)",
    "h100_resnet50_train_b32_amp_bf16.json.gz": "ResNet-50 training step, batch 32, autocast bf16 (H100)",
}
"""The measured traces shipped in benchmarks/data/traces/ (its README says how they were recorded)."""
MAX_TRACE_UPLOAD_BYTES = 50 * 2**20
"""Largest trace file accepted from the browser, as uploaded (gzipped or not)."""
MAX_TRACE_BYTES = 256 * 2**20
"""Largest trace parsed, once decompressed (a gzip bomb stops here)."""
FROM_TRACE = "(from the trace)"
WHATIF_DEVICES = ["h200-sxm", "b200", "mi300x"]


@st.cache_data(show_spinner="Reading the trace and setting each op beside its roofline...", max_entries=4)
def trace_analysis(digest: str, _data: bytes, name: str, device: str | None):
    """The TraceReport of trace bytes, cached on their SHA-256 `digest` (the bytes themselves are not
    hashed again) and the device. The bytes are parsed as data only: bounded JSON, no pickle, no code."""
    from planner.trace.analyze import analyze
    from planner.trace.read import parse_trace
    return analyze(parse_trace(_data, name, MAX_TRACE_BYTES), device, engine="eager", ctx=context())


@st.cache_data(show_spinner="Replaying the trace on other devices...", max_entries=16)
def trace_what_ifs(digest: str, device: str | None, devices: tuple[str, ...], host_scale: float, _report) -> dict:
    """What-if rows (one per device; an error message where a device cannot be predicted) and the findings."""
    from planner.errors import PlannerError
    from planner.trace.findings import findings
    from planner.trace.whatif import what_if
    rows, found = [], []
    for d in devices:
        try:
            w = what_if(_report, d, host_scale=host_scale, engine="eager", ctx=context())
        except PlannerError as exc:
            rows.append({"device": d, "note": str(exc)})
            continue
        found.append(w)
        rows.append({**w.as_dict(), "note": f"{w.unscaled_ops} ops kept as measured (no peak for their dtype)"
                     if w.unscaled_ops else ""})
    return {"rows": rows, "findings": [f.as_dict() for f in findings(_report, found)]}



def _trace_report(data: bytes, name: str, device: str | None, digest: str | None = None):
    """(TraceReport, None), or (None, the one-line message to show) for a file over the size limit or
    one planner cannot read (not JSON, not a profiler trace, an unknown device...). `digest`: the
    bytes' SHA-256 where the caller has it already."""
    from planner.errors import PlannerError
    if len(data) > MAX_TRACE_UPLOAD_BYTES:
        return None, (f"{name[:80]} is {len(data):,} bytes; the limit is {MAX_TRACE_UPLOAD_BYTES:,} bytes "
                      f"({MAX_TRACE_UPLOAD_BYTES // 2**20} MiB): profile fewer steps, or gzip the trace")
    try:
        return trace_analysis(digest or hashlib.sha256(data).hexdigest(), data, name, device), None
    except PlannerError as exc:
        return None, str(exc)



def page() -> None:
    purpose("Trace: a measured run against its roofline", "Upload a PyTorch Profiler trace: each op beside its roofline on the device it ran on, the step's "
               "breakdown, and the same run predicted on other devices.")
    left, right = st.columns([1, 2])
    with left:
        source = st.radio("Trace", ["Bundled H100 trace", "Upload"], horizontal=True, key="trace_source",
                          help="A trace measured on an H100 that ships with planner (benchmarks/data/traces/), or "
                               "your own torch.profiler export_chrome_trace file")
        if source == "Bundled H100 trace":
            name = st.selectbox("Bundled trace", list(BUNDLED_TRACES), format_func=lambda k: BUNDLED_TRACES.get(k, k),
                                key="trace_bundled",
                                help="Measured on one H100 SXM with torch.profiler(record_shapes=True) after 3 "
                                     "warm-up iterations; benchmarks/data/traces/README.md has the provenance")
            data = (TRACES / name).read_bytes()
        else:
            file = st.file_uploader("PyTorch Profiler trace (.json or .json.gz)", type=["json", "gz"],
                                    key="trace_upload", max_upload_size=MAX_TRACE_UPLOAD_BYTES // 2**20,
                                    help="Chrome/Kineto JSON from torch.profiler.profile(record_shapes=True)"
                                         f".export_chrome_trace, gzipped or not; at most "
                                         f"{MAX_TRACE_UPLOAD_BYTES // 2**20} MiB. It is read as data only.")
            if file is None:
                st.info("Upload a trace, or pick a bundled one.")
                return
            name, data = file.name, file.getvalue()
        choices = [FROM_TRACE] + sorted(set(device_ids()) | set(context().profiles))
        picked = st.selectbox("Device it ran on", choices, key="trace_device",
                              help="Whose roofline the ops are set against. Default: the GPU named in the trace's "
                                   "metadata, or for a CPU-only trace this machine's calibrated CPU; pick one when "
                                   "the trace names none planner knows")
    device = None if picked == FROM_TRACE else picked
    digest = hashlib.sha256(data).hexdigest() if len(data) <= MAX_TRACE_UPLOAD_BYTES else ""
    report, error = _trace_report(data, name, device, digest)
    if error:
        with right:
            st.error(error)
            if device is None:
                st.caption("A trace that names no device planner knows (or a CPU trace from another machine) "
                           "needs one picked under 'Device it ran on'.")
        return
    tr = report.trace
    with right:
        cols = st.columns(3)
        cols[0].metric("wall time", fmt_s(report.wall_s), help="The span the profiler covered")
        cols[1].metric("host ops", f"{len(tr.ops):,}", help="cpu_op and user_annotation events")
        cols[2].metric("kernels", f"{len(tr.device_events):,}", help="Device events: kernels, copies, memsets")
        # names in a line of their own: a device id in a fifth of the column is cut to "h100-…"
        st.markdown(f"**Roofline of** {report.device.id}, **tier** {report.tier}",
                    help="The device the ops are set against, and where its efficiencies come from")
        ran = f"ran on {tr.device_name}" if tr.device_name else "CPU only"
        st.caption(f"{tr.source} ({ran}): {int(report.ops['counted'].sum()):,} counted ops carry the work; "
                   f"{report.dtype} ops at the {report.dtype} peak; efficiencies: {report.source}")
        st.subheader("Where the wall time went")
        breakdown = pd.DataFrame([{"part": part, "time (ms)": ms(s), "share of wall (%)": 100 * s / report.wall_s}
                                  for part, s in report.breakdown])
        table(breakdown)
        st.altair_chart(alt.Chart(breakdown).mark_bar().encode(
            x=alt.X("time (ms):Q", title="time (ms)"), y=alt.Y("part:N", sort=None, title=None),
            tooltip=["part", alt.Tooltip("time (ms):Q", format=".3f"),
                     alt.Tooltip("share of wall (%):Q", format=".1f")]), width="stretch")
        if report.overlapped_comm_s:
            st.caption(f"Communication overlapped by compute (not in the sum): {fmt_s(report.overlapped_comm_s)}")
    st.subheader("By category")
    st.caption("measured = " + ("device time of the op's kernels" if tr.has_device else "host time") +
               "; attainable = the roofline with the device's efficiency")
    cats = report.by_category().reset_index()
    table(pd.DataFrame({
        "category": cats["category"], "ops": cats["ops"], "measured (ms)": ms(cats["measured_s"]),
        "attainable (ms)": ms(cats["attainable_s"]), "gap (ms)": ms(cats["gap_s"]),
        "ratio (measured / attainable)": cats["ratio"], "achieved (TFLOP/s)": cats["achieved_flop_per_s"] / 1e12,
        "achieved (GB/s)": cats["achieved_bytes_per_s"] / 1e9, "work (GFLOP)": cats["flop"] / 1e9,
        "traffic (GB)": cats["bytes"] / 1e9}))
    st.subheader("Slowest ops")
    sig = report.by_signature()
    top = st.slider("Ops shown", 5, 200, 20, key="trace_top",
                    help="The slowest op signatures (name and input shapes) by measured time")
    shown = sig.head(top)
    table(pd.DataFrame({
        "op": shown["name"], "calls": shown["calls"], "measured (ms)": ms(shown["measured_s"]),
        "attainable (ms)": ms(shown["attainable_s"]), "ratio (measured / attainable)": shown["ratio"],
        "flagged (ratio > 2)": shown["ratio"] > 2, "bound": shown["bound"], "category": shown["category"],
        "achieved (TFLOP/s)": shown["achieved_flop_per_s"] / 1e12,
        "achieved (GB/s)": shown["achieved_bytes_per_s"] / 1e9, "shapes": shown["shapes"]}))
    gemm, n = report.gemm_abs_ln
    if gemm is not None:
        st.write(f"GEMMs: median |ln(attainable / measured)| = {gemm:.3f} over {n} ops (attainable within "
                 f"{math.exp(gemm):.2f}x of measured, either way).")
    flagged = report.flagged
    st.write(f"Flagged: {len(flagged)} ops measured above 2x their attainable time, "
             f"{fmt_s(float(flagged['measured_s'].sum()))} in all.")
    _trace_roofline(report, sig)
    st.subheader("The same run on other devices")
    options = sorted(set(device_ids()) | set(context().profiles))
    devices = st.multiselect("Devices", options, default=[d for d in WHATIF_DEVICES if d in options],
                             key="trace_whatif_devices",
                             help="Each counted op's measured time is scaled by its predicted time on the target "
                                  "over its predicted time here, and the trace replayed at its launch times")
    host_scale = st.slider("Host scale", 0.0, 2.0, 1.0, 0.1, key="trace_host_scale",
                           help="host time multiplied by this: 0 = never waits on the host, e.g. CUDA graphs")
    result = trace_what_ifs(digest, device, tuple(devices), float(host_scale), report)
    if result["rows"]:
        rows = pd.DataFrame(result["rows"]).reindex(columns=["device", "tier", "wall_s", "measured_wall_s", "speedup",
                                                             "note"])
        table(pd.DataFrame({"device": rows["device"], "tier": rows["tier"],
                                   "predicted wall (ms)": ms(rows["wall_s"].astype(float)),
                                   "measured wall (ms)": ms(rows["measured_wall_s"].astype(float)),
                            "speedup (x)": rows["speedup"].astype(float), "note": rows["note"]}))
    if result["findings"]:
        st.markdown("**What would gain most** (each re-predicted by replaying the trace)")
        st.markdown("\n".join(f"{k}. **{f['title']}**: {fmt_s(f['wall_s'])} predicted wall "
                              f"({100 * f['throughput_gain']:+.0f}% throughput). {f['why']}"
                              for k, f in enumerate(result["findings"], 1)))
    else:
        st.caption("No change the model can price gains 2% or more.")


def _trace_roofline(report, sig: pd.DataFrame) -> None:
    """Each op signature at its achieved FLOP/s over its arithmetic intensity, under the device's roofs."""
    points = sig[(sig["flop"] > 0) & (sig["bytes"] > 0) & (sig["measured_s"] > 0)]
    if points.empty:
        return
    points = pd.DataFrame({"op": points["name"], "shapes": points["shapes"], "bound": points["bound"],
                           "calls": points["calls"], "intensity (FLOP/byte)": points["flop"] / points["bytes"],
                           "achieved (FLOP/s)": points["achieved_flop_per_s"],
                           "ratio (measured / attainable)": points["ratio"]})
    dev = report.device
    st.subheader("Roofline")
    st.caption(f"Each op signature on the {dev.id} roofline (log-log): {dev.mem_bytes_per_s / 1e9:,.0f} GB/s of memory "
               f"bandwidth up to the datasheet {report.dtype} and vector peaks; an op's attainable time also applies "
               "the device's efficiencies, so most points sit below the roofs")
    st.altair_chart(roofline_chart(points, dev, report.dtype, "achieved (FLOP/s)",
                                   ["op", "shapes", "bound", "calls",
                                    alt.Tooltip("ratio (measured / attainable):Q", format=".2f")]), width="stretch")
