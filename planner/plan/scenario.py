"""A procurement scenario (YAML or Python): serving workloads, training jobs, candidates, constraints,
objective. Validation errors give the path of the bad key, e.g. `workloads[1].buckets[0].share`.

    name: chat service
    horizon_months: 12
    objective: cost                  # cost | energy | carbon | weighted
    weights: {cost: 1, energy: 0, carbon: 0}
    utilization: 0.8                 # break-even of an on-prem server the plan does not hold (a held one: its load)
    workloads:
      - {name: chat, model: llama-2-7b, dtype: bf16, demand_rps: 20,
         buckets: [{input_len: 512, output_len: 128, share: 1.0}], slo: {ttft_s: 1.0, tpot_s: 0.05}}
                                     # slo: a TTFT objective, a TPOT objective or both (one left out: no target)
    training:
      - {name: ft, model: llama-3.1-8b, tokens: 1.0e9, seq_len: 2048, deadline_days: 7}
    candidates:
      cloud: {providers: [aws, runpod], pricing: [on_demand, spot]}   # regions, instances: left out = all
                                     # pricing: planner.hardware.catalog.PRICINGS (reserved_1y, ...)
      onprem: {site: us-virginia-colo, servers: [dgx-h100]}
    constraints:
      monthly_budget_usd: 100000
      capex_cap_usd: 2000000
      power_cap_kw: 50
      availability: {"aws:p5.48xlarge:us-east-1": 4}
      max_spot_share: 0.5
      min_onprem_share: 0.0

Every number must be finite and within its `Range` below (the message names the key and the range);
list lengths are bounded (MAX_WORKLOADS, MAX_BUCKETS, MAX_FLOWS, MAX_TRAINING_JOBS, MAX_LIST) and the
YAML itself by planner.plan.safe_yaml (size, aliases, nodes, depth). Models are zoo ids or
config.json paths: a scenario never names Python code (package.module:function), and a serving
workload's model must generate tokens (SERVING_FAMILIES).
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.errors import ConfigError, PlannerError
from planner.files import read_text
from planner.hardware.catalog import PRICINGS
from planner.plan.safe_yaml import load_yaml

OBJECTIVES = ("cost", "energy", "carbon", "weighted")
SERVING_FAMILIES = ("decoder",)
"""Model families that generate tokens, so that TTFT and TPOT mean something (encoders and vision
models answer in one forward pass: they have no time per output token)."""

MAX_BYTES = 2**20
"""Largest scenario file or upload (1 MiB; the examples are under 2 KB)."""
MAX_TEXT_CHARS = 200
"""Longest name, provider, region, instance or server string."""
MAX_MODEL_CHARS = 1000
"""Longest model id or config.json path."""
MAX_WORKLOADS = 32
MAX_BUCKETS = 16
"""Buckets of one serving workload."""
MAX_FLOWS = 128
"""Buckets over all workloads: each is searched on every candidate (tp x batch predictions)."""
MAX_TRAINING_JOBS = 16
MAX_LIST = 256
"""Entries of providers, regions, pricing, instances, servers and availability."""


@dataclass(frozen=True, slots=True)
class Range:
    """The valid values of one scenario number: finite, from `low` (inclusive or not) to `high`."""

    low: float
    high: float
    inclusive_low: bool = True
    integer: bool = False
    unit: str = ""

    def text(self) -> str:
        """The range in words, e.g. "above 0 to 3,600 s"."""
        low = ("above " if not self.inclusive_low else "") + _fmt(self.low)
        kind = "an integer " if self.integer else ""
        return f"{kind}{low} to {_fmt(self.high)}{' ' + self.unit if self.unit else ''}"


TOKENS = Range(1, 2**20, integer=True, unit="tokens")
DEMAND_RPS = Range(1e-6, 1e6, unit="requests/s")
SHARE = Range(0, 1, inclusive_low=False)
SLO_S = Range(0, 3600, inclusive_low=False, unit="s")
NO_TARGET_S = 1e6
"""The limit of an SLO a workload leaves out (no TTFT target, or no TPOT target): a number, so that every
comparison of a latency with its limit holds, and the largest limit the serving simulator takes
(planner/serve/api.py), far above any latency a run reaches and above SLO_S, so never a limit given."""
TRAIN_TOKENS = Range(1, 1e15, unit="tokens")
DEADLINE_DAYS = Range(0.01, 3650, unit="days")
HORIZON_MONTHS = Range(1, 240, unit="months")
UTILIZATION = Range(0.01, 1)
USD = Range(0, 1e12, unit="USD")
POWER_KW = Range(0, 1e6, unit="kW")
UNITS = Range(0, 100_000, integer=True, unit="units")
FRACTION = Range(0, 1)
PRECISION_KEYS = ("quant", "weights", "activations", "kv_cache")
"""Workload keys that set the precision beside `dtype` (as --quant, --weights, --activations, --kv-cache)."""
WEIGHT = Range(0, 1e6)


@dataclass(frozen=True, slots=True)
class Bucket:
    """A request size class of a serving workload."""

    input_len: int
    output_len: int
    share: float
    """Fraction of the workload's requests in this bucket."""


