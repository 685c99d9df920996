"""Prediction: per-op roofline with efficiencies, collectives, memory, energy, cost, inference and
training step times, the Prediction value and the API.

The public API is re-exported here:

    from planner.predict import Request, predict, compare
    p = predict(Request("llama-3.1-8b", "h100-sxm", batch=8))
"""

from planner.predict.api import MODES, Request, compare, op_rows, parallelism, predict, request_from_row, summary_row
from planner.predict.context import Context, Target, default_context
from planner.predict.prediction import CostOptions, Prediction

__all__ = ["MODES", "Context", "CostOptions", "Prediction", "Request", "Target", "compare", "default_context",
           "op_rows", "parallelism", "predict", "request_from_row", "summary_row"]
