"""Which calibration profile an engine's prediction on a device uses, and the efficiency model it gives.

A device folder under hardware_specs/calibration/ may hold one profile per kernel library
(hardware_specs/calibration/README.md). An engine names the libraries it runs (its own) and those whose
kernel times may stand in (others). `efficiency_for` takes, in order: the device's profile of an own
library (tier measured or published), a neighbour's of the same vendor and generation (transferred),
the device's profile of another library (cross-library; the engine's fusions, dispatch and graphs still
apply, the band widened as for a transfer), else the datasheet. `ProfileEfficiency` maps each op of a
graph to the profile's curve that timed its kind, dtype, layout and alignment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from planner.hardware.catalog import Device
from planner.hardware.efficiency import Defaults, KindDefaults, gemm_shape, wave_efficiency
from planner.hardware.profile import Profile, ProfileModel, _log2, _wave_shape, profile_device
from planner.hardware.profile_check import own_band, recorded_band, transfer_error
from planner.memo import IdentityMemo
from planner.workload.capture import OpRecord, TensorMeta
from planner.workload.counting import classify, read_tensors, written_tensors

_TRANSCENDENTAL = frozenset({"aten.gelu", "aten.silu", "aten.tanh", "aten.exp", "aten.sigmoid", "aten.erf",
                             "aten.pow", "aten.rsqrt", "aten.sqrt", "aten.log", "aten.sin", "aten.cos",
                             "aten.gelu_backward", "aten.silu_backward", "aten.tanh_backward",
                             "aten.sigmoid_backward"})
MEMORY_KIND_OF_CATEGORY = {"elementwise": "add", "norm": "layer_norm", "softmax": "softmax", "reduction": "sum",
                           "copy": "copy", "fill": "copy", "embedding": "copy", "loss": "copy", "sort": "add",
                           "pool": "add", "optimizer": "add"}


def alignment_bytes(rec: OpRecord) -> int:
    """The largest of 16, 8, 4, 2 bytes that divides the inner (contiguous) dimension of every matrix
    operand and the output of a GEMM: cuBLAS's Hopper kernels need 16-byte rows; others run older
    kernels (measured: benchmarks/data/measured/*/probe/gpu_grid.json, cutlass sm80 at 4 and 8 bytes,
    sm75 align1 at 2 bytes)."""
    align = 16
    for t in [rec.arg(name) for name in ("self", "mat1", "mat2", "input", "other")] + list(rec.outputs):
        if t is None or not hasattr(t, "shape") or len(t.shape) < 2:
            continue
        inner = t.shape[-2] if t.col_major else t.shape[-1]
        row_bytes = int(inner) * max(int(t.bits) // 8, 1)
        while align > 2 and row_bytes % align:
            align //= 2
    return align


def _op_key(rec: OpRecord, category: str, dtype: str, models: dict) -> tuple[str, tuple[float, ...], object] | None:
    """The model key, features and wave shape for one op of a graph."""
    special = _training_kernel_key(rec, category, models) or _conv_backward_key(rec, category, models)
    if special is not None:
        return special
    if category in ("matmul", "conv", "attention"):
        shape = gemm_shape(rec, category)
        if shape is None:
            return None
        b, m, n, k = shape
        if category == "matmul":
            if b > 1 and "bmm" in models:
                return "bmm", (_log2(b), _log2(m), _log2(n), _log2(k)), shape
            # an nn.Linear weight reaches mm stored transposed ("nt"); two row-major operands are "nn"
            second = rec.arg("mat2") or rec.arg("other")
            family = "gemm" if (second is None or second.col_major or "gemm_nn:fp32" not in models) else "gemm_nn"
            key = f"{family}:{dtype}" if f"{family}:{dtype}" in models else f"{family}:fp32"
            # a grouped expert GEMM (lowering.group_experts) pads each expert's rows to tiles of their own
            wave = shape if rec.op.startswith("fused.experts:") else (1, m * b, n, k)
            if b > 1 and not rec.op.startswith("fused.experts:"):
                # b products of their own [k, n] operands (a batched GEMM without a curve of its own) stream b of
                # them: read as one GEMM of m rows against their concatenation [k, b n], the same FLOP and the
                # same [k, n] bytes (continuous in m: no switch as a batch grows). Read as b m rows against one
                # [k, n] instead, a decode-time batched GEMV (DeepSeek's latent attention: [16, 1, 128] x
                # [16, 128, 512]) took the efficiency of a GEMM whose bytes were 1/16 of its own: 69 us for
                # 599 kB on a B200. (A grouped expert GEMM keeps its lookup: lowering._batched, waves per expert.)
                return key, (_log2(m), _log2(b * n), _log2(k)), (1, m, b * n, k)
            return key, (_log2(m * b), _log2(n), _log2(k)), wave
        if category == "conv":
            w = rec.arg("weight")
            ksize = math.prod(w.shape[2:]) if w is not None and len(w.shape) > 2 else 1
            return "conv", (_log2(m), _log2(n), _log2(k), _log2(ksize)), shape
        q, key_t = rec.arg("query"), rec.arg("key")
        causal = bool(rec.arg("is_causal", False))
        group = q.shape[-3] / key_t.shape[-3] if len(q.shape) >= 3 and len(key_t.shape) >= 3 else 1
        return "attention", (_log2(b), _log2(m), _log2(key_t.shape[-2]), _log2(q.shape[-1]), float(causal),
                             _log2(max(group, 1))), (b, m, key_t.shape[-2], q.shape[-1])
    kind = MEMORY_KIND_OF_CATEGORY.get(category)
    if kind is None:
        return None
    if category == "elementwise" and rec.packet in _TRANSCENDENTAL:
        kind = "gelu"
    if category == "norm" and "batch_norm" in rec.packet:
        x = rec.arg("input") or rec.arg("self")
        if "bn" in models and x is not None and len(x.shape) >= 3:
            # batch norm's rate depends on the plane size as well as the bytes (few large channels of
            # 7x7 run at a fifth of the rate of 112x112 ones: benchmarks/data/measured/*/probe/gpu_bn.json)
            nbytes = sum(t.bytes for t in rec.tensors()) + sum(t.bytes for t in rec.outputs)
            return "bn", (_log2(max(nbytes, 1.0)), _log2(math.prod(x.shape[2:]))), None
        kind = "batch_norm" if "mem:batch_norm" in models else "add"
    if category == "pool" and "max_pool" in rec.packet and "mem:maxpool" in models:
        kind = "maxpool"
    return f"mem:{kind}", None, None


