"""The load a serving simulator runs under: requests as (arrival time, input tokens, output tokens).

Open-loop arrivals come from a Poisson or a gamma renewal process (gaps of a chosen coefficient of
variation: 1 is Poisson, above 1 bursty), lengths fixed, drawn from a preset of lengths.csv, or a mix of
fixed-length buckets (request k is bucket i with probability share_i). A recorded
trace (CSV or JSON lines, the Azure LLM inference trace included) is read as data only.
"""

from __future__ import annotations

import csv
import datetime
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planner.errors import ConfigError, UnknownNameError, shorten
from planner.files import parse_json, read_text, specs_root
from planner.hardware.cells import Row, parse_float, read_rows
from planner.workload.graphs import LIMITS

MAX_REQUESTS = 1_000_000  # most requests in one load, drawn or read from a trace
MAX_LEN_TOKENS = min(2**20, LIMITS["context_len"] // 2)  # longest input or output; the sum fits the context limit
MIN_RATE_RPS, MAX_RATE_RPS = 1e-9, 1e6  # request rates accepted, in requests per s
MIN_CV, MAX_CV = 1e-3, 100.0  # coefficients of variation of the gaps (below 1e-3 the gamma shape passes 1e6)
MAX_PARTS = 100_000  # most replicas split_round_robin spreads over
MAX_MIX_BUCKETS = 64  # most buckets in a length mix
SHARE_TOLERANCE = 1e-6  # how far a mix's shares may add up from 1 (as a plan scenario's buckets)
COLUMNS = ("name", *(f"{s}_{c}" for s in ("input", "output") for c in ("dist", "mean", "std", "min", "max")),
           "source", "date", "notes")
ARRIVAL_KEYS = ("arrival_s", "timestamp_s", "TIMESTAMP")  # seconds, or (Azure trace) a date and time
INPUT_KEYS = ("input_len", "input_tokens", "prompt_tokens", "ContextTokens")
OUTPUT_KEYS = ("output_len", "output_tokens", "GeneratedTokens")
_DATETIME = re.compile(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(\.\d+)?([^.]*)$")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def serving_root() -> Path:
    """The serving data folder: $PLANNER_HARDWARE_SPECS/serving when that is set, else the shipped one (lengths.csv,
    clients.json, schedulers.json)."""
    return specs_root() / "serving"


@dataclass(frozen=True, slots=True, eq=False)
class Arrivals:
    """Open-loop requests, sorted by arrival. The arrays are read-only copies of what was given."""

    arrival_s: np.ndarray
    """Arrival time of each request in s from 0: float64, finite, non-negative, non-decreasing."""
    input_len: np.ndarray
    """Input (prompt) tokens of each request: int64 in [1, MAX_LEN_TOKENS]."""
    output_len: np.ndarray
    """Output (generated) tokens of each request: int64 in [1, MAX_LEN_TOKENS]."""

    def __post_init__(self):
        for name in ("arrival_s", "input_len", "output_len"):  # read-only float64 / int64 copies
            given, seconds = np.asarray(getattr(self, name)), name == "arrival_s"
            if given.dtype.kind not in ("fiu" if seconds else "iu") or given.ndim != 1 or len(given) > MAX_REQUESTS \
                    or given.shape != np.shape(self.arrival_s):
                kind = "numbers" if seconds else "whole numbers"
                raise ConfigError(f"arrivals: {name} must be a 1-D array of up to {MAX_REQUESTS:,} {kind}, as long as "
                                  f"arrival_s; got {given.dtype} of shape {given.shape}")
            copy = np.array(given, dtype=np.float64 if seconds else np.int64)
            copy.flags.writeable = False
            object.__setattr__(self, name, copy)
        a, i, o = self.arrival_s, self.input_len, self.output_len
        backwards = np.append(False, np.diff(a) < 0)
        for name, values, bad, valid in (
                ("arrival_s", a, ~np.isfinite(a) | (a < 0) | backwards, "finite s >= 0, non-decreasing"),
                ("input_len", i, (i < 1) | (i > MAX_LEN_TOKENS), f"tokens in [1, {MAX_LEN_TOKENS:,}]"),
                ("output_len", o, (o < 1) | (o > MAX_LEN_TOKENS), f"tokens in [1, {MAX_LEN_TOKENS:,}]")):
            if bad.any():
                k = int(np.argmax(bad))
                raise ConfigError(f"arrivals: {name} of request {k} is {values[k].item()!r}; valid: {valid}")

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])


