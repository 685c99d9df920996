"""Planning: scenario YAML, capacities from predictions, the MILP (Pyomo on HiGHS) that picks the
instance mix and cluster size, the solved plan and its outputs, the independent check, and TCO.

Entry points: scenario.load / scenario.parse, solve.solve, check.check, tco.compare_tco.
"""