def _training_kernel_key(rec: OpRecord, category: str, models: dict) -> tuple[str, tuple[float, ...], None] | None:
    """The key of an op that runs kernels of its own where the profile timed them: training-mode batch
    norm and its backward ("bn_train", "bn_backward"), depthwise convolutions and their backward ("dw",
    "dw_backward"); None otherwise. Features: log2 bytes (every input and output tensor) and the plane
    size (batch norm) or the filter size and stride (depthwise), as profile._features reads them."""
    if not rec.packet.startswith("aten."):
        return None  # a fused group (torch.compile's Triton kernels): not ATen's kernels these curves timed
    if category == "norm" and "batch_norm" in rec.packet:
        backward = "backward" in rec.packet
        training = bool(rec.arg("train", True)) if backward else bool(
            rec.arg("training", "no_training" not in rec.packet and "no_update" not in rec.packet))
        key = "bn_backward" if backward else "bn_train"
        x = rec.arg("input") or rec.arg("self")
        if not training or key not in models or x is None or len(x.shape) < 3:
            return None
        return key, (_log2(max(_bytes(rec), 1.0)), _log2(math.prod(x.shape[2:]))), None
    if category == "conv":
        w, x = rec.arg("weight"), rec.arg("input")
        groups = rec.arg("groups", 1)
        key = "dw_backward" if rec.packet == "aten.convolution_backward" else "dw"
        if (key not in models or w is None or x is None or len(w.shape) != 4 or not isinstance(groups, int)
                or groups <= 1 or groups != x.shape[1]):
            return None
        stride = rec.arg("stride", (1,))
        stride = stride[0] if isinstance(stride, (tuple, list)) and stride else stride
        return key, (_log2(max(_bytes(rec), 1.0)), _log2(math.prod(w.shape[2:])), float(stride)), None
    return None


