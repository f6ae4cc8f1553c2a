"""Laws of wgmma operand planning (asyncdsl.hw.wgmma): decoding the descriptors a plan makes, the
way the hardware reads them, finds every element of the operand exactly where the buffer's
layout (`SmemLayout`, the independent reference TMA copies are checked against) put it; the
recipes run on the H200 (docs/hardware.md §14.2) come out byte for byte; and what the tensor
cores cannot take is refused with the layout or type that would do."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl import dtypes
from asyncdsl.errors import MmaError
from asyncdsl.hw.smem_layout import SmemLayout
from asyncdsl.hw.transforms import TileTransform, TransposeTransform
from asyncdsl.hw.wgmma import (
    SUPPORTED_TYPES,
    Descriptor,
    check_shapes,
    decode_descriptor,
    encode_descriptor,
    mma_types,
    operand_addresses,
    plan_operand,
)

LAWS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
BF16 = mma_types(dtypes.float32, dtypes.bfloat16, dtypes.bfloat16)


@LAWS
@given(st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1),
       st.sampled_from((32, 64, 128)))
def test_decoding_undoes_encoding(start, lbo, sbo, swizzle):
    descriptor = encode_descriptor(start << 4, lbo << 4, sbo << 4, swizzle)
    assert decode_descriptor(descriptor) == Descriptor(start << 4, lbo << 4, sbo << 4, swizzle)


def _layout(stored, element, swizzle, tile_rows: int = 8):
    return SmemLayout(stored, (TileTransform((tile_rows, swizzle // element.itemsize)),), swizzle)


@st.composite
def operands(draw):
    """A stored operand matrix the tensor cores can read: its types, major and layout."""
    types = draw(st.sampled_from(sorted(SUPPORTED_TYPES.values(), key=str)))
    element = types.a
    swizzle = draw(st.sampled_from((32, 64, 128)))
    per_row = swizzle // element.itemsize
    k_major = not types.transposable or draw(st.booleans())
    mn_unit = 8 if k_major else per_row  # an MN-major operand is whole swizzle rows of MN
    k_unit = max(types.k, per_row) if k_major else max(types.k, 8)
    mn = mn_unit * draw(st.integers(1, max(1, 256 // mn_unit)))
    k = k_unit * draw(st.integers(1, 3))
    stored = (mn, k) if k_major else (k, mn)
    base = 1024 * draw(st.integers(0, 8))  # buffers start on a swizzle-pattern boundary
    # Tiles of 8 rows, or whole columns of atoms (what one TMA box per column fills).
    tile_rows = draw(st.sampled_from([8, stored[0]]))
    whole_mn = draw(st.booleans())
    return types, element, swizzle, k_major, mn, k, stored, base, tile_rows, whole_mn


@LAWS
@given(operands())
def test_the_planned_descriptors_read_each_element_where_the_layout_put_it(operand):
    types, element, swizzle, k_major, mn, k, stored, base, tile_rows, whole_mn = operand
    layout = _layout(stored, element, swizzle, tile_rows)
    plan = plan_operand(layout, stored, element, k_major, types, "operand", whole_mn=whole_mn)
    where = layout.byte_addresses(base, element.itemsize)  # (*stored, bytes)
    if not k_major:
        where = where.transpose(1, 0, 2)  # as (mn, k)
    rows = mn if whole_mn or mn % 64 else 64
    groups = range(mn // rows)
    assert len(plan.mn_offsets) == len(groups)
    for group in groups:
        for step in range(k // types.k):
            read = operand_addresses(plan.descriptor(base, group, step), plan.k_major, element.itemsize,
                                     rows, types.k)
            expected = where[group * rows:(group + 1) * rows, step * types.k:(step + 1) * types.k]
            np.testing.assert_array_equal(read, expected)


@pytest.mark.parametrize(("stored", "swizzle", "k_is_column", "high", "advance"), [
    ((64, 64), 128, True, 0x4000004000010000, 32),   # K-major, 128-byte swizzle: +2 per k16
    ((64, 32), 64, True, 0x8000002000010000, 32),    # K-major, 64-byte swizzle
    ((64, 16), 32, True, 0xC000001000010000, None),  # K-major, 32-byte swizzle: one k16
    ((64, 64), 128, False, 0x4000004002000000, 2048),  # B MN-major, 128-byte swizzle: +128 per k16
])
def test_the_recipes_run_on_the_h200_come_out_byte_for_byte(stored, swizzle, k_is_column, high, advance):
    plan = plan_operand(_layout(stored, dtypes.bfloat16, swizzle), stored, dtypes.bfloat16, k_is_column, BF16,
                        "B", whole_mn=True)
    assert plan.constant_bits == high
    assert plan.descriptor(0x400, 0, 0) == high | (0x400 >> 4)
    if advance is not None:
        assert plan.k_offsets[1] - plan.k_offsets[0] == advance


def test_layouts_the_tensor_cores_cannot_read_are_refused_with_the_one_they_can():
    element = dtypes.bfloat16
    for layout in (None, SmemLayout((64, 64), (TileTransform((8, 32)),), 0),
                   SmemLayout((64, 64), (TransposeTransform((1, 0)),), 128)):  # M contiguous, K-major wanted
        with pytest.raises(MmaError, match=r"TileTransform\(\(8, 64\)\), swizzle=128"):
            plan_operand(layout, (64, 64), element, True, BF16, "wgmma's A")


def test_layouts_with_the_same_bytes_plan_alike():
    element = dtypes.bfloat16
    plans = {plan_operand(layout, (64, 64), element, True, BF16, "wgmma's A") for layout in (
        SmemLayout((64, 64), (), 128), _layout((64, 64), element, 128), _layout((64, 64), element, 128, 64))}
    assert len(plans) == 1


def test_only_16_bit_operands_may_be_mn_major():
    fp8 = mma_types(dtypes.float32, dtypes.float8_e4m3fn, dtypes.float8_e4m3fn)
    layout = _layout((64, 128), dtypes.float8_e4m3fn, 128)
    with pytest.raises(MmaError, match="only 16-bit types can be transposed"):
        plan_operand(layout, (64, 128), dtypes.float8_e4m3fn, False, fp8, "wgmma's B")


@pytest.mark.parametrize(("types", "fragment"), [
    ((dtypes.float16, dtypes.float16, dtypes.float16), "float16 accumulators are not supported"),
    ((dtypes.float32, dtypes.bfloat16, dtypes.float16), "wgmma cannot compute float32 += bfloat16 @ float16"),
    ((dtypes.int32, dtypes.int8, dtypes.float8_e4m3fn), "the tensor cores take"),
])
def test_type_triples_the_tensor_cores_lack_are_refused(types, fragment):
    with pytest.raises(MmaError, match=re.escape(fragment)):
        mma_types(*types)


@pytest.mark.parametrize(("acc", "a", "b", "fragment"), [
    ((96, 64), (96, 16), (16, 64), "multiple of 64"),
    ((64, 12), (64, 16), (16, 12), "multiple of 8 from 8 to 256"),
    ((64, 264), (64, 16), (16, 264), "multiple of 8 from 8 to 256"),
    ((64, 64), (64, 24), (24, 64), "K must be a multiple of 16"),
    ((64, 64), (64, 32), (16, 64), "do not agree"),
])
def test_shapes_the_instruction_lacks_are_refused(acc, a, b, fragment):
    with pytest.raises(MmaError, match=fragment):
        check_shapes(acc, a, b, BF16)


def test_integer_n_follows_the_sparser_set():
    s8 = mma_types(dtypes.int32, dtypes.int8, dtypes.int8)
    check_shapes((64, 48), (64, 32), (32, 48), s8)
    with pytest.raises(MmaError, match="8, 16, 24 or a multiple of 16"):
        check_shapes((64, 40), (64, 32), (32, 40), s8)
    assert s8.ptx_version == (8, 0)
    assert mma_types(dtypes.int32, dtypes.uint8, dtypes.int8).ptx_version == (8, 4)
