"""The CPU copy engine (asyncdsl.interpret.tma_engine): GMEM boxes and the swizzled SMEM layout."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl import dtypes
from asyncdsl.errors import CopyError, InterpretError, OutOfBoundsError
from asyncdsl.hw.tma import plan_tiled_copy
from asyncdsl.interpret.tma import (
    box_shape,
    box_to_smem_bytes,
    load_box,
    smem_byte_offsets,
    smem_bytes_to_box,
    smem_footprint_bytes,
    store_box,
)
from asyncdsl.kernel_binary import TiledTensorMapSpec


def spec_2d(rows, cols, box, element_bytes=4, **extra):
    """A row-major rows x cols map with a `box`-shaped box."""
    return TiledTensorMapSpec(
        arg_index=0,
        dtype_code=dtypes.TMA_FLOAT32,
        element_bytes=element_bytes,
        global_dims=(rows, cols),
        global_strides=(cols * element_bytes, element_bytes),
        box_dims=box,
        **extra,
    )


# --- GMEM side ---------------------------------------------------------------------------


def test_load_past_the_high_end_zero_fills():
    gmem = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) + 1
    box = load_box(gmem, spec_2d(64, 64, (16, 16)), (56, 56))
    np.testing.assert_array_equal(box[:8, :8], gmem[56:, 56:])
    assert not box[8:].any() and not box[:, 8:].any()


@pytest.mark.parametrize("coords", [(-8, -8), (-8, 0), (0, -8)])
def test_load_at_negative_coordinates_zero_fills(coords):
    gmem = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) + 1
    box = load_box(gmem, spec_2d(64, 64, (16, 16)), coords)
    expected = np.zeros((16, 16), np.float32)
    r, c = coords
    expected[max(0, -r) :, max(0, -c) :] = gmem[max(r, 0) : r + 16, max(c, 0) : c + 16]
    np.testing.assert_array_equal(box, expected)


def test_nan_fill_uses_the_hardware_pattern():
    gmem = np.ones((64, 64), np.float32)
    box = load_box(gmem, spec_2d(64, 64, (16, 16), oob_nan=True), (56, 0))
    assert (box[:8] == 1).all()
    assert (box[8:].view(np.uint32) == 0x7FF77FF7).all()


def test_store_clips_at_the_high_end():
    gmem = np.zeros((64, 64), np.float32)
    box = np.arange(256, dtype=np.float32).reshape(16, 16) + 1
    store_box(gmem, spec_2d(64, 64, (16, 16)), (56, 60), box)
    np.testing.assert_array_equal(gmem[56:, 60:], box[:8, :4])
    assert gmem.sum() == box[:8, :4].sum()


def test_store_at_negative_coordinates_is_a_fault():
    gmem = np.zeros((64, 64), np.float32)
    with pytest.raises(OutOfBoundsError, match=r"coordinate -8 along dim 1 \(coords \(0, -8\)\)"):
        store_box(gmem, spec_2d(64, 64, (16, 16)), (0, -8), np.ones((16, 16), np.float32))
    assert not gmem.any()


def test_element_strides_skip_rows_but_not_the_innermost_dim():
    gmem = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    spec = spec_2d(8, 16, (5, 8), element_strides=(2, 3))
    assert box_shape(spec) == (3, 8)
    np.testing.assert_array_equal(load_box(gmem, spec, (1, 4)), gmem[1:6:2, 4:12])


def test_base_offset_and_raw_byte_buffers():
    values = np.arange(32, dtype=np.float32)
    raw = values.view(np.uint8)  # the kernel argument as plain bytes
    spec = TiledTensorMapSpec(
        arg_index=0,
        dtype_code=dtypes.TMA_FLOAT32,
        element_bytes=4,
        global_dims=(3, 4),
        global_strides=(32, 4),
        box_dims=(2, 4),
        base_offset_bytes=16,
    )
    box = load_box(raw, spec, (1, 0), dtype=np.float32)
    np.testing.assert_array_equal(box, [[12, 13, 14, 15], [20, 21, 22, 23]])
    store_box(raw, spec, (0, 0), -box)
    np.testing.assert_array_equal(values[4:8], -box[0])


def test_views_outside_the_buffer_and_mismatched_types_are_rejected():
    with pytest.raises(OutOfBoundsError, match="views bytes up to 4096 of a 4092-byte"):
        load_box(np.zeros(1023, np.float32), spec_2d(32, 32, (8, 8)), (0, 0))
    with pytest.raises(ValueError, match="2-byte elements, the tensor map 4"):
        load_box(np.zeros((32, 32), np.float16), spec_2d(32, 32, (8, 8)), (0, 0))
    with pytest.raises(ValueError, match="box of shape"):
        store_box(np.zeros((32, 32), np.float32), spec_2d(32, 32, (8, 8)), (0, 0), np.zeros(8))


def test_plan_and_its_tensor_map_spec_emulate_alike():
    gmem = np.random.default_rng(0).standard_normal((6, 40, 48)).astype(np.float32)
    plan = plan_tiled_copy(gmem.shape, dtypes.float32, (3, (32, 16), (16, 32)), ())
    spec = plan.tensor_map_spec(arg_index=2)
    np.testing.assert_array_equal(
        load_box(gmem, plan, plan.coords), load_box(gmem, spec, plan.coords)
    )


# --- SMEM side: the swizzle --------------------------------------------------------------


def reference_smem_image(box_rows: np.ndarray, span: int, base: int) -> np.ndarray:
    """docs/hardware.md §4.1 chunk by chunk: rows padded to `span`, then the address XOR."""
    rows, inner = box_rows.shape
    pitch = span if span else inner
    image = np.zeros(rows * pitch, dtype=np.uint8)
    for row in range(rows):
        for chunk in range(0, inner, 16):
            address = base + row * pitch + chunk
            if span:
                address ^= ((address >> 7) & (span // 16 - 1)) << 4
            image[address - base : address - base + 16] = box_rows[row, chunk : chunk + 16]
    return image


@st.composite
def swizzle_cases(draw):
    span = draw(st.sampled_from([0, 32, 64, 128]))
    element_bytes = draw(st.sampled_from([1, 2, 4, 8]))
    chunks = draw(st.integers(1, span // 16 if span else 6))
    inner = chunks * 16 // element_bytes
    outer = tuple(draw(st.lists(st.integers(1, 9), min_size=0, max_size=2)))
    base = 128 * draw(st.integers(0, 40))
    return span, np.dtype(f"u{element_bytes}"), outer + (inner,), base


@settings(max_examples=examples(300), deadline=None)
@given(swizzle_cases())
def test_smem_layout_matches_the_documented_formula(case):
    span, dtype, shape, base = case
    box = np.random.default_rng(len(shape)).integers(0, 2**8, size=shape).astype(dtype)
    image = box_to_smem_bytes(box, span, base)
    rows = np.ascontiguousarray(box).view(np.uint8).reshape(math.prod(shape[:-1]), -1)
    np.testing.assert_array_equal(image, reference_smem_image(rows, span, base))
    assert image.size == smem_footprint_bytes(shape, dtype.itemsize, span)
    np.testing.assert_array_equal(smem_bytes_to_box(image, shape, dtype, span, base), box)


@pytest.mark.parametrize(
    "span, row, expected_offset",
    [(128, 1, 128 + 16), (128, 7, 7 * 128 + 112), (128, 8, 1024), (64, 2, 128 + 16), (32, 4, 144)],
)
def test_first_chunk_of_a_row_lands_where_the_formula_says(span, row, expected_offset):
    offsets = smem_byte_offsets((row + 1, span // 2), 2, span, base_address=0)
    assert offsets[row, 0] == expected_offset


def test_swizzle_follows_the_absolute_address():
    box = np.arange(16 * 64, dtype=np.uint16).reshape(16, 64)
    at_zero = box_to_smem_bytes(box, 128, 0)
    at_offset = box_to_smem_bytes(box, 128, 2048 + 384)
    assert not np.array_equal(at_zero, at_offset)
    np.testing.assert_array_equal(
        smem_bytes_to_box(at_offset, box.shape, np.uint16, 128, 2432), box
    )


def test_rows_narrower_than_the_span_leave_the_padding_untouched():
    box = np.ones((4, 16), np.float32)  # 64-byte rows under a 128-byte swizzle
    smem = np.full(smem_footprint_bytes(box.shape, 4, 128), 0xAA, np.uint8)
    box_to_smem_bytes(box, 128, 1024, smem)
    assert smem.size == 512 and (smem == 0xAA).sum() == 256


def test_load_swizzle_unswizzle_store_round_trip():
    gmem = np.random.default_rng(1).integers(0, 1000, (128, 256)).astype(dtypes.bfloat16.numpy)
    plan = plan_tiled_copy(gmem.shape, dtypes.bfloat16, ((64, 64), (64, 64)), (), 128, (64, 64))
    smem = box_to_smem_bytes(load_box(gmem, plan, plan.coords), 128, 4096)
    back = smem_bytes_to_box(smem, plan.box_dims, gmem.dtype, 128, 4096)
    out = np.zeros_like(gmem)
    store_box(out, plan, plan.coords, back)
    np.testing.assert_array_equal(
        out[64:, 64:128].view(np.uint16), gmem[64:, 64:128].view(np.uint16)
    )


@pytest.mark.parametrize(
    "shape, span, base, error, message",
    [
        ((8, 16), 128, 1040, InterpretError, "address 1040 is not 128-byte aligned"),
        ((8, 64), 64, 0, CopyError, "rows of 128 bytes do not fit the 64-byte swizzle span"),
        ((8, 6), 0, 0, CopyError, "rows of 12 bytes: TMA needs a multiple of 16"),
        ((8, 8), 16, 0, CopyError, "swizzle must be 0, 32, 64 or 128 bytes, got 16"),
    ],
)
def test_smem_layout_rules(shape, span, base, error, message):
    with pytest.raises(error, match=message):
        box_to_smem_bytes(np.zeros(shape, np.uint16), span, base)
