"""Serving under load: a discrete-event simulator of an engine's continuous-batching scheduler over
predicted step times (steps.py), with its load (load.py), scheduler policies (policies.py), the event
loop (sim.py), the summary of a run (metrics.py), when a run has run long enough (steady.py) and the
entry points the CLI, plan and app call (api.py, sweep.py)."""
