"""stmatrix/ldmatrix in the register-tile lowering (`passes/to_ptx/smem_matrices.py`): the row
addresses the lanes give put every element where the word-by-word accesses put it (which
`test_smem_addresses` checks against the buffer layout's own mapping), for every buffer layout
the accesses property draws; the wgmma layouts of 16-bit tiles use it, other layouts and
widths keep `ld/st.shared`; the GEMM's epilogue assembles with it."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from test_smem_addresses import LAWS, accesses

import asyncdsl as ad
from asyncdsl.hw.smem_layout import SmemLayout
from asyncdsl.hw.tiling import THREADS
from asyncdsl.hw.transforms import TileTransform, TransposeTransform
from asyncdsl.passes.to_ptx.smem_addresses import AccessPlan
from asyncdsl.passes.to_ptx.smem_matrices import matrix_plan
from asyncdsl.runtime.ptxas import assemble


def stmatrix_destinations(plan, matrices, base):
    """Where the hardware puts each (thread, piece) word, by the instruction's definition: lane
    l's register i goes to row l / 4 of matrix i, word l % 4, that row's address given by lane
    8 i + l / 4 of the same warp."""
    placed = {}
    rows = matrices.addresses.addresses(base)
    for access in matrices.accesses:
        for warp in range(THREADS // 32):
            for i, piece in enumerate(access.pieces):
                for lane in range(32):
                    row_lane = warp * 32 + 8 * i + lane // 4
                    row = int(rows[row_lane, access.address])
                    placed[(warp * 32 + lane, piece)] = row + 4 * (lane % 4)
    return placed


@LAWS
@given(accesses())
def test_matrix_rows_put_every_word_where_the_word_accesses_do(access):
    register_layout, shape, element_bytes, layout, alignment, base = access
    plan = AccessPlan(register_layout, shape, element_bytes, layout, alignment)
    matrices = matrix_plan(plan, element_bytes, register_layout.replication != 1, alignment)
    if matrices is None:
        return
    placed = stmatrix_destinations(plan, matrices, base)
    assert len(placed) == THREADS * len(plan.pieces)  # every word, once
    words = plan.addresses(base)
    for (thread, piece), address in placed.items():
        assert address == words[thread, piece]


@st.composite
def wgmma_tiles(draw):
    """16-bit tiles in the wgmma layout, in every buffer layout a copy can give them."""
    swizzle = draw(st.sampled_from([0, 32, 64, 128]))
    columns = draw(st.sampled_from([64, 128, 256]))
    rows = draw(st.sampled_from([64, 128]))
    tile_columns = min(swizzle // 2 or draw(st.sampled_from([8, 16, 32, 64])), columns)
    chain = (TileTransform((draw(st.sampled_from([8, 16, 64])), tile_columns)),)
    if draw(st.booleans()):
        chain += (TransposeTransform((1, 0, 2, 3)),)
    alignment = draw(st.sampled_from([16, 128, 1024]))
    return ((rows, columns), SmemLayout((rows, columns), chain, swizzle), alignment,
            alignment * draw(st.integers(1, 40)))


@LAWS
@given(wgmma_tiles())
def test_wgmma_tiles_moved_as_matrices_land_where_their_words_do(tile):
    shape, layout, alignment, base = tile
    plan = AccessPlan(ad.WGMMA, shape, 2, layout, alignment)
    matrices = matrix_plan(plan, 2, False, alignment)
    if matrices is None:  # swizzled per access at run time (a base below the swizzle's repeat)
        assert layout.swizzle_bytes and alignment < 1024
        return
    words = plan.addresses(base)
    for (thread, piece), address in stmatrix_destinations(plan, matrices, base).items():
        assert address == words[thread, piece]


def test_the_wgmma_layouts_of_16_bit_tiles_move_as_matrices():
    for swizzle in (0, 32, 64, 128):
        columns = swizzle // 2 or 64
        layout = SmemLayout((64, 128), (TileTransform((64, columns)),), swizzle)
        plan = AccessPlan(ad.WGMMA, (64, 128), 2, layout, 1024)
        matrices = matrix_plan(plan, 2, False, 1024)
        assert (matrices is not None
                and [len(a.pieces) for a in matrices.accesses] == [4] * (len(plan.pieces) // 4))
    row_major = AccessPlan(ad.strided(8), (64, 128), 2, SmemLayout((64, 128), (), 0), 128)
    assert matrix_plan(row_major, 2, False, 128) is None  # 16-byte pieces: one v4 access already
    words = AccessPlan(ad.WGMMA, (64, 64), 4, SmemLayout((64, 64), (), 0), 128)
    assert matrix_plan(words, 4, False, 128) is None  # 32-bit elements


def test_the_gemm_epilogue_stores_by_stmatrix_and_assembles():
    from asyncdsl.kernels.gemm_cooperative import matmul

    a = ad.ArraySpec((8192, 8192), ad.bfloat16)
    ptx = matmul.ptx(a, a, a, CTAS=132)
    assert ptx.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 16 and "st.shared.b32" not in ptx
    _, log = assemble(ptx, verbose=True)
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] and not re.search(r"C75\d\d", log), log


def test_a_wgmma_layout_load_is_by_ldmatrix():
    @ad.kernel(block=128)
    def kernel(x, y):
        buf = ad.smem((64, 64), x.dtype, transforms=TileTransform((64, 64)), swizzle=128)
        bar = ad.barrier()
        ad.async_copy(x.at[:, :], buf, barrier=bar)
        bar.wait()
        t = ad.load(buf, layout=ad.WGMMA)
        ad.store(y.at[:, :], t)

    spec = ad.ArraySpec((64, 64), ad.bfloat16)
    ptx = kernel.ptx(spec, spec)
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 4 and "ld.shared.b32" not in ptx
    assemble(ptx)
    x = (np.arange(64 * 64) % 251).astype(ad.bfloat16.numpy).reshape(64, 64)
    y = np.zeros_like(x)
    kernel.interpret(x, y)
    assert np.array_equal(y.view(np.uint16), x.view(np.uint16))
