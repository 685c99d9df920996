"""Calibration profiles and the efficiency model fitted to them (the measured and transferred tiers).

The model predicts each op's *roofline efficiency* η = ideal time / measured time, where the ideal
time is max(FLOP / peak, bytes / bandwidth) on the profiled device and the measured time excludes
the per-op dispatch overhead (kept as its own term). η is interpolated in log-shape space per op
kind: linearly over the (M, N, K) grid for GEMM, by inverse-distance weighting of the nearest
measurements for attention, convolution and batched GEMM, and piecewise-linearly against bytes
for memory-bound kernels. On GPUs the wave quantization of 128x128 output tiles over the SMs is
divided out before fitting and put back for the device predicted, so the fit transfers across
SM counts. A prediction on device D is then D's own ideal time / η (+ overhead): on the profiled
device this reproduces the measurements ("measured" tier); on another device of the same kind it
carries the measured efficiencies over to D's peaks, bandwidth and unit count ("transferred").

Uncertainty: leave-one-out residuals of the fit (each measurement predicted from the others) give
the band: its 90th percentile |error| for the measured tier, widened for transferred predictions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from planner.files import read_bytes, shipped_specs, text_of
from planner.hardware.catalog import Device
from planner.hardware.efficiency import KindDefaults, wave_efficiencies, wave_efficiency
from planner.hardware.interpolate import Interpolator
from planner.hardware.profile_check import (  # noqa: F401 (SCHEMA: the layout read)
    SCHEMA,
    check_profile,
    own_band,
    parse,
    recorded_band,
    transfer_error,
)
from planner.hardware.profile_table import KindTable, kind_tables, measurement_rows, rows_by, rows_by_pair
from planner.hardware.verified import parse_verified
from planner.memo import IdentityMemo

PROFILE_ROOT = shipped_specs() / "calibration"

@dataclass(frozen=True)
class Profile:
    """A calibration profile as written by `planner calibrate`."""

    device_id: str
    device_name: str
    kind: str
    """"cpu" or "gpu"."""
    properties: dict
    ceilings: dict
    measurements: Sequence[dict]
    """In file order; a tuple of the rows, or for a file of columns a ColumnRows (profile_table.py)."""
    date: str
    path: str
    raw: dict = field(repr=False)
    tables: dict | None = field(default=None, repr=False, compare=False)
    """The measurements as a KindTable per kind (profile_check.kind_tables), as the check read them;
    None: the fit reads them itself."""

    @property
    def tier(self) -> str:
        """"published" for a profile converted from published measurements, else "measured"."""
        return "published" if self.raw.get("tier") == "published" else "measured"

    @property
    def library(self) -> str:
        """The kernel library (and way of running it) that was measured: "pytorch-eager" for `planner
        calibrate` (cuBLAS and cuDNN as torch calls them, one launch per op), "aiconfigurator" for the
        serving engines' kernels that its collector timed in CUDA-graph replays (vLLM, TensorRT-LLM),
        "aiter" for ROCm's GEMM tuner; a profile names its own in `library`."""
        lib = self.raw.get("library")
        if isinstance(lib, str) and lib:
            return lib
        if self.tier == "published":
            repo = str((self.raw.get("source") or {}).get("repository", "")) if isinstance(
                self.raw.get("source"), dict) else ""
            return "aiter" if "aiter" in repo.lower() else "aiconfigurator"
        return "pytorch-eager"

    @property
    def dispatch(self) -> dict:
        """The measured dispatch block (kernel_floor_s, isolated_call_s, host_per_op_s, view_host_s), or {}
        for a profile that does not separate kernel time from dispatch (a CPU's: there the dispatcher's
        cost is the op's time)."""
        d = self.raw.get("dispatch")
        return d if isinstance(d, dict) else {}

    @property
    def name(self) -> str:
        """The file as shown in outputs: hardware_specs/calibration/<device>/<file>."""
        return _shown_path(self.path)

    @property
    def source(self) -> str:
        """One line: where the measurements come from (worked out once per profile)."""
        return _SOURCES.get((self,), (), self._source)

    def _source(self) -> str:
        src = self.raw.get("source")
        if isinstance(src, dict):
            tables = src.get("tables") or []
            stacks = sorted({f"{t.get('framework')} {t.get('version')}" for t in tables if isinstance(t, dict)})
            commit = str(src.get("commit", ""))[:7]
            return (f"{src.get('repository', '?')} @{commit} ({src.get('license', '?')}), measured with "
                    f"{', '.join(stacks) or '?'}; converted to {_shown_path(self.path)}")
        return f"planner calibrate on this device, {self.date[:10]} ({_shown_path(self.path)})"

    def device(self, catalog_device: Device | None) -> Device:
        """The Device this profile measured: the catalog's where it has one (GPUs), else one built
        from the measured ceilings (a CPU: peak = best measured GEMM rate, bandwidth = copy rate)."""
        if catalog_device is not None:
            return catalog_device
        peaks = {key.removeprefix("gemm_").removesuffix("_flop_per_s"): value
                 for key, value in self.ceilings.items() if key.startswith("gemm_")}
        props = self.properties
        vendor = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}.get(props.get("vendor", ""), props.get("vendor", ""))
        return Device(id=self.device_id, name=self.device_name, vendor=vendor,
                      generation=f"family-{props.get('family', '?')}-model-{props.get('model', '?')}", kind=self.kind,
                      memory_bytes=props.get("memory_bytes"), mem_bytes_per_s=self.ceilings["copy_bytes_per_s"],
                      peak_flop_per_s=peaks, llc_bytes=None, compute_units=props.get("logical_cpus"), clock_hz=None,
                      tdp_w=None, idle_w=None, scaleup_bytes_per_s=None, devices_per_node=1,
                      scaleout_bytes_per_s=None, pcie_bytes_per_s=None, release_year=None, confidence="measured",
                      source=f"calibration profile {self.path} (measured ceilings)", date=self.date[:10])


