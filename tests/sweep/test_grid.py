"""planner/sweep/grid.py: axes, ranges, constraints (parsed, never evaluated by Python), chunks."""

import pytest

from planner.errors import ConfigError
from planner.sweep.grid import parse_grid


def grid(**extra):
    data = {"axes": {"model": ["llama-3.1-8b"], "device": ["h100-sxm", "l4"]}}
    data.update(extra)
    return parse_grid(data)


def test_ranges_expand_geometric_and_arithmetic():
    g = parse_grid({"axes": {"model": "gpt2", "device": "h100-sxm", "batch": {"from": 1, "to": 256, "times": 4},
                             "input_len": {"from": 512, "to": 2048, "step": 512}}})
    axes = dict(g.axes)
    assert axes["batch"] == (1, 4, 16, 64, 256)  # 4^0 .. 4^4; 4^5 = 1024 > 256
    assert axes["input_len"] == (512, 1024, 1536, 2048)
    assert axes["model"] == ("gpt2",)  # a scalar is one value
    assert g.size == 1 * 1 * 5 * 4


def test_points_in_order_last_axis_fastest_and_ids_after_constraints():
    g = parse_grid({"axes": {"model": ["m"], "device": ["d"], "tp": [1, 2, 4], "gpus": [1, 2, 4]},
                    "where": ["tp <= gpus", "gpus % tp == 0"]})
    points = list(g.points())
    # (tp, gpus) pairs with tp <= gpus and tp | gpus: (1,1) (1,2) (1,4) (2,2) (2,4) (4,4)
    assert [(p["tp"], p["gpus"]) for _, p in points] == [(1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (4, 4)]
    assert [i for i, _ in points] == list(range(6))


def test_chunks_hold_consecutive_ids():
    g = parse_grid({"axes": {"model": ["m"], "device": ["d"], "batch": list(range(1, 8))}, "chunk": 3})
    chunks = list(g.chunks())
    assert [n for n, _ in chunks] == [0, 1, 2]
    assert [[i for i, _ in c] for _, c in chunks] == [[0, 1, 2], [3, 4, 5], [6]]


def test_constraint_arithmetic_and_logic():
    g = parse_grid({"axes": {"model": ["m"], "device": ["d", "e"], "tp": [1, 2], "pp": [1, 2]},
                    "where": ["tp * pp <= 2 and not (device == 'e' and tp > 1)"]})
    kept = [(p["device"], p["tp"], p["pp"]) for _, p in g.points()]
    assert kept == [("d", 1, 1), ("d", 1, 2), ("d", 2, 1), ("e", 1, 1), ("e", 1, 2)]


def test_division_by_zero_drops_the_point():
    g = parse_grid({"axes": {"model": ["m"], "device": ["d"], "tp": [0, 2]}, "where": ["8 / tp >= 4"]})
    assert [p["tp"] for _, p in g.points()] == [2]


@pytest.mark.parametrize("expr", ["__import__('os').system('true')", "tp.__class__", "[x for x in tp]",
                                  "open('f')", "lambda: 1", "tp ** 99999999", "tp in (1, 2)"])
def test_constraints_that_would_run_code_are_refused(expr):
    with pytest.raises(ConfigError, match="only numbers|not an axis|not an expression"):
        parse_grid({"axes": {"model": ["m"], "device": ["d"], "tp": [1]}, "where": [expr]})


def test_unknown_names_are_refused_with_the_valid_ones():
    with pytest.raises(ConfigError, match="axis 'tpp' is not a --configs key; valid: .*tp"):
        grid(axes={"model": ["m"], "device": ["d"], "tpp": [1]})
    with pytest.raises(ConfigError, match="names 'gpu', which is not an axis; axes: model, device"):
        grid(where=["gpu > 1"])
    with pytest.raises(ConfigError, match="unknown key.*valid: axes, where, keep, chunk"):
        grid(axis={})
    with pytest.raises(ConfigError, match="must include device"):
        parse_grid({"axes": {"model": ["m"]}})


@pytest.mark.parametrize("spec, message", [
    ({"from": 1, "to": 8}, "a range is"), ({"from": 1, "to": 8, "step": 0}, "step > 0"),
    ({"from": 0, "to": 8, "times": 2}, "0 < from"), ({"from": 1, "to": 10**9, "step": 1}, "more than"),
    ([], "no values"), ([1, 1], "twice"), ([float("nan")], "finite")])
def test_bad_axes(spec, message):
    with pytest.raises(ConfigError, match=message):
        grid(axes={"model": ["m"], "device": ["d"], "batch": spec})


def test_size_limit_and_chunk_bounds():
    many = list(range(1, 1001))
    with pytest.raises(ConfigError, match="points; the limit is"):
        grid(axes={"model": ["m"], "device": ["d"], "batch": many, "input_len": many, "output_len": many,
                   "tp": many[:2]})
    with pytest.raises(ConfigError, match="'chunk' must be"):
        grid(chunk=0)


def test_digest_names_the_grid():
    assert grid().digest == grid().digest
    assert grid().digest != grid(chunk=7).digest
    assert grid(keep={"fits": True}).keep == (("fits", True),)


@pytest.mark.parametrize("expr", ["'%y' % batch > 0", "model * 99999999999999 == 'x'", "model + 1 > 0"])
def test_arithmetic_on_texts_is_refused_with_a_message(expr):
    """Texts are only compared: '%y' % batch would format (a ValueError), model * 10**14 would build a
    100-terabyte text (a MemoryError); both are one ConfigError naming the constraint, not an exit 3."""
    g = parse_grid({"axes": {"model": ["gpt2"], "device": ["l4"], "batch": [1]}, "where": [expr]})
    with pytest.raises(ConfigError, match="arithmetic takes numbers"):
        list(g.points())


def test_axes_mixing_texts_and_numbers_are_named():
    assert grid(axes={"model": ["m"], "device": ["d"], "batch": [1, 8, "auto"]}).texts == ("batch",)
    assert grid(axes={"model": ["m"], "device": ["d"], "batch": [1, 8]}).texts == ()


def test_check_names_refuses_an_unknown_model_or_device_before_any_prediction():
    from planner.sweep.grid import check_names

    check_names(parse_grid({"axes": {"model": ["gpt2", "llama-3.1-8b"], "device": ["h100-sxm", "L4"]}}))
    with pytest.raises(ConfigError, match="axis 'device': unknown device 'no-such-gpu'"):
        check_names(parse_grid({"axes": {"model": ["gpt2"], "device": ["h100-sxm", "no-such-gpu"]}}))
    with pytest.raises(ConfigError, match="axis 'model': unknown model 'gtp2'.*Did you mean: gpt2"):
        check_names(parse_grid({"axes": {"model": ["gtp2"], "device": ["h100-sxm"]}}))