@dataclass(frozen=True, slots=True)
class ServingWorkload:
    name: str
    model: str
    dtype: str
    """Precision (planner/workload/quant.py): `dtype`, or a `quant` recipe, with `weights`, `activations`,
    `kv_cache` overrides, as one canonical string."""
    demand_rps: float
    """Requests per second to sustain."""
    buckets: tuple[Bucket, ...]
    ttft_s: float
    """SLO on time to first token, s; NO_TARGET_S where the scenario sets no TTFT target."""
    tpot_s: float
    """SLO on time per output token, s; NO_TARGET_S where the scenario sets no TPOT target."""
    engine: str | None = None
    """Execution engine (hardware_specs/engines); None: the default (vllm on GPUs)."""
    ttft_stat: str | None = None
    """The statistic the TTFT SLO binds under simulated load ("mean", "p50", "p90", "p99"), from a key
    such as `ttft_p90_s`; None for `ttft_s` (with no percentile key anywhere: batches back to back)."""
    tpot_stat: str | None = None

    @property
    def slo_text(self) -> str:
        """The SLOs in words, e.g. "TTFT 1.0 s and TPOT 0.05 s" or "TTFT 1.0 s (no TPOT target)"."""
        set_ = [f"{m} {v} s" for m, v in (("TTFT", self.ttft_s), ("TPOT", self.tpot_s)) if v < NO_TARGET_S]
        unset = [m for m, v in (("TTFT", self.ttft_s), ("TPOT", self.tpot_s)) if v >= NO_TARGET_S]
        return " and ".join(set_) + "".join(f" (no {m} target)" for m in unset)

    @property
    def simulated(self) -> bool:
        """True when an SLO names a statistic: capacity comes from the serving simulator."""
        return self.ttft_stat is not None or self.tpot_stat is not None


@dataclass(frozen=True, slots=True)
class TrainingJob:
    name: str
    model: str
    dtype: str
    tokens: float
    seq_len: int
    deadline_s: float
    engine: str | None = None
    """Execution engine (hardware_specs/engines); None: the default (eager)."""


