"""Execution engines as data: hardware_specs/engines/<name>.json (schema in its README).

An engine says how a stack runs the captured aten graph: which fusion rules its kernels implement
(planner/workload/lowering.py applies them), whether steps are replayed as CUDA graphs (no host-side
launch cost per kernel), the host cost of a kernel launch when they are not, its attention kernel,
its tensor-parallel all-reduce, and the dtypes and quantization recipes it serves. Every fact has a
source in the file. Nothing here executes: the files are parsed as JSON and validated field by field.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from planner.errors import ConfigError, UnknownNameError
from planner.files import parse_json, read_text, shipped_specs

ROOT = shipped_specs()
RULES = ("bn_fold", "conv_epilogue", "gemm_epilogue", "pointwise", "norm_fusion", "reduction_fusion",
         "attention_prologue", "moe_grouped", "dead_outputs", "conv_pool")
"""The fusion rules the lowering pass implements (planner/workload/lowering.py)."""
MOE_GATHERS = ("in_gemm", "kernel")
"""How a grouped MoE reads its experts' rows (Engine.moe_gather)."""
PHASES = ("forward", "backward")
MODES = ("inference", "training")
FAMILIES = ("decoder", "encoder", "vision", "custom", "detection", "diffusion", "recommender", "speech", "multimodal",
            "text")
KINDS = ("gpu", "cpu", "tpu", "accelerator")
GRAPH_MODES = ("none", "decode", "all", "training")
MAX_HOST_LAUNCH_S = 1e-3


LIBRARIES = ("pytorch-eager", "pytorch-inductor", "transformer-engine", "tensorrt", "aiconfigurator", "aiter",
             "mlperf-nvidia")
"""Kernel libraries a calibration profile can have measured (hardware_specs/calibration/README.md)."""
CROSS_CATEGORIES = ("matmul", "attention", "conv", "elementwise", "norm", "softmax", "reduction", "copy", "pool",
                    "embedding", "loss", "optimizer", "fill", "sort")
"""Op categories an engine's `profiles.other_categories` may name (planner/workload/counting.py's)."""
CONV_LAYOUTS = ("nchw", "channels_last")
"""How an engine's convolutions hold their tensors (Engine.conv_layout)."""
KV_UPDATES = ("in_place", "concatenate")
"""How an engine adds a step's keys and values to the KV cache (Engine.kv_update)."""
POLICIES = ("vllm", "sglang", "trtllm", "static")
ADMISSIONS = ("on_demand", "reserve_output")
PREEMPTIONS = ("recompute", "none")
KV_BASES = ("total", "free")


@dataclass(frozen=True, slots=True)
class SchedulerDefaults:
    """How an engine batches requests by default (the engine file's `scheduler`, every value sourced)."""

    policy: str
    """"vllm", "sglang", "trtllm" (continuous batching variants) or "static" (whole batches)."""
    max_num_batched_tokens: int
    """Tokens per engine step (prefill chunks + decodes); 0: no budget."""
    max_num_seqs: int
    """Sequences running at once; 0: set by the batch the user gives."""
    kv_block_tokens: int
    """Tokens per KV-cache block (page)."""
    kv_memory_fraction: float
    """Share of memory the engine plans with: of the whole device (weights, activations and KV cache)
    when `kv_memory_basis` is "total", of what is left free after weights and activations when "free"."""
    kv_memory_basis: str
    chunked_prefill: bool
    mixed_batches: bool
    """Prefill chunks share a step with running decodes (else prefill steps run first, alone)."""
    admission: str
    """"on_demand" (KV blocks as tokens are computed) or "reserve_output" (prompt + whole output)."""
    preemption: str
    """"recompute" (a preempted sequence is prefilled again) or "none"."""
    prefix_caching: bool


