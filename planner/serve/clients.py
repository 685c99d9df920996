"""Benchmark clients: how the tools that produce published serving numbers run a load and define what they
report (hardware_specs/serving/clients.json, each fact read from the client's code at a named version).

A published "concurrency N" run is not a steady state: the client sends its first N requests at once to an
empty engine (after any warm-up, which runs to completion first), keeps N in flight, and stops after a
fixed number of requests: vllm bench serve 1,000, genai-perf and aiperf max(10, 2N), InferenceMAX 10N.
With 10N requests each client sends about ten, and the first wave, N prompts queued behind each other's
prefill, weighs on the mean TTFT. So a run under a client is one run of the client's request count
(planner/serve/steady.py's "stated count"), started all at once, with the client's lengths:

    fixed    the stated input and output lengths
    below    integer-uniform in [max(int(L r), 1), L] (SGLang's bench_serving, InferenceMAX's harness)
    around   integer-uniform in [L (1 - r), L (1 + r)] (vllm bench serve; r = 0 is fixed)

where r is the run's --random-range-ratio (the client's default unless stated). Metrics: TTFT = first
token - request sent; TPOT = (E2E - TTFT) / (output tokens - 1) per request, then its mean or median over
requests, in every client; "ITL" is every gap between streamed tokens pooled over requests
(pooled_gaps: vLLM, SGLang, InferenceMAX) or the per-request TPOT again (per_request: genai-perf, aiperf,
trtllm-bench).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from planner.errors import ConfigError, UnknownNameError
from planner.files import parse_json, read_text
from planner.serve.load import serving_root

RANGES = ("fixed", "below", "around")
ITLS = ("pooled_gaps", "per_request")


@dataclass(frozen=True, slots=True)
class Client:
    """One benchmark client as planner serve simulates it."""

    id: str
    title: str
    version: str
    requests_fixed: int
    """Requests of a run whatever its concurrency (0: none; the run must state them)."""
    requests_per_concurrency: float
    """Requests per concurrent client (N = max(requests_at_least, this x concurrency)) where not fixed."""
    requests_at_least: int
    range: str
    """How a random range ratio spreads lengths: "fixed", "below" or "around" (module docstring)."""
    range_ratio: float
    """The client's default --random-range-ratio."""
    itl: str
    """"pooled_gaps" or "per_request"."""
    server: bool = True
    """Whether requests pass through the engine's HTTP server (whose per-request time, schedulers.json
    `frontend`, is in the TTFT the client measures); False for an in-process client (trtllm-bench)."""

    def requests(self, concurrency: int | None) -> int | None:
        """Requests of a run of `concurrency` clients (None where the client leaves them to the run)."""
        if self.requests_fixed:
            return self.requests_fixed
        if self.requests_per_concurrency and concurrency:
            return max(self.requests_at_least, int(math.ceil(self.requests_per_concurrency * concurrency)))
        return None

    def lengths(self, length: int, ratio: float | None, n: int, rng: np.random.Generator) -> np.ndarray:
        """`n` lengths (int64) of a stated `length` under range ratio `ratio` (None: the client's default)."""
        r = self.range_ratio if ratio is None else ratio
        if self.range == "below":
            lo, hi = max(int(length * r), 1), length
        elif self.range == "around":
            lo, hi = max(int(length * (1 - r)), 1), int(length * (1 + r))
        else:
            lo = hi = length
        if lo >= hi:
            return np.full(n, hi, dtype=np.int64)
        return rng.integers(lo, hi + 1, n, dtype=np.int64)

    def describe(self, concurrency: int | None, requests: int, ratio: float | None) -> str:
        r = self.range_ratio if ratio is None else ratio
        spread = {"fixed": "lengths as stated", "below": f"lengths uniform in [max({r:g} L, 1), L]",
                  "around": "lengths as stated" if r == 0 else f"lengths uniform in [max({1 - r:g} L, 1), {1 + r:g} L]"}
        start = f"all {concurrency} clients at once, " if concurrency else ""
        itl = "ITL pooled over streamed gaps" if self.itl == "pooled_gaps" else "ITL = per-request TPOT"
        version = re.sub(r"\b([0-9a-f]{7})[0-9a-f]{33}\b", r"\1", self.version.split(" (")[0])
        path = "" if self.server else ", in-process (no HTTP server)"
        return (f"client {self.id} ({version}): {start}{requests:,} requests{path}, "
                f"{spread[self.range]}, TPOT per request without the first token, {itl}")


def load_clients(root: str | Path | None = None) -> dict[str, Client]:
    """Every client of `root`/clients.json by id (root: serving_root() when none: $PLANNER_HARDWARE_SPECS/serving
    when that is set, else the repository's); ConfigError naming the file and the client for a malformed entry."""
    return _load(str(Path(root or serving_root()) / "clients.json"))


@lru_cache(maxsize=4)
def _load(path: str) -> dict[str, Client]:
    data = parse_json(read_text(path, "client file"), f"client file '{path}'", finite=True)
    if not isinstance(data, dict) or not isinstance(data.get("clients"), dict):
        raise ConfigError(f"{path}: needs an object 'clients' of client id -> facts")
    out = {}
    for cid, facts in data["clients"].items():
        out[cid] = _client(cid, facts, path)
    return out


def _client(cid: str, facts, path: str) -> Client:
    where = f"{path}: client {cid!r}"
    def number(value, whole: bool):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or whole and value != int(value):
            raise TypeError(value)
        return int(value) if whole else float(value)

    try:
        sim = facts["simulated"]
        requests, lengths, itl = sim["requests"]["value"], sim["lengths"]["value"], sim["itl"]["value"]
        fixed = number(requests.get("fixed", 0), True)
        per = number(requests.get("per_concurrency", 0.0), False)
        least = number(requests.get("at_least", 0), True)
        spread, ratio = str(lengths["range"]), number(lengths["ratio"], False)
        title, version = str(facts["title"]), str(facts["version"])
        server = sim.get("server", {"value": True})["value"]
        if not isinstance(server, bool):
            raise TypeError(server)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ConfigError(f"{where}: needs title, version and simulated.requests/lengths/itl "
                          "({value, source}; see simulated_schema), with whole request counts and a true/false "
                          "server") from None
    if spread not in RANGES or itl not in ITLS or not 0 <= ratio <= 1 or not 0 <= fixed <= 10**6 \
            or not 0 <= per <= 1000 or not 0 <= least <= 10**6:
        raise ConfigError(f"{where}: simulated values out of range (range one of {', '.join(RANGES)}, itl one of "
                          f"{', '.join(ITLS)}, ratio in [0, 1], request counts in [0, 1e6], per_concurrency in [0, 1,000])")
    return Client(cid, title, version, fixed, per, least, spread, ratio, itl, server)


def get_client(name: str, root: str | Path | None = None) -> Client:
    """The client called `name`; UnknownNameError (a one-line error listing the valid ids) otherwise."""
    table = load_clients(root)
    key = str(name).strip().lower()
    if key not in table:
        raise UnknownNameError("benchmark client", str(name), table)
    return table[key]
