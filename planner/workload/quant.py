"""Quantization recipes: weights, activations and the KV cache, each at its own dtype.

A workload's `dtype` string names a precision (one canonical string flows through every `dtype: str`
parameter: Workload, DeviceGraph, Request, the predictors):
    "bf16"                              a plain dtype (dtypes.py): every floating-point tensor at it,
                                        no scales, no quantize kernels (the behaviour before recipes)
    "w4a16", "nvfp4", "mxfp8"           a named recipe (hardware_specs/quant/recipes.json)
    "quant=fp8", "quant=int8"           a recipe whose name is also a dtype's (bare "fp8" stays the
                                        plain dtype)
    "weights=int4,kv=fp8"               an explicit composition on the bf16 base
    "w4a16,kv=fp8", "fp16,weights=int4" a base (recipe or plain dtype) with parts overridden
    "quant=int8,compute=fp16"           a recipe whose 16-bit parts run at another 16-bit dtype (a GPU
                                        without BF16: `on_device`)
`precision(text)` parses any of them; `compose(dtype, quant, weights, activations, kv_cache)` builds
one from the command-line flags; both return the canonical form (base first, then the overrides that
differ from the base, in the order weights, activations, kv; a bf16 base is implied).

What a precision sets (Precision):
- weights: the `weight` of every nn.Linear except the modules `unquantized_modules` names (lm_head,
  classifier heads, MoE routers: recipes.json, with sources); other parameters (embeddings, norms,
  biases, convolutions) stay at the compute dtype.
- activations: the dtype a quantized GEMM reads its activation operand in. When it is narrower than
  the compute dtype the capture inserts a `quant.quantize` kernel before each such GEMM (read at the
  compute width, write at this width plus scales; once per distinct input). Every other activation,
  the residual stream, norms, softmax and gradients stay at the compute dtype.
- kv_cache: the dtype of the KV-cache tensors; attention reads them at it.
- compute: the 16-bit (or 32-bit) dtype of everything not quantized; the capture dtype.
- gemm, attention: the dtype whose peak a quantized GEMM and an attention kernel on a quantized KV
  cache use (planner/predict/roofline.py); other matrix ops run at the compute dtype.

Scale factors (Scales) are counted as bits per element of the tensor they scale, exactly for its
shape: a block of b elements with an s-bit scale (and a z-bit zero point) adds ceil(K/b)·(s+z)/K bits
per element of a row of K; per-channel (weights) and per-token (activations) scales add (s+z)/K, one
per row of the last dimension K (an nn.Linear weight is [out, in]: one fp32 scale per output channel
is 32/in bits per element). A per-tensor scale is one fp32 number per tensor (4 bytes beside
megabytes) and is not counted.

`compute=` (last in the canonical form) moves every part at the base's compute dtype to another 16- or 32-bit
dtype: the unquantized tensors, a 16-bit KV cache and the kernels that ran at it. A recipe written for BF16
runs in FP16 on a GPU without BF16 (T4, V100), as TensorRT runs INT8 networks there (builder flags kINT8 +
kFP16: FP16 where a layer has no INT8 kernel) and as vLLM asks for ("Bfloat16 is only supported on GPUs with
compute capability of at least 8.0 ... You can use float16 instead ... --dtype=half", vllm/config.py
_check_valid_dtype): `on_device` does it and says so.

Overrides (`--weights`, `--activations`, `--kv-cache` on a base): a part given the base's own dtype
keeps the base's scales; another dtype gets the default scales of recipes.json's "defaults" for that
part (a dtype with no default there cannot be given to it). An activation dtype of 16 bits or more
becomes the compute dtype. When the weights or activations change, GEMMs run at the activation dtype
if it is narrower than the compute dtype (W8A8), else at the compute dtype (weight-only); when the KV
cache or the compute dtype change, attention runs at the compute dtype (a dequantizing kernel).
"""

from __future__ import annotations

import fnmatch
import math
import os
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import torch

from planner.errors import ConfigError, UnknownNameError, shorten
from planner.files import parse_json, read_text, shipped_specs
from planner.workload.dtypes import DTYPES, get_dtype

