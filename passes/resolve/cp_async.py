"""Resolving an `implementation="cp_async"` copy into `asyncdsl.cp_async_load`.

The planning is `asyncdsl.hw.cp_async`: which rows of the GMEM window each thread's `cp.async`
chunks come from, where they land in SMEM (tiled and swizzled exactly as a TMA load with the
same transforms and swizzle would lay them out), and the widest chunk the alignment allows.
Everything the fallback cannot do is rejected there with a CopyError (the op's verifier has
already refused stores, collectives, predicates and oob="undefined").

Example: `async_copy(x.at[ds(r, 64), :], buf, implementation="cp_async", swizzle=128,
transforms=TileTransform((8, 64)))` with x: 256x64xbf16 and buf: 8x1x8x64xbf16 becomes

    "asyncdsl.cp_async_load"(%x, %buf, %r, %c0) <{rows = 64, row_bytes = 128,
        row_stride_bytes = 128, tile_rows = 8, tile_row_bytes = 128, swizzle_bytes = 128,
        chunk_bytes = 16, arrive = true, ...}>
"""

from __future__ import annotations

from xdsl.rewriter import Rewriter

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.transform_attrs import transform_from_attr
from asyncdsl.hw.cp_async import plan_cp_async_copy
from asyncdsl.passes.resolve.checks import Conditions, check_window
from asyncdsl.passes.resolve.index_builder import IndexBuilder, static_starts, traced_starts


def resolve_cp_async(copy: ir.AsyncCopyOp) -> None:
    """Replace the cp.async `copy` by the warpgroup-wide per-thread copy."""
    plan = plan_cp_async_copy(
        ir.shape_of(copy.gmem),
        dtypes.from_mlir(ir.shaped_type(copy.gmem.type).element_type),
        static_starts(copy.starts),
        copy.sizes,
        tuple(transform_from_attr(t) for t in copy.transforms),
        copy.swizzle.value.data,
        ir.shape_of(copy.smem),
    )
    builder = IndexBuilder(copy)
    conditions = Conditions(builder)
    starts = traced_starts(copy.starts, builder)
    element = dtypes.from_mlir(ir.shaped_type(copy.gmem.type).element_type)
    check_window(
        conditions, ir.shape_of(copy.gmem), element, starts, copy.sizes, plan.chunk_bytes, True,
        f"cp.async (in {plan.chunk_bytes}-byte chunks)",
    )
    new = ir.CpAsyncLoadOp(
        copy.gmem, copy.smem, conditions.guarded_starts(list(copy.starts)), copy.sizes, plan,
        barriers=copy.barriers, barrier_index=copy.barrier_index, arrive=bool(copy.arrive.value.data),
    )
    new.location = copy.location
    Rewriter.replace_op(copy, new, new_results=[])
