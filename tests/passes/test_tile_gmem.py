"""Lowering of gathers (`passes/to_ptx/tile_gmem.py`): a gather of whole rows (its last index the
tile's own column, every other index and the mask one per row) moves each register vector as
one access (a 32-bit word of 8- or 16-bit elements, `ld.global.v2`/`v4` of wider runs), not an
element at a time, and still reads exactly what the
interpreter does (rows outside the table and masked rows give `other`); a gather whose columns
are computed stays elementwise.  A tile whose threads lie rows of 2^28 elements apart addresses
them in 64 bits.  Each assembles with ptxas."""

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


@ad.kernel(grid=(1,))
def corner_copy(x, y):
    """A 64 x 64 tile of x at a traced column into the same place in y: the tile's threads lie
    on 16 rows of each array at once."""
    window = (ad.ds(0, 64), ad.ds(ad.program_id(0) * 64, 64))
    ad.store(y.at[window], ad.load(x.at[window]))


@pytest.mark.parametrize("columns", [2**28, 4096])
def test_a_tile_over_rows_past_32_bit_offsets_addresses_them_in_64_bits(columns, ptxas):
    # Thread 127 of a 64-row tile lies 15 rows in: 15 * 2^28 elements, past 2^31, which a 32-bit
    # offset (`mul.lo.s32 %r, %r, 268435456`) wrapped to another row, for loads and stores alike.
    spec = ad.ArraySpec((64, columns), ad.bfloat16)
    ptx = corner_copy.ptx(spec, spec)
    ptxas(ptx)
    row_bytes = columns * 2
    wide = re.findall(rf"mul\.wide\.s32 %rd\d+, %r\d+, {row_bytes};", ptx)
    narrow = re.findall(rf"mul\.lo\.s32 %r\d+, %r\d+, {columns};", ptx)
    if columns == 2**28:
        assert len(wide) == 2 and not narrow, (wide, narrow)  # the load's and the store's
    else:  # offsets that fit 32 bits keep their 32-bit sum, widened once
        assert not wide and len(narrow) == 2, (wide, narrow)


@ad.kernel(grid=(1,))
def far_windows(x, i, y):
    """A window at a traced start, a gather, a scatter and a splat store of 3 elements, all in a
    dim of x that may be past 2^31 elements."""
    at = ad.program_id(0) * 1024
    ad.store(y.at[:], ad.load(x.at[ad.ds(at, 1024)]))
    ad.store(x.at[ad.load(i.at[:])], ad.load(y.at[:]))
    ad.store(x.at[ad.ds(at + 5, 3)], ad.load(x.at[ad.load(i.at[:])]).astype(ad.int32).max().astype(ad.int8))


@pytest.mark.parametrize("extent", [2**31 + 1024, 2**32 + 64, 5000])
def test_checks_of_dims_past_2_31_elements_bound_the_coordinate_by_2_31(extent, ptxas):
    # A check `coordinate < extent` printed the extent as the immediate of a 32-bit comparison:
    # ptxas cut 2^32 + 64 to 64, so every element past the 64th was out of bounds on the GPU (a
    # load gave `other`, a store was skipped) while the interpreter moved it.  No signed 32-bit
    # coordinate reaches past 2^31 - 1, so 2^31 bounds it exactly.
    ptx = far_windows.ptx(ad.ArraySpec((extent,), ad.int8), ad.ArraySpec((1024,), ad.int32),
                          ad.ArraySpec((1024,), ad.int8))
    ptxas(ptx)
    bounds = {int(n) for n in re.findall(r"setp\.lt\.u32 %p\d+, %r\d+, (\d+);", ptx)}
    assert min(extent, 2**31) in bounds and all(n <= 2**31 for n in bounds), bounds
