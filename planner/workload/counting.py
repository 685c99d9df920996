"""One registry of pure per-op formulas: OpRecord -> OpCost(flop, bytes_read, bytes_written).

Conventions:
- One multiply-add is 2 FLOP. Matmul-like ops count multiply-adds only (a bias added in the
  epilogue is read but not counted as FLOP, as in torch.utils.flop_counter).
- Bytes are tensor storage actually touched: every tensor argument is read once and every result
  written once; broadcast dimensions count once; an argument an op only writes (copy_'s
  destination, an `out=`) is not read; gathers read the rows they fetch, not the whole table.
- Views and metadata ops cost 0 and are listed as such (category "view"). An op with no formula
  is reported as unsupported with its call count: never silently zero.
- Elementwise ops (aten ops tagged pointwise, and in-place forms) cost 1 FLOP per output element,
  2 for fused multiply-add forms (addcmul, addcdiv, lerp); transcendentals count as 1.
- Quantization recipes (planner/workload/quant.py): a GEMM whose operands differ in element width
  (int4 weights against 16-bit activations: weight-only quantization) dequantizes the narrower one
  in its main loop, (q - zero) x scale: 2 FLOP per element of it, per call, added to the GEMM's FLOP
  (Marlin overlaps this work with the tensor-core multiply; the roofline charges it at the GEMM's
  peak). Scales applied in a GEMM's epilogue (W8A8: per-token x per-channel) are not counted, like a
  bias. The dynamic activation quantization kernel `quant.quantize` (an elementwise op) costs an amax
  compare and a scale multiply per element (1 FLOP for a static scale), reads its input at the
  compute width and writes the quantized copy with its scales.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from planner.memo import IdentityMemo
from planner.workload.capture import OpGraph, OpRecord, TensorMeta


@dataclass(frozen=True, slots=True)
class OpCost:
    """Work of one op or a sum of ops."""

    flop: float = 0.0
    """Floating-point operations (one multiply-add = 2)."""
    bytes_read: float = 0.0
    """Bytes read from device memory."""
    bytes_written: float = 0.0
    """Bytes written to device memory."""

    def __add__(self, other: OpCost) -> OpCost:
        return OpCost(self.flop + other.flop, self.bytes_read + other.bytes_read, self.bytes_written + other.bytes_written)

    @property
    def bytes(self) -> float:
        """Bytes read plus written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP per byte moved (0 when nothing moves)."""
        return self.flop / self.bytes if self.bytes else 0.0


Formula = Callable[[OpRecord], OpCost]
_REGISTRY: dict[str, tuple[str, Formula]] = {}

# Ops that allocate without writing, or only read metadata: cost 0, listed as category "view".
ZERO_COST = frozenset({
    "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty", "aten.new_empty_strided",
    "aten._local_scalar_dense", "aten.lift_fresh", "aten.lift_fresh_copy", "aten.sym_size", "aten.sym_stride",
    "aten.sym_numel", "aten.sym_storage_offset", "aten.is_same_size", "aten.resize_",
    # _unsafe_view reuses its input's storage; its schema just lacks the alias annotation
    "aten._unsafe_view",
    "profiler._record_function_enter_new", "profiler._record_function_exit", "profiler._record_function_enter",
})

# FLOP per element for elementwise ops that are not 1.
_ELEMENTWISE_FLOP = {"aten.addcmul": 2, "aten.addcdiv": 2, "aten.lerp": 2}


def formula(*packets: str, category: str) -> Callable[[Formula], Formula]:
    """Register `fn` as the cost formula of each aten op packet (e.g. "aten.mm"), in `category`."""
    def register(fn: Formula) -> Formula:
        for packet in packets:
            _REGISTRY[packet] = (category, fn)
        return fn
    return register


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def read_tensors(rec: OpRecord, skip: tuple[str, ...] = ()) -> list[TensorMeta]:
    """Every tensor argument an op reads: all but `out` and the names in `skip`, lists flattened."""
    found: list[TensorMeta] = []
    for name, value in rec.args:
        if name == "out" or name in skip:
            continue
        if isinstance(value, TensorMeta):
            found.append(value)
        elif isinstance(value, tuple):
            found.extend(v for v in value if isinstance(v, TensorMeta))
    return found


def written_tensors(rec: OpRecord) -> list[TensorMeta]:
    """The results of an op; for ops that return nothing, the arguments they write."""
    if rec.outputs:
        return list(rec.outputs)
    found: list[TensorMeta] = []
    for name in rec.mutates:
        value = rec.arg(name)
        if isinstance(value, TensorMeta):
            found.append(value)
        elif isinstance(value, tuple):
            found.extend(v for v in value if isinstance(v, TensorMeta))
    return found


def _read(rec: OpRecord, skip: tuple[str, ...] = ()) -> float:
    """Bytes of every tensor argument except `out` and the names in `skip`."""
    return sum(t.bytes for t in read_tensors(rec, skip))


def _written(rec: OpRecord) -> float:
    """Bytes of the results; for ops that return nothing, of the arguments they write."""
    return sum(t.bytes for t in written_tensors(rec))


def _io(rec: OpRecord, flop: float = 0.0, skip: tuple[str, ...] = ()) -> OpCost:
    return OpCost(flop, _read(rec, skip), _written(rec))


def _first(rec: OpRecord, *names: str) -> TensorMeta:
    for name in names:
        value = rec.arg(name)
        if isinstance(value, TensorMeta):
            return value
    return rec.tensors()[0]


# ---------------------------------------------------------------- matmul family

def _dequant(rec: OpRecord, a_name: str, b_name: str) -> float:
    # weight-only quantization: the operand of fewer element bits (scales aside) is dequantized to the
    # other's width in the main loop, (q - zero) x scale = 2 FLOP per element, each call
    a, b = rec.arg(a_name), rec.arg(b_name)
    if not isinstance(a, TensorMeta) or not isinstance(b, TensorMeta) or a.dtype != b.dtype:
        return 0.0
    wa, wb = int(a.bits), int(b.bits)
    if wa == wb:
        return 0.0
    return 2.0 * (a.touched if wa < wb else b.touched)


@formula("aten.mm", "aten._scaled_mm", "aten._int_mm", category="matmul")
def _mm(rec: OpRecord) -> OpCost:
    # a: [M, K] @ b: [K, N] -> [M, N]: 2·M·K·N
    a = _first(rec, "self")
    (m, k), n = a.shape, rec.outputs[0].shape[-1]
    return _io(rec, 2 * m * k * n + _dequant(rec, "self", "mat2"))


@formula("aten.addmm", "aten._addmm_activation", category="matmul")
def _addmm(rec: OpRecord) -> OpCost:
    # bias + a: [M, K] @ b: [K, N]: 2·M·K·N (the bias add, and _addmm_activation's ReLU/GELU, ride in
    # the epilogue: counted as neither FLOP nor a pass through memory, like a bias)
    m, k = rec.arg("mat1").shape
    return _io(rec, 2 * m * k * rec.arg("mat2").shape[1] + _dequant(rec, "mat1", "mat2"))


@formula("aten.bmm", "aten.baddbmm", category="matmul")
def _bmm(rec: OpRecord) -> OpCost:
    # a: [b, M, K] @ b: [b, K, N]: 2·b·M·K·N
    a = _first(rec, "batch1", "self")
    b, m, k = a.shape
    names = ("batch1", "batch2") if rec.packet == "aten.baddbmm" else ("self", "mat2")
    return _io(rec, 2 * b * m * k * rec.outputs[0].shape[-1] + _dequant(rec, *names))


@formula("aten.matmul", "aten.linear", category="matmul")
def _matmul(rec: OpRecord) -> OpCost:
    # any broadcast product: every output element is a K-long dot product: 2·numel(out)·K
    k = _first(rec, "self", "input").shape[-1]
    names = ("input", "weight") if rec.packet == "aten.linear" else ("self", "other")
    return _io(rec, 2 * _numel(rec.outputs[0].shape) * k + _dequant(rec, *names))


@formula("quant.quantize", category="elementwise")
def _quantize(rec: OpRecord) -> OpCost:
    # x [.., K] at the compute width -> q [.., K] at the activation width + scales: an amax compare and
    # a scale multiply per element when the scale is dynamic, the multiply alone when it is static
    x = rec.arg("input")
    return _io(rec, (2 if rec.arg("dynamic") else 1) * _numel(x.shape))


# ---------------------------------------------------------------- convolution

def _conv_flop(x: TensorMeta, w: TensorMeta, y: TensorMeta, transposed: bool) -> float:
    # x: [N, Cin, *in], w: [Cout, Cin/g, *k] (transposed: [Cin, Cout/g, *k]), y: [N, Cout, *out]
    # each output (input, if transposed) position does prod(w) multiply-adds per sample
    spatial = x.shape[2:] if transposed else y.shape[2:]
    return 2.0 * x.shape[0] * _numel(w.shape) * _numel(spatial)


@formula("aten.convolution", "aten._convolution", "aten.cudnn_convolution", "aten.mkldnn_convolution",
         "aten.conv2d", "aten.conv1d", "aten.conv3d", category="conv")
def _conv(rec: OpRecord) -> OpCost:
    x, w = _first(rec, "input", "self"), rec.arg("weight")
    return _io(rec, _conv_flop(x, w, rec.outputs[0], bool(rec.arg("transposed", False))))


@formula("aten.convolution_backward", category="conv")
def _conv_backward(rec: OpRecord) -> OpCost:
    # grad_input and grad_weight each cost one forward convolution; grad_bias is a reduction
    dy, x, w = rec.arg("grad_output"), rec.arg("input"), rec.arg("weight")
    mask = rec.arg("output_mask", (True, True, True))
    fwd = _conv_flop(x, w, dy, bool(rec.arg("transposed", False)))
    flop = fwd * (int(mask[0]) + int(mask[1])) + (_numel(dy.shape) if mask[2] else 0)
    read = dy.bytes + (x.bytes if mask[1] else 0) + (w.bytes if mask[0] else 0)
    return OpCost(flop, read, _written(rec))


# ---------------------------------------------------------------- attention

# Layout of query/key/value: "bhsd" ([B, H, S, D], the SDPA ops) or "bshd" (the raw kernels).
_ATTN_FWD = {
    "aten.scaled_dot_product_attention": "bhsd", "aten._scaled_dot_product_attention_math": "bhsd",
    "aten._scaled_dot_product_flash_attention": "bhsd", "aten._scaled_dot_product_flash_attention_for_cpu": "bhsd",
    "aten._scaled_dot_product_efficient_attention": "bhsd", "aten._scaled_dot_product_cudnn_attention": "bhsd",
    "aten._scaled_dot_product_fused_attention_overrideable": "bhsd",
    "aten._flash_attention_forward": "bshd", "aten._efficient_attention_forward": "bshd",
}
_ATTN_BWD = {
    "aten._scaled_dot_product_flash_attention_backward": "bhsd",
    "aten._scaled_dot_product_flash_attention_for_cpu_backward": "bhsd",
    "aten._scaled_dot_product_efficient_attention_backward": "bhsd",
    "aten._scaled_dot_product_cudnn_attention_backward": "bhsd",
    "aten._scaled_dot_product_fused_attention_overrideable_backward": "bhsd",
    "aten._flash_attention_backward": "bshd", "aten._efficient_attention_backward": "bshd",
}


def attention_flop(q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...], causal: bool, layout: str = "bhsd") -> float:
    """FLOP of softmax(q kᵀ) v: 2·B·H·Sq·Sk·D for the scores plus 2·B·H·Sq·Sk·Dv for the values.

    q [B, H, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] ("bhsd"; "bshd" swaps S and H).
    A causal mask halves both products. Grouped-query attention changes bytes, not FLOP.
    """
    if layout == "bshd":
        b, sq, h, d = q
        sk, dv = k[1], v[-1]
    else:
        *lead, sq, d = q
        b, h = math.prod(lead[:-1]) if len(lead) > 1 else 1, lead[-1]
        sk, dv = k[-2], v[-1]
    flop = 2.0 * b * h * sq * sk * (d + dv)
    return flop / 2 if causal else flop


def _is_causal(rec: OpRecord) -> bool:
    return bool(rec.arg("is_causal", False)) or rec.arg("custom_mask_type", 0) == 1


def _attention(rec: OpRecord, backward: bool) -> OpCost:
    layout = (_ATTN_BWD if backward else _ATTN_FWD)[rec.packet]
    q, k, v = rec.arg("query"), rec.arg("key"), rec.arg("value")
    flop = attention_flop(q.shape, k.shape, v.shape, _is_causal(rec), layout)
    # Fused kernels read Q, K, V (and O, dO, logsumexp in backward) once and write O (dQ, dK, dV)
    # once; the backward recomputes the scores: 5 products against the forward's 2.
    return _io(rec, flop * (2.5 if backward else 1.0))


for _packet in _ATTN_FWD:
    formula(_packet, category="attention")(lambda rec: _attention(rec, backward=False))
for _packet in _ATTN_BWD:
    formula(_packet, category="attention")(lambda rec: _attention(rec, backward=True))


# ---------------------------------------------------------------- normalization and softmax

def _per_element(flop_per_element: float, source: str = "input") -> Formula:
    def cost(rec: OpRecord) -> OpCost:
        x = _first(rec, source, "self", "input", "grad_out", "grad_output")
        return _io(rec, flop_per_element * _numel(x.shape))
    return cost


# layer norm: mean, centre, square, sum, scale, affine multiply, affine add = 7 per element
formula("aten.native_layer_norm", "aten.layer_norm", "aten.native_group_norm", "aten.group_norm",
        category="norm")(_per_element(7))
formula("aten.native_layer_norm_backward", "aten.native_group_norm_backward", category="norm")(_per_element(14, "grad_out"))
# RMS norm: square, sum, scale, weight multiply = 4 per element
formula("aten._fused_rms_norm", "aten.rms_norm", category="norm")(_per_element(4))
formula("aten._fused_rms_norm_backward", category="norm")(_per_element(8, "grad_out"))


@formula("aten.native_batch_norm", "aten._native_batch_norm_legit", "aten._native_batch_norm_legit_no_training",
         "aten._native_batch_norm_legit_functional", "aten.cudnn_batch_norm", "aten.batch_norm",
         "aten._batch_norm_with_update", "aten._batch_norm_no_update", category="norm")
def _batch_norm(rec: OpRecord) -> OpCost:
    # inference folds statistics into one scale and shift: 2 per element; training computes them: 7
    training = bool(rec.arg("training", "no_training" not in rec.packet and "no_update" not in rec.packet))
    return _io(rec, (7 if training else 2) * _numel(rec.arg("input").shape))


formula("aten.native_batch_norm_backward", "aten.cudnn_batch_norm_backward", "aten.batch_norm_backward",
        category="norm")(_per_element(14, "grad_out"))
# softmax: max, subtract, exp, sum, divide = 5 per element; its backward y·(dy − Σ dy·y) = 4
formula("aten._softmax", "aten._log_softmax", "aten._safe_softmax", "aten.softmax", "aten.log_softmax",
        category="softmax")(_per_element(5, "self"))
formula("aten._softmax_backward_data", "aten._log_softmax_backward_data", category="softmax")(_per_element(4, "grad_output"))


# ---------------------------------------------------------------- reductions, sort

_REDUCTIONS = ("aten.sum", "aten.mean", "aten.amax", "aten.amin", "aten.max", "aten.min", "aten.prod",
               "aten.argmax", "aten.argmin", "aten.any", "aten.all", "aten.logsumexp", "aten.norm",
               "aten.linalg_vector_norm", "aten.cumsum", "aten.cumprod", "aten.count_nonzero")
formula(*_REDUCTIONS, category="reduction")(_per_element(1, "self"))
# variance: subtract the mean, square, sum = 3 per element
formula("aten.var", "aten.std", "aten.var_mean", "aten.std_mean", category="reduction")(_per_element(3, "self"))


@formula("aten.sort", "aten.argsort", "aten.topk", "aten.kthvalue", "aten.msort", category="sort")
def _sort(rec: OpRecord) -> OpCost:
    # comparison sort along one dimension: n·log2(n) per row; top-k: n·log2(k)
    x = rec.arg("self")
    dim = rec.arg("dim", -1)
    n = x.shape[dim] if x.shape else 1
    width = rec.arg("k", n) if rec.packet == "aten.topk" else n
    return _io(rec, _numel(x.shape) * max(1.0, math.log2(max(width, 2))))


# ---------------------------------------------------------------- gather, scatter, embedding

def _gathered(rec: OpRecord, table: str) -> OpCost:
    # reads the index and only the rows it fetches (as many elements as the output holds)
    src, out = rec.arg(table), rec.outputs[0]
    index_bytes = _read(rec, skip=(table,))
    return OpCost(0.0, index_bytes + _numel(out.shape) * src.bits / 8, out.bytes)


@formula("aten.embedding", category="embedding")
def _embedding(rec: OpRecord) -> OpCost:
    return _gathered(rec, "weight")


@formula("aten.index_select", "aten.gather", "aten.index", "aten.take", "aten.take_along_dim", category="embedding")
def _gather(rec: OpRecord) -> OpCost:
    return _gathered(rec, "self")


@formula("aten.embedding_dense_backward", category="embedding")
def _embedding_backward(rec: OpRecord) -> OpCost:
    # accumulates each gradient row into the table gradient: 1 add per gradient element
    grad = rec.arg("grad_output")
    return _io(rec, _numel(grad.shape))


@formula("aten.index_add", "aten.index_add_", "aten.scatter_add", "aten.scatter_add_", "aten.index_put",
         "aten.index_put_", "aten._index_put_impl_", "aten.index_copy", "aten.index_copy_", "aten.scatter",
         "aten.scatter_", "aten.scatter_reduce", "aten.scatter_reduce_", category="embedding")
def _scatter(rec: OpRecord) -> OpCost:
    # reads the source and index, read-modify-writes as many destination elements as the source has
    src = _first(rec, "source", "src", "values")
    accumulate = rec.packet.startswith(("aten.index_add", "aten.scatter_add", "aten.scatter_reduce")) or bool(rec.arg("accumulate", False))
    dest = _first(rec, "self")
    touched = _numel(src.shape) * dest.bits / 8
    read = _read(rec, skip=("self",)) + (touched if accumulate else 0)
    return OpCost(_numel(src.shape) if accumulate else 0.0, read, touched)


@formula("aten.nll_loss_forward", "aten.nll_loss", "aten.nll_loss2d_forward", category="loss")
def _nll(rec: OpRecord) -> OpCost:
    # picks one log-probability per target and sums them: reads targets and N elements
    target = rec.arg("target")
    n = _numel(target.shape)
    return OpCost(n, target.bytes + n * rec.arg("self").bits / 8, _written(rec))


@formula("aten.nll_loss_backward", "aten.nll_loss2d_backward", category="loss")
def _nll_backward(rec: OpRecord) -> OpCost:
    # writes the whole [N, C] gradient (zeros but one element per row)
    target = rec.arg("target")
    return OpCost(_numel(target.shape), target.bytes + rec.arg("grad_output").bytes, _written(rec))


# ---------------------------------------------------------------- pooling

@formula("aten.max_pool2d_with_indices", "aten.max_pool2d", "aten.avg_pool2d", "aten.max_pool1d",
         "aten.avg_pool1d", "aten.max_pool3d_with_indices", "aten.avg_pool3d", category="pool")
def _pool(rec: OpRecord) -> OpCost:
    # one compare or add per window element per output
    kernel = rec.arg("kernel_size")
    return _io(rec, _numel(rec.outputs[0].shape) * _numel(tuple(kernel)))


@formula("aten._adaptive_avg_pool2d", "aten.adaptive_avg_pool2d", "aten._adaptive_avg_pool3d",
         "aten.adaptive_max_pool2d", category="pool")
def _adaptive_pool(rec: OpRecord) -> OpCost:
    # every input element is added once
    return _io(rec, _numel(rec.arg("self").shape))


formula("aten.max_pool2d_with_indices_backward", "aten.avg_pool2d_backward", "aten._adaptive_avg_pool2d_backward",
        "aten.max_pool3d_with_indices_backward", "aten.avg_pool3d_backward",
        category="pool")(_per_element(1, "grad_output"))


# ---------------------------------------------------------------- copies and fills

@formula("aten._to_copy", "aten.clone", "aten.contiguous", "aten.cat", "aten.stack",
         "aten.repeat", "aten.repeat_interleave", "aten.flip", "aten.roll", "aten.constant_pad_nd",
         "aten.pad", "aten.tril", "aten.triu", "aten.masked_select", "aten.expand_copy", "aten.view_copy",
         "aten.slice_backward", "aten.select_backward", "aten.unsqueeze_copy", "aten.transpose_copy",
         "aten.permute_copy", "aten._reshape_copy", "aten.split_with_sizes_copy", category="copy")
def _copy(rec: OpRecord) -> OpCost:
    return _io(rec)


@formula("aten.copy_", "aten.copy", category="copy")
def _copy_into(rec: OpRecord) -> OpCost:
    # reads the source, writes the destination (not read)
    return OpCost(0.0, _read(rec, skip=("self",)), _first(rec, "self").bytes)


@formula("aten.zeros", "aten.ones", "aten.full", "aten.zeros_like", "aten.ones_like", "aten.full_like",
         "aten.new_zeros", "aten.new_ones", "aten.new_full", "aten.arange", "aten.scalar_tensor", "aten.fill",
         "aten.fill_", "aten.zero_", "aten.zero", "aten.linspace", "aten.randn", "aten.rand", "aten.randint",
         "aten.rand_like", "aten.randn_like", "aten.bernoulli", "aten.bernoulli_", "aten.normal_",
         "aten.uniform_", category="fill")
def _fill(rec: OpRecord) -> OpCost:
    # writes its result; reads nothing but a scalar
    written = _written(rec) if rec.outputs else _first(rec, "self").bytes
    return OpCost(0.0, 0.0, written)


# ---------------------------------------------------------------- optimizer

@formula("aten._fused_adamw_", "aten._fused_adam_", "aten._fused_adamw", "aten._fused_adam", category="optimizer")
def _fused_adamw(rec: OpRecord) -> OpCost:
    # per parameter element: m = β1·m + (1−β1)·g (3); v = β2·v + (1−β2)·g² (4);
    # p −= lr·m̂ / (√v̂ + ε) (sqrt, add, divide, multiply, subtract: 5); p −= lr·λ·p (2) = 14
    params = rec.arg("self")
    n = sum(_numel(p.shape) for p in params)
    amsgrad = bool(rec.arg("amsgrad", False))
    groups = ("self", "grads", "exp_avgs", "exp_avg_sqs") + (("max_exp_avg_sqs",) if amsgrad else ())
    written_groups = ("self", "exp_avgs", "exp_avg_sqs") + (("max_exp_avg_sqs",) if amsgrad else ())

    def size(name: str) -> float:
        return sum(t.bytes for t in rec.arg(name) or ())

    return OpCost(14.0 * n, sum(size(g) for g in groups), sum(size(g) for g in written_groups))


def _foreach(rec: OpRecord) -> OpCost:
    # a list of elementwise ops: 1 FLOP per element of the first list
    first = next((v for _, v in rec.args if isinstance(v, tuple) and v and isinstance(v[0], TensorMeta)), ())
    return _io(rec, sum(_numel(t.shape) for t in first))


# ---------------------------------------------------------------- elementwise

def _elementwise(rec: OpRecord) -> OpCost:
    target = rec.outputs[0] if rec.outputs else _first(rec, "self")
    return _io(rec, _ELEMENTWISE_FLOP.get(rec.packet.rstrip("_"), 1) * _numel(target.shape))


_ELEMENTWISE_EXTRA = frozenset({
    "aten.where", "aten.masked_fill", "aten.masked_fill_", "aten.clamp", "aten.clamp_", "aten.gelu_backward",
    "aten.silu_backward", "aten.threshold_backward", "aten.tanh_backward", "aten.sigmoid_backward",
    "aten.hardtanh_backward", "aten.mse_loss", "aten.mse_loss_backward", "aten.native_dropout",
    "aten.native_dropout_backward",
})


@dataclass(frozen=True, slots=True)
class CountedOp:
    """An op record with its cost and category."""

    record: OpRecord
    cost: OpCost
    category: str
    """"matmul", "conv", "attention", "norm", "softmax", "elementwise", "reduction", "sort",
    "embedding", "loss", "pool", "copy", "fill", "optimizer", "view" or "unsupported"."""


def classify(rec: OpRecord, pointwise: bool) -> tuple[str, OpCost]:
    """Return (category, cost) of one op; category "unsupported" with a zero cost if no formula."""
    entry = _REGISTRY.get(rec.packet)
    if entry is not None:
        category, fn = entry
        return category, fn(rec)
    if rec.packet in ZERO_COST or rec.is_view:
        return "view", _FREE
    if rec.packet.startswith("aten._foreach_"):
        return "optimizer" if rec.phase == "optimizer" else "elementwise", _foreach(rec)
    if pointwise or rec.packet in _ELEMENTWISE_EXTRA:
        return "elementwise", _elementwise(rec)
    return "unsupported", _FREE


_FREE = OpCost()
"""The cost of a view or an op without a formula, one object for all (half a graph's records are views)."""


def has_formula(packet: str) -> bool:
    """True when `packet` has a registered formula or is a known zero-cost op."""
    return packet in _REGISTRY or packet in ZERO_COST


@dataclass(frozen=True, slots=True)
class Counts:
    """Costs of every op of a graph, with totals and the unsupported ops."""

    ops: tuple[CountedOp, ...]
    """Every op in execution order."""
    total: OpCost
    """Sum over every op."""
    unsupported: tuple[tuple[str, int], ...]
    """(op, calls) of ops with no formula, most called first; their cost is not in `total`."""
    dtype: str
    """Logical dtype the floats were counted at."""

    def table(self, by: str = "op") -> pd.DataFrame:
        """Return a DataFrame grouped by "op", "module", "category" or "phase".

        Columns: calls, flop, bytes_read, bytes_written, flop_share. Module paths collapse layer
        indices ("layers.*.attn") so one row covers every layer. Sorted by FLOP, then bytes.
        """
        keys = {"op": lambda c: c.record.op, "category": lambda c: c.category, "phase": lambda c: c.record.phase,
                "module": lambda c: _collapse(c.record.module)}
        if by not in keys:
            raise ValueError(f"by must be one of {sorted(keys)}")
        key = keys[by]
        rows: dict[str, list[float]] = {}
        for c in self.ops:
            row = rows.setdefault(key(c), [0, 0.0, 0.0, 0.0])
            row[0] += 1
            row[1] += c.cost.flop
            row[2] += c.cost.bytes_read
            row[3] += c.cost.bytes_written
        frame = pd.DataFrame.from_dict(rows, orient="index", columns=["calls", "flop", "bytes_read", "bytes_written"])
        frame.index.name = by
        frame["calls"] = frame["calls"].astype(int)
        frame["flop_share"] = frame["flop"] / self.total.flop if self.total.flop else 0.0
        return frame.sort_values(["flop", "bytes_read"], ascending=False)


def _collapse(module: str) -> str:
    return ".".join("*" if part.isdigit() else part for part in module.split(".")) if module else "(top)"


def count(graph: OpGraph, pointwise: frozenset[str] | None = None) -> Counts:
    """Cost every op of `graph`; `pointwise` is the set of packets torch tags pointwise."""
    tags = pointwise if pointwise is not None else pointwise_packets(graph)
    ops = []
    total = OpCost()
    unsupported: Counter[str] = Counter()
    for rec in graph.records:
        category, cost = classify(rec, rec.packet in tags)
        if category == "unsupported":
            unsupported[rec.op] += 1
        ops.append(CountedOp(rec, cost, category))
        total = total + cost
    return Counts(tuple(ops), total, tuple(unsupported.most_common()), graph.dtype)


def pointwise_packets(graph: OpGraph) -> frozenset[str]:
    """Packets in `graph` that torch tags as pointwise (elementwise) ops."""
    return frozenset(packet for packet in {r.packet for r in graph.records} if _pointwise(packet))


def _pointwise(packet: str) -> bool:
    # torch's tags of an op are fixed once it is registered: look each packet up once per process
    # rather than once per graph (walking an op's overloads costs ~10 us, a graph holds ~40 packets).
    # A packet torch does not know is looked up again next time: a library may register it later.
    found = _POINTWISE.get(packet)
    if found is None:
        import torch

        namespace, _, name = packet.partition(".")
        op = getattr(getattr(torch.ops, namespace, None), name, None)
        if op is None:
            return False
        found = _POINTWISE[packet] = any(torch.Tag.pointwise in getattr(op, overload).tags
                                         for overload in op.overloads())
    return found


_POINTWISE: dict[str, bool] = {}


def classified(graph: OpGraph) -> tuple[tuple[str, ...], tuple[OpCost, ...]]:
    """(category, cost) of every record of `graph`, in order, as two tuples: `classify` of each, with
    torch's pointwise tags. Memoized by the graph's identity: a device graph lowers one capture for
    each engine it is asked under (a cold `compare` lowers 75 captures 135 times), and the costs
    depend on the records alone."""
    return _CLASSIFIED.get((graph,), (), lambda: _classified(graph))


_CLASSIFIED = IdentityMemo(256)  # as many graphs as device_graph._captured keeps (it keeps them alive)


def _classified(graph: OpGraph) -> tuple[tuple[str, ...], tuple[OpCost, ...]]:
    tags = pointwise_packets(graph)
    pairs = [classify(rec, rec.packet in tags) for rec in graph.records]
    return tuple([c for c, _ in pairs]), tuple([cost for _, cost in pairs])


def clear_classified() -> None:
    """Forget the memoized classifications (for a benchmark that times classifying)."""
    _CLASSIFIED.clear()


from planner.workload import counting_library  # noqa: E402,F401  (registers its formulas into _REGISTRY)
