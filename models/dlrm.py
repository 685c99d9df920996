"""DLRM-DCNv2, the MLPerf Training recommendation benchmark, in plain PyTorch (builder "dlrm").

The MLPerf reference (github.com/mlcommons/training, recommendation_v2/torchrec_dlrm: README.MD and
dlrm_main.py) builds torchrec's DLRM_DCN:

    13 dense features -> bottom MLP 512-256-128 (ReLU after every layer: torchrec DenseArch)
    26 sparse features -> one EmbeddingBag(mode="sum") table each, dimension 128, multi-hot: table t
        pools `multi_hot_sizes[t]` rows per sample (its pooling factor)
    [dense, 26 pooled] concatenated -> 27 x 128 = 3456 features -> DCNv2 low-rank cross net, 3 layers of
        rank 512: x_{l+1} = x_0 * (W_l (V_l x_l) + b_l) + x_l (torchrec LowRankCrossNet)
    -> top MLP 1024-1024-512-256 with ReLU, then a Linear to 1 logit (torchrec OverArch)
    training loss: binary cross entropy with logits against the click label (torchrec DLRMTrain)

Top-level children: `bottom_mlp`, `embeddings` (the 26 tables), `interaction` (the cross net) and
`top_mlp`, so a WorkloadGraph's param_by_top shows where the tables' parameters live.

Embedding-bag costs count the rows a batch touches, never the table (planner/workload/counting_library.py):
a lookup reads batch x pooling rows of the table and writes batch pooled rows.

Training updates the tables as the MLPerf reference does: `apply_optimizer_in_backward(Adagrad, sparse_arch)`
fuses an exact row-wise Adagrad step into the tables' backward (FBGEMM's EXACT_ADAGRAD), so no dense
gradient of the tables is formed and the dense optimizer never sees them. Here each table's backward is one
op, `planner_models.embedding_bag_adagrad_`, which accumulates the pooled gradient into the touched rows and
updates them and their fp32 Adagrad state in place (at most min(rows looked up, table rows) rows); the table
parameters are left without a `.grad`, so the AdamW step of planner/workload/graphs.py updates only the MLPs
and the cross net.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

ADAGRAD_LR = 0.005
"""Learning rate of the MLPerf run (README.MD: `--adagrad --learning_rate 0.005`)."""
ADAGRAD_EPS = 1e-10
"""dlrm_main.py ADAGRAD_EPS."""
MAX_TABLES = 1024
"""Sparse features (tables) accepted; Criteo has 26."""
MAX_TABLE_ELEMENTS = 2**40
"""Sum over tables of rows x embedding_dim: the MLPerf tables hold 204,184,588 x 128 = 2.6e10 (2**34.6)."""
MAX_WIDTH = 65536
"""Largest MLP layer, embedding dimension or cross-net rank."""
MAX_POOLING = 65536
"""Largest multi-hot size (rows pooled per sample) of one table; MLPerf's largest is 100."""
MAX_INTERACTION = 2**20
"""(tables + 1) x embedding_dim: the width of the cross net (MLPerf: 27 x 128 = 3,456)."""


def _adagrad_rows(grad_output: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, weight: torch.Tensor,
                  momentum: torch.Tensor, lr: float, eps: float) -> None:
    """Exact Adagrad on the rows a sum-pooled lookup touched (real devices; meta tensors skip it).

    grad_output [B, D]: the gradient of the pooled rows; indices [N] and offsets [B] as F.embedding_bag takes
    them; weight [R, D] and momentum [R, D] (fp32) are updated in place at the rows in `indices`.
    """
    if weight.device.type == "meta":
        return
    counts = torch.diff(offsets, append=offsets.new_tensor([indices.numel()]))
    bags = torch.repeat_interleave(torch.arange(offsets.numel(), device=offsets.device), counts)
    rows, inverse = torch.unique(indices, return_inverse=True)
    grad = torch.zeros((rows.numel(), weight.shape[1]), dtype=torch.float32, device=weight.device)
    grad.index_add_(0, inverse, grad_output.float()[bags])
    state = momentum[rows] + grad * grad
    momentum[rows] = state
    weight[rows] = (weight[rows].float() - lr * grad / (state.sqrt() + eps)).to(weight.dtype)


