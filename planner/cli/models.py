"""`planner models`: the zoo, with each model's family, builder, parameters and source."""

from __future__ import annotations

import argparse
import json

import torch

import planner_models
from planner.units import si
from planner.workload.engines import FAMILIES as ENGINE_FAMILIES
from planner.workload.zoo import Model, resolve

FAMILIES = tuple(f for f in ENGINE_FAMILIES if f != "custom")  # every family a zoo model can have


def add_models(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the zoo: family, builder, parameters, source",
                       description="List the built-in models (models/configs): family, the code that builds them "
                                   "(planner's own builders or a library's modeling code), parameters counted on "
                                   "meta tensors (active ones for mixtures of experts) and the config's source.")
    p.add_argument("--family", choices=FAMILIES, action="append", help="only this family (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON list")
    p.set_defaults(func=cmd_models)


def describe(model: Model) -> dict:
    """One zoo entry: id, family, builder, params and active_params (counts), source."""
    with torch.device("meta"):
        module = model.build()
    params = sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())
    inactive = module.inactive_params() if hasattr(module, "inactive_params") else 0
    builder = planner_models.zoo_config(model.name).get("planner_builder", "planner")
    return {"id": model.name, "family": model.family, "builder": builder, "params": params,
            "active_params": params - inactive, "source": model.source}


def cmd_models(args: argparse.Namespace) -> int:
    rows = []
    for model_id in planner_models.zoo_ids():
        model = resolve(model_id)
        if args.family and model.family not in args.family:
            continue
        rows.append(describe(model))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'model':<24} {'family':<11} {'builder':<12} {'params':>8} {'active':>8}  source")
    for r in rows:
        active = si(r["active_params"]) if r["active_params"] != r["params"] else ""
        source = r["source"] if len(r["source"]) <= 70 else r["source"][:67] + "..."
        print(f"{r['id']:<24} {r['family']:<11} {r['builder']:<12} {si(r['params']):>8} {active:>8}  {source}")
    print(f"{len(rows)} models; parameters counted on meta tensors (tied weights once); active: a token's share "
          "of a mixture of experts")
    return 0
