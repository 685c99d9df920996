"""Hostile-input corpus (issue 11): never a traceback, never a hang, never NaN, never code from data.

A deterministic generator (fixed seed) of several thousand hostile `planner` command lines, each with
the hostile files it needs (--configs JSONL/CSV files, config.json model files, scenario YAML files,
damaged copies of hardware_specs/ named by PLANNER_HARDWARE_SPECS), and a runner that runs them
in-process through `planner.cli.main(argv)` of the tree given by --tree, and counts:

  traceback       an exception other than PlannerError escaped main, a traceback on stderr, or the CLI's
                  catch-all reported an internal error (exit status 3): each is a bug
  crash           the process running the case died (segfault, abort, out of memory)
  hang            the case ran past 10 s
  nan_output      NaN / Infinity / nan / inf printed where a number belongs
  code_from_data  a data file (--configs row, scenario, config.json) made planner import or run code
  success         exit status 0
  clean_error     exit status 2 (a PlannerError message or argparse's usage error)
  other_status    any other exit status without a traceback (`plan` exits 1 when its check fails)

How it runs: the parent never imports planner. It starts a "zygote" process that imports the tree's
planner (with `planner_models` bound to TREE/models), warms the graph caches on the small models,
and forks one worker at a time from that warm state. The worker runs cases one by one, captures
stdout and stderr with contextlib.redirect_*, and reports each result over a Unix socket. The
parent enforces a 10 s deadline per case: a worker past it is killed (hang), a worker that dies is
recorded (crash); either way a fresh worker is forked for the next case.

Run:  .venv/bin/python benchmarks/hostile_corpus.py [--tree PATH] [--out PATH] [--limit N]
                                                    [--family NAME] [--list]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import random
import re
import select
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 11
DEADLINE_S = 10.0
EXAMPLES_PER_FAMILY = 30
PYTHON = sys.executable
OUTCOMES = ("traceback", "crash", "hang", "nan_output", "code_from_data", "success", "clean_error", "other_status")
FAILURES = ("traceback", "crash", "hang", "nan_output", "code_from_data")

# =============================================================================================
# The corpus
# =============================================================================================

INT_HOSTILE = ["99999999999999999999999", "-1", "0", "nan", "inf", "-inf", "1e400", "1e308", "9223372036854775808",
               "9223372036854775807", "18446744073709551616", "4294967296", "2147483648", "1.5", "", " ", "0x10",
               "1_000", "\u0661\u0662", "NaN", "Infinity", "-0", "1e-400", "+5", " 7 ", "1e3", "auto",
               "-99999999999999999999999", "1" * 400, "1099511627776"]
FLOAT_HOSTILE = ["nan", "inf", "-inf", "1e400", "-1e400", "1e308", "-1", "0", "-0", "1e-400", "5e-324",
                 "1.7976931348623157e308", "NaN", "Infinity", "+inf", "infinity", "1_0", "", "1e30", "2", "0.5",
                 "1", "99999999999999999999999", "-nan", "1e-300", "9" * 400]
VALID_INTS = ["1", "2", "3", "7", "64", "512", "1000", "4096", "65536", "2147483648", "1099511627776"]

COUNT_FLAGS = {"--batch": "int", "--seq-len": "int", "--context-len": "int", "--image-size": "int", "--top": "int"}
WORKLOAD_FLAGS = {"--batch": "int", "--input-len": "int", "--output-len": "int", "--seq-len": "int",
                  "--image-size": "int", "--global-batch": "int", "--micro-batch": "int", "--micro-batches": "int",
                  "--train-tokens": "float"}
PREDICT_FLAGS = {**WORKLOAD_FLAGS, "--gpus": "int", "--tp": "int", "--pp": "int", "--ep": "int", "--dp": "int",
                 "--zero": "int", "--overlap": "float", "--utilization": "float"}
OP_FLAGS = {"--m": "int", "--n": "int", "--k": "int", "--bytes": "float", "--gpus": "int", "--nodes": "int"}

COUNT_BASES = [["count", "gpt2"], ["count", "bert-base"], ["count", "resnet50"], ["count", "gpt2", "--mode", "decode"],
               ["count", "gpt2", "--mode", "training"], ["count", "vit-b-16"], ["count", "resnet50", "--json"]]
PREDICT_BASES = [["predict", "gpt2", "--device", "h100"], ["predict", "bert-base", "--device", "a100-sxm-80gb"],
                 ["predict", "resnet50", "--device", "l4"], ["predict", "gpt2", "--device", "h100", "--mode", "training"],
                 ["predict", "resnet50", "--device", "h100", "--mode", "training", "--json"],
                 ["predict", "gpt2", "--device", "mi300x", "--json"],
                 ["predict", "bert-base", "--device", "h100", "--mode", "training", "--json"]]
COMPARE_BASES = [["compare", "gpt2", "--devices", "h100,mi300x,tpu-v5e"], ["compare", "resnet50", "--devices", "l4,t4"],
                 ["compare", "bert-base", "--devices", "h100,a10", "--mode", "training"],
                 ["compare", "gpt2", "--devices", "h100,trn1", "--json"]]
OP_BASES = [["op", "gemm", "--device", "h100", "--m", "64", "--n", "64", "--k", "64"],
            ["op", "copy", "--device", "h100", "--bytes", "1e6"], ["op", "h2d", "--device", "a100-sxm-80gb", "--bytes", "1e6"],
            ["op", "allreduce", "--device", "h100", "--bytes", "1e6", "--gpus", "8"],
            ["op", "alltoall", "--device", "mi300x", "--bytes", "1e6", "--gpus", "16", "--nodes", "2", "--json"]]
DEVICES = ["h100", "h100-sxm", "a100-sxm-80gb", "l4", "t4", "mi300x", "tpu-v5e", "trn1", "inf2", "xeon-8480",
           "gaudi3", "b200", "tpu-v4", "tpu-v6e", "trn2", "tpu-v5p", "v100-sxm2-32gb"]
DTYPES = ["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
HOSTILE_NAMES = ["x" * 10000, ":", "..:x", "a:", ":b", "../../../../etc/passwd", "/etc/passwd", "/dev/zero", "{dir}",
                 "{dir}/missing.json", "{dir}/adir.json", "GPT2", " gpt2 ", "\tgpt2", "\uff47\uff50\uff54\uff12",
                 "gpt2;rm -rf /", "$(id)", "%s%n%x", "gpt2\u202e", "\udcff\udcfe", "-", "--", ".", "..", "~",
                 "gpt2" * 300, "\u00e9" * 2000, "h100\n", "gpt2 --device h100", "a.b.c:d", "json:loads",
                 "planner.cli:main", "\U0001f600", "NUL", "con", "C:\\models\\gpt2.json", "file:///etc/passwd",
                 "gpt2.json", "{dir}/" + "d" * 300 + ".json"]
DATA_CODE_NAMES = ["os:abort", "hostile_marker:fn", "hostile_marker:nope", "hostile_marker.sub:fn", "os:getcwd",
                   "builtins:exit", "subprocess:getoutput", "sys:exit", "json:loads", "planner.cli:main"]

BASE_CONFIGS = {
    "gpt2": {"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
             "n_head": 12, "n_inner": None, "layer_norm_epsilon": 1e-05},
    "bert": {"model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
             "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512,
             "type_vocab_size": 2, "layer_norm_eps": 1e-12},
    "resnet": {"model_type": "resnet", "depths": [3, 4, 6, 3], "hidden_sizes": [256, 512, 1024, 2048],
               "embedding_size": 64, "layer_type": "bottleneck", "num_labels": 1000, "image_size": 224},
    "vit": {"model_type": "vit", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
            "intermediate_size": 3072, "patch_size": 16, "image_size": 224, "num_channels": 3, "num_labels": 1000,
            "layer_norm_eps": 1e-06},
    "llama": {"model_type": "llama", "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False,
              "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8,
              "num_key_value_heads": 4, "intermediate_size": 512, "max_position_embeddings": 2048},
    "mixtral": {"model_type": "mixtral", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2,
                "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 512, "rms_norm_eps": 1e-05,
                "rope_theta": 1000000.0, "max_position_embeddings": 4096, "sliding_window": None,
                "num_local_experts": 8, "num_experts_per_tok": 2, "tie_word_embeddings": False},
    "gptj": {"model_type": "gptj", "vocab_size": 1000, "n_positions": 2048, "n_embd": 256, "n_layer": 2, "n_head": 4,
             "rotary_dim": 32, "n_inner": None, "layer_norm_epsilon": 1e-05, "tie_word_embeddings": False},
    "mistral": {"model_type": "mistral", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2,
                "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 512,
                "max_position_embeddings": 4096, "sliding_window": 1024, "rms_norm_eps": 1e-05},
}
# keys whose size is a loop count when the model is built: huge values only in the fixed cases
LOOP_KEYS = {"n_layer", "num_hidden_layers", "num_local_experts", "depths", "num_experts_per_tok", "hidden_sizes"}

# JSON-ish hostile values (Python objects); None of these are huge loop counts
JSON_VALUES = [None, True, False, 0, -1, 1, 2, 3, 1.5, -0.0, 1e-300, 10**20, 2**63, -(2**63), 2**31, 10**400,
               "", " ", "12", "nan", "inf", "abc", "\u0000", "\udcff", "x" * 5000, [], [1, 2], {}, {"a": 1},
               [[[[[]]]]], float("nan"), float("inf"), float("-inf"), 7, 64, 4096, 0.5, "auto", "h100", "gpt2"]

SCENARIO_BASE = {
    "name": "tiny",
    "horizon_months": 12,
    "objective": "cost",
    "workloads": [{"name": "chat", "model": "gpt2", "dtype": "bf16", "demand_rps": 5,
                   "buckets": [{"input_len": 128, "output_len": 32, "share": 1.0}],
                   "slo": {"ttft_s": 1.0, "tpot_s": 0.1}}],
    "candidates": {"cloud": {"providers": ["runpod"], "pricing": ["on_demand"]}},
    "constraints": {"monthly_budget_usd": 100000},
}
SCENARIO_NUMBER_PATHS = [
    ("horizon_months",), ("utilization",), ("workloads", 0, "demand_rps"), ("workloads", 0, "buckets", 0, "share"),
    ("workloads", 0, "buckets", 0, "input_len"), ("workloads", 0, "buckets", 0, "output_len"),
    ("workloads", 0, "slo", "ttft_s"), ("workloads", 0, "slo", "tpot_s"), ("constraints", "monthly_budget_usd"),
    ("constraints", "capex_cap_usd"), ("constraints", "power_cap_kw"), ("constraints", "max_spot_share"),
    ("constraints", "min_onprem_share"), ("weights", "cost"), ("weights", "energy"),
]
YAML_NUMBERS = [".nan", ".NaN", ".inf", "-.inf", ".Inf", "1e400", "-1e400", "1.0e+400", "0", "-1", "-0.0",
                "99999999999999999999999", "1e30", "1.0e-30", "0x10", "0o17", "1_000", "1:30", "2024-01-01",
                "true", "null", "~", "'5'", "[]", "{}", "[1, 2]", "!!binary aGVsbG8=", "5e-324", "nan", "inf",
                "1.7976931348623157e+308", "2", "0.5", "1", "3", "0.25"]

CATALOG_NUMERIC = {
    "devices.csv": ["memory_gib", "mem_bw_gb_per_s", "bf16_tflop_per_s", "fp32_tflop_per_s", "fp8_tflop_per_s",
                    "fp4_tflop_per_s", "int8_tera_op_per_s", "tdp_w", "idle_w", "devices_per_node",
                    "scaleup_gb_per_s_per_direction", "scaleout_gb_per_s_per_direction",
                    "pcie_gb_per_s_per_direction", "llc_mib", "compute_units", "boost_clock_mhz", "release_year"],
    "instances.csv": ["device_count", "vcpus", "ram_gib", "price_usd_per_h"],
    "onprem_servers.csv": ["device_count", "capex_usd", "power_w"],
    "sites.csv": ["pue", "electricity_usd_per_kwh", "colocation_usd_per_kw_month", "ops_usd_per_server_per_year",
                  "lifetime_years"],
    "carbon.csv": ["kg_co2e_per_kwh"],
    "discounts.csv": ["discount_fraction", "term_months"],
    "power_model.csv": ["value"],
}
CATALOG_TEXT = {
    "devices.csv": ["id", "aliases", "name", "kind", "date", "confidence", "source", "scaleup_link"],
    "instances.csv": ["provider", "instance", "device", "region", "pricing", "date", "confidence"],
    "onprem_servers.csv": ["id", "device", "date"],
    "sites.csv": ["id", "region", "carbon_region", "date"],
    "carbon.csv": ["region", "date"],
    "discounts.csv": ["provider", "pricing"],
    "power_model.csv": ["key", "unit"],
}
CELL_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1", "0", "", " ", "abc", "1,5", "99999999999999999999",
                "1e-400", " nan ", "0x10", "1_000", "\u0661", "5e-324", "-0", "1e308", "+inf", "100000000"]
CELL_TEXTS = ["", " ", "H100-SXM", "h100-sxm", "x" * 10000, "\u00e9\u00e8", "2024-13", "2024-1-1", "bogus", ";;;",
              "h100;h100", "\"", "a,b", "\u202e", "on_demand", "gpu", "nan"]


class Gen:
    """Builds the case list: every case is a JSON-serializable dict."""

    def __init__(self, seed: int = SEED):
        self.rng = random.Random(seed)
        self.cases: list[dict] = []

    def add(self, family: str, argv: list[str], files: list[dict] | None = None, catalog: list[dict] | None = None,
            desc: str = "", data_code: bool = False, sys_path_cwd: bool = False) -> None:
        self.cases.append({"family": family, "argv": list(argv), "files": files or [], "catalog": catalog,
                           "desc": desc, "data_code": data_code, "sys_path_cwd": sys_path_cwd})

    # ---- CLI numbers ------------------------------------------------------------------------
    def cli_numbers(self) -> None:
        r = self.rng
        grids = ((COUNT_BASES, COUNT_FLAGS), (PREDICT_BASES, PREDICT_FLAGS), (COMPARE_BASES, WORKLOAD_FLAGS),
                 (OP_BASES, OP_FLAGS))
        for bases, flags in grids:
            for flag, kind in flags.items():
                values = INT_HOSTILE if kind == "int" else FLOAT_HOSTILE
                for i, value in enumerate(values):
                    base = bases[i % len(bases)]
                    self.add("cli_numbers", _set_flag(base, flag, value), desc=f"{flag} {value[:40]!r}")
        for _ in range(700):
            bases, flags = r.choice(grids)
            argv = list(r.choice(bases))
            for flag in r.sample(sorted(flags), r.randint(1, 3)):
                kind = flags[flag]
                pool = r.choice([INT_HOSTILE if kind == "int" else FLOAT_HOSTILE, VALID_INTS,
                                 [str(r.choice([1, -1]) * 10 ** r.randint(0, 30))]])
                argv = _set_flag(argv, flag, r.choice(pool))
            self.add("cli_numbers", argv, desc="random flags")

    # ---- float flags: train tokens, op bytes, utilization, overlap ----------------------------------
    def cli_floats(self) -> None:
        bad = ["nan", "inf", "-inf", "1e400", "-1", "0", "1e300", "NaN", "Infinity", "-0", "5e-324", "1e-300"]
        for value in bad:
            for base in (["predict", "gpt2", "--device", "h100", "--mode", "training"],
                         ["predict", "bert-base", "--device", "a100-sxm-80gb", "--mode", "training", "--json"],
                         ["predict", "resnet50", "--device", "h100", "--mode", "training"],
                         ["compare", "gpt2", "--devices", "h100,l4", "--mode", "training", "--json"]):
                self.add("cli_floats", base + ["--train-tokens", value], desc=f"--train-tokens {value}")
            for op in ("copy", "h2d", "allreduce", "allgather", "reducescatter", "alltoall"):
                extra = ["--gpus", "8"] if op not in ("copy", "h2d") else []
                self.add("cli_floats", ["op", op, "--device", "h100", "--bytes", value] + extra,
                         desc=f"op {op} --bytes {value}")
                self.add("cli_floats", ["op", op, "--device", "h100", "--bytes", value, "--json"] + extra,
                         desc=f"op {op} --bytes {value} --json")
            for flag in ("--utilization", "--overlap"):
                self.add("cli_floats", ["predict", "gpt2", "--device", "h100", flag, value, "--json"], desc=f"{flag} {value}")
                self.add("cli_floats", ["predict", "gpt2", "--device", "h100", "--site", "us-virginia-colo", flag, value],
                         desc=f"{flag} {value} on-prem")
                self.add("cli_floats", ["predict", "llama-2-7b", "--device", "h100", "--mode", "training", "--gpus", "16",
                                        "--tp", "8", flag, value, "--json"], desc=f"{flag} {value} multi-node training")

    # ---- names --------------------------------------------------------------------------------
    def names(self) -> None:
        r = self.rng
        for name in HOSTILE_NAMES:
            files = [{"path": "adir.json/x", "text": ""}]
            self.add("names", ["count", name], files, desc=f"count MODEL {name[:40]!r}")
            self.add("names", ["predict", name, "--device", "h100"], files, desc=f"predict MODEL {name[:40]!r}")
            self.add("names", ["compare", name, "--devices", "h100"], files, desc=f"compare MODEL {name[:40]!r}")
            self.add("names", ["predict", "gpt2", "--device", name], files, desc=f"--device {name[:40]!r}")
            self.add("names", ["compare", "gpt2", "--devices", name], files, desc=f"--devices {name[:40]!r}")
            self.add("names", ["compare", "gpt2", "--devices", "h100," + name, "--json"], files,
                     desc=f"--devices h100,{name[:40]!r}")
            self.add("names", ["predict", "gpt2", "--device", "h100", "--instance", name], files,
                     desc=f"--instance {name[:40]!r}")
            self.add("names", ["predict", "gpt2", "--device", "h100", "--site", name], files, desc=f"--site {name[:40]!r}")
            self.add("names", ["op", "gemm", "--device", name, "--m", "8", "--n", "8", "--k", "8"], files,
                     desc=f"op --device {name[:40]!r}")
        for devices in (",", ",,", "h100,,", "all,h100", "h100,h100", "H100,h100-sxm", "h100, mi300x ", "h100,bogus",
                        "bogus,h100", "tpu-v5e,trn1,inf2", ";", "h100;mi300x", "h100," + "y" * 10000):
            self.add("names", ["compare", "gpt2", "--devices", devices, "--json"], desc=f"--devices {devices[:40]!r}")
            self.add("names", ["compare", "resnet50", "--devices", devices], desc=f"--devices {devices[:40]!r}")
        # names that are code, in data: a --configs row model and a scenario model
        for name in DATA_CODE_NAMES + HOSTILE_NAMES:
            code = name in DATA_CODE_NAMES
            row = {"id": 1, "model": name, "device": "h100"}
            self.add("names", ["predict", "--configs", "{dir}/rows.jsonl", "--json"],
                     [{"path": "rows.jsonl", "text": json.dumps(row) + "\n"}, {"path": "adir.json/x", "text": ""}],
                     desc=f"--configs row model {name[:40]!r}", data_code=code)
            self.add("names", ["plan", "{dir}/s.yaml"], [{"path": "s.yaml", "text": _scenario_with_model(name)}],
                     desc=f"scenario model {name[:40]!r}", data_code=code)
            if r.random() < 0.5 or code:
                self.add("names", ["plan", "{dir}/s.yaml"], [{"path": "s.yaml", "text": _scenario_training_model(name)}],
                         desc=f"scenario training model {name[:40]!r}", data_code=code)
            if code:
                self.add("names", ["predict", "--configs", "{dir}/rows.csv", "--json"],
                         [{"path": "rows.csv", "text": f"id,model,device\n1,{name},h100\n"}],
                         desc=f"--configs CSV row model {name!r}", data_code=True)
                self.add("names", ["predict", "--configs", "{dir}/rows.jsonl", "--json"],
                         [{"path": "rows.jsonl", "text": json.dumps({"model": "gpt2", "device": name}) + "\n"}],
                         desc=f"--configs row device {name!r}", data_code=True)
                cfg = dict(BASE_CONFIGS["gpt2"], model_type=name)
                self.add("names", ["count", "{dir}/config.json"], [{"path": "config.json", "text": json.dumps(cfg)}],
                         desc=f"config.json model_type {name!r}", data_code=True)
        # the marker module by a relative path in scenario instances etc.
        for key in ("providers", "instances", "regions"):
            scen = _deep_copy(SCENARIO_BASE)
            scen["candidates"]["cloud"][key] = ["hostile_marker:fn", "os:abort"]
            self.add("names", ["plan", "{dir}/s.yaml"], [{"path": "s.yaml", "text": _yaml_dump(scen)}],
                     desc=f"scenario candidates.cloud.{key} = code names", data_code=True)
        # a `models` package in the working directory and on sys.path must not shadow planner's models
        for argv in (["predict", "gpt2", "--device", "h100"], ["count", "bert-base"], ["compare", "resnet50", "--devices", "l4"]):
            self.add("names", argv, [{"path": "models/__init__.py", "text": "raise ImportError('shadowed models')\n"},
                                     {"path": "models/decoder.py", "text": "raise ImportError('shadowed models')\n"}],
                     desc="a models/ package on sys.path", sys_path_cwd=True)

    # ---- config.json files -------------------------------------------------------------------
    def config_json(self) -> None:
        r = self.rng
        fixed: list[tuple[str, str | dict]] = []  # (description, text or latin-1 bytes marker)
        huge = [("gpt2", "n_layer", 10**12), ("gpt2", "n_layer", 2**31), ("llama", "num_hidden_layers", 10**9),
                ("llama", "num_hidden_layers", 10**30), ("mixtral", "num_local_experts", 10**9),
                ("mixtral", "num_local_experts", 10**20), ("mixtral", "num_experts_per_tok", 10**9),
                ("vit", "image_size", 10**9), ("vit", "image_size", 10**5), ("vit", "image_size", 2**63),
                ("resnet", "image_size", 10**9), ("resnet", "depths", [10**9, 1, 1, 1]),
                ("resnet", "hidden_sizes", [10**12] * 4), ("bert", "num_hidden_layers", 10**8),
                ("gpt2", "n_embd", 10**12), ("gpt2", "vocab_size", 10**15), ("llama", "hidden_size", 2**40),
                ("llama", "max_position_embeddings", 10**18), ("gptj", "n_layer", 10**10), ("vit", "patch_size", 10**9),
                ("vit", "num_hidden_layers", 10**9), ("resnet", "depths", [10**3] * 4), ("gpt2", "n_head", 10**12),
                ("bert", "intermediate_size", 10**20), ("mistral", "sliding_window", 10**30)]
        for base, key, value in huge:
            cfg = dict(BASE_CONFIGS[base])
            cfg[key] = value
            fixed.append((f"{base} {key}={str(value)[:30]}", json.dumps(cfg)))
        odd = [("gpt2", {"n_embd": 770}), ("gpt2", {"n_head": 7}), ("llama", {"num_key_value_heads": 3}),
               ("llama", {"num_attention_heads": 7}), ("llama", {"head_dim": 33}), ("mixtral", {"num_experts_per_tok": 9}),
               ("mixtral", {"num_experts_per_tok": 0}), ("mixtral", {"num_local_experts": 0}), ("vit", {"patch_size": 15}),
               ("vit", {"patch_size": 0}), ("vit", {"patch_size": 500}), ("resnet", {"depths": []}),
               ("resnet", {"depths": [3, 4]}), ("resnet", {"hidden_sizes": [1, 1, 1, 1]}), ("resnet", {"layer_type": "basic"}),
               ("gptj", {"rotary_dim": 1000}), ("gptj", {"rotary_dim": 3}), ("gpt2", {"n_positions": 0}),
               ("bert", {"hidden_size": 0}), ("bert", {"type_vocab_size": 0}), ("llama", {"vocab_size": 0}),
               ("gpt2", {"n_inner": -5}), ("gpt2", {"layer_norm_epsilon": "nan"}), ("resnet", {"embedding_size": 0}),
               ("vit", {"num_channels": 0}), ("vit", {"num_labels": 0}), ("resnet", {"num_labels": -1}),
               ("bert", {"id2label": {str(i): str(i) for i in range(5000)}}), ("resnet", {"id2label": []}),
               ("mistral", {"sliding_window": 0}), ("mistral", {"sliding_window": -1})]
        for base, patch in odd:
            fixed.append((f"{base} {patch}"[:80], json.dumps({**BASE_CONFIGS[base], **patch})))
        for base, cfg in BASE_CONFIGS.items():
            for key in cfg:
                for value in ("12", 12.5, True, None, [], {}, -1):
                    if r.random() < 0.35:
                        fixed.append((f"{base} {key}={value!r}", json.dumps({**cfg, key: value})))
        texts = [("NaN literal", '{"model_type": "gpt2", "n_layer": NaN, "n_embd": 768, "n_head": 12, "vocab_size": 50257, '
                                 '"n_positions": 1024}'),
                 ("Infinity literal", json.dumps(BASE_CONFIGS["llama"]).replace('"rope_theta": 10000.0', '"rope_theta": Infinity')),
                 ("-Infinity eps", json.dumps(BASE_CONFIGS["bert"]).replace("1e-12", "-Infinity")),
                 ("1e400 literal", json.dumps(BASE_CONFIGS["gpt2"]).replace('"n_embd": 768', '"n_embd": 1e400')),
                 ("1e400 eps", json.dumps(BASE_CONFIGS["vit"]).replace("1e-06", "1e400")),
                 ("huge int literal", json.dumps(BASE_CONFIGS["gpt2"]).replace('"n_head": 12', '"n_head": ' + "9" * 5000)),
                 ("model_type missing", json.dumps({k: v for k, v in BASE_CONFIGS["gpt2"].items() if k != "model_type"})),
                 ("model_type int", json.dumps({**BASE_CONFIGS["gpt2"], "model_type": 3})),
                 ("model_type list", json.dumps({**BASE_CONFIGS["gpt2"], "model_type": ["gpt2"]})),
                 ("model_type unknown", json.dumps({**BASE_CONFIGS["gpt2"], "model_type": "t5"})),
                 ("model_type __import__", json.dumps({**BASE_CONFIGS["gpt2"], "model_type": "__import__"})),
                 ("top-level list", "[1, 2, 3]"), ("top-level string", '"gpt2"'), ("top-level number", "12"),
                 ("top-level null", "null"), ("empty file", ""), ("whitespace", "   \n\t "), ("empty object", "{}"),
                 ("truncated", json.dumps(BASE_CONFIGS["gpt2"])[:40]), ("trailing comma", '{"model_type": "gpt2",}'),
                 ("duplicate keys", '{"model_type": "gpt2", "model_type": "bert"}'),
                 ("JS comment", "// hi\n" + json.dumps(BASE_CONFIGS["gpt2"])),
                 ("NUL inside", json.dumps(BASE_CONFIGS["gpt2"])[:-1] + ', "x": "\\u0000"}'),
                 ("lone surrogate", json.dumps({**BASE_CONFIGS["gpt2"], "model_type": "\ud800"})),
                 ("nested 5000 in a field", json.dumps(BASE_CONFIGS["gpt2"])[:-1] + ', "x": ' + "[" * 5000 + "]" * 5000 + "}"),
                 ("nested 5000 as n_layer", json.dumps(BASE_CONFIGS["gpt2"]).replace('"n_layer": 12', '"n_layer": ' + "[" * 5000 + "]" * 5000))]
        fixed.extend(texts)
        special = [("nesting 200,000 deep", {"gen": "deep_json", "n": 200000}),
                   ("nesting 200,000 deep objects", {"gen": "deep_json_obj", "n": 200000}),
                   ("non-UTF-8 bytes", {"latin1": "{\"model_type\": \"gpt2\", \"n_layer\": 12, \"x\": \"\xff\xfe\xe9\"}"}),
                   ("UTF-16 with BOM", {"latin1": ("\ufeff" + json.dumps(BASE_CONFIGS["gpt2"])).encode("utf-16").decode("latin-1")}),
                   ("UTF-8 BOM, valid gpt2", {"latin1": ("\ufeff" + json.dumps(BASE_CONFIGS["gpt2"])).encode("utf-8").decode("latin-1")}),
                   ("UTF-8 BOM, valid resnet", {"latin1": ("\ufeff" + json.dumps(BASE_CONFIGS["resnet"])).encode("utf-8").decode("latin-1")}),
                   ("2 MB of whitespace", {"gen": "padded_json", "n": 2 * 2**20}),
                   ("binary garbage", {"latin1": bytes(range(256)).decode("latin-1") * 4})]
        for desc, content in special:
            fixed.append((desc, content))
        commands = [["count", "{dir}/config.json"], ["predict", "{dir}/config.json", "--device", "h100"],
                    ["predict", "{dir}/config.json", "--device", "h100", "--json"],
                    ["compare", "{dir}/config.json", "--devices", "h100,l4"],
                    ["count", "{dir}/config.json", "--mode", "training"]]
        for desc, content in fixed:
            for argv in commands[:3] if not desc.startswith(("nesting 200", "2 MB")) else commands[:2]:
                self.add("config_json", argv, [_file("config.json", content)], desc=desc)
            row = {"model": "{dir}/config.json", "device": "h100"}
            self.add("config_json", ["predict", "--configs", "{dir}/rows.jsonl", "--json"],
                     [_file("config.json", content), {"path": "rows.jsonl", "text": json.dumps(row) + "\n"}],
                     desc="--configs row with " + desc)
        # random mutations
        for _ in range(450):
            base = r.choice(sorted(BASE_CONFIGS))
            cfg = dict(BASE_CONFIGS[base])
            changes = []
            for _ in range(r.randint(1, 3)):
                op = r.random()
                key = r.choice(sorted(cfg)) if cfg else "model_type"
                if op < 0.2:
                    cfg.pop(key, None)
                    changes.append(f"-{key}")
                elif op < 0.85:
                    value = r.choice(JSON_VALUES)
                    if key in LOOP_KEYS and isinstance(value, int) and not isinstance(value, bool) and abs(value) > 4096:
                        value = r.choice([0, -1, 5000, "3"])
                    if key in ("depths", "hidden_sizes") and r.random() < 0.5:
                        value = [r.choice([0, 1, -1, 3, "2", None, 1.5]) for _ in range(r.randint(0, 6))]
                    cfg[key] = value
                    changes.append(f"{key}={_short_repr(value)}")
                else:
                    new = r.choice(["junk", "__class__", "", "model_type ", "\u00e9", "n_layer", "planner_source"])
                    cfg[new] = r.choice(JSON_VALUES)
                    changes.append(f"+{new!r}")
            text = json.dumps(cfg, allow_nan=True)
            argv = r.choice(commands)
            self.add("config_json", argv, [{"path": "config.json", "text": text}], desc=f"{base}: {', '.join(changes)}")

    # ---- --configs rows -----------------------------------------------------------------------
    def configs_rows(self) -> None:
        r = self.rng
        keys = ["model", "device", "mode", "gpus", "tp", "pp", "dp", "ep", "zero", "batch", "input_len", "output_len",
                "seq_len", "image_size", "global_batch", "micro_batch", "microbatches", "recompute", "dtype",
                "instance", "site", "pricing", "utilization", "overlap", "train_tokens", "id"]
        op_keys = ["op", "device", "m", "n", "k", "dtype", "bytes", "gpus", "nodes", "id"]
        value_for = {
            "model": ["gpt2", "bert-base", "resnet50", "GPT2", "", None, 3, ["gpt2"], {"a": 1}, "x" * 10000, "os:abort",
                      "hostile_marker:fn", "vit-b-16", "llama-2-7b", "mixtral-8x7b", "{dir}/missing.json"],
            "device": ["h100", "tpu-v5e", "trn1", "mi300x", "l4", "", None, 3, ["h100"], "bogus", "x" * 10000, "H100"],
            "mode": ["inference", "training", "decode", "", 3, None, "Training", "prefill"],
            "recompute": ["none", "selective", "full", "bogus", 1, None],
            "dtype": DTYPES + ["fp64", "", 3, None, "BF16"],
            "pricing": ["on_demand", "spot", "committed_1y", "committed_3y", "bogus", "", 7],
            "instance": ["bogus", "", 1, "runpod:1x H100 SXM (secure):secure-cloud"],
            "site": ["us-virginia-colo", "bogus", "", 2.5],
            "op": ["gemm", "copy", "h2d", "allreduce", "alltoall", "p2p", "bogus", "", 3, None, ["gemm"]],
        }
        numbers = [0, -1, 1, 2, 3, 8, 64, 1.5, 2.0, 1e300, 10**20, 2**63, -(2**63), 10**400, True, False, None, "",
                   "7", " 7 ", "nan", "inf", "-inf", "1e400", "NaN", "Infinity", "abc", [], {}, [1], "\u0661",
                   float("nan"), float("inf"), float("-inf"), "auto", 0.5, 1e-300, 4096, 65536, "0x10", "1_000",
                   2**31, 1e6]
        for _ in range(900):
            is_op = r.random() < 0.25
            row: dict = ({"op": r.choice(["gemm", "copy", "h2d", "allreduce"]), "device": "h100"} if is_op
                         else {"model": r.choice(["gpt2", "bert-base", "resnet50"]), "device": r.choice(["h100", "l4", "mi300x"])})
            if is_op and row["op"] == "gemm":
                row.update(m=64, n=64, k=64)
            elif is_op:
                row.update(bytes=1e6, gpus=8)
            for _ in range(r.randint(1, 4)):
                key = r.choice(op_keys if is_op else keys)
                if r.random() < 0.08:
                    key = r.choice(["bogus", "", "__class__", "Model", "model ", "None", "\u00e9", "x" * 300, "op"])
                row[key] = r.choice(value_for.get(key, numbers)) if key in value_for and r.random() < 0.7 else r.choice(numbers)
            as_csv = r.random() < 0.3
            if as_csv:
                cols = list(row)
                text = ",".join(_csv_cell(c) for c in cols) + "\n" + ",".join(_csv_cell(row[c]) for c in cols) + "\n"
                path = "rows.csv"
            else:
                text = json.dumps(row, allow_nan=True) + "\n"
                path = "rows.jsonl"
            self.add("configs_rows", ["predict", "--configs", "{dir}/" + path, "--json"], [{"path": path, "text": text}],
                     desc=("CSV " if as_csv else "JSONL ") + _short_repr(row, 200),
                     data_code=any(v in ("os:abort", "hostile_marker:fn") for v in row.values() if isinstance(v, str)))
        good = json.dumps({"id": "ok", "model": "gpt2", "device": "h100"})
        files = [
            ("non-UTF-8 JSONL", {"latin1": good + "\n{\"id\": \"\xe9\xff\", \"model\": \"gpt2\", \"device\": \"h100\"}\n"}, "rows.jsonl"),
            ("non-UTF-8 CSV", {"latin1": "id,model,device\n\xe9,gpt2,h100\n"}, "rows.csv"),
            ("BOM JSONL", {"latin1": ("\ufeff" + good + "\n").encode("utf-8").decode("latin-1")}, "rows.jsonl"),
            ("BOM CSV", {"latin1": "\ufeffid,model,device\nok,gpt2,h100\n".encode("utf-8").decode("latin-1")}, "rows.csv"),
            ("UTF-16 JSONL", {"latin1": (good + "\n").encode("utf-16").decode("latin-1")}, "rows.jsonl"),
            ("empty JSONL", "", "rows.jsonl"), ("empty CSV", "", "rows.csv"), ("header-only CSV", "id,model,device\n", "rows.csv"),
            ("blank lines", "\n\n  \n" + good + "\n\n", "rows.jsonl"),
            ("array line", "[1, 2]\n" + good + "\n", "rows.jsonl"), ("string line", '"gpt2"\n', "rows.jsonl"),
            ("null line", "null\n", "rows.jsonl"), ("number line", "12\n", "rows.jsonl"),
            ("NaN id", '{"id": NaN, "model": "gpt2", "device": "h100"}\n', "rows.jsonl"),
            ("Infinity id", '{"id": Infinity, "model": "gpt2", "device": "h100"}\n', "rows.jsonl"),
            ("NaN utilization", '{"model": "gpt2", "device": "h100", "utilization": NaN}\n', "rows.jsonl"),
            ("Infinity overlap", '{"model": "gpt2", "device": "h100", "overlap": Infinity}\n', "rows.jsonl"),
            ("NaN train_tokens", '{"model": "gpt2", "device": "h100", "mode": "training", "train_tokens": NaN}\n', "rows.jsonl"),
            ("1e400 train_tokens", '{"model": "gpt2", "device": "h100", "mode": "training", "train_tokens": 1e400}\n', "rows.jsonl"),
            ("1e400 batch", '{"model": "gpt2", "device": "h100", "batch": 1e400}\n', "rows.jsonl"),
            ("huge int batch", '{"model": "gpt2", "device": "h100", "batch": ' + "9" * 5000 + "}\n", "rows.jsonl"),
            ("NaN op bytes", '{"op": "copy", "device": "h100", "bytes": NaN}\n', "rows.jsonl"),
            ("inf op bytes", '{"op": "copy", "device": "h100", "bytes": "inf"}\n', "rows.jsonl"),
            ("1e400 gemm m", '{"op": "gemm", "device": "h100", "m": 1e400, "n": 8, "k": 8}\n', "rows.jsonl"),
            ("id object", '{"id": {"a": [1, {"b": NaN}]}, "model": "gpt2", "device": "h100"}\n', "rows.jsonl"),
            ("CSV extra cells", "id,model,device\n1,gpt2,h100,extra,cells\n", "rows.csv"),
            ("CSV short row", "id,model,device,batch\n1,gpt2\n", "rows.csv"),
            ("CSV NUL", "id,model,device\n1,gpt2\x00,h100\n", "rows.csv"),
            ("CSV unterminated quote", 'id,model,device\n1,"gpt2,h100\n', "rows.csv"),
            ("CSV duplicate header", "model,model,device\ngpt2,bert-base,h100\n", "rows.csv"),
            ("CSV nan cells", "model,device,utilization,overlap,train_tokens,mode\ngpt2,h100,nan,inf,nan,training\n", "rows.csv"),
            ("CSV 1e400 batch", "model,device,batch\ngpt2,h100,1e400\n", "rows.csv"),
            ("CSV huge batch", "model,device,batch\ngpt2,h100,99999999999999999999999\n", "rows.csv"),
            ("CSV CR only", "id,model,device\r1,gpt2,h100\r", "rows.csv"),
            ("CSV no header", "gpt2,h100\n", "rows.csv"),
            ("NUL in JSONL", good + "\n\x00\n", "rows.jsonl"),
            ("JSONL nesting 200,000", {"gen": "deep_json", "n": 200000}, "rows.jsonl"),
            ("JSONL nesting 5,000 in id", '{"id": ' + "[" * 5000 + "]" * 5000 + ', "model": "gpt2", "device": "h100"}\n', "rows.jsonl"),
            ("JSONL 2,000 rows", (good + "\n") * 2000, "rows.jsonl"),
            ("JSONL 5 MB line", {"gen": "long_line", "n": 5 * 2**20}, "rows.jsonl"),
            ("not .csv: CSV text in .txt", "id,model,device\n1,gpt2,h100\n", "rows.txt"),
        ]
        for desc, content, path in files:
            self.add("configs_rows", ["predict", "--configs", "{dir}/" + path, "--json"], [_file(path, content)], desc=desc)
            self.add("configs_rows", ["predict", "--configs", "{dir}/" + path], [_file(path, content)], desc=desc + " (no --json)")
        for path in ("{dir}", "{dir}/missing.jsonl", "/dev/null", "/dev/zero", "/proc/self/status", "", "{dir}/adir.csv"):
            self.add("configs_rows", ["predict", "--configs", path, "--json"], [{"path": "adir.csv/x", "text": ""}],
                     desc=f"--configs {path!r}")

    # ---- scenario YAML ------------------------------------------------------------------------
    def scenario_yaml(self) -> None:
        r = self.rng
        fixed: list[tuple[str, object]] = []
        for path in SCENARIO_NUMBER_PATHS:
            for value in (".nan", ".inf", "-.inf", "1e400", "-1", "0", "99999999999999999999999", "'abc'", "[]", "true",
                          "2024-01-01", "null"):
                fixed.append((f"{'.'.join(map(str, path))} = {value}", _scenario_text_with(path, value)))
        fixed.append(("availability .nan", _scenario_text_with(("constraints", "availability"), "{runpod: .nan}")))
        fixed.append(("availability .inf", _scenario_text_with(("constraints", "availability"),
                                                                "{'runpod:1x H100 SXM (secure):secure-cloud:on_demand': .inf}")))
        fixed.append(("availability list", _scenario_text_with(("constraints", "availability"), "[1, 2]")))
        fixed.append(("availability int keys", _scenario_text_with(("constraints", "availability"), "{1: 2, null: 3}")))
        fixed.append(("training tokens .nan", _scenario_training("tokens", ".nan")))
        fixed.append(("training tokens .inf", _scenario_training("tokens", ".inf")))
        fixed.append(("training tokens 1e30", _scenario_training("tokens", "1.0e+30")))
        fixed.append(("training deadline .inf", _scenario_training("deadline_days", ".inf")))
        fixed.append(("training deadline .nan", _scenario_training("deadline_days", ".nan")))
        fixed.append(("training deadline 1e-30", _scenario_training("deadline_days", "1.0e-30")))
        fixed.append(("training seq_len huge", _scenario_training("seq_len", "99999999999999999999")))
        fixed.append(("training ok", _scenario_training("tokens", "1.0e+6")))
        for model in ("bert-base", "resnet50", "vit-b-16", "bert-large"):
            fixed.append((f"encoder model {model} as serving workload", _scenario_with_model(model)))
            fixed.append((f"encoder model {model} as training job", _scenario_training_model(model)))
        bomb = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x]"] +
                         [f"a{i}: &a{i} [*a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}, *a{i-1}]"
                          for i in range(1, 10)])
        base_text = _yaml_dump(SCENARIO_BASE)
        fixed.append(("alias bomb as an unknown key", bomb + "\n" + base_text))
        fixed.append(("alias bomb as name", _bomb_at("name", base_text)))
        fixed.append(("alias bomb as demand_rps", _bomb_at("demand", base_text)))
        fixed.append(("alias bomb as weights", _bomb_at("weights", base_text)))
        fixed.append(("alias bomb as model", _bomb_at("model", base_text)))
        fixed.append(("alias bomb as providers", _bomb_at("providers", base_text)))
        fixed.append(("self-referencing alias", "&a [*a]\n"))
        fixed.append(("recursive mapping alias", "name: &n {a: *n}\n" + base_text.replace("name: tiny\n", "")))
        fixed.append(("5,000-deep flow nesting", "x: " + "[" * 5000 + "]" * 5000 + "\n" + base_text))
        fixed.append(("5,000-deep flow mapping nesting", "x: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n" + base_text))
        fixed.append(("5,000-deep block nesting", "".join(" " * i + "a:\n" for i in range(5000)) + " " * 5000 + "b: 1\n"))
        fixed.append(("5,000-deep nesting as name", base_text.replace("name: tiny", "name: " + "[" * 5000 + "]" * 5000)))
        fixed.append(("python/object/apply os.system", "!!python/object/apply:os.system ['touch {dir}/pwned']\n"))
        fixed.append(("python/object/apply marker", "name: !!python/object/apply:hostile_marker.fn []\n" +
                      base_text.replace("name: tiny\n", "")))
        fixed.append(("python/name marker", "name: !!python/name:hostile_marker.fn\n" + base_text.replace("name: tiny\n", "")))
        fixed.append(("python/module marker", "name: !!python/module:hostile_marker\n" + base_text.replace("name: tiny\n", "")))
        fixed.append(("unknown tag", "name: !bogus x\n" + base_text.replace("name: tiny\n", "")))
        fixed.append(("non-UTF-8", {"latin1": base_text.replace("tiny", "t\xe9\xff") }))
        fixed.append(("UTF-8 BOM, valid", {"latin1": ("\ufeff" + base_text).encode("utf-8").decode("latin-1")}))
        fixed.append(("UTF-16", {"latin1": base_text.encode("utf-16").decode("latin-1")}))
        fixed.append(("empty", ""))
        fixed.append(("document marker only", "---\n"))
        fixed.append(("two documents", base_text + "---\n" + base_text))
        fixed.append(("top-level list", "- 1\n- 2\n"))
        fixed.append(("top-level scalar", "gpt2\n"))
        fixed.append(("top-level .nan", ".nan\n"))
        fixed.append(("tabs", "name:\ttiny\n\tworkloads: []\n"))
        fixed.append(("2 MB", {"gen": "padded_yaml", "n": 2 * 2**20}))
        fixed.append(("NUL", base_text + "\x00\n"))
        fixed.append(("duplicate keys", base_text + "name: again\n"))
        fixed.append(("merge key", "base: &b {demand_rps: .nan}\n" + base_text))
        fixed.append(("unknown top-level keys of mixed types", base_text + "1: 2\nnull: x\ntrue: [1]\n3.5: {}\n"))
        fixed.append(("complex key", base_text + "? [a, b]\n: 1\n"))
        fixed.append(("name as a mapping", base_text.replace("name: tiny", "name: {a: 1}")))
        fixed.append(("name as a date", base_text.replace("name: tiny", "name: 2024-01-01")))
        fixed.append(("name 1 MB", base_text.replace("name: tiny", "name: " + "n" * 900_000)))
        fixed.append(("workload name as list", base_text.replace("name: chat", "name: [a]")))
        fixed.append(("workloads a mapping", base_text.replace("workloads:", "workloads_x:") + "workloads: {a: 1}\n"))
        fixed.append(("shares 0.5+0.5 with .nan", _scenario_buckets("[{input_len: 128, output_len: 32, share: 0.5}, "
                                                                   "{input_len: 64, output_len: 16, share: .nan}]")))
        fixed.append(("1,000 buckets", _scenario_buckets("[" + ", ".join("{input_len: %d, output_len: 8, share: 0.001}" % (i + 1)
                                                                         for i in range(1000)) + "]")))
        fixed.append(("bucket input_len 10**20", _scenario_buckets("[{input_len: 100000000000000000000, output_len: 8, share: 1}]")))
        fixed.append(("bucket input_len 1.5", _scenario_buckets("[{input_len: 1.5, output_len: 8, share: 1}]")))
        fixed.append(("bucket input_len > positions", _scenario_buckets("[{input_len: 5000, output_len: 8, share: 1}]")))
        fixed.append(("onprem unknown site", _yaml_dump({**_deep_copy(SCENARIO_BASE), "candidates": {
            "onprem": {"site": "bogus", "servers": ["dgx-h100"]}}})))
        fixed.append(("onprem site only", _yaml_dump({**_deep_copy(SCENARIO_BASE), "candidates": {
            "onprem": {"site": "us-virginia-colo", "servers": ["dgx-h100"]}}, "utilization": 0.7})))
        fixed.append(("objective weighted, zero weights", base_text.replace("objective: cost", "objective: weighted") +
                      "weights: {cost: 0, energy: 0}\n"))
        fixed.append(("objective weighted, .nan weight", base_text.replace("objective: cost", "objective: weighted") +
                      "weights: {cost: .nan, energy: 1}\n"))
        fixed.append(("objective weighted, .inf weight", base_text.replace("objective: cost", "objective: weighted") +
                      "weights: {cost: .inf, energy: 1}\n"))
        fixed.append(("pricing bogus", base_text.replace("on_demand", "bogus")))
        fixed.append(("providers none match", base_text.replace("runpod", "nobody")))
        fixed.append(("budget 1 dollar", base_text.replace("100000", "1")))
        fixed.append(("demand 1e9 req/s", base_text.replace("demand_rps: 5", "demand_rps: 1000000000")))
        fixed.append(("ttft 1e-9", base_text.replace("ttft_s: 1.0", "ttft_s: 1.0e-09")))
        fixed.append(("valid tiny scenario", base_text))
        commands = [["plan", "{dir}/s.yaml"], ["plan", "{dir}/s.yaml", "--json"]]
        for desc, content in fixed:
            for argv in commands:
                self.add("scenario_yaml", argv, [_file("s.yaml", content)], desc=desc,
                         data_code="marker" in desc or "os.system" in desc)
        for obj in ("energy", "carbon"):
            self.add("scenario_yaml", ["plan", "{dir}/s.yaml", "--objective", obj, "--json"],
                     [{"path": "s.yaml", "text": base_text}], desc=f"--objective {obj}")
        for path in ("{dir}", "{dir}/missing.yaml", "/dev/null", "/dev/zero", "", "{dir}/adir.yaml"):
            self.add("scenario_yaml", ["plan", path], [{"path": "adir.yaml/x", "text": ""}], desc=f"plan {path!r}")
        # random mutations: values at random paths, unknown keys of mixed types
        for _ in range(380):
            scen = _deep_copy(SCENARIO_BASE)
            changes = []
            for _ in range(r.randint(1, 3)):
                op = r.random()
                if op < 0.55:
                    path = r.choice(SCENARIO_NUMBER_PATHS)
                    value = r.choice(YAML_NUMBERS)
                    _set_path(scen, path, _YamlRaw(value))
                    changes.append(f"{'.'.join(map(str, path))}={value}")
                elif op < 0.8:
                    where = r.choice([(), ("workloads", 0), ("workloads", 0, "slo"), ("workloads", 0, "buckets", 0),
                                      ("candidates",), ("candidates", "cloud"), ("constraints",)])
                    key = r.choice(["bogus", "x" * 200, "Name", "1", "null", "true", "3.5", "''", "'\u00e9'", "[a, b]"])
                    value = r.choice(YAML_NUMBERS + ["{a: 1}", "[1, [2, [3]]]", "'str'"])
                    _get_path(scen, where)[_YamlRaw(key)] = _YamlRaw(value)
                    changes.append(f"{'.'.join(map(str, where)) or 'top'}.{key[:20]}={value}")
                else:
                    field = r.choice([("workloads", 0, "model"), ("workloads", 0, "dtype"), ("workloads", 0, "name"),
                                      ("objective",), ("candidates", "cloud", "providers"), ("candidates", "cloud", "pricing"),
                                      ("name",)])
                    value = r.choice(["bert-base", "resnet50", "vit-b-16", "llama-2-7b", "'os:abort'", "fp4", "int8", "''",
                                      "[]", "{}", "3", ".nan", "energy", "weighted", "[spot]", "[bogus]", "[runpod, aws]",
                                      "'hostile_marker:fn'"])
                    _set_path(scen, field, _YamlRaw(value))
                    changes.append(f"{'.'.join(map(str, field))}={value}")
            self.add("scenario_yaml", r.choice(commands), [{"path": "s.yaml", "text": _yaml_raw_dump(scen)}],
                     desc="; ".join(changes), data_code=any("abort" in c or "marker" in c for c in changes))

    # ---- catalog CSVs ------------------------------------------------------------------------
    def catalog_csv(self) -> None:
        r = self.rng
        commands = [["predict", "gpt2", "--device", "h100", "--json"], ["predict", "gpt2", "--device", "h100"],
                    ["compare", "gpt2", "--devices", "h100,tpu-v5e,l4", "--json"],
                    ["predict", "gpt2", "--device", "h100", "--site", "us-virginia-colo", "--json"],
                    ["predict", "llama-2-7b", "--device", "h100", "--gpus", "16", "--tp", "8", "--mode", "training", "--json"],
                    ["op", "allreduce", "--device", "h100", "--bytes", "1e6", "--gpus", "16", "--nodes", "2", "--json"]]
        fixed: list[tuple[str, list[dict]]] = []
        for file in CATALOG_NUMERIC:
            fixed.append((f"{file}: UTF-8 BOM", [{"op": "prepend", "latin1": "\xef\xbb\xbf"}]))
            fixed.append((f"{file}: non-UTF-8 byte in a cell", [{"op": "replace_cell", "row": 1, "col": None, "latin1": "\xe9\xff"}]))
            fixed.append((f"{file}: UTF-16", [{"op": "reencode", "encoding": "utf-16"}]))
            fixed.append((f"{file}: empty", [{"op": "write", "text": ""}]))
            fixed.append((f"{file}: header only", [{"op": "keep_lines", "n": 1}]))
            fixed.append((f"{file}: deleted", [{"op": "delete"}]))
            fixed.append((f"{file}: a directory", [{"op": "mkdir"}]))
            fixed.append((f"{file}: short row", [{"op": "short_row", "row": 1, "drop": 3}]))
            fixed.append((f"{file}: extra cells", [{"op": "append_cells", "row": 1, "cells": ["x", "y"]}]))
            fixed.append((f"{file}: NUL byte", [{"op": "append", "text": "\x00\n"}]))
            fixed.append((f"{file}: unterminated quote", [{"op": "append", "text": '"abc,def\n'}]))
            fixed.append((f"{file}: CRLF", [{"op": "crlf"}]))
            fixed.append((f"{file}: duplicate row", [{"op": "duplicate_row", "row": 1}]))
            fixed.append((f"{file}: renamed header", [{"op": "rename_header", "col": 0}]))
            fixed.append((f"{file}: garbage line", [{"op": "append", "text": "garbage\n"}]))
            fixed.append((f"{file}: blank lines", [{"op": "append", "text": "\n\n,,,\n"}]))
            fixed.append((f"{file}: 10,000-char cell", [{"op": "replace_cell", "row": 1, "col": None, "text": "z" * 10000}]))
            for col in CATALOG_NUMERIC[file]:
                for value in ("nan", "inf", "1e400", "-1", "0", "abc", ""):
                    fixed.append((f"{file}: {col}={value!r}", [{"op": "replace_cell", "row": "h100" if file == "devices.csv"
                                                                else 1, "col": col, "text": value}]))
        fixed.append(("calibration profile: non-UTF-8", [{"op": "profile", "latin1": '{"x": "\xff"}'}]))
        fixed.append(("calibration profile: NaN", [{"op": "profile", "text": '{"device": NaN}'}]))
        fixed.append(("calibration profile: nesting 200,000", [{"op": "profile", "gen": "deep_json", "n": 200000}]))
        fixed.append(("calibration profile: empty", [{"op": "profile", "text": ""}]))
        fixed.append(("calibration profile: list", [{"op": "profile", "text": "[]"}]))
        fixed.append(("calibration profile: BOM", [{"op": "profile_bom"}]))
        fixed.append(("calibration: a file", [{"op": "calibration_file"}]))
        for i, (desc, ops) in enumerate(fixed):
            file = desc.split(":")[0]
            ops = [dict(o, file=file) for o in ops]
            for argv in (commands[i % len(commands)], commands[0]) if i % 3 == 0 else (commands[i % len(commands)],):
                self.add("catalog_csv", argv, catalog=ops, desc=desc)
        for _ in range(260):
            file = r.choice(sorted(CATALOG_NUMERIC))
            ops = []
            changes = []
            for _ in range(r.randint(1, 2)):
                if r.random() < 0.7:
                    col = r.choice(CATALOG_NUMERIC[file])
                    value = r.choice(CELL_NUMBERS)
                else:
                    col = r.choice(CATALOG_TEXT[file])
                    value = r.choice(CELL_TEXTS)
                row = r.choice(["h100", 1, 2, 3, -1]) if file == "devices.csv" else r.choice([1, 2, -1])
                ops.append({"op": "replace_cell", "file": file, "row": row, "col": col, "text": value})
                changes.append(f"{col}[{row}]={value[:20]!r}")
            self.add("catalog_csv", r.choice(commands), catalog=ops, desc=f"{file}: {', '.join(changes)}")

    # ---- outputs: JSON and text of valid-looking commands ----------------------------------------------
    def outputs(self) -> None:
        for model in ("gpt2", "bert-base", "resnet50"):
            for dtype in DTYPES:
                for devices in ("h100", "all", "tpu-v5e,trn1,inf2,h100"):
                    for json_flag in ([], ["--json"]):
                        self.add("outputs", ["compare", model, "--devices", devices, "--dtype", dtype] + json_flag,
                                 desc=f"compare {model} {dtype} on {devices}")
        for model in ("gpt2", "bert-base", "resnet50"):
            for json_flag in ([], ["--json"]):
                for sort in ("cost", "latency", "throughput", "energy"):
                    self.add("outputs", ["compare", model, "--mode", "training", "--sort", sort] + json_flag,
                             desc=f"compare {model} training sorted by {sort}")
        for model in ("gpt2", "bert-base", "resnet50", "vit-b-16"):
            for mode in ("inference", "training"):
                for json_flag in ([], ["--json"]):
                    self.add("outputs", ["predict", model, "--device", "h100", "--mode", mode, "--ops"] + json_flag,
                             desc=f"predict {model} {mode} --ops")
        for device in DEVICES:
            for model, mode in (("gpt2", "inference"), ("gpt2", "training"), ("resnet50", "inference")):
                self.add("outputs", ["predict", model, "--device", device, "--mode", mode, "--json"],
                         desc=f"--json on {device} ({mode})")
                self.add("outputs", ["predict", model, "--device", device, "--mode", mode],
                         desc=f"text on {device} ({mode})")
            for dtype in ("fp4", "fp8", "int8", "fp32"):
                self.add("outputs", ["predict", "gpt2", "--device", device, "--dtype", dtype, "--json"],
                         desc=f"--dtype {dtype} on {device}")
            for op in ("gemm", "copy", "h2d", "allreduce", "alltoall"):
                extra = ["--m", "512", "--n", "512", "--k", "512"] if op == "gemm" else ["--bytes", "1e6"]
                extra += ["--gpus", "16", "--nodes", "2"] if op in ("allreduce", "alltoall") else []
                self.add("outputs", ["op", op, "--device", device, "--json"] + extra, desc=f"op {op} on {device}")
                self.add("outputs", ["op", op, "--device", device, "--dtype", "fp4"] + extra, desc=f"op {op} fp4 on {device}")
        for target in ("{dir}", "{dir}/nope/x.png", "{dir}/x.png", "{dir}/x", "", "{dir}/adir.png", "{dir}/x.svg",
                       "{dir}/" + "r" * 300 + ".png"):
            for model in ("gpt2", "resnet50"):
                self.add("outputs", ["predict", model, "--device", "h100", "--roofline", target],
                         [{"path": "adir.png/x", "text": ""}], desc=f"--roofline {target[:40]!r}")
        for argv in (["predict", "gpt2", "--device", "h100", "--batch", "auto", "--json"],
                     ["predict", "llama-2-7b", "--device", "h100", "--batch", "auto"],
                     ["predict", "gpt2", "--device", "tpu-v5e", "--pricing", "spot", "--json"],
                     ["predict", "gpt2", "--device", "h100", "--pricing", "committed_3y", "--json"],
                     ["predict", "gpt2", "--device", "h100", "--site", "us-virginia-colo", "--utilization", "0.01"],
                     ["predict", "gpt2", "--device", "trn1", "--site", "us-virginia-colo", "--json"],
                     ["predict", "llama-2-7b", "--device", "t4", "--json"],
                     ["predict", "llama-2-7b", "--device", "t4"],
                     ["compare", "llama-3.1-405b", "--devices", "t4,l4", "--json"],
                     ["predict", "mixtral-8x7b", "--device", "h100", "--gpus", "8", "--ep", "8", "--json"],
                     ["predict", "gpt2", "--device", "h100", "--mode", "training", "--train-tokens", "1e12", "--json"],
                     ["predict", "gpt2", "--device", "xeon-8480", "--json"],
                     ["predict", "gpt2", "--device", "h100", "--gpus", "3", "--json"],
                     ["count", "gpt2", "--mode", "decode", "--json", "--by", "phase"],
                     ["count", "resnet50", "--mode", "decode"], ["count", "bert-base", "--mode", "decode"],
                     ["count", "resnet50", "--counter", "fvcore", "--json"], ["count", "gpt2", "--top", "-5"],
                     ["compare", "gpt2", "--mode", "training", "--json"], ["compare", "gpt2", "--json"],
                     ["op", "p2p", "--device", "h100"], ["op", "gemm", "--device", "h100"],
                     ["predict", "gpt2"], ["predict", "--device", "h100"], ["predict"], ["compare"], ["count"], ["plan"],
                     [], ["--help"], ["bogus"], ["predict", "gpt2", "--device", "h100", "--instance", "x", "--site", "y"]):
            self.add("outputs", argv, desc=" ".join(argv)[:60] or "(no arguments)")

    # ---- issue 45: impossible trace times, huge grid numbers, output paths, cluster addresses, limits ---------
    def hardening2(self) -> None:
        mm = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5,
              "args": {"Input type": ["float", "float"], "Input Dims": [[4, 8], [8, 2]]}}
        traces = [("dur 0", json.dumps({"traceEvents": [{**mm, "dur": 0}]})),
                  ("two ops of dur 0", json.dumps({"traceEvents": [{**mm, "dur": 0}, {**mm, "ts": 3, "dur": 0}]})),
                  ("dur 1e308", json.dumps({"traceEvents": [{**mm, "dur": 1e308}]})),
                  ("dur 1e16", json.dumps({"traceEvents": [{**mm, "dur": 1e16}]})),
                  ("ts -1e300", json.dumps({"traceEvents": [{**mm, "ts": -1e300}]})),
                  ("dur 5e-324", json.dumps({"traceEvents": [{**mm, "dur": 5e-324}]}))]
        for digits in (19, 20, 40, 310, 401):
            traces.append((f"ts of {digits} digits", '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", '
                           '"pid": 1, "tid": 1, "ts": ' + "9" * digits + ', "dur": 5}]}'))
            traces.append((f"dur of {digits} digits", '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", '
                           '"pid": 1, "tid": 1, "ts": 0, "dur": ' + "9" * digits + '}]}'))
        for desc, text in traces:
            for extra in ([], ["--json"], ["--on", "a100-sxm-80gb"], ["--roofline", "{dir}/r.png"]):
                self.add("hardening2", ["trace", "{dir}/t.json", "--device", "h100-sxm"] + extra,
                         [{"path": "t.json", "text": text}], desc=f"trace {desc} {' '.join(extra)}")
        big = "1" + "0" * 400
        for spec in ("{from: 1, to: BIG, times: 2}", "{from: BIG, to: BIG, step: 1}", "{from: 1, to: 8, step: BIG}",
                     "{from: 1, to: 8, times: BIG}", "[1, BIG]", "BIG", "[-BIG]", "{from: -BIG, to: 1, step: 1}",
                     "{from: 1, to: 1e300, times: 1e300}", "[1e308, 1e300]"):
            grid = f"axes:\n  model: [gpt2]\n  device: [h100-sxm]\n  batch: {spec.replace('BIG', big)}\n"
            self.add("hardening2", ["sweep", "{dir}/g.yaml", "--out", "{dir}/s.parquet", "--no-progress"],
                     [{"path": "g.yaml", "text": grid}], desc=f"grid batch {spec}")
        for address in ("tcp://[::1", "tcp://[::1]", "dask://", "dask://:8786", "dask://h", "dask://h:0", "dask://h:65536",
                        "dask://h:99999999999999999999", "dask://h:x", "ray://h:-1", "dask://h:1/path", "dask://u@h:1",
                        "dask://h:1?x=1", "tcp://" + "h" * 300 + ":1", "spark://h:1", "dask://[zz]:1", "ray://[::1:1"):
            self.add("hardening2", ["sweep", "examples/sweeps/serving.yaml", "--out", "{dir}/s.parquet",
                                    "--cluster", address, "--no-progress"], desc=f"--cluster {address[:40]!r}")
        for target in ("/proc/self/x.png", "/proc/x/y.png", "/sys/x.png", "/dev/null/x.png"):
            self.add("hardening2", ["predict", "gpt2", "--device", "h100-sxm", "--roofline", target],
                     desc=f"--roofline {target}")
        limits = [["count", "gpt2", "--top", "-1"], ["count", "gpt2", "--top", "-99999999"],
                  ["count", "gpt2", "--top", "99999999999"],
                  ["op", "allreduce", "--device", "h100", "--bytes", "1.5", "--gpus", "8"],
                  ["op", "copy", "--device", "h100", "--bytes", "2.5"],
                  ["op", "allgather", "--device", "h100", "--bytes", "1e6", "--gpus", "16", "--nodes", "2",
                   "--scaleout-gbps", "nan"],
                  ["op", "allreduce", "--device", "h100", "--bytes", "1e6", "--gpus", "16", "--nodes", "2",
                   "--scaleout-gbps", "-1"],
                  ["op", "allreduce", "--device", "mi300x", "--bytes", "1e6", "--gpus", "16", "--nodes", "2",
                   "--scaleout-gbps", "1e400"],
                  ["compare", "gpt2", "--devices", ""], ["compare", "gpt2", "--devices", ","],
                  ["compare", "gpt2", "--devices", " , "]]
        for flag in ("--slo-ttft", "--slo-tpot"):
            for value in ("0", "-1", "-0", "1e-400"):
                limits.append(["serve", "gpt2", "--device", "l4", "--rate", "2", "--input-len", "128", "--output-len",
                               "32", "--requests", "20", flag, value])
        for value in ("-1", "1e9", "101"):
            limits.append(["trace", "{dir}/t.json", "--device", "h100-sxm", "--host-scale", value])
            limits.append(["trace", "{dir}/t.json", "--device", "h100-sxm", "--on", "a100-sxm-80gb", "--host-scale", value])
        for argv in limits:
            self.add("hardening2", argv, [{"path": "t.json", "text": json.dumps({"traceEvents": [mm]})}],
                     desc=" ".join(argv)[:60])
        for name, text in (("e.jsonl", ""), ("blank.jsonl", "\n  \n\n"), ("h.csv", "model,device\n"),
                           ("bom.jsonl", "\ufeff"), ("ws.csv", "\n\n")):
            self.add("hardening2", ["predict", "--configs", "{dir}/" + name], [{"path": name, "text": text}],
                     desc=f"empty --configs {name}")
        for key in ("providers", "regions", "instances", "pricing"):
            self.add("hardening2", ["plan", "{dir}/s.yaml"],
                     [{"path": "s.yaml", "text": _scenario_text_with(("candidates", "cloud", key), "[]")}],
                     desc=f"scenario candidates.cloud.{key}: []")
        self.add("hardening2", ["plan", "{dir}/s.yaml"],
                 [{"path": "s.yaml", "text": _scenario_text_with(("candidates", "onprem"),
                                                                  "{site: us-virginia-colo, servers: []}")}],
                 desc="scenario candidates.onprem.servers: []")
        for argv in (["predict", "gpt2", "--device", "h100-sxm"], ["count", "gpt2"], ["plan", "examples/chat.yaml"]):
            self.add("hardening2", argv, catalog=[{"op": "delete", "file": "devices.csv"}],
                     desc=f"PLANNER_HARDWARE_SPECS without devices.csv: {argv[0]}")
        for secret in ("TOKEN-abc", "x" * 5000, "=cmd()"):
            row = json.dumps({"model": "{dir}/other.json", "device": "h100"})
            self.add("hardening2", ["predict", "--configs", "{dir}/rows.jsonl", "--json"],
                     [{"path": "rows.jsonl", "text": row + "\n"},
                      {"path": "other.json", "text": json.dumps({"model_type": secret})}],
                     desc=f"--configs naming another JSON file (model_type {secret[:10]!r})")
        for name in ("os:abort", "code:interact", "sys:exit", "builtins:exit", "subprocess:getoutput", "json:loads",
                     "planner.cli:main", "os.path:exists", "a.b:c"):
            for argv in (["count", name], ["predict", name, "--device", "h100"], ["compare", name, "--devices", "h100"]):
                self.add("hardening2", argv, desc=f"{argv[0]} {name} without --allow-code")
        self.add("hardening2", ["serve", "gpt2", "--device", "l4", "--rate", "2", "--input-len", "128",
                                "--output-len", "32", "--requests", "20"], desc="serve gpt2 (1,024 positions)")

    def build(self) -> list[dict]:
        for family in (self.cli_numbers, self.cli_floats, self.names, self.config_json, self.configs_rows,
                       self.scenario_yaml, self.catalog_csv, self.outputs, self.hardening2):
            family()
        for i, case in enumerate(self.cases):
            case["id"] = i
        return self.cases


def _set_flag(argv: list[str], flag: str, value: str) -> list[str]:
    out = list(argv)
    if flag in out:
        i = out.index(flag)
        out[i + 1] = value
    else:
        out += [flag, value]
    return out


def _file(path: str, content) -> dict:
    if isinstance(content, dict):
        return {"path": path, **content}
    return {"path": path, "text": content}


def _short_repr(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _deep_copy(obj):
    return json.loads(json.dumps(obj))


def _csv_cell(value) -> str:
    text = "" if value is None else str(value)
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n\r') else text


class _YamlRaw:
    """A YAML fragment written as is (so .nan, aliases and dates stay YAML)."""

    def __init__(self, text: str):
        self.text = text

    def __hash__(self):
        return hash(self.text)

    def __eq__(self, other):
        return isinstance(other, _YamlRaw) and other.text == self.text


def _yaml_scalar(value) -> str:
    if isinstance(value, _YamlRaw):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value)  # a double-quoted YAML string


def _yaml_raw_dump(obj) -> str:
    """Flow-style YAML of a dict/list tree whose leaves may be _YamlRaw fragments."""
    def flow(v) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{_yaml_scalar(k)}: {flow(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(flow(x) for x in v) + "]"
        return _yaml_scalar(v)
    return "".join(f"{_yaml_scalar(k)}: {flow(v)}\n" for k, v in obj.items())


def _yaml_dump(obj) -> str:
    return _yaml_raw_dump(obj)


def _set_path(obj, path, value) -> None:
    for key in path[:-1]:
        if isinstance(obj, dict) and key not in obj:
            obj[key] = {}
        obj = obj[key]
    obj[path[-1]] = value


def _get_path(obj, path):
    for key in path:
        obj = obj[key]
    return obj


def _scenario_text_with(path, value: str) -> str:
    scen = _deep_copy(SCENARIO_BASE)
    if path[0] == "weights":
        scen["objective"] = "weighted"
        scen["weights"] = {"cost": 1, "energy": 0}
    _set_path(scen, path, _YamlRaw(value))
    return _yaml_raw_dump(scen)


def _scenario_with_model(name: str) -> str:
    scen = _deep_copy(SCENARIO_BASE)
    scen["workloads"][0]["model"] = name
    return _yaml_raw_dump(scen)


def _scenario_training(key: str, value: str) -> str:
    scen = _deep_copy(SCENARIO_BASE)
    scen["training"] = [{"name": "ft", "model": "gpt2", "tokens": 1e6, "seq_len": 512, "deadline_days": 7}]
    scen["training"][0][key] = _YamlRaw(value)
    return _yaml_raw_dump(scen)


def _scenario_training_model(name: str) -> str:
    scen = _deep_copy(SCENARIO_BASE)
    del scen["workloads"]
    scen["training"] = [{"name": "ft", "model": name, "tokens": 1e6, "seq_len": 128, "deadline_days": 7}]
    return _yaml_raw_dump(scen)


def _scenario_buckets(buckets: str) -> str:
    scen = _deep_copy(SCENARIO_BASE)
    scen["workloads"][0]["buckets"] = _YamlRaw(buckets)
    return _yaml_raw_dump(scen)


def _bomb_at(where: str, base_text: str) -> str:
    """The tiny scenario with a billion-laughs alias bomb (9 levels of 9: 387 million leaves when
    expanded) as the value at `where`; the anchors are defined inside the value itself."""
    del base_text
    scen = _deep_copy(SCENARIO_BASE)
    target = {"name": ("name",), "demand": ("workloads", 0, "demand_rps"), "weights": ("weights",),
              "model": ("workloads", 0, "model"), "providers": ("candidates", "cloud", "providers")}[where]
    defs = "&a0 [" + ", ".join(["x"] * 9) + "]"
    for i in range(1, 10):
        defs = f"&a{i} [" + ", ".join([defs] + [f"*a{i-1}"] * 8) + "]"
    _set_path(scen, target, _YamlRaw(defs))
    return _yaml_raw_dump(scen)


# =============================================================================================
# Materializing a case (worker side)
# =============================================================================================


def _content_bytes(spec: dict) -> bytes:
    if "text" in spec:
        return spec["text"].encode("utf-8", "surrogatepass")
    if "latin1" in spec:
        return spec["latin1"].encode("latin-1")
    if "b64" in spec:
        return base64.b64decode(spec["b64"])
    gen, n = spec["gen"], spec["n"]
    if gen == "deep_json":
        return b"[" * n + b"]" * n
    if gen == "deep_json_obj":
        return b'{"a":' * n + b"1" + b"}" * n
    if gen == "padded_json":
        return b"{" + b" " * n + b"}"
    if gen == "padded_yaml":
        return b"name: tiny\n" + b"# padding\n" * (n // 10)
    if gen == "long_line":
        return b'{"id": "' + b"x" * n + b'", "model": "gpt2", "device": "h100"}\n'
    raise ValueError(gen)


def _subst(text: str, case_dir: str) -> str:
    return text.replace("{dir}", case_dir)


def materialize(case: dict, case_dir: Path, tree: Path) -> dict[str, str]:
    """Write the case's files under case_dir; return the environment it needs."""
    env = {}
    for spec in case["files"]:
        path = case_dir / spec["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        if "text" in spec:
            spec = dict(spec, text=_subst(spec["text"], str(case_dir)))
        path.write_bytes(_content_bytes(spec))
    if case.get("catalog"):
        import shutil
        hs = case_dir / "hs"
        shutil.copytree(tree / "hardware_specs", hs)
        for op in case["catalog"]:
            _damage(hs, op)
        env["PLANNER_HARDWARE_SPECS"] = str(hs)
    return env


def _damage(hs: Path, op: dict) -> None:
    import csv
    kind = op["op"]
    if kind.startswith("profile") or kind == "calibration_file":
        cal = hs / "calibration"
        profiles = sorted(cal.glob("*/profile.json"))
        if kind == "calibration_file":
            import shutil
            shutil.rmtree(cal)
            cal.write_text("not a folder\n")
            return
        if not profiles:
            return
        target = profiles[0]
        if kind == "profile_bom":
            target.write_bytes(b"\xef\xbb\xbf" + target.read_bytes())
        else:
            target.write_bytes(_content_bytes(op))
        return
    path = hs / op["file"]
    data = path.read_bytes()
    if kind == "prepend":
        path.write_bytes(op["latin1"].encode("latin-1") + data)
        return
    if kind == "reencode":
        path.write_bytes(data.decode("utf-8").encode(op["encoding"]))
        return
    if kind == "write":
        path.write_bytes(op["text"].encode())
        return
    if kind == "delete":
        path.unlink()
        return
    if kind == "mkdir":
        path.unlink()
        path.mkdir()
        return
    if kind == "append":
        path.write_bytes(data + op["text"].encode())
        return
    if kind == "crlf":
        path.write_bytes(data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
        return
    if kind == "keep_lines":
        path.write_bytes(b"".join(data.splitlines(keepends=True)[:op["n"]]))
        return
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    header, body = rows[0], rows[1:]
    if kind == "rename_header":
        header[op["col"]] = header[op["col"]] + "_renamed"
    else:
        row = op["row"]
        if row == "h100":
            index = next((i for i, b in enumerate(body) if b and b[0] == "h100-sxm"), 0)
        else:
            index = row if row >= 0 else len(body) + row
            index = max(0, min(len(body) - 1, index - 1 if row > 0 else index))
        if kind == "replace_cell":
            col = header.index(op["col"]) if op.get("col") in header else (1 if len(header) > 1 else 0)
            # raw bytes (not UTF-8) go in through a placeholder replaced after encoding
            body[index][col] = op["text"] if "text" in op else "\u0007RAW\u0007"
        elif kind == "short_row":
            body[index] = body[index][:-op["drop"]]
        elif kind == "append_cells":
            body[index] = body[index] + op["cells"]
        elif kind == "duplicate_row":
            body.insert(index, list(body[index]))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header] + body)
    data = out.getvalue().encode("utf-8", "surrogatepass")
    if "latin1" in op:
        data = data.replace("\u0007RAW\u0007".encode(), op["latin1"].encode("latin-1"))
    path.write_bytes(data)