@dataclass(frozen=True, slots=True)
class Candidates:
    providers: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    pricing: tuple[str, ...] = ("on_demand",)
    instances: tuple[str, ...] = ()
    """Explicit instance keys or names; empty: every catalog instance that passes the filters."""
    site: str | None = None
    servers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Constraints:
    monthly_budget_usd: float | None = None
    capex_cap_usd: float | None = None
    power_cap_kw: float | None = None
    availability: tuple[tuple[str, int], ...] = ()
    max_spot_share: float | None = None
    min_onprem_share: float | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    workloads: tuple[ServingWorkload, ...]
    training: tuple[TrainingJob, ...]
    candidates: Candidates
    constraints: Constraints
    objective: str = "cost"
    weights: tuple[tuple[str, float], ...] = (("cost", 1.0),)
    horizon_months: float = 12.0
    utilization: float = 1.0
    source: str = "(python)"
    raw: dict = field(default_factory=dict, compare=False, repr=False)


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def _shown(value: Any) -> str:
    """A short description of a bad value for a message (containers by kind, never their contents)."""
    if isinstance(value, dict):
        return f"a mapping of {len(value)} keys"
    if isinstance(value, (list, tuple, set)):
        return f"a list of {len(value)} entries"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _article(word: str) -> str:
    """ "an" before a vowel ("an encoder model"), "a" otherwise ("a vision model")."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def _key(key: Any) -> str:
    """A mapping key for a message, spelled as YAML writes it (null, true, false), never its contents."""
    if key is None or isinstance(key, bool):
        text = "null" if key is None else "true" if key else "false"
    elif isinstance(key, (str, int, float, datetime.date)):
        text = str(key)
    else:
        text = type(key).__name__
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


class _At:
    """A node of the raw mapping with its path, for errors that name the bad key."""

    def __init__(self, value: Any, path: str):
        self.value, self.path = value, path

    def fail(self, why: str) -> ConfigError:
        return ConfigError(f"{self.path}: {why}")

    def child(self, key: str | int, required: bool = True, default: Any = None) -> _At:
        path = f"{self.path}.{key}" if isinstance(key, str) else f"{self.path}[{key}]"
        if isinstance(key, str):
            if not isinstance(self.value, dict):
                raise self.fail(f"expected a mapping, got {_shown(self.value)}")
            if key not in self.value:
                if required:
                    raise ConfigError(f"{path}: missing")
                return _At(default, path)
            return _At(self.value[key], path)
        return _At(self.value[key], path)

    def optional(self, key: str, default: Any = None) -> _At:
        """The child `key`, or `default` where this node or the key is absent (null)."""
        if self.value is None:
            return _At(default, f"{self.path}.{key}")
        node = self.child(key, required=False, default=default)
        return node if node.value is not None else _At(default, node.path)

    def mapping(self, allowed: tuple[str, ...]) -> dict:
        """The mapping (empty for null); ConfigError listing every key not in `allowed`."""
        if self.value is None:
            return {}
        if not isinstance(self.value, dict):
            raise self.fail(f"expected a mapping, got {_shown(self.value)}")
        unknown = [k for k in self.value if not (isinstance(k, str) and k in allowed)]
        if len(unknown) == 1:
            raise ConfigError(f"{self.path}.{_key(unknown[0])}: unknown key; valid: {', '.join(allowed)}")
        if unknown:
            listed = ", ".join(_key(k) for k in unknown[:10]) + (f" and {len(unknown) - 10} more"
                                                                  if len(unknown) > 10 else "")
            raise ConfigError(f"{self.path}: unknown keys {listed}; valid: {', '.join(allowed)}")
        return self.value

    def items(self, limit: int = MAX_LIST) -> list[_At]:
        """The entries of a list (none for null), at most `limit` of them."""
        if self.value is None:
            return []
        if not isinstance(self.value, list):
            raise self.fail(f"expected a list, got {_shown(self.value)}")
        if len(self.value) > limit:
            raise self.fail(f"{len(self.value):,} entries; the limit is {limit:,}")
        return [self.child(i) for i in range(len(self.value))]

    def text(self, choices: tuple[str, ...] | None = None, max_chars: int = MAX_TEXT_CHARS) -> str:
        v = self.value
        if not isinstance(v, str) or not v.strip():
            raise self.fail(f"expected a non-empty string, got {_shown(v)}")
        if len(v) > max_chars:
            raise self.fail(f"a string of {len(v):,} characters; the limit is {max_chars:,}")
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in v):
            raise self.fail(f"{_shown(v)} contains a control character")
        if choices and v not in choices:
            raise self.fail(f"'{v}' is not one of {', '.join(choices)}")
        return v

    def number(self, valid: Range) -> float:
        """The value as a float (an int where `valid.integer`): finite and within `valid`, else a
        ConfigError naming the path and the valid range."""
        v = self.value
        if isinstance(v, str):
            # YAML 1.1 reads 2.0e9 (no sign in the exponent) as a string
            try:
                v = int(v)
            except ValueError:
                try:
                    v = float(v)
                except ValueError:
                    raise self.fail(f"expected a number, got {_shown(v)}; valid: {valid.text()}") from None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(f"expected a number, got {_shown(v)}; valid: {valid.text()}")
        try:
            x = float(v)
        except OverflowError:
            x = math.inf
        if not math.isfinite(x):
            raise self.fail(f"{_shown(self.value)} is not a finite number; valid: {valid.text()}")
        if valid.integer and not x.is_integer():
            raise self.fail(f"expected an integer, got {_shown(self.value)}; valid: {valid.text()}")
        if (x < valid.low if valid.inclusive_low else x <= valid.low) or x > valid.high:
            raise self.fail(f"{_shown(self.value)} is out of range; valid: {valid.text()}")
        return int(x) if valid.integer else x

    def strings(self) -> tuple[str, ...]:
        return tuple(item.text() for item in self.items())

    def names(self) -> tuple[str, ...]:
        """A list of names that, when given, names at least one: an empty list would select no candidate (or,
        read as no filter, every one); ConfigError saying to leave the key out for every one."""
        found = self.strings()
        if self.value is not None and not found:
            raise self.fail("is an empty list: name at least one, or leave the key out to take every one")
        return found


def _model(node: _At, serving: bool, allow_model_files: bool) -> str:
    """A model named by a scenario: a zoo id or a config.json path (never package.module:function:
    data never makes planner import code); a serving workload's model must generate tokens."""
    from planner.workload.zoo import resolve

    name = node.text(max_chars=MAX_MODEL_CHARS)
    stripped = name.strip()
    is_json = stripped.lower().endswith(".json")
    if ":" in stripped and not is_json:
        raise node.fail(f"'{stripped}' names Python code (package.module:function); scenario files name zoo ids "
                        "or config.json files only")
    if not allow_model_files:
        try:
            on_disk = Path(stripped).exists()
        except (OSError, ValueError):
            on_disk = True
        if is_json or on_disk or any(ch in stripped for ch in "/\\"):
            raise node.fail(f"'{stripped}': an uploaded scenario names zoo ids only, not files")
    try:
        model = resolve(stripped)  # allow_code stays False: a scenario never runs code
    except PlannerError as exc:
        raise node.fail(str(exc)) from None
    if serving and model.family not in SERVING_FAMILIES:
        raise node.fail(f"'{stripped}' is {_article(model.family)} {model.family} model: a serving workload with TTFT "
                        f"and TPOT SLOs needs a model that generates tokens (family {', '.join(SERVING_FAMILIES)}: "
                        "llama, mistral, mixtral, gpt2, gpt-j); an encoder or vision model has no time per output "
                        "token")
    return name


