"""The README's Python example runs as shown (from the repository root, as a reader would run it), and
docs/python.md's first example too: a doc that drifts from the API fails here."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.slow
@pytest.mark.parametrize("doc", ["README.md", "docs/python.md"])
def test_first_python_block_runs(doc, monkeypatch):
    monkeypatch.chdir(ROOT)
    code = _blocks(ROOT / doc)[0]
    names: dict = {}
    exec(compile(code, doc, "exec"), names)  # noqa: S102  the project's own documentation
    p = names["p"]
    assert p.fits and 0 < p.metrics["tpot_s"] < 1