_OP = torch.library.custom_op("planner_models::embedding_bag_adagrad_", mutates_args=("weight", "momentum"))(
    _adagrad_rows)
"""One fused kernel per table in training: the embedding bag's backward and the Adagrad step on the touched
rows (FBGEMM split_table_batched_embeddings backward with OptimType.EXACT_ADAGRAD). Counted by
planner/workload/counting_library.py."""


@_OP.register_fake
def _(grad_output, indices, offsets, weight, momentum, lr, eps) -> None:
    return None


class _BagUpdatedInBackward(torch.autograd.Function):
    """A sum-pooled lookup whose backward updates the table in place and returns no table gradient."""

    @staticmethod
    def forward(ctx, weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor, table: FusedEmbeddingBag):
        ctx.table = table
        ctx.save_for_backward(indices, offsets)
        return F.embedding_bag(indices, weight, offsets, mode="sum")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        indices, offsets = ctx.saved_tensors
        table = ctx.table
        torch.ops.planner_models.embedding_bag_adagrad_(grad, indices, offsets, table.weight,
                                                         table.adagrad_state(), ADAGRAD_LR, ADAGRAD_EPS)
        return None, None, None, None


class FusedEmbeddingBag(nn.EmbeddingBag):
    """nn.EmbeddingBag(mode="sum") whose training step updates its rows in its backward (torchrec's fused
    optimizer); in inference, or without autograd, a plain embedding bag."""

    def __init__(self, rows: int, dim: int):
        super().__init__(rows, dim, mode="sum")
        self._state: torch.Tensor | None = None

    def adagrad_state(self) -> torch.Tensor:
        """The fp32 Adagrad sum of squared gradients [rows, dim], made on first use (never a parameter)."""
        w = self.weight
        if self._state is None or self._state.shape != w.shape or self._state.device != w.device:
            make = torch.empty if w.device.type == "meta" else torch.zeros
            self._state = make(w.shape, dtype=torch.float32, device=w.device)
        return self._state

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Pooled rows [B, dim] (sum of each bag's rows) for indices [N] and bag offsets [B]."""
        if self.training and torch.is_grad_enabled() and self.weight.requires_grad:
            return _BagUpdatedInBackward.apply(self.weight, indices, offsets, self)
        return F.embedding_bag(indices, self.weight, offsets, mode="sum")


class LowRankCrossNet(nn.Module):
    """DCNv2's low-rank cross layers (torchrec.modules.crossnet.LowRankCrossNet): per layer l,
    x_{l+1} = x_0 * (W_l (V_l x_l) + b_l) + x_l with V_l [rank, N], W_l [N, rank], b_l [N]."""

    def __init__(self, width: int, layers: int, rank: int):
        super().__init__()
        self.V_kernels = nn.ParameterList([nn.Parameter(torch.empty(rank, width)) for _ in range(layers)])
        self.W_kernels = nn.ParameterList([nn.Parameter(torch.empty(width, rank)) for _ in range(layers)])
        self.bias = nn.ParameterList([nn.Parameter(torch.zeros(width)) for _ in range(layers)])
        if self.bias[0].device.type != "meta":
            for p in list(self.V_kernels) + list(self.W_kernels):
                nn.init.xavier_normal_(p)

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for v, w, b in zip(self.V_kernels, self.W_kernels, self.bias):
            x = x0 * (F.linear(F.linear(x, v), w) + b) + x
        return x


def _mlp(width_in: int, sizes: tuple[int, ...], relu_last: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, width in enumerate(sizes):
        layers.append(nn.Linear(width_in, width))
        if relu_last or i < len(sizes) - 1:
            layers.append(nn.ReLU())
        width_in = width
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """DLRM with DCNv2 interaction; forward(dense [B, F], indices, offsets) -> click logits [B]."""

    def __init__(self, cfg: DLRMConfig):
        super().__init__()
        d = cfg.embedding_dim
        self.bottom_mlp = _mlp(cfg.dense_features, cfg.dense_arch_layer_sizes, relu_last=True)
        self.embeddings = nn.ModuleList(FusedEmbeddingBag(rows, d) for rows in cfg.num_embeddings_per_feature)
        width = (len(cfg.num_embeddings_per_feature) + 1) * d
        self.interaction = LowRankCrossNet(width, cfg.dcn_num_layers, cfg.dcn_low_rank_dim)
        self.top_mlp = _mlp(width, cfg.over_arch_layer_sizes, relu_last=False)

    def forward(self, dense: torch.Tensor, indices: tuple[torch.Tensor, ...],
                offsets: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Logits [B] for dense features [B, F], and per table its indices [B x pooling] and offsets [B]."""
        pooled = [bag(i, o) for bag, i, o in zip(self.embeddings, indices, offsets)]
        features = torch.cat([self.bottom_mlp(dense), *pooled], dim=1)  # [B, (T + 1) x D]
        return self.top_mlp(self.interaction(features)).squeeze(-1)


@dataclass(frozen=True, slots=True)
class DLRMConfig:
    """A DLRM-DCNv2 architecture, in the MLPerf reference's flag names (dlrm_main.py)."""

    dense_features: int
    """Dense (integer) features per sample: 13 for Criteo (torchrec DEFAULT_INT_NAMES)."""
    num_embeddings_per_feature: tuple[int, ...]
    """Rows of each sparse feature's table."""
    multi_hot_sizes: tuple[int, ...]
    """Rows each sample looks up in each table (the pooling factor), summed into one row."""
    embedding_dim: int
    dense_arch_layer_sizes: tuple[int, ...]
    over_arch_layer_sizes: tuple[int, ...]
    dcn_num_layers: int
    dcn_low_rank_dim: int
    family: str = "recommender"
    repeats: bool = False

    def build(self) -> DLRM:
        """The module on the current default device (meta when counting: the tables allocate nothing)."""
        return DLRM(self)

    def sizes(self, workload: Any) -> dict:
        """No sizes beside the batch: one sample is one row of dense features and its lookups."""
        for name in ("seq_len", "image_size", "steps"):
            if getattr(workload, name) is not None:
                raise ValueError(f"{name} does not apply to a DLRM (a sample is 13 dense features and its "
                                 "embedding lookups); set only the batch")
        return {}

    def lookups(self, batch: int) -> tuple[int, ...]:
        """Rows looked up in each table by one batch: batch x multi-hot size."""
        return tuple(batch * p for p in self.multi_hot_sizes)

    def inputs(self, module: nn.Module, workload: Any, device: str, dtype: torch.dtype):
        """(args, kwargs, labels): dense features [B, F] at `dtype`; per table int64 indices [B x pooling]
        (uniform over its rows on a real device) and offsets [B] (bag b starts at b x pooling); labels [B]
        click labels (0 or 1) at `dtype`, for training."""
        b = workload.batch
        meta = device == "meta"
        dense = torch.empty((b, self.dense_features), dtype=dtype, device=device) if meta else \
            torch.randn((b, self.dense_features), dtype=dtype, device=device)
        indices, offsets = [], []
        for rows, pooling in zip(self.num_embeddings_per_feature, self.multi_hot_sizes):
            if meta:
                indices.append(torch.empty((b * pooling,), dtype=torch.long, device=device))
                offsets.append(torch.empty((b,), dtype=torch.long, device=device))
            else:
                indices.append(torch.randint(0, rows, (b * pooling,), device=device))
                offsets.append(torch.arange(0, b * pooling, pooling, device=device))
        labels = None
        if workload.mode == "training":
            labels = torch.empty((b,), dtype=dtype, device=device) if meta else \
                torch.randint(0, 2, (b,), device=device).to(dtype)
        return (dense, tuple(indices), tuple(offsets)), {}, labels

    def loss(self, output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean binary cross entropy with logits, in fp32 (torchrec DLRMTrain: BCEWithLogitsLoss)."""
        return F.binary_cross_entropy_with_logits(output.float(), labels.float())


def _int(raw: dict, key: str, low: int, high: int) -> int:
    value = raw.get(key, ...)
    if value is ...:
        raise ValueError(f"field '{key}' is missing (an integer from {low:,} to {high:,})")
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"field '{key}' must be an integer from {low:,} to {high:,}, got {_short(value)}")
    return value


def _ints(raw: dict, key: str, high: int, longest: int) -> tuple[int, ...]:
    value = raw.get(key, ...)
    if value is ...:
        raise ValueError(f"field '{key}' is missing (a list of positive integers)")
    if not isinstance(value, list) or not 1 <= len(value) <= longest or not all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= high for v in value):
        raise ValueError(f"field '{key}' must be a list of 1 to {longest:,} integers from 1 to {high:,}, "
                         f"got {_short(value)}")
    return tuple(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse(raw: dict, origin: str) -> DLRMConfig:
    """The DLRMConfig of a "planner_builder": "dlrm" config; a bad field raises ValueError naming it."""
    if raw.get("interaction_type", "dcn") != "dcn":
        raise ValueError(f"field 'interaction_type' is {_short(raw.get('interaction_type'))}; valid: 'dcn' "
                         "(DLRM-DCNv2, the MLPerf v2 model)")
    rows = _ints(raw, "num_embeddings_per_feature", 2**40, MAX_TABLES)
    pooling = _ints(raw, "multi_hot_sizes", MAX_POOLING, MAX_TABLES)
    if len(pooling) != len(rows):
        raise ValueError(f"field 'multi_hot_sizes' has {len(pooling)} entries; it needs one per table of "
                         f"'num_embeddings_per_feature' ({len(rows)})")
    dim = _int(raw, "embedding_dim", 1, MAX_WIDTH)
    if sum(rows) * dim >= MAX_TABLE_ELEMENTS:
        raise ValueError(f"field 'num_embeddings_per_feature' sums to {sum(rows):,} rows x embedding_dim {dim} = "
                         f"{sum(rows) * dim:,} elements, above the limit of {MAX_TABLE_ELEMENTS:,} (2**40)")
    if (len(rows) + 1) * dim > MAX_INTERACTION:
        raise ValueError(f"field 'embedding_dim' ({dim}) x (tables + 1) = {(len(rows) + 1) * dim:,} cross-net "
                         f"features, above the limit of {MAX_INTERACTION:,}")
    bottom = _ints(raw, "dense_arch_layer_sizes", MAX_WIDTH, 16)
    if bottom[-1] != dim:
        raise ValueError(f"field 'dense_arch_layer_sizes' must end in embedding_dim ({dim}): the dense features "
                         f"join the pooled rows; got {list(bottom)}")
    top = _ints(raw, "over_arch_layer_sizes", MAX_WIDTH, 16)
    if len(top) < 2 or top[-1] != 1:
        raise ValueError(f"field 'over_arch_layer_sizes' must have at least 2 layers and end in 1 (one click "
                         f"logit per sample); got {list(top)}")
    return DLRMConfig(dense_features=_int(raw, "dense_features", 1, MAX_WIDTH), num_embeddings_per_feature=rows,
                      multi_hot_sizes=pooling, embedding_dim=dim, dense_arch_layer_sizes=bottom,
                      over_arch_layer_sizes=top, dcn_num_layers=_int(raw, "dcn_num_layers", 1, 64),
                      dcn_low_rank_dim=_int(raw, "dcn_low_rank_dim", 1, MAX_WIDTH))
