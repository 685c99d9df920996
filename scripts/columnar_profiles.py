"""Rewrite the shipped published profiles' measurements in the columns layout (planner/hardware/profile_table.py).

    .venv/bin/python scripts/columnar_profiles.py

`planner calibrate --import` writes a published profile's measurements as columns; the profiles imported
before it did were written as rows. This rewrites every hardware_specs/calibration/<device>/profile.json
of tier published that still holds rows: the same measurements in the same order (checked: the columns
read back as rows equal the rows), every other key untouched and in its place, written as the importer
writes (compact separators, atomic replace). A file already in columns is left alone.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.calibration.published import published_json  # noqa: E402
from planner.files import write_text_atomic  # noqa: E402
from planner.hardware.profile_table import measurement_rows  # noqa: E402


def main() -> int:
    for path in sorted((ROOT / "hardware_specs" / "calibration").glob("*/profile.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("tier") != "published" or not isinstance(raw.get("measurements"), list):
            continue
        rows = raw["measurements"]
        text = published_json(raw)
        if list(measurement_rows(json.loads(text)["measurements"])) != rows:
            raise SystemExit(f"{path}: the columns do not read back as the rows; nothing written")
        before = path.stat().st_size
        write_text_atomic(path, text)
        print(f"{path.relative_to(ROOT)}: {len(rows)} measurements in columns, {before:,} -> "
              f"{path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
