"""Capture the aten-level op graph of a PyTorch workload on meta tensors.

A model built on the meta device holds no storage, so running it costs no memory whatever its
size; a TorchDispatchMode sees every aten op below autograd (forward and backward) and records
its name, owning module, phase, arguments (tensors as shapes, dtypes and touched elements) and
outputs. Nothing is sampled: every op that runs is recorded.

Three substitutions make the captured graph the one a serving or training engine runs:
- scaled_dot_product_attention is routed to the fused flash-attention aten op (on meta, torch
  would otherwise decompose it into bmm + softmax, which reads and writes the score matrix);
- rms_norm is recorded as one fused kernel each way, `aten._fused_rms_norm` and its backward,
  as torch's CUDA kernel, Apex and TransformerEngine run it (on meta it decomposes into six fp32
  elementwise ops, each a round trip through memory);
- the AdamW update is the fused multi-tensor op `_fused_adamw_` (see planner/workload/graphs.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.module_tracker import ModuleTracker

from planner.workload.meta_ops import elementwise_result
from planner.workload.quant import ELEMENT_BITS, Precision, channel_elements

PHASES = ("forward", "backward", "optimizer")
GEMM_OPERANDS = {"aten.mm": ("self", "mat2"), "aten.addmm": ("mat1", "mat2"), "aten.bmm": ("self", "mat2"),
                 "aten.baddbmm": ("batch1", "batch2"), "aten.matmul": ("self", "other"),
                 "aten.linear": ("input", "weight"), "aten.convolution": ("input", "weight")}
"""The two matrix operands of each GEMM op (a convolution is an implicit GEMM): a quantized weight in one makes the
other a quantized input."""
STATIC_INPUT = frozenset({"aten.convolution"})
"""Ops whose quantized input has one static scale per tensor (TensorRT's calibrated conv inputs: recipes.json
`convolutions`): no scale bits, no amax pass."""
COMMUTES_WITH_QUANTIZE = frozenset({"aten.max_pool2d_with_indices", "aten.max_pool2d"})
"""Ops that a per-tensor quantization moves in front of (a max of quantized values is the quantized max):
TensorRT propagates Q backward across them and runs them in INT8 (TensorRT Developer Guide, 'Q/DQ
Propagation': Q backward-propagation across commuting layers such as MaxPool)."""
RESIDUAL_ADD = frozenset({"aten.add", "aten.add_"})
"""The elementwise op of a residual connection whose feature-map operands an INT8 network stores quantized (an
in-place `out += identity` quantizes the operand it reads, not the one it writes)."""
QUANTIZE_OP = "quant.quantize.default"
"""The synthetic record of a dynamic activation-quantization kernel (see _Recorder.quantized)."""
QUANTIZE_PACKET = QUANTIZE_OP.rsplit(".", 1)[0]


@dataclass(frozen=True, slots=True)
class TensorMeta:
    """Shape and storage facts of one tensor argument or result."""

    shape: tuple[int, ...]
    """Sizes of each dimension."""
    dtype: str
    """torch dtype name as captured, e.g. "bfloat16"."""
    bits: float
    """Width of one element in bits as counted: the workload's compute dtype for its floats, or, under a
    quantization recipe (planner/workload/quant.py), the weight, KV-cache or quantized-activation width
    of the tensors in those roles, scale factors included (a float: w4a16 weights of 4096 inputs count
    4 + 20/128 bits)."""
    touched: int
    """Distinct storage elements addressed: dimensions with stride 0 (broadcast) count once."""
    col_major: bool = False
    """The last two dimensions are stored transposed (stride 1 along rows): an nn.Linear weight as
    mm sees it. Kernels run such operands at different speeds, so calibration tells them apart."""
    storage: int = field(default=0, compare=False)
    """Identity of the storage the tensor views (0 when unknown): the dataflow the lowering pass
    (planner/workload/lowering.py) follows. Views and in-place results share their input's storage.
    Not part of equality: equal shapes at different addresses are the same op signature."""
    offset: int = field(default=0, compare=False)
    """Storage offset in elements: two chunks of one storage are different tensors."""

    @property
    def numel(self) -> int:
        """Number of logical elements (product of the shape)."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def bytes(self) -> float:
        """Bytes of storage touched: touched elements x bits / 8."""
        return self.touched * self.bits / 8


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One executed aten op."""

    op: str
    """Overload name, e.g. "aten.mm.default"."""
    packet: str
    """Op name without overload, e.g. "aten.mm": the key of the counting registry."""
    module: str
    """Fully qualified name of the innermost module running it ("" for the top level)."""
    phase: str
    """"forward", "backward" or "optimizer"."""
    args: tuple[tuple[str, Any], ...]
    """(schema argument name, value); tensors as TensorMeta, tensor lists as tuples of them."""
    outputs: tuple[TensorMeta, ...]
    """Tensor results, flattened in order."""
    mutates: tuple[str, ...]
    """Names of arguments the op writes in place (from its schema)."""
    is_view: bool
    """True when every result aliases an input without writing it (a view or metadata op)."""

    def arg(self, name: str, default: Any = None) -> Any:
        """Return the argument called `name` in the op's schema, or `default` if absent."""
        for key, value in self.args:
            if key == name:
                return value
        return default

    def in_module(self, module: str) -> OpRecord:
        """This record attributed to `module`: what dataclasses.replace(self, module=module) returns, at
        a fifth of its cost (a new graph's lowering renames every kernel's record to its role)."""
        return OpRecord(self.op, self.packet, module, self.phase, self.args, self.outputs, self.mutates, self.is_view)

    def tensors(self) -> list[TensorMeta]:
        """Return every tensor argument, tensor lists flattened, in schema order."""
        found: list[TensorMeta] = []
        for _, value in self.args:
            if isinstance(value, TensorMeta):
                found.append(value)
            elif isinstance(value, tuple):
                found.extend(v for v in value if isinstance(v, TensorMeta))
        return found


@dataclass(frozen=True, slots=True)
class OpGraph:
    """The ops of one workload, in execution order, with what produced them."""

    records: tuple[OpRecord, ...]
    """Every executed aten op."""
    dtype: str
    """Logical dtype name the floats are counted at, e.g. "bf16"."""
    saved_bytes: tuple[tuple[str, float], ...] = ()
    """(module, bytes) of activations autograd saved for backward, each tensor once, parameters
    excluded: what a training step holds between its forward and backward."""


def _touched(t: torch.Tensor) -> int:
    # Broadcast (stride-0) dimensions address the same storage: count them once.
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return n if t.numel() else 0


def _storage_id(t: torch.Tensor) -> int:
    # the address of the storage object: stable while the tensor lives; a later storage at the same
    # address is a new version to the lowering pass, which binds each read to the latest write
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):  # tensor subclasses without storage
        return 0