def _workloads(root: _At, allow_model_files: bool) -> tuple[ServingWorkload, ...]:
    workloads, names, flows = [], set(), 0
    for w in root.optional("workloads").items(MAX_WORKLOADS):
        w.mapping(("name", "model", "dtype", *PRECISION_KEYS, "demand_rps", "buckets", "slo", "engine"))
        name = w.child("name").text()
        if name in names:
            raise w.child("name").fail(f"'{name}' is used twice")
        names.add(name)
        model = _model(w.child("model"), True, allow_model_files)
        buckets = []
        for b in w.child("buckets").items(MAX_BUCKETS):
            b.mapping(("input_len", "output_len", "share"))
            buckets.append(Bucket(b.child("input_len").number(TOKENS), b.child("output_len").number(TOKENS),
                                  b.child("share").number(SHARE)))
        if not buckets:
            raise w.child("buckets").fail("needs at least one bucket")
        flows += len(buckets)
        if flows > MAX_FLOWS:
            raise w.child("buckets").fail(f"more than {MAX_FLOWS} buckets over all workloads (each is searched on "
                                          "every candidate)")
        total = math.fsum(b.share for b in buckets)
        if abs(total - 1) > 1e-6:
            raise w.child("buckets").fail(f"shares add up to {total:g}, not 1")
        slo = w.child("slo")
        (ttft, ttft_stat), (tpot, tpot_stat) = _slo(slo, "ttft"), _slo(slo, "tpot")
        if ttft >= NO_TARGET_S and tpot >= NO_TARGET_S:
            raise slo.fail("needs a TTFT objective, a TPOT objective or both: ttft_s, tpot_s (batches back to back) "
                           f"or ttft_p90_s, tpot_p90_s and the like (simulated load: {', '.join(SLO_STATS)})")
        if (ttft_stat or tpot_stat) and not (ttft_stat and tpot_stat):
            # one statistic named: the other plain key is read as the mean under the simulator
            ttft_stat, tpot_stat = ttft_stat or "mean", tpot_stat or "mean"
        workloads.append(ServingWorkload(
            name, model, _precision(w), w.child("demand_rps").number(DEMAND_RPS),
            tuple(buckets), ttft, tpot, _engine(w, "inference"), ttft_stat, tpot_stat))
    return tuple(workloads)


