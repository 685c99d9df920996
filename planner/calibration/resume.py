"""What an interrupted calibration leaves behind, and the files calibration reads and writes.

`<out>/<device-id>/partial.jsonl` holds one JSON header line ({"plan", "device", "spent_s",
"invocations", "probe_cv"}) and then one line per finished measurement, each appended and flushed as it
finishes. Each record also carries `spent_s` (seconds of the budget spent across every invocation when
it finished: the whole command's wall time, not only measuring) and `invocation` (which run measured
it), so the time spent survives a kill without another file; a Ctrl-C or a refusal rewrites the header
with the time spent up to then. `probe_cv` is the largest variation of the busy-machine probes any
earlier invocation saw (calibrate.py BUSY_CV): measurements taken on a busy machine stay suspect after
a resume. On resume the file is read leniently (a cut last line is dropped, a malformed
line or a record that disagrees with its plan entry skipped, each with a note; nothing in it can stop
a run) and rewritten atomically as a clean header plus the records kept: appends then always start on
a fresh line. Without that rewrite, the first record after a cut line would be glued onto it and every
later resume would stop reading there.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from planner.errors import ConfigError
from planner.files import MAX_FILE_BYTES, parse_json, read_text, write_text_atomic

BOOKKEEPING = ("spent_s", "invocation")
"""Fields of a partial.jsonl record that are about the run, not the measurement: not in the profile."""


@dataclass(frozen=True, slots=True)
class Resumed:
    """What an earlier run of the same plan left in partial.jsonl."""

    done: tuple[dict, ...]
    """Finished measurements (and recorded failures), one per plan entry, in file order."""
    spent_s: float
    """Measuring seconds across the earlier invocations."""
    invocations: int
    """Earlier invocations of this plan (0 for a fresh start)."""
    probe_cv: float
    """Largest coefficient of variation of the busy-machine probes an earlier invocation recorded (0: none)."""
    notes: tuple[str, ...]
    """What was repaired or ignored, one line each, for the log."""


def _nonnegative(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) and value >= 0 else 0.0


_MEASURED = ("time_s", "flop", "bytes")
"""What a measurement adds to its plan entry (`bytes`, a memory kernel's buffer size in the entry,
becomes the traffic counted)."""


def _record_ok(record: object, plan_keys: set[str]) -> bool:
    """A record this plan could have written: its key is a plan entry's, every field of that entry
    (kind, dtype, shape, warm, ...) is in the record with the same value and type (the profile's fit
    reads them: a record of a GEMM with no `m`, or a cold copy marked warm, would stop the run or skew
    the bandwidth ceiling), and it holds either an error or a positive finite time with finite FLOP
    and bytes (a NaN would poison the fit and the profile)."""
    if not isinstance(record, dict) or record.get("key") not in plan_keys or not isinstance(record.get("kind"), str):
        return False
    entry = json.loads(record["key"])  # a plan key: json.dumps of its entry
    if any(field not in _MEASURED and (type(record.get(field)) is not type(value) or record.get(field) != value)
           for field, value in entry.items()):
        return False
    if isinstance(record.get("error"), str):
        return True
    numbers = [record.get(k) for k in ("time_s", "flop", "bytes")]
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
               for x in numbers) and numbers[0] > 0


def read_partial(path: Path, digest: str, plan_keys: set[str]) -> Resumed:
    """The measurements of plan `digest` (whose entries' keys are `plan_keys`) that `path` holds.

    Never raises over its content: a file of another plan, unreadable or over the size limit counts as
    none; a cut last line (the interruption came mid-write) is dropped and a malformed line elsewhere
    skipped, each with a note; a second record of one entry is ignored. Those entries are measured again.
    """
    empty = Resumed((), 0.0, 0, 0.0, ())
    if not path.exists():
        return empty
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            return Resumed((), 0.0, 0, 0.0, (f"{path.name} is {size:,} bytes, over the {MAX_FILE_BYTES:,} limit: "
                                        "starting afresh",))
        # lenient decoding: a byte that is not UTF-8 only spoils its own line
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        return Resumed((), 0.0, 0, 0.0, (f"cannot read {path.name} ({exc.strerror}): starting afresh",))
    complete = text.endswith("\n")
    lines = text.split("\n")
    if complete:
        lines.pop()
    if not lines:
        return empty
    try:
        header = parse_json(lines[0], path.name)
    except ConfigError:
        header = None
    if not isinstance(header, dict):
        return Resumed((), 0.0, 0, 0.0, (f"the header line of {path.name} is unreadable: starting afresh",))
    if header.get("plan") != digest:
        return Resumed((), 0.0, 0, 0.0, (f"{path.name} holds measurements of another plan: starting afresh",))
    done: list[dict] = []
    seen: set[str] = set()
    notes: list[str] = []
    spent_s = _nonnegative(header.get("spent_s"))
    invocations = int(_nonnegative(header.get("invocations")))
    for number, line in enumerate(lines[1:], start=2):
        try:
            record = parse_json(line, path.name)
        except ConfigError:
            record = None
        if not _record_ok(record, plan_keys):
            last = number == len(lines)
            if last and not complete:
                notes.append(f"dropped the cut last line of {path.name} (line {number}, {len(line)} characters, "
                             "written when the run was interrupted): that measurement runs again")
            else:
                notes.append(f"skipped malformed line {number} of {path.name}: that measurement runs again")
            continue
        if record["key"] in seen:
            continue
        seen.add(record["key"])
        done.append(record)
        spent_s = max(spent_s, _nonnegative(record.get("spent_s")))
        invocations = max(invocations, int(_nonnegative(record.get("invocation"))))
    return Resumed(tuple(done), spent_s, invocations, _nonnegative(header.get("probe_cv")), tuple(notes))


def write_partial(path: Path, header: dict, records: tuple[dict, ...] | list[dict]) -> None:
    """Rewrite `path` atomically as `header` and `records`, one JSON line each, every line whole."""
    write_text_atomic(path, "".join(json.dumps(item) + "\n" for item in (header, *records)))


def profile_root(out: str | Path | None, default: Path) -> Path:
    """The folder profiles go under (`out`, else `default`); ConfigError when it names something that
    is not a folder (it is checked before anything is measured or written)."""
    root = Path(out) if out else default
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--out '{_short(root)}' is a file, not a folder: give the folder profiles are written "
                          f"under (as <out>/<device-id>/profile.json; default {default})")
    return root


def device_folder(root: Path, device_id: str) -> Path:
    """`root/device_id`, created; ConfigError when it cannot be, or when its profile.json or
    partial.jsonl is not a regular file (found before measuring, not after)."""
    folder = root / device_id
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the profile folder '{_short(folder)}': {exc.strerror or exc}") from None
    for name in ("profile.json", "partial.jsonl"):
        if (folder / name).exists() and not (folder / name).is_file():
            raise ConfigError(f"'{_short(folder / name)}' is not a regular file: move it away and run again")
    return folder


def read_profile_json(path: Path) -> dict:
    """A profile.json as a dict with its list of measurements, as rows whichever layout the file holds
    (planner/hardware/profile_table.py); ConfigError naming the file otherwise."""
    from planner.hardware.profile_check import check_columns
    from planner.hardware.profile_table import measurement_rows

    where = f"calibration profile '{_short(path)}'"
    profile = parse_json(read_text(path, "calibration profile"), where)
    if isinstance(profile, dict) and isinstance(profile.get("measurements"), dict):
        check_columns(profile["measurements"], where)
        profile["measurements"] = list(measurement_rows(profile["measurements"]))
    if not isinstance(profile, dict) or not isinstance(profile.get("measurements"), list) or \
            not all(isinstance(m, dict) for m in profile["measurements"]):
        raise ConfigError(f"{where}: not a profile (no list of measurements)")
    return profile


def json_safe(value: object) -> object:
    """`value` with every non-finite float replaced by None: a profile is strict JSON, which the
    readers (planner.files.parse_json) require; NaN appears when a fit has no points."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _short(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 200 else text[:100] + "..." + text[-60:]
