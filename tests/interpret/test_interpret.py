"""The interpreter moves bytes as the GPU does: tile copies, edges, transforms, swizzle, pipelines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples, random_bits, same_bytes

import asyncdsl as ad
from asyncdsl.examples.tile_copy import tile_copy


@pytest.mark.parametrize(
    "dtype, bm, bn",
    [(ad.float32, 64, 32), (ad.bfloat16, 32, 64), (ad.float16, 64, 64), (ad.int8, 32, 128),
     (ad.float8_e4m3fn, 16, 256)],
)
def test_tile_copy_is_bit_exact_for_every_dtype(dtype, bm, bn):
    x = random_bits((192, 256), dtype, seed=1)
    y = random_bits((192, 256), dtype, seed=2)
    tile_copy.interpret(x, y, BM=bm, BN=bn)
    assert same_bytes(x, y)


def test_ragged_edges_are_clipped_on_store():
    x = random_bits((100, 36), ad.float32)
    y = np.zeros_like(x)
    tile_copy.interpret(x, y, BM=64, BN=32)  # 2 x 2 tiles, the last row and column overhang
    assert same_bytes(x, y)


@ad.kernel(grid=lambda x, y, BM, BN: (y.shape[0] // BM, y.shape[1] // BN))
def copy_into_padded(x, y, BM: ad.constexpr, BN: ad.constexpr):
    row, col = ad.program_id(0) * BM, ad.program_id(1) * BN
    tile = ad.smem((BM, BN), x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[ad.ds(row, BM), ad.ds(col, BN)], tile, barrier=loaded)
    loaded.wait()
    ad.async_copy(tile, y.at[ad.ds(row, BM), ad.ds(col, BN)])
    ad.await_async_copy(0)


def test_loads_past_the_end_are_zero_filled():
    x = random_bits((100, 36), ad.float32)
    y = np.full((128, 64), 7.0, np.float32)
    copy_into_padded.interpret(x, y, BM=64, BN=32)
    expected = np.zeros((128, 64), np.float32)
    expected[:100, :36] = x
    assert same_bytes(expected, y)


@ad.kernel(grid=lambda x, y, B, S: (y.shape[0] // B, y.shape[1] // B))
def shifted_copy(x, y, B: ad.constexpr, S: ad.constexpr):
    row, col = ad.program_id(0) * B, ad.program_id(1) * B
    tile = ad.smem((B, B), x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[ad.ds(row - S, B), ad.ds(col - S, B)], tile, barrier=loaded)
    loaded.wait()
    ad.async_copy(tile, y.at[ad.ds(row, B), ad.ds(col, B)])
    ad.await_async_copy(0)


def test_loads_at_negative_coordinates_are_zero_filled():
    x = random_bits((64, 64), ad.float32)
    y = np.full_like(x, 3.0)
    shifted_copy.interpret(x, y, B=32, S=8)
    expected = np.zeros_like(x)
    expected[8:, 8:] = x[:-8, :-8]
    assert same_bytes(expected, y)


@ad.kernel(grid=(1, 1))
def first_tile_only(x, y, B: ad.constexpr):
    tile = ad.smem((B, B), x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[ad.ds(0, B), ad.ds(0, B)], tile, barrier=loaded)
    loaded.wait()
    ad.async_copy(tile, y.at[ad.ds(0, B), ad.ds(0, B)])
    ad.await_async_copy(0)


def test_bytes_no_copy_touches_stay_untouched():
    x = random_bits((64, 64), ad.float32, seed=3)
    y = random_bits((64, 64), ad.float32, seed=4)
    before = y.copy()
    first_tile_only.interpret(x, y, B=32)
    assert same_bytes(y[:32, :32], x[:32, :32])
    assert same_bytes(y[32:], before[32:]) and same_bytes(y[:32, 32:], before[:32, 32:])


@ad.kernel(grid=lambda x, y: (x.shape[0],))
def copy_batch_items(x, y):
    b = ad.program_id(0)
    tile = ad.smem(x.shape[1:], x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[b], tile, barrier=loaded)  # the batch dim is squeezed
    loaded.wait()
    ad.async_copy(tile, y.at[b])
    ad.await_async_copy(0)


def test_squeezed_dims():
    x = random_bits((3, 16, 32), ad.bfloat16)
    y = np.zeros_like(x)
    copy_batch_items.interpret(x, y)
    assert same_bytes(x, y)


@ad.kernel(grid=(1,))
def load_transformed(x, y, T: ad.constexpr):
    """Loads all of `x` through transform T, then stores SMEM as it lies into all of `y`."""
    tile = ad.smem(y.shape, x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[...], tile, barrier=loaded, transforms=T)
    loaded.wait()
    ad.async_copy(tile, y.at[...])
    ad.await_async_copy(0)


def test_tiled_layout_in_smem():
    tiling = ad.TileTransform((32, 16))
    x = random_bits((64, 32), ad.float32)
    y = np.zeros((2, 2, 32, 16), np.float32)
    load_transformed.interpret(x, y, T=tiling)
    assert same_bytes(y, np.ascontiguousarray(x.reshape(2, 32, 2, 16).transpose(0, 2, 1, 3)))
    assert same_bytes(y, np.ascontiguousarray(tiling.apply_array(x)))  # the algebra's own reference


def test_transposed_layout_in_smem():
    x = random_bits((4, 8, 32), ad.float16)
    y = np.zeros((8, 4, 32), np.float16)
    transpose = ad.TransposeTransform((1, 0, 2))
    load_transformed.interpret(x, y, T=transpose)
    assert same_bytes(y, np.ascontiguousarray(x.transpose(1, 0, 2)))
    assert same_bytes(y, np.ascontiguousarray(transpose.apply_array(x)))


def test_tiled_and_transposed_batch_items():
    chain = (ad.TransposeTransform((1, 0, 2)), ad.TileTransform((2, 16)))
    x = random_bits((4, 8, 32), ad.float32)
    y = np.zeros((8, 2, 2, 2, 16), np.float32)
    load_transformed.interpret(x, y, T=chain)
    expected = x.transpose(1, 0, 2).reshape(8, 2, 2, 2, 16).transpose(0, 1, 3, 2, 4)
    assert same_bytes(y, np.ascontiguousarray(expected))


@ad.kernel(grid=(1,))
def dump_swizzled(x, y, LOAD: ad.constexpr, STORE: ad.constexpr):
    """Loads `x` with swizzle LOAD and stores the SMEM bytes with swizzle STORE."""
    tile = ad.smem(x.shape, x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[...], tile, barrier=loaded, swizzle=LOAD)
    loaded.wait()
    ad.async_copy(tile, y.at[...], swizzle=STORE)
    ad.await_async_copy(0)


def swizzled_offset(row: int, byte: int, span: int) -> int:
    """docs/hardware.md §4.1: where TMA puts byte `byte` of box row `row` (tile at a 1024-aligned base)."""
    address = row * span + byte
    return address ^ (((address >> 7) & (span // 16 - 1)) << 4)


@pytest.mark.parametrize("span, dtype",
                         [(32, ad.float32), (64, ad.bfloat16), (128, ad.float32), (128, ad.int8)])
def test_swizzled_smem_bytes_follow_the_hardware_formula(span, dtype):
    rows = 24  # not a multiple of the 8-row pattern
    x = random_bits((rows, span // dtype.itemsize), dtype, seed=span)
    smem = np.zeros_like(x)
    dump_swizzled.interpret(x, smem, LOAD=span, STORE=0)
    smem_bytes, x_bytes = smem.reshape(-1).view(np.uint8), x.reshape(-1).view(np.uint8)
    for row in range(rows):
        for chunk in range(0, span, 16):
            at = swizzled_offset(row, chunk, span)
            assert smem_bytes[at : at + 16].tobytes() == x_bytes[row * span + chunk :][:16].tobytes()
    assert not same_bytes(smem, x)  # the layout really moved something


@pytest.mark.parametrize("span", [32, 64, 128])
def test_swizzled_round_trip(span):
    x = random_bits((16, span // 2), ad.float16, seed=span)
    y = np.zeros_like(x)
    dump_swizzled.interpret(x, y, LOAD=span, STORE=span)
    assert same_bytes(x, y)


@ad.kernel(grid=lambda x, y, B: (ad.cdiv(x.shape[0], B),))
def ring_copy(x, y, B: ad.constexpr):
    """One warpgroup, two stages: prefetch tile k+1 while storing tile k (tracked parity)."""
    row = ad.program_id(0) * B
    tiles = ad.cdiv(x.shape[1], B)
    bufs = ad.smem((2, B, B), x.dtype)
    full = ad.barrier(num=2)
    ad.async_copy(x.at[ad.ds(row, B), ad.ds(0, B)], bufs.at[0], barrier=full[0])
    for k in ad.range(tiles):
        slot = k % 2
        with ad.when(k + 1 < tiles):
            ad.await_async_copy(0, read_only=True)  # the store of tile k-1 has read its slot
            following = (k + 1) % 2
            ad.async_copy(x.at[ad.ds(row, B), ad.ds((k + 1) * B, B)], bufs.at[following],
                          barrier=full[following])
        full[slot].wait()
        ad.async_copy(bufs.at[slot], y.at[ad.ds(row, B), ad.ds(k * B, B)])
    ad.await_async_copy(0)


def test_two_stage_ring_with_tracked_parity():
    x = random_bits((64, 7 * 32), ad.float32)
    y = np.zeros_like(x)
    ring_copy.interpret(x, y, B=32)
    assert same_bytes(x, y)


def producer_consumer(cluster):
    @ad.kernel(grid=lambda x, y, B: (x.shape[0] // B,), block=256, cluster=cluster)
    def kernel(x, y, B: ad.constexpr):
        """Warpgroup 0 loads into a 2-stage ring, warpgroup 1 stores from it."""
        wg = ad.warpgroup_idx()
        row = ad.program_id(0) * B
        bufs = ad.smem((2, B, B), x.dtype)
        full = ad.barrier(num=2)
        empty = ad.barrier(num=2)
        with ad.when(wg == 1):
            empty[0].arrive()  # both slots start empty
            empty[1].arrive()
        for k in ad.range(x.shape[1] // B):
            slot = k % 2
            with ad.when(wg == 0):
                empty[slot].wait()
                ad.async_copy(x.at[ad.ds(row, B), ad.ds(k * B, B)], bufs.at[slot], barrier=full[slot])
            with ad.when(wg == 1):
                full[slot].wait()
                ad.async_copy(bufs.at[slot], y.at[ad.ds(row, B), ad.ds(k * B, B)])
                ad.await_async_copy(0, read_only=True)
                empty[slot].arrive()
        ad.cluster_barrier()

    return kernel


@pytest.mark.parametrize("cluster", [(1, 1, 1), (2, 1, 1)])
def test_producer_and_consumer_warpgroups(cluster):
    x = random_bits((128, 5 * 32), ad.bfloat16)
    y = np.zeros_like(x)
    producer_consumer(cluster).interpret(x, y, B=32)
    assert same_bytes(x, y)


@ad.kernel(grid=(2, 2), cluster=(2, 2, 1))
def cluster_ids(x, y):
    """Every CTA of a 2x2 cluster copies the tile its cluster-relative id names."""
    cx, cy = ad.cluster_cta_id(0), ad.cluster_cta_id(1)
    tile = ad.smem((16, 16), x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[ad.ds(cx * 16, 16), ad.ds(cy * 16, 16)], tile, barrier=loaded)
    loaded.wait()
    ad.cluster_barrier()
    ad.async_copy(tile, y.at[ad.ds(ad.program_id(0) * 16, 16), ad.ds(ad.program_id(1) * 16, 16)])
    ad.await_async_copy(0)


def test_clusters_run_every_cta():
    x = random_bits((32, 32), ad.float32)
    y = np.zeros_like(x)
    cluster_ids.interpret(x, y)
    assert same_bytes(x, y)


@ad.kernel(grid=(1,), block=256)
def handed_over(x, y):
    """Warpgroup 0 waits for the load; warpgroup 1 stores after a CTA barrier (no wait itself)."""
    tile = ad.smem((32, 32), x.dtype)
    loaded = ad.barrier()
    with ad.when(ad.warpgroup_idx() == 0):
        ad.async_copy(x.at[...], tile, barrier=loaded)
        loaded.wait()
    ad.cta_barrier()
    with ad.when(ad.warpgroup_idx() == 1):
        ad.async_copy(tile, y.at[...])
        ad.await_async_copy(0)


def test_a_cta_barrier_hands_over_what_a_wait_established():
    x = random_bits((32, 32), ad.float32)
    y = np.zeros_like(x)
    handed_over.interpret(x, y)
    assert same_bytes(x, y)


def row_picked_by(i: int) -> int:
    """The index arithmetic of `copy_picked_rows`, in Python (floor division, divisor-signed %)."""
    below = (i - 3) // 2
    wrapped = (i - 3) % 4
    clamped = min(max(below, 0), 2)
    return (wrapped + clamped) % 4 if i < 5 else max(i - 6, 0)


@ad.kernel(grid=(8,))
def copy_picked_rows(x, y):
    """CTA i copies the row block of x that `row_picked_by(i)` names into row block i of y."""
    i = ad.program_id(0)
    below = (i - 3) // 2
    wrapped = (i - 3) % 4
    clamped = below.max(0).min(2)
    tile = ad.smem((8, 16), x.dtype)
    loaded = ad.barrier()
    with ad.when(i < 5):
        ad.async_copy(x.at[ad.ds(((wrapped + clamped) % 4) * 8, 8), :], tile, barrier=loaded)
    with ad.when((i >= 5) & (i < 8)):
        ad.async_copy(x.at[ad.ds((i - 6).max(0) * 8, 8), :], tile, barrier=loaded)
    loaded.wait()
    ad.async_copy(tile, y.at[ad.ds(i * 8, 8), :])
    ad.await_async_copy(0)


def test_index_arithmetic_matches_python():
    x = random_bits((32, 16), ad.float32)
    y = np.zeros((64, 16), np.float32)
    copy_picked_rows.interpret(x, y)
    for i in range(8):
        source = row_picked_by(i)
        assert same_bytes(y[i * 8 : i * 8 + 8], x[source * 8 : source * 8 + 8]), i


@ad.kernel(grid=(2,))
def every_sync_op_alone(x, y):
    """One warpgroup per CTA and per cluster: every barrier and fence passes straight through."""
    rows = ad.ds(ad.program_id(0) * 16, 16)
    tile = ad.smem((16, 16), x.dtype)
    loaded = ad.barrier()
    ad.async_copy(x.at[rows, :], tile, barrier=loaded)
    loaded.wait()
    ad.warpgroup_barrier()
    ad.cta_barrier()
    ad.cluster_barrier()
    ad.fence_async_smem()
    ad.async_copy(tile, y.at[rows, :])
    ad.await_async_copy(0)


def test_barriers_and_fences_of_a_lone_warpgroup():
    x = random_bits((32, 16), ad.float32)
    y = np.zeros_like(x)
    every_sync_op_alone.interpret(x, y)
    assert same_bytes(x, y)


@settings(max_examples=examples(20), deadline=None)
@given(
    rows=st.integers(1, 160),
    cols=st.sampled_from([4, 8, 12, 36, 64, 100]),
    bm=st.sampled_from([8, 16, 64]),
    bn=st.sampled_from([4, 8, 32]),
)
def test_any_tiling_of_any_shape_copies_exactly(rows, cols, bm, bn):
    x = random_bits((rows, cols), ad.float32, seed=rows * cols)
    y = np.zeros_like(x)
    tile_copy.interpret(x, y, BM=bm, BN=bn)
    assert same_bytes(x, y)
