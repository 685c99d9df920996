"""The fixed names the command line offers as choices, without importing the modules that define them.

Building the parser must stay fast (`planner --help` in well under half a second): the modules these
names come from import torch, numpy or pandas. Each tuple here equals its source, in the same order
(tests/test_cli_speed.py checks every one). Names read from data files (devices, engines, recipes) are
checked when a command runs, not listed here.
"""

from __future__ import annotations

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
"""planner.workload.dtypes.DTYPES: the logical dtypes."""

MODES = ("inference", "prefill", "decode", "forward", "training")
"""planner.workload.graphs.MODES: the workloads `planner count` captures."""

PRICINGS = ("on_demand", "spot", "reserved_1y", "reserved_3y", "savings_plan_1y", "savings_plan_3y",
            "committed_1y", "committed_3y")
"""planner.hardware.catalog.PRICINGS: every pricing a price can have."""

OPS = ("gemm", "copy", "h2d", "allreduce", "allgather", "reducescatter", "alltoall")
"""planner.predict.ops.OPS: what `planner op` predicts."""

FAMILIES = ("decoder", "encoder", "vision", "custom", "detection", "diffusion", "recommender", "speech", "multimodal",
            "text")
"""planner.workload.engines.FAMILIES: the families of a model."""
