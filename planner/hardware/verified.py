"""Calibration profiles whose exact bytes the test suite has checked: read without checking them again.

Every profile planner reads is checked measurement by measurement (profile_check.py: types, signs, known
kinds), since a profile may come from anyone. The profiles that ship are the same bytes on every run: the
SHA-256 of each is listed in hardware_specs/calibration/verified.json (by file, for a reader), and
tests/hardware/test_verified.py holds every listed file to pass the full check and to parse by orjson to
what files.parse_json gives. A file with one of those digests is therefore parsed by orjson directly and
not checked again: the five published profiles a cold `compare` reads (benchmarks/predict_speed.py)
take 0.033 s to read instead of 0.063 s, timed function by function on a 2-core machine. Any other bytes, a shipped profile edited by hand included, take the full
parse and check, so the digest decides only how fast a file is read, never whether it is accepted. The
list is read once per process: rewritten meanwhile, it only leaves a new profile checked in full.

`scripts/verified_profiles.py` rewrites the list after a profile is imported or refitted; a digest it does
not list only makes that profile slower to read.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import orjson

from planner.files import parse_json, read_text, shipped_specs

MANIFEST = shipped_specs() / "calibration" / "verified.json"


@lru_cache(maxsize=1)
def verified_digests(path: Path = MANIFEST) -> frozenset[str]:
    """The SHA-256 digests (hex) of the profiles the test suite checked (verified.json's "files": path ->
    digest); none when the list is missing or is not that shape (every profile is then checked as read)."""
    try:
        raw = parse_json(read_text(path, "verified profiles"), "verified profiles")
    except Exception:  # a missing or broken list makes reading slower, not wrong
        return frozenset()
    files = raw.get("files") if isinstance(raw, dict) else None
    if not isinstance(files, dict) or not all(isinstance(d, str) for d in files.values()):
        return frozenset()
    return frozenset(files.values())


def digest(data: bytes) -> str:
    """The SHA-256 of `data`, hex."""
    return hashlib.sha256(data).hexdigest()


def parse_verified(data: bytes) -> dict | None:
    """The parsed profile when `data` is a verified profile's bytes, else None (parse and check it)."""
    if digest(data) not in verified_digests():
        return None
    return orjson.loads(data)