SLO_STATS = ("mean", "p50", "p90", "p99")
SLO_KEYS = tuple(f"{m}_s" for m in ("ttft", "tpot")) + tuple(f"{m}_{s}_s" for m in ("ttft", "tpot") for s in SLO_STATS)


def _slo(slo: _At, metric: str) -> tuple[float, str | None]:
    """(limit s, statistic) of one metric: `ttft_s` (statistic None) or one of `ttft_p90_s`, ...; (NO_TARGET_S,
    None) where the mapping has no key of the metric: no target on it."""
    slo.mapping(SLO_KEYS)
    keys = [k for k in slo.value if k.startswith(f"{metric}_")] if isinstance(slo.value, dict) else []
    if not keys:
        return NO_TARGET_S, None
    if len(keys) > 1:
        raise slo.fail(f"at most one {metric.upper()} objective: {metric}_s (batches back to back) or "
                       f"{metric}_p90_s and the like (simulated load: {', '.join(SLO_STATS)}); got {', '.join(keys)}")
    key = keys[0]
    stat = key[len(metric) + 1:-2] or None
    return slo.child(key).number(SLO_S), stat


def _engine(node: _At, mode: str) -> str | None:
    """The optional `engine` key: a name from hardware_specs/engines that runs `mode`."""
    from planner.workload.engines import engines

    valid = tuple(sorted(name for name, e in engines().items() if mode in e.modes))
    value = node.optional("engine", None)
    return None if value is None or value.value is None else value.text(valid)


def _precision(node: _At) -> str:
    """A workload's precision: `dtype`, or `quant` (a recipe in hardware_specs/quant), with `weights`,
    `activations` and `kv_cache` overriding single parts (planner/workload/quant.py compose)."""
    from planner.workload.dtypes import DTYPES
    from planner.workload.quant import compose

    dtype = node.optional("dtype", "bf16").text(tuple(DTYPES))
    parts = {k: node.optional(k).text() for k in PRECISION_KEYS if node.optional(k).value is not None}
    if not parts:
        return dtype
    try:
        return compose(dtype, **parts)
    except PlannerError as exc:
        raise node.fail(str(exc)) from None


def _training(root: _At, allow_model_files: bool) -> tuple[TrainingJob, ...]:
    jobs, names = [], set()
    for t in root.optional("training").items(MAX_TRAINING_JOBS):
        t.mapping(("name", "model", "dtype", *PRECISION_KEYS, "tokens", "seq_len", "deadline_days", "engine"))
        name = t.child("name").text()
        if name in names:
            raise t.child("name").fail(f"'{name}' is used twice")
        names.add(name)
        model = _model(t.child("model"), False, allow_model_files)
        jobs.append(TrainingJob(name, model, _precision(t),
                                t.child("tokens").number(TRAIN_TOKENS), t.optional("seq_len", 2048).number(TOKENS),
                                t.child("deadline_days").number(DEADLINE_DAYS) * 86400, _engine(t, "training")))
    return tuple(jobs)


def _candidates(root: _At) -> Candidates:
    cand = root.child("candidates")
    cand.mapping(("cloud", "onprem"))
    cloud = cand.optional("cloud")
    cloud.mapping(("providers", "regions", "pricing", "instances"))
    onprem = cand.optional("onprem")
    onprem.mapping(("site", "servers"))
    if cloud.value is None and onprem.value is None:
        raise cand.fail("needs 'cloud' or 'onprem' candidates")
    on_cloud = cloud.value is not None
    return Candidates(
        providers=cloud.optional("providers").names(), regions=cloud.optional("regions").names(),
        pricing=tuple(p.text(PRICINGS) for p in _nonempty(cloud.optional("pricing", ["on_demand"])).items())
        if on_cloud else (),
        instances=cloud.optional("instances").names(),
        site=onprem.child("site").text() if onprem.value is not None else None,
        servers=onprem.optional("servers").names())


