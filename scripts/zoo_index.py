"""Write models/zoo_index.json: each built-in model's family, parameters and active parameters, counted by
building it on meta tensors, with its config's digest. `planner models` lists the zoo from it without
building a model (planner/cli/models.py, entries()).

    .venv/bin/python scripts/zoo_index.py            # build every zoo model (about 15 s), write the index
    .venv/bin/python scripts/zoo_index.py --check    # write nothing; exit 1 if the index is not what it would write

Run it after adding or changing a config in models/configs or changing a builder. Every model is built,
so every builder's library must be installed (pip install 'planner[zoo]'); a model that cannot be built
stops the script and nothing is written. tests/test_cli_speed.py fails while an entry's digest is not its
config's, and (building every model) while a count differs from the model's.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner_models  # noqa: E402
from planner.cli.models import describe  # noqa: E402
from planner.files import write_text_atomic  # noqa: E402
from planner.workload.zoo import resolve  # noqa: E402

INDEX = ROOT / "models" / "zoo_index.json"
ABOUT = ("What `planner models` lists of each built-in model without building it: family, parameters and active "
         "parameters (a token's share of a mixture of experts), counted on meta tensors by building the model "
         "(planner/cli/models.py, describe()), tied weights once. An entry stands while `digest` is its config's "
         "(planner_models.config_digest); `planner models` builds a model whose config changed or has no entry. "
         "Written by scripts/zoo_index.py: run it after adding or changing a config or a builder.")


def index_text() -> str:
    """The text of models/zoo_index.json for the configs and builders as they are now."""
    models = {}
    for model_id in planner_models.zoo_ids():
        row = describe(resolve(model_id))
        models[model_id] = {"digest": planner_models.config_digest(planner_models.zoo_config(model_id)),
                            "family": row["family"], "params": row["params"], "active_params": row["active_params"]}
    return json.dumps({"about": ABOUT, "models": models}, indent=1) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the index is out of date")
    args = parser.parse_args()
    text = index_text()
    current = INDEX.read_text() if INDEX.is_file() else ""
    if args.check:
        print(f"{INDEX.relative_to(ROOT)} is " + ("up to date" if text == current else "OUT OF DATE: run "
                                                   "scripts/zoo_index.py"))
        return 0 if text == current else 1
    if text != current:
        write_text_atomic(INDEX, text)
    print(f"{INDEX.relative_to(ROOT)}: {len(planner_models.zoo_ids())} models" + ("" if text != current else
                                                                                    ", unchanged"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
