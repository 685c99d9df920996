"""Package discovery for setuptools (the rest of the metadata is in pyproject.toml).

planner and its subpackages are found; the two top-level folders install under their own names:
models/ as planner_models and hardware_specs/ (data only) as planner_specs. pyproject.toml cannot say
both "find" and "map a folder to another name", hence this file.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["planner", "planner.*"]) + ["planner_models", "planner_specs"],
    package_dir={"planner_models": "models", "planner_specs": "hardware_specs"},
)
