"""Engine versions: the scheduler defaults of a named release (`--engine vllm@0.11`), resolved for a device.

hardware_specs/serving/schedulers.json holds, per engine and version, the defaults read from the engine's code at
that version (`engines`, the research record) and what the simulator takes of them (`versions`). A default that
depends on the GPU is a list of tiers: vLLM's `vllm serve` runs a step budget of 8,192 tokens and 1,024 sequences
on a GPU of at least 70 GiB that is not an A100, 2,048 and 256 otherwise, and from 0.33 16,384 tokens on
160 GiB or more; SGLang's chunked_prefill_size is 8,192 on 35 to 160 GiB and 16,384 above from 0.4.10. A
version is named exactly or by a prefix of its dotted parts ("0.11" is 0.11.0; "0.5" the newest 0.5.x
recorded); none named is the engine's latest recorded version. Facts a version does not record are the
engine file's (hardware_specs/engines/<engine>.json `scheduler`).

Async scheduling (the CPU's scheduling of step n + 1 overlapping the GPU's step n) and the largest CUDA-graph
batch are reported with the version, not simulated: the step times have no host term to hide. The time a
request spends in the engine's HTTP server before the scheduler sees it (`frontend`: vLLM 4 ms, SGLang 6.9 ms,
each measured with a model taken out of the path) is per engine, not per version.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path

from planner.errors import ConfigError
from planner.files import parse_json, read_text
from planner.hardware.catalog import Device
from planner.serve.load import serving_root
from planner.workload.engines import (
    SchedulerDefaults,
    _release_order,
    matched_version,
    recorded_versions,
    split_version,
)

_SIMULATED = {f.name for f in fields(SchedulerDefaults)} - {"policy"}
_REPORTED = ("async_scheduling", "cuda_graph_max_batch")
_COUNT = lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 2**24  # noqa: E731
_FLAG = lambda v: isinstance(v, bool)  # noqa: E731
_CHECKS = {"max_num_batched_tokens": _COUNT, "max_num_seqs": _COUNT, "kv_block_tokens": _COUNT,
           "cuda_graph_max_batch": _COUNT, "chunked_prefill": _FLAG, "mixed_batches": _FLAG, "prefix_caching": _FLAG,
           "async_scheduling": _FLAG,
           "kv_memory_fraction": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1,
           "kv_memory_basis": lambda v: v in ("total", "free"), "preemption": lambda v: v in ("recompute", "none"),
           "admission": lambda v: v in ("on_demand", "reserve_output")}
"""What each fact may hold (a fact not named here is refused)."""


@dataclass(frozen=True, slots=True)
class Version:
    """One engine version's scheduler defaults on one device."""

    engine: str
    version: str
    scheduler: SchedulerDefaults
    async_scheduling: bool | None
    cuda_graph_max_batch: int | None

    def describe(self) -> str:
        extra = []
        if self.async_scheduling is not None:
            extra.append(f"async scheduling {'on' if self.async_scheduling else 'off'}")
        if self.cuda_graph_max_batch is not None:
            extra.append(f"CUDA graphs up to batch {self.cuda_graph_max_batch}")
        return f"{self.engine} {self.version} defaults" + (f" ({', '.join(extra)}; reported, not simulated)"
                                                             if extra else "")


split = split_version
"""("vllm", "0.11") of "vllm@0.11"; (name, None) without a version (planner/workload/engines.py)."""


def _table(root: str | Path | None = None) -> dict:
    return _load(str(Path(root or serving_root()) / "schedulers.json"))


@lru_cache(maxsize=4)
def _load(path: str) -> dict:
    data = parse_json(read_text(path, "scheduler file"), f"scheduler file '{path}'", finite=True)
    versions, latest = (data.get("versions"), data.get("latest")) if isinstance(data, dict) else (None, None)
    if not isinstance(versions, dict) or not isinstance(latest, dict):
        raise ConfigError(f"{path}: needs objects 'versions' (engine -> release -> facts) and 'latest'")
    for engine, table in versions.items():
        if not isinstance(table, dict) or not all(isinstance(facts, dict) for facts in table.values()):
            raise ConfigError(f"{path}: versions.{engine} must map each release to an object of facts")
        if engine in latest and latest[engine] not in table:
            raise ConfigError(f"{path}: latest.{engine} {latest[engine]!r} is not one of its recorded releases")
    frontend = data.get("frontend", {"engines": {}})
    table = frontend.get("engines") if isinstance(frontend, dict) else None
    if not isinstance(table, dict) or not all(
            isinstance(f, dict) and isinstance(f.get("value_s"), (int, float)) and not isinstance(f["value_s"], bool)
            and 0 <= f["value_s"] <= 1 and isinstance(f.get("source"), str) for f in table.values()):
        raise ConfigError(f"{path}: frontend.engines must map each engine to {{value_s: seconds in [0, 1], source}}")
    from planner.workload.engines import engines

    unknown = sorted(set(table) - set(engines()))
    if unknown:
        raise ConfigError(f"{path}: frontend.engines names no engine {unknown[0]!r}; valid: {', '.join(engines())}")
    return data