_SOURCES = IdentityMemo(256)


@lru_cache(maxsize=256)
def _shown_path(path: str) -> str:
    """A shipped profile's path as the docs name it (hardware_specs/calibration/..., also from an installed
    wheel, where the folder is planner_specs), else as given. Cached: every prediction names its profile, and
    resolving a path is a dozen system calls."""
    try:
        return str(Path("hardware_specs") / Path(path).resolve().relative_to(PROFILE_ROOT.resolve().parent))
    except ValueError:
        return path


def read_profile(path: Path) -> Profile:
    """Load one profile.json and check it (`check_profile`; not again for a shipped profile's bytes the tests
    checked: verified.py); return the Profile. Raise ConfigError naming the file, and the measurement index
    where one is bad, when it is not UTF-8 JSON, nests too deep, has an unknown schema, or holds a number that
    is not finite or out of range."""
    where, data = f"calibration profile '{path}'", read_bytes(path, "calibration profile")
    raw = parse_verified(data)
    tables = kind_tables(raw["measurements"]) if raw is not None else None
    if raw is None:  # parse refuses every float that is not finite
        raw = parse(text_of(data, path, "calibration profile"), where)
        tables = check_profile(raw, where, floats_finite=True)
    return Profile(raw["device_id"], raw["device_name"], raw["kind"], raw.get("properties", {}), raw["ceilings"],
                   measurement_rows(raw["measurements"]), raw["date"], str(path), raw, tables)


