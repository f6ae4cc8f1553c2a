"""Planning TMA copies (asyncdsl.hw.tma), checked end to end through the copy-engine emulation.

The key law: for a GMEM array `a`, a slice and a user transform chain, the box the planned
descriptor moves (emulated by `tma.load_box`) is exactly `chain(a[slice])`, with zeros
wherever the slice runs out of the array, laid out as the SMEM buffer.  Stores write back exactly
the in-bounds part.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support import Traced, evaluated, examples

from asyncdsl import dtypes
from asyncdsl.errors import CopyError, OutOfBoundsError, TransformError
from asyncdsl.hw.tma import plan_tiled_copy
from asyncdsl.hw.transforms import (
    CollapseLeadingIndicesTransform,
    DropUnitDimsTransform,
    Rounding,
    TileTransform,
    TransposeTransform,
    apply_chain_array,
)
from asyncdsl.interpret.tma import load_box, store_box
from asyncdsl.kernel_binary import TiledTensorMapSpec

DTYPES = (dtypes.float32, dtypes.bfloat16, dtypes.uint8)


# --- the reference: slice first, transform after -----------------------------------------


def random_gmem(shape, dtype, seed=0):
    values = np.random.default_rng(seed).integers(1, 100, size=shape)
    return values.astype(dtype.numpy)


def bits(array):
    """The array's elements as unsigned integers, so bf16 and NaN compare exactly."""
    array = np.ascontiguousarray(array)
    return array.view(f"u{array.itemsize}")


def reference_window(a, gmem_slice, chain):
    """(chain(a[slice]) zero-padded, mask of the elements that came from the array).

    Elements past the array's edges are zeros, and so are those a Rounding.DOWN tiling drops
    from the GMEM view (found by laying out element ids through the chain).
    """
    sliced = [d for d, entry in enumerate(gmem_slice) if type(entry) is tuple]
    windows = [np.arange(gmem_slice[d][0], gmem_slice[d][0] + gmem_slice[d][1]) for d in sliced]
    grids = dict(zip(sliced, np.ix_(*windows)))
    index = [grids.get(d, gmem_slice[d]) for d in range(a.ndim)]
    valid = np.ones([w.size for w in windows], dtype=bool)
    for i, size in zip(index, a.shape):
        valid = valid & (0 <= i) & (i < size)
    clipped = tuple(np.clip(i, 0, size - 1) for i, size in zip(index, a.shape))

    sliced_shape = tuple(a.shape[d] for d in sliced)
    ids = np.arange(math.prod(sliced_shape)).reshape(sliced_shape)
    kept = np.zeros(ids.size, dtype=bool)
    kept[apply_chain_array(chain, ids).ravel()] = True
    kept = kept.reshape(sliced_shape)[tuple(clipped[d] for d in sliced)]
    valid = valid & kept

    window = np.where(valid, a[clipped], np.zeros((), a.dtype)).astype(a.dtype)
    return apply_chain_array(chain, window), apply_chain_array(chain, valid)


def check_copy(a, dtype, gmem_slice, chain, swizzle_bytes=0):
    """Plan the copy, then check load and store against the reference."""
    expected, valid = reference_window(a, gmem_slice, chain)
    plan = plan_tiled_copy(a.shape, dtype, gmem_slice, chain, swizzle_bytes, expected.shape)
    box = load_box(a, plan, plan.coords)
    assert box.shape == plan.box_dims
    np.testing.assert_array_equal(bits(box.reshape(expected.shape)), bits(expected))

    if any(c < 0 for c in plan.coords):
        with pytest.raises(OutOfBoundsError, match="negative coordinates fault"):
            store_box(np.zeros_like(a), plan, plan.coords, box)
        return plan
    stored = np.zeros_like(a)
    store_box(stored, plan, plan.coords, box)
    np.testing.assert_array_equal(bits(stored).sum(), bits(expected).astype(np.int64).sum())
    np.testing.assert_array_equal(bits(load_box(stored, plan, plan.coords)), bits(box))
    fresh = random_gmem(box.shape, dtype, seed=1)
    stored = np.zeros_like(a)
    store_box(stored, plan, plan.coords, fresh)
    back = load_box(stored, plan, plan.coords).reshape(expected.shape)
    np.testing.assert_array_equal(
        bits(back), np.where(valid, bits(fresh.reshape(expected.shape)), 0)
    )
    return plan


# --- hypothesis: random arrays, slices and tiled/transposed chains ------------------------


