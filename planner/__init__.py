"""planner: a performance model and capacity planner for AI workloads.

The public API is re-exported here; see README.md for the data flow.
"""

from planner.errors import PlannerError

__all__ = ["PlannerError"]
__version__ = "0.1.0"