def _nonempty(node: "_At") -> "_At":
    node.names()
    return node


def _constraints(root: _At) -> Constraints:
    cons = root.optional("constraints")
    cons.mapping(("monthly_budget_usd", "capex_cap_usd", "power_cap_kw", "availability", "max_spot_share",
                  "min_onprem_share"))

    def opt(key: str, valid: Range) -> float | None:
        node = cons.optional(key)
        return None if node.value is None else node.number(valid)

    avail = cons.optional("availability")
    if avail.value is not None and not isinstance(avail.value, dict):
        raise avail.fail(f"expected a mapping of instance to units, got {_shown(avail.value)}")
    entries = list((avail.value or {}).items())
    if len(entries) > MAX_LIST:
        raise avail.fail(f"{len(entries):,} entries; the limit is {MAX_LIST:,}")
    availability = []
    for key, value in entries:
        name = _At(key, avail.path).text()
        availability.append((name, _At(value, f"{avail.path}.{name}").number(UNITS)))
    return Constraints(opt("monthly_budget_usd", USD), opt("capex_cap_usd", USD), opt("power_cap_kw", POWER_KW),
                       tuple(availability), opt("max_spot_share", FRACTION), opt("min_onprem_share", FRACTION))


def parse(raw: Any, source: str = "(python)", allow_model_files: bool = True) -> Scenario:
    """Validate a scenario mapping and return the Scenario; errors name the path of the bad key and,
    for a number, its valid range. Models are zoo ids or (with `allow_model_files`) config.json
    paths, never code."""
    root = _At(raw, "scenario")
    if not isinstance(raw, dict):
        raise root.fail(f"expected a mapping of keys (name, workloads, candidates, ...), got {_shown(raw)}")
    root.mapping(("name", "workloads", "training", "candidates", "constraints", "objective", "weights",
                  "horizon_months", "utilization"))
    workloads = _workloads(root, allow_model_files)
    jobs = _training(root, allow_model_files)
    if not workloads and not jobs:
        raise ConfigError("scenario: needs at least one entry under 'workloads' or 'training'")
    candidates = _candidates(root)
    constraints = _constraints(root)
    objective = root.optional("objective", "cost").text(OBJECTIVES)
    weights_node = root.optional("weights")
    weights = tuple((k, weights_node.child(k).number(WEIGHT)) for k in weights_node.mapping(("cost", "energy", "carbon")))
    if objective == "weighted" and not any(w for _, w in weights):
        raise weights_node.fail("objective 'weighted' needs a positive weight for cost, energy or carbon")
    name_node = root.optional("name", Path(source).stem or "scenario")
    name = str(name_node.value) if isinstance(name_node.value, int) and not isinstance(name_node.value, bool) \
        and abs(name_node.value) < 10**15 else name_node.text()
    return Scenario(
        name=name, workloads=workloads, training=jobs, candidates=candidates, constraints=constraints,
        objective=objective, weights=weights or ((objective if objective != "weighted" else "cost", 1.0),),
        horizon_months=root.optional("horizon_months", 12).number(HORIZON_MONTHS),
        utilization=root.optional("utilization", 1.0).number(UTILIZATION), source=source, raw=raw)


def loads(text: str, source: str = "(text)", allow_model_files: bool = True) -> Scenario:
    """Parse and validate scenario YAML text (at most MAX_BYTES, read as data only with the bounds of
    planner.plan.safe_yaml); `source` names it in messages."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_BYTES:,} bytes")
    return parse(load_yaml(text.removeprefix("\ufeff"), source), source, allow_model_files)


def load(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file (UTF-8, a BOM allowed, at most MAX_BYTES)."""
    return loads(read_text(path, "scenario", MAX_BYTES), str(path))