@st.composite
def copy_cases(draw):
    dtype = draw(st.sampled_from(DTYPES))
    vector = 16 // dtype.itemsize  # elements per 16 bytes: TMA's unit along the minor dim
    rank = draw(st.integers(1, 6))  # up to 6: squeezed dims may be merged to fit 5
    shape = tuple(draw(st.integers(1, 4)) for _ in range(rank - 1))
    shape += (vector * draw(st.integers(1, 3)),)
    # The innermost dim stays sliced: squeezing it leaves no unit-stride dim for TMA.
    squeezed = draw(st.sets(st.sampled_from(range(rank - 1)))) if rank > 1 else set()
    sliced = [d for d in range(rank) if d not in squeezed]
    n = len(sliced)

    order = list(range(n))  # sliced dims in the order the tiling sees them
    kind = draw(st.sampled_from(["none", "transpose", "tile", "tile+transpose", "transpose+tile"]))
    chain = []
    if kind == "transpose+tile" or kind == "transpose":
        order = list(draw(st.permutations(range(n - 1)))) + [n - 1]
        chain.append(TransposeTransform(tuple(order)))
    tiles = {}
    if "tile" in kind:
        tiling_rank = draw(st.integers(1, n))
        tiling = []
        for position in range(n - tiling_rank, n):
            dim = sliced[order[position]]
            if dim == rank - 1:
                tile = vector * draw(st.integers(1, 2))
            else:
                tile = draw(st.integers(1, 5))
            tiles[dim] = tile
            tiling.append(tile)
        sizes = [shape[d] for d in tiles]
        divides = all(s <= t or s % t == 0 for s, t in zip(sizes, tiling))
        rounding = Rounding.DOWN if not divides else draw(st.sampled_from([None, Rounding.DOWN]))
        chain.append(TileTransform(tuple(tiling), rounding))
        if kind == "tile+transpose":
            outer = n + tiling_rank - 1
            chain.append(TransposeTransform((*draw(st.permutations(range(outer))), outer)))

    gmem_slice = []
    for dim, size in enumerate(shape):
        if dim in squeezed:  # mostly in bounds: merging squeezed dims requires it
            in_bounds = draw(st.integers(0, 4)) > 0
            gmem_slice.append(
                draw(st.integers(0, size - 1) if in_bounds else st.integers(-1, size))
            )
            continue
        tile = tiles.get(dim, 1)
        granule = tile if dim in tiles or dim != rank - 1 else vector
        step = granule if dim == rank - 1 else tile  # a box starts on a 16-byte boundary of the minor dim
        start = step * draw(st.integers(-2, -(-size // step) + 1))
        gmem_slice.append((start, granule * draw(st.integers(1, 3))))
    return dtype, shape, tuple(gmem_slice), tuple(chain)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(copy_cases())
def test_planned_copy_moves_the_transformed_slice(case):
    dtype, shape, gmem_slice, chain = case
    a = random_gmem(shape, dtype)
    try:
        plan = check_copy(a, dtype, gmem_slice, chain)
    except CopyError as error:  # the two rules a random case can legitimately break
        assume("at most 5 dims" not in str(error) and "merges its squeezed dims" not in str(error))
        raise
    assert plan.rank <= 5
    inner_bytes = plan.box_dims[-1] * dtype.itemsize
    if inner_bytes in (32, 64, 128):
        swizzled = plan_tiled_copy(shape, dtype, gmem_slice, chain, inner_bytes)
        assert swizzled.swizzle_bytes == inner_bytes and swizzled.box_dims == plan.box_dims


# --- worked examples ---------------------------------------------------------------------


def test_tiled_copy_with_a_squeezed_batch_dim():
    a = random_gmem((5, 128, 128), dtypes.bfloat16)
    gmem_slice = (2, (0, 128), (64, 64))
    plan = check_copy(a, dtypes.bfloat16, gmem_slice, (TileTransform((64, 64)),), 128)
    assert plan.smem_shape == (2, 1, 64, 64)
    assert plan.global_dims == (5, 2, 2, 64, 64)
    assert plan.global_strides == (32768, 16384, 128, 256, 2)
    assert plan.box_dims == (1, 2, 1, 64, 64)
    assert plan.coords == (2, 0, 1, 0, 0)
    assert plan.box_bytes == 2 * 64 * 64 * 2
    assert plan.tensor_map_spec(3) == TiledTensorMapSpec(
        arg_index=3,
        dtype_code=dtypes.TMA_BFLOAT16,
        element_bytes=2,
        global_dims=(5, 2, 2, 64, 64),
        global_strides=(32768, 16384, 128, 256, 2),
        box_dims=(1, 2, 1, 64, 64),
        swizzle_bytes=128,
    )


def test_squeezed_middle_dim_moves_to_the_front():
    a = random_gmem((4, 3, 32), dtypes.float32)
    plan = check_copy(a, dtypes.float32, ((0, 4), 1, (0, 32)), ())
    assert plan.transforms == (TransposeTransform((1, 0, 2)),)
    assert plan.global_dims == (3, 4, 32) and plan.coords == (1, 0, 0)
    assert plan.smem_shape == (4, 32)


def test_unit_dims_are_dropped_unless_the_start_is_out_of_bounds():
    a = random_gmem((1, 64), dtypes.float32)
    plan = check_copy(a, dtypes.float32, ((0, 1), (0, 16)), ())
    assert plan.box_dims == (16,) and plan.transforms == (DropUnitDimsTransform((0,)),)
    # Starting at 3 along a dim of size 1 is wholly out of bounds: the dim must stay to say so.
    plan = check_copy(a, dtypes.float32, ((3, 1), (0, 16)), ())
    assert plan.box_dims == (1, 16) and plan.coords == (3, 0)


@pytest.mark.parametrize("start", [0, 1, 3, -1])
def test_a_user_dropped_unit_dim_keeps_its_start(start):
    # DropUnitDimsTransform removes the dim from the buffer, not the start from the copy: a window
    # ds(s, 1) of a dim of 1 is out of bounds for s != 0 (zeros), as it is without the transform.
    a = random_gmem((1, 8, 64), dtypes.float32)
    plan = check_copy(a, dtypes.float32, ((start, 1), (0, 8), (0, 64)), (DropUnitDimsTransform((0,)),))
    assert plan.smem_shape == (8, 64)
    assert start in plan.coords if start else plan.rank == 2


def test_a_dropped_unit_dim_keeps_a_traced_start_as_a_coordinate():
    plan = plan_tiled_copy((1, 8, 64), dtypes.float32, ((Traced("i"), 1), (0, 8), (0, 64)),
                           (DropUnitDimsTransform((0,)),), smem_shape=(8, 64))
    assert plan.global_dims == (1, 8, 64) and plan.box_dims == (1, 8, 64)
    assert str(plan.coords[0].expr) == "i"


def test_only_the_dropped_windows_with_a_start_become_coordinates():
    a = random_gmem((1, 4, 1, 16), dtypes.float32)
    chain = (DropUnitDimsTransform((0, 2)), TileTransform((2, 16)))
    plan = check_copy(a, dtypes.float32, ((0, 1), (0, 4), (2, 1), (0, 16)), chain)
    assert plan.smem_shape == (2, 1, 2, 16) and 2 in plan.coords


def test_a_kernel_loading_past_a_dropped_unit_dim_reads_zeros():
    import asyncdsl as ad

    @ad.kernel(grid=(2,), block=128)
    def rows(x, y):
        buf = ad.smem((8, 64), ad.float32)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(ad.program_id(0), 1), :, :], buf, barrier=bar,
                      transforms=[ad.DropUnitDimsTransform((0,))])
        bar.wait()
        ad.async_copy(buf, y.at[ad.program_id(0), :, :])
        ad.await_async_copy(0)

    x = np.arange(8 * 64, dtype=np.float32).reshape(1, 8, 64) + 1
    y = np.full((2, 8, 64), -1, np.float32)
    rows.interpret(x, y)
    np.testing.assert_array_equal(y, np.concatenate([x, np.zeros_like(x)]))


def test_a_unit_dim_dropped_after_another_transform_must_start_at_0():
    chain = (TransposeTransform((1, 0, 2)), DropUnitDimsTransform((1,)))
    refused = "drops dim 1 .* start there is 1, not 0: .* put the DropUnitDimsTransform first"
    with pytest.raises(CopyError, match=refused):
        plan_tiled_copy((1, 8, 64), dtypes.float32, ((1, 1), (0, 8), (0, 64)), chain, smem_shape=(8, 64))
    plan = plan_tiled_copy((1, 8, 64), dtypes.float32, ((0, 1), (0, 8), (0, 64)), chain, smem_shape=(8, 64))
    assert plan.box_dims == (8, 64)


def test_unit_innermost_dim_is_dropped_so_the_next_one_becomes_minor():
    a = random_gmem((64, 1), dtypes.float32)
    plan = check_copy(a, dtypes.float32, ((8, 16), (0, 1)), ())
    assert plan.global_dims == (64,) and plan.box_dims == (16,) and plan.coords == (8,)


def test_many_squeezed_dims_are_collapsed_into_one():
    a = random_gmem((3, 3, 3, 4, 8, 16), dtypes.float32)
    gmem_slice = (1, 2, 0, (0, 4), (0, 8), (0, 16))
    plan = check_copy(a, dtypes.float32, gmem_slice, (TileTransform((8,)),))
    assert plan.transforms[-1] == CollapseLeadingIndicesTransform((4608, 1536, 512))
    assert plan.global_dims == (27, 4, 8, 2, 8)  # 3 squeezed dims of 3 merge into 27 rows
    assert plan.coords == (1 * 9 + 2 * 3 + 0, 0, 0, 0, 0)


def test_traced_starts_give_the_same_coordinates_as_constants():
    chain = (TileTransform((4, 8)),)
    shape = (16, 3, 32)
    static = plan_tiled_copy(shape, dtypes.float32, ((4, 8), 1, (8, 16)), chain)
    traced_slice = ((Traced("j", known_divisor=4), 8), Traced("i"), (Traced("k", known_divisor=8), 16))
    traced = plan_tiled_copy(shape, dtypes.float32, traced_slice, chain)
    assert traced.transforms == static.transforms
    assert (traced.global_dims, traced.box_dims) == (static.global_dims, static.box_dims)
    env = {"i": 1, "j": 4, "k": 8}
    assert evaluated(traced.coords, env) == static.coords == (1, 1, 1, 0, 0)


@pytest.mark.parametrize("known", [1, 2, 4])
def test_a_traced_start_not_provably_on_a_tile_boundary_is_refused_with_the_hint(known):
    chain = (TileTransform((4, 8)),)
    with pytest.raises(CopyError,
                       match=rf"only prove it a multiple of {known}; .*asyncdsl.multiple_of\(start, 8\)"):
        plan_tiled_copy((16, 32), dtypes.float32, ((0, 8), (Traced("k", known_divisor=known), 16)), chain)
    plan_tiled_copy((16, 32), dtypes.float32, ((0, 8), (Traced("k", known_divisor=8 * known), 16)), chain)


def test_plan_without_smem_side_for_prefetch():
    plan = plan_tiled_copy((256, 256), dtypes.float16, ((0, 64), (0, 64)), (), 128, None)
    assert plan.smem_shape == (64, 64) and plan.box_dims == (64, 64)


# --- one test per rule -------------------------------------------------------------------

F32, BF16, U8 = dtypes.float32, dtypes.bfloat16, dtypes.uint8


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ((2, 2, 2, 2, 2, 16), F32, ((0, 2),) * 5 + ((0, 16),)),
            r"TMA copies move at most 5 dims, but the transformed copy has 6",
        ),
        (
            ((2, 2, 2, 2, 2, 2, 16), F32, (1,) + ((0, 2),) * 5 + ((0, 16),)),
            r"at most 5 dims, but the transformed copy has 7",
        ),
        (
            ((1024, 1024), F32, ((0, 300), (0, 16))),
            r"TMA box dimension 300 > 256 along dim 0",
        ),
        (
            ((8, 6), F32, ((0, 8), (0, 4))),
            r"GMEM stride 24 bytes along dim 0 of the TMA view \(8, 6\) is not a multiple of 16",
        ),
        (
            ((8, 8), F32, ((0, 8), (0, 3))),
            r"the minor box dim spans 12 bytes \(3 x 4-byte elements\); TMA needs a multiple of 16",
        ),
        (
            ((64, 64), BF16, ((0, 8), (0, 32)), (), 128),
            r"swizzle 128 needs the minor box dim to span exactly 128 bytes \(64 bfloat16 "
            r"elements\), got 32 elements \(64 bytes\)",
        ),
        (
            ((64, 64), BF16, ((0, 8), (0, 64)), (), 16),
            r"swizzle must be 0, 32, 64 or 128 bytes, got 16",
        ),
        (
            ((64, 64), F32, ((0, 8), (0, 8)), (TransposeTransform((1, 0)),)),
            r"innermost dim of the transformed GMEM view has stride 64 elements",
        ),
        (
            ((64, 64), F32, ((0, 8), (0, 8)), (), 0, (8, 4)),
            r"SMEM buffer shape \(8, 4\) does not match the transformed slice shape \(8, 8\)",
        ),
        (
            ((2**32, 16), U8, ((0, 1), (0, 16))),
            r"TMA view dim 0 has 4294967296 elements, at least 2\^32",
        ),
        (
            ((2, 2**31, 1024), U8, ((0, 2), (0, 1), (0, 16))),
            r"GMEM stride 2199023255552 bytes along dim 0 is at least 2\^40",
        ),
        (
            ((64, 64), dtypes.float4_e2m1fn, ((0, 8), (0, 31))),
            r"float4_e2m1fn elements travel packed 2 per byte .* so the slice's minor window "
            r"\(size 31\) must be a multiple of 2 elements",
        ),
        (
            ((0, 64), F32, ((0, 8), (0, 16))),
            r"GMEM shape \(0, 64\) has an empty dim",
        ),
        (
            ((64, 64), F32, ((0, 8),)),
            r"the slice has 1 entries but the GMEM array has 2 dims \(shape \(64, 64\)\)",
        ),
        (
            ((64, 64), F32, ((0, 8), (0, 0))),
            r"slice size along dim 1 must be a positive int, got 0",
        ),
        (
            ((64, 64), F32, ((4, 16), (0, 16)), (TileTransform((8, 16)),)),
            r"slice start 4 along dim 0 is not a multiple of its tile 8: a tiled TMA box must "
            r"start on a tile boundary",
        ),
        (
            ((64, 64), F32, ((0, 32), (0, 16)), (TileTransform((64, 16), Rounding.DOWN),)),
            r"TMA box dimension 0 along dim 0 is empty",
        ),
        (
            ((3, 3, 3, 4, 8, 16), F32, (1, 5, 0, (0, 4), (0, 8), (0, 16)), (TileTransform((8,)),)),
            r"index 5 of a squeezed dim of size 3 is out of bounds",
        ),
    ],
)
def test_copy_rules(args, message):
    with pytest.raises(CopyError, match=message):
        plan_tiled_copy(*args)


