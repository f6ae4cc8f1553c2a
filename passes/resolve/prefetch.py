"""Resolving an L2 prefetch (`asyncdsl.async_prefetch`) into one `asyncdsl.tma_prefetch`.

The slice is planned exactly like the GMEM side of a tiled TMA load (`hw.tma.plan_tiled_copy`,
without an SMEM side), so a prefetch and a later load of the same slice, transforms and swizzle
carry equal descriptors, which `allocate-descriptor-scratch` then numbers once. The same TMA
rules apply (box dims, 16-byte strides, swizzle width) and are reported the same way.

Example: `async_prefetch(x.at[ds(i, 64), :])` with `x: 256x128xf32` becomes

    "asyncdsl.tma_prefetch"(%i, %c0) <{descriptor = #asyncdsl.tma_desc<arg = 0, dtype = 7,
        elem_bytes = 4, dims = [256, 128], strides = [512, 4], box = [64, 128], ...>}>
"""

from __future__ import annotations

from xdsl.rewriter import Rewriter

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.descriptor_attrs import TmaDescriptorAttr
from asyncdsl.dialects.transform_attrs import transform_from_attr
from asyncdsl.hw.tma import plan_tiled_copy
from asyncdsl.passes.resolve.copy_operands import argument_index
from asyncdsl.passes.resolve.index_builder import IndexBuilder, slice_entries


def resolve_prefetch(prefetch: ir.AsyncPrefetchOp) -> None:
    """Replace `prefetch` by the TMA prefetch of its slice's box (raises CopyError if TMA cannot)."""
    builder = IndexBuilder(prefetch)
    plan = plan_tiled_copy(
        ir.shape_of(prefetch.gmem),
        dtypes.from_mlir(ir.shaped_type(prefetch.gmem.type).element_type),
        slice_entries(prefetch.starts, prefetch.sizes, builder),
        tuple(transform_from_attr(t) for t in prefetch.transforms),
        prefetch.swizzle.value.data,
    )
    descriptor = TmaDescriptorAttr.from_spec(plan.tensor_map_spec(argument_index(prefetch.gmem)))
    new = ir.TmaPrefetchOp([builder.value(c) for c in plan.coords], descriptor, predicate=prefetch.predicate)
    new.location = prefetch.location
    Rewriter.replace_op(prefetch, new, new_results=[])