# =============================================================================================
# Checking outputs
# =============================================================================================

_TEXT_NAN = re.compile(r"(?<![\w.\-])[-+]?(nan|inf|infinity)(?![\w])", re.IGNORECASE)


def _nonfinite_in_json(obj, path="$") -> str | None:
    if isinstance(obj, float):
        return None if obj == obj and obj not in (float("inf"), float("-inf")) else f"{path} = {obj}"
    if isinstance(obj, dict):
        for k, v in obj.items():
            found = _nonfinite_in_json(v, f"{path}.{k}")
            if found:
                return found
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            found = _nonfinite_in_json(v, f"{path}[{i}]")
            if found:
                return found
    return None


def find_nonfinite(stdout: str) -> str | None:
    """Where stdout shows NaN or infinity as a number: in JSON values (parsed), else in the text."""
    text = stdout.strip()
    if not text:
        return None
    if text[0] in "[{":
        docs = []
        try:
            docs = [json.loads(text)]
        except ValueError:
            try:
                docs = [json.loads(line) for line in text.splitlines() if line.strip()]
            except ValueError:
                docs = []
        if docs:
            for doc in docs:
                found = _nonfinite_in_json(doc)
                if found:
                    return "JSON " + found
            return None
    for line in text.splitlines():
        m = _TEXT_NAN.search(line)
        if m:
            return f"text: {line.strip()[:160]}"
    return None


