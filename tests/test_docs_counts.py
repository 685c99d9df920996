"""Every count README.md and docs/*.md state about the repository's files equals the count of those files.

The documents state a few counts in fixed phrases ("34 devices in the catalog", "9 execution engines",
"201 of the 250 published end-to-end measurements", ...). Each phrase below is found in every document
with a regular expression and each number in it is compared with the number computed from the files it
counts. A phrase that no document states any more fails too, so that this list is kept to what the
documents say: remove its entry, or state the count again. Only files in the repository are read.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "hardware_specs"
DATA = ROOT / "benchmarks" / "data"
RESULTS = ROOT / "benchmarks" / "results"

NUMBER = r"(\d{1,3}(?:,\d{3})+|\d+)"
"""A count as the documents write it: digits, thousands separated by commas (1,445)."""


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def devices() -> list[dict[str, str]]:
    return csv_rows(SPECS / "devices.csv")


def device_kinds() -> tuple[int, ...]:
    kinds = [row["kind"] for row in devices()]
    return kinds.count("gpu"), kinds.count("tpu"), kinds.count("accelerator"), kinds.count("cpu")


def profiles() -> list[dict]:
    """Every kernel profile of hardware_specs/calibration/<device>/*.json."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(SPECS.glob("calibration/*/*.json"))]


def published_profiles() -> int:
    return sum(1 for p in profiles() if p.get("tier") == "published")


def measured_profiles() -> int:
    """Profiles `planner calibrate` wrote on the device itself: every profile not converted from
    published tables."""
    return sum(1 for p in profiles() if p.get("tier") != "published")


def dev_rows() -> list[dict[str, str]]:
    return csv_rows(DATA / "dev_measurements.csv")


def llm_inference_rows() -> tuple[int, int]:
    """(rows run on vLLM, rows) of the development set's LLM inference categories."""
    rows = [r for r in dev_rows() if r["category"].startswith("inference_llm")]
    return sum(1 for r in rows if "vllm" in r["framework_and_version"].lower()), len(rows)


def expressed(result: str, dataset: str | None = None) -> int:
    """Rows a validation result expressed; of one data file's rows (its `dataset`, the file's stem) when given."""
    run = json.loads((RESULTS / result).read_text(encoding="utf-8"))
    if dataset is None:
        return run["expressed"]
    return sum(1 for r in run["rows"] if r["expressed"] and r.get("dataset", dataset) == dataset)


def serving_runs() -> int:
    """Published serving runs: the rows of benchmarks/data/serving/*.csv but the launch settings
    (inferencemax_server.csv, one row per InferenceX launch script, not a run)."""
    return sum(len(csv_rows(p)) for p in sorted((DATA / "serving").glob("*.csv")) if p.name != "inferencemax_server.csv")


# (phrase with one group per count, the counts computed from the files, must a document state it)
COUNTS: list[tuple[str, object, bool]] = [
    (NUMBER + r" devices in the catalog", lambda: (len(devices()),), True),
    (NUMBER + r" accelerators and CPUs", lambda: (len(devices()),), False),  # the phrase the README once used
    (NUMBER + r" GPUs, " + NUMBER + r" TPUs, " + NUMBER + r" other accelerators and " + NUMBER + r" CPUs",
     device_kinds, True),
    (NUMBER + r" cloud price rows", lambda: (len(csv_rows(SPECS / "instances.csv")),), True),
    (NUMBER + r" cloud providers", lambda: (len({r["provider"] for r in csv_rows(SPECS / "instances.csv")}),), True),
    (NUMBER + r" on-prem server types", lambda: (len(csv_rows(SPECS / "onprem_servers.csv")),), True),
    (NUMBER + r" on-prem sites", lambda: (len(csv_rows(SPECS / "sites.csv")),), True),
    (NUMBER + r" models in the zoo", lambda: (len(list((ROOT / "models" / "configs").glob("*.json"))),), True),
    (NUMBER + r" execution engines", lambda: (len(list((SPECS / "engines").glob("*.json"))),), True),
    (NUMBER + r" quantization recipes",
     lambda: (len(json.loads((SPECS / "quant" / "recipes.json").read_text(encoding="utf-8"))["recipes"]),), True),
    (NUMBER + r" kernel profiles", lambda: (len(profiles()),), True),
    (NUMBER + r" measured profiles", lambda: (measured_profiles(),), True),
    (NUMBER + r" published profiles", lambda: (published_profiles(),), True),
    (r"collective curves of " + NUMBER + r" devices", lambda: (len(list((SPECS / "collectives").glob("*.json"))),), True),
    (NUMBER + r" published end-to-end measurements", lambda: (len(dev_rows()),), True),
    (NUMBER + r" of the " + NUMBER + r" published end-to-end measurements",
     lambda: (expressed("dev_validation.json", "dev_measurements"), len(dev_rows())), True),
    (NUMBER + r" of the " + NUMBER + r" LLM-inference rows", llm_inference_rows, True),
    (NUMBER + r" published TensorRT and MLPerf results", lambda: (len(csv_rows(DATA / "vendor_stacks.csv")),), True),
    (NUMBER + r" of the " + NUMBER + r" published TensorRT and MLPerf results",
     lambda: (expressed("vendor_stacks_validation.json"), len(csv_rows(DATA / "vendor_stacks.csv"))), True),
    (NUMBER + r" published serving runs", lambda: (serving_runs(),), True),
]


def stated(phrase: str) -> list[tuple[str, tuple[int, ...]]]:
    """(document, counts) for every place a document states the phrase; a phrase broken over two
    lines is found too."""
    found = []
    for doc in documents():
        text = re.sub(r"\s+", " ", doc.read_text(encoding="utf-8"))
        for m in re.finditer(phrase, text):
            found.append((doc.name, tuple(int(g.replace(",", "")) for g in m.groups())))
    return found


@pytest.mark.parametrize("phrase,count,required", COUNTS, ids=[c[0].replace(NUMBER, "N") for c in COUNTS])
def test_stated_count_equals_the_files(phrase, count, required):
    places = stated(phrase)
    if required:
        assert places, f"no document states {phrase.replace(NUMBER, 'N')!r} any more: remove it from COUNTS"
    expected = count()
    wrong = [(doc, got) for doc, got in places if got != expected]
    assert not wrong, f"{phrase.replace(NUMBER, 'N')!r}: the files give {expected}, the documents say {wrong}"


def test_documents_are_read():
    """The README and the pages this test reads exist (a moved folder would make it pass on nothing)."""
    names = [doc.name for doc in documents()]
    assert "README.md" in names and "index.md" in names and len(names) > 10


def test_the_readme_is_a_front_page():
    """Under 200 lines: what it is, set-up, five commands, Python, accuracy, links; depth is in docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines; move depth to docs/"