def tensor_meta(t: torch.Tensor, bits: float | None = None, storage: int | None = None) -> TensorMeta:
    """The TensorMeta of tensor `t`, its elements counted at `bits` (its own width when None); `storage`:
    its storage id when the caller has it."""
    col_major = t.dim() >= 2 and t.stride(-2) == 1 and t.stride(-1) != 1 and t.shape[-1] > 1
    return TensorMeta(tuple(t.shape), str(t.dtype).removeprefix("torch."),
                      t.element_size() * 8 if bits is None else bits, _touched(t), col_major,
                      _storage_id(t) if storage is None else storage, t.storage_offset())


class _Recorder(TorchDispatchMode):
    """Records every aten op that reaches the dispatcher."""

    def __init__(self, tracker: ModuleTracker, capture_dtype: torch.dtype, logical_bits: int,
                 precision: Precision | None = None):
        super().__init__()
        self.records: list[OpRecord] = []
        self.phase = "forward"
        self._tracker = tracker
        self._capture_dtype = capture_dtype
        self._logical_bits = logical_bits
        self._schema_cache: dict[Any, tuple[tuple[str, ...], tuple[str, ...], bool]] = {}
        self.module_override: str | None = None
        self.paused = False
        self._precision = precision
        self._role_bits: dict[int, float] = {}
        """Storage -> bits of the tensors with a role under a quantization recipe (weights, KV cache,
        quantized GEMM inputs); every other float of the capture dtype is at `logical_bits`."""
        self._weights: set[int] = set()
        self._feature_maps: dict[int, torch.Tensor] = {}
        """Storage -> a tensor on it, for convolution results and what elementwise work and pooling make of
        them, under a recipe that quantizes convolutions: the tensors a residual add of feature maps reads
        (kept alive so that a storage id is not reused by another tensor)."""
        self._narrowed: set[int] = set()
        """Storages `_commuted` stored at the activation width (a pool's result): widened again when written
        in place."""
        self._last: tuple[str, list, tuple, int] | None = None
        """(packet, argument values, results, records so far) of the op recorded last under a recipe that
        quantizes convolutions: a quantization may move in front of it."""
        self._quantized: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        """(storage, offset, shape, stride) of a GEMM input -> (input, its quantized copy): one quantize
        kernel per distinct input (q, k and v projections share theirs), both kept alive so that their
        storages keep their identity."""

    def assign(self, weights: tuple[torch.Tensor, ...], kv_cache: tuple[torch.Tensor, ...]) -> None:
        """Count `weights` at the precision's weight width and `kv_cache` at its KV width (storages)."""
        p = self._precision
        for w in weights:
            sid = _storage_id(w)
            self._weights.add(sid)
            # per-channel scales over one output channel's elements: a Linear's row [in], a conv's [C/g, R, S]
            self._role_bits[sid] = p.weight_bits(channel_elements(w))
        if p.quantizes_kv:
            for t in kv_cache:
                self._role_bits[_storage_id(t)] = p.kv_bits(t.shape[-1])

    def _meta(self, t: torch.Tensor) -> TensorMeta:
        sid = _storage_id(t)
        if t.dtype == self._capture_dtype:
            bits = self._role_bits.get(sid, self._logical_bits) if self._role_bits else self._logical_bits
        else:
            bits = t.element_size() * 8
        return tensor_meta(t, bits, sid)

    def _value(self, v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return self._meta(v)
        if isinstance(v, (list, tuple)):
            return tuple(self._value(x) for x in v)
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        return str(v)

    def _schema(self, func) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
        cached = self._schema_cache.get(func)
        if cached is None:
            schema = func._schema
            names = tuple(a.name for a in schema.arguments)
            mutates = tuple(a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write)
            rets = schema.returns
            is_view = bool(rets) and not mutates and all(
                r.alias_info is not None and not r.alias_info.is_write for r in rets)
            cached = (names, mutates, is_view)
            self._schema_cache[func] = cached
        return cached

    def _module(self) -> str:
        if self.module_override is not None:
            return self.module_override
        parents = self._tracker.parents
        inner = max(parents, key=lambda n: (n.count("."), len(n)))
        if inner == "Global":
            return ""
        _, _, fqn = inner.partition(".")
        return fqn

    def current_phase(self) -> str:
        if self.phase == "forward" and self._tracker.is_bw:
            return "backward"
        return self.phase

    def synthetic(self, op: str, args: tuple[tuple[str, Any], ...], outputs: tuple[torch.Tensor, ...]) -> None:
        """Record a fused kernel that torch runs as one op on the device but decomposes on meta."""
        self.records.append(OpRecord(op=op, packet=op.rsplit(".", 1)[0], module=self._module(),
                                     phase=self.current_phase(), args=tuple((k, self._value(v)) for k, v in args),
                                     outputs=tuple(self._meta(o) for o in outputs), mutates=(), is_view=False))

    def quantized(self, x: torch.Tensor, static: bool = False) -> torch.Tensor:
        """The quantized copy of GEMM input `x` under an activation-quantizing recipe (W8A8, FP4): the
        first time, a `quant.quantize` record reads `x` at the compute width and writes the copy at the
        activation width with its scales, a kernel of its own unless an engine fuses it. The GEMM then
        reads the copy. `static`: one calibrated scale for the tensor (a convolution's input, STATIC_INPUT):
        the copy is at the bare activation width."""
        key = _copy_key(x, static)
        hit = self._quantized.get(key)
        if hit is not None:
            return hit[1]
        if static and self.current_phase() == "forward" and (moved := self._commuted(x)) is not None:
            self._quantized[key] = (x, moved)
            return moved
        q = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # not recorded: the mode is off in here
        p = self._precision
        self._role_bits[_storage_id(q)] = (ELEMENT_BITS[p.activations] if static
                                           else p.activation_bits(x.shape[-1] if x.dim() else 1))
        self._quantized[key] = (x, q)
        self.records.append(OpRecord(op=QUANTIZE_OP, packet=QUANTIZE_PACKET, module=self._module(),
                                     phase=self.current_phase(),
                                     args=(("input", self._meta(x)),
                                           ("dynamic", p.activation_scales.dynamic and not static)),
                                     outputs=(self._meta(q),), mutates=(), is_view=False))
        return q

    def _commuted(self, x: torch.Tensor) -> torch.Tensor | None:
        """`x` itself, now stored at the activation width, when it is the result of the op just recorded and
        that op commutes with a per-tensor quantization (COMMUTES_WITH_QUANTIZE): the op's input is
        quantized instead and the op re-recorded reading and writing the narrow type. None otherwise."""
        last = self._last
        if last is None or last[0] not in COMMUTES_WITH_QUANTIZE or not last[2] or last[2][0] is not x \
                or last[3] != len(self.records):
            return None
        record = self.records.pop()
        packet, values, results, _ = last
        self._last = None
        source = next(v for k, v in values if k == "self")
        # the pool's input quantized once: it may already be narrow (another conv read it first)
        q = source if _storage_id(source) in self._role_bits else self.quantized(source, static=True)
        self._role_bits[_storage_id(x)] = ELEMENT_BITS[self._precision.activations]
        self._narrowed.add(_storage_id(x))
        self.records.append(replace(record, args=tuple((k, self._value(q if v is source else v)) for k, v in values),
                                    outputs=tuple(self._meta(o) for o in results)))
        return x

    def _quantize_inputs(self, packet: str, values: list) -> list:
        """`values` with the activation operand of a GEMM on a quantized weight replaced by its quantized copy."""
        operands = GEMM_OPERANDS.get(packet)
        if operands is None:
            return values
        found = {k: v for k, v in values if k in operands and isinstance(v, torch.Tensor)}
        if len(found) != 2:
            return values
        weight = [k for k, v in found.items() if _storage_id(v) in self._weights]
        if len(weight) != 1:
            return values
        (name, x), = [(k, v) for k, v in found.items() if k != weight[0]]
        if x.dtype != self._capture_dtype or _storage_id(x) in self._role_bits:
            return values
        q = self.quantized(x, static=packet in STATIC_INPUT)
        return [(k, q if k == name else v) for k, v in values]

    def _stored_quantized(self, packet: str, values: list, mutates: tuple[str, ...]) -> list:
        """`values` with every tensor that has a static quantized copy (a convolution's input) replaced by
        that copy: in an INT8 network every later reader of a quantized activation (the residual add, a
        pooling) reads it at the activation width, as TensorRT runs it with Q/DQ on the identity branch:
        the add fuses into the conv with an INT8 output and the full-width tensor is never stored
        (TensorRT Developer Guide, 'Q/DQ Layer-Placement Recommendations': with the residual input
        quantized the fused convolution's output is INT8; TensorRT's TF quantization toolkit,
        'Add Custom QDQ Insertion Case': Q/DQ on ResNet's residual connections). An argument the op
        writes in place keeps its storage."""
        residual = packet in RESIDUAL_ADD and self._precision.convolutions  # (called in the forward phase only)
        out = []
        for k, v in values:
            if k not in mutates and isinstance(v, torch.Tensor) and v.dtype == self._capture_dtype:
                hit = self._quantized.get(_copy_key(v, True))
                if hit is not None:
                    v = hit[1]
                elif residual and v.dim() == 4 and _storage_id(v) in self._feature_maps \
                        and _storage_id(v) not in self._role_bits:
                    # the identity branch of a residual block (a downsample conv's output): quantized too,
                    # so its producer writes it narrow and the add reads it so
                    v = self.quantized(v, static=True)
            out.append((k, v))
        return out

    def _forget(self, values: list, mutates: tuple[str, ...]) -> None:
        """Drop the quantized copies of storages an op writes in place (the next GEMM quantizes anew)."""
        written = set()
        for k, v in values:
            if k in mutates:
                for t in (v if isinstance(v, (list, tuple)) else (v,)):
                    if isinstance(t, torch.Tensor):
                        written.add(_storage_id(t))
        for key in [key for key in self._quantized if key[0] in written]:
            del self._quantized[key]
        for sid in written & self._narrowed:  # a narrowed pool result written in place is full width again
            self._narrowed.discard(sid)
            self._role_bits.pop(sid, None)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = elementwise_result(func, args, kwargs)  # contiguous meta operands: without torch's Python refs
        if out is None:
            out = func(*args, **kwargs)
        if self.paused:
            return out
        names, mutates, is_view = self._schema(func)
        values = list(zip(names, args)) + [(k, kwargs[k]) for k in names if k in kwargs]
        packet = str(func.overloadpacket)
        if self._weights and self._precision.quantizes_activations:
            if mutates and self._quantized:
                self._forget(values, mutates)
            values = self._quantize_inputs(packet, values)
            if packet not in GEMM_OPERANDS and (self._quantized or packet in RESIDUAL_ADD) \
                    and self.current_phase() == "forward":  # a backward reads what autograd saved: full width
                values = self._stored_quantized(packet, values, mutates)
        flat_out = out if isinstance(out, (tuple, list)) else (out,)
        phase = self.current_phase()
        self.records.append(OpRecord(
            op=str(func),
            packet=packet,
            module=self._module(),
            phase=phase,
            args=tuple((k, self._value(v)) for k, v in values),
            outputs=tuple(self._meta(o) for o in flat_out if isinstance(o, torch.Tensor)),
            mutates=mutates,
            is_view=is_view,
        ))
        if self._weights and self._precision.convolutions and self._precision.quantizes_activations:
            results = tuple(o for o in flat_out if isinstance(o, torch.Tensor))
            self._last = (packet, values, results, len(self.records))
            if packet == "aten.convolution" or packet not in GEMM_OPERANDS and any(
                    isinstance(v, torch.Tensor) and _storage_id(v) in self._feature_maps for _, v in values):
                self._feature_maps.update((_storage_id(o), o) for o in results)
        return out


def _copy_key(x: torch.Tensor, static: bool) -> tuple:
    """The key of `x`'s quantized copy: (storage, offset, shape, stride, static scale)."""
    return _storage_id(x), x.storage_offset(), tuple(x.shape), tuple(x.stride()), static


def _fused_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """Run attention as the fused flash-attention kernel; with a mask, the memory-efficient one.

    Shapes: query [B, Hq, Sq, D], key/value [B, Hkv, Sk, D]; Hkv divides Hq (grouped-query
    attention is native in the fused kernels: K and V are never repeated in memory).
    """
    if attn_mask is None:
        out = torch.ops.aten._scaled_dot_product_flash_attention(
            query, key, value, dropout_p, is_causal, False, scale=scale)
        return out[0]
    out = torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, attn_mask, False, dropout_p, is_causal, scale=scale)
    return out[0]


