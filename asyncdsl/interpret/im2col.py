"""The interpreter's im2col loads: which pixels one load reads, their bytes, and the op.

An im2col descriptor views a batch of channels-last images, `(N, W, C)`, `(N, H, W, C)` or
`(N, D, H, W, C)` (array order).  Its bounding box is a box of *window start* positions in the
spatial dims: along spatial dim `i` of size `S`, from `lower[i]` to `S - 1 + upper[i]`
(corners are offsets from the image's first and last position).  One load walks
`pixels_per_column` window starts and brings `channels_per_pixel` channels of one pixel per
window into one SMEM row (PTX ISA "Tensors: im2col mode"):

- the walk starts at the instruction's coordinates `(n, *start, c)`; `start` must lie inside
  the bounding box (the "filter base" of the PTX ISA);
- each next window steps the innermost spatial dim (W) by its traversal stride; stepping past
  the box's upper corner wraps it to the lower corner and steps the next dim out (H, then D),
  and wrapping the outermost spatial dim steps the image index `n` (stride 1);
- the pixel read for a window is its start plus the instruction's im2col offsets (the filter
  tap), and its channels are `c .. c + channels_per_pixel - 1`;
- a pixel or channel outside the image batch reads zeros, in particular every row past the
  last image.

This is the walk CUTLASS relies on when it maps the rows of an implicit-GEMM tile onto
consecutive windows (`make_im2col_tma_copy_desc`: windows per dim
`(S + upper - lower - 1) // stride + 1`, starting at `lower`).  Everything is vectorised over the
pixels of one load.

The op (`asyncdsl.tma_load_im2col`) completes when issued, like every copy here: the pixels the
descriptor's walk picks land in the destination as rows of channels, swizzled byte for byte like a
tiled box of those rows, and their bytes complete on the barrier at once; the race log then holds
the write until that barrier phase is waited for.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import InterpretError, OutOfBoundsError
from asyncdsl.hw.im2col import offset_range
from asyncdsl.hw.tma import view_extent_bytes
from asyncdsl.interpret import tma
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.operands import barrier_address, operand_values, predicated_off
from asyncdsl.interpret.races import AsyncWrite
from asyncdsl.kernel_binary import Im2colTensorMapSpec
from asyncdsl.ir_locations import from_ir_location


def traversal_strides(spec: Im2colTensorMapSpec) -> tuple[int, ...]:
    """The window step along each spatial dim (array order)."""
    spatial = spec.rank - 2
    return tuple(spec.element_strides[1:-1]) if spec.element_strides else (1,) * spatial


def bounding_box(spec: Im2colTensorMapSpec) -> tuple[tuple[int, int], ...]:
    """The inclusive range of window start positions along each spatial dim (array order)."""
    sizes = spec.global_dims[1:-1]
    return tuple((low, size - 1 + high)
                 for low, high, size in zip(spec.lower_corner, spec.upper_corner, sizes))


def window_starts(spec: Im2colTensorMapSpec, coords: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(image index, window start) of every row of one load: shapes (P,) and (P, spatial dims).

    `coords` are the instruction's coordinates in array order, `(n, *start, c)`.
    """
    n, *start, _ = (int(c) for c in coords)
    box = bounding_box(spec)
    for dim, (position, (low, high)) in enumerate(zip(start, box)):
        if not low <= position <= high:
            raise InterpretError(
                f"im2col load starts its window walk at {position} along spatial dim {dim}, outside "
                f"the bounding box of window starts [{low}, {high}]: the PTX ISA requires the filter "
                "base inside the box"
            )
    # `steps` counts how often the current dim advances; dims are visited innermost first and
    # pass their number of wrap-arounds outwards.
    steps = np.arange(spec.pixels_per_column, dtype=np.int64)
    innermost_first = []
    for position, (low, high), stride in reversed(list(zip(start, box, traversal_strides(spec)))):
        first_round = (high - position) // stride + 1  # windows before the first wrap
        full_round = (high - low) // stride + 1
        later = steps - first_round
        in_first = later < 0
        innermost_first.append(
            np.where(in_first, position + stride * steps, low + stride * (later % full_round)))
        steps = np.where(in_first, 0, 1 + later // full_round)
    return n + steps, np.stack(innermost_first[::-1], axis=-1)


def load_im2col(raw: np.ndarray, spec: Im2colTensorMapSpec, coords: Sequence[int],
                offsets: Sequence[int]) -> np.ndarray:
    """The rows one im2col load delivers, as bytes of shape (pixels, channels, element bytes).

    `raw` is the kernel argument's bytes (the descriptor views them from `base_offset_bytes`),
    `coords` the instruction's coordinates `(n, *start, c)` and `offsets` its im2col offsets,
    both in array order.
    """
    if spec.oob_nan:
        raise InterpretError("the interpreter models zero fill only; im2col NaN fill is not modelled")
    _check_view_fits(raw, spec)
    # The 16 offset bits are shared among the spatial dims; a wider value has no defined meaning.
    smallest, largest = offset_range(spec.rank)
    for dim, offset in enumerate(offsets):
        if not smallest <= int(offset) <= largest:
            raise InterpretError(
                f"im2col offset {int(offset)} along spatial dim {dim} is outside [{smallest}, {largest}], "
                f"the range of a rank-{spec.rank} im2col load: the hardware's result is unspecified"
            )
    images, starts = window_starts(spec, coords)
    pixels = starts + np.asarray([int(o) for o in offsets], np.int64)
    channel = int(coords[-1]) + np.arange(spec.channels_per_pixel, dtype=np.int64)
    *outer_strides, channel_stride = spec.global_strides
    batch, *sizes, channels = spec.global_dims
    pixel_in_bounds = (images >= 0) & (images < batch) & np.all((pixels >= 0) & (pixels < sizes), axis=-1)
    pixel_bytes = images * outer_strides[0] + pixels @ np.asarray(outer_strides[1:], np.int64)
    in_bounds = pixel_in_bounds[:, None] & ((channel >= 0) & (channel < channels))[None, :]
    first_byte = spec.base_offset_bytes + pixel_bytes[:, None] + channel[None, :] * channel_stride
    element = np.where(in_bounds, first_byte, 0)[..., None] + np.arange(spec.element_bytes)
    rows = raw[element]
    rows[~in_bounds] = 0
    return rows


def _check_view_fits(raw: np.ndarray, spec: Im2colTensorMapSpec) -> None:
    last = view_extent_bytes(spec)
    if last > raw.size:
        raise OutOfBoundsError(
            f"the im2col descriptor views bytes up to {last} of a {raw.size}-byte argument "
            f"(dims {spec.global_dims}, byte strides {spec.global_strides})"
        )


@register_impls
class Im2colFunctions(WarpgroupFunctions):
    """im2col loads, executed by `self.warpgroup`."""

    @impl(ir.TmaIm2colLoadOp)
    @diagnosed
    def run_tma_load_im2col(self, interpreter: Interpreter, op: ir.TmaIm2colLoadOp, args: PythonValues):
        values = operand_values(op, args)
        if predicated_off(op, values):
            return ()
        warpgroup, cta = self.warpgroup, self.warpgroup.cta
        spec: Im2colTensorMapSpec = op.descriptor.spec()  # the im2col encoding, not a tiled one
        barrier = warpgroup.mbarrier(barrier_address(op, values))
        if op.expect_tx_bytes.value.data:
            barrier.arrive_expect_tx(op.expect_tx_bytes.value.data, warpgroup.clock,
                                     f"the im2col TMA load at {origin(op)} in {warpgroup.label}")
        buffer = values[op.smem]
        start, end = buffer.offset, buffer.offset + buffer.nbytes  # exactly the rows (verified)
        cta.accesses.check_write(start, end, warpgroup.clock, "the im2col load")
        argument = cta.launch.arguments[spec.arg_index]
        rows = load_im2col(
            argument.raw, spec, [values[c].value.data for c in op.coords],
            [values[o].value.data for o in op.offsets]
        )
        tma.write_smem_rows(cta.smem.bytes, start, end, spec, rows)
        phase = barrier.complete_tx(end - start)
        cta.accesses.record_write(AsyncWrite(start, end, barrier.key, phase, barrier.name, origin(op),
                                             location=from_ir_location(op)))
        return ()