@dataclass(frozen=True, slots=True)
class LengthDist:
    """How the input or the output length of a request is drawn."""

    dist: str
    """"lognormal", "fixed" (every request `mean_tokens`), or "mix" (one side of a length mix: its share-weighted
    mean and standard deviation, its shortest and longest bucket; drawn only jointly, by Lengths.sample)."""
    mean_tokens: float
    """Mean length in tokens, before rounding and clipping."""
    std_tokens: float
    """Standard deviation of the length in tokens, before rounding and clipping (0 when fixed)."""
    min_tokens: int
    """Shortest length in tokens: draws are clipped to [min_tokens, max_tokens]."""
    max_tokens: int
    """Longest length in tokens."""

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """`n` lengths in tokens (int64): lognormal of `mean_tokens` and `std_tokens`, rounded and clipped."""
        if self.dist == "mix":
            raise ConfigError("one side of a length mix is not drawn alone: Lengths.sample draws input and output "
                              "together")
        if self.dist == "fixed" or self.std_tokens == 0:
            return np.full(n, int(round(self.mean_tokens)), dtype=np.int64)
        sigma2 = math.log1p((self.std_tokens / self.mean_tokens) ** 2)  # sigma^2 = ln(1 + std^2 / mean^2)
        mu = math.log(self.mean_tokens) - sigma2 / 2  # so that E[X] = exp(mu + sigma^2 / 2) = mean
        draws = np.rint(rng.lognormal(mu, math.sqrt(sigma2), n))
        return np.clip(draws, self.min_tokens, self.max_tokens).astype(np.int64)


