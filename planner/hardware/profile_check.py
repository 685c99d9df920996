"""Checks of a calibration profile's JSON before planner uses it (profile.py reads through these).

A profile is data from a file a user may have edited or been sent: every number must be finite and
in range, every measurement of a known kind with whole-number shapes, so that a bad file gives a
one-line ConfigError naming the file and the measurement, never a traceback or a silent NaN."""

from __future__ import annotations

import datetime
import json
import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from planner.errors import ConfigError
from planner.files import MAX_JSON_DEPTH, finite, json_depth, parse_json, read_text
from planner.hardware.catalog import KINDS
from planner.hardware.profile_table import KindTable, kind_tables, measurement_rows

if TYPE_CHECKING:  # annotations only: profile.py imports this module
    from planner.hardware.efficiency import Defaults
    from planner.hardware.profile import Profile

SCHEMA = 1
"""The profile layout read here (`schema` in profile.json, as planner/calibration/calibrate.py writes it)."""
# the shape fields of each measured kind (whole numbers >= 1); the other kinds are sized by `bytes`
SHAPES = {"gemm": ("m", "n", "k"), "bmm": ("b", "m", "n", "k"), "attention": ("bh", "sq", "sk", "d"),
          "conv": ("n", "cin", "hw", "cout", "ksize", "stride"), "conv_backward": ("n", "cin", "hw", "cout", "ksize", "stride"),
          "batch_norm_train": ("n", "c", "hw"), "batch_norm_backward": ("n", "c", "hw"),
          "depthwise": ("n", "c", "hw", "ksize", "stride"), "depthwise_backward": ("n", "c", "hw", "ksize", "stride")}
COUNTS = {"attention": ("group",), "batch_norm": ("hw",)}
"""Whole numbers >= 1 where a measurement gives them: query heads per KV head (1 where absent), the
plane side of a batch norm timed at activation shapes (a feature: profile.py, _features)."""
OVERHEADS = ("launch", "view")
"""Per-call costs: time_s may be 0 (below the timer's resolution); the others divide by it."""
SIZED = ("copy", "add", "gelu", "sum", "layer_norm", "softmax", "batch_norm", "maxpool", "h2d",
         "batch_norm_train", "batch_norm_backward", "depthwise", "depthwise_backward")
_MAX_COUNT = 2**53  # a shape stays exact as a float (wave counts divide it)
_FLOAT_MAX = sys.float_info.max


def parse(text: str, where: str):
    """The JSON of a profile through files.parse_json, every float of it finite. A NaN, an Infinity or an
    overflowing number (1e400) it refuses is then located, so the message names the measurement
    (measurements[5].time_s) rather than only the file."""
    try:
        return parse_json(text, where, finite=True)
    except ConfigError as refused:
        if json_depth(text) > MAX_JSON_DEPTH:
            raise
        try:  # the nesting is bounded: parse again keeping the constants, only to name where they are
            _not_finite(json.loads(text, parse_constant=float), where, "")
        except ValueError:
            pass
        raise refused from None


