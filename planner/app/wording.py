"""The library's notes in the app's words: a note written for the command line names its flags ("(--dp)",
"pass --site", "`planner compare`"); a page shows the same note with what the app calls those things
("more replicas (data parallel)", "choose an on-prem site"). Pure text rewriting: nothing here computes a
number or changes what a note says, only how it names the controls."""

from __future__ import annotations

import re

_IDLE = re.compile(r"cost pays for (?P<n>\d+) idle (?P<device>\S+) of the whole instance(?P<s>s?) rented "
                   r"\((?P<what>[^)]*)\); more replicas \(--dp\) or `planner compare`, which fills the instance, "
                   r"use them")


def _idle(m: re.Match) -> str:
    n, many = int(m["n"]), int(m["n"]) != 1
    whose = f"the other {n:,} GPU{'s' * many} of the instance" if not m["s"] else \
        f"{n:,} GPU{'s' * many} of the instances"
    return (f"{whose} {'sit' if many else 'sits'} idle but {'are' if many else 'is'} paid for (the cost counts the "
            f"whole instance{m['s']} rented: {m['what']}, {m['device']}); more replicas (data parallel: more GPUs at "
            f"the same TP x PP) would use {'them' if many else 'it'}, as the Workload page's Smallest that fits "
            "deployment does (it fills the instance)")


REWRITES: tuple[tuple[re.Pattern, object], ...] = (
    (_IDLE, _idle),
    (re.compile(r"\(pass --site for on-prem\)"), "(choose an on-prem site on the Cost page to price owning it)"),
    (re.compile(r"pass --site"), "choose an on-prem site"),
    (re.compile(r"\(from --engine; --engine to change\)"), "(the Engine chosen)"),
    (re.compile(r"; --engine to change\)"), "; the Engine input changes it)"),
    (re.compile(r"set --micro-batch to override"), "set the Micro-batch to override"),
    (re.compile(r"vLLM \(--dtype half\)"), "vLLM (its dtype half)"),  # vLLM's own flag, not planner's
    (re.compile(r"`planner compare`"), "the Workload page's comparison of devices"),
    (re.compile(r"`planner predict( --configs)?`"), "a prediction"),
    (re.compile(r"`planner serve`"), "the Serving page"),
    (re.compile(r"`planner plan`"), "the Plan page"),
    (re.compile(r"`planner sweep`"), "a sweep (the Sweep page)"),
    (re.compile(r"`planner calibrate`"), "calibration (the Calibration and accuracy page)"),
    (re.compile(r"--configs key"), "sweep axis"),
)
"""Whole phrases first, each (pattern, replacement text or function of the match), in order."""

FLAGS = {
    "dp": "data parallel", "tp": "TP", "pp": "PP", "ep": "expert parallel", "gpus": "GPUs", "zero": "ZeRO stage",
    "batch": "Batch", "input-len": "Input tokens", "output-len": "Output tokens",
    "seq-len": "Sequence length", "micro-batch": "Micro-batch", "micro-batches": "micro-batches per step",
    "global-batch": "Global batch", "recompute": "Recompute", "mixed-precision": "Mixed precision",
    "optimizer": "optimizer", "dtype": "Dtype", "quant": "Quantization recipe", "weights": "Weights dtype",
    "activations": "Activations dtype", "kv-cache": "KV cache dtype", "engine": "Engine", "mode": "Mode",
    "train-tokens": "Tokens to train", "site": "on-prem site", "instance": "instance", "pricing": "pricing",
    "utilization": "utilization", "overlap": "overlap", "scaleout-gbps": "scale-out bandwidth",
    "power-limit-w": "power limit", "image-size": "image size",
}
"""planner's own flags and what the app calls them (a flag of another tool, Megatron-LM's --bf16, is left
as it is)."""

_FLAG = re.compile(r"(?<![\w-])--(" + "|".join(sorted(map(re.escape, FLAGS), key=len, reverse=True)) + r")(?![\w-])")


def app_words(note: str) -> str:
    """`note` (a library note or error message) with its command-line wording in the app's words: the
    phrases of REWRITES, then each remaining planner flag by its name in FLAGS ("(--mixed-precision)" ->
    "(Mixed precision)", "--tp 3" -> "TP 3"). Anything else is returned as it is."""
    text = str(note)
    for pattern, replacement in REWRITES:
        text = pattern.sub(replacement, text)
    return _FLAG.sub(lambda m: FLAGS[m[1]], text)