class ProfileIndex(Mapping):
    """Profiles by device id (the folder name), each read and checked when first used. A device folder
    may hold one profile per kernel library: `profile.json` (the device's default profile) and
    `<library>.json` beside it; the mapping gives the default, `library` any of them.

    Reading every profile up front would cost about half a second per published profile on every
    command; a command touches one or two. A bad profile is still refused, not skipped: the
    ConfigError (naming its file and measurement) is raised where it is used, by its own device or
    as the neighbour a transferred tier is fitted on."""

    def __init__(self, paths: dict[str, Path], library_paths: dict[tuple[str, str], Path] | None = None):
        self._paths = dict(paths)
        self._read: dict[str, Profile] = {}
        self._library_paths = dict(library_paths or {})
        self._library_read: dict[tuple[str, str], Profile] = {}

    def libraries(self, device_id: str) -> tuple[str, ...]:
        """The libraries profiled on `device_id` besides its default profile's (by file name)."""
        return tuple(sorted(lib for dev, lib in self._library_paths if dev == device_id))

    def library(self, device_id: str, library: str) -> Profile | None:
        """The profile of `library` on `device_id` (its `<library>.json`, or the default profile when that
        is the library's), or None."""
        key = (device_id, library)
        if key in self._library_paths:
            if key not in self._library_read:
                self._library_read[key] = read_profile(self._library_paths[key])
            return self._library_read[key]
        if device_id in self._paths and self[device_id].library == library:
            return self[device_id]
        return None

    def __getitem__(self, device_id: str) -> Profile:
        if device_id not in self._read:
            self._read[device_id] = read_profile(self._paths[device_id])
        return self._read[device_id]

    def __iter__(self):
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __contains__(self, device_id: object) -> bool:
        return device_id in self._paths

    def tier_of(self, device_id: str) -> str:
        """"published" or "measured", from the head of the file (converted profiles write `tier`
        first); the whole profile is read only when the head does not say."""
        if device_id in self._read:
            return self._read[device_id].tier
        with open(self._paths[device_id], "rb") as f:
            head = f.read(200).decode("utf-8", "replace")
        if '"tier":"published"' in head.replace(" ", ""):
            return "published"
        return self[device_id].tier


@lru_cache(maxsize=4)
def load_profiles(root: str | None = None) -> ProfileIndex:
    """Every profile under hardware_specs/calibration/<device-id>/ (or `root`): profile.json by device id,
    <library>.json by (device id, library); each read when first used (ProfileIndex)."""
    base = Path(root) if root else PROFILE_ROOT
    return ProfileIndex({p.parent.name: p for p in sorted(base.glob("*/profile.json"))},
                        {(p.parent.name, p.stem): p for p in sorted(base.glob("*/*.json")) if p.name != "profile.json"})


# ------------------------------------------------------------------ features and ideal times

def _log2(x: float) -> float:
    return math.log2(max(x, 1e-30))


def _ideal_s(flop: float, nbytes: float, peak: float, bw: float) -> float:
    return max(flop / peak if peak else 0.0, nbytes / bw if bw else 0.0)


def _vector_peak(device: Device, dtype: str) -> float:
    peaks = device.peak_flop_per_s
    return peaks.get("fp32") or peaks.get(dtype) or max(peaks.values())


def _dtype_peak(device: Device, dtype: str) -> float | None:
    return device.peak_flop_per_s.get(dtype)


