"""List the shipped calibration profiles that pass the full check, by SHA-256 (planner/hardware/verified.py).

    .venv/bin/python scripts/verified_profiles.py

Every hardware_specs/calibration/<device>/*.json profile (profile.json and <library>.json; not transfer
reports) is parsed and checked as any profile is (profile_check.parse, check_profile); one that fails, or
that orjson would parse to anything else than that (a value or a type), stops the script and nothing is
written. The digests of the rest are written to hardware_specs/calibration/verified.json, which lets
planner read exactly those bytes without checking them again. Run it after importing or refitting a
profile; tests/hardware/test_verified.py fails while a shipped profile is missing from the list.
"""

import json
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.files import write_text_atomic  # noqa: E402
from planner.hardware.profile_check import check_profile, parse  # noqa: E402
from planner.hardware.verified import MANIFEST, digest  # noqa: E402


def shipped_profiles(root: Path = MANIFEST.parent) -> list[Path]:
    """Every profile file shipped under `root`: <device>/profile.json and <device>/<library>.json."""
    return sorted(p for p in root.glob("*/*.json"))


def verified(path: Path) -> str:
    """The digest of `path` once it passes the full check and orjson parses it to the same values and types;
    SystemExit naming it otherwise."""
    data = path.read_bytes()
    where = f"calibration profile '{path}'"
    raw = parse(data.decode("utf-8-sig"), where)
    check_profile(raw, where, floats_finite=True)
    if orjson.dumps(orjson.loads(data)) != orjson.dumps(raw):
        raise SystemExit(f"{path}: orjson parses it to other values than the check read; not listed")
    return digest(data)


def main() -> int:
    files = {str(p.relative_to(MANIFEST.parent)): verified(p) for p in shipped_profiles()}
    text = json.dumps({"about": "SHA-256 of the shipped calibration profiles that pass the full check "
                                "(scripts/verified_profiles.py; planner/hardware/verified.py)",
                       "files": files}, indent=1) + "\n"
    write_text_atomic(MANIFEST, text)
    print(f"{MANIFEST.relative_to(ROOT)}: {len(files)} profiles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
