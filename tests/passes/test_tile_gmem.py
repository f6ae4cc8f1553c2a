"""Lowering of gathers (`passes/to_ptx/tile_gmem.py`): a gather of whole rows (its last index the
tile's own column, every other index and the mask one per row) moves each register vector as
one access (a 32-bit word of 8- or 16-bit elements, `ld.global.v2`/`v4` of wider runs), not an
element at a time, and still reads exactly what the
interpreter does (rows outside the table and masked rows give `other`); a gather whose columns
are computed stays elementwise.  Each assembles with ptxas."""

from __future__ import annotations

import re

import numpy as np
import pytest
from tile_kernels import gathers, row_gather_inputs, row_gathers, row_gathers_reference

import asyncdsl as ad


@pytest.mark.parametrize("dtype", [ad.float32, ad.bfloat16, ad.int8, ad.float8_e4m3fn], ids=str)
def test_a_gather_of_whole_rows_moves_vectors(dtype, ptxas):
    table, ids = row_gather_inputs(dtype, 64, 1)
    out = np.zeros((64, 128), dtype.numpy)
    row_gathers.interpret(table, ids, out)
    unsigned = f"u{np.dtype(dtype.numpy).itemsize}"
    assert np.array_equal(out.view(unsigned), row_gathers_reference(table, ids).view(unsigned))
    ptx = row_gathers.ptx(ad.ArraySpec(table.shape, dtype), ad.ArraySpec(ids.shape, ad.int32),
                          ad.ArraySpec(out.shape, dtype))
    loads = re.findall(r"ld\.global(\.v\d)?\.(\w+)", ptx)
    assert ("", "b16") not in loads and ("", "u8") not in loads, loads  # no element alone
    assert dtype.bits < 32 or any(vector for vector, _ in loads), loads
    ptxas(ptx)


def test_a_gather_whose_columns_are_computed_stays_elementwise():
    spec = ad.ArraySpec((300, 128), ad.bfloat16)
    ptx = gathers.ptx(spec, ad.ArraySpec((2, 64), ad.int32), ad.ArraySpec((2, 128, 2), ad.int32),
                      ad.ArraySpec((2, 64, 128), ad.bfloat16), ad.ArraySpec((2, 2, 128), ad.bfloat16))
    assert not re.search(r"ld\.global\.v\d", ptx)
