"""Units: SI and binary multipliers and their formatting."""

from planner.units import GIB, TERA, count, si, usd


def test_si_and_binary_multipliers():
    assert TERA == 1e12 and GIB == 2**30
    assert si(1.3e12, "FLOP") == "1.30 TFLOP"
    assert count(6738415616) == "6,738,415,616"


def test_usd_in_dollars_with_thousands_separators_and_cents():
    assert usd(3.465e5) == "$346,500" and usd(1234.5) == "$1,234" and usd(-1234.5) == "-$1,234"
    assert usd(3.4651) == "$3.47" and usd(999.994) == "$999.99" and usd(999.996) == "$1,000"
    # under a dollar: three significant figures
    assert usd(0.0123456) == "$0.0123" and usd(0.5) == "$0.500" and usd(0.99996) == "$1.00" and usd(0) == "$0.00"
    assert usd(float("nan")) == "-"
