"""One exception family. The CLI prints these as one clear message and exits non-zero."""

import difflib
from collections.abc import Iterable


class PlannerError(Exception):
    """Base of every error planner raises on purpose: bad input, unknown name, bad data file."""


class UnknownNameError(PlannerError):
    """A name (model, device, instance, ...) that is not in its registry."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]):
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        close = difflib.get_close_matches(name.lower(), [v.lower() for v in self.valid], n=3, cutoff=0.5)
        by_lower = {v.lower(): v for v in self.valid}
        self.suggestions = [by_lower[c] for c in close]
        hint = f" Did you mean: {', '.join(self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"unknown {kind} '{name}'.{hint} Valid {kind}s: {', '.join(self.valid)}.")


class ConfigError(PlannerError):
    """A malformed configuration: names the file, the field and what would be valid."""


class UnsupportedError(PlannerError):
    """A workload or mode that a model does not support (e.g. decode for a CNN)."""
