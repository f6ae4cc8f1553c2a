"""Resolving a copy into one contiguous bulk copy (`asyncdsl.bulk_load` / `asyncdsl.bulk_store`).

The reference copy engine uses plain `cp.async.bulk` (no tensor map) when the caller gave up
zero fill (`oob` is "undefined" or "promise_in_bounds") and nothing else needs a tensor map: no
swizzle, reduction or collective, and the transformed slice is one contiguous run of the GMEM
array (`asyncdsl.hw.bulk`).  Anything else takes the tiled TMA path, whose zero fill is one
valid outcome of "undefined" and of a kept promise.

Example: `async_copy(x.at[ds(i * 4, 4), :], buf, barrier=bar, oob="undefined")` with x: 64x256xf32
and buf: 4x256xf32 (one run of 4096 bytes, more than a TMA box could hold along dim 1) becomes

    "asyncdsl.bulk_load"(%x, %buf, %i4, %c0, %bars, %c0) <{slice_sizes = array<i64: 4, 256>,
        oob = "undefined", arrive = true, ...}>
"""

from __future__ import annotations

from xdsl.rewriter import Rewriter

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.transform_attrs import transform_from_attr
from asyncdsl.hw.bulk import check_bulk_copy, is_contiguous_run
from asyncdsl.hw.limits import BULK_ALIGNMENT
from asyncdsl.hw.options import Implementation, Oob
from asyncdsl.passes.resolve.checks import Conditions, check_clamped_store, check_smem_alignment, check_window
from asyncdsl.passes.resolve.copy_operands import load_barrier
from asyncdsl.passes.resolve.index_builder import IndexBuilder, static_starts, traced_starts


def takes_bulk_path(copy: ir.AsyncCopyOp) -> bool:
    """Whether the reference would move `copy` with a plain bulk copy."""
    return (
        copy.implementation.data == Implementation.TMA
        and copy.oob.data != Oob.ZEROS
        and copy.swizzle.value.data == 0
        and copy.reduction is None
        and not copy.cluster_dims
        and is_contiguous_run(ir.shape_of(copy.gmem), copy.sizes, _transforms(copy), ir.shape_of(copy.smem))
    )


def resolve_bulk(copy: ir.AsyncCopyOp) -> None:
    """Replace `copy` (for which `takes_bulk_path` holds) by one bulk load or store, with the
    run-time checks of its traced starts (a 16-byte aligned address; inside the array under
    "promise_in_bounds"; for a store under "undefined", a clamped run that stays in the window).
    A failing check moves a load's window to the array's start and skips a store, instead of
    faulting or writing other elements."""
    shape, dtype = ir.shape_of(copy.gmem), dtypes.from_mlir(ir.shaped_type(copy.gmem.type).element_type)
    check_bulk_copy(
        shape, dtype, static_starts(copy.starts), copy.sizes, ir.shape_of(copy.smem), copy.oob.data,
        store=not copy.is_load,
    )
    engine = "a bulk copy (cp.async.bulk)" if copy.is_load else "a bulk store (cp.async.bulk)"
    check_smem_alignment(copy.smem, BULK_ALIGNMENT, engine)
    builder = IndexBuilder(copy)
    conditions = Conditions(builder, copy.predicate)
    starts = traced_starts(copy.starts, builder)
    check_window(
        conditions, shape, dtype, starts, copy.sizes, BULK_ALIGNMENT,
        copy.oob.data == Oob.PROMISE_IN_BOUNDS, engine,
    )
    if not copy.is_load and copy.oob.data == Oob.UNDEFINED and any(type(s) is not int for s in starts):
        check_clamped_store(conditions, shape, starts, copy.sizes, engine)
    arrive = bool(copy.arrive.value.data)
    new: ir.BulkLoadOp | ir.BulkStoreOp
    if copy.is_load:
        window = (copy.gmem, copy.smem, conditions.guarded_starts(list(copy.starts)), copy.sizes)
        new = ir.BulkLoadOp(*window, *load_barrier(copy), oob=copy.oob.data, arrive=arrive,
                            predicate=copy.predicate)
    else:
        window = (copy.gmem, copy.smem, list(copy.starts), copy.sizes)
        predicate = conditions.guarded_predicate(copy.predicate)
        new = ir.BulkStoreOp(*window, oob=copy.oob.data, commit=arrive, predicate=predicate)
    new.location = copy.location
    Rewriter.replace_op(copy, new, new_results=[])


def _transforms(copy: ir.AsyncCopyOp) -> tuple:
    return tuple(transform_from_attr(t) for t in copy.transforms)
