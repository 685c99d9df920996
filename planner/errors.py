"""One exception family. The CLI prints these as one clear message and exits non-zero."""

import difflib
from collections.abc import Iterable


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


class UnknownNameError(PlannerError):
    """A name (model, device, instance, ...) that is not in its registry."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]):
        self.kind = kind
        self.name = name
        self.valid = sorted(set(valid))  # a name in two registries (catalog and profiles) is listed once
        # difflib is quadratic in the name's length: a hostile megabyte name gets no suggestions
        close = difflib.get_close_matches(name.lower(), [v.lower() for v in self.valid], n=3, cutoff=0.5) \
            if len(name) <= MAX_SHOWN_CHARS else []
        by_lower = {v.lower(): v for v in self.valid}
        self.suggestions = [by_lower[c] for c in close]
        hint = f" Did you mean: {', '.join(self.suggestions)}?" if self.suggestions else ""
        listed = ", ".join(self.valid[:MAX_LISTED])
        if len(self.valid) > MAX_LISTED:
            listed += f", ... and {len(self.valid) - MAX_LISTED:,} more"
        super().__init__(f"unknown {kind} '{shorten(name)}'.{hint} Valid {kind}s: {listed}.")


class ConfigError(PlannerError):
    """A malformed configuration: names the file, the field and what would be valid."""


class UnsupportedError(PlannerError):
    """A workload or mode that a model does not support (e.g. decode for a CNN)."""