@dataclass(frozen=True, slots=True)
class Engine:
    """One execution engine, loaded from hardware_specs/engines/<name>.json."""

    name: str
    title: str
    description: str
    modes: tuple[str, ...]
    """"inference" and/or "training"."""
    families: tuple[str, ...]
    """Model families it runs: decoder (generative LLMs), encoder, vision, custom."""
    device_kinds: tuple[str, ...]
    vendors: tuple[str, ...]
    """Device vendors it runs on, lowercase as in devices.csv."""
    fusions: tuple[tuple[str, tuple[str, ...]], ...]
    """(rule, phases it applies in), for the rules it implements."""
    moe_gather: str
    """Under moe_grouped, how the experts' rows are gathered: "in_gemm" (the first grouped GEMM reads each
    row through the sorted token index: no copy) or "kernel" (a permute kernel writes the rows out first)."""
    cuda_graphs: str
    """"none", "decode" (decode steps replayed), "all" (every forward pass replayed) or "training" (a training
    step replayed)."""
    host_launch_s: float
    """Host cost of launching one kernel that is not replayed from a CUDA graph, in s."""
    attention: str
    tp_allreduce: str
    dtypes: tuple[str, ...]
    recipes: tuple[str, ...]
    profile_libraries: tuple[str, ...]
    """Kernel libraries this engine runs, in order: a device's profile of one of them is the engine's own
    (tier measured or published), a neighbour's is transferred."""
    other_libraries: tuple[str, ...]
    """Libraries whose kernel times stand in, with a wider band, where the device has no profile of the
    engine's own (tier cross-library): the engine's fusions, dispatch and graphs still apply."""
    other_categories: tuple[str, ...]
    """Op categories the other libraries' profiles time, where a measurement shows the kernels are the same
    in both ((): every category); the rest from the datasheet tier."""
    sources: tuple[tuple[str, str], ...]
    """(fact, source) for every fact above."""
    scheduler: SchedulerDefaults | None = None
    """Default batching of a serving engine; None for engines that do not serve requests."""
    mixed_precision: str | None = None
    """How it trains at a 16-bit dtype by default (planner.workload.graphs.MIXED_PRECISION); None: no training."""
    optimizer: str | None = None
    """Its default AdamW implementation (planner.workload.graphs.OPTIMIZERS); None: no training."""
    host_view_s: float = 0.0
    """Host cost of one view op (no kernel) outside a CUDA graph, in s; 0 where none is sourced."""
    conv_channel_multiple: int = 1
    """An ungrouped convolution's input channels are padded up to a multiple of this in its kernel (the
    padded lanes multiply zeros: work done, no bytes moved); 1: no padding."""
    kv_update: str = "in_place"
    """How a decode step adds its keys and values to the KV cache: "in_place" (written into a preallocated
    cache, as serving engines and planner's own models do) or "concatenate" (a new cache of the past and the
    new made each step: transformers' DynamicCache)."""
    batch_norm_reads: int = 1
    """Times a training batch norm's kernels read its activations (2: statistics, then normalization, as
    separate passes; 1: once, as its cost formula counts)."""
    conv_layout: str = "nchw"
    """How its convolutions hold their tensors: "nchw" (contiguous, as PyTorch builds them) or
    "channels_last" (NHWC, where the engine's rule takes the graph: planner/workload/kernel_rules.py)."""

    def fuses(self, rule: str, phase: str) -> bool:
        """True when the engine applies fusion `rule` to ops of `phase` ("forward"/"backward")."""
        return any(r == rule and phase in phases for r, phases in self.fusions)

    @property
    def libraries(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """(own libraries, other libraries, op categories the other libraries time: () for all): what
        Context.efficiency takes."""
        return self.profile_libraries, self.other_libraries, self.other_categories

    def replays(self, mode: str) -> bool:
        """True when a step of workload `mode` (prefill, decode, forward, training) is replayed as a
        CUDA graph, so that kernels cost no host-side launch."""
        return self.cuda_graphs == "all" and mode != "training" or self.cuda_graphs == "decode" and mode == "decode" \
            or self.cuda_graphs == "training" and mode == "training"


def engines_root() -> Path:
    """The engines folder: $PLANNER_HARDWARE_SPECS/engines when that is set, else the repository's."""
    return Path(_folder(os.environ.get("PLANNER_HARDWARE_SPECS")))


@functools.lru_cache(maxsize=8)
def _folder(specs: str | None) -> str:
    # by the variable's value: every prediction asks for its engine, and building a path is a dozen calls
    return str((Path(specs) if specs else ROOT) / "engines")


def _strings(value, where: str, allowed: tuple[str, ...] | None = None) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where} must be a list of names")
    if allowed is not None:
        for v in value:
            if v not in allowed:
                raise ConfigError(f"{where}: unknown value '{v[:40]}'; valid: {', '.join(allowed)}")
    return tuple(value)