def check_profile(raw, where: str, floats_finite: bool = False) -> dict[str, KindTable] | None:
    """Refuse a profile planner cannot use; when it is sound, return its measurements as a KindTable per
    kind (None where one is not a JSON object: it is refused). ConfigError names `where` and the
    key (measurements[i] for a measurement). Checked: `schema` is SCHEMA; device_id, device_name, date
    (an ISO day first) and kind (a catalog kind) are set; every number is finite (1e400 parses to
    infinity); ceilings are rates > 0 and overheads >= 0; each measurement has a known
    kind, time_s > 0 (>= 0 for the per-call launch and view costs), flop and bytes >= 0 (bytes > 0 for
    kinds sized by bytes) and whole-number shapes >= 1; the properties a CPU Device is built from, the
    leave-one-out band and the collective fits have the types and signs they are used with.
    `floats_finite`: `raw` comes from `parse`, which refused every float that is not finite, so the
    numbers are not walked again for that."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a JSON object expected, got {type(raw).__name__}")
    if raw.get("schema") != SCHEMA or isinstance(raw.get("schema"), bool):
        raise ConfigError(f"{where}: unknown schema {_show(raw.get('schema'))}; this planner reads schema {SCHEMA} "
                          "(run `planner calibrate` again)")
    try:  # C speed for the common case; the walk below only locates a number that is not finite
        if not floats_finite:  # `parse` refused any float that is not (the dump took 30 ms of a published profile)
            json.dumps(raw, allow_nan=False)
    except ValueError:
        _not_finite(raw, where, "")
    except TypeError:  # not JSON data at all (an in-memory object): walk it
        _not_finite(raw, where, "")
    for key in ("device_id", "device_name", "date", "kind"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise ConfigError(f"{where}: '{key}' must be a non-empty string, got {_show(raw.get(key))}")
    if raw.get("tier", "measured") not in ("measured", "published"):
        raise ConfigError(f"{where}: tier {_show(raw.get('tier'))} is not one of measured, published")
    if raw["kind"] not in KINDS:
        raise ConfigError(f"{where}: kind {_show(raw['kind'])} is not one of {', '.join(KINDS)}")
    try:
        datetime.date.fromisoformat(raw["date"][:10])
    except ValueError:
        raise ConfigError(f"{where}: date {_show(raw['date'])} does not start with a day YYYY-MM-DD") from None
    ceilings = _object(raw, "ceilings", where, required=True)
    for key, value in ceilings.items():
        _number(value, f"{where}: ceilings.{key}", positive=key.endswith("_per_s"))
    props = _object(raw, "properties", where)
    if props.get("memory_bytes") is not None:
        _number(props["memory_bytes"], f"{where}: properties.memory_bytes", positive=True)
    if props.get("logical_cpus") is not None:
        _count(props["logical_cpus"], f"{where}: properties.logical_cpus")
    measurements = raw.get("measurements")
    if isinstance(measurements, dict):
        check_columns(measurements, where)
    elif not isinstance(measurements, list):
        raise ConfigError(f"{where}: 'measurements' must be a list, or an object of columns, got {_show(measurements)}")
    tables = kind_tables(measurements)
    if tables is None:
        doubtful = range(len(measurement_rows(measurements)))
    else:  # a kind the columns do not clear (convolutions always) is checked row by row
        doubtful = sorted(i for table in tables.values() if not _sound(table) for i in table.index.tolist())
    if doubtful:
        rows = measurement_rows(measurements)
        for i in doubtful:  # in file order: the first measurement that is not sound, and what is wrong
            if not _plainly_sound(rows[i]):
                _check_measurement(rows[i], f"{where}: measurements[{i}]")
    loo = _object(raw, "leave_one_out", where)
    for what, stats in (("leave_one_out", loo), ("leave_one_out.interior", _object(loo, "interior", where))):
        if stats.get("p90_abs_error") is not None:  # null: a group with no points (calibrate writes NaN as null)
            _number(stats["p90_abs_error"], f"{where}: {what}.p90_abs_error")
    held = _object(raw, "held_out", where)
    if held.get("p90_abs_error") is not None:
        _number(held["p90_abs_error"], f"{where}: held_out.p90_abs_error")
    library = raw.get("library")
    if library is not None and not (isinstance(library, str) and re.fullmatch(r"[a-z0-9][a-z0-9-]{0,39}", library)):
        raise ConfigError(f"{where}: library {_show(library)} must be a short lower-case name like pytorch-eager")
    dispatch = _object(raw, "dispatch", where)
    for key in DISPATCH_KEYS:
        if key in dispatch:
            value = dispatch[key]
            _number(value, f"{where}: dispatch.{key}")
            if value > MAX_DISPATCH_S:
                raise ConfigError(f"{where}: dispatch.{key} is {value:g} s; a host or launch cost is under "
                                  f"{MAX_DISPATCH_S:g} s")
    if dispatch and "host_per_op_s" not in dispatch:
        raise ConfigError(f"{where}: dispatch needs host_per_op_s (and view_host_s, kernel_floor_s, "
                          "isolated_call_s, after_launch_s)")
    collectives = raw.get("collectives")
    if isinstance(collectives, dict):  # a string says why none was measured
        for op, fit in _object(collectives, "fit", where).items():
            if not isinstance(fit, dict):
                raise ConfigError(f"{where}: collectives.fit.{op} must be an object, got {_show(fit)}")
            _count(fit.get("ranks"), f"{where}: collectives.fit.{op}.ranks")
            for key, positive in (("latency_s", False), ("bytes_per_s", True), ("median_abs_error", False)):
                _number(fit.get(key), f"{where}: collectives.fit.{op}.{key}", positive)
    return tables


DISPATCH_KEYS = ("host_per_op_s", "view_host_s", "kernel_floor_s", "isolated_call_s", "after_launch_s")
"""Seconds a profile's `dispatch` block may hold (planner/hardware/profile.py, Profile.dispatch)."""
MAX_DISPATCH_S = 1e-2
"""Largest dispatch figure accepted: 10 ms per op is 500x a measured eager dispatch."""

_KINDS = frozenset((*SHAPES, *OVERHEADS, *SIZED))
_FLAGS = (("dtype", "gemm", str), ("layout", None, str), ("warm", None, bool), ("causal", "attention", bool))