ROOT = shipped_specs()
PARTS = ("weights", "activations", "kv_cache")
KEYS = {"weights": "weights", "activations": "activations", "kv": "kv_cache", "kv_cache": "kv_cache",
        "kv-cache": "kv_cache"}
"""Keys of an explicit composition and the part each sets."""
ELEMENT_BITS: dict[str, int] = {**{name: d.bits for name, d in DTYPES.items()}, "int4": 4}
"""Storage width of one element of every dtype a part can have."""
SCALE_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "e4m3": 8, "e8m0": 8, "int8": 8, "int4": 4}
"""Width of one scale factor or zero point, by its format (E4M3 and E8M0 are the FP8 scale formats)."""
GRANULARITIES = ("none", "tensor", "channel", "token", "block")
UNQUANTIZED = ("bf16", "fp16", "fp32")
"""Dtypes any part can take without scales (tf32 is fp32 storage with a GEMM mode: a --dtype only)."""
MAX_SPEC_CHARS = 200


@dataclass(frozen=True, slots=True)
class Scales:
    """How a quantized tensor stores its scale factors."""

    granularity: str = "none"
    """"none" (not quantized), "tensor" (one scale, not counted), "channel" or "token" (one per row of
    the last dimension), or "block" (one per `block` consecutive elements of the last dimension)."""
    block: int = 0
    scale_bits: int = 0
    zero_bits: int = 0
    """Width of a zero point (asymmetric integer formats such as AWQ's), 0 for none."""
    dynamic: bool = False
    """Activations: the scale is computed from the data at run time (an amax per scale)."""

    def overhead_bits(self, k: int) -> float:
        """Scale (and zero-point) bits per element of a tensor whose last dimension has `k` elements."""
        per_scale = self.scale_bits + self.zero_bits
        if self.granularity in ("channel", "token"):
            return per_scale / k if k else 0.0
        if self.granularity == "block":
            return math.ceil(k / self.block) * per_scale / k if k else 0.0
        return 0.0


NO_SCALES = Scales()


@dataclass(frozen=True, slots=True)
class Precision:
    """The dtypes of one workload: weights, activations and KV cache, what GEMMs and attention run
    at, and the scale factors of each part."""

    name: str
    """Canonical string (see the module docstring)."""
    weights: str
    activations: str
    kv_cache: str
    compute: str
    """Dtype of every tensor not quantized, and the capture dtype."""
    gemm: str
    """Dtype whose peak a GEMM on quantized weights or activations runs at."""
    attention: str
    """Dtype whose peak attention on a quantized KV cache runs at."""
    weight_scales: Scales = NO_SCALES
    activation_scales: Scales = NO_SCALES
    kv_scales: Scales = NO_SCALES
    recipe: str | None = None
    """The named recipe it starts from, if any."""
    plain: bool = False
    """A plain dtype: every float at `compute`, no scales (results as before recipes existed)."""
    modules: tuple[str, ...] = ()
    """fnmatch patterns of module names: when set, only the Linear weights of matching modules are
    quantized (gpt-oss's native checkpoint: MXFP4 experts, 16-bit attention)."""
    convolutions: bool = False
    """Convolution weights and inputs are quantized too (TensorRT's INT8 and FP8: per-channel weights, a static
    per-tensor input scale); False: only Linear layers (the LLM recipes)."""

    @property
    def bits(self) -> int:
        """Width of the compute dtype (what a plain dtype's every float is counted at)."""
        return ELEMENT_BITS[self.compute]

    @property
    def capture(self) -> torch.dtype:
        """The torch dtype the graph is captured in."""
        return DTYPES[self.compute].capture

    def weight_bits(self, k: int) -> float:
        """Bits per element of a quantized weight whose last (input) dimension has `k` elements."""
        return _bits(self.weights, self.weight_scales, k)

    def activation_bits(self, k: int) -> float:
        """Bits per element of a quantized GEMM input whose last dimension has `k` elements."""
        return _bits(self.activations, self.activation_scales, k)

    def kv_bits(self, k: int) -> float:
        """Bits per element of the KV cache whose last dimension (head_dim) has `k` elements."""
        return _bits(self.kv_cache, self.kv_scales, k)

    @property
    def quantizes_weights(self) -> bool:
        return self.weights != self.compute or self.weight_scales.granularity != "none"

    @property
    def quantizes_activations(self) -> bool:
        """GEMM inputs are stored narrower than the compute dtype: a quantize kernel feeds each GEMM."""
        return ELEMENT_BITS[self.activations] < self.bits

    @property
    def quantizes_kv(self) -> bool:
        return self.kv_cache != self.compute or self.kv_scales.granularity != "none"

    def describe(self) -> str:
        """One line for people: "w4a16: weights int4 (+scales), activations bf16, KV bf16"."""
        if self.plain:
            return self.name
        label = self.recipe if self.recipe and self.name in (self.recipe, f"quant={self.recipe}") else self.name

        def part(dtype: str, scales: Scales) -> str:
            return dtype + (" (+scales)" if scales.granularity != "none" else "")

        return (f"{label}: weights {part(self.weights, self.weight_scales)}, activations "
                f"{part(self.activations, self.activation_scales)}, KV {part(self.kv_cache, self.kv_scales)}")