def _conv_backward_key(rec: OpRecord, category: str, models: dict) -> tuple[str, tuple[float, ...], tuple] | None:
    """A dense 16-bit convolution's backward where the profile timed it ("conv_backward"): featured, as
    profile._features reads the measurements, by its forward's implicit GEMM (M = N x output pixels,
    N = output channels, K = input channels x filter size) and filter size; None otherwise."""
    if category != "conv" or rec.packet != "aten.convolution_backward" or "conv_backward" not in models:
        return None
    dy, w = rec.arg("grad_output"), rec.arg("weight")
    mask = rec.arg("output_mask", (True, True, True))
    # measured with both gradients; a backward of the weight alone (a network's first convolution, whose
    # input is the data) runs other kernels and stays on the datasheet tier
    if (dy is None or w is None or len(dy.shape) != 4 or len(w.shape) != 4 or rec.arg("groups", 1) != 1
            or _rec_dtype(rec) not in ("bf16", "fp16") or not (mask[0] and mask[1])):
        return None
    m, n, k = dy.shape[0] * dy.shape[2] * dy.shape[3], dy.shape[1], math.prod(w.shape[1:])
    return "conv_backward", (_log2(m), _log2(n), _log2(k), _log2(math.prod(w.shape[2:]))), (1, m, n, k)


def _bytes(rec: OpRecord) -> float:
    return sum(t.bytes for t in rec.tensors()) + sum(t.bytes for t in rec.outputs)


_DTYPE_OF = {("float32", 32): "fp32", ("bfloat16", 16): "bf16", ("float16", 16): "fp16", ("bfloat16", 8): "fp8",
             ("bfloat16", 4): "fp4", ("float8_e4m3fn", 8): "fp8", ("int8", 8): "int8"}


def _rec_dtype(rec: OpRecord) -> str:
    """The logical dtype an op computes in, read from its first floating tensor (storage dtype and
    counted width: fp8 and fp4 are captured as bf16 counted at 8 and 4 bits; scale factors of a
    quantization recipe add a fraction of a bit, which is dropped)."""
    for t in rec.tensors():
        name = _DTYPE_OF.get((t.dtype, int(t.bits)))
        if name:
            return name
    return "fp32"


_DTYPE_ALIASES = {"fp16": "bf16", "bf16": "fp16"}
"""A GEMM dtype the profile lacks, measured at the same tensor-core rate on every GPU of the catalog."""


