"""The grouped GEMM (`asyncdsl.kernels.gemm_grouped`) in the interpreter: each group's rows times
its own weights, exact on small integers."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K


@pytest.mark.parametrize("rows,n,k", [((128, 256, 128), 320, 192), ((256,), 256, 104)], ids=str)
def test_each_group_is_multiplied_by_its_own_weights(rows, n, k):
    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (sum(rows), k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (len(rows), k, n)).astype(ml_dtypes.bfloat16)
    c = K.gemm_grouped(a, b, rows)
    first = 0
    for g, m in enumerate(rows):
        exact = (a[first:first + m].astype(np.float64) @ b[g].astype(np.float64)).astype(ml_dtypes.bfloat16)
        assert np.array_equal(c[first:first + m].view(np.uint16), exact.view(np.uint16)), f"group {g}"
        first += m


def test_rows_that_do_not_add_up_to_a_are_refused():
    a = np.zeros((256, 64), ml_dtypes.bfloat16)
    with pytest.raises(ad.TraceError, match="ROWS must be the groups' row counts"):
        K.gemm_grouped(a, np.zeros((2, 64, 256), ml_dtypes.bfloat16), (128, 64))