def _bits(dtype: str, scales: Scales, k: int) -> float:
    overhead = scales.overhead_bits(k)
    return ELEMENT_BITS[dtype] + overhead if overhead else ELEMENT_BITS[dtype]


# ---------------------------------------------------------------- recipes.json


@dataclass(frozen=True, slots=True)
class Recipes:
    """Everything in recipes.json, checked."""

    recipes: dict[str, Precision]
    defaults: dict[str, dict[str, Scales]]
    """part -> dtype -> the scales an override of that part to that dtype gets."""
    unquantized_modules: tuple[str, ...]
    """fnmatch patterns of module names whose Linear weights no recipe quantizes."""
    path: str


def recipes_path() -> Path:
    """recipes.json: under $PLANNER_HARDWARE_SPECS/quant when that is set, else the repository's."""
    from planner.files import check_specs_env

    check_specs_env("quant/recipes.json")
    root = os.environ.get("PLANNER_HARDWARE_SPECS")
    return (Path(root) if root else ROOT) / "quant" / "recipes.json"


def load_recipes() -> Recipes:
    """The recipes of recipes_path() (cached per path and version of the file); ConfigError naming the
    file and key when bad."""
    path = recipes_path()
    try:
        stat = path.stat()
        version = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        version = (0, 0)  # read_text says what is wrong
    return _load(str(path), version)


@lru_cache(maxsize=4)
def _load(path: str, version: tuple[int, int]) -> Recipes:
    where = f"quantization recipes '{path}'"
    raw = parse_json(read_text(path, "quantization recipes"), where)
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a JSON object expected")
    patterns = _section(raw, "unquantized_modules", where).get("patterns")
    if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
        raise ConfigError(f"{where}: unquantized_modules.patterns must be a list of module-name patterns")
    defaults: dict[str, dict[str, Scales]] = {}
    section = _section(raw, "defaults", where)
    for part in PARTS:
        entries = _section(section, part, where, "defaults.")
        defaults[part] = {}
        for dtype, entry in entries.items():
            at = f"defaults.{part}.{dtype}"
            if dtype not in ELEMENT_BITS or ELEMENT_BITS[dtype] >= 16:
                raise ConfigError(f"{where}: {at}: '{shorten(dtype)}' is not a quantized dtype; valid: "
                                  f"{', '.join(d for d in ELEMENT_BITS if ELEMENT_BITS[d] < 16)}")
            if not isinstance(entry, dict):
                raise ConfigError(f"{where}: {at} must be an object")
            _source(entry, where, at)
            defaults[part][dtype] = _scales(entry.get("scales"), where, at + ".scales")
    recipes = {}
    for name, entry in _section(raw, "recipes", where).items():
        at = f"recipes.{name}"
        if not name or name != name.strip().lower() or any(ch in name for ch in ",=") or len(name) > 40:
            raise ConfigError(f"{where}: {at}: a recipe name is lowercase, at most 40 characters, without ',' or '='")
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: {at} must be an object")
        _source(entry, where, at)
        parts = {}
        for part in PARTS:
            spec = entry.get(part)
            if not isinstance(spec, dict):
                raise ConfigError(f"{where}: {at}.{part} must be an object with dtype and scales")
            dtype = _dtype(spec.get("dtype"), ELEMENT_BITS, where, f"{at}.{part}.dtype")
            parts[part] = (dtype, _scales(spec.get("scales"), where, f"{at}.{part}.scales"))
        compute, gemm, attention = (_dtype(entry.get(k), DTYPES, where, f"{at}.{k}") for k in
                                    ("compute", "gemm", "attention"))
        if ELEMENT_BITS[compute] < 16:
            raise ConfigError(f"{where}: {at}.compute must be a 16- or 32-bit dtype, got '{compute}'")
        only = entry.get("quantized_modules", [])
        if not isinstance(only, list) or not all(isinstance(m, str) and 0 < len(m) <= 200 for m in only) or len(only) > 64:
            raise ConfigError(f"{where}: {at}.quantized_modules must be a list of module-name patterns")
        conv = entry.get("convolutions", {"value": False, "source": "-"})
        if not isinstance(conv, dict) or not isinstance(conv.get("value"), bool):
            raise ConfigError(f"{where}: {at}.convolutions must be {{value: true or false, source}}")
        _source(conv, where, f"{at}.convolutions")
        recipes[name] = Precision(_token(name), parts["weights"][0], parts["activations"][0], parts["kv_cache"][0],
                                  compute, gemm, attention, parts["weights"][1], parts["activations"][1],
                                  parts["kv_cache"][1], recipe=name, modules=tuple(only), convolutions=conv["value"])
    if not recipes:
        raise ConfigError(f"{where}: no recipes")
    return Recipes(recipes, defaults, tuple(patterns), path)