@dataclass(frozen=True)
class ProfileEfficiency:
    """The EfficiencyModel of a profiled device (tier measured or published) or a neighbour (transferred)."""

    model: ProfileModel
    profile: Profile
    tier: str
    band_fraction: float
    fallback: object
    """Datasheet efficiency for op kinds the profile does not cover."""
    clock_ratio: float = 1.0
    """Profiled device clock / predicted device clock, scaling the fixed per-op cost."""
    categories: frozenset[str] | None = None
    """Op categories this profile times (a cross-library profile: those a measurement shows are the same
    kernels in both libraries); the others fall back. None: every category it covers."""

    @property
    def source(self) -> str:
        """Where the efficiencies come from (one line)."""
        if self.tier == "transferred":
            return f"transferred from {self.profile.device_id}: {self.profile.source}"
        if self.tier == "cross-library":
            return f"kernels of another library ({self.profile.library}): {self.profile.source}"
        return self.profile.source

    @property
    def dispatch(self) -> dict:
        """The profile's measured dispatch block ({} when it has none)."""
        return self.profile.dispatch

    def measures(self, gemm_dtype: str) -> bool:
        """True when the profile measured GEMMs of `gemm_dtype` (or of the dtype at the same tensor-core
        rate): a workload whose GEMMs run at a dtype the profile never timed is predicted from the
        datasheet tier as a whole, not from a profile of some other dtype."""
        return any(f"{family}:{name}" in self.model.models_ for family in ("gemm", "gemm_nn")
                   for name in (gemm_dtype, _DTYPE_ALIASES.get(gemm_dtype)) if name)

    def covers(self, rec: OpRecord, category: str) -> bool:
        """True when the profile itself times this op (False: it falls back to the datasheet tier)."""
        if self.categories is not None and category not in self.categories:
            return False
        return self._key(rec, category) is not None

    def _key(self, rec: OpRecord, category: str) -> tuple[str, tuple[float, ...] | None, object] | None:
        """(model key, features or None for memory-bound, wave shape) of an op the profile covers.
        Memoized by the op and the set of curves the fitted model holds (what _find_key reads of it): the
        key is not the device's, so a part timed on a profiled device, on each neighbour it is transferred
        to and on other profiles of the same curves (H100, H200, L40S) reads it once."""
        return _KEYS.get((rec,), (category, self.model.keys_), lambda: self._find_key(rec, category))

    def _find_key(self, rec: OpRecord, category: str) -> tuple[str, tuple[float, ...] | None, object] | None:
        m = self.model
        found = _op_key(rec, category, "fp32", m.models_)
        if found is None:
            return None
        key, feats, shape = found
        if key.startswith("gemm"):
            family = key.split(":")[0]
            dtype = _rec_dtype(rec)
            for fam, name in ((family, dtype), (family, _DTYPE_ALIASES.get(dtype)), ("gemm", dtype),
                              ("gemm", _DTYPE_ALIASES.get(dtype))):
                # a layout the profile did not time at this dtype takes the nn.Linear layout's curve of
                # the dtype, never another dtype's (an fp32 curve read against the bf16 peak is 10x off)
                if name and f"{fam}:{name}" in m.models_:
                    key = f"{fam}:{name}"
                    break
            align = alignment_bytes(rec)
            if align < 16 and f"{key}@{align}" in m.models_:
                key = f"{key}@{align}"
        if key in ("attention", "conv") and _rec_dtype(rec) == "fp32":
            key = f"{key}:fp32"
        if feats is None and key not in m.models_ and "mem:copy" in m.models_:
            # a published profile holds one memory-bound curve (an elementwise kernel): every
            # memory-bound kind it lacks streams at that curve's rate for its bytes
            key = "mem:copy"
        return (key, feats, shape) if key in m.models_ else None

    def efficiencies(self, rec: OpRecord, category: str, device: Device,
                     nbytes: float | None = None) -> tuple[float, float, float]:
        m = self.model
        if category == "view":
            return 1.0, 1.0, m.view_s_ * self.clock_ratio
        if self.categories is not None and category not in self.categories:
            return self.fallback.efficiencies(rec, category, device, nbytes)
        overhead = m.launch_s_ * self.clock_ratio
        # the curve's η and the op's wave shape are the op's and the fitted model's, not the device's: read
        # once for the profiled device and every neighbour it is transferred to (what predict_eta gives)
        slot = (id(rec), id(m), category, nbytes)
        entry = _ETAS.get(slot)
        if entry is None:
            if len(_ETAS) >= 65_536:
                _ETAS.clear()
            entry = _ETAS[slot] = (self._curve(rec, category, nbytes), rec, m)  # rec and m kept: ids stay theirs
        found = entry[0]
        if found is None:
            return self.fallback.efficiencies(rec, category, device, nbytes)
        eta, wave = found
        if wave is not None and device.kind == "gpu":
            eta *= wave_efficiency(wave, m.kind_defaults, device)
        if category == "conv" and "[NHWC]" in rec.op and self.profile.library in NCHW_CONV_LIBRARIES \
                and device.kind == "gpu" and device.vendor.lower() == "nvidia":
            eta = self._untransformed(rec, eta, device)
        return eta, eta, overhead

    def _untransformed(self, rec: OpRecord, eta: float, device: Device) -> float:
        """η of a channels-last convolution (kernel_rules' "[NHWC]") read off a profile of contiguous ones
        (NCHW_CONV_LIBRARIES): the profile's time for it less the layout transforms cuDNN ran around the
        timed kernel, one read and one write of each operand at NCHW_TRANSFORM_BANDWIDTH_FRACTION of the
        device's bandwidth, the result never above the larger of η and the device kind's conv ceiling
        (hardware_specs/efficiency/defaults.json). Read off the op's own record: the engines that run
        convolutions channels-last do not fuse them (compile)."""
        w, dtype = rec.arg("weight"), _rec_dtype(rec)
        if dtype not in ("bf16", "fp16") or not isinstance(w, TensorMeta) or rec.arg("groups", 1) != 1:
            return eta
        if all(k == 1 for k in w.shape[2:]) and all(s == 1 for s in rec.arg("stride") or (1,)):
            return eta  # a 1x1 stride-1 conv of NCHW tensors runs as a GEMM on them: no transform
        cost = classify(rec, False)[1]
        timed_s = max(cost.flop / device.peak(dtype), cost.bytes / device.mem_bytes_per_s) / eta
        moved_bytes = 2 * sum(t.bytes for t in (*read_tensors(rec), *written_tensors(rec)))
        left_s = timed_s - moved_bytes / (device.mem_bytes_per_s * NCHW_TRANSFORM_BANDWIDTH_FRACTION)
        ceiling = max(eta, self.model.kind_defaults.conv_max_efficiency)
        return ceiling if left_s <= 0 else min(eta * timed_s / left_s, ceiling)

    def _curve(self, rec: OpRecord, category: str, nbytes: float | None) -> tuple[float, tuple | None] | None:
        """(η the curve gives the op, before the wave factor; the op's wave shape or None), or None where the
        profile does not time it (the fallback does)."""
        found = self._key(rec, category)
        if found is None:
            return None
        key, feats, shape = found
        if feats is None:  # memory-bound: features from the bytes the kernel moves
            if nbytes is None:
                nbytes = sum(t.bytes for t in rec.tensors()) + sum(t.bytes for t in rec.outputs)
            feats = (_log2(max(nbytes, 1.0)),)
        eta = self.model.curve_eta(key, feats)
        return None if eta is None else (eta, None if shape is None else _wave_shape(key, shape))


