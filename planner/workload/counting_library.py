"""Cost formulas of ops that only library-built models run (planner_models.library): torchvision's
detection operators, embedding bags. Registered into planner/workload/counting.py's table on import
(counting.py imports this module at its end), so they follow the same rules: FLOP in multiply-adds x 2,
bytes read and written as the op's kernel moves them.
"""

from __future__ import annotations

from planner.workload.capture import OpRecord
from planner.workload.counting import OpCost, _first, _io, _written, formula

# ---------------------------------------------------------------- torchvision detection operators

ROI_ALIGN_ADAPTIVE_SAMPLES = 2
"""Samples per bin side assumed when roi_align's sampling_ratio <= 0 (torchvision then takes
ceil(roi_size / pooled_size) per RoI, data dependent): 2, the value for the RoI size FPN's level mapping
is built around (a canonical 224-pixel box on level 4, stride 16: 14 cells over 7 bins)."""


def _roi_samples(rec: OpRecord) -> int:
    """Bilinear samples per output bin of a roi_align op (sampling_ratio squared)."""
    ratio = rec.arg("sampling_ratio", 0)
    side = ratio if isinstance(ratio, int) and ratio > 0 else ROI_ALIGN_ADAPTIVE_SAMPLES
    return side * side


@formula("torchvision.roi_align", category="pool")
def _roi_align(rec: OpRecord) -> OpCost:
    # out [K, C, h, w]: each bin averages sampling_ratio^2 bilinear samples of 4 taps (4 multiply-adds =
    # 8 FLOP each) and divides once. Reads one input element per sample (a sample's 4 taps are shared with
    # its neighbours' at about one cell apart), at most the whole input, and the RoIs; writes the output.
    x, out = rec.arg("input"), rec.outputs[0]
    n, samples = out.numel, _roi_samples(rec)
    read = min(n * samples, x.numel) * x.bits / 8 + rec.arg("rois").bytes
    return OpCost(n * (8.0 * samples + 1), read, out.bytes)


@formula("torchvision._roi_align_backward", category="pool")
def _roi_align_backward(rec: OpRecord) -> OpCost:
    # scatters each output gradient to sampling_ratio^2 samples x 4 taps (a weight multiply and an atomic
    # add each: 8 FLOP per sample); the input gradient is zero-filled, then read-modified-written once per
    # sample (at most its whole size)
    grad, out = rec.arg("grad"), rec.outputs[0]
    n, samples = grad.numel, _roi_samples(rec)
    touched = min(n * samples, out.numel) * out.bits / 8
    return OpCost(8.0 * n * samples, grad.bytes + rec.arg("rois").bytes + touched, out.bytes + touched)


# ---------------------------------------------------------------- upsampling (FPN top-down path, DeepLabV3)

@formula("aten.upsample_nearest2d", "aten._upsample_nearest_exact2d", "aten.upsample_nearest1d",
         "aten.upsample_nearest3d", category="copy")
def _upsample_nearest(rec: OpRecord) -> OpCost:
    # a gather: each output element copies one input element
    return OpCost(0.0, _first(rec, "input", "self").bytes, _written(rec))


@formula("aten.upsample_bilinear2d", "aten._upsample_bilinear2d_aa", "aten.upsample_linear1d",
         "aten.upsample_bicubic2d", category="elementwise")
def _upsample_interpolate(rec: OpRecord) -> OpCost:
    # each output element weighs its taps (2 per interpolated dimension: 4 bilinear, 16 bicubic): a
    # multiply-add per tap
    taps = {"aten.upsample_linear1d": 2, "aten.upsample_bicubic2d": 16}.get(rec.packet, 4)
    out = rec.outputs[0]
    return OpCost(2.0 * taps * out.numel, _first(rec, "input", "self").bytes, out.bytes)


@formula("aten.upsample_nearest2d_backward", "aten._upsample_nearest_exact2d_backward",
         "aten.upsample_nearest1d_backward", "aten.upsample_nearest3d_backward", category="copy")
def _upsample_nearest_backward(rec: OpRecord) -> OpCost:
    # sums each input cell's output gradients: an add per output-gradient element
    return _io(rec, rec.arg("grad_output").numel)


@formula("aten.upsample_bilinear2d_backward", "aten._upsample_bilinear2d_aa_backward",
         "aten.upsample_linear1d_backward", "aten.upsample_bicubic2d_backward", category="elementwise")
def _upsample_interpolate_backward(rec: OpRecord) -> OpCost:
    # scatters each output gradient to its taps with their weights: a multiply-add per tap
    taps = {"aten.upsample_linear1d_backward": 2, "aten.upsample_bicubic2d_backward": 16}.get(rec.packet, 4)
    return _io(rec, 2.0 * taps * rec.arg("grad_output").numel)