@dataclass(frozen=True, slots=True)
class Lengths:
    """How request lengths are drawn: fixed, a preset row of hardware_specs/serving/lengths.csv, or a mix of
    fixed-length buckets (mix_lengths)."""

    name: str
    """"fixed", "mix" or the preset's name."""
    input_len: int | None
    """The input tokens of every request when fixed; None for a preset or a mix."""
    output_len: int | None
    """The output tokens of every request when fixed; None for a preset or a mix."""
    input: LengthDist
    """How input lengths are drawn (in tokens)."""
    output: LengthDist
    """How output lengths are drawn (in tokens)."""
    source: str = "given"
    """Where a preset's numbers come from; "given" for fixed lengths and for a mix."""
    buckets: tuple[tuple[int, int, float], ...] = ()
    """A mix's buckets: (input tokens, output tokens, share of the requests), the shares adding up to 1; () when
    not a mix."""

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(input tokens, output tokens) of `n` requests as int64 arrays. Fixed or a preset: all inputs are drawn
        from `rng` first, then the outputs. A mix: request k is bucket i with probability share_i (one draw of
        `rng` per request, numpy's Generator.choice), its input and output that bucket's."""
        n = _arg(n, "n", 1, MAX_REQUESTS, whole=True)
        if not isinstance(rng, np.random.Generator):
            raise ConfigError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        if self.buckets:
            shares = np.array([b[2] for b in self.buckets])
            pick = rng.choice(len(self.buckets), size=n, p=shares / shares.sum())  # the sum is 1 within 1e-6
            table = np.array([b[:2] for b in self.buckets], dtype=np.int64)
            return table[pick, 0], table[pick, 1]
        return self.input.sample(n, rng), self.output.sample(n, rng)


def fixed_lengths(input_len: int, output_len: int) -> Lengths:
    """Lengths where every request has `input_len` input and `output_len` output tokens."""
    i = _arg(input_len, "input_len", 1, MAX_LEN_TOKENS, whole=True)
    o = _arg(output_len, "output_len", 1, MAX_LEN_TOKENS, whole=True)
    return Lengths("fixed", i, o, LengthDist("fixed", float(i), 0.0, i, i), LengthDist("fixed", float(o), 0.0, o, o))


def mix_lengths(buckets) -> Lengths:
    """Lengths drawn from `buckets`, a sequence of (input tokens, output tokens, share of the requests): whole
    tokens in [1, MAX_LEN_TOKENS], shares in (0, 1] adding up to 1 (within SHARE_TOLERANCE). ConfigError, one
    line naming the row (from 1), for a bad row."""
    if isinstance(buckets, (str, bytes)) or not isinstance(buckets, (tuple, list)) \
            or not 1 <= len(buckets) <= MAX_MIX_BUCKETS:
        raise ConfigError(f"a length mix needs 1 to {MAX_MIX_BUCKETS} rows of (input tokens, output tokens, share), "
                          f"got {shorten(repr(buckets), 60)}")
    rows = []
    for k, row in enumerate(buckets, 1):
        where = f"length mix row {k}"
        if isinstance(row, (str, bytes)) or not isinstance(row, (tuple, list)) or len(row) != 3:
            raise ConfigError(f"{where}: needs (input tokens, output tokens, share), got {shorten(repr(row), 60)}")
        i = _arg(row[0], f"{where}: input tokens", 1, MAX_LEN_TOKENS, whole=True)
        o = _arg(row[1], f"{where}: output tokens", 1, MAX_LEN_TOKENS, whole=True)
        share = _arg(row[2], f"{where}: share", 0.0, 1.0, unit=" (a fraction of the requests)")
        if share == 0:
            raise ConfigError(f"{where}: share must be above 0 (a fraction of the requests); delete the row instead")
        rows.append((i, o, share))
    total = math.fsum(r[2] for r in rows)
    if abs(total - 1) > SHARE_TOLERANCE:
        raise ConfigError(f"length mix: shares add up to {total:g}, not 1")
    inputs, outputs = _mix_side([(r[0], r[2]) for r in rows]), _mix_side([(r[1], r[2]) for r in rows])
    return Lengths("mix", None, None, inputs, outputs, buckets=tuple(rows))


def _mix_side(pairs: list[tuple[int, float]]) -> LengthDist:
    """One side of a mix as a LengthDist "mix": mean = sum share_i x_i, std = sqrt(sum share_i (x_i - mean)^2)
    tokens, min and max of the x_i."""
    mean = math.fsum(share * x for x, share in pairs)
    std = math.sqrt(math.fsum(share * (x - mean) ** 2 for x, share in pairs))
    return LengthDist("mix", mean, std, min(x for x, _ in pairs), max(x for x, _ in pairs))


def presets(root: str | Path | None = None) -> dict[str, Lengths]:
    """Every length preset in `root`/lengths.csv by name (root: $PLANNER_HARDWARE_SPECS/serving when that is set,
    else the repository's). Raise CatalogError (a ConfigError naming file, row and column) for a bad row."""
    if root is None:
        root = serving_root()
    table: dict[str, Lengths] = {}
    for row in read_rows(Path(root) / "lengths.csv", COLUMNS, rows_required=True):
        name = row.slug("name")
        if name in table or name == "fixed":
            row.fail("name", "a name used once in the file, other than 'fixed'")
        row.date("date")
        row.text("notes", required=False)
        table[name] = Lengths(name, None, None, _side(row, "input"), _side(row, "output"), source=row.text("source"))
    return table


def _side(row: Row, side: str) -> LengthDist:
    """The `side` ("input"/"output") LengthDist of a lengths.csv row (fixed: empty std, min, max = 0, mean, mean)."""
    fixed = row.choice(f"{side}_dist", ("lognormal", "fixed")) == "fixed"
    mean_cell = row.cells[f"{side}_mean"].strip()
    values = []
    for column, lo, hi, whole, empty in (("mean", 1, MAX_LEN_TOKENS, fixed, ""),
                                         ("min", 1, MAX_LEN_TOKENS, True, mean_cell),
                                         ("max", 1, MAX_LEN_TOKENS, True, mean_cell),
                                         ("std", 0, 0 if fixed else MAX_LEN_TOKENS, False, "0")):
        value = parse_float(row.cells[f"{side}_{column}"].strip() or (empty if fixed else ""))
        if value is None or not lo <= value <= hi or whole and value != int(value):
            row.fail(f"{side}_{column}", f"{'a whole number' if whole else 'a number'} of tokens in [{lo}, {hi:,}]")
        values.append(value)
    mean, lo, hi, std = values
    if lo > hi:
        row.fail(f"{side}_max", f"a whole number of tokens >= {side}_min ({lo:g})")
    if not lo <= mean <= hi:
        row.fail(f"{side}_mean", f"a number of tokens within [{side}_min, {side}_max] = [{lo:g}, {hi:g}]")
    return LengthDist("fixed" if fixed else "lognormal", mean, std, int(lo), int(hi))


def preset_lengths(name: str, root: str | Path | None = None) -> Lengths:
    """The length preset called `name` (case-insensitive); UnknownNameError lists the valid ones."""
    table = presets(root)
    if not isinstance(name, str) or name.strip().lower() not in table:
        raise UnknownNameError("length preset", str(name), table)
    return table[name.strip().lower()]


def poisson(rate_rps: float, n: int, lengths: Lengths, seed: int = 0) -> Arrivals:
    """`n` requests of a Poisson process of `rate_rps` requests per s: exponential gaps of mean 1/rate_rps s,
    the first request at the first gap. The same draws as `gamma` with cv = 1."""
    return gamma(rate_rps, 1.0, n, lengths, seed)


def gamma(rate_rps: float, cv: float, n: int, lengths: Lengths, seed: int = 0) -> Arrivals:
    """`n` requests with gamma gaps of mean 1/rate_rps s and coefficient of variation `cv` (shape k = 1/cv^2,
    scale 1/(rate_rps k) s; 1 is Poisson, above 1 bursty), the first at the first gap. Gaps, then inputs, then
    outputs are drawn from one generator seeded `seed`."""
    rate = _arg(rate_rps, "rate_rps", MIN_RATE_RPS, MAX_RATE_RPS, unit=" requests per s")
    cv = _arg(cv, "cv", MIN_CV, MAX_CV, unit=" (standard deviation / mean of the gaps)")
    n, seed = _arg(n, "n", 1, MAX_REQUESTS, whole=True), _arg(seed, "seed", 0, 2**64 - 1, whole=True)
    if not isinstance(lengths, Lengths):
        raise ConfigError("lengths must be a Lengths (fixed_lengths, preset_lengths or mix_lengths), got "
                          f"{type(lengths).__name__}")
    rng, shape = np.random.default_rng(seed), 1.0 / cv**2  # numpy draws shape-1 gamma as exponential
    return Arrivals(np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), n)), *lengths.sample(n, rng))


