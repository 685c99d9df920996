"""The wheel carries every module and every data file, and the data root is found through the package.

scripts/check_wheel.sh (run by .ci/run) installs the wheel in a fresh virtualenv and runs the CLI from /tmp;
this test checks the wheel's contents file by file against the checkout."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from planner.files import SPECS_ENV, shipped_specs, specs_root

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--quiet",
                    "--disable-pip-version-check", "-w", str(out)], check=True, capture_output=True, timeout=600)
    (built,) = out.glob("planner-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_names(wheel) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


def _files(folder: Path, pattern: str) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob(pattern) if "__pycache__" not in p.parts and p.is_file()}


def test_every_module_is_in_the_wheel(wheel_names):
    modules = {f"planner/{p.as_posix()}" for p in _files(ROOT / "planner", "*.py")}
    assert len(modules) > 100 and modules <= wheel_names, sorted(modules - wheel_names)
    for package in ("planner/cli", "planner/app", "planner/serve", "planner/trace", "planner/sweep"):
        assert f"{package}/__init__.py" in wheel_names


def test_every_data_file_is_in_the_wheel(wheel_names):
    specs = {f"planner_specs/{p.as_posix()}" for p in _files(ROOT / "hardware_specs", "*")}
    configs = {f"planner_models/{p.as_posix()}" for p in _files(ROOT / "models", "*")}
    assert specs <= wheel_names, sorted(specs - wheel_names)
    assert configs <= wheel_names, sorted(configs - wheel_names)
    assert "planner_specs/devices.csv" in wheel_names and "planner_models/configs/llama-3.1-8b.json" in wheel_names


def test_the_command_is_declared(wheel, wheel_names):
    (name,) = [n for n in wheel_names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as z:
        lines = z.read(name).decode().split("\n")
    assert "planner = planner.cli:entry" in [line.strip() for line in lines]


def test_data_root_is_the_package_unless_the_variable_names_another(monkeypatch, tmp_path):
    monkeypatch.delenv(SPECS_ENV, raising=False)
    assert shipped_specs().resolve() == (ROOT / "hardware_specs").resolve()  # the editable install: the checkout
    assert specs_root() == shipped_specs()
    monkeypatch.setenv(SPECS_ENV, str(tmp_path))
    assert specs_root() == tmp_path
