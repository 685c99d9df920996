"""One exception family. The CLI prints these as one clear message and exits non-zero."""

import difflib
from collections.abc import Iterable, Mapping


class PlannerError(Exception):
    """Base of every error planner raises on purpose: bad input, unknown name, bad data file."""


MAX_SHOWN_CHARS = 100
"""A name quoted in a message is cut to this many characters (a hostile one can be megabytes)."""
MAX_LISTED = 60
"""At most this many valid names are listed in one message."""


def shorten(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """`text` for a one-line message: cut to `limit` characters with its full length said."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def suggest(name: str, valid: Iterable[str], aliases: Mapping[str, str] | None = None, n: int = 3) -> list[str]:
    """Up to `n` of the `valid` names close to `name`, best first (case-insensitive): first those with a
    spelling holding every word of `name` (words split at '-', '_' and spaces; fewest other words first), then
    difflib's closest. A spelling is a valid name or one of its `aliases` (another spelling -> the valid
    name), so "nvidia-h100" finds h100-pcie and h100-sxm through their product names ("NVIDIA H100 PCIe",
    "NVIDIA H100 80GB HBM3"). The one place suggestions are made."""
    if len(name) > MAX_SHOWN_CHARS:  # difflib is quadratic in the name's length: a hostile megabyte name gets none
        return []
    spellings = {_spelling(v): v for v in valid}
    for alias, target in (aliases or {}).items():
        spellings.setdefault(_spelling(alias), target)
    query = _spelling(name)
    words = set(query.split("-")) - {""}

    def rank(spelling: str) -> tuple:  # fewest words besides the name's, then closest
        return len(set(spelling.split("-")) - words), -difflib.SequenceMatcher(None, query, spelling).ratio(), spelling

    holding = sorted((s for s in spellings if words and words <= set(s.split("-"))), key=rank)
    close = difflib.get_close_matches(query, list(spellings), n=len(spellings), cutoff=0.5)
    found: list[str] = []
    for spelling in holding + close:
        if spellings[spelling] not in found:
            found.append(spellings[spelling])
    return found[:n]


def _spelling(name: str) -> str:
    """`name` lower-cased with runs of spaces, '_' and '-' as one '-' (as hardware/catalog.py keys aliases)."""
    return "-".join(str(name).strip().lower().replace("_", " ").replace("-", " ").split())


class UnknownNameError(PlannerError):
    """A name (model, device, instance, ...) that is not in its registry."""

    def __init__(self, kind: str, name: str, valid: Iterable[str], aliases: Mapping[str, str] | None = None):
        self.kind = kind
        self.name = name
        self.valid = sorted(set(valid))  # a name in two registries (catalog and profiles) is listed once
        self.aliases = aliases or {}
        """Other spellings of valid names (a device's product names: "nvidia-h100-pcie" -> "h100-pcie")."""
        self._suggestions: list[str] | None = None
        super().__init__(kind, name)

    @property
    def suggestions(self) -> list[str]:
        """Up to 3 valid names close to `name` (suggest), worked out when first asked: a caller that catches
        the error and goes on (Context.device, for a profiled device that is not in the catalog) pays nothing."""
        if self._suggestions is None:
            self._suggestions = suggest(self.name, self.valid, self.aliases)
        return self._suggestions

    def __str__(self) -> str:
        hint = f" Did you mean: {', '.join(self.suggestions)}?" if self.suggestions else ""
        listed = ", ".join(self.valid[:MAX_LISTED])
        if len(self.valid) > MAX_LISTED:
            listed += f", ... and {len(self.valid) - MAX_LISTED:,} more"
        return f"unknown {self.kind} '{shorten(self.name)}'.{hint} Valid {self.kind}s: {listed}."


class ConfigError(PlannerError):
    """A malformed configuration: names the file, the field and what would be valid."""


class UnsupportedError(PlannerError):
    """A workload or mode that a model does not support (e.g. decode for a CNN)."""
