# The two set-up commands of the README. Each creates .venv on first use (scripts/setup.sh).
.PHONY: setup demo count-demo test bench

setup:
	@bash scripts/setup.sh

# The main job on built-in data: the procurement-planning app at http://localhost:8501
demo: setup
	.venv/bin/streamlit run app.py --server.headless true --server.port 8501

# Counting demo on the command line: FLOP and bytes of llama-3.1-8b prefill and resnet50.
count-demo: setup
	.venv/bin/planner count llama-3.1-8b --mode prefill --batch 1 --seq-len 2048 --dtype bf16 --by category
	.venv/bin/planner count resnet50 --mode inference --batch 1 --by category

test: setup
	.venv/bin/python -m pytest -q

bench: setup
	.venv/bin/python benchmarks/count_405b.py
