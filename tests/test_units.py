"""Units: SI and binary multipliers and their formatting."""

from planner.units import GIB, TERA, count, si


def test_si_and_binary_multipliers():
    assert TERA == 1e12 and GIB == 2**30
    assert si(1.3e12, "FLOP") == "1.30 TFLOP"
    assert count(6738415616) == "6,738,415,616"
