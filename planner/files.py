"""Reading and writing files safely.

Writing: a temporary file beside the target, flushed to disk, then renamed over it (os.replace is
atomic on one filesystem), so a file is never half written. Reading: every data file planner opens
(catalogs, configs, profiles, scenarios, --configs) goes through `read_text`, which bounds its size,
decodes UTF-8 (a BOM is dropped) and says what is wrong in one line; JSON goes through `parse_json`,
which bounds the nesting depth and refuses NaN and infinity. Nothing read here is ever executed.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import json
import math
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import orjson

from planner.errors import ConfigError, shorten

SPECS_PACKAGE = "planner_specs"
"""The package the top-level hardware_specs/ folder installs as (pyproject.toml: package-dir), so a wheel
carries the catalog, engines, profiles and curves as package data."""
SPECS_ENV = "PLANNER_HARDWARE_SPECS"
"""The environment variable naming another hardware_specs folder to read instead of the shipped one."""


def shipped_specs() -> Path:
    """The hardware_specs folder installed with planner, found through importlib.resources: the checkout's
    own folder in an editable install, site-packages/planner_specs in a wheel's."""
    return Path(str(importlib.resources.files(SPECS_PACKAGE)))


def specs_root() -> Path:
    """The one data root: the folder named by $PLANNER_HARDWARE_SPECS when that is set, else shipped_specs()."""
    override = os.environ.get(SPECS_ENV)
    return Path(override) if override else shipped_specs()


def check_specs_env(needed: str = "devices.csv") -> None:
    """ConfigError when $PLANNER_HARDWARE_SPECS is set to something that is not a hardware_specs folder (no
    `needed` file in it: devices.csv for the catalog, quant/recipes.json for the recipes alone): the message
    names the variable and the folder, before any file under it is read."""
    override = os.environ.get(SPECS_ENV)
    if not override:
        return
    folder = Path(override)
    shown = shorten(override)
    try:
        is_dir = folder.is_dir()
        ok = is_dir and (folder / needed).is_file()
    except (OSError, ValueError):
        is_dir = ok = False
    if not ok:
        what = "is not a folder" if not is_dir else f"has no {needed}"
        raise ConfigError(f"{SPECS_ENV}='{shown}' {what}: it must name a copy of planner's hardware_specs folder "
                          f"(devices.csv, engines/, efficiency/, ...); unset it to use the shipped one")


MAX_FILE_BYTES = 64 * 2**20
"""Largest data file read (64 MiB): the biggest shipped file, a calibration profile, is about 1.5 MiB."""
MAX_JSON_DEPTH = 64
"""Deepest JSON nesting accepted: planner's own files nest at most 5 deep."""


def new_file_mode() -> int:
    """The permissions of a file the program creates, 0666 less the process's umask (as open() gives): the
    temporary file of an atomic write gets them before it is renamed into place, as tempfile.mkstemp
    creates it 0600, readable by its owner only."""
    mask = os.umask(0o022)  # read by setting: os has no getter before Python 3.13
    os.umask(mask)
    return 0o666 & ~mask


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically; return the path. Raise ConfigError when `path` is a directory
    or its folder cannot be written; on any failure the target is untouched and no temporary is left."""
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"cannot write '{target}': it is a directory; give a file path")
    if not target.parent.is_dir():
        raise ConfigError(f"cannot write '{target}': folder '{target.parent}' does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise write_error(target, exc) from None
    try:
        os.chmod(tmp, new_file_mode())
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise write_error(target, exc) from None
        raise
    return target


def write_error(target: str | Path, exc: OSError, flag: str = "") -> ConfigError:
    """The one-line error for a file that could not be written (a full disk, a read-only or vanished folder,
    a name the file system refuses): the path, shortened, and the system's reason."""
    shown = shorten(str(target))
    reason = exc.strerror or str(exc) or type(exc).__name__
    return ConfigError(f"{flag + ': ' if flag else ''}cannot write '{shown}': {reason}")


