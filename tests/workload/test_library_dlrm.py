"""DLRM-DCNv2 (models/dlrm.py): the MLPerf configuration, its parameters in closed form, embedding bags that
count the rows a batch touches (never the table), the tables' fused in-backward update, and where the
tables' memory goes.

Source of every size: github.com/mlcommons/training, recommendation_v2/torchrec_dlrm/README.MD (the MLPerf
DLRM v2 run command: --embedding_dim 128 --dense_arch_layer_sizes 512,256,128 --over_arch_layer_sizes
1024,1024,512,256,1 --num_embeddings_per_feature 40000000,39060,... --interaction_type=dcn --dcn_num_layers=3
--dcn_low_rank_dim=512 --multi_hot_sizes=3,2,1,2,6,...); 13 dense features: torchrec DEFAULT_INT_NAMES.
"""

import pytest
import torch

import planner_models
from planner.errors import ConfigError
from planner.predict.api import Request, predict
from planner.workload.counting import count
from planner.workload.graphs import Workload, build_graph
from planner.workload.zoo import from_config, resolve

ROWS = [40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209, 11938, 155,
        4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36]
POOLING = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]
D = 128
B = 4
# parameters in closed form: tables, bottom MLP 13-512-256-128, the cross net over 27 x 128 = 3456 features
# (3 layers of V [512, 3456], W [3456, 512] and a bias [3456]), top MLP 3456-1024-1024-512-256-1
TABLES = sum(ROWS) * D
BOTTOM = 13 * 512 + 512 + 512 * 256 + 256 + 256 * 128 + 128
CROSS = 3 * (2 * 3456 * 512 + 3456)
TOP = 3456 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 512 + 512 + 512 * 256 + 256 + 256 * 1 + 1


@pytest.fixture(scope="module")
def model():
    return resolve("dlrm-dcnv2")


@pytest.fixture(scope="module")
def forward(model):
    return build_graph(model, Workload("forward", B))


@pytest.fixture(scope="module")
def training(model):
    # "pure" bf16: weights and gradients at bf16, so every width below is fixed
    return build_graph(model, Workload("training", B, mixed_precision="pure"))


def _bags(wg, packet: str) -> dict[int, object]:
    """Records of `packet` by table index (module embeddings.<t>)."""
    return {int(r.module.split(".")[1]): r for r in wg.graph.records if r.packet == packet}


def test_the_zoo_config_is_mlperfs():
    raw = planner_models.zoo_config("dlrm-dcnv2")
    assert raw["num_embeddings_per_feature"] == ROWS and raw["multi_hot_sizes"] == POOLING
    assert sum(ROWS) == 204_184_588 and sum(POOLING) == 214


def test_parameters_in_closed_form(model, forward):
    with torch.device("meta"):
        module = model.config.build()
    assert forward.params == sum(p.numel() for p in module.parameters()) == TABLES + BOTTOM + CROSS + TOP
    assert forward.params == 26_151_671_809
    # the tables are 26,135,627,264 elements: 104.5 GB at fp32 (97.4 GiB), 52.3 GB at bf16
    assert forward.param_by_top == {"bottom_mlp": BOTTOM, "embeddings": TABLES, "interaction": CROSS, "top_mlp": TOP}
    assert TABLES == 26_135_627_264 and BOTTOM == 171_392 and CROSS == 10_627_200 and TOP == 5_245_953


def test_every_op_has_a_formula(forward, training):
    assert count(forward.graph).unsupported == ()
    assert count(training.graph).unsupported == ()


def test_an_embedding_bag_counts_the_rows_it_touches(forward):
    bags = _bags(forward, "aten._embedding_bag")
    assert sorted(bags) == list(range(26))
    counted = {t: count(forward.graph).ops[forward.graph.records.index(r)].cost for t, r in bags.items()}
    for t, cost in counted.items():
        n = B * POOLING[t]  # rows looked up
        # reads n rows of 128 bf16 elements, n int64 indices and B int64 offsets; writes B pooled rows
        assert cost.bytes_read == n * D * 2 + n * 8 + B * 8
        assert cost.bytes_written == B * D * 2
        assert cost.flop == n * D  # one add per pooled element
    # table 20 (40,000,000 rows, 100 rows per sample): 4·100·128·2 + 4·100·8 + 4·8 = 102,400 + 3,200 + 32
    assert counted[20].bytes_read == 105_632 and counted[20].bytes_written == 1_024 and counted[20].flop == 51_200
    # the table's size does not enter: tables 0 (40,000,000 rows) and 10 (3,067,956) both pool 3 rows
    assert counted[0] == counted[10]