def _fact(data: dict, key: str, field: str, where: str):
    entry = data.get(key)
    if not isinstance(entry, dict) or field not in entry:
        raise ConfigError(f"{where}: '{key}' must be an object with '{field}' and 'source'")
    source = entry.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ConfigError(f"{where}: '{key}' has no source")
    return entry[field], source


def _optional_choice(data: dict, key: str, choices: tuple[str, ...], where: str, sources: list) -> str | None:
    """An optional sourced fact `key`: {"value": one of `choices`, "source": ...}, or None when absent."""
    if key not in data:
        return None
    value, source = _fact(data, key, "value", where)
    if value not in choices:
        raise ConfigError(f"{where}: {key}.value must be {', '.join(choices[:-1])} or {choices[-1]}")
    sources.append((key.replace("_", " "), source))
    return value


def parse_engine(data, where: str) -> Engine:
    """Validate one engine's JSON object and return the Engine; ConfigError names `where` and the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: an engine file must hold a JSON object")
    for key in ("name", "title", "description"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ConfigError(f"{where}: '{key}' must be a non-empty string")
    sources = []
    fusions = []
    raw = data.get("fusions", {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'fusions' must be an object of rule -> {{phases, source}}")
    for rule, entry in raw.items():
        if rule not in RULES:
            raise ConfigError(f"{where}: unknown fusion rule '{rule[:40]}'; valid: {', '.join(RULES)}")
        phases, source = _fact(raw, rule, "phases", where)
        fusions.append((rule, _strings(phases, f"{where}: fusions.{rule}.phases", PHASES)))
        sources.append((f"fusion {rule}", source))
    moe = raw.get("moe_grouped") if isinstance(raw.get("moe_grouped"), dict) else {}
    gather = moe.get("gather", "kernel")
    if gather not in MOE_GATHERS:
        raise ConfigError(f"{where}: fusions.moe_grouped.gather must be one of {', '.join(MOE_GATHERS)}")
    if "gather" in moe:
        if not isinstance(moe.get("gather_source"), str) or not moe["gather_source"].strip():
            raise ConfigError(f"{where}: fusions.moe_grouped.gather needs a gather_source naming where it is read")
        sources.append(("MoE gather", moe["gather_source"]))
    replays, source = _fact(data, "cuda_graphs", "replays", where)
    if replays not in GRAPH_MODES:
        raise ConfigError(f"{where}: cuda_graphs.replays must be one of {', '.join(GRAPH_MODES)}")
    sources.append(("CUDA graphs", source))
    launch = _host_seconds(data, "host_launch_s", "host launch", where, sources)
    view = _host_seconds(data, "host_view_s", "host view", where, sources) if "host_view_s" in data else 0.0
    attention, source = _fact(data, "attention", "kernel", where)
    sources.append(("attention", source))
    allreduce, source = _fact(data, "tp_allreduce", "algorithm", where)
    sources.append(("TP all-reduce", source))
    dtypes, source = _fact(data, "dtypes", "values", where)
    sources.append(("dtypes", source))
    recipes, source = _fact(data, "quant", "recipes", where)
    sources.append(("quantization", source))
    libraries, source = _fact(data, "profiles", "libraries", where)
    others = data["profiles"].get("other_libraries", [])
    scope = data["profiles"].get("other_categories", [])
    sources.append(("calibration profiles", source))
    scheduler = _scheduler(data["scheduler"], where, sources) if "scheduler" in data else None
    pad = 1
    if "conv_channel_multiple" in data:
        pad, source = _fact(data, "conv_channel_multiple", "value", where)
        if isinstance(pad, bool) or not isinstance(pad, int) or not 1 <= pad <= 64:
            raise ConfigError(f"{where}: conv_channel_multiple.value must be a whole number in [1, 64]")
        sources.append(("convolution channel padding", source))
    layout = _optional_choice(data, "conv_layout", CONV_LAYOUTS, where, sources) or "nchw"
    kv_update = _optional_choice(data, "kv_update", KV_UPDATES, where, sources) or "in_place"
    bn_reads = 1
    if "batch_norm_reads" in data:
        bn_reads, source = _fact(data, "batch_norm_reads", "value", where)
        if isinstance(bn_reads, bool) or bn_reads not in (1, 2):
            raise ConfigError(f"{where}: batch_norm_reads.value must be 1 or 2")
        sources.append(("batch norm reads", source))
    mixed = _optional_choice(data, "mixed_precision", ("amp", "master", "pure"), where, sources)
    optimizer = _optional_choice(data, "optimizer", ("fused", "foreach", "loop"), where, sources)
    return Engine(
        name=data["name"], title=data["title"], description=data["description"],
        modes=_strings(data.get("modes"), f"{where}: modes", MODES),
        families=_strings(data.get("families"), f"{where}: families", FAMILIES),
        device_kinds=_strings(data.get("device_kinds"), f"{where}: device_kinds", KINDS),
        vendors=tuple(v.lower() for v in _strings(data.get("vendors"), f"{where}: vendors")),
        fusions=tuple(fusions), moe_gather=gather, cuda_graphs=replays, host_launch_s=launch,
        attention=str(attention), tp_allreduce=str(allreduce),
        dtypes=_strings(dtypes, f"{where}: dtypes.values"), recipes=tuple(recipes) if isinstance(recipes, list) else (),
        profile_libraries=_strings(libraries, f"{where}: profiles.libraries", LIBRARIES),
        other_libraries=_strings(others, f"{where}: profiles.other_libraries", LIBRARIES) if others else (),
        other_categories=_strings(scope, f"{where}: profiles.other_categories", CROSS_CATEGORIES) if scope else (),
        sources=tuple(sources),
        scheduler=scheduler, mixed_precision=mixed, optimizer=optimizer, host_view_s=view, conv_channel_multiple=pad,
        conv_layout=layout, batch_norm_reads=bn_reads, kv_update=kv_update)


def _host_seconds(data: dict, key: str, fact: str, where: str, sources: list) -> float:
    """A host cost `{value, source}` in seconds, in [0, MAX_HOST_LAUNCH_S]; its source appended as `fact`."""
    value, source = _fact(data, key, "value", where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_HOST_LAUNCH_S:
        raise ConfigError(f"{where}: {key}.value must be seconds in [0, {MAX_HOST_LAUNCH_S:g}]")
    sources.append((fact, source))
    return float(value)


def _scheduler(data, where: str, sources: list) -> SchedulerDefaults:
    """The `scheduler` object of an engine file, each fact checked and its source kept."""
    where = f"{where}: scheduler"
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be an object")
    policy = data.get("policy")
    if policy not in POLICIES:
        raise ConfigError(f"{where}.policy must be one of {', '.join(POLICIES)}")
    values = {"policy": policy}
    checks = {"max_num_batched_tokens": (int, 0, 2**24), "max_num_seqs": (int, 0, 2**20),
              "kv_block_tokens": (int, 1, 4096), "kv_memory_fraction": (float, 0.05, 1.0),
              "kv_memory_basis": (KV_BASES,),
              "chunked_prefill": (bool,), "mixed_batches": (bool,), "admission": (ADMISSIONS,),
              "preemption": (PREEMPTIONS,), "prefix_caching": (bool,)}
    for key, check in checks.items():
        value, source = _fact(data, key, "value", where)
        kind = check[0]
        if kind is bool:
            ok = isinstance(value, bool)
        elif isinstance(kind, tuple):
            ok = value in kind
        else:
            ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and check[1] <= value <= check[2]
                  and (kind is float or float(value).is_integer()))
        if not ok:
            raise ConfigError(f"{where}.{key}.value {str(value)[:40]!r} is not valid ({check})")
        values[key] = kind(value) if kind in (int, float) else value
        sources.append((f"scheduler {key}", source))
    return SchedulerDefaults(**values)


@functools.lru_cache(maxsize=4)
def _load(root: str) -> dict[str, Engine]:
    folder = Path(root)
    if not folder.is_dir():
        raise ConfigError(f"engines folder '{folder}' is missing (hardware_specs/engines/ holds one JSON file per engine)")
    engines = {}
    for path in sorted(folder.glob("*.json")):
        where = f"hardware_specs/engines/{path.name}"
        engine = parse_engine(parse_json(read_text(path, where), where), where)
        if engine.name != path.stem:
            raise ConfigError(f"{where}: name '{engine.name[:40]}' differs from the file name '{path.stem}'")
        engines[engine.name] = engine
    if "eager" not in engines:
        raise ConfigError(f"engines folder '{folder}' has no eager.json (the unfused graph)")
    return engines


def engines() -> dict[str, Engine]:
    """Every engine, by name."""
    return _load(_folder(os.environ.get("PLANNER_HARDWARE_SPECS")))


def get_engine(name: str) -> Engine:
    """The engine called `name` (case-insensitive); UnknownNameError lists the valid ones. "vllm@0.11" is the
    engine vllm, checked to have that release recorded (`matched_version`): a release selects a serving
    engine's scheduler defaults (planner/serve/versions.py); its graph, fusions and kernels are the file's."""
    table = engines()
    key, version = split_version(name)
    key = key.strip().lower() if isinstance(key, str) else key
    if key not in table:
        raise UnknownNameError("engine", str(name), table)
    if version is not None:
        matched_version(key, version)
    return table[key]


def split_version(name):
    """("vllm", "0.11") of "vllm@0.11"; (name, None) without "@"."""
    if not isinstance(name, str) or "@" not in name:
        return name, None
    base, _, version = name.partition("@")
    return base.strip(), version.strip()


def recorded_versions(engine: str) -> list[str]:
    """The releases of `engine` whose scheduler defaults hardware_specs/serving/schedulers.json records (its
    `versions`), oldest first; [] for none."""
    table = _versions(str(engines_root().parent / "serving" / "schedulers.json"))
    return list(table.get(engine, ()))


def matched_version(engine: str, version: str, known: list[str] | None = None) -> str:
    """The recorded release `version` names among `known` (oldest first; default the repository's
    recorded_versions): itself, or the newest whose dotted parts it prefixes ("0.11" is 0.11.0, "0.4" the
    newest 0.4.x); ConfigError listing the recorded ones otherwise."""
    known = recorded_versions(engine) if known is None else known
    if not known:
        raise ConfigError(f"engine {engine} has no recorded versions: name it without '@'")
    matches = [v for v in known if version and (v == version or v.startswith(version + "."))]
    if not matches:
        raise ConfigError(f"engine {engine} has no recorded version {version!r}; recorded: {', '.join(known)}")
    return matches[-1]


def _release_order(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.]|post", version) if p)


@functools.lru_cache(maxsize=4)
def _versions(path: str) -> dict[str, tuple[str, ...]]:
    """{engine: its recorded releases, oldest first} of a schedulers.json ({} where the file is absent)."""
    if not Path(path).is_file():
        return {}
    try:
        data = parse_json(read_text(path, "scheduler file"), f"scheduler file '{path}'", finite=True)
        versions = data["versions"]
        out = {}
        for engine, table in versions.items():
            if not isinstance(table, dict) or not all(isinstance(v, str) and re.fullmatch(r"[0-9][0-9a-z.]*", v)
                                                      for v in table):
                raise ValueError(engine)
            out[engine] = tuple(sorted(table, key=_release_order))
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"{path}: 'versions' must map each engine to releases (digits and dots) -> facts "
                          f"({str(e).splitlines()[0][:80] if str(e) else 'malformed'})") from None


QUANTIZED_DEFAULT = "tensorrt"
"""The engine of INT8 or FP8 inference of a non-LLM on an NVIDIA GPU when none is named: eager PyTorch runs no
quantized operator on a GPU ("Today, PyTorch supports the following backends for running quantized operators
efficiently: x86 CPUs ..., ARM CPUs ..., (early prototype) support for NVidia GPU via TensorRT", pytorch.org/docs
quantization.html, Backend/Hardware Support), so quantized vision and encoder models are served with TensorRT
(NVIDIA's MLPerf Inference submissions for ResNet-50 and BERT)."""


GENERIC_ENGINES = ("eager", "hf-generate")
"""Plain PyTorch, the engines a device of a vendor no engine file lists is assumed to run: PyTorch takes a
vendor's device out of tree through its PrivateUse1 dispatch key ('Facilitating New Backend Integration by
PrivateUse1', docs.pytorch.org/tutorials/advanced/privateuseone.html; Ascend NPU, Cambricon MLU, Moore
Threads MUSA and Microsoft MAIA plug in so, pytorch/pytorch PR #165958), so any device with a PyTorch
backend runs the unfused eager graph. Every other engine runs only on the vendors its file lists."""


def known_vendor(vendor: str | None) -> bool:
    """True when some engine file lists `vendor` (any case) among the vendors it runs on."""
    return vendor is not None and any(vendor.lower() in e.vendors for e in engines().values())


def runs_on(engine: Engine, device_kind: str | None, vendor: str | None) -> bool:
    """True when `engine` runs on a device of this kind and vendor: both listed in its file, or, for a vendor
    no engine lists, a generic (plain PyTorch) engine of that kind (GENERIC_ENGINES)."""
    if device_kind is not None and device_kind not in engine.device_kinds:
        return False
    return (vendor is None or vendor.lower() in engine.vendors
            or (engine.name in GENERIC_ENGINES and not known_vendor(vendor)))


def default_engine(family: str, mode: str, device_kind: str, gemm: str | None = None,
                   vendor: str | None = None) -> str:
    """The engine assumed when none is named: vllm for LLM (decoder) inference on a device it runs on (GPUs,
    and TPUs, Gaudi and Trainium/Inferentia through its hardware plugins: vllm.json), the most deployed
    open serving engine; TensorRT for INT8 or FP8 inference of any other model on an NVIDIA GPU
    (`gemm`: the dtype its GEMMs run at; QUANTIZED_DEFAULT); eager (plain PyTorch) for training, other
    inference, CPUs, and devices vLLM does not run on (a vendor no engine lists: GENERIC_ENGINES)."""
    table = engines()
    if family == "decoder" and mode != "training" and "vllm" in table and runs_on(table["vllm"], device_kind, vendor):
        return "vllm"
    if (family != "decoder" and mode != "training" and device_kind == "gpu" and gemm in ("int8", "fp8")
            and (vendor or "").lower() == "nvidia" and QUANTIZED_DEFAULT in table
            and family in table[QUANTIZED_DEFAULT].families):
        return QUANTIZED_DEFAULT
    return "eager"


def check_engine(engine: Engine, family: str, mode: str, device_kind: str | None = None,
                 vendor: str | None = None) -> None:
    """Raise ConfigError (one line, what would be valid) when `engine` cannot run this combination."""
    top_mode = "training" if mode == "training" else "inference"
    if top_mode not in engine.modes:
        valid = sorted(e.name for e in engines().values() if top_mode in e.modes)
        raise ConfigError(f"engine '{engine.name}' does not run {top_mode}; engines that do: {', '.join(valid)}")
    if family not in engine.families:
        valid = sorted(e.name for e in engines().values() if family in e.families and top_mode in e.modes)
        raise ConfigError(f"engine '{engine.name}' does not run {family} models; engines that do: {', '.join(valid)}")
    if device_kind is not None and device_kind not in engine.device_kinds:
        raise ConfigError(f"engine '{engine.name}' does not run on {device_kind} devices "
                          f"(it runs on: {', '.join(engine.device_kinds)})")
    if vendor is not None and not runs_on(engine, None, vendor):
        generic = "" if known_vendor(vendor) else \
            f"; a vendor no engine file lists runs plain PyTorch: {', '.join(GENERIC_ENGINES)}"
        raise ConfigError(f"engine '{engine.name}' does not run on {vendor} devices "
                          f"(it runs on: {', '.join(engine.vendors)}){generic}")