def test_transforms_that_do_not_fit_the_slice_raise_transform_errors():
    with pytest.raises(TransformError, match="needs at least 2 dims"):
        plan_tiled_copy((4, 64), F32, (1, (0, 64)), (TileTransform((2, 16)),))
    with pytest.raises(TransformError, match=r"not a multiple of the tiling \(64,\)"):
        plan_tiled_copy((128,), F32, ((0, 48),), (TileTransform((64,)),))


@pytest.mark.parametrize("dtype, bad, good", [
    (dtypes.float32, 1, 4), (dtypes.float32, 6, 12), (dtypes.uint8, 8, 16), (dtypes.bfloat16, 4, -8),
])
def test_a_box_starts_on_a_16_byte_boundary_of_the_minor_dim(dtype, bad, good):
    shape = (8, 64)
    plan_tiled_copy(shape, dtype, ((0, 8), (good, 16)), smem_shape=(8, 16))
    with pytest.raises(CopyError, match=rf"starts at element {bad} of the minor dim .* 16-byte boundary"):
        plan_tiled_copy(shape, dtype, ((0, 8), (bad, 16)), smem_shape=(8, 16))


def test_a_traced_minor_start_must_be_provably_on_a_16_byte_boundary():
    plan_tiled_copy((8, 64), dtypes.float32, ((0, 8), (Traced("s", 4), 16)), smem_shape=(8, 16))
    with pytest.raises(CopyError, match=r"only prove it a multiple of 2; .*asyncdsl.multiple_of\(start, 4\)"):
        plan_tiled_copy((8, 64), dtypes.float32, ((0, 8), (Traced("s", 2), 16)), smem_shape=(8, 16))


