"""Sweeps: expand a grid of configurations (grid.py), predict every point in chunks on this machine or a
Dask / Ray cluster into Parquet (run.py), and summarize it: Pareto front, best point per device
(summary.py)."""
