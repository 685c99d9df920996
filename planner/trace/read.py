"""Read a PyTorch Profiler trace (Chrome/Kineto JSON, gzipped or not) into plain values.

What `torch.profiler.profile(record_shapes=True).export_chrome_trace(...)` (or
`tensorboard_trace_handler`) writes: {"traceEvents": [...], "deviceProperties": [...], ...}. The
events used, all complete events (`"ph": "X"`, times in microseconds):
- cat "cpu_op": an aten op (or autograd node) on a host thread, with `Input Dims`, `Input type`,
  `Input Strides`, `Concrete Inputs` and an `External id`;
- cat "user_annotation": a `record_function` range (Optimizer.step#AdamW.step, ProfilerStep#3);
- cat "kernel", "gpu_memcpy", "gpu_memset": device activity on a stream, whose `External id` names
  the op that launched it (CUPTI's correlation, resolved by Kineto);
- cat "cuda_runtime" / "cuda_driver": host API calls (launches, synchronizations).

Ops nest per host thread by time: an op's parent is the innermost op of the same thread that
encloses it. Times are kept in integer nanoseconds while nesting so that float rounding of the
microsecond stamps never breaks containment.

Why not Holistic Trace Analysis: HTA reads a folder of per-rank traces into DataFrames for
distributed breakdowns, but loads a file with no size bound and drops the shapes this reader needs
to count each op; planner's reader bounds every size first, validates every field it uses, and
keeps the op tree.
"""

from __future__ import annotations

import io
import math
import zlib
from dataclasses import dataclass
from pathlib import Path

from planner.errors import ConfigError
from planner.files import decode, parse_json

MAX_TRACE_BYTES = 512 * 2**20
"""Largest trace accepted, decompressed (512 MiB: a few seconds of a large training step)."""
MAX_EVENTS = 4_000_000
"""Most events accepted in one trace."""
MAX_INPUTS = 256
"""Most inputs one op may list (a foreach op over 200 parameters lists each list as one input)."""
MAX_DIM = 2**40
"""Largest size of one tensor dimension accepted."""
MAX_RANK = 16
"""Most dimensions of one tensor accepted."""
MAX_LIST = 4096
"""Most tensors in one tensor list."""

HOST_CATEGORIES = ("cpu_op", "user_annotation")
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
              "cudaStreamWaitEvent", "cuStreamSynchronize", "cuCtxSynchronize")
"""Runtime calls in which the host waits for the device (cudaMemcpy is synchronous)."""


class TraceError(ConfigError):
    """A trace file that cannot be read: what is wrong, in one line."""


@dataclass(frozen=True, slots=True)
class Input:
    """One input of a host op as the profiler recorded it."""

    type: str
    """"float", "c10::BFloat16", "long int", ... for a tensor; "Scalar", "ScalarList", "TensorList";
    "" when the profiler recorded nothing (None, or a type it does not record)."""
    dims: tuple
    """A tensor's sizes; for a TensorList a tuple of sizes; () otherwise."""
    strides: tuple
    """A tensor's strides, in the same shape as `dims` (() when not recorded)."""
    value: str
    """`Concrete Inputs` text of a scalar or scalar list ("1", "False", "[0, 1]"), else ""."""


@dataclass(frozen=True, slots=True)
class HostOp:
    """A cpu_op or user_annotation event."""

    index: int
    """Position in Trace.ops (start order)."""
    name: str
    """"aten::mm", "autograd::engine::evaluate_function: MmBackward0", "Optimizer.step#AdamW.step"."""
    category: str
    """"cpu_op" or "user_annotation"."""
    thread: tuple
    """(pid, tid) of the host thread."""
    start_ns: int
    """Start, ns since the trace's first event."""
    dur_ns: int
    external_id: int | None
    inputs: tuple[Input, ...]
    parent: int | None
    """Index of the enclosing op on the same thread, None at the top."""
    depth: int
    """0 at the top of its thread."""

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns


@dataclass(frozen=True, slots=True)
class DeviceEvent:
    """A kernel, memcpy or memset on a device stream."""

    name: str
    category: str
    """"kernel", "gpu_memcpy" or "gpu_memset"."""
    device: int
    stream: int
    start_ns: int
    dur_ns: int
    external_id: int | None
    """The launching host op's External id (None when the trace does not link it)."""
    correlation: int | None = None
    """CUPTI correlation id: the runtime call that launched it has the same."""

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns

    @property
    def is_collective(self) -> bool:
        """NCCL (or RCCL) communication kernel."""
        return self.category == "kernel" and ("nccl" in self.name.lower() or "rccl" in self.name.lower())


@dataclass(frozen=True, slots=True)
class RuntimeCall:
    """A CUDA runtime or driver API call on a host thread."""

    name: str
    thread: tuple
    start_ns: int
    dur_ns: int
    correlation: int | None = None

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns

    @property
    def is_sync(self) -> bool:
        return self.name.startswith(SYNC_CALLS)


@dataclass(frozen=True, slots=True)
class Trace:
    """One profiled run."""

    ops: tuple[HostOp, ...]
    """Host ops in start order (parents before children)."""
    device_events: tuple[DeviceEvent, ...]
    runtime: tuple[RuntimeCall, ...]
    span_ns: int
    """Wall time the profiler covered: its own span event where present, else first start to last end."""
    device_name: str
    """The GPU the trace ran on (deviceProperties), "" for a CPU-only trace."""
    device_properties: dict
    """deviceProperties[0] as recorded (SM count, memory, compute capability), {} for a CPU trace."""
    source: str
    """File name."""

    @property
    def has_device(self) -> bool:
        return bool(self.device_events)


def read_trace(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> Trace:
    """Read a trace file (.json, .json.gz, or any name: gzip is detected by its magic bytes)."""
    file = Path(path)
    shown = _short(str(file))
    try:
        if not file.is_file():
            raise TraceError(f"trace '{shown}' does not exist or is not a regular file")
        with open(file, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise TraceError(f"cannot read trace '{shown}': {exc.strerror}") from None
    return parse_trace(data, file.name, max_bytes)


def parse_trace(data: bytes, name: str = "trace", max_bytes: int = MAX_TRACE_BYTES) -> Trace:
    """Parse trace bytes (gzipped or plain JSON) bounded to `max_bytes` once decompressed."""
    what = f"trace '{_short(name)}'"
    if len(data) > max_bytes:
        raise TraceError(f"{what} is over the limit of {max_bytes:,} bytes")
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, what, max_bytes)
    if not data.strip():
        raise TraceError(f"{what} is empty")
    try:
        text = decode(data, what)
        doc = parse_json(text, what, max_depth=16)
    except ConfigError as exc:
        raise TraceError(str(exc).replace("not valid JSON", "not valid JSON (truncated or not a trace?)")) from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(f"{what} is not a PyTorch Profiler trace: expected a JSON object with a 'traceEvents' list "
                         "(torch.profiler's export_chrome_trace) or a list of events")
    if len(events) > MAX_EVENTS:
        raise TraceError(f"{what} holds {len(events):,} events; the limit is {MAX_EVENTS:,}")
    props = doc.get("deviceProperties") if isinstance(doc, dict) else None
    props = props[0] if isinstance(props, list) and props and isinstance(props[0], dict) else {}
    device_name = props.get("name") if isinstance(props.get("name"), str) else ""
    return _build(events, what, name, device_name[:200], {k: v for k, v in props.items()
                                                          if isinstance(v, (int, float, str)) and not isinstance(v, bool)})


def _gunzip(data: bytes, what: str, max_bytes: int) -> bytes:
    # decompress in pieces so a gzip bomb stops at the limit instead of filling memory
    out = io.BytesIO()
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        pos = 0
        while pos < len(data):
            chunk = d.decompress(data[pos:pos + 2**20], max_bytes + 1 - out.tell())
            pos += 2**20
            out.write(chunk)
            while d.unconsumed_tail and out.tell() <= max_bytes:
                out.write(d.decompress(d.unconsumed_tail, max_bytes + 1 - out.tell()))
            if out.tell() > max_bytes:
                raise TraceError(f"{what} decompresses to over the limit of {max_bytes:,} bytes")
        if not d.eof:
            raise TraceError(f"{what} is a truncated gzip file")
    except zlib.error as exc:
        raise TraceError(f"{what} is not a readable gzip file ({exc})") from None
    return out.getvalue()


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:100] + "..."