NCHW_TRANSFORM_BANDWIDTH_FRACTION = 0.48
"""Rate of cuDNN's layout transforms, as a fraction of HBM bandwidth, counting one read and one write of each
operand of the conv: in the H100's eager ResNet-50 training trace (batch 32, bf16, cuDNN 9.19;
benchmarks/data/traces/h100_resnet50_train_b32_amp_bf16.json.gz), the 62 conv calls with transforms moved
3.11 GB so counted in 1.92 ms of nchwToNhwc / nhwcToNchw kernels: 1.62 TB/s of 3.35 (forward 1.64, backward
1.61 TB/s). benchmarks/conv_transforms.py reads it off the trace."""
NCHW_CONV_LIBRARIES = ("pytorch-eager",)
"""Libraries whose profiles time 16-bit convolutions of contiguous (NCHW) tensors as cuDNN runs them on an
NVIDIA GPU: a k > 1 or strided conv as an NHWC kernel between nchwToNhwc transforms of its input and weight
and an nhwcToNchw of its output (the H100's eager ResNet-50 training trace, benchmarks/data/traces: 22 of the
forward's 46 us of a 3x3 64-channel 56x56 batch-32 conv are transforms; 1x1 stride-1 convs run as GEMMs
without them)."""

_KEYS = IdentityMemo(65_536)
"""ProfileEfficiency._key by (op record, category, the fitted model's curve keys)."""
_ETAS: dict[tuple, tuple] = {}
"""ProfileEfficiency._curve by the identity of (op record, fitted model), category and bytes of a fused
kernel, with the record and model it was read for (kept alive: their ids stay theirs). IdentityMemo's
semantics in a plain dict: it is read once per op and device, where building IdentityMemo's key and
closure would cost as much as the lookup."""


def _folder_tier(profiles: Mapping[str, Profile], device_id: str) -> str:
    """The tier of a profile, read from the index without parsing it where the index knows it."""
    tier_of = getattr(profiles, "tier_of", None)
    return tier_of(device_id) if tier_of else profiles[device_id].tier


def _catalog_device(device_id: str) -> Device | None:
    from planner.errors import PlannerError
    from planner.hardware.catalog import load_catalog

    try:
        return load_catalog().device(device_id)
    except PlannerError:
        return None


def transfer_key(device: Device) -> tuple[str, str]:
    """(vendor, generation) whose measured neighbours `device` takes transferred profiles and power curves
    from: its own, or for a device the shipped catalog lacks (a user's own) with the figures of a catalog
    device (Device.same_chip: a copy of its row under another id or generation name), that device's."""
    return _TWINS.get((device,), (), lambda: _transfer_key(device))


def _transfer_key(device: Device) -> tuple[str, str]:
    from planner.errors import PlannerError
    from planner.hardware.catalog import load_catalog

    try:
        devices = load_catalog().devices
    except PlannerError:
        return device.vendor, device.generation
    if device.id not in devices:
        for ref in devices.values():
            if ref.same_chip(device):
                return ref.vendor, ref.generation
    return device.vendor, device.generation


_TWINS = IdentityMemo(1024)
"""transfer_key by device."""


def _library_profile(profiles: Mapping[str, Profile], device_id: str, library: str) -> Profile | None:
    """`device_id`'s profile of `library`, or None (a plain dict of profiles holds one per device)."""
    lookup = getattr(profiles, "library", None)
    if lookup is not None:
        return lookup(device_id, library)
    own = profiles.get(device_id) if device_id in profiles else None
    return own if own is not None and own.library == library else None


def _own_profile(profiles: Mapping[str, Profile], device_id: str, libraries: tuple[str, ...] | None) -> Profile | None:
    """The device's profile of the first of `libraries` it has; with None, its default profile."""
    if libraries is None:
        return profiles[device_id] if device_id in profiles else None
    for library in libraries:
        found = _library_profile(profiles, device_id, library)
        if found is not None:
            return found
    return None


ProfileChoice = tuple[tuple[str, ...], tuple[str, ...]] | tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None
"""(own libraries, other libraries[, op categories the other libraries time: () for all]) of an engine
(Engine.libraries); None: the device's default profile and then any other it has (a single op, a caller
with no engine)."""