def check_columns(columns: dict, where: str) -> None:
    """The columns layout (profile_table.py): a 'kind' column, every column a list of one value per
    measurement."""
    kinds = columns.get("kind")
    if not isinstance(kinds, list):
        raise ConfigError(f"{where}: 'measurements' must be a list, or an object of columns with a 'kind' column "
                          f"(a list), got {_show(columns)}")
    for key, values in columns.items():
        if not isinstance(values, list) or len(values) != len(kinds):
            raise ConfigError(f"{where}: measurements.{key} must be a list of {len(kinds)} values (one per "
                              f"measurement, as 'kind'), got {_show(values)}")


def _types(values: list) -> set:
    return set(map(type, values))


def _sound(table: KindTable) -> bool:
    """True when every measurement of `table` passes _plainly_sound, checked by columns; False sends the
    profile through the row-by-row check, which names the first one that does not."""
    kind = table.kind
    if kind not in _KINDS or kind in ("conv", "conv_backward"):
        return False
    try:
        for key in ("time_s", "flop", "bytes"):
            values = table.column(key)
            if not _types(values) <= _NUMBERS:  # type(): a bool, a missing key or a string is refused
                return False
            a = table.floats(key)  # finite: parse refused what is not; an int past 1e308 raises
            positive = (key == "time_s" and kind not in OVERHEADS) or (key == "bytes" and kind in SIZED)
            if not (a > 0 if positive else a >= 0).all() or not (a < math.inf).all():
                return False
        for key in SHAPES.get(kind, ()):
            values = table.column(key)
            if _types(values) != {int} or not 1 <= min(values) <= max(values) <= _MAX_COUNT:
                return False
        for key in COUNTS.get(kind, ()):  # where given
            values = [value for value in table.column(key) if value is not table.absent]
            if values and (_types(values) != {int} or not 1 <= min(values) <= max(values) <= _MAX_COUNT):
                return False
        for key, needed, valid in _FLAGS:
            allowed = {valid} if kind == needed else {valid, type(table.absent)}
            if not _types(table.column(key)) <= allowed:
                return False
        return table.value_set("timing", "event") <= _TIMING_SET and table.value_set("align_bytes", 16) <= _ALIGN_SET
    except (TypeError, OverflowError, ValueError):  # an unhashable value, an int beyond a float
        return False


_NUMBERS = frozenset((int, float))


def _plainly_sound(m) -> bool:
    """A fast yes for a measurement every check of _check_measurement passes (no message is built);
    False sends it through _check_measurement, which says what is wrong. A published profile holds
    ten thousand measurements: this keeps reading one to a few tenths of a second."""
    if type(m) is not dict:
        return False
    kind = m.get("kind")
    if type(kind) is not str or kind not in _KINDS or kind in ("conv", "conv_backward"):  # str: a list is unhashable
        return False
    for key in ("time_s", "flop", "bytes"):
        value = m.get(key)
        if type(value) not in (int, float) or not 0 <= value <= _FLOAT_MAX:  # type(): a bool is refused; <=: an int past a float
            return False
    if (m["time_s"] == 0 and kind not in OVERHEADS) or (m["bytes"] == 0 and kind in SIZED):
        return False
    for key in SHAPES.get(kind, ()):
        value = m.get(key)
        if type(value) is not int or not 1 <= value <= _MAX_COUNT:
            return False
    for key in COUNTS.get(kind, ()):
        if key in m and (type(m[key]) is not int or not 1 <= m[key] <= _MAX_COUNT):
            return False
    return all(type(m.get(key)) is valid for key, needed, valid in _FLAGS if key in m or kind == needed) and \
        m.get("timing", "event") in _TIMINGS and m.get("align_bytes", 16) in _ALIGNS


_TIMINGS = ("event", "kernel")
_ALIGNS = (2, 4, 8, 16)
_TIMING_SET = frozenset(_TIMINGS)
_ALIGN_SET = frozenset(_ALIGNS)