def read_text(path: str | Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The text of a UTF-8 file (a leading BOM dropped). `what` names the file in messages ("--configs",
    "scenario"). Raise ConfigError when it is missing, not a regular file, larger than `max_bytes`,
    or not UTF-8."""
    return text_of(read_bytes(path, what, max_bytes), path, what)


def text_of(data: bytes, path: str | Path, what: str) -> str:
    """The UTF-8 text of `data`, read from `path`, refused as read_text refuses it."""
    return decode(data, f"{what} '{_short(Path(path))}'")


def read_bytes(path: str | Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a file, refused as read_text refuses it (missing, not a regular file, too large)."""
    file = Path(path)
    try:
        if not file.exists():
            raise ConfigError(f"{what}: file '{_short(file)}' does not exist")
        if not file.is_file():
            raise ConfigError(f"{what}: '{_short(file)}' is not a regular file")
        size = file.stat().st_size
        if size > max_bytes:
            raise ConfigError(f"{what}: '{_short(file)}' is {size:,} bytes; the limit is {max_bytes:,}")
        return file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read '{_short(file)}': {exc.strerror}") from None


def decode(data: bytes, what: str) -> str:
    """UTF-8 text of `data` (a leading BOM dropped); ConfigError naming the first bad byte otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}; "
                          "save it as UTF-8") from None


def _short(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 200 else text[:100] + "..." + text[-60:]


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKETS = np.zeros(256, dtype=np.int8)
_BRACKETS[[ord("["), ord("{")]] = 1
_BRACKETS[[ord("]"), ord("}")]] = -1
_QUOTE = ord('"')
_NOT_MARK = bytes(b for b in range(256) if chr(b) not in '[]{}"')
_DIGIT_MAP = bytes(ord("1") if ord("0") <= b <= ord("9") else ord("0") for b in range(256))
_LONG_DIGITS = b"1" * 19
"""19 digits in a row: an integer of 19 digits or more may lie beyond 64 bits (-9999999999999999999 does)."""


def json_depth(text: str) -> int:
    """Deepest nesting of [ and { in JSON text, strings skipped (no recursion). Text without a backslash
    is scanned by numpy: a character lies inside a string when an odd number of quotes precede it, and
    the depth is the running sum of +1 per opening and -1 per closing bracket outside strings (a 1.9 MB
    calibration profile in 7 ms, where the loop below takes 39 ms). Text with a backslash
    (an escaped quote changes what is a string) has its strings cut out and everything but brackets
    dropped by regular expressions, so the loop runs over brackets only. An unterminated string's
    brackets count there and not in the numpy scan: the text is refused by the parser either way."""
    return _depth(text, text.encode("utf-8", "surrogatepass"))


def _depth(text: str, data: bytes) -> int:
    """json_depth of `text`, given its UTF-8 bytes `data` (parse_json encodes it once for two scans)."""
    if b"\\" not in data:
        # the quotes and brackets alone, in order (bytes.translate deletes the rest at C speed)
        marks = np.frombuffer(data.translate(None, _NOT_MARK), dtype=np.uint8)
        outside = (np.cumsum(marks == _QUOTE) & 1) == 0
        running = np.cumsum(_BRACKETS[marks] * outside)
        return max(int(running.max()), 0) if len(running) else 0
    depth = deepest = 0
    for ch in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"{text[:40]} is beyond the range of a float")
    return value


def parse_json(text: str, what: str, max_depth: int = MAX_JSON_DEPTH, finite: bool = False):
    """Parse JSON text; raise ConfigError when it is malformed, nested deeper than `max_depth`, or holds
    NaN or Infinity; with `finite`, also when a number overflows a float (1e400), so that every float of
    the result is finite (a reader of many numbers then need not walk them again)."""
    data = text.encode("utf-8", "surrogatepass")
    if _depth(text, data) > max_depth:
        raise ConfigError(f"{what}: JSON nested deeper than {max_depth} levels")
    # orjson parses strict JSON three times as fast as json (a 2.2 MB published profile in 8 ms, not 24)
    # and refuses NaN, Infinity, numbers that overflow a float and invalid UTF-8; whatever it refuses
    # goes through json below, which words the refusal as before. A run of 19 digits may be an integer
    # beyond 64 bits, which orjson turns into a float where json keeps it an int: json reads that text.
    if _LONG_DIGITS not in data.translate(_DIGIT_MAP):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        if finite:
            return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{what}: not valid JSON ({exc})") from None


def finite(value: float, what: str) -> float:
    """`value` as a float when it is a finite number; ConfigError naming `what` otherwise."""
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{what} must be a number, got {_repr(value)}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{what} must be a finite number, got {_repr(value)}")
    return number


def _repr(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@contextlib.contextmanager
def exclusive_lock(path: str | Path, what: str):
    """Hold an exclusive lock on the file `path` (created, holding this process's id) while the block runs, so
    that a second planner process writing the same output stops at once: ConfigError naming `what` and the
    other process's id. The lock file is removed on the way out. Where the platform has no fcntl (Windows)
    the block runs unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux or macOS
        yield
        return
    lock = Path(path)
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise write_error(lock, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                other = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            except OSError:
                other = "unknown"
            os.close(fd)
            raise ConfigError(f"{what} is being written by another planner process (pid {other[:12]}); wait for "
                              "it to finish or give another output") from None
        # the file may have been removed by its previous holder between our open and lock: lock the one on disk
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except OSError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


SPREADSHEET_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
"""Leading characters that make a spreadsheet read a cell as a formula (OWASP, CSV injection)."""


def spreadsheet_csv(frame) -> str:
    """A DataFrame as CSV for a person to open in a spreadsheet: a text cell that starts with a formula
    character (SPREADSHEET_TRIGGERS) gets a leading apostrophe, so that a name from a scenario or a catalog
    ("=HYPERLINK(...)") is shown, not run; numbers (a negative one too) are written as they are."""

    def safe(value):
        if isinstance(value, str) and value.startswith(SPREADSHEET_TRIGGERS):
            return "'" + value
        return value

    from pandas.api.types import is_object_dtype, is_string_dtype

    texts = [name for name in frame.columns if is_object_dtype(frame[name]) or is_string_dtype(frame[name])]
    out = frame.copy()
    for name in texts:
        out[name] = out[name].map(safe)
    return out.to_csv(index=False)
