#!/usr/bin/env bash
# The package as a user installs it: build the wheel from this checkout, install it into a fresh
# virtualenv outside the checkout, and run `planner models`, a `predict` and a `plan` from /tmp.
# torch is held to the version .venv has (scripts/setup.sh wrote the constraint), so no CUDA build
# is pulled. Everything is made in a temporary folder that is removed at the end.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
quiet() { "$@" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true; }

"$root/.venv/bin/python" -m pip wheel "$root" --no-deps --quiet --disable-pip-version-check -w "$tmp/dist"
wheel="$(ls "$tmp"/dist/planner-*.whl)"
echo "wheel: built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
"$py" -m venv "$tmp/venv"
quiet "$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --constraint "$root/.venv/torch-constraint.txt" "$wheel"
cd "$tmp"
"$tmp/venv/bin/planner" models > models.txt
echo "wheel: planner models: $(tail -1 models.txt | cut -d';' -f1)"
"$tmp/venv/bin/planner" predict llama-3.1-8b --device h100-sxm > predict.txt
grep -q "^TPOT" predict.txt || { cat predict.txt; echo "wheel: predict printed no TPOT" >&2; exit 1; }
echo "wheel: planner predict llama-3.1-8b --device h100-sxm: $(grep '^TPOT' predict.txt | tr -s ' ')"
"$tmp/venv/bin/planner" plan "$root/examples/chat.yaml" > plan.txt
grep -q "^check          passed" plan.txt || { cat plan.txt; echo "wheel: plan's check did not pass" >&2; exit 1; }
echo "wheel: planner plan examples/chat.yaml: check passed"