# =============================================================================================
# Zygote and worker (processes that import the tree's planner)
# =============================================================================================

MARKER_SOURCE = '''"""Planted by the hostile corpus: importing or calling it leaves a file in MARKER_OUT."""
import os, time
_OUT = {out!r}
def _mark(what):
    with open(os.path.join(_OUT, f"{{what}}-{{os.getpid()}}-{{time.time_ns()}}"), "w") as f:
        f.write(what)
_mark("imported")
def fn(*args, **kwargs):
    _mark("called")
    raise SystemExit("hostile_marker.fn ran")
'''


def _bind_tree(tree: Path) -> None:
    """Import planner from TREE and bind planner_models to TREE/models (as the editable install does)."""
    import importlib.util
    sys.path.insert(0, str(tree))
    for name in [n for n in sys.modules if n == "planner" or n.startswith(("planner.", "planner_models"))]:
        del sys.modules[name]
    spec = importlib.util.spec_from_file_location("planner_models", tree / "models" / "__init__.py",
                                                  submodule_search_locations=[str(tree / "models")])
    module = importlib.util.module_from_spec(spec)
    sys.modules["planner_models"] = module
    spec.loader.exec_module(module)


def _clear_context_caches() -> None:
    for modname, attr in (("planner.predict.context", "default_context"), ("planner.prediction", "default_context"),
                          ("planner.predict", "default_context")):
        mod = sys.modules.get(modname)
        fn = getattr(mod, attr, None) if mod else None
        if fn is not None and hasattr(fn, "cache_clear"):
            fn.cache_clear()