def _features(m: dict) -> tuple[str, tuple[float, ...], tuple[int, int, int, int] | None]:
    """(model key, log-shape features, GEMM shape for wave quantization) of one measurement."""
    kind = m["kind"]
    log2 = math.log2  # shapes are whole numbers >= 1 (profile_check), so no floor is needed as for bytes
    if kind == "gemm":
        family = "gemm" if m.get("layout", "nt") == "nt" else "gemm_nn"
        # rows whose inner dimensions are not 16-byte multiples run other (older, slower) kernels
        align = m.get("align_bytes", 16)
        suffix = f"@{align}" if align < 16 else ""
        return f"{family}:{m['dtype']}{suffix}", (log2(m["m"]), log2(m["n"]), log2(m["k"])), (1, m["m"], m["n"], m["k"])
    if kind == "bmm":
        return "bmm", (log2(m["b"]), log2(m["m"]), log2(m["n"]), log2(m["k"])), (m["b"], m["m"], m["n"], m["k"])
    if kind == "attention":
        # group: query heads per KV head (grouped-query attention; 1 where the measurement has none)
        feats = (log2(m["bh"]), log2(m["sq"]), log2(m["sk"]), log2(m["d"]), 1.0 if m["causal"] else 0.0,
                 _log2(m.get("group", 1)))
        # fp32 attention runs other kernels than 16-bit flash attention (no flash kernel takes fp32)
        key = "attention:fp32" if m.get("dtype") == "fp32" else "attention"
        return key, feats, (m["bh"], m["sq"], m["sk"], m["d"])
    if kind in ("conv", "conv_backward"):
        out = (m["hw"] + 2 * m["pad"] - m["ksize"]) // m["stride"] + 1
        gm, gn, gk = m["n"] * out * out, m["cout"], m["cin"] * m["ksize"] ** 2
        # fp32 convolutions run other cuDNN kernels than 16-bit ones (no tensor-core layout transposes);
        # the backward (input and weight gradients) is featured by its forward's implicit GEMM
        key = "conv:fp32" if m.get("dtype") == "fp32" else "conv"
        if kind == "conv_backward":  # read for 16-bit ops only (profile_select); fp32 kept apart
            key = "conv_backward:fp32" if m.get("dtype") == "fp32" else "conv_backward"
        return key, (_log2(gm), _log2(gn), _log2(gk), _log2(m["ksize"] ** 2)), (1, gm, gn, gk)
    if kind == "batch_norm" and "hw" in m:
        # NCHW batch norm timed at real activation shapes: bytes and plane size (hw x hw)
        return "bn", (_log2(m["bytes"]), _log2(m["hw"] ** 2)), None
    if kind in ("batch_norm_train", "batch_norm_backward") and "hw" in m:
        # training-mode batch norm reduces each channel's statistics over N x H x W: its own kernels
        return _BN_KEYS[kind], (_log2(m["bytes"]), _log2(m["hw"] ** 2)), None
    if kind in ("depthwise", "depthwise_backward") and "ksize" in m:
        # ATen's depthwise kernels (groups = channels): streamed bytes, slower with larger filters and
        # faster with stride 2 (fewer outputs per input read); η against the matrix peak, as op_time reads
        # a convolution
        return _DW_KEYS[kind], (_log2(m["bytes"]), _log2(m["ksize"] ** 2), float(m["stride"])), None
    if kind == "copy" and not m.get("warm", True):
        return "mem:copy_cold", (_log2(m["bytes"]),), None
    return f"mem:{kind}", (_log2(m["bytes"]),), None


def _log2_all(values: list) -> list[float]:
    """_log2 of each value (math.log2 at once where none is below _log2's floor)."""
    return list(map(math.log2, values)) if min(values, default=1.0) >= 1e-30 else list(map(_log2, values))


def _log2_grid(values: np.ndarray) -> np.ndarray:
    """math.log2 of each of `values` (whole numbers >= 1: a published profile's shapes, on a grid of a few dozen
    values per dimension), computed once per distinct value: the same floats as mapping math.log2."""
    distinct, where = np.unique(values, return_inverse=True)
    return np.array([math.log2(v) for v in distinct.tolist()], dtype=float)[where.reshape(-1)]