def _check_measurement(m, where: str) -> None:
    if not isinstance(m, dict):
        raise ConfigError(f"{where}: a JSON object expected, got {_show(m)}")
    if m.get("timing", "event") not in _TIMINGS:
        raise ConfigError(f"{where}.timing {_show(m.get('timing'))} is not event or kernel")
    if m.get("align_bytes", 16) not in _ALIGNS:
        raise ConfigError(f"{where}.align_bytes {_show(m.get('align_bytes'))} is not 2, 4, 8 or 16")
    kind = m.get("kind")
    if kind not in (*SHAPES, *OVERHEADS, *SIZED):
        raise ConfigError(f"{where}: unknown kind {_show(kind)}; valid: {', '.join((*SHAPES, *OVERHEADS, *SIZED))}")
    where = f"{where} ({kind})"
    _number(m.get("time_s"), f"{where}: time_s", positive=kind not in OVERHEADS)
    _number(m.get("flop"), f"{where}: flop")
    _number(m.get("bytes"), f"{where}: bytes", positive=kind in SIZED)
    for key in SHAPES.get(kind, ()):
        _count(m.get(key), f"{where}: {key}")
    for key in COUNTS.get(kind, ()):
        if key in m:
            _count(m[key], f"{where}: {key}")
    # a GEMM's dtype names its model and an attention's causal flag is one of its features: both required
    for key, kinds, valid in (("dtype", ("gemm",), str), ("layout", (), str), ("warm", (), bool),
                              ("causal", ("attention",), bool)):
        if (key in m or kind in kinds) and not isinstance(m.get(key), valid):
            raise ConfigError(f"{where}: {key} must be {'a string' if valid is str else 'true or false'}, "
                              f"got {_show(m.get(key))}")
    if kind in ("conv", "conv_backward"):
        pad = m.get("pad")
        if isinstance(pad, bool) or pad != 0:
            pad = _count(pad, f"{where}: pad")
        if m["hw"] + 2 * pad < m["ksize"]:
            raise ConfigError(f"{where}: hw + 2 pad ({m['hw'] + 2 * pad}) is smaller than ksize ({m['ksize']}): "
                              "no output pixel")


def _not_finite(value, where: str, path: str) -> None:
    """Refuse a number that is not finite anywhere in the profile: parse_json refuses NaN and Infinity,
    but a literal like 1e400 still parses to infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {path} must be a finite number, got {value}")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        _not_finite(item, where, f"{path}[{key}]" if isinstance(value, list) else f"{path}.{key}".lstrip("."))


def _number(value, what: str, positive: bool = False) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):  # finite() alone takes "0.5"
        raise ConfigError(f"{what} must be a number, got {_show(value)}")
    number = finite(value, what)
    if number < 0 or (positive and number == 0):
        raise ConfigError(f"{what} must be {'> 0' if positive else '>= 0'}, got {_show(value)}")
    return number


def _count(value, what: str) -> int:
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or not 1 <= value <= _MAX_COUNT:
        raise ConfigError(f"{what} must be a whole number in [1, 2**53], got {_show(value)}")
    return int(value)


def _object(parent: dict, key: str, where: str, required: bool = False) -> dict:
    value = parent.get(key, None if required else {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{key}' must be an object, got {_show(value)}")
    return value


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------ bands recorded in a profile

def transfer_error(profile_path: str) -> float:
    """p90 |error| of a transfer between profiled devices of one generation, from transfer.json beside the
    profile folders (written by benchmarks/published_profiles.py) for a device's default profile, or
    transfer-<library>.json for a `<library>.json` profile (pytorch-eager: benchmarks/gpu_validate.py
    --write-transfer); 0.10 + the neighbour's band when none was measured (the rule before any
    transfer was measured)."""
    path = Path(profile_path)
    name = "transfer.json" if path.name == "profile.json" else f"transfer-{path.stem}.json"
    file = path.parent.parent / name
    try:
        value = parse_json(read_text(file, "transfer errors"), str(file)).get("p90_abs_error")
    except (OSError, ConfigError, AttributeError):
        value = None
    return float(value) if isinstance(value, (int, float)) and value >= 0 else 0.10


def own_band(profile: Profile, defaults: Defaults) -> float:
    """The band of a device's own profile: its held-back (or leave-one-out) p90, but never narrower
    than the datasheet band when a published profile lacks GEMM, attention or memory-bound curves:
    the ops it did not measure run on datasheet efficiencies, whose error it cannot bound."""
    band = recorded_band(profile)
    kinds = profile.raw.get("held_out", {}).get("by_kind", {})
    if profile.tier == "published" and not all(any(k.startswith(f) for k in kinds)
                                               for f in ("gemm", "attention", "memory")):
        band = max(band, defaults.datasheet_band_fraction)
    return band


def recorded_band(profile: Profile) -> float:
    """The tier's band: p90 |error| of the held-back points (a published profile), else of the
    leave-one-out interior points (all points if none are interior)."""
    held = profile.raw.get("held_out", {}).get("p90_abs_error")
    if isinstance(held, (int, float)):
        return float(held)
    loo = profile.raw.get("leave_one_out", {})
    value = loo.get("interior", {}).get("p90_abs_error")
    if value is None or value != value:
        value = loo.get("p90_abs_error")
    return float(value) if value is not None and value == value else 0.25
