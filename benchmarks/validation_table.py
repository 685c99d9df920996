"""Turn `planner validate --json` output into the Markdown table the README quotes.

Run: .venv/bin/planner validate --device cpu --json > benchmarks/results/validate_cpu.json
     .venv/bin/python benchmarks/validation_table.py benchmarks/results/validate_cpu.json
"""

import json
import sys


def main(path: str) -> None:
    data = json.load(open(path))
    print("| case | kind | tier | predicted | measured | error |")
    print("| --- | --- | --- | --- | --- | --- |")
    for c in data["cases"]:
        print(f"| {c['name']} | {c['kind']} | {c['tier']} | {c['predicted_s'] * 1e3:.3f} ms | "
              f"{c['measured_s'] * 1e3:.3f} ms | {c['error']:+.1%} |")
    print()
    print("| group | n | median abs error | max abs error |")
    print("| --- | --- | --- | --- |")
    for group, s in data["summary"].items():
        print(f"| {group} | {s['n']} | {s['median_abs_error']:.1%} | {s['max_abs_error']:.1%} |")


if __name__ == "__main__":
    main(sys.argv[1])