def _kind_table(table: KindTable) -> tuple[list[str], np.ndarray | list, np.ndarray]:
    """_features of the measurements of one kind: (model key per row, features per row, wave shape per row
    as an n x 4 float array, 0s where the kind has none). GEMMs and attention, the thousands of rows of a
    published profile, are read by columns (features an n x d array); other kinds row by row (features a
    list of tuples: a kind's rows may belong to keys with other numbers of features)."""
    kind, n = table.kind, len(table.index)
    if kind == "gemm":
        m_, n_, k_ = table.column("m"), table.column("n"), table.column("k")
        layouts, dtypes, aligns = table.column("layout", "nt"), table.column("dtype"), table.column("align_bytes", 16)
        names: dict[tuple, str] = {}

        def name(layout, dtype, align) -> str:  # a GEMM's key: its layout, dtype and alignment (_features)
            # by type too: an alignment of 8.0 names another curve ("@8.0") than 8 does, as _features writes it
            if (layout, dtype, align, type(align)) not in names:
                names[layout, dtype, align, type(align)] = _features({"kind": "gemm", "layout": layout, "dtype": dtype,
                                                                      "align_bytes": align, "m": 1, "n": 1, "k": 1})[0]
            return names[layout, dtype, align, type(align)]

        # one key per dtype where every row has one layout and one alignment (of one type)
        if layouts.count(layouts[0]) == n and aligns.count(aligns[0]) == n and len(set(map(type, aligns))) == 1:
            by_dtype = {dtype: name(layouts[0], dtype, aligns[0]) for dtype in dict.fromkeys(dtypes)}
            keys = list(map(by_dtype.__getitem__, dtypes))
        else:
            keys = [name(*sig) for sig in zip(layouts, dtypes, aligns)]
        sizes = np.array([[1] * n, m_, n_, k_], dtype=float)
        return keys, np.array([_log2_grid(sizes[1]), _log2_grid(sizes[2]), _log2_grid(sizes[3])]).T, sizes.T
    if kind == "attention":
        bh, sq, sk, d = (table.column(dim) for dim in ("bh", "sq", "sk", "d"))
        dtypes = table.column("dtype", None)
        keys = ["attention:fp32" if dtype == "fp32" else "attention" for dtype in dtypes] if "fp32" in dtypes else \
            ["attention"] * n
        sizes = np.array([bh, sq, sk, d], dtype=float)
        groups = np.array(table.column("group", 1), dtype=float)  # whole numbers >= 1 (profile_check)
        feats = np.array([*map(_log2_grid, sizes), np.array(table.column("causal"), dtype=bool),
                          _log2_grid(groups) if groups.min(initial=1.0) >= 1e-30 else _log2_all(groups.tolist())],
                         dtype=float).T
        return keys, feats, sizes[[0, 1, 3, 2]].T  # _wave_shape of attention: bh, sq, d, sk
    if kind not in _SHAPED:  # memory-bound: (log2 bytes,) under "mem:<kind>" (_features), read by columns
        if kind == "copy":
            keys = ["mem:copy" if warm else "mem:copy_cold" for warm in table.column("warm", True)]
        else:
            keys = [f"mem:{kind}"] * n
        return keys, [(_log2(nbytes),) for nbytes in table.column("bytes")], np.zeros((n, 4))
    found = [_features(m) for m in table.rows]
    shapes = [_wave_shape(key, shape) if shape is not None else (0, 0, 0, 0) for key, _, shape in found]
    return [key for key, _, _ in found], [feats for _, feats, _ in found], np.array(shapes, dtype=float)


_SHAPED = frozenset({"bmm", "conv", "conv_backward", "batch_norm", "batch_norm_train", "batch_norm_backward",
                     "depthwise", "depthwise_backward"})
"""Kinds _features may key by more than their bytes (the others are memory-bound curves of bytes)."""
_BN_KEYS = {"batch_norm_train": "bn_train", "batch_norm_backward": "bn_backward"}
_DW_KEYS = {"depthwise": "dw", "depthwise_backward": "dw_backward"}