MAX_TIME_US = 1e15
"""Largest 'ts' or 'dur' read, microseconds (about 32 years): a profiler's clock is far below it, and a larger
number (a 401-digit integer, 1e308) would overflow float or nanosecond arithmetic."""


def _num(event: dict, key: str, i: int, what: str) -> float:
    value = event.get(key)
    name = _short(str(event.get("name", "?")))[:60]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise TraceError(f"{what}: event #{i} ({name}) has no numeric '{key}'")
    if not -MAX_TIME_US <= value <= MAX_TIME_US:
        shown = f"{value:.3g}" if isinstance(value, float) else f"a {len(str(abs(value)))}-digit number"
        raise TraceError(f"{what}: event #{i} ({name}) has '{key}' = {shown} us, beyond the {MAX_TIME_US:.0e} us "
                         "(about 32 years) a profiler's clock reaches")
    return float(value)


def _int_or_none(value) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _dims(value, i: int, what: str, depth: int = 0) -> tuple:
    """Sizes (or strides) of one input: [] / [d0, d1, ...] / [[...], [...]] for a tensor list."""
    if not isinstance(value, list):
        return ()
    if value and isinstance(value[0], list):
        if depth or len(value) > MAX_LIST:
            raise TraceError(f"{what}: event #{i} has an input list of {len(value):,} tensors "
                             f"(limit {MAX_LIST:,}) or nested deeper than a tensor list")
        return tuple(_dims(v, i, what, 1) for v in value)
    if len(value) > MAX_RANK:
        raise TraceError(f"{what}: event #{i} has a tensor of {len(value)} dimensions; the limit is {MAX_RANK}")
    out = []
    for d in value:
        if isinstance(d, bool) or not isinstance(d, int) or abs(d) > MAX_DIM:
            raise TraceError(f"{what}: event #{i} has a tensor size or stride {_short(repr(d))[:40]} "
                             f"that is not an integer within ±{MAX_DIM:,}")
        out.append(d)
    return tuple(out)


def _inputs(args: dict, i: int, what: str) -> tuple[Input, ...]:
    types = args.get("Input type")
    if not isinstance(types, list):
        return ()
    if len(types) > MAX_INPUTS:
        raise TraceError(f"{what}: event #{i} lists {len(types):,} inputs; the limit is {MAX_INPUTS}")
    dims = args.get("Input Dims") if isinstance(args.get("Input Dims"), list) else []
    strides = args.get("Input Strides") if isinstance(args.get("Input Strides"), list) else []
    values = args.get("Concrete Inputs") if isinstance(args.get("Concrete Inputs"), list) else []
    out = []
    for k, t in enumerate(types):
        value = values[k] if k < len(values) and isinstance(values[k], str) else ""
        out.append(Input(t[:80] if isinstance(t, str) else "",
                         _dims(dims[k], i, what) if k < len(dims) else (),
                         _dims(strides[k], i, what) if k < len(strides) else (),
                         value[:4000]))
    return tuple(out)