def _run_main(main, argv: list[str]) -> tuple[object, str, str, dict | None]:
    out, err = io.StringIO(), io.StringIO()
    exc_info = None
    status: object = None
    import traceback
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) or exc.code is None else f"SystemExit({exc.code!r})"
            if status is None:
                status = 0
        except BaseException as exc:  # noqa: BLE001 - everything that escapes main is the finding
            tb = traceback.extract_tb(exc.__traceback__)
            where = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in tb[-3:]]
            exc_info = {"type": type(exc).__name__, "message": str(exc)[:300], "where": where,
                        "is_planner_error": any(c.__name__ == "PlannerError" for c in type(exc).__mro__)}
    return status, out.getvalue(), err.getvalue(), exc_info


def _classify(status, stdout: str, stderr: str, exc_info: dict | None) -> tuple[str, str]:
    if exc_info is not None:
        return "traceback", f"{exc_info['type']}: {exc_info['message'][:200]} at {' <- '.join(reversed(exc_info['where']))}"
    if "Traceback (most recent call last)" in stderr:
        return "traceback", "traceback on stderr: " + stderr.strip().splitlines()[-1][:200]
    found = find_nonfinite(stdout)
    if found:
        return "nan_output", found
    if status == 0:
        return "success", ""
    if status == 2:
        return "clean_error", (stderr.strip().splitlines() or [""])[-1][:300]
    if status == 3 and "internal error" in stderr:
        # the CLI's catch-all turned an unexpected exception into one line: still a bug found
        return "traceback", "internal error (exit 3): " + (stderr.strip().splitlines() or [""])[-1][:200]
    return "other_status", f"exit status {status}: " + (stderr.strip().splitlines() or [""])[-1][:200]


