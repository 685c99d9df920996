"""`planner models`: the zoo, with each model's family, builder, parameters and source."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from planner.cli import progress
from planner.cli.names import FAMILIES as MODEL_FAMILIES
from planner.units import si

if TYPE_CHECKING:
    from planner.workload.zoo import Model

FAMILIES = tuple(f for f in MODEL_FAMILIES if f != "custom")  # every family a zoo model can have


def add_models(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the zoo: family, builder, parameters, source",
                       description="List the built-in models (models/configs): family, the code that builds them "
                                   "(planner's own builders or a library's modeling code), parameters counted on "
                                   "meta tensors (active ones for mixtures of experts) and the config's source.")
    p.add_argument("--family", choices=FAMILIES, action="append", help="only this family (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON list")
    p.set_defaults(func=cmd_models)


def describe(model: Model) -> dict:
    """One zoo entry: id, family, builder, params and active_params (counts), source. Builds the model on
    meta tensors (seconds for the largest): entries() reads the same from models/zoo_index.json."""
    import torch

    import planner_models

    with torch.device("meta"):
        module = model.build()
    params = sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())
    inactive = module.inactive_params() if hasattr(module, "inactive_params") else 0
    builder = planner_models.zoo_config(model.name).get("planner_builder", "planner")
    return {"id": model.name, "family": model.family, "builder": builder, "params": params,
            "active_params": params - inactive, "source": model.source}


def entries(families: tuple[str, ...] | list[str] | None = None) -> list[dict]:
    """The zoo as describe() gives it, in id order (only `families`, if given). A model's family and counts
    come from models/zoo_index.json while its entry's digest is its config's; a model without one (a
    config added or changed since the index was written: scripts/zoo_index.py writes it) is built."""
    import planner_models

    INDEX = planner_models.zoo_index()

    rows: list[dict | str] = []
    for model_id in planner_models.zoo_ids():
        raw = planner_models.zoo_config(model_id)
        known = INDEX.get(model_id)
        if known is None or known["digest"] != planner_models.config_digest(raw):
            rows.append(model_id)  # built below
            continue
        rows.append({"id": model_id, "family": known["family"], "builder": raw.get("planner_builder", "planner"),
                     "params": known["params"], "active_params": known["active_params"],
                     "source": raw.get("planner_source", "")})
    unknown = [i for i, row in enumerate(rows) if isinstance(row, str)]
    if unknown:
        progress.step("importing", of=len(unknown) + 1)
        from planner.workload.zoo import resolve

        for i in unknown:
            progress.step(f"building {rows[i]} (not in models/zoo_index.json)")
            model = resolve(rows[i])
            rows[i] = describe(model) if not families or model.family in families else {"family": None}
        progress.done()
    return [r for r in rows if not families or r["family"] in families]


def cmd_models(args: argparse.Namespace) -> int:
    rows = entries(args.family)
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
