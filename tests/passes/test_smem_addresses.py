"""The addresses the PTX lowering computes for register-tile accesses to shared memory
(`passes/to_ptx/smem_addresses.py`) are, for every thread and every piece, the swizzled
addresses the buffer's layout gives its logical elements (`hw.smem_layout`, the interpreter's
mapping), and no access crosses a 16-byte swizzle chunk."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import examples

import asyncdsl as ad
from asyncdsl.hw.smem_layout import SmemLayout
from asyncdsl.hw.swizzle import repeat_bytes
from asyncdsl.hw.tiling import THREADS
from asyncdsl.hw.transforms import TileTransform, TransposeTransform
from asyncdsl.passes.to_ptx.smem_addresses import AccessPlan, AddressMode

LAWS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def accesses(draw):
    """A register layout, a tile it holds, and a buffer layout of that tile."""
    element_bytes = draw(st.sampled_from([1, 2, 4]))
    swizzle = draw(st.sampled_from([0, 32, 64, 128]))
    row_elements = (swizzle or 16 * draw(st.sampled_from([1, 2, 4, 8]))) // element_bytes
    kind = draw(st.sampled_from(["wgmma", "strided", "row"]))
    if kind == "row":
        shape = (64,)
        register_layout = ad.WGMMA_ROW
        chain = (TileTransform((row_elements,)),) if 64 % row_elements == 0 else ()
        if not chain:
            swizzle = 0
    else:
        columns = draw(st.sampled_from([64, 128, 256]))
        shape = (64, columns)
        register_layout = ad.WGMMA if kind == "wgmma" else ad.strided(draw(st.sampled_from([1, 2, 4, 8])))
        tile_rows = draw(st.sampled_from([1, 2, 8, 16]))
        chain = (TileTransform((tile_rows, min(row_elements, columns))),)
        if min(row_elements, columns) != row_elements:
            swizzle = 0
        if draw(st.booleans()):  # tiles in column-major order
            chain += (TransposeTransform((1, 0, 2, 3)),)
    layout = SmemLayout(shape, chain, swizzle)
    alignment = draw(st.sampled_from([16, 128, 1024]))
    base = alignment * draw(st.integers(1, 40))
    return register_layout, shape, element_bytes, layout, alignment, base


@LAWS
@given(accesses())
def test_every_thread_reaches_each_element_where_the_layout_puts_it(access):
    register_layout, shape, element_bytes, layout, alignment, base = access
    plan = AccessPlan(register_layout, shape, element_bytes, layout, alignment)
    expected = layout.byte_addresses(base, element_bytes)  # (*shape, element bytes)
    coordinates = register_layout.coordinates(shape).reshape(THREADS, -1, plan.vector, len(shape))
    addresses = plan.addresses(base)
    for thread in range(THREADS):
        for index, piece in enumerate(plan.pieces):
            address = int(addresses[thread, index])
            assert address % plan.piece_bytes == 0
            assert address // 16 == (address + plan.piece_bytes - 1) // 16  # one swizzle chunk
            for lane in range(piece.lanes):
                element = tuple(coordinates[thread, piece.slot, piece.lane + lane])
                for byte in range(element_bytes):
                    assert address + lane * element_bytes + byte == expected[element][byte]


def test_swizzled_buffers_aligned_to_their_repeat_need_no_per_access_swizzle():
    for swizzle in (32, 64, 128):
        layout = SmemLayout((64, 128), (TileTransform((8, swizzle // 2)),), swizzle)
        plan = AccessPlan(ad.WGMMA, (64, 128), 2, layout, repeat_bytes(swizzle))
        assert plan.mode is AddressMode.XOR
        assert len({xor for xor, _ in plan.split}) <= swizzle // 16  # one base per chunk the registers pick
        below_repeat = AccessPlan(ad.WGMMA, (64, 128), 2, layout, repeat_bytes(swizzle) // 2)
        assert below_repeat.mode is AddressMode.RUNTIME  # the pattern's phase is only known at run time


def test_unswizzled_buffers_keep_immediate_offsets():
    plan = AccessPlan(ad.strided(8), (64, 128), 2, SmemLayout((64, 128), (), 0), 128)
    assert plan.mode is AddressMode.LINEAR and plan.piece_bytes == 16
    offsets = np.array([piece.offset for piece in plan.pieces])
    assert (offsets == np.arange(len(offsets)) * 128 * 16).all()