@pytest.mark.parametrize("start", [(1 << 31) + 16, 1 << 40, -(1 << 31) - 16])
def test_a_static_coordinate_that_does_not_fit_32_bits_is_refused(start):
    # It once compiled to a coordinate wrapped to another element.
    shape = ((1 << 32) - 16,)
    with pytest.raises(CopyError, match=rf"coordinate {start} along dim 0 .* signed 32-bit"):
        plan_tiled_copy(shape, dtypes.int8, ((start, 16),), smem_shape=(16,))
    with pytest.raises(CopyError, match=rf"coordinate {start} along dim 0"):
        plan_tiled_copy((*shape, 16), dtypes.int8, (start, (0, 16)), smem_shape=(16,))


def test_coordinates_at_the_ends_of_the_32_bit_range_are_planned():
    shape = ((1 << 32) - 16,)
    for start in ((1 << 31) - 16, -(1 << 31)):
        assert plan_tiled_copy(shape, dtypes.int8, ((start, 16),), smem_shape=(16,)).coords == (start,)
    # The coordinate is the tile's, not the element's: a tiled start past 2^31 fits.
    plan = plan_tiled_copy(shape, dtypes.int8, (((1 << 31) + 16, 16),), (TileTransform((16,)),),
                           smem_shape=(1, 16))
    assert plan.coords[0] == ((1 << 31) + 16) // 16
