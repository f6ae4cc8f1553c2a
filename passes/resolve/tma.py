"""Resolving a copy into tiled TMA instructions (`asyncdsl.tma_load` / `asyncdsl.tma_store`)."""

from __future__ import annotations

from dataclasses import replace

from xdsl.rewriter import Rewriter

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.transform_attrs import transform_from_attr
from asyncdsl.hw.tma import TmaCopyPlan, plan_tiled_copy
from asyncdsl.passes.resolve.index_builder import IndexBuilder, slice_entries
from asyncdsl.passes.resolve.reduction import hardware_reduction


def resolve_tma(copy: ir.AsyncCopyOp) -> None:
    """Replace `copy` by one TMA load or store."""
    reduction = hardware_reduction(copy)
    builder = IndexBuilder(copy)
    plan = plan_copy(copy, slice_entries(copy.starts, copy.sizes, builder))
    coords = [builder.value(c) for c in plan.coords]
    spec = plan.tensor_map_spec(copy.gmem.index)
    if reduction is not None:
        spec = replace(spec, dtype_code=reduction.type_code)
    descriptor = TmaDescriptorAttr.from_spec(spec)
    predicate = copy.predicate
    arrive = bool(copy.arrive.value.data)
    if copy.is_load:
        new = ir.TmaLoadOp(
            copy.smem, coords, copy.barriers, copy.barrier_index, descriptor,
            plan.box_bytes if arrive else 0, predicate=predicate,
        )
    else:
        new = ir.TmaStoreOp(
            copy.smem, coords, descriptor, commit=arrive,
            reduction=reduction.op if reduction is not None else None, predicate=predicate,
        )
    new.location = copy.location
    Rewriter.replace_op(copy, new, new_results=[])


def plan_copy(copy: ir.AsyncCopyOp, entries: list) -> TmaCopyPlan:
    """The tiled TMA plan of a user copy of the GMEM slice `entries` (the copy's own, from
    `slice_entries`, or a CTA's part of it) through its transforms and swizzle into its SMEM buffer."""
    return plan_tiled_copy(
        ir.shape_of(copy.gmem),
        dtypes.from_mlir(copy.gmem.type.element_type),
        entries,
        tuple(transform_from_attr(t) for t in copy.transforms),
        copy.swizzle.value.data,
        ir.shape_of(copy.smem),
    )