def frontend_s(engine: str, root: str | Path | None = None) -> float:
    """Seconds a request spends in `engine`'s HTTP server on its way to the first token, outside the forward
    passes (schedulers.json `frontend`, each from a published measurement); 0.0 for an engine without a server
    record (planner's own static-batch engines)."""
    return float(_table(root).get("frontend", {}).get("engines", {}).get(engine, {}).get("value_s", 0.0))


def known(engine: str, root: str | Path | None = None) -> list[str]:
    """The recorded versions of `engine`, oldest first ([] for an engine without any)."""
    if root is None:
        return recorded_versions(engine)
    return sorted(_table(root)["versions"].get(engine, {}), key=_release_order)


def _pick(engine: str, version: str | None, root) -> str | None:
    versions = known(engine, root)
    if not versions:
        if version is not None:
            raise ConfigError(f"engine {engine} has no recorded versions: name it without '@'")
        return None
    if version is None:
        return _table(root)["latest"].get(engine, versions[-1])
    return matched_version(engine, version, versions)


def _value(fact, device: Device, where: str):
    if not isinstance(fact, dict) or "value" not in fact:
        raise ConfigError(f"{where}: must be {{value, source}}")
    value = fact["value"]
    if not isinstance(value, list):
        return value
    gib = (device.memory_bytes or 0) / 2**30
    for tier in value:
        ok = isinstance(tier, dict) and "value" in tier and isinstance(tier.get("min_gib", 0), (int, float)) \
            and not isinstance(tier.get("min_gib", 0), bool) and isinstance(tier.get("not_names", []), list) \
            and all(isinstance(n, str) for n in tier.get("not_names", []))
        if not ok:
            raise ConfigError(f"{where}: each tier must be {{min_gib: number, not_names: [names], value}}")
        if gib >= tier.get("min_gib", 0) and not any(n in device.id for n in tier.get("not_names", ())):
            return tier["value"]
    raise ConfigError(f"{where}: no tier matches {device.id} ({gib:.0f} GiB)")


def resolve(engine: str, version: str | None, scheduler: SchedulerDefaults, device: Device,
            root: str | Path | None = None) -> Version | None:
    """The scheduler defaults of `engine` at `version` (None: its latest recorded) on `device`, over the engine
    file's `scheduler`; None for an engine without recorded versions when none is named."""
    picked = _pick(engine, version, root)
    if picked is None:
        return None
    facts = _table(root)["versions"][engine][picked]
    where = f"schedulers.json versions.{engine}.{picked}"
    changes, reported = {}, {}
    for key, fact in facts.items():
        value = _value(fact, device, f"{where}.{key}")
        if not _CHECKS.get(key, lambda v: False)(value):
            raise ConfigError(f"{where}.{key}: {value!r} is not a valid value")
        if key in _SIMULATED:
            changes[key] = value
        elif key in _REPORTED:
            reported[key] = value
    try:
        sched = replace(scheduler, **changes)
    except TypeError:
        raise ConfigError(f"{where}: a fact of the wrong kind") from None
    return Version(engine, picked, sched, reported.get("async_scheduling"), reported.get("cuda_graph_max_batch"))


def engine_at(engine: str, version: str | None, device: Device):
    """(the Engine `engine` with its scheduler at `version` on `device`, the Version or None): the engine file's
    scheduler where the engine records no versions and none is named; ConfigError for a version of an engine
    without a scheduler."""
    from planner.workload.engines import get_engine

    spec = get_engine(engine)
    if spec.scheduler is None:
        if version is not None:
            raise ConfigError(f"engine {engine} runs static batches: it has no scheduler versions (name it "
                              "without '@')")
        return spec, None
    named = resolve(engine, version, spec.scheduler, device)
    return (spec if named is None else replace(spec, scheduler=named.scheduler)), named
