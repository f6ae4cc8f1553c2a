"""The bulk-copy rule of stores under oob="undefined" (asyncdsl.hw.bulk), against brute force.

A bulk store writes its window's run of bytes, clamped at the array's end (the reference's clamp,
nothing for a run that starts outside the array).  Where the window leaves the array anywhere
else, that run holds other elements of the array: the store must be refused.  Brute force: mark
the elements the clamped run writes and the window's elements inside the array, and compare.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl import dtypes
from asyncdsl.errors import CopyError
from asyncdsl.hw.bulk import check_bulk_copy, clamped_bytes, clamped_store_stays_in_window
from asyncdsl.hw.gmem_runs import SQUEEZED, contiguous_strides
from asyncdsl.hw.options import Oob


def brute_force(shape, starts, sizes) -> bool:
    """Whether the clamped run writes exactly nothing, or the window's part inside the array."""
    widths = [1 if size == SQUEEZED else size for size in sizes]
    strides = contiguous_strides(shape)
    total = math.prod(shape)
    offset = sum(s * t for s, t in zip(starts, strides))
    count = clamped_bytes(offset, math.prod(widths), total)  # elements, as bytes of 1
    written = set(range(offset, offset + count))
    inside = set()
    for index in itertools.product(*(range(s, s + w) for s, w in zip(starts, widths))):
        if all(0 <= i < n for i, n in zip(index, shape)):
            inside.add(sum(i * t for i, t in zip(index, strides)))
    return written <= inside


@st.composite
def run_windows(draw):
    """A window that is one run of the array: indices, one window, whole trailing dims."""
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    k = draw(st.integers(0, rank - 1))
    starts, sizes = [], []
    for dim, extent in enumerate(shape):
        if dim < k:
            squeeze = draw(st.booleans())
            starts.append(draw(st.integers(-2, extent + 1)))
            sizes.append(SQUEEZED if squeeze else 1)
        elif dim == k:
            starts.append(draw(st.integers(-extent - 2, extent + 2)))
            sizes.append(draw(st.integers(1, extent + 2)))
        else:
            starts.append(draw(st.sampled_from([0, 0, 0, -1, 1, extent])))
            sizes.append(extent)
    return shape, tuple(starts), tuple(sizes)


@settings(max_examples=examples(600), deadline=None)
@given(run_windows())
def test_the_rule_is_what_the_clamped_run_writes(window):
    shape, starts, sizes = window
    assert clamped_store_stays_in_window(shape, starts, sizes) == brute_force(shape, starts, sizes)


@pytest.mark.parametrize(
    "shape, starts, sizes, allowed",
    [
        ((4, 16), (1, 0), (SQUEEZED, 16), True),  # inside
        ((4, 16), (3, 0), (2, 16), True),  # past the end of the array: the clamp
        ((4, 4, 16), (3, 3, 0), (SQUEEZED, 2, 16), True),  # past the end of the last slab's rows
        ((4, 4, 16), (1, 3, 0), (SQUEEZED, 2, 16), False),  # the run goes on into slab 2
        ((4, 4, 16), (1, -1, 0), (SQUEEZED, SQUEEZED, 16), False),  # y[1, -1] is y[0, 3] as a run
        ((4, 16), (-1, 0), (2, 16), True),  # starts before the array: nothing is written
        ((4, 4, 16), (4, 0, 0), (SQUEEZED, 4, 16), True),  # past the array: nothing
    ],
)
def test_static_store_windows(shape, starts, sizes, allowed):
    assert clamped_store_stays_in_window(shape, starts, sizes) is allowed
    smem = tuple(s for s in sizes if s != SQUEEZED)
    if allowed:
        check_bulk_copy(shape, dtypes.float32, starts, sizes, smem, Oob.UNDEFINED, store=True)
    else:
        with pytest.raises(CopyError, match="would overwrite elements outside the slice"):
            check_bulk_copy(shape, dtypes.float32, starts, sizes, smem, Oob.UNDEFINED, store=True)
    # loads: undefined
    check_bulk_copy(shape, dtypes.float32, starts, sizes, smem, Oob.UNDEFINED, store=False)


def test_brute_force_sees_the_fuzzed_cases():
    # The fuzz cases 1:543 and 1:907 of seed 1 wrote a row of y that their slices do not hold.
    assert not brute_force((4, 16, 256), (3, -5, 0), (SQUEEZED, SQUEEZED, 256))
    assert not brute_force((4, 1, 64), (2, -1, 0), (SQUEEZED, SQUEEZED, 512))
    assert np.all([brute_force((8, 16), (s, 0), (4, 16)) for s in range(-8, 12)])