def worker_loop(sock: socket.socket, tree: Path, base: Path, main) -> None:
    rfile = sock.makefile("r", encoding="utf-8")
    wfile = sock.makefile("w", encoding="utf-8")
    wfile.write(json.dumps({"hello": os.getpid()}) + "\n")
    wfile.flush()
    marker_out = base / "marker_out"
    home = os.getcwd()
    for line in rfile:
        case = json.loads(line)
        case_dir = base / "cases" / f"c{case['id']}"
        case_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        saved_path = list(sys.path)
        saved_modules = set(sys.modules)
        try:
            env = materialize(case, case_dir, tree)
        except Exception as exc:  # a corpus bug, not a planner finding
            wfile.write(json.dumps({"id": case["id"], "outcome": "setup_error", "detail": repr(exc)}) + "\n")
            wfile.flush()
            continue
        for k, v in env.items():
            os.environ[k] = v
        if env:
            _clear_context_caches()
        argv = [_subst(a, str(case_dir)) for a in case["argv"]]
        os.chdir(case_dir)
        if case.get("sys_path_cwd"):
            sys.path.insert(0, str(case_dir))
            sys.path.insert(0, "")
        try:
            status, stdout, stderr, exc_info = _run_main(main, argv)
        finally:
            os.chdir(home)
            sys.path[:] = saved_path
            for k in env:
                os.environ.pop(k, None)
            if env:
                _clear_context_caches()
            for name in set(sys.modules) - saved_modules:
                if name == "hostile_marker" or name.startswith(("hostile_marker.", "models")):
                    del sys.modules[name]
        elapsed = time.perf_counter() - t0
        outcome, detail = _classify(status, stdout, stderr, exc_info)
        marks = sorted(p.name for p in marker_out.iterdir()) if marker_out.is_dir() else []
        pwned = (case_dir / "pwned").exists()
        if marks or pwned:
            outcome, detail = "code_from_data", f"marker: {marks or ['pwned']} ({outcome}: {detail})"[:400]
            for p in marker_out.iterdir():
                p.unlink()
        stderr_lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        result = {"id": case["id"], "outcome": outcome, "detail": detail, "status": status if isinstance(status, int)
                  else str(status), "elapsed_s": round(elapsed, 4),
                  "stdout_tail": stdout[-300:], "stderr_tail": stderr[-400:],
                  "multiline_planner_error": status == 2 and len(stderr_lines) > 1,
                  "long_error": status == 2 and len(stderr) > 2000,
                  "warning_on_stderr": status == 0 and "Warning" in stderr}
        wfile.write(json.dumps(result) + "\n")
        wfile.flush()
        with contextlib.suppress(OSError):
            import shutil
            shutil.rmtree(case_dir)


