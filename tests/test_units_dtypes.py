"""Units formatting and the logical dtype table."""

import pytest

from planner.dtypes import get_dtype
from planner.errors import UnknownNameError
from planner.units import GIB, TERA, count, si


def test_si_and_binary_multipliers():
    assert TERA == 1e12 and GIB == 2**30
    assert si(1.3e12, "FLOP") == "1.30 TFLOP"
    assert count(6738415616) == "6,738,415,616"


def test_dtype_widths_and_aliases():
    assert [get_dtype(n).bits for n in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")] == [32, 32, 16, 16, 8, 8, 4]
    assert get_dtype("BFloat16").name == "bf16"
    with pytest.raises(UnknownNameError, match="Did you mean: fp16"):
        get_dtype("fp61")