def _section(raw: dict, key: str, where: str, at: str = "") -> dict:
    value = raw.get(key)
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {at}{key} must be an object")
    return {k: v for k, v in value.items() if k != "about"}


def _source(entry: dict, where: str, at: str) -> None:
    if not isinstance(entry.get("source"), str) or not entry["source"].strip():
        raise ConfigError(f"{where}: {at} has no source")


def _dtype(value, valid, where: str, at: str) -> str:
    if not isinstance(value, str) or value not in valid:
        raise ConfigError(f"{where}: {at}: '{shorten(str(value))}' is not a dtype; valid: {', '.join(valid)}")
    return value


def _scales(raw, where: str, at: str) -> Scales:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: {at} must be an object")
    unknown = sorted(set(raw) - {"granularity", "block", "scale", "zero_point", "dynamic"})
    if unknown:
        raise ConfigError(f"{where}: {at}: unknown key(s) {', '.join(map(shorten, unknown))}")
    granularity = raw.get("granularity")
    if granularity not in GRANULARITIES:
        raise ConfigError(f"{where}: {at}.granularity must be one of {', '.join(GRANULARITIES)}")
    if granularity == "none":
        return NO_SCALES
    block = raw.get("block", 0)
    if granularity == "block" and (isinstance(block, bool) or not isinstance(block, int) or not 1 <= block <= 2**20):
        raise ConfigError(f"{where}: {at}.block must be a whole number of elements from 1 to 1,048,576")
    scale, zero = raw.get("scale"), raw.get("zero_point")
    if scale not in SCALE_BITS or (zero is not None and zero not in SCALE_BITS):
        raise ConfigError(f"{where}: {at}: scale and zero_point must be one of {', '.join(SCALE_BITS)}")
    if not isinstance(raw.get("dynamic", False), bool):
        raise ConfigError(f"{where}: {at}.dynamic must be true or false")
    return Scales(granularity, block if granularity == "block" else 0, SCALE_BITS[scale],
                  SCALE_BITS[zero] if zero else 0, raw.get("dynamic", False))


def recipe_names() -> tuple[str, ...]:
    """Names of the recipes in recipes.json."""
    return tuple(load_recipes().recipes)


def _token(recipe: str) -> str:
    """How a recipe is written as a base: its name, or quant=NAME where the name is also a dtype's."""
    return f"quant={recipe}" if recipe in DTYPES else recipe