def _arg(value, what: str, lo: float, hi: float, whole: bool = False, unit: str = ""):
    """`value` as an int (`whole`) or a float when it is a number in [lo, hi] (bools are not); ConfigError otherwise."""
    kinds = (int, np.integer) if whole else (int, float, np.integer, np.floating)
    ok = not isinstance(value, bool) and isinstance(value, kinds) and abs(value) < 1e300
    if not ok or not math.isfinite(value) or not lo <= value <= hi:
        span = f"a whole number in [{lo:,}, {hi:,}]" if whole else f"a finite number in [{lo:,.15g}, {hi:,.15g}]"
        raise ConfigError(f"{what} must be {span}{unit}, got {shorten(repr(value), 60)}")
    return int(value) if whole else float(value)


def split_round_robin(arrivals: Arrivals, parts: int) -> list[Arrivals]:
    """`parts` loads, request i going to part i % parts in order (a round-robin load balancer over replicas);
    arrival times are kept. A part is empty when there are fewer requests than parts."""
    if not isinstance(arrivals, Arrivals):
        raise ConfigError(f"arrivals must be an Arrivals, got {type(arrivals).__name__}")
    k = _arg(parts, "parts", 1, MAX_PARTS, whole=True)
    return [Arrivals(arrivals.arrival_s[j::k], arrivals.input_len[j::k], arrivals.output_len[j::k]) for j in range(k)]


