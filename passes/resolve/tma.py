"""Resolving a copy into tiled TMA instructions (`asyncdsl.tma_load` / `asyncdsl.tma_store`)."""

from __future__ import annotations

from dataclasses import replace

from xdsl.rewriter import Rewriter

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.option_attrs import eviction_of
from asyncdsl.dialects.transform_attrs import transform_from_attr
from asyncdsl.errors import CopyError
from asyncdsl.hw.limits import MAX_TMA_RANK, TMA_SMEM_ALIGNMENT
from asyncdsl.hw.tma import TmaCopyPlan, plan_tiled_copy
from asyncdsl.passes.resolve.checks import Conditions, check_smem_alignment
from asyncdsl.passes.resolve.copy_operands import argument_index, load_barrier
from asyncdsl.passes.resolve.index_builder import IndexBuilder, slice_entries
from asyncdsl.passes.resolve.reduction import hardware_reduction


def resolve_tma(copy: ir.AsyncCopyOp) -> ir.TmaLoadOp | ir.TmaStoreOp:
    """Replace `copy` by one TMA load or store, with the run-time checks of what it assumes of
    its traced indices (`checks.py`): those a plan merged stay inside their dims, and a store's
    coordinates are not negative (the H200 faults on such stores, so a failing one is skipped).
    Returns the new op."""
    check_smem_alignment(copy.smem, TMA_SMEM_ALIGNMENT, "a TMA copy")
    reduction = hardware_reduction(copy)
    builder = IndexBuilder(copy)
    plan = plan_copy(copy, slice_entries(copy.starts, copy.sizes, builder))
    conditions = Conditions(builder, copy.predicate)
    check_merged_indices(conditions, plan)
    if not copy.is_load:
        check_store_coordinates(conditions, plan)
    coords = [builder.value(c) for c in plan.coords]
    spec = plan.tensor_map_spec(argument_index(copy.gmem))
    if reduction is not None:
        spec = replace(spec, dtype_code=reduction.type_code)
    descriptor = TmaDescriptorAttr.from_spec(spec)
    predicate = copy.predicate
    arrive = bool(copy.arrive.value.data)
    new: ir.TmaLoadOp | ir.TmaStoreOp
    if copy.is_load:
        new = ir.TmaLoadOp(
            copy.smem, coords, *load_barrier(copy), descriptor,
            plan.box_bytes if arrive else 0, predicate=predicate, peer=copy.peer,
            eviction=eviction_of(copy),
        )
    else:
        new = ir.TmaStoreOp(
            copy.smem, coords, descriptor, commit=arrive,
            reduction=reduction.op if reduction is not None else None,
            predicate=conditions.guarded_predicate(predicate), peer=copy.peer,
        )
    new.location = copy.location
    Rewriter.replace_op(copy, new, new_results=[])
    return new


def check_merged_indices(conditions: Conditions, plan: TmaCopyPlan) -> None:
    for index, size in plan.assumed_in_range:
        conditions.require(
            conditions.at_least(index, 0) + conditions.below(index, size),
            f"a traced index of a copy of more than {MAX_TMA_RANK} dims lies outside its dim of size {size}: "
            "merged with the other indexed dims, it would read or write another element",
            [index],
        )


def check_store_coordinates(conditions: Conditions, plan: TmaCopyPlan) -> None:
    for dim, coord in enumerate(plan.coords):
        if type(coord) is int and coord < 0:
            raise CopyError(
                f"the TMA store starts at coordinate {coord} along dim {dim} of its view: stores at "
                "negative coordinates fault on the H200 (CUDA_ERROR_ILLEGAL_INSTRUCTION); loads "
                "there read zeros"
            )
        conditions.require(
            conditions.at_least(coord, 0),
            f"the TMA store's coordinate along dim {dim} of its view is negative: stores there fault on the "
            "H200 (CUDA_ERROR_ILLEGAL_INSTRUCTION), so the store was skipped",
            [coord],
        )


def plan_copy(copy: ir.AsyncCopyOp, entries: list) -> TmaCopyPlan:
    """The tiled TMA plan of a user copy of the GMEM slice `entries` (the copy's own, from
    `slice_entries`, or a CTA's part of it) through its transforms and swizzle into its SMEM buffer."""
    return plan_tiled_copy(
        ir.shape_of(copy.gmem),
        dtypes.from_mlir(ir.shaped_type(copy.gmem.type).element_type),
        entries,
        tuple(transform_from_attr(t) for t in copy.transforms),
        copy.swizzle.value.data,
        ir.shape_of(copy.smem),
    )
