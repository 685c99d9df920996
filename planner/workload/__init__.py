"""The workload: what a model asks of hardware.

Model resolution (zoo id, config.json, user module), capture of the aten op graph on meta tensors,
the per-op FLOP and byte registry, logical dtypes, the workloads of a model (prefill, decode,
forward, training step), the parallel layout and the per-device graph folded by layer. Imports
nothing from the rest of planner but the shared top-level modules (errors, units, files).
"""
