"""The logical dtype table: widths in bits and aliases."""

import pytest

from planner.errors import UnknownNameError
from planner.workload.dtypes import get_dtype


def test_dtype_widths_and_aliases():
    assert [get_dtype(n).bits for n in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")] == [32, 32, 16, 16, 8, 8, 4]
    assert get_dtype("BFloat16").name == "bf16"
    with pytest.raises(UnknownNameError, match="Did you mean: fp16"):
        get_dtype("fp61")
