"""Named SI and binary multipliers, and formatting of SI quantities for people.

Inside the library every quantity is a float in SI base units (FLOP, bytes, seconds, watts,
joules, USD). Human units appear only in data-file keys and at the CLI and app edges.
"""

import math

KILO = 1e3
MEGA = 1e6
GIGA = 1e9
TERA = 1e12
PETA = 1e15

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KIB = 2**10
MIB = 2**20
GIB = 2**30

_SI_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """Return `value` with an SI prefix, e.g. si(1.3e12, "FLOP") == "1.30 TFLOP"."""
    magnitude = abs(value)
    for scale, prefix in _SI_PREFIXES:
        if magnitude >= scale:
            return f"{value / scale:.{digits - 1}f} {prefix}{unit}".rstrip()
    return f"{value:.{digits - 1}f} {unit}".rstrip()


def count(value: float) -> str:
    """Return an integer with thousands separators, e.g. count(6738415616) == "6,738,415,616"."""
    return f"{int(round(value)):,}"


def usd(value: float) -> str:
    """Dollars for people: whole dollars with thousands separators from $1,000 ("$346,500"), cents below
    ("$3.47"), three significant figures under a dollar ("$0.0123"); "-" for a number that is not finite."""
    if not math.isfinite(value):
        return "-"
    sign, size = ("-" if value < 0 else ""), abs(value)
    if round(size, 2) >= 1000:
        return f"{sign}${size:,.0f}"
    digits = 2 - math.floor(math.log10(size)) if 0 < size < 1 else 2
    if round(size, digits) >= 1:  # 0.9996 is "$1.00", not "$1.000"
        digits = 2
    return f"{sign}${size:,.{digits}f}"


_PLAIN = frozenset({str, int, bool, type(None)})
_isfinite = math.isfinite


def json_safe(value):
    """`value` (dicts, lists, tuples, numbers) with every NaN or infinite float replaced by None: an
    unknown number is null in JSON, never the bare NaN that JSON does not allow."""
    kind = type(value)  # the exact built-in types first: a sweep turns thousands of predictions a second
    if kind in _PLAIN:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {k: v if type(v) in _PLAIN or (type(v) is float and _isfinite(v)) else json_safe(v)
                for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in _PLAIN or (type(v) is float and _isfinite(v)) else json_safe(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def percent_or_na(value: float) -> str:
    """A fraction as a percentage ("12.3%"); "n/a (no points)" for NaN, a statistic of nothing (calibration logs)."""
    return "n/a (no points)" if value != value else f"{value:.1%}"


def band_label(fraction: float) -> str:
    """The band in words, e.g. band_label(0.61) == "x1.61 either way": the factor a time or rate may be off
    by, up or down (see band)."""
    return f"x{1 + fraction:.2f} either way"


def band(value: float, fraction: float, inverse: bool = False) -> tuple[float, float]:
    """(low, high) of a time or a rate off by at most a factor 1 + `fraction` either way:
    value / (1 + f) .. value · (1 + f), symmetric in log space.

    A band is an error measured as |ln(predicted / measured)| (planner/hardware/measured_bands.py): a
    measurement 1 + f times slower or faster than the prediction is as far off, so both ends are the
    same factor away. `inverse` is kept for callers that name a rate; the band of a rate is the same
    interval. Never below 0 and never infinite for a finite value.
    """
    f = fraction
    return value / (1 + f), value * (1 + f)
