"""planner: a performance model and capacity planner for AI workloads.

The Python API (planner/api.py; docs/python.md): count, predict, compare, serve, plan, sweep, trace and
advise, over the input groups Workload, Parallel, Costs, Training and Platform, and the serving inputs
Load, Scheduling and Slo. Each returns a result with to_dict() and to_frame(). Errors are PlannerError
(ConfigError for bad input, UnknownNameError for a name not in the catalog).
"""

import sys
import types

from planner.api import (
    Costs,
    Parallel,
    Platform,
    Training,
    Workload,
    advise,
    compare,
    count,
    plan,
    predict,
    serve,
    sweep,
    trace,
)
from planner.errors import ConfigError, PlannerError, UnknownNameError

__all__ = ["ConfigError", "Costs", "Load", "Parallel", "Platform", "PlannerError", "Scheduling", "Slo", "Training",
           "UnknownNameError", "Workload", "advise", "compare", "count", "plan", "predict", "serve", "sweep", "trace"]
__version__ = "0.1.0"


_CALLS = ("predict", "serve", "plan", "sweep", "trace")
"""The calls whose name is also a subpackage's (planner/predict/, ...)."""


class _CallableModule(types.ModuleType):
    """A subpackage that is also the API call of its name: planner.predict(...) calls planner.api.predict,
    while planner.predict.api stays the module."""

    def __call__(self, *args, **kwargs):
        from planner import api

        return getattr(api, self.__name__.rsplit(".", 1)[1])(*args, **kwargs)


class _Package(types.ModuleType):
    """planner itself: importing a subpackage binds it as an attribute of its parent (planner.predict),
    which would hide the call of that name; the subpackage is made callable instead."""

    def __setattr__(self, name: str, value) -> None:
        if name in _CALLS and type(value) is types.ModuleType:
            value.__class__ = _CallableModule
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    # the serving inputs live with the simulator, which imports numpy and torch: loaded when first named,
    # so that `import planner` (and the CLI's start) stays light
    if name in ("Load", "Scheduling", "Slo"):
        from planner.serve import api

        return getattr(api, name)
    raise AttributeError(f"module 'planner' has no attribute '{name}'")
