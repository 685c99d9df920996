"""planner/hardware/verified.py: the shipped profiles read without a second check are exactly the bytes the
full check passes, they read to the same Profile either way, and any other bytes are checked."""

import json
from pathlib import Path

import orjson
import pytest

import planner.hardware.profile as profile_module
import planner.hardware.verified as verified
from planner.errors import ConfigError
from planner.hardware.profile import read_profile
from planner.hardware.profile_check import check_profile, parse

ROOT = verified.MANIFEST.parent
SHIPPED = sorted(ROOT.glob("*/*.json"))


def test_every_shipped_profile_is_listed_with_its_digest():
    listed = json.loads(verified.MANIFEST.read_text())["files"]
    assert listed == {str(p.relative_to(ROOT)): verified.digest(p.read_bytes()) for p in SHIPPED}, \
        "run .venv/bin/python scripts/verified_profiles.py after changing a shipped profile"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_listed_profile_passes_the_full_check_and_parses_alike(path):
    data = path.read_bytes()
    raw = parse(data.decode("utf-8-sig"), str(path))
    check_profile(raw, str(path), floats_finite=True)  # raises on anything the check refuses
    assert orjson.dumps(orjson.loads(data)) == orjson.dumps(raw)  # the same values and types (ints stay ints)


@pytest.mark.parametrize("path", [ROOT / "b200" / "profile.json", ROOT / "h100-sxm" / "pytorch-eager.json"])
def test_a_verified_profile_reads_as_the_checked_one(path, monkeypatch):
    fast = read_profile(path)
    monkeypatch.setattr(verified, "verified_digests", lambda: frozenset())
    checked = read_profile(path)
    assert fast.raw == checked.raw and list(fast.measurements) == list(checked.measurements)
    assert list(fast.tables) == list(checked.tables)
    for kind in fast.tables:
        a, b = fast.tables[kind], checked.tables[kind]
        assert (a.index == b.index).all()
        assert all(a.column(key) == b.column(key) for key in ("time_s", "flop", "bytes"))


def test_verified_bytes_skip_the_check_and_other_bytes_do_not(tmp_path, monkeypatch):
    shipped = ROOT / "mi300x" / "profile.json"
    calls = []
    real = profile_module.check_profile
    monkeypatch.setattr(profile_module, "check_profile", lambda *a, **k: calls.append(1) or real(*a, **k))
    read_profile(shipped)
    assert calls == []  # its digest is listed: not checked again
    # one byte more (a space) is another file: parsed and checked in full
    spaced = tmp_path / "profile.json"
    spaced.write_bytes(shipped.read_bytes() + b" ")
    read_profile(spaced)
    assert calls == [1]
    # a bad measurement in a copy is refused, as in any profile
    raw = json.loads(shipped.read_text())
    raw["measurements"]["time_s"][5] = -1.0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=r"measurements\[5\]"):
        read_profile(bad)


def test_a_missing_or_broken_list_checks_every_profile(tmp_path):
    verified.verified_digests.cache_clear()
    try:
        assert verified.verified_digests(tmp_path / "absent.json") == frozenset()
        broken = tmp_path / "verified.json"
        for text in ("[1, 2]", '{"files": ["x"]}', '{"files": {"a": 3}}', "{not json"):
            broken.write_text(text)
            assert verified.verified_digests(Path(broken)) == frozenset()
    finally:
        verified.verified_digests.cache_clear()