def test_the_tables_update_in_their_backward(training):
    # one fused op per table, told apart by (table rows, rows looked up): backward ops' module attribution is
    # not exact
    fused = {(r.arg("weight").shape[0], r.arg("indices").numel): r for r in training.graph.records
             if r.packet == "planner_models.embedding_bag_adagrad_"}
    assert sorted(fused) == sorted((rows, B * p) for rows, p in zip(ROWS, POOLING))
    assert not [r for r in training.graph.records if r.phase == "optimizer" and r.module.startswith("embeddings")]
    assert not [r for r in training.graph.records if r.packet.startswith("aten._embedding_bag_") and "backward" in r.packet]
    costs = count(training.graph)
    by_record = {id(c.record): c.cost for c in costs.ops}
    # table 5 (3 rows, 1 per sample): 4 lookups touch min(4, 3) = 3 rows. Reads 4 int64 indices and 4 offsets,
    # a bf16 gradient row per lookup (4·128·2) and the touched rows of the bf16 table and its fp32 Adagrad state
    # (3·128·(2 + 4)); writes those rows back. FLOP: 4·128 accumulates + 7 per touched element (3·128)
    small = by_record[id(fused[3, 4])]
    assert small.bytes_read == 4 * 8 + 4 * 8 + 4 * 128 * 2 + 3 * 128 * 6 == 3_392
    assert small.bytes_written == 3 * 128 * 6 == 2_304
    assert small.flop == 4 * 128 + 7 * 3 * 128 == 3_200
    # table 0 (40,000,000 rows, 3 per sample): 12 lookups, 12 rows touched; the table's size does not enter
    big = by_record[id(fused[40000000, 12])]
    assert big.bytes_read == 12 * 8 + 4 * 8 + 12 * 128 * 2 + 12 * 128 * 6 == 12_416
    assert big.bytes_written == 12 * 128 * 6


def test_weight_memory_shows_the_tables_at_batch_65536():
    # planner predict dlrm-dcnv2 --device h100-sxm --batch 65536: every parameter at bf16, 52.3 GB, fits the
    # H100's usable 77.3 GB with the activations (3 x the largest op output) and the workspace
    p = predict(Request("dlrm-dcnv2", "h100-sxm", batch=65536))
    assert p.memory.weights_bytes == 26_151_671_809 * 2
    assert p.fits and p.memory.total_bytes < p.memory.capacity_bytes
    # at fp32 the tables alone (104.5 GB) exceed one H100
    assert not predict(Request("dlrm-dcnv2", "h100-sxm", batch=65536, dtype="fp32")).fits


def test_the_fused_update_touches_only_looked_up_rows_on_a_real_device():
    raw = dict(planner_models.zoo_config("dlrm-dcnv2"), num_embeddings_per_feature=[50, 7], multi_hot_sizes=[3, 2],
               embedding_dim=8, dense_arch_layer_sizes=[16, 8], over_arch_layer_sizes=[16, 1], dcn_low_rank_dim=4)
    cfg = from_config(raw, "tiny").config
    torch.manual_seed(0)
    module = cfg.build()
    dense = torch.randn(2, 13)
    indices = (torch.tensor([1, 2, 3, 3, 4, 5]), torch.tensor([0, 6, 1, 6]))
    offsets = (torch.tensor([0, 3]), torch.tensor([0, 2]))
    before = module.embeddings[0].weight.detach().clone()
    cfg.loss(module(dense, indices, offsets), torch.tensor([1.0, 0.0])).backward()
    after = module.embeddings[0].weight.detach()
    changed = sorted(int(i) for i in torch.nonzero((after != before).any(dim=1)).flatten())
    assert changed == [1, 2, 3, 4, 5]
    assert module.embeddings[0].weight.grad is None and module.top_mlp[0].weight.grad is not None


@pytest.mark.parametrize("field,value,message", [
    ("multi_hot_sizes", [1, 2], "one per table"),
    ("num_embeddings_per_feature", [2**35] * 26, "above the limit"),
    ("dense_arch_layer_sizes", [512, 256, 64], "must end in embedding_dim"),
    ("over_arch_layer_sizes", [1024, 2], "end in 1"),
    ("interaction_type", "original", "valid: 'dcn'"),
    ("dcn_num_layers", 0, "from 1 to 64"),
    ("embedding_dim", True, "'embedding_dim' must be an integer"),
])
def test_bad_fields_name_themselves(field, value, message):
    raw = dict(planner_models.zoo_config("dlrm-dcnv2"), **{field: value})
    with pytest.raises(ConfigError, match=message) as info:
        from_config(raw, "dlrm.json")
    assert field in str(info.value) and "\n" not in str(info.value)


def test_sizes_other_than_the_batch_are_refused(model):
    with pytest.raises(ConfigError, match="seq_len does not apply"):
        build_graph(model, Workload("forward", 2, seq_len=16))