# ---------------------------------------------------------------- embedding bags (planner_models.dlrm)
# A recommender's tables hold up to ~10^10 elements, of which one batch touches a few million: every bag op
# below counts the rows it gathers or updates, never the table. N: indices looked up (batch x pooling
# factor), D: row width, R: table rows, B: bags.

from planner.workload.counting import read_tensors, written_tensors  # noqa: E402


@formula("aten._embedding_bag", "aten._embedding_bag_forward_only", "aten.embedding_bag", category="embedding")
def _embedding_bag(rec: OpRecord) -> OpCost:
    # weight [R, D], indices [N], offsets [B] -> pooled [B, D]: reads the N rows it pools (N x D elements at
    # the table's width), the indices, offsets and per-sample weights; writes the B pooled rows. One add per
    # pooled element (a multiply-add with per-sample weights; mean mode adds a divide per output element).
    # offset2bag, bag_size and max_indices, which aten keeps for its own backward, are not counted: FBGEMM's
    # table-batched kernels (torchrec) write only the pooled rows.
    weight, n = rec.arg("weight"), rec.arg("indices").numel
    d, out = weight.shape[-1], rec.outputs[0]
    flop = (2 if rec.arg("per_sample_weights") is not None else 1) * n * d + (out.numel if rec.arg("mode") == 1 else 0)
    return OpCost(flop, sum(t.bytes for t in read_tensors(rec, skip=("weight",))) + n * d * weight.bits / 8, out.bytes)


@formula("aten._embedding_bag_backward", "aten._embedding_bag_dense_backward", "aten._embedding_bag_sparse_backward",
         category="embedding")
def _embedding_bag_backward(rec: OpRecord) -> OpCost:
    # grad [B, D] -> table gradient [R, D]: each looked-up index adds its bag's gradient row into its table row.
    # Counted as a sparse table's kernel runs it (FBGEMM's backward, torch's sparse=True gradient): reads a
    # gradient row per index (N x D) and the index tensors, writes the min(N, R) rows touched; the other rows
    # of a dense gradient, and the zero fill a dense CUDA gradient starts from, are not counted.
    grad, n = rec.arg("grad"), rec.arg("indices").numel
    d = grad.shape[-1]
    bits = rec.outputs[0].bits if rec.outputs else grad.bits
    index_bytes = sum(t.bytes for t in read_tensors(rec, skip=("grad",)))
    return OpCost(n * d, index_bytes + n * d * grad.bits / 8, min(n, rec.arg("num_weights")) * d * bits / 8)


@formula("planner_models.embedding_bag_adagrad_", category="embedding")
def _embedding_bag_adagrad(rec: OpRecord) -> OpCost:
    # A table's backward fused with exact Adagrad (planner_models.dlrm; FBGEMM EXACT_ADAGRAD, as torchrec's
    # apply_optimizer_in_backward runs it): reads a gradient row per index (N x D) and the indices and offsets,
    # accumulates them into the U = min(N, R) touched rows (N x D adds), then per touched element
    # s += g² (2), w -= lr·g / (√s + eps) (5): reads and writes U rows of the weight and of the fp32 state.
    grad, n = rec.arg("grad_output"), rec.arg("indices").numel
    weight, state = rec.arg("weight"), rec.arg("momentum")
    d = weight.shape[-1]
    touched = min(n, weight.shape[0]) * d
    index_bytes = rec.arg("indices").bytes + rec.arg("offsets").bytes
    rows = touched * (weight.bits + state.bits) / 8
    return OpCost(n * d + 7 * touched, index_bytes + n * d * grad.bits / 8 + rows, rows)


@formula("aten.binary_cross_entropy_with_logits", category="loss")
def _bce_with_logits(rec: OpRecord) -> OpCost:
    # per element (1 − y)·x + log(1 + exp(−x)) in its stable form: 6 FLOP, and 1 to reduce it; reads the
    # logits, targets and any weights, writes the loss
    return OpCost(7 * rec.arg("self").numel, sum(t.bytes for t in read_tensors(rec)),
                  sum(t.bytes for t in written_tensors(rec)))


# ---------------------------------------------------------------- metadata

@formula("aten.as_strided_", category="view")
def _restride(rec: OpRecord) -> OpCost:
    # changes a tensor's sizes and strides in place, moving no data (the meta kernel of adaptive pooling
    # restrides its output to the input's memory format: timm's SelectAdaptivePool2d)
    return OpCost()