def efficiency_for(device: Device, defaults: Defaults, profiles: Mapping[str, Profile], fallback,
                   libraries: ProfileChoice = None) -> object:
    """The efficiency model of `device` for an engine that runs the kernel libraries `libraries`:

    1. the device's own profile of one of the engine's libraries (tier measured or published);
    2. a profiled device of the same vendor and generation with one (tier transferred): among
       neighbours the nearest in memory bandwidth; a transfer crosses no architecture; a user's device
       with a catalog device's figures is of that device's vendor and generation (transfer_key), and
       takes that device's profile with its own tier and band (the transfer is the identity);
    3. the device's profile of another library (tier cross-library): kernel times of other kernels,
       the engine's own fusions, dispatch and graphs applied by the caller, the band widened as for
       a transfer; only for the op categories `libraries` names (those a measurement shows are the same
       kernels in both), the rest from `fallback`;
    4. `fallback` (datasheet)."""
    own_libs, other_libs, *scope = libraries if libraries is not None else (None, ())
    categories = frozenset(scope[0]) if scope and scope[0] else None
    kind_defaults = defaults.for_device(device)
    own = _own_profile(profiles, device.id, own_libs)
    if own is None and libraries is None:
        for library in getattr(profiles, "libraries", lambda _: ())(device.id):
            own = _library_profile(profiles, device.id, library)
            break
    if own is not None:
        ref = profile_device(own)
        return ProfileEfficiency(_fitted(own, ref, kind_defaults), own, own.tier, own_band(own, defaults), fallback)
    if device.kind == "cpu":
        return fallback
    candidates = []
    for device_id in profiles:
        ref = _catalog_device(device_id)  # the folder names the device: no profile is read to choose
        if ref is None or ref.kind != device.kind or (ref.vendor, ref.generation) != transfer_key(device):
            continue
        if own_libs is None and _folder_tier(profiles, device_id) not in ("published", "measured"):
            continue
        if own_libs is not None and _own_profile(profiles, device_id, own_libs) is None:
            continue
        candidates.append((abs(math.log(ref.mem_bytes_per_s / device.mem_bytes_per_s)), device_id))
    if candidates:
        twin = _catalog_device(min(candidates)[1])
        profile = _own_profile(profiles, min(candidates)[1], own_libs)
        ref = profile_device(profile)
        if twin is not None and twin.same_chip(device):
            # a copy of a profiled device's row (a user's device with its vendor, kind, peaks and bandwidth):
            # the transfer is the identity, so the profile's own tier and band stand
            return ProfileEfficiency(_fitted(profile, ref, kind_defaults), profile, profile.tier,
                                     own_band(profile, defaults), fallback)
        clock = (ref.clock_hz / device.clock_hz) if ref.clock_hz and device.clock_hz else 1.0
        # a transferred prediction carries the neighbour's band widened by the error measured when one
        # profiled device is predicted from another of its generation (hardware_specs/calibration/
        # transfer.json); never wider than the datasheet band
        band = min(defaults.datasheet_band_fraction, recorded_band(profile) + transfer_error(profile.path))
        return ProfileEfficiency(_fitted(profile, ref, kind_defaults), profile, "transferred", band, fallback, clock)
    for library in other_libs:
        other = _library_profile(profiles, device.id, library)
        if other is not None:
            ref = profile_device(other)
            band = min(defaults.datasheet_band_fraction, recorded_band(other) + transfer_error(other.path))
            return ProfileEfficiency(_fitted(other, ref, kind_defaults), other, "cross-library", band, fallback,
                                     categories=categories)
    return fallback


_FITTED: dict[int, tuple[Profile, Device, KindDefaults, ProfileModel]] = {}


def _fitted(profile: Profile, ref: Device, kind_defaults: KindDefaults) -> ProfileModel:
    """The model fitted to `profile` on its device, fitted once: a profile's own device and every
    neighbour transferred from it share it (fitting a published profile takes a few tenths of a second).
    Keyed by the profile object, which the entry keeps alive so its id is not reused."""
    entry = _FITTED.get(id(profile))
    if entry is None or entry[0] is not profile or entry[1] != ref or entry[2] is not kind_defaults:
        if len(_FITTED) >= 32:
            _FITTED.clear()
        entry = _FITTED[id(profile)] = (profile, ref, kind_defaults, ProfileModel(kind_defaults).fit(profile, ref))
    return entry[3]
