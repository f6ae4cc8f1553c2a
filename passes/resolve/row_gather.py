"""Resolving a row gather/scatter into Blackwell `.tile::gather4` / `.tile::scatter4` instructions.

One instruction moves four rows, so a copy of `n` rows becomes `n / 4` of them, all through one
tiled descriptor over the 2-D array whose box is one row of the column window. A gather that
arrives does it once, for every row's bytes, before its instructions; a scatter that arrives
commits its bulk group after the last one. The instructions exist on sm_100a only: a kernel
compiled for Hopper gets an `UnsupportedTargetError` at the copy's line.

Example: `async_gather(x.at[:, ds(c, 64)], buf, rows=idx, barrier=bar)` with x: 1000x256xf32,
idx: 8xui32, buf: 8x64xf32 becomes

    "asyncdsl.arrive_expect_tx"(%bars, %c0) <{bytes = 2048 : i64}>
    "asyncdsl.tma_gather4"(%buf, %idx, %c, %bars, %c0) <{descriptor = #asyncdsl.tma_desc<arg = 0,
        dtype = 7, elem_bytes = 4, dims = [1000, 256], strides = [1024, 4], box = [1, 64], ...>,
        first_row = 0 : i64}>
    "asyncdsl.tma_gather4"(%buf, %idx, %c, %bars, %c0) <{..., first_row = 4 : i64}>
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.rewriter import Rewriter

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.errors import UnsupportedTargetError
from asyncdsl.hw.limits import GATHER4_ROWS
from asyncdsl.hw.options import BLACKWELL
from asyncdsl.kernel_binary import TiledTensorMapSpec
from asyncdsl.passes.resolve.copy_operands import argument_index, enclosing_kernel, load_barrier


def resolve_row_copy(copy: ir.AsyncCopyRowsOp) -> None:
    """Replace `copy` by its gather4/scatter4 instructions (and the gather's one arrival)."""
    arch = attrs.arch(enclosing_kernel(copy))
    if arch != BLACKWELL:
        kind = "gathers" if copy.is_load else "scatters"
        raise UnsupportedTargetError(
            f"row {kind} use Blackwell's .tile::gather4/.tile::scatter4 TMA instructions, which {arch} "
            f"(Hopper) does not have: compile the kernel with arch=\"sm_100a\" (it then runs only on "
            "Blackwell, and in the interpreter)"
        )
    spec = row_descriptor_spec(copy)
    descriptor = TmaDescriptorAttr.from_spec(spec)
    arrive = bool(copy.arrive.value.data)
    groups = range(0, copy.row_count, GATHER4_ROWS)
    new: list[Operation] = []
    if copy.is_load:
        barriers, barrier_index = load_barrier(copy)
        if arrive:
            row_bytes = spec.box_dims[1] * spec.element_bytes
            new.append(ir.ArriveExpectTxOp(barriers, barrier_index, copy.row_count * row_bytes))
        new += [
            ir.TmaGather4Op(copy.smem, copy.rows, copy.column_start, barriers, barrier_index,
                            descriptor, first)
            for first in groups
        ]
    else:
        new += [
            ir.TmaScatter4Op(copy.smem, copy.rows, copy.column_start, descriptor, first,
                             commit=arrive and first == groups[-1])
            for first in groups
        ]
    for op in new:
        op.location = copy.location
    Rewriter.replace_op(copy, new, new_results=[])


def row_descriptor_spec(copy: ir.AsyncCopyRowsOp) -> TiledTensorMapSpec:
    """The tiled descriptor of a row copy: the whole 2-D array, a box of one window row."""
    dtype = dtypes.from_mlir(ir.shaped_type(copy.gmem.type).element_type)
    rows, columns = ir.shape_of(copy.gmem)
    return TiledTensorMapSpec(
        arg_index=argument_index(copy.gmem),
        dtype_code=dtype.tma_code,
        element_bytes=dtype.itemsize,
        global_dims=(rows, columns),
        global_strides=(columns * dtype.itemsize, dtype.itemsize),
        box_dims=(1, copy.columns.value.data),
        swizzle_bytes=copy.swizzle.value.data,
    )


