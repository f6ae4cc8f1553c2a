"""Resolving an im2col copy into one `asyncdsl.tma_load_im2col`.

The user-level op's verifier already holds every rule that its types and constants decide, so
this only writes down the descriptor: the image batch as it lies in GMEM (array order), the
window bounds as the bounding box's corners, the destination's rows and columns as
pixels-per-column and channels-per-pixel, and the window strides as the traversal strides of the
spatial dims (the image and channel dims step by 1).

Example: a 3x3 SAME window load of 128 pixels x 64 channels from x: 2x16x16x64xf32

    "asyncdsl.async_copy_im2col"(%x, %rows, %n, %h, %w, %c, %r, %s, %bars, %c0)
        <{window_lower = array<i64: -1, -1>, window_upper = array<i64: -1, -1>,
          window_strides = array<i64: 1, 1>, swizzle = 0 : i64, arrive = true}>

becomes

    "asyncdsl.tma_load_im2col"(%rows, %n, %h, %w, %c, %r, %s, %bars, %c0)
        <{descriptor = #asyncdsl.im2col_desc<arg = 0, dtype = 7, elem_bytes = 4,
          dims = [2, 16, 16, 64], strides = [65536, 4096, 256, 4], lower = [-1, -1],
          upper = [-1, -1], channels = 64, pixels = 128, elem_strides = [1, 1, 1, 1], ...>,
          expect_tx_bytes = 32768 : i64}>
"""

from __future__ import annotations

from xdsl.rewriter import Rewriter

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.hw.gmem_runs import contiguous_strides
from asyncdsl.kernel_binary import Im2colTensorMapSpec
from asyncdsl.passes.resolve.copy_operands import argument_index


def resolve_im2col(copy: ir.AsyncCopyIm2colOp) -> None:
    """Replace `copy` by the one TMA instruction that performs it."""
    spec = im2col_spec(copy)
    bytes_moved = spec.pixels_per_column * spec.channels_per_pixel * spec.element_bytes
    load = ir.TmaIm2colLoadOp(
        copy.destination,
        list(copy.starts),
        list(copy.offsets),
        copy.barriers,
        copy.barrier_index,
        ir.Im2colDescriptorAttr.from_spec(spec),
        bytes_moved if copy.arrive.value.data else 0,
        predicate=copy.predicate,
    )
    load.location = copy.location
    Rewriter.replace_op(copy, load, new_results=[])


def im2col_spec(copy: ir.AsyncCopyIm2colOp) -> Im2colTensorMapSpec:
    """The host encoding of the descriptor `copy` reads through."""
    dtype = dtypes.from_mlir(ir.shaped_type(copy.source.type).element_type)
    image = ir.shape_of(copy.source)
    return Im2colTensorMapSpec(
        arg_index=argument_index(copy.source),
        dtype_code=dtype.tma_code,
        element_bytes=dtype.itemsize,
        global_dims=image,
        global_strides=tuple(s * dtype.itemsize for s in contiguous_strides(image)),
        lower_corner=copy.lower,
        upper_corner=copy.upper,
        channels_per_pixel=copy.channels,
        pixels_per_column=copy.pixels,
        element_strides=(1, *copy.strides, 1),
        swizzle_bytes=copy.swizzle.value.data,
    )
