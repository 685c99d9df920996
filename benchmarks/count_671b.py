"""Benchmark: count deepseek-v3 (671B, MLA + 256-expert MoE) prefill (batch 1, 2048 tokens) from a fresh process.

Same method as benchmarks/count_405b.py (wall time from process start to exit, peak resident memory of
`planner count` as a child process, best of --repeats). The capture is exact: every layer runs on meta
tensors; experts given the same number of rows under balanced routing run the same ops on same-shaped
weights, so one runs and is counted for each of them (planner_models.moe.MoE.capture_repeat).
Target (issue 16): under 15 s and under 2 GB on a 2-core machine.

Run: .venv/bin/python benchmarks/count_671b.py [--repeats 3] [--out PATH | --save]
"""

from count_405b import arguments, report

COMMAND = ["-m", "planner.cli", "count", "deepseek-v3", "--mode", "prefill", "--batch", "1", "--seq-len", "2048",
           "--json"]


def main() -> None:
    report(arguments(__doc__), "count_671b", COMMAND, "deepseek-v3 prefill, batch 1, 2048 tokens",
           "all 61 layers run on meta tensors; same-shaped experts counted once each per layer", 15)


if __name__ == "__main__":
    main()