def _bare(item: str) -> tuple[str, str]:
    """("dtype" or "quant", name) of a base written without a key. Precedence: a dtype's own name
    ("fp8" is the plain dtype), then a recipe ("nvfp4" is the recipe), then a dtype alias ("bfloat16")."""
    key = item.strip().lower()
    if key in DTYPES:
        return "dtype", key
    try:
        if key in load_recipes().recipes:
            return "quant", key
    except ConfigError:
        get_dtype(key)  # an alias needs no recipes file; anything else is unknown
        return "dtype", key
    return "dtype", key


# ---------------------------------------------------------------- parsing and composing


def _plain(dtype: str) -> Precision:
    d = get_dtype(dtype)
    return Precision(d.name, d.name, d.name, d.name, d.name, d.name, d.name, plain=True)


def _split(text: str) -> tuple[str | None, dict[str, str]]:
    """(base, {part: dtype}) of a precision string; the base is a dtype or recipe name (None: bf16)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"a dtype or quantization recipe must be a non-empty string, got {shorten(repr(text))}")
    if len(text) > MAX_SPEC_CHARS:
        raise ConfigError(f"dtype '{shorten(text, 60)}' is longer than {MAX_SPEC_CHARS} characters")
    base, parts = None, {}
    for item in text.split(","):
        item = item.strip().lower()
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq:
            key, value = _bare(item)
        if key in ("dtype", "quant"):
            if base is not None:
                raise ConfigError(f"'{shorten(text, 80)}' names two bases ('{base[1]}' and '{value}'): give one "
                                  "dtype or recipe, then weights=, activations=, kv= overrides")
            base = (key, value)
        elif key == "compute":
            if "compute" in parts:
                raise ConfigError(f"'{shorten(text, 80)}' sets compute twice")
            parts["compute"] = value
        elif key in KEYS:
            if KEYS[key] in parts:
                raise ConfigError(f"'{shorten(text, 80)}' sets {KEYS[key]} twice")
            parts[KEYS[key]] = value
        else:
            raise ConfigError(f"'{shorten(item, 40)}' in dtype '{shorten(text, 80)}': expected a dtype, a recipe, "
                              "or weights=, activations=, kv= with a dtype")
    return base, parts


def _base(base: tuple[str, str] | None) -> Precision:
    if base is None:
        return _plain("bf16")
    kind, name = base
    if kind == "quant":
        recipes = load_recipes().recipes
        if name not in recipes:
            raise UnknownNameError("quantization recipe", name, recipes)
        return recipes[name]
    try:
        return _plain(name)
    except UnknownNameError:
        raise UnknownNameError("dtype or quantization recipe", name, (*DTYPES, *recipe_names())) from None


def part_dtype(part: str, dtype: str) -> str:
    """`dtype` as a valid dtype of `part` ("weights", "activations", "kv_cache"; aliases resolved);
    UnknownNameError listing the valid ones."""
    valid = (*UNQUANTIZED, *load_recipes().defaults[part])
    name = dtype.strip().lower()
    if name not in ELEMENT_BITS:
        try:
            name = get_dtype(name).name
        except UnknownNameError:
            pass
    if name not in valid:
        raise UnknownNameError(f"{part.replace('_', '-')} dtype", dtype, valid)
    return name


def _override(base: Precision, parts: dict[str, str]) -> Precision:
    """`base` with the parts in `parts` set (rules in the module docstring)."""
    defaults = load_recipes().defaults
    values = {"weights": (base.weights, base.weight_scales), "activations": (base.activations, base.activation_scales),
              "kv_cache": (base.kv_cache, base.kv_scales)}
    changed = set()
    for part, dtype in parts.items():
        dtype = part_dtype(part, dtype)
        if dtype == values[part][0]:
            continue  # the base's own dtype keeps the base's scales
        values[part] = (dtype, defaults[part].get(dtype, NO_SCALES))
        changed.add(part)
    if not changed:
        return base
    activations = values["activations"][0]
    compute = activations if ELEMENT_BITS[activations] >= 16 else base.compute
    gemm, attention = base.gemm, base.attention
    if changed & {"weights", "activations"} or compute != base.compute:
        gemm = activations if ELEMENT_BITS[activations] < ELEMENT_BITS[compute] else compute
    if "kv_cache" in changed or compute != base.compute:
        attention = compute
    token = base.name if base.plain else _token(base.recipe) if base.recipe else base.name
    overrides = [f"{'kv' if p == 'kv_cache' else p}={values[p][0]}" for p in PARTS if p in changed]
    name = ",".join(([] if token == "bf16" else [token]) + overrides)
    return replace(base, name=name, weights=values["weights"][0], activations=activations,
                   kv_cache=values["kv_cache"][0], compute=compute, gemm=gemm, attention=attention,
                   weight_scales=values["weights"][1], activation_scales=values["activations"][1],
                   kv_scales=values["kv_cache"][1], plain=False)


@lru_cache(maxsize=256)
def precision(name: str) -> Precision:
    """The Precision a dtype string names: a plain dtype ("bf16"), a recipe ("w4a16", "quant=fp8") or a
    composition ("weights=int4,kv=fp8", "nvfp4,kv=fp4"). Raise UnknownNameError or ConfigError (one
    line, listing what is valid) otherwise."""
    if isinstance(name, str) and name.strip().lower() in DTYPES:
        return _plain(name)  # the common case reads no file
    base, parts = _split(name)
    compute = parts.pop("compute", None)
    p = _override(_base(base), parts)
    return p if compute is None else _recompute(p, compute)


def _recompute(p: Precision, compute: str) -> Precision:
    """`p` with `compute` in place of its compute dtype wherever it is used (the `compute=` key)."""
    name = compute.strip().lower()
    if name not in UNQUANTIZED:
        raise UnknownNameError("compute dtype", compute, UNQUANTIZED)
    if name == p.compute:
        return p
    if p.plain:
        raise ConfigError(f"compute={name} re-types a quantization recipe; for a plain dtype give --dtype {name}")
    swap = lambda d: name if d == p.compute else d  # noqa: E731
    return replace(p, name=f"{p.name},compute={name}", weights=swap(p.weights), activations=swap(p.activations),
                   kv_cache=swap(p.kv_cache), compute=name, gemm=swap(p.gemm), attention=swap(p.attention))


def on_device(name: str, peaks, device: str = "this device") -> tuple[str, str | None]:
    """(the precision string a device runs `name` at, a note or None). `peaks`: the dtypes the device has a
    peak for. A quantization recipe whose 16-bit parts are BF16 runs them in FP16 on a device without BF16
    (the module docstring: TensorRT and vLLM both do); a recipe whose GEMMs then run at a dtype the device has
    no peak for is refused (UnsupportedError naming the recipes it runs); anything else is returned as it is
    (a plain `--dtype bf16` on such a device stays an error: the user named the dtype)."""
    from planner.errors import UnsupportedError

    def runs(p: Precision) -> Precision:
        if p.compute == "bf16" and "bf16" not in peaks and "fp16" in peaks:
            return _recompute(p, "fp16")
        return p

    p = precision(name)
    if p.plain:
        return name, None
    q = runs(p)
    if q.gemm not in peaks or q.compute not in peaks:
        usable = [r for r, recipe in load_recipes().recipes.items()
                  if runs(recipe).gemm in peaks and runs(recipe).compute in peaks]
        missing = q.gemm if q.gemm not in peaks else q.compute
        raise UnsupportedError(f"'{device}' runs no {missing} kernels (no {missing} peak in the catalog), so not "
                               f"recipe '{p.name}'; recipes it runs: {', '.join(usable) or 'none'}; dtypes with a "
                               f"peak: {', '.join(peaks) or 'none'}")
    if q is p:
        return name, None
    return q.name, (f"no BF16 on this device: the recipe's 16-bit parts run in FP16, as TensorRT (INT8 with FP16 "
                    f"fallback) and vLLM (--dtype half) run them on GPUs before Ampere: {q.name}")


def compose(dtype: str | None = "bf16", quant: str | None = None, weights: str | None = None,
            activations: str | None = None, kv_cache: str | None = None) -> str:
    """The canonical precision string of the command-line flags: `quant` names a recipe instead of
    `dtype` (a `dtype` other than bf16 with it is an error); `weights`, `activations` and `kv_cache`
    override single parts of the base. Raise ConfigError or UnknownNameError (one line)."""
    if quant is not None:
        if not isinstance(quant, str) or not quant.strip():
            raise ConfigError("--quant needs a recipe name; valid: " + ", ".join(recipe_names()))
        if dtype is not None and precision(dtype).name != "bf16":
            raise ConfigError(f"quantization recipe '{shorten(quant, 40)}' and dtype '{shorten(str(dtype), 40)}' both "
                              "set every dtype: give the recipe (--quant) or a dtype other than bf16 (--dtype), not "
                              "both; --weights, --activations and --kv-cache override single parts of either")
        key = quant.strip().lower()
        recipes = load_recipes().recipes
        if key not in recipes:
            raise UnknownNameError("quantization recipe", quant, recipes)
        base, parts = ("quant", key), {}
    else:
        base, parts = _split(dtype if dtype is not None else "bf16")
    compute = parts.pop("compute", None)
    for part, value in (("weights", weights), ("activations", activations), ("kv_cache", kv_cache)):
        if value is not None:
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"--{part.replace('_', '-')} needs a dtype")
            parts[part] = value
    p = _override(_base(base), parts)
    return (p if compute is None else _recompute(p, compute)).name


def describe(name: str) -> str:
    """The one-line description of a precision string (the string itself for a plain dtype)."""
    return precision(name).describe()


# ---------------------------------------------------------------- which weights, and their bytes


def quantized_weights(module: torch.nn.Module, p: Precision) -> tuple[torch.nn.Parameter, ...]:
    """The parameters stored at the weight dtype under `p`: the `weight` of every nn.Linear (and of every
    convolution where `p.convolutions`) whose name no `unquantized_modules` pattern matches (none for a
    precision that leaves weights alone)."""
    if not p.quantizes_weights:
        return ()
    patterns = load_recipes().unquantized_modules
    # transposed convolutions ([C_in, C_out/g, ...] weights) are not among TensorRT's quantized conv layers here
    kinds = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d) if p.convolutions else (torch.nn.Linear,)
    found, seen = [], set()
    for name, sub in module.named_modules():
        if (isinstance(sub, kinds) and id(sub.weight) not in seen
                and not any(fnmatch.fnmatchcase(name, pat) for pat in patterns)
                and (not p.modules or any(fnmatch.fnmatchcase(name, pat) for pat in p.modules))):
            seen.add(id(sub.weight))
            found.append(sub.weight)
    return tuple(found)


def channel_elements(weight: torch.Tensor) -> int:
    """Elements one per-channel weight scale covers: a Linear row [in], a convolution's [C/g, R, S]."""
    return int(weight.shape[-1]) if weight.dim() <= 2 else int(weight[0].numel())


