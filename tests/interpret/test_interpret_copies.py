"""The interpreter's fast TMA data movement agrees with `asyncdsl.interpret.tma_engine`, the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl.errors import OutOfBoundsError
from asyncdsl.interpret import tma
from asyncdsl.kernel_binary import TiledTensorMapSpec

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@st.composite
def boxes(draw):
    """A row-major tensor map over a buffer with some slack, and box coordinates around it."""
    element_bytes = draw(st.sampled_from([1, 2, 4, 8]))
    rank = draw(st.integers(1, 3))
    inner_elements = 16 // element_bytes
    dims = [draw(st.integers(1, 12)) for _ in range(rank - 1)]
    dims.append(inner_elements * draw(st.integers(1, 4)))
    strides = [element_bytes]
    for size in reversed(dims[1:]):
        strides.insert(0, strides[0] * size)
    box = [draw(st.integers(1, 8)) for _ in range(rank - 1)] + [inner_elements * draw(st.integers(1, 2))]
    spec = TiledTensorMapSpec(
        arg_index=0, dtype_code=0, element_bytes=element_bytes, global_dims=tuple(dims),
        global_strides=tuple(strides), box_dims=tuple(box),
    )
    coords = [draw(st.integers(-b - 2, d + 2)) for b, d in zip(box, dims)]
    return spec, coords


def buffer_for(spec: TiledTensorMapSpec, seed: int) -> np.ndarray:
    size = math.prod(spec.global_dims) * spec.element_bytes + 64  # bytes past the view stay put
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


@settings(max_examples=examples(200), deadline=None)
@given(boxes())
def test_loads_agree_with_the_reference(case):
    spec, coords = case
    raw = buffer_for(spec, 1)
    ours = tma.read_gmem_box(raw, spec, coords, "x")
    reference = tma.load_box(raw, spec, coords, dtype=_UINT[spec.element_bytes])
    assert ours.tobytes() == reference.tobytes()


@settings(max_examples=examples(200), deadline=None)
@given(boxes())
def test_stores_agree_with_the_reference(case):
    spec, coords = case
    coords = [max(c, 0) for c in coords]  # negative coordinates fault, tested below
    box = np.random.default_rng(2).integers(0, 256, (*spec.box_dims, spec.element_bytes), dtype=np.uint8)
    ours, reference = buffer_for(spec, 3), buffer_for(spec, 3)
    tma.write_gmem_box(ours, spec, coords, box, "y")
    tma.store_box(reference, spec, coords, box.view(_UINT[spec.element_bytes])[..., 0])
    assert ours.tobytes() == reference.tobytes()


def test_store_at_negative_coordinates_is_out_of_bounds():
    spec = TiledTensorMapSpec(0, 0, 4, (8, 8), (32, 4), (4, 4))
    with pytest.raises(OutOfBoundsError, match="coordinate -1 along dim 1"):
        tma.write_gmem_box(np.zeros(256, np.uint8), spec, (0, -1), np.zeros((4, 4, 4), np.uint8), "y")


def test_nan_fill_and_element_strides_take_the_reference_path():
    spec = TiledTensorMapSpec(
        0, 7, 4, (4, 8), (32, 4), (4, 8), element_strides=(2, 1), oob_nan=True
    )
    raw = np.arange(32, dtype=np.float32).view(np.uint8)
    box = tma.read_gmem_box(raw, spec, (2, 4), "x").view(np.uint32)[..., 0]
    assert box.shape == (2, 8)  # every other row
    assert (box[0, :4] == np.arange(20, 24, dtype=np.float32).view(np.uint32)).all()
    assert (box[0, 4:] == 0x7FF77FF7).all() and (box[1] == 0x7FF77FF7).all()


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize("offset", [0, 1024 + 384, 4096])
def test_smem_layout_agrees_with_the_reference(swizzle, offset):
    inner_bytes = swizzle or 48
    shape = (3, 4, inner_bytes // 2)
    spec = TiledTensorMapSpec(0, 0, 2, shape, (4 * inner_bytes, inner_bytes, 2), shape, swizzle_bytes=swizzle)
    rng = np.random.default_rng(swizzle)
    box = rng.integers(0, 256, (3, 4, inner_bytes // 2, 2), dtype=np.uint8)
    smem = rng.integers(0, 256, 8192, dtype=np.uint8)
    reference = smem.copy()
    tma.write_smem_box(smem, offset, spec, box)
    tma.box_to_smem_bytes(box.view(np.uint16)[..., 0], swizzle, offset, reference[offset:])
    assert smem.tobytes() == reference.tobytes()  # padding and everything around untouched
    assert tma.read_smem_box(smem, offset, spec).tobytes() == box.tobytes()