def zygote(tree: Path, base: Path, sock_path: str) -> None:
    """Import the tree's planner, warm its caches, then fork a worker whenever the parent asks."""
    devnull = os.open(os.devnull, os.O_RDWR)
    log = os.open(str(base / f"zygote-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    ctl_in = os.fdopen(os.dup(0), "rb", buffering=0)
    ctl_out = os.fdopen(os.dup(1), "w")
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = sys.stderr = open(log, "w", closefd=False)
    (base / "marker").mkdir(exist_ok=True)
    (base / "marker_out").mkdir(exist_ok=True)
    (base / "marker" / "hostile_marker.py").write_text(MARKER_SOURCE.format(out=str(base / "marker_out")))
    sys.path.insert(0, str(base / "marker"))
    os.environ.pop("PLANNER_HARDWARE_SPECS", None)
    os.environ["MPLBACKEND"] = "Agg"
    _bind_tree(tree)
    import torch
    torch.set_num_threads(1)
    import importlib

    from planner.cli import main
    # the layout before issue 10 had these modules at the top of planner/; import whichever exists
    for name in ("planner.plan.scenario", "planner.plan.check", "planner.plan.solve", "planner.scenario",
                 "planner.plan_check", "planner.plan", "planner.plot"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    warm = [["predict", "gpt2", "--device", "h100"], ["predict", "gpt2", "--device", "h100", "--mode", "training"],
            ["predict", "bert-base", "--device", "h100"], ["predict", "bert-base", "--device", "h100", "--mode", "training"],
            ["predict", "resnet50", "--device", "h100"], ["predict", "resnet50", "--device", "h100", "--mode", "training"],
            ["predict", "vit-b-16", "--device", "h100"], ["count", "gpt2"], ["count", "gpt2", "--mode", "decode"],
            ["count", "gpt2", "--mode", "training"], ["count", "bert-base"], ["count", "resnet50"], ["count", "vit-b-16"],
            ["predict", "gpt2", "--device", "h100", "--ops"], ["predict", "gpt2", "--device", "h100", "--input-len", "128",
                                                                 "--output-len", "32"],
            ["compare", "gpt2", "--devices", "all"], ["compare", "resnet50", "--devices", "all"],
            ["compare", "bert-base", "--devices", "all"]]
    t0 = time.time()
    for argv in warm:
        status, _, err, exc = _run_main(main, argv)
        print(f"warm {argv}: {status} {exc and exc['type']}", flush=True)
    print(f"warm-up {time.time() - t0:.1f} s", flush=True)
    ctl_out.write("ready\n")
    ctl_out.flush()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    statuses = base / "statuses"
    statuses.mkdir(exist_ok=True)
    while True:
        ready, _, _ = select.select([ctl_in], [], [], 0.2)
        while True:  # reap workers, leave their status for the parent
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            how = (f"killed by signal {os.WTERMSIG(st)}" if os.WIFSIGNALED(st) else f"exited {os.WEXITSTATUS(st)}")
            (statuses / str(pid)).write_text(how)
        if not ready:
            continue
        line = ctl_in.readline()
        if not line or line.strip() == b"quit":
            return
        pid = os.fork()
        if pid == 0:
            try:
                ctl_in.close()
                ctl_out.close()
                import resource
                soft = 12 * 2**30
                resource.setrlimit(resource.RLIMIT_AS, (soft, soft))
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(sock_path)
                worker_loop(sock, tree, base, main)
            finally:
                os._exit(0)
        ctl_out.write(f"{pid}\n")
        ctl_out.flush()


# =============================================================================================
# Parent: runs the corpus
# =============================================================================================


class Runner:
    def __init__(self, tree: Path, base: Path):
        import subprocess
        self.tree, self.base = tree, base
        self.sock_path = str(base / "sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sock_path)
        self.listener.listen(4)
        self.subprocess = subprocess
        self.zyg = None
        self.worker = None  # (pid, sock, rfile, wfile)
        self.restarts = 0
        self.zygote_starts = 0

    def _start_zygote(self) -> None:
        self.zygote_starts += 1
        env = dict(os.environ)
        env.pop("PLANNER_HARDWARE_SPECS", None)
        env.pop("PYTHONPATH", None)
        self.zyg = self.subprocess.Popen([PYTHON, __file__, "--zygote", str(self.tree), "--base", str(self.base),
                                          "--sock", self.sock_path], stdin=self.subprocess.PIPE,
                                         stdout=self.subprocess.PIPE, env=env, cwd=str(self.base))
        line = self.zyg.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"zygote failed to start; see {self.base}/zygote-*.log")

    def _start_worker(self) -> None:
        if self.zyg is None or self.zyg.poll() is not None:
            self._start_zygote()
        self.zyg.stdin.write(b"fork\n")
        self.zyg.stdin.flush()
        pid = int(self.zyg.stdout.readline())
        self.listener.settimeout(60)
        sock, _ = self.listener.accept()
        rfile = sock.makefile("r", encoding="utf-8")
        wfile = sock.makefile("w", encoding="utf-8")
        hello = json.loads(rfile.readline())
        assert hello["hello"] == pid, (hello, pid)
        self.worker = (pid, sock, rfile, wfile)
        self.restarts += 1

    def _drop_worker(self, kill: bool) -> str:
        pid, sock, rfile, wfile = self.worker
        self.worker = None
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            sock.close()
        status_file = self.base / "statuses" / str(pid)
        for _ in range(50):
            if status_file.exists():
                return status_file.read_text()
            time.sleep(0.05)
        return "unknown"

    def run_case(self, case: dict) -> dict:
        if self.worker is None:
            self._start_worker()
        pid, sock, rfile, wfile = self.worker
        t0 = time.perf_counter()
        try:
            wfile.write(json.dumps(case) + "\n")
            wfile.flush()
        except OSError:
            how = self._drop_worker(kill=True)
            return {"id": case["id"], "outcome": "crash", "detail": f"worker gone before the case ({how})"}
        deadline = t0 + DEADLINE_S
        buf = b""
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                self._drop_worker(kill=True)
                self._check_marker_after_death(case)
                return {"id": case["id"], "outcome": "hang", "detail": f"no result within {DEADLINE_S:g} s",
                        "elapsed_s": round(time.perf_counter() - t0, 2)}
            ready, _, _ = select.select([sock], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = sock.recv(1 << 20)
            if not chunk:
                how = self._drop_worker(kill=False)
                marks = self._check_marker_after_death(case)
                outcome = "code_from_data" if (marks or case.get("data_code")) and "signal" in how else "crash"
                return {"id": case["id"], "outcome": outcome,
                        "detail": f"worker died: {how}" + (f"; marker {marks}" if marks else ""),
                        "elapsed_s": round(time.perf_counter() - t0, 2)}
            buf += chunk
            if buf.endswith(b"\n"):
                return json.loads(buf.decode("utf-8"))

    def _check_marker_after_death(self, case: dict) -> list[str]:
        out = self.base / "marker_out"
        marks = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
        for p in out.iterdir() if out.is_dir() else []:
            p.unlink()
        return marks

    def close(self) -> None:
        if self.worker is not None:
            self._drop_worker(kill=True)
        if self.zyg is not None and self.zyg.poll() is None:
            with contextlib.suppress(OSError):
                self.zyg.stdin.write(b"quit\n")
                self.zyg.stdin.flush()
            try:
                self.zyg.wait(10)
            except self.subprocess.TimeoutExpired:
                self.zyg.kill()


def _example(case: dict, result: dict) -> dict:
    files = []
    for spec in case["files"]:
        if "gen" in spec:
            content = f"<generated {spec['gen']} n={spec['n']}>"
        else:
            raw = spec.get("text", spec.get("latin1", ""))
            content = raw if len(raw) <= 300 else raw[:300] + f"... ({len(raw):,} chars)"
        files.append({"path": spec["path"], "content": content})
    argv = [a if len(a) <= 120 else a[:100] + f"...({len(a):,} chars)" for a in case["argv"]]
    ex = {"id": case["id"], "argv": argv, "desc": case["desc"][:300], "outcome": result["outcome"],
          "detail": str(result.get("detail", ""))[:400]}
    if files:
        ex["files"] = files
    if case.get("catalog"):
        ex["catalog_damage"] = [{k: (v if not isinstance(v, str) or len(v) <= 80 else v[:80] + "...") for k, v in op.items()}
                                for op in case["catalog"]]
    return ex


def _signature(result: dict) -> str:
    detail = str(result.get("detail", ""))
    detail = re.sub(r"\d+", "N", detail)
    detail = re.sub(r"/tmp/\S+", "PATH", detail)
    return result["outcome"] + "|" + detail[:90]


def summarize(cases: list[dict], results: list[dict], tree: Path, elapsed: float, runner: Runner | None) -> dict:
    counts = {k: 0 for k in OUTCOMES}
    by_family: dict[str, dict] = {}
    examples: dict[str, list] = {}
    seen: dict[str, set] = {}
    extra = {"setup_error": 0, "multiline_planner_error": 0, "long_error_over_2000_chars": 0, "warning_on_stderr": 0}
    exc_types: dict[str, int] = {}
    slowest = sorted(((r.get("elapsed_s") or 0, r["id"]) for r in results), reverse=True)[:10]
    for case, result in zip(cases, results):
        fam = case["family"]
        outcome = result["outcome"]
        fam_counts = by_family.setdefault(fam, {"total": 0, **{k: 0 for k in OUTCOMES}})
        fam_counts["total"] += 1
        if outcome == "setup_error":
            extra["setup_error"] += 1
            fam_counts.setdefault("setup_error", 0)
            fam_counts["setup_error"] += 1
            continue
        counts[outcome] += 1
        fam_counts[outcome] += 1
        extra["multiline_planner_error"] += bool(result.get("multiline_planner_error"))
        extra["long_error_over_2000_chars"] += bool(result.get("long_error"))
        extra["warning_on_stderr"] += bool(result.get("warning_on_stderr"))
        if outcome in FAILURES:
            if outcome == "traceback":
                key = str(result.get("detail", "")).split(":")[0]
                exc_types[key] = exc_types.get(key, 0) + 1
            sig = _signature(result)
            fam_seen = seen.setdefault(fam, set())
            fam_examples = examples.setdefault(fam, [])
            if sig not in fam_seen and len(fam_examples) < EXAMPLES_PER_FAMILY:
                fam_seen.add(sig)
                fam_examples.append(_example(case, result))
    # fill up to the limit with repeats of a signature only when few distinct ones exist
    for case, result in zip(cases, results):
        fam = case["family"]
        if result["outcome"] in FAILURES:
            fam_examples = examples.setdefault(fam, [])
            if len(fam_examples) < min(EXAMPLES_PER_FAMILY, 10) and all(e["id"] != case["id"] for e in fam_examples):
                fam_examples.append(_example(case, result))
    total = len(results)
    failing = sum(counts[k] for k in FAILURES)
    return {
        "tree": str(tree), "seed": SEED, "deadline_s": DEADLINE_S, "python": sys.version.split()[0],
        "total": total, "failures": failing, "elapsed_s": round(elapsed, 1),
        "worker_starts": runner.restarts if runner else None, "zygote_starts": runner.zygote_starts if runner else None,
        "counts": counts, "informational": extra, "traceback_exception_types": dict(sorted(exc_types.items(),
                                                                                            key=lambda kv: -kv[1])),
        "by_family": by_family, "slowest_cases": [{"id": i, "elapsed_s": s} for s, i in slowest],
        "examples": examples,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", type=Path, default=ROOT, help="repository whose planner to run (default: this one)")
    p.add_argument("--out", type=Path, help="write the JSON summary here")
    p.add_argument("--limit", type=int, help="run only the first N cases (of the selection)")
    p.add_argument("--family", action="append", help="run only this family (repeatable)")
    p.add_argument("--every", type=int, default=1, help="run every Nth case (a quick sample)")
    p.add_argument("--list", action="store_true", help="print the case count per family and exit")
    p.add_argument("--results", type=Path, help="also write every case's result as JSONL here")
    p.add_argument("--zygote", help=argparse.SUPPRESS)
    p.add_argument("--base", help=argparse.SUPPRESS)
    p.add_argument("--sock", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.zygote:
        zygote(Path(args.zygote).resolve(), Path(args.base), args.sock)
        return 0
    cases = Gen().build()
    if args.list:
        fams: dict[str, int] = {}
        for c in cases:
            fams[c["family"]] = fams.get(c["family"], 0) + 1
        print(json.dumps({"total": len(cases), "by_family": fams}, indent=2))
        return 0
    if args.family:
        cases = [c for c in cases if c["family"] in args.family]
    cases = cases[::args.every]
    if args.limit:
        cases = cases[:args.limit]
    tree = args.tree.resolve()
    t0 = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        runner = Runner(tree, Path(tmp))
        log = open(args.results, "w") if args.results else None
        try:
            for n, case in enumerate(cases, 1):
                result = runner.run_case(case)
                results.append(result)
                if log:
                    log.write(json.dumps({"family": case["family"], "desc": case["desc"][:200], **result}) + "\n")
                    log.flush()
                if n % 250 == 0 or n == len(cases):
                    done = {k: sum(r["outcome"] == k for r in results) for k in OUTCOMES}
                    print(f"[{n}/{len(cases)} {time.perf_counter() - t0:.0f}s] "
                          + " ".join(f"{k}={v}" for k, v in done.items() if v), file=sys.stderr, flush=True)
        finally:
            runner.close()
            if log:
                log.close()
        summary = summarize(cases, results, tree, time.perf_counter() - t0, runner)
    brief = {k: v for k, v in summary.items() if k not in ("examples",)}
    print(json.dumps(brief, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp_out = args.out.with_name(args.out.name + ".tmp")
        tmp_out.write_text(json.dumps(summary, indent=2, ensure_ascii=True) + "\n")
        os.replace(tmp_out, args.out)
        print(f"summary written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