@lru_cache(maxsize=256)
def parameter_bits(model, config, folded: bool, name: str) -> tuple[float, float]:
    """(mean bits per parameter of one repeated layer, mean bits per parameter outside the layers) of
    `model` built with `config` (one layer when `folded`, as planner/workload/device_graph.py captures
    it) under precision `name`: quantized Linear weights at the weight width with their scales, every
    other float parameter at the compute width. Cached: it builds the module on the meta device."""
    p = precision(name)
    if folded:  # one layer of each kind where the layers differ (DeepSeek-V3's dense prefix and MoE layers)
        kinds = tuple(dict.fromkeys(getattr(config, "kinds", ())))
        model = replace(model, config=replace(config, num_layers=max(1, len(kinds)), **({"kinds": kinds} if kinds else {})))
    elif config is not None:
        model = replace(model, config=config)
    with torch.device("meta"):
        module = model.build()
    quantized = {id(w) for w in quantized_weights(module, p)}
    sums = {True: [0.0, 0], False: [0.0, 0]}
    seen: set[int] = set()
    for pname, param in module.named_parameters():
        if id(param) in seen:
            continue
        seen.add(id(param))
        if id(param) in quantized:
            bits = p.weight_bits(channel_elements(param))
        elif param.is_floating_point():
            bits = p.bits
        else:
            bits = param.element_size() * 8
        entry = sums[folded and pname.split(".")[0] == "layers"]
        entry[0] += bits * param.numel()
        entry[1] += param.numel()
    return tuple(s / n if n else float(p.bits) for s, n in (sums[True], sums[False]))
