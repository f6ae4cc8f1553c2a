"""Laws of shared-memory buffer layouts (asyncdsl.hw.smem_layout) and of `unbatch`, the
inverse of the transform algebra's `batch` that views of such buffers use."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl.errors import TransformError
from asyncdsl.hw.smem_layout import SmemLayout, make_layout
from asyncdsl.hw.swizzle import swizzled
from asyncdsl.hw.transforms import (
    CollapseLeadingIndicesTransform,
    DropUnitDimsTransform,
    Rounding,
    TileTransform,
    TransposeTransform,
    batch_chain,
    unbatch_chain,
)
from asyncdsl.interpret.tma import box_to_smem_bytes

LAWS = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])

transforms = st.one_of(
    st.lists(st.integers(1, 8), min_size=1, max_size=3).map(lambda t: TileTransform(tuple(t))),
    st.permutations(range(3)).map(lambda p: TransposeTransform(tuple(p))),
    st.lists(st.integers(0, 3), max_size=2, unique=True).map(lambda d: DropUnitDimsTransform(tuple(d))),
    st.lists(st.integers(1, 64), min_size=1, max_size=2).map(
        lambda s: CollapseLeadingIndicesTransform(tuple(s))),
)


@LAWS
@given(transforms, st.integers(0, 3))
def test_unbatch_undoes_batch(transform, leading):
    assert transform.batch(leading).unbatch(leading) == transform


@LAWS
@given(transforms, st.integers(1, 3))
def test_unbatch_refuses_exactly_what_batch_cannot_make(transform, leading):
    try:
        inner = transform.unbatch(leading)
    except TransformError:
        return
    assert inner.batch(leading) == transform


@st.composite
def tiled_layouts(draw):
    """A layout of a buffer with 0-2 leading (slot) dims and a 2-D tile tiled by powers of two."""
    leading = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    tile = (2 ** draw(st.integers(0, 3)), 2 ** draw(st.integers(0, 3)))
    shape = tuple(t * draw(st.integers(1, 3)) for t in tile)
    chain = [TileTransform(tile)]
    if draw(st.booleans()):
        rank = len(leading) + 4
        chain.append(TransposeTransform((*range(rank - 4), rank - 3, rank - 4, rank - 2, rank - 1)))
    return SmemLayout(leading + shape, tuple(chain), 0)


@LAWS
@given(tiled_layouts())
def test_a_layout_is_a_bijection_onto_its_physical_elements(layout):
    offsets = layout.element_offsets(np.indices(layout.logical_shape))
    assert sorted(offsets.reshape(-1)) == list(range(math.prod(layout.physical_shape)))


@LAWS
@given(tiled_layouts(), st.data())
def test_a_view_of_leading_dims_is_the_buffer_at_the_slot_offset(layout, data):
    leading = len(layout.logical_shape) - 2
    if not leading:
        return
    count = data.draw(st.integers(1, leading))
    slot = tuple(data.draw(st.integers(0, d - 1)) for d in layout.logical_shape[:count])
    view = layout.view(count)
    assert batch_chain(view.transforms, count) == layout.transforms
    inner = np.indices(view.logical_shape)
    whole = layout.element_offsets((*(np.full(inner.shape[1:], s) for s in slot), *inner))
    stride = math.prod(layout.physical_shape[count:])
    slot_offset = sum(s * math.prod(layout.physical_shape[d + 1:count]) for d, s in enumerate(slot)) * stride
    assert (whole == slot_offset + view.element_offsets(inner)).all()


@LAWS
@given(tiled_layouts(), st.sampled_from((1, 2, 4)), st.data())
def test_a_window_is_the_buffer_at_the_window_offset(layout, element_bytes, data):
    rows = layout.logical_shape[0]
    step = layout.window_step(element_bytes)
    size = data.draw(st.sampled_from([n for n in range(1, rows + 1) if rows % n == 0]))
    try:
        window = layout.window(size)
    except TransformError:
        return  # the law is about the windows taken; refusals are tested where they are made
    start = data.draw(st.sampled_from(range(0, rows - size + 1, step)))
    row_bytes = math.prod(layout.logical_shape[1:]) * element_bytes
    base = 1024 * data.draw(st.integers(0, 3))
    whole = layout.byte_addresses(base, element_bytes)[start:start + size]
    assert (window.byte_addresses(base + start * row_bytes, element_bytes) == whole).all()


@LAWS
@given(tiled_layouts(), st.sampled_from((1, 2, 4)), st.data())
def test_a_window_of_columns_is_the_buffer_at_the_window_offset(layout, element_bytes, data):
    columns = layout.logical_shape[-1]
    size = data.draw(st.sampled_from([n for n in range(1, columns + 1) if columns % n == 0]))
    try:
        window = layout.window(size, dim=-1)
        step = layout.window_step(element_bytes, dim=-1)
    except TransformError:
        return  # the law is about the windows taken; refusals are tested where they are made
    start = data.draw(st.sampled_from(range(0, columns - size + 1, step)))
    column_bytes = math.prod(layout.logical_shape[:-1]) * element_bytes
    base = 1024 * data.draw(st.integers(0, 3))
    whole = layout.byte_addresses(base, element_bytes)[..., start:start + size, :]
    assert (window.byte_addresses(base + start * column_bytes, element_bytes) == whole).all()


def test_column_tiles_spanning_every_row_are_windows_and_others_are_not():
    layout = SmemLayout((64, 256), (TileTransform((64, 64)),), 128)
    assert layout.window(64, dim=1).logical_shape == (64, 64) and layout.window_step(2, dim=1) == 64
    assert layout.window(128, dim=1).logical_shape == (64, 128)
    with pytest.raises(TransformError, match="blocks of 64 index"):
        layout.window(32, dim=1)
    rows_of_8 = SmemLayout((64, 256), (TileTransform((8, 64)),), 128)  # a column's tiles lie apart
    with pytest.raises(TransformError, match="blocks of 256 index"):
        rows_of_8.window(64, dim=1)
    with pytest.raises(TransformError, match="windows are of the leading dim or of the last"):
        SmemLayout((2, 64, 64), (), 0).window(32, dim=1)


@pytest.mark.parametrize("swizzle", (32, 64, 128))
def test_a_swizzled_window_starts_on_an_atom_and_repeats_its_rows(swizzle):
    span = swizzle // 2  # bfloat16 elements of one swizzle span
    layout = SmemLayout((64, span), (TileTransform((8, span)),), swizzle)
    assert layout.window_step(2) == 8  # the 8 rows of a tile are one atom (8 rows of the span)
    for start in range(0, 64 - 16 + 1, 8):
        whole = layout.byte_addresses(0, 2)[start:start + 16]
        assert (layout.window(16).byte_addresses(start * swizzle, 2) == whole).all()
    plain = SmemLayout((64, span), (), swizzle)  # rows alone, but the pattern spans 8 of them
    assert plain.window(1).logical_shape == (1, span) and plain.window_step(2) == 8


def test_a_view_cannot_index_a_dim_the_transforms_lay_out():
    layout = SmemLayout((64, 64), (TileTransform((8, 64)),), 0)  # dim 0 becomes tile rows
    with pytest.raises(TransformError, match="cannot index"):
        layout.view(1)
    transposed = SmemLayout((2, 8, 8), (TransposeTransform((1, 0, 2)),), 0)
    with pytest.raises(TransformError, match="moves one of the leading"):
        transposed.view(1)
    assert unbatch_chain(transposed.transforms, 0) == transposed.transforms


@pytest.mark.parametrize("element_bytes", [1, 2, 4])
@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize("base", [0, 1024, 3072])
def test_register_addresses_find_what_a_tma_load_placed(element_bytes, swizzle, base):
    """The layout's byte addresses read back, element for element, the box a TMA load through
    the same transforms and swizzle lays out (the interpreter's TMA model, ptx-hopper §5)."""
    columns = (swizzle or 64) // element_bytes
    layout = make_layout((2, 32, 2 * columns), (TileTransform((8, columns)),), swizzle)
    dtype = np.dtype(f"u{element_bytes}")
    logical = np.arange(math.prod(layout.logical_shape), dtype=np.uint32).astype(dtype).reshape(
        layout.logical_shape)
    logical.reshape(-1)[:] = np.random.default_rng(0).integers(0, 2 ** (8 * element_bytes), logical.size)
    physical = logical.reshape(2, 4, 8, 2, columns).transpose(0, 1, 3, 2, 4)  # the TileTransform by hand
    smem = np.zeros(base + physical.nbytes, np.uint8)
    box_to_smem_bytes(physical, swizzle, base, smem[base:])
    addresses = layout.byte_addresses(base, element_bytes)
    assert (np.ascontiguousarray(smem[addresses]).view(dtype).reshape(logical.shape) == logical).all()


def test_addresses_swizzle_sixteen_byte_chunks_of_the_absolute_address():
    layout = make_layout((8, 32), (), 128)
    addresses = layout.byte_addresses(1024, 4)
    linear = 1024 + np.arange(8 * 32 * 4).reshape(8, 32, 4)
    assert (addresses == swizzled(linear, 128)).all()
    assert (addresses[:, :, 0] % 4 == 0).all() and (np.diff(addresses, axis=-1) == 1).all()


@pytest.mark.parametrize("chain,swizzle,bits,message", [
    ((TileTransform((8, 64), Rounding.DOWN),), 0, 16, "drops elements"),
    ((CollapseLeadingIndicesTransform((64,)),), 0, 16, "cannot use it"),
    ((TileTransform((8, 32)),), 128, 16, "rows of exactly 128 bytes"),
    ((), 64, 4, "pack several to a byte"),
    ((TileTransform((8, 48)),), 0, 16, "not a multiple of the tiling"),
])
def test_layouts_the_memory_cannot_hold_are_refused(chain, swizzle, bits, message):
    with pytest.raises(TransformError, match=message):
        make_layout((64, 64), chain, swizzle).check_element(bits)


def test_no_transforms_and_no_swizzle_is_no_layout():
    assert make_layout((64, 64), (), 0) is None