def _build(events: list, what: str, name: str, device_name: str, props: dict) -> Trace:
    host, dev, rt = [], [], []
    span = None
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat == "Trace" and span is None and e.get("name", "").startswith("PyTorch Profiler"):
            span = (_num(e, "ts", i, what), _num(e, "dur", i, what))
            continue
        if cat not in HOST_CATEGORIES + DEVICE_CATEGORIES + RUNTIME_CATEGORIES:
            continue
        ts, dur = _num(e, "ts", i, what), _num(e, "dur", i, what)
        if dur < 0:
            raise TraceError(f"{what}: event #{i} has a negative duration ({dur:g} us)")
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        label = e.get("name") if isinstance(e.get("name"), str) else ""
        if cat in HOST_CATEGORIES:
            host.append((ts, dur, label[:300], cat, (_thread_key(e.get("pid")), _thread_key(e.get("tid"))),
                         _int_or_none(args.get("External id")), _inputs(args, i, what)))
        elif cat in DEVICE_CATEGORIES:
            dev.append((ts, dur, label[:300], cat, _int_or_none(args.get("device")) or 0,
                        _int_or_none(args.get("stream")) or 0, _int_or_none(args.get("External id")),
                        _int_or_none(args.get("correlation"))))
        else:
            rt.append((ts, dur, label[:120], (_thread_key(e.get("pid")), _thread_key(e.get("tid"))),
                       _int_or_none(args.get("correlation"))))
    starts = [x[0] for x in host] + [x[0] for x in dev] + [x[0] for x in rt]
    if not host:
        raise TraceError(f"{what} holds no host ops ('cpu_op' events): record it with torch.profiler "
                         "(activities=[ProfilerActivity.CPU, ...]) and export_chrome_trace")
    origin = min(starts + ([span[0]] if span else []))

    def ns(us: float) -> int:
        return round((us - origin) * 1000)

    ops = _nest(host, ns)
    devices = tuple(DeviceEvent(n, c, d, s, ns(ts), round(dur * 1000), x, k) for ts, dur, n, c, d, s, x, k in
                    sorted(dev, key=lambda x: x[0]))
    runtime = tuple(RuntimeCall(n, th, ns(ts), round(dur * 1000), k)
                    for ts, dur, n, th, k in sorted(rt, key=lambda x: x[0]))
    if span is not None:
        span_ns = round(span[1] * 1000)
    else:
        span_ns = max([o.end_ns for o in ops] + [d.end_ns for d in devices])
    if span_ns <= 0:
        raise TraceError(f"{what} spans no time: every event has duration 0 (a trace to analyse records ops that "
                         "ran for at least 1 ns)")
    return Trace(ops, devices, runtime, span_ns, device_name, props, name)


def _thread_key(value):
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else str(value)[:40]


def _nest(host: list, ns) -> tuple[HostOp, ...]:
    # start order, longer first on ties: a parent precedes the children it encloses
    order = sorted(range(len(host)), key=lambda k: (ns(host[k][0]), -round(host[k][1] * 1000)))
    ops: list[HostOp] = []
    stacks: dict[tuple, list[int]] = {}
    for k in order:
        ts, dur, name, cat, thread, ext, inputs = host[k]
        start, length = ns(ts), round(dur * 1000)
        stack = stacks.setdefault(thread, [])
        while stack and ops[stack[-1]].end_ns < start + length and ops[stack[-1]].end_ns <= start:
            stack.pop()
        while stack and ops[stack[-1]].end_ns < start + length:
            # overlaps its would-be parent without ending inside it: the profiler's clock rounding
            # can push a child's end a nanosecond past its parent's; more than 1 us is not nesting
            if start + length - ops[stack[-1]].end_ns <= 1000:
                length = ops[stack[-1]].end_ns - start
                break
            stack.pop()
        parent = stack[-1] if stack else None
        ops.append(HostOp(len(ops), name, cat, thread, start, length, ext, inputs, parent,
                          ops[parent].depth + 1 if parent is not None else 0))
        stack.append(len(ops) - 1)
    return tuple(ops)
