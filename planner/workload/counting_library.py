"""Cost formulas of ops that only library-built models run (planner_models.library): torchvision's
detection operators, embedding bags. Registered into planner/workload/counting.py's table on import
(counting.py imports this module at its end), so they follow the same rules: FLOP in multiply-adds x 2,
bytes read and written as the op's kernel moves them.
"""

from __future__ import annotations

from planner.workload.capture import OpRecord  # noqa: F401
from planner.workload.counting import OpCost, formula  # noqa: F401  (used by the formulas below)