def read_trace(path: str | Path, max_requests: int = MAX_REQUESTS) -> Arrivals:
    """The requests of a trace: .csv (a header row) or .jsonl (a JSON object a line), each with an arrival
    (ARRIVAL_KEYS), input tokens (INPUT_KEYS) and output tokens (OUTPUT_KEYS). Arrival times become s after
    the first request, sorted (stable). ConfigError names the file and line of a bad row or value."""
    limit = _arg(max_requests, "max_requests", 1, MAX_REQUESTS, whole=True)
    file = Path(path)
    where = f"trace '{shorten(str(file))}'"
    if file.suffix.lower() not in (".csv", ".jsonl"):
        raise ConfigError(f"{where}: unknown suffix '{shorten(file.suffix, 20)}'; valid: .csv (header row) or .jsonl")
    is_csv = file.suffix.lower() == ".csv"
    text = read_text(file, "trace")
    keys, rows = None, []
    for line, record in _records(text, where, is_csv):
        at = f"{where} line {line}"
        if keys is None:  # one key of each group, in the header or the first object
            found = [[k for k in names if k in record] for names in (ARRIVAL_KEYS, INPUT_KEYS, OUTPUT_KEYS)]
            if bad := [names for names, f in zip((ARRIVAL_KEYS, INPUT_KEYS, OUTPUT_KEYS), found) if len(f) != 1]:
                raise ConfigError(f"{where + ' header' if is_csv else at}: needs exactly one of {', '.join(bad[0])}")
            keys = [f[0] for f in found]
        if len(rows) == limit:
            raise ConfigError(f"{where} has more than {limit:,} requests (max_requests, at most {MAX_REQUESTS:,})")
        arrival, inp, out = (record.get(k) for k in keys)  # None (missing) fails as not a number
        rows.append((_micros(arrival, at) if keys[0] == "TIMESTAMP" else
                     _number(arrival, keys[0], at, is_csv, 0, math.inf, "seconds"),
                     _number(inp, keys[1], at, is_csv, 1, MAX_LEN_TOKENS, "whole tokens", whole=True),
                     _number(out, keys[2], at, is_csv, 1, MAX_LEN_TOKENS, "whole tokens", whole=True)))
    if not rows:
        raise ConfigError(f"{where} has no requests")
    # TIMESTAMP: whole microseconds since 1970, subtracted exactly before they become seconds
    arrival_s = np.array([r[0] for r in rows], dtype=np.int64 if keys[0] == "TIMESTAMP" else np.float64)
    arrival_s = (arrival_s - arrival_s.min()) / (1e6 if keys[0] == "TIMESTAMP" else 1.0)
    order = np.argsort(arrival_s, kind="stable")
    lengths = np.array([r[1:] for r in rows], dtype=np.int64)[order]
    return Arrivals(arrival_s[order], lengths[:, 0], lengths[:, 1])


def _records(text: str, where: str, is_csv: bool):
    """(line, {key: value}) of each non-blank row of CSV text below its header, or of JSON lines text."""
    if not is_csv:
        for line, raw in enumerate(text.split("\n"), start=1):
            if not raw.strip():
                continue
            if not isinstance(record := parse_json(raw, f"{where} line {line}"), dict):
                raise ConfigError(f"{where} line {line}: a JSON object is needed, got {type(record).__name__}")
            yield line, record
        return
    reader, header = csv.reader(io.StringIO(text, newline="")), None
    try:
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            if header is None:
                header = [c.strip() for c in cells]
                if twice := sorted({c for c in header if c and header.count(c) > 1}):
                    raise ConfigError(f"{where} line {reader.line_num}: column '{shorten(twice[0], 40)}' twice")
            elif len(cells) != len(header):
                raise ConfigError(f"{where} line {reader.line_num}: {len(cells)} cells, the header has {len(header)}")
            else:
                yield reader.line_num, dict(zip(header, cells))
    except csv.Error as exc:  # a cell past the csv module's size limit
        raise ConfigError(f"{where} line {reader.line_num + 1}: not well-formed CSV ({exc})") from None


def _number(value, key: str, at: str, text: bool, lo: float, hi: float, valid: str, whole: bool = False) -> float:
    """The number in a CSV cell (`text`) or a JSON number, in [lo, hi]; ConfigError naming `at` and `key` otherwise."""
    number = parse_float(value.strip()) if isinstance(value, str) and text else \
        float(value) if type(value) in (int, float) and abs(value) < 1e300 else None  # a bool is not a number
    if number is None or not math.isfinite(number) or not lo <= number <= hi or whole and number != int(number):
        shown = "missing or null" if value is None else shorten(repr(value), 60)
        raise ConfigError(f"{at}: '{key}' is {shown}; valid: {valid} in [{lo:,.15g}, {hi:,.15g}]")
    return number


def _micros(value, at: str) -> int:
    """Whole microseconds since 1970 (UTC when no zone is given) of a date and time such as
    '2023-11-16 18:15:46.6805900' (the Azure trace's 7-digit fraction is cut to 6)."""
    match = _DATETIME.match(value.strip()) if isinstance(value, str) and len(value) <= 64 else None
    try:
        when = datetime.datetime.fromisoformat(match[1] + (match[2] or "")[:7] + match[3])
    except (TypeError, ValueError):  # TypeError: no match
        shown = "missing or null" if value is None else shorten(repr(value), 60)
        raise ConfigError(f"{at}: 'TIMESTAMP' is {shown}; valid: date and time '2023-11-16 18:15:46.6805900'") from None
    return (when.replace(tzinfo=when.tzinfo or datetime.timezone.utc) - _EPOCH) // datetime.timedelta(microseconds=1)
