"""A procurement scenario (YAML or Python): serving workloads, training jobs, candidates, constraints,
objective. Validation errors give the path of the bad key, e.g. `workloads[1].buckets[0].share`.

    name: chat service
    horizon_months: 12
    objective: cost                  # cost | energy | carbon | weighted
    weights: {cost: 1, energy: 0, carbon: 0}
    utilization: 0.8                 # on-prem: share of hours doing useful work
    workloads:
      - {name: chat, model: llama-2-7b, dtype: bf16, demand_rps: 20,
         buckets: [{input_len: 512, output_len: 128, share: 1.0}], slo: {ttft_s: 1.0, tpot_s: 0.05}}
    training:
      - {name: ft, model: llama-3.1-8b, tokens: 1.0e9, seq_len: 2048, deadline_days: 7}
    candidates:
      cloud: {providers: [aws, runpod], regions: [], pricing: [on_demand, spot], instances: []}
      onprem: {site: us-virginia-colo, servers: [dgx-h100]}
    constraints:
      monthly_budget_usd: 100000
      capex_cap_usd: 2000000
      power_cap_kw: 50
      availability: {"aws:p5.48xlarge:us-east-1": 4}
      max_spot_share: 0.5
      min_onprem_share: 0.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from planner.errors import ConfigError

OBJECTIVES = ("cost", "energy", "carbon", "weighted")
PRICINGS = ("on_demand", "spot", "committed_1y", "committed_3y")
MAX_BYTES = 1_000_000


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
    demand_rps: float
    """Requests per second to sustain."""
    buckets: tuple[Bucket, ...]
    ttft_s: float
    """SLO on time to first token."""
    tpot_s: float
    """SLO on time per output token."""


@dataclass(frozen=True, slots=True)
class TrainingJob:
    name: str
    model: str
    dtype: str
    tokens: float
    seq_len: int
    deadline_s: float


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
                raise self.fail(f"expected a mapping, got {type(self.value).__name__}")
            if key not in self.value:
                if required:
                    raise ConfigError(f"{path}: missing")
                return _At(default, path)
            return _At(self.value[key], path)
        return _At(self.value[key], path)

    def mapping(self, allowed: tuple[str, ...]) -> dict:
        if self.value is None:
            return {}
        if not isinstance(self.value, dict):
            raise self.fail(f"expected a mapping, got {type(self.value).__name__}")
        unknown = sorted(set(self.value) - set(allowed))
        if unknown:
            raise ConfigError(f"{self.path}.{unknown[0]}: unknown key; valid: {', '.join(allowed)}")
        return self.value

    def items(self) -> list[_At]:
        if self.value is None:
            return []
        if not isinstance(self.value, list):
            raise self.fail(f"expected a list, got {type(self.value).__name__}")
        return [self.child(i) for i in range(len(self.value))]

    def text(self, choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(self.value, str) or not self.value.strip():
            raise self.fail(f"expected a non-empty string, got {self.value!r}")
        if choices and self.value not in choices:
            raise self.fail(f"'{self.value}' is not one of {', '.join(choices)}")
        return self.value

    def number(self, low: float = 0.0, high: float = float("inf"), integer: bool = False,
               inclusive_low: bool = False) -> float:
        v = self.value
        if isinstance(v, str):
            # YAML 1.1 reads 2.0e9 (no sign in the exponent) as a string
            try:
                v = float(v) if any(ch in v for ch in ".eE") else int(v)
            except ValueError:
                raise self.fail(f"expected a number, got {v!r}") from None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(f"expected a number, got {v!r}")
        if integer and not float(v).is_integer():
            raise self.fail(f"expected an integer, got {v!r}")
        if (v < low if inclusive_low else v <= low) or v > high:
            bound = f">= {low}" if inclusive_low else f"> {low}"
            raise self.fail(f"{v!r} is out of range ({bound}{'' if high == float('inf') else f' and <= {high}'})")
        return int(v) if integer else float(v)

    def strings(self) -> tuple[str, ...]:
        return tuple(item.text() for item in self.items())


def parse(raw: Any, source: str = "(python)") -> Scenario:
    """Validate a scenario mapping and return the Scenario; errors name the path of the bad key."""
    from planner.dtypes import DTYPES
    from planner.zoo import resolve

    root = _At(raw, "scenario")
    top = root.mapping(("name", "workloads", "training", "candidates", "constraints", "objective", "weights",
                        "horizon_months", "utilization"))
    workloads = []
    names: set[str] = set()
    for w in root.child("workloads", required=False, default=[]).items():
        w.mapping(("name", "model", "dtype", "demand_rps", "buckets", "slo"))
        name = w.child("name").text()
        if name in names:
            raise w.child("name").fail(f"'{name}' is used twice")
        names.add(name)
        model = w.child("model").text()
        try:
            resolve(model)
        except Exception as exc:
            raise w.child("model").fail(str(exc)) from None
        buckets = []
        for b in w.child("buckets").items():
            b.mapping(("input_len", "output_len", "share"))
            buckets.append(Bucket(b.child("input_len").number(integer=True), b.child("output_len").number(integer=True),
                                  b.child("share").number(high=1.0)))
        if not buckets:
            raise w.child("buckets").fail("needs at least one bucket")
        total = sum(b.share for b in buckets)
        if abs(total - 1) > 1e-6:
            raise w.child("buckets").fail(f"shares add up to {total:g}, not 1")
        slo = w.child("slo")
        slo.mapping(("ttft_s", "tpot_s"))
        workloads.append(ServingWorkload(
            name, model, w.child("dtype", required=False, default="bf16").text(tuple(DTYPES)),
            w.child("demand_rps").number(), tuple(buckets), slo.child("ttft_s").number(), slo.child("tpot_s").number()))
    jobs = []
    for t in root.child("training", required=False, default=[]).items():
        t.mapping(("name", "model", "dtype", "tokens", "seq_len", "deadline_days"))
        model = t.child("model").text()
        try:
            resolve(model)
        except Exception as exc:
            raise t.child("model").fail(str(exc)) from None
        jobs.append(TrainingJob(t.child("name").text(), model,
                                t.child("dtype", required=False, default="bf16").text(tuple(DTYPES)),
                                t.child("tokens").number(), t.child("seq_len", required=False, default=2048).number(
                                    integer=True), t.child("deadline_days").number() * 86400))
    if not workloads and not jobs:
        raise ConfigError("scenario: needs at least one entry under 'workloads' or 'training'")
    cand = root.child("candidates")
    cand.mapping(("cloud", "onprem"))
    cloud = cand.child("cloud", required=False, default=None)
    cloud.mapping(("providers", "regions", "pricing", "instances"))
    onprem = cand.child("onprem", required=False, default=None)
    onprem.mapping(("site", "servers"))
    pricing = tuple(p.text(PRICINGS) for p in cloud.child("pricing", required=False, default=["on_demand"]).items()) \
        if cloud.value is not None else ()
    candidates = Candidates(
        providers=cloud.child("providers", required=False, default=[]).strings() if cloud.value is not None else (),
        regions=cloud.child("regions", required=False, default=[]).strings() if cloud.value is not None else (),
        pricing=pricing,
        instances=cloud.child("instances", required=False, default=[]).strings() if cloud.value is not None else (),
        site=onprem.child("site").text() if onprem.value is not None else None,
        servers=onprem.child("servers", required=False, default=[]).strings() if onprem.value is not None else ())
    if cloud.value is None and onprem.value is None:
        raise cand.fail("needs 'cloud' or 'onprem' candidates")
    cons = root.child("constraints", required=False, default=None)
    cons.mapping(("monthly_budget_usd", "capex_cap_usd", "power_cap_kw", "availability", "max_spot_share",
                  "min_onprem_share"))

    def opt(key: str, **kw) -> float | None:
        node = cons.child(key, required=False, default=None) if cons.value is not None else _At(None, key)
        return None if node.value is None else node.number(**kw)

    avail = cons.child("availability", required=False, default=None) if cons.value is not None else _At(None, "")
    availability = tuple((k, avail.child(k).number(integer=True, low=0, inclusive_low=True))
                         for k in avail.mapping(tuple(avail.value or ())))
    constraints = Constraints(opt("monthly_budget_usd"), opt("capex_cap_usd"), opt("power_cap_kw"), availability,
                              opt("max_spot_share", low=0, high=1, inclusive_low=True),
                              opt("min_onprem_share", low=0, high=1, inclusive_low=True))
    objective = root.child("objective", required=False, default="cost").text(OBJECTIVES)
    weights_node = root.child("weights", required=False, default=None)
    weights = tuple((k, weights_node.child(k).number(low=0, inclusive_low=True))
                    for k in weights_node.mapping(("cost", "energy", "carbon")))
    if objective == "weighted" and not any(w for _, w in weights):
        raise weights_node.fail("objective 'weighted' needs a positive weight for cost, energy or carbon")
    return Scenario(
        name=str(top.get("name", Path(source).stem)), workloads=tuple(workloads), training=tuple(jobs),
        candidates=candidates, constraints=constraints, objective=objective,
        weights=weights or ((objective if objective != "weighted" else "cost", 1.0),),
        horizon_months=root.child("horizon_months", required=False, default=12).number(high=240),
        utilization=root.child("utilization", required=False, default=1.0).number(high=1.0),
        source=source, raw=raw)


def load(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file (parsed as data only, at most 1 MB)."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"scenario file '{path}' does not exist")
    if file.stat().st_size > MAX_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_BYTES} bytes")
    try:
        raw = yaml.safe_load(file.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    return parse(raw, str(path))
