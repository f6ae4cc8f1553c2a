"""im2col copies: the IR and its descriptor, the PTX (ptxas, sm_90a), the interpreter against
numpy im2col for rank 3/4/5 images with window strides, filter offsets, padding and swizzle, and
an error for every rule."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples, expect, line_of, random_bits, same_bytes
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.dialects.im2col_ops import Im2colDescriptorAttr
from asyncdsl.interpret import im2col
from asyncdsl.kernel_binary import Im2colTensorMapSpec
from asyncdsl.passes.pipeline import ir_text, make_context
from asyncdsl.runtime import tensormap


def window_rows(x, bounds, strides, start, offsets, pixels, channels) -> np.ndarray:
    """numpy im2col, written from the definition: the window starts of each spatial dim are
    `lo, lo + stride, ... <= size + hi - 1`; windows are numbered row-major over (image, *starts);
    row i is the window `i` places after `start`, its pixel `start + offsets`, zeros outside."""
    n0, *spatial, c0 = start
    sizes = x.shape[1:-1]
    lattices = [range(lo, size + hi, stride) for (lo, hi), size, stride in zip(bounds, sizes, strides)]
    windows = [(n, *corner) for n in range(x.shape[0]) for corner in itertools.product(*lattices)]
    first = windows.index((n0, *spatial))
    rows = np.zeros((pixels, channels), x.dtype)
    for i, window in enumerate(windows[first : first + pixels]):
        n, *corner = window
        pixel = [c + o for c, o in zip(corner, offsets)]
        if all(0 <= p < size for p, size in zip(pixel, sizes)):
            part = x[(n, *pixel)][c0 : c0 + channels]
            rows[i, : part.size] = part
    return rows


@ad.kernel(grid=(1,))
def im2col_once(x, out, BOUNDS: ad.constexpr, STRIDES: ad.constexpr, START: ad.constexpr,
                OFFSETS: ad.constexpr, SWIZZLE: ad.constexpr):
    rows = ad.smem(out.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy_im2col(x, rows, barrier=bar, window_start_bounds=BOUNDS, window_strides=STRIDES,
                         start_indices=START, filter_offsets=OFFSETS, swizzle=SWIZZLE)
    bar.wait()
    ad.async_copy(rows, out, swizzle=SWIZZLE)
    ad.await_async_copy(0)


def run_once(x, pixels, channels, bounds, strides, start, offsets, swizzle=0):
    out = np.random.default_rng(99).integers(0, 256, (pixels, channels * x.itemsize), np.uint8).view(x.dtype)
    im2col_once.interpret(x, out, BOUNDS=tuple(bounds), STRIDES=tuple(strides), START=tuple(start),
                          OFFSETS=tuple(offsets), SWIZZLE=swizzle)
    return out


# ---------------------------------------------------------------------------------- interpreter


@ad.kernel(grid=lambda x, out, P, CB: (ad.cdiv(out.shape[1], P), 9, x.shape[3] // CB))
def same_3x3_windows(x, out, P: ad.constexpr, CB: ad.constexpr):
    """Every window of a 3x3 SAME convolution: out[tap, m, c] = x_padded[n, h + r, w + s, c]."""
    _, height, width, _ = x.shape
    rows = ad.smem((P, CB), x.dtype)
    bar = ad.barrier()
    m0 = ad.program_id(0) * P
    tap = ad.program_id(1)
    c0 = ad.program_id(2) * CB
    ad.async_copy_im2col(
        x, rows, barrier=bar, window_start_bounds=((-1, -1), (-1, -1)),
        start_indices=(m0 // (height * width), (m0 // width) % height - 1, m0 % width - 1, c0),
        filter_offsets=(tap // 3, tap % 3),
    )
    bar.wait()
    ad.async_copy(rows, out.at[tap, ad.ds(m0, P), ad.ds(c0, CB)])
    ad.await_async_copy(0)


def same_3x3_reference(x: np.ndarray) -> np.ndarray:
    n, h, w, c = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return np.stack([padded[:, r : r + h, s : s + w, :].reshape(-1, c) for r in range(3) for s in range(3)])


@pytest.mark.parametrize("shape, dtype, pixels, channel_block", [
    ((2, 5, 7, 8), ad.float32, 16, 8),       # rows cross lines and images
    ((1, 9, 14, 64), ad.bfloat16, 128, 32),  # two channel blocks
    ((3, 4, 4, 16), ad.int8, 32, 16),        # the last block runs past the last image
    ((1, 6, 6, 4), ad.float64, 8, 2),
])
def test_same_3x3_convolution_windows_match_numpy(shape, dtype, pixels, channel_block):
    x = random_bits(shape, dtype, seed=1)
    out = random_bits((9, shape[0] * shape[1] * shape[2], shape[3]), dtype, seed=2)
    same_3x3_windows.interpret(x, out, P=pixels, CB=channel_block)
    assert same_bytes(out, same_3x3_reference(x))


@pytest.mark.parametrize("shape, pixels, channels, bounds, strides, start, offsets", [
    # rank 3 (N, W, C): a 1-D convolution of width 5, stride 2, padding 2
    ((2, 11, 16), 12, 16, [(-2, -2)], [2], (0, -2, 0), (4,)),
    ((2, 11, 16), 12, 8, [(-2, -2)], [2], (1, 0, 8), (1,)),
    # rank 4: strides 2 and 3, asymmetric bounds, a tap at the far corner
    ((2, 9, 10, 8), 40, 8, [(0, -1), (-1, -2)], [2, 3], (0, 0, -1, 0), (1, 2)),
    ((1, 8, 8, 16), 64, 16, [(-3, 0), (0, 0)], [8, 1], (0, -3, 0, 0), (3, 0)),
    # rank 5 (N, D, H, W, C): a 3x3x3 SAME convolution's tap (2, 0, 1)
    ((2, 3, 4, 5, 8), 64, 8, [(-1, -1)] * 3, [1, 1, 1], (0, -1, -1, -1, 0), (2, 0, 1)),
    ((1, 6, 4, 4, 16), 24, 16, [(0, -2), (-1, -1), (0, 0)], [2, 1, 4], (0, 2, -1, 0, 0), (2, 1, 3)),
    # channel window past the last channel, a start in the middle of a line
    ((1, 5, 5, 16), 10, 16, [(-1, -1), (-1, -1)], [1, 1], (0, 1, 2, 8), (1, 1)),
])
def test_rank_3_4_5_with_strides_offsets_and_padding_match_numpy(shape, pixels, channels, bounds, strides,
                                                                  start, offsets):
    x = random_bits(shape, ad.float32, seed=3)
    out = run_once(x, pixels, channels, bounds, strides, start, offsets)
    assert same_bytes(out, window_rows(x, bounds, strides, start, offsets, pixels, channels))


@pytest.mark.parametrize("dtype, channels, swizzle", [
    (ad.float32, 32, 128), (ad.bfloat16, 32, 64), (ad.float16, 16, 32), (ad.int8, 128, 128),
])
def test_swizzled_rows_round_trip_through_a_swizzled_store(dtype, channels, swizzle):
    x = random_bits((2, 6, 6, 2 * channels), dtype, seed=4)
    bounds, strides, start, offsets = [(-1, -1), (-1, -1)], [1, 1], (0, -1, 2, channels), (2, 1)
    out = run_once(x, 40, channels, bounds, strides, start, offsets, swizzle=swizzle)
    assert same_bytes(out, window_rows(x, bounds, strides, start, offsets, 40, channels))


@ad.kernel(grid=(1,))
def read_before_wait(x, out):
    rows = ad.smem((16, 8), x.dtype)
    bar = ad.barrier()
    ad.async_copy_im2col(x, rows, barrier=bar, window_start_bounds=((0, 0), (0, 0)),
                         start_indices=(0, 0, 0, 0), filter_offsets=(0, 0))
    ad.async_copy(rows, out)  # reads before the wait
    bar.wait()


def test_reading_the_rows_before_the_wait_is_a_race():
    x = random_bits((1, 4, 4, 8), ad.float32)
    with pytest.raises(ad.RaceError, match="before waiting"):
        read_before_wait.interpret(x, np.zeros((16, 8), np.float32))


@ad.kernel(grid=(1,))
def traced_offsets(x, out, R: ad.constexpr):
    rows = ad.smem((8, 8), x.dtype)
    bar = ad.barrier()
    ad.async_copy_im2col(x, rows, barrier=bar, window_start_bounds=((-1, -1), (-1, -1)),  # traced
                         start_indices=(0, -1, -1, 0), filter_offsets=(ad.program_id(0) + R, 0))
    bar.wait()
    ad.async_copy(rows, out)
    ad.await_async_copy(0)


def test_traced_offset_out_of_range_is_reported_at_the_copy():
    x = random_bits((1, 4, 4, 8), ad.float32)
    with pytest.raises(ad.InterpretError,
                       match=r"offset 256 along spatial dim 0 is outside \[0, 255\]") as caught:
        traced_offsets.interpret(x, np.zeros((8, 8), np.float32), R=256)
    assert caught.value.location.line == line_of(traced_offsets.fn, "# traced")


@ad.kernel(grid=(1,))
def traced_start(x, out):
    rows = ad.smem((8, 8), x.dtype)
    bar = ad.barrier()
    ad.async_copy_im2col(x, rows, barrier=bar, window_start_bounds=((0, 0), (0, 0)),
                         start_indices=(0, ad.program_id(0) - 1, 0, 0), filter_offsets=(0, 0))
    bar.wait()


def test_traced_start_outside_the_bounding_box_is_reported():
    x = random_bits((1, 4, 4, 8), ad.float32)
    with pytest.raises(ad.InterpretError, match=r"walk at -1 along spatial dim 0, outside .* \[0, 3\]"):
        traced_start.interpret(x, np.zeros((8, 8), np.float32))


# ---------------------------------------------------------------------------------- the emulation


def odometer_rows(x, spec: Im2colTensorMapSpec, coords, offsets) -> np.ndarray:
    """The walk as the PTX ISA words it, one window at a time: W steps by its stride, wrapping to
    the lower corner past the upper one and carrying into H, D and finally the image index."""
    n, *position, c0 = coords
    box = im2col.bounding_box(spec)
    strides = im2col.traversal_strides(spec)
    rows = np.zeros((spec.pixels_per_column, spec.channels_per_pixel), x.dtype)
    for row in range(spec.pixels_per_column):
        pixel = [p + o for p, o in zip(position, offsets)]
        for k in range(spec.channels_per_pixel):
            c = c0 + k
            if (0 <= n < x.shape[0] and all(0 <= p < s for p, s in zip(pixel, x.shape[1:-1]))
                    and 0 <= c < x.shape[-1]):
                rows[row, k] = x[(n, *pixel, c)]
        for dim in reversed(range(len(position))):
            position[dim] += strides[dim]
            if position[dim] <= box[dim][1]:
                break
            position[dim] = box[dim][0]
        else:
            n += 1
    return rows


@st.composite
def im2col_cases(draw):
    rank = draw(st.sampled_from([3, 4, 5]))
    sizes = [draw(st.integers(1, 6)) for _ in range(rank - 2)]
    batch, channels = draw(st.integers(1, 3)), draw(st.sampled_from([4, 8]))
    corner = 1 << (16 // (rank - 2) - 1)
    lower = [draw(st.integers(max(-corner, -3), 2)) for _ in sizes]
    upper = [draw(st.integers(max(lo - s + 1, -corner, -4), 3)) for lo, s in zip(lower, sizes)]
    strides = [draw(st.integers(1, 8)) for _ in sizes]
    # on or off the lattice
    start = [draw(st.integers(lo, s - 1 + hi)) for lo, hi, s in zip(lower, upper, sizes)]
    offsets = [draw(st.integers(0, 3)) for _ in sizes]
    coords = (draw(st.integers(-1, batch)), *start, draw(st.integers(-4, channels)))
    pixels, per_pixel = draw(st.integers(1, 40)), draw(st.integers(1, 8))
    return rank, (batch, *sizes, channels), lower, upper, strides, coords, offsets, pixels, per_pixel


@settings(max_examples=examples(150), deadline=None)
@given(im2col_cases())
def test_vectorised_walk_matches_the_one_window_at_a_time_walk(case):
    rank, shape, lower, upper, strides, coords, offsets, pixels, per_pixel = case
    x = random_bits(shape, ad.int32, seed=len(shape))
    spec = Im2colTensorMapSpec(
        arg_index=0, dtype_code=3, element_bytes=4, global_dims=shape,
        global_strides=tuple(int(s) for s in x.strides), lower_corner=tuple(lower), upper_corner=tuple(upper),
        channels_per_pixel=per_pixel, pixels_per_column=pixels, element_strides=(1, *strides, 1),
    )
    rows = im2col.load_im2col(x.reshape(-1).view(np.uint8), spec, coords, offsets)
    assert same_bytes(rows.view(np.int32).reshape(pixels, per_pixel), odometer_rows(x, spec, coords, offsets))


# ---------------------------------------------------------------------------------- IR and PTX

F32_IMAGE = ad.ArraySpec((2, 16, 16, 64), ad.float32)
STAGES = same_3x3_windows.stages(F32_IMAGE, ad.ArraySpec((9, 512, 64), ad.float32), P=128, CB=32)


def test_resolution_writes_the_im2col_descriptor():
    text = STAGES["resolve-transforms"]
    assert '"asyncdsl.async_copy_im2col"' not in text
    assert re.search(
        r'"asyncdsl.tma_load_im2col".*#asyncdsl.im2col_desc<arg = 0, dtype = 7, elem_bytes = 4, '
        r"dims = \[2, 16, 16, 64\], strides = \[65536, 4096, 256, 4\], lower = \[-1, -1\], "
        r"upper = \[-1, -1\], channels = 32, pixels = 128, elem_strides = \[1, 1, 1, 1\], swizzle = 0, ",
        text,
    )
    assert "expect_tx_bytes = 16384" in text


@pytest.mark.parametrize("stage", [stage for stage in STAGES if stage != "ptx"])
def test_every_stage_round_trips(stage):
    parsed = Parser(make_context(), STAGES[stage]).parse_module()
    parsed.verify()
    assert ir_text(parsed) == STAGES[stage]


def test_descriptor_attribute_round_trips_every_field():
    spec = Im2colTensorMapSpec(
        arg_index=2, dtype_code=9, element_bytes=2, global_dims=(4, 3, 9, 14, 64),
        global_strides=(3 * 9 * 14 * 128, 9 * 14 * 128, 14 * 128, 128, 2), lower_corner=(-16, -1, 0),
        upper_corner=(15, -2, 3), channels_per_pixel=64, pixels_per_column=1024,
        element_strides=(1, 2, 3, 8, 1), swizzle_bytes=128, oob_nan=True, l2_promotion_bytes=128,
        base_offset_bytes=256,
    )
    attr = Im2colDescriptorAttr.from_spec(spec)
    assert attr.spec() == spec
    assert Parser(make_context(), str(attr)).parse_attribute() == attr


def test_the_binary_carries_the_im2col_spec_for_the_runtime():
    compiled = same_3x3_windows.compile(F32_IMAGE, ad.ArraySpec((9, 512, 64), ad.float32), P=128, CB=32)
    im2col = [d for d in compiled.binary.descriptors if isinstance(d, Im2colTensorMapSpec)]
    assert len(im2col) == 1
    tensormap.validate_spec(im2col[0])
    encoded = tensormap.encode_arguments(im2col[0])
    assert encoded.global_dims == (64, 16, 16, 2) and encoded.element_strides == (1, 1, 1, 1)
    assert (encoded.channels_per_pixel, encoded.pixels_per_column) == (32, 128)


def test_ptx_issues_the_im2col_load_with_16_bit_offsets(ptxas):
    ptx = STAGES["ptx"]
    load = re.search(
        r"@(%p\d+) cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global\.im2col\.mbarrier::complete_tx::"
        r"bytes \[%r\d+\], \[%rd\d+, \{(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}\], \[(%r\d+)\], "
        r"\{(%rs\d+), (%rs\d+)\};",
        ptx,
    )
    assert load, ptx
    leader, barrier = load.group(1), load.group(6)
    assert f"@{leader} mbarrier.arrive.expect_tx.shared::cta.b64 _, [{barrier}], 16384;" in ptx
    # Offsets W first: the traced tap % 3 and tap // 3 are truncated to 16 bits.
    assert re.search(rf"cvt\.u16\.u32 {re.escape(load.group(7))}, %r\d+;", ptx)
    assert re.search(rf"cvt\.u16\.u32 {re.escape(load.group(8))}, %r\d+;", ptx)
    ptxas(ptx)


@pytest.mark.parametrize("shape, bounds, strides, start, offsets, swizzle", [
    ((2, 64, 32), [(-32768, 32767)], [8], (0, 5, 0), (65535,), 128),
    ((2, 9, 9, 32), [(-128, 127), (0, -8)], [1, 2], (1, 0, 0, 0), (255, 0), 0),
    ((1, 4, 4, 4, 16), [(-16, 15)] * 3, [1, 4, 8], (0, -16, 0, 3, 0), (31, 0, 7), 64),
])
def test_rank_3_4_5_with_extreme_parameters_assemble(shape, bounds, strides, start, offsets, swizzle, ptxas):
    channels = 32 if swizzle != 64 else 16
    ptx = im2col_once.ptx(ad.ArraySpec(shape, ad.float32), ad.ArraySpec((64, channels), ad.float32),
                          BOUNDS=tuple(bounds), STRIDES=tuple(strides), START=start, OFFSETS=offsets,
                          SWIZZLE=swizzle)
    rank = len(shape)
    assert f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.im2col" in ptx
    for offset in offsets:
        assert re.search(rf"mov\.b16 %rs\d+, {offset};", ptx)
    ptxas(ptx)


# ---------------------------------------------------------------------------------- errors


def im2col_kernel(rows_shape=(64, 16), smem_dtype=None, **copy_kwargs):
    arguments = dict(window_start_bounds=((-1, -1), (-1, -1)), start_indices=(0, -1, -1, 0),
                     filter_offsets=(0, 0))
    arguments.update(copy_kwargs)

    @ad.kernel(grid=(1,))
    def kernel(x):
        rows = ad.smem(rows_shape, smem_dtype or x.dtype)
        bar = ad.barrier()
        ad.async_copy_im2col(x, rows, barrier=bar, **arguments)  # the copy

    return kernel


def expect_error(kernel, image, *fragments, error=ad.TraceError, line_text="# the copy"):
    expect(error, kernel, (image,), {}, *fragments, line_text=line_text)


IMAGE = ad.ArraySpec((2, 8, 8, 16), ad.float32)


@pytest.mark.parametrize("image, kwargs, fragments", [
    (ad.ArraySpec((8, 16), ad.float32), dict(window_start_bounds=(), start_indices=(0, 0), filter_offsets=()),
     ["rank 3, 4 or 5", "got rank 2"]),
    (IMAGE, dict(smem_dtype=ad.bfloat16), ["same element type", "f32", "bf16"]),
    (ad.ArraySpec((2, 8, 8, 32), ad.int4), dict(rows_shape=(64, 32)), ["sub-byte", "4-bit"]),
    (IMAGE, dict(window_start_bounds=((-1, -1),)), ["one (lo, hi) pair per spatial dim (2", "got 1"]),
    (IMAGE, dict(window_start_bounds=((-129, 0), (0, 0))), ["[-128, 127] for rank 4", "(-129, 0)"]),
    (ad.ArraySpec((2, 8, 8, 8, 16), ad.float32),
     dict(window_start_bounds=((0, 16), (0, 0), (0, 0)), start_indices=(0, 0, 0, 0, 0),
          filter_offsets=(0, 0, 0)),
     ["[-16, 15] for rank 5", "(0, 16)"]),
    (IMAGE, dict(window_start_bounds=((4, -4), (0, 0))), ["leave no window start", "[4, 3] is empty"]),
    (IMAGE, dict(window_strides=(1, 9)), ["window stride 9 along spatial dim 1 is outside [1, 8]"]),
    (IMAGE, dict(window_strides=(0, 1)), ["window stride 0 along spatial dim 0"]),
    (IMAGE, dict(window_strides=(1,)), ["window_strides needs 2 entries, got 1"]),
    (IMAGE, dict(start_indices=(0, 0, 0)), ["start_indices needs 4 entries", "got 3"]),
    (IMAGE, dict(filter_offsets=(0,)), ["filter_offsets needs one entry per spatial dim (2), got 1"]),
    (IMAGE, dict(filter_offsets=(0, 256)), ["filter offset 256 along spatial dim 1 is outside [0, 255]"]),
    (ad.ArraySpec((2, 64, 16), ad.float32),
     dict(window_start_bounds=((0, 0),), start_indices=(0, 0, 0), filter_offsets=(65536,)),
     ["filter offset 65536", "[0, 65535]", "16-bit range of a rank-3"]),
    (IMAGE, dict(start_indices=(0, -2, 0, 0)), ["start index -2 along spatial dim 0", "[-1, 6]"]),
    # it wrapped
    (IMAGE, dict(start_indices=(1 << 40, 0, 0, 0)), ["start index 0 is 1099511627776", "signed 32-bit"]),
    (IMAGE, dict(rows_shape=(1024,)), ["rank >= 2"]),
    (IMAGE, dict(rows_shape=(2, 513, 16)), ["1026 rows (pixels)", "1 to 1024"]),
    (ad.ArraySpec((2, 8, 8, 512), ad.int8), dict(rows_shape=(4, 272)),
     ["272 columns (channels)", "1 to 256"]),
    (IMAGE, dict(rows_shape=(64, 3)), ["3 channels spans 12 bytes", "multiple of 16"]),
    (ad.ArraySpec((2, 8, 8, 6), ad.float32), dict(rows_shape=(64, 4)),
     ["24 bytes between pixels", "multiple of 16"]),
    (IMAGE, dict(swizzle=128),
     ["swizzle 128 needs each row to span exactly 128 bytes (32 channels)", "64 bytes"]),
    (IMAGE, dict(swizzle=48), ["swizzle must be one of"]),
])
def test_every_rule_is_a_trace_error_at_the_copy(image, kwargs, fragments):
    expect_error(im2col_kernel(**kwargs), image, *fragments)


def test_a_sliced_source_is_refused():
    @ad.kernel(grid=(1,))
    def kernel(x):
        rows = ad.smem((64, 16), x.dtype)
        bar = ad.barrier()
        ad.async_copy_im2col(x.at[0:1], rows, barrier=bar, window_start_bounds=((0, 0), (0, 0)),  # sliced
                             start_indices=(0, 0, 0, 0), filter_offsets=(0, 0))

    expect_error(kernel, IMAGE, "reads whole image batches", line_text="# sliced")


def test_the_destination_must_be_shared_memory():
    @ad.kernel(grid=(1,))
    def kernel(x, y):
        bar = ad.barrier()
        ad.async_copy_im2col(x, y, barrier=bar, window_start_bounds=((0, 0), (0, 0)),  # to gmem
                             start_indices=(0, 0, 0, 0), filter_offsets=(0, 0))

    with pytest.raises(ad.TraceError, match="destination must be an asyncdsl.smem buffer") as caught:
        kernel.compile(IMAGE, IMAGE)
    assert caught.value.location.line == line_of(kernel.fn, "# to gmem")


def test_window_bounds_must_be_pairs_of_ints():
    expect_error(im2col_kernel(window_start_bounds=((-1, -1, 0), (0, 0))), IMAGE, "one (lo, hi) pair")
    expect_error(im2col_kernel(window_start_bounds=((-1.0, 1), (0, 0))), IMAGE, "Python ints")


def test_descriptors_in_a_gmem_scratch_assemble(ptxas):
    scratch = ad.kernel(grid=(1,), descriptors="scratch")(im2col_once.fn)
    compiled = scratch.compile(IMAGE, ad.ArraySpec((64, 16), ad.float32), BOUNDS=((-1, -1), (-1, -1)),
                               STRIDES=(1, 1), START=(0, -1, -1, 0), OFFSETS=(1, 2), SWIZZLE=0)
    assert ([type(d).__name__ for d in compiled.binary.descriptors]
            == ["Im2colTensorMapSpec", "TiledTensorMapSpec"])
    ptxas(compiled.ptx)
