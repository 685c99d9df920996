#!/usr/bin/env bash
# Create .venv in the repository root and install planner into it, idempotently.
#
# torch: a torch that the system Python already imports (a CUDA build on a GPU host, say) is kept:
# the venv then sees the system site-packages. Otherwise torch==2.13.0 is installed by exact
# version, which on these machines resolves to the local CPU wheel: an unpinned torch would pull
# several GB of CUDA packages.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
stamp=".venv/.planner-installed"

if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ] && [ "$stamp" -nt setup.py ] && .venv/bin/python -c "import planner, torch" 2>/dev/null; then
    exit 0
fi

if [ ! -x .venv/bin/python ]; then
    if "$py" -c "import torch" 2>/dev/null; then
        echo "setup: keeping the system's torch $("$py" -c 'import torch; print(torch.__version__)')" >&2
        "$py" -m venv --system-site-packages .venv
    else
        "$py" -m venv .venv
    fi
fi

pipq() { .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true; }

if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    echo "setup: installing torch==2.13.0 (CPU build)" >&2
    pipq torch==2.13.0
fi
# Pin the torch now present so that no requirement can make pip replace it (with a CUDA build).
constraints=".venv/torch-constraint.txt"
.venv/bin/python -c "import torch; print('torch==' + torch.__version__)" > "$constraints"
echo "setup: installing planner and its dependencies into .venv" >&2
pipq --constraint "$constraints" -e ".[test,docs,zoo,dask,ray]"
.venv/bin/python -c "import planner, torch, fvcore, pyomo, highspy, streamlit, diffusers, transformers; from planner_models.tv_ops import import_torchvision; import_torchvision(); import timm" \
    || { echo "setup: the install did not complete; see the messages above" >&2; exit 1; }
touch "$stamp"
