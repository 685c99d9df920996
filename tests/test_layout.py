"""The package layout follows the data flow: a folder imports only from folders below it.

Order, bottom to top (docs/layout.md):
    workload -> hardware -> predict -> calibration -> serve -> plan -> trace -> interfaces
The shared modules (errors, units, files) are importable from anywhere and import only each other;
the interfaces (cli, plot) import anything and are imported by no folder. The builders in models/
(installed as planner_models) import nothing from planner and are imported only by the workload.
Every import is found with `ast`, including the ones inside functions.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "planner"
ORDER = ("workload", "hardware", "predict", "calibration", "serve", "plan", "trace", "sweep")
SHARED = ("errors", "units", "files", "memo")
INTERFACES = ("cli", "plot", "app", "api")
MAX_TOP_LEVEL_FILES = 8
MAX_MODULE_LINES = 650


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in a file; `from a import b` gives "a.b" as well as "a"."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def place(module: str) -> str | None:
    """The layout place of a dotted module name: a folder, "shared", "interface", "models" or None
    (not planner's)."""
    parts = module.split(".")
    if parts[0] == "planner_models":
        return "models"
    if parts[0] != "planner" or len(parts) == 1:
        return None
    if parts[1] in ORDER:
        return parts[1]
    if parts[1] in SHARED:
        return "shared"
    if parts[1] in INTERFACES:
        return "interface"
    return None


def allowed(importer: str, imported: str) -> bool:
    """Whether code in place `importer` may import from place `imported`."""
    if importer == imported or imported == "shared":
        return True
    if importer == "shared":
        return False
    if importer == "interface":
        return True
    if imported == "interface":
        return False
    if imported == "models":
        return importer == "workload"
    if importer == "models":
        return False
    return ORDER.index(imported) < ORDER.index(importer)


def violations(package: Path = PACKAGE, models: Path = ROOT / "models") -> list[str]:
    """Every import that goes against the flow, as "file:line imports module"."""
    found = []
    files = [(p, place("planner." + ".".join(p.relative_to(package).with_suffix("").parts))) for p in package.rglob("*.py")]
    files += [(p, "models") for p in models.rglob("*.py")]
    for path, importer in files:
        if path.name == "__init__.py" and path.parent == package:
            importer = "interface"
        if importer is None:
            found.append(f"{path}: not in any layout place; add its folder to ORDER or SHARED/INTERFACES")
            continue
        seen = set()
        for line, module in imported_modules(path):
            target = place(module)
            if target is not None and not allowed(importer, target) and (line, target) not in seen:
                seen.add((line, target))
                found.append(f"{path.relative_to(package.parent)}:{line} ({importer}) imports {module} ({target})")
    return sorted(set(found))


def test_no_import_goes_against_the_flow():
    assert violations() == []


def test_the_check_catches_an_upward_import(tmp_path):
    # a scratch copy of the layout where the workload imports the predictor: must be reported
    (tmp_path / "planner" / "workload").mkdir(parents=True)
    (tmp_path / "planner" / "predict").mkdir()
    (tmp_path / "models").mkdir()
    (tmp_path / "planner" / "workload" / "graphs.py").write_text(
        "def f():\n    from planner.predict.roofline import op_time\n    return op_time\n")
    (tmp_path / "planner" / "predict" / "roofline.py").write_text("from planner.workload.graphs import f\n")
    (tmp_path / "models" / "decoder.py").write_text("import planner.workload.zoo\n")
    found = violations(tmp_path / "planner", tmp_path / "models")
    assert len(found) == 2
    assert "workload) imports planner.predict.roofline (predict)" in found[1]
    assert "models) imports planner.workload.zoo (workload)" in found[0]


@pytest.mark.parametrize("importer,imported,ok", [
    ("workload", "hardware", False), ("hardware", "workload", True), ("predict", "calibration", False),
    ("calibration", "predict", True), ("plan", "predict", True), ("predict", "plan", False),
    ("shared", "workload", False), ("workload", "shared", True), ("predict", "interface", False),
    ("interface", "plan", True), ("predict", "models", False), ("workload", "models", True)])
def test_the_order(importer, imported, ok):
    assert allowed(importer, imported) is ok


def test_top_level_stays_small_and_modules_readable_in_one_sitting():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_FILES, top
    long = {str(p.relative_to(ROOT)): n for p in list(PACKAGE.rglob("*.py")) + list((ROOT / "models").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}