@dataclass
class ProfileModel:
    """Efficiency model fitted to a profile, scikit-learn style: fit(profile, device) returns self."""

    kind_defaults: KindDefaults
    """Tile sizes for wave quantization (GPU) from the efficiency defaults."""

    def fit(self, profile: Profile, device: Device, exclude: int | None = None) -> ProfileModel:
        """Fit per-kind interpolators of log η; `exclude` leaves one measurement out (for LOO)."""
        self.device_ = device
        dispatch = profile.dispatch
        # a profile that measured its dispatch apart (GPU eager): each event-timed call waited
        # isolated_call_s on the host before its kernel ran; the kernel itself costs the floor plus
        # its work. Otherwise (a CPU, a published CUDA-graph table) the fixed cost per op is the
        # measured (or datasheet) launch overhead, and a view costs the dispatcher's view time.
        self.floor_s_ = float(dispatch.get("kernel_floor_s", 0.0))
        self.isolated_s_ = float(dispatch.get("isolated_call_s", 0.0))
        self.after_s_ = float(dispatch.get("after_launch_s", 0.0))
        self.censored_up_to_s_ = 2 * (self.isolated_s_ + self.after_s_ + self.floor_s_)  # see `censored`
        self.launch_s_ = self.floor_s_ if dispatch else profile.ceilings.get("launch_overhead_s", 0.0)
        self.view_s_ = 0.0 if dispatch else profile.ceilings.get("view_overhead_s", 0.0)
        # the measurements by kind, read by columns (profile_table.KindTable), in file order
        tables = profile.tables if profile.tables is not None and exclude is None else None
        if tables is None:
            kept = [m for i, m in enumerate(profile.measurements) if i != exclude]
            tables = kind_tables(kept)
        peaks: dict[tuple[bool, str], float | None] = {}
        # per model key: its first row's index, features, and the columns η is computed from at once
        groups: dict[str, list] = {}
        for kind, table in tables.items():
            if kind in ("launch", "view", "h2d"):
                continue
            index, n = table.index, len(table.index)
            keys, feats, shapes = _kind_table(table)
            time_s, kernel = table.floats("time_s"), table.equals("timing", "kernel")
            if self.after_s_:  # `censored`, by columns
                keep = kernel | (time_s > self.censored_up_to_s_)
            else:
                keep = np.ones(n, dtype=bool)
            if not self.isolated_s_ and not self.floor_s_:  # _fixed_s, by columns
                fixed = np.full(n, float(self.launch_s_))
            else:
                fixed = self.floor_s_ + np.where(kernel, 0.0, self.isolated_s_)
            peak = np.zeros(n)
            for (key, dtype), rows_of in rows_by_pair(keys, table.column("dtype", "fp32")).items():
                matrix = key.startswith(("gemm", "bmm", "attention", "conv", "dw"))
                if (matrix, dtype) not in peaks:
                    peaks[matrix, dtype] = _dtype_peak(device, dtype) if matrix else _vector_peak(device, dtype)
                peak[rows_of] = peaks[matrix, dtype] or 0.0
            keep &= peak > 0
            flop, nbytes = table.floats("flop"), table.floats("bytes")
            for key, rows_of in rows_by(keys).items():
                rows_of = rows_of[keep[rows_of]]
                if len(rows_of):
                    x = feats[rows_of] if isinstance(feats, np.ndarray) else np.asarray([feats[r] for r in rows_of], dtype=float)
                    groups[key] = [index[rows_of[0]], x, flop[rows_of], nbytes[rows_of], time_s[rows_of],
                                   fixed[rows_of], peak[rows_of], shapes[rows_of]]
        self.memo_ = {}
        self.curve_memo_ = {}  # η at (key, features), before the device's wave factor (predict_eta)
        self.models_ = {}
        for key, (_, x, flop, nbytes, time_s, fixed, peak, shape) in sorted(groups.items(), key=lambda g: g[1][0]):
            batch, m_, n_ = shape[:, 0], shape[:, 1], shape[:, 2]
            core = time_s - np.minimum(fixed, self._MAX_FIXED * time_s)
            eta = np.maximum(flop / peak, nbytes / device.mem_bytes_per_s) / core
            if device.kind == "gpu" and batch.any():
                eta = eta / wave_efficiencies(batch, m_, n_, self.kind_defaults, device)
            keep = eta > 0
            if keep.sum() >= 2:
                self.models_[key] = Interpolator(x[keep], np.log(eta[keep]), key.startswith("gemm"),
                                                  monotone_bytes=key.startswith("mem:"))
        self.keys_ = frozenset(self.models_)  # which curve an op reads depends on these alone (profile_select)
        return self

    @property
    def _MAX_FIXED(self) -> float:
        """Largest share of a measured time taken as fixed cost: half without a measured dispatch (the
        rule before dispatch was measured), 95% with it (a tiny kernel's event time is nearly all
        dispatch, measured)."""
        return 0.95 if self.isolated_s_ else 0.5

    def censored(self, m: dict) -> bool:
        """True for an event-timed measurement that does not resolve its kernel: one that ended before the
        closing event was recorded takes isolated call + after launch (+ floor) whatever the kernel did,
        and up to twice that the host's jitter (a few us) is still a large share of what is left."""
        return bool(self.after_s_) and m.get("timing") != "kernel" and m["time_s"] <= self.censored_up_to_s_

    def _fixed_s(self, m: dict) -> float:
        """The fixed part of one measurement's time: the kernel floor, plus the isolated call's host wait
        for an event-timed call on a profile that measured it; else the launch overhead."""
        if not self.isolated_s_ and not self.floor_s_:
            return self.launch_s_
        return self.floor_s_ + (0.0 if m.get("timing") == "kernel" else self.isolated_s_)

    def efficiency_of(self, m: dict, device: Device) -> float | None:
        """Measured η of one measurement on `device` (wave quantization divided out on GPUs)."""
        key, _, shape = _features(m)
        dtype = m.get("dtype", "fp32")
        peak = _dtype_peak(device, dtype) if key.startswith(("gemm", "bmm", "attention", "conv", "dw")) else \
            _vector_peak(device, dtype)
        if not peak:
            return None
        core = m["time_s"] - min(self._fixed_s(m), self._MAX_FIXED * m["time_s"])
        eta = _ideal_s(m["flop"], m["bytes"], peak, device.mem_bytes_per_s) / core
        if shape is not None and device.kind == "gpu":
            eta /= wave_efficiency(_wave_shape(key, shape), self.kind_defaults, device)
        return eta if eta > 0 else None

    def predict_eta(self, key: str, feats: tuple[float, ...], shape, device: Device) -> float | None:
        """η for an op of model `key` with `feats` on `device` (None if the profile lacks the kind).
        Memoized: a graph's ops repeat across layers, batches and predictions."""
        memo = self.__dict__.setdefault("memo_", {})
        slot = (key, feats, shape, device.id, device.compute_units, device.kind)
        if slot in memo:
            return memo[slot]
        # the interpolation is the device's only where the wave factor is put back: the η a profile
        # measured at these features is read once for every device it is carried to (a cold `compare`
        # looks up 3,467 (op, device) pairs over 1,220 distinct features)
        eta = self.curve_eta(key, feats)
        if eta is None:
            return None
        if shape is not None and device.kind == "gpu":
            eta *= wave_efficiency(_wave_shape(key, shape), self.kind_defaults, device)
        if len(memo) > 100_000:
            memo.clear()
            self.curve_memo_.clear()
        memo[slot] = eta
        return eta

    def curve_eta(self, key: str, feats: tuple[float, ...]) -> float | None:
        """η the curve of model `key` gives at `feats`, before any device's wave factor (None where the profile
        has no such curve); memoized."""
        curve = self.__dict__.setdefault("curve_memo_", {})
        if (key, feats) not in curve:
            if len(curve) > 100_000:
                curve.clear()
            model = self.models_.get(key)
            curve[key, feats] = None if model is None else math.exp(model(feats))
        return curve[key, feats]


def _wave_shape(key: str, shape: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    if key.startswith("attention"):
        # FlashAttention tiles the queries of each (batch, head): blocks = bh x ceil(Sq/128)
        bh, sq, sk, d = shape
        return bh, sq, d, sk
    return shape


def profile_device(profile: Profile) -> Device | None:
    """The Device of a profile: the catalog's for a catalog id, else one from the measured ceilings."""
    from planner.errors import PlannerError
    from planner.hardware.catalog import load_catalog

    try:
        return load_catalog().device(profile.device_id)
    except PlannerError:
        if "copy_bytes_per_s" not in profile.ceilings or not any(k.startswith("gemm_") for k in profile.ceilings):
            return None
        return profile.device(None)