def _rms_norm_results(x: torch.Tensor, weight: torch.Tensor | None, dims: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, rstd) of an RMS norm over the last `dims` dimensions of meta tensor `x`, as empty tensors: y like
    x at x's dtype promoted with the weight's, rstd [.., 1] fp32. On meta only shapes, dtypes and strides
    exist, and these are the decomposition's, rstd = rsqrt(x.float().pow(2).mean(dims, keepdim=True) + eps)
    and y = (x.float() * rstd).to(x.dtype) * weight, without running its nine ops through torch's Python
    meta kernels (a quarter of a decoder layer's capture). tests/workload/test_capture.py holds them equal."""
    # mean over no dimension (an empty normalized shape) is torch's mean over all of them
    kept = tuple(x.shape[:x.dim() - dims]) if dims else ()
    rstd = torch.empty(kept + (1,) * (dims or x.dim()), dtype=torch.float32, device=x.device)
    dtype = x.dtype if weight is None else torch.promote_types(x.dtype, weight.dtype)
    return torch.empty_like(x, dtype=dtype), rstd


class _FusedRMSNorm(torch.autograd.Function):
    """RMS norm as one kernel each way: y = x·rsqrt(mean(x²) + eps)·w; saves x and rstd [.., 1] fp32."""

    @staticmethod
    def forward(ctx, x, weight, normalized_shape, eps, recorder):
        recorder.paused = True
        try:
            y, rstd = _rms_norm_results(x, weight, len(normalized_shape))
        finally:
            recorder.paused = False
        recorder.synthetic("aten._fused_rms_norm.default", (("input", x), ("normalized_shape", tuple(normalized_shape)),
                                                            ("weight", weight), ("eps", eps)), (y, rstd))
        ctx.recorder = recorder
        ctx.has_weight = weight is not None
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        recorder = ctx.recorder
        recorder.paused = True
        try:
            grad_x = torch.empty_like(x)
            grad_w = torch.empty_like(weight) if ctx.has_weight else None
        finally:
            recorder.paused = False
        outputs = (grad_x,) + ((grad_w,) if grad_w is not None else ())
        recorder.synthetic("aten._fused_rms_norm_backward.default",
                           (("grad_out", grad), ("input", x), ("rstd", rstd), ("weight", weight)), outputs)
        return grad_x, grad_w, None, None, None


class _FusedAttention(TorchFunctionMode):
    """Routes F.scaled_dot_product_attention, F.rms_norm and training-mode F.dropout to fused kernels while
    capturing. Dropout: on a GPU, aten's dropout runs native_dropout, one kernel writing the output and a bool
    mask (backward: native_dropout_backward), where a meta or CPU tensor takes the composite path (bernoulli_,
    div_, mul: three kernels): aten/src/ATen/native/Dropout.cpp, is_fused_kernel_acceptable (a CUDA input,
    0 < p < 1). The capture counts the GPU's kernel for every target: a CPU runs the composite's three."""

    def __init__(self, recorder: _Recorder):
        super().__init__()
        self._recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            return _fused_sdpa(*args, **kwargs)
        if func is F.rms_norm:
            x, shape = args[0], args[1]
            weight = args[2] if len(args) > 2 else kwargs.get("weight")
            eps = args[3] if len(args) > 3 else kwargs.get("eps")
            if x.device.type == "meta":
                return _FusedRMSNorm.apply(x, weight, tuple(shape), eps, self._recorder)
        if func is F.dropout:
            x = args[0]
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            training = args[2] if len(args) > 2 else kwargs.get("training", True)
            inplace = args[3] if len(args) > 3 else kwargs.get("inplace", False)
            if x.device.type == "meta" and training and 0 < p < 1 and not inplace and x.numel():
                return torch.ops.aten.native_dropout(x, p, True)[0]
        return func(*args, **kwargs)


@dataclass
class Capture:
    """Handle given to the body of `capturing`: set `phase` to "optimizer" around the update."""

    _recorder: _Recorder

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Label the ops run inside the block with phase `name` (one of PHASES)."""
        previous = self._recorder.phase
        self._recorder.phase = name
        try:
            yield
        finally:
            self._recorder.phase = previous

    @contextlib.contextmanager
    def module(self, name: str) -> Iterator[None]:
        """Attribute the ops run inside the block to module `name` (e.g. an optimizer step per layer)."""
        previous = self._recorder.module_override
        self._recorder.module_override = name
        try:
            yield
        finally:
            self._recorder.module_override = previous


    @contextlib.contextmanager
    def repeat(self, count: int) -> Iterator[None]:
        """Count the ops run inside the block `count` times (a denoising loop of identical steps is run
        once and recorded `count` times: same ops, same shapes, in order)."""
        records = self._recorder.records
        start = len(records)
        yield
        once = records[start:]
        for _ in range(count - 1):
            records.extend(once)


class _SavedTensors:
    """Sums the bytes autograd saves for backward, per module, each tensor once, weights excluded."""

    def __init__(self, recorder: _Recorder, exclude: set[int]):
        self.by_module: dict[str, float] = {}
        self._seen: set[int] = set(exclude)
        self._keep: list[torch.Tensor] = []  # keeps ids unique while the capture runs
        self._recorder = recorder

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        base = t._base if t._base is not None else t
        if id(base) not in self._seen and base.device.type == "meta":
            self._seen.add(id(base))
            self._keep.append(base)
            meta = self._recorder._meta(base)
            module = self._recorder._module()
            self.by_module[module] = self.by_module.get(module, 0.0) + meta.numel * meta.bits / 8
        return t

    @staticmethod
    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t


@contextlib.contextmanager
def capturing(capture_dtype: torch.dtype, logical_bits: int, parameters: tuple[torch.Tensor, ...] = (),
              precision: Precision | None = None, weights: tuple[torch.Tensor, ...] = (),
              kv_cache: tuple[torch.Tensor, ...] = ()) -> Iterator[tuple[Capture, list[OpRecord], dict[str, float]]]:
    """Record every aten op run inside the block.

    Yields (handle, records, saved): `records` fills as ops run; `saved` maps module -> bytes of
    activations saved for backward (`parameters` are not activations). Floats of `capture_dtype`
    are counted at `logical_bits` per element; other tensors at their own width. Under a precision
    that is not plain (planner/workload/quant.py), `weights` (the quantized parameters) and
    `kv_cache` (the KV-cache tensors) are counted at its weight and KV widths, and every GEMM on a
    quantized weight reads a quantized copy of its activation operand where the recipe quantizes
    activations (a `quant.quantize` record before it).
    """
    tracker = ModuleTracker()
    recorder = _Recorder(tracker, capture_dtype, logical_bits, precision)
    if precision is not None and not precision.plain:
        recorder.assign(weights, kv_cache)
    saved = _SavedTensors(recorder, {id(p) for p in parameters})
    with tracker, _FusedAttention(recorder), recorder, torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
        yield Capture(recorder), recorder.records, saved.by_module


def capture(fn: Callable[[Capture], Any], capture_dtype: torch.dtype, logical_bits: int, dtype: str,
            parameters: tuple[torch.Tensor, ...] = (), precision: Precision | None = None,
            weights: tuple[torch.Tensor, ...] = (), kv_cache: tuple[torch.Tensor, ...] = ()) -> OpGraph:
    """Run `fn(handle)` under capture and return its OpGraph (ops in execution order); `precision`,
    `weights` and `kv_cache` as in `capturing`."""
    with capturing(capture_dtype, logical_bits, parameters, precision, weights, kv_cache) as (handle, records, saved):
        fn(handle)
    return OpGraph(records=tuple(records), dtype=dtype, saved_bytes=tuple(saved.items()))
