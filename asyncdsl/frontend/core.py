"""Kernel code's core operations: where the running program is, and shared-memory buffers."""

from __future__ import annotations

from collections.abc import Sequence

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import ArgumentError, TraceError, TransformError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.options import swizzle_bytes, transform_chain
from asyncdsl.frontend.refs import SmemRef
from asyncdsl.frontend.scalars import Scalar
from asyncdsl.frontend.tile_arguments import shape_argument
from asyncdsl.hw.smem_layout import make_layout
from asyncdsl.hw.transforms import MemRefTransform


def _axis_id(op_class, axis: int, what: str) -> Scalar:
    if not is_int(axis) or axis not in (0, 1, 2):
        raise TraceError(f"{what}: axis must be 0, 1 or 2, got {axis!r}", user_location())
    return Scalar(tracing.current(what).emit(op_class(axis)).results[0])


def program_id(axis: int) -> Scalar:
    """Index of this CTA in the grid along `axis`."""
    return _axis_id(ir.ProgramIdOp, axis, "asyncdsl.program_id")


def num_programs(axis: int) -> Scalar:
    """Number of CTAs in the grid along `axis`."""
    return _axis_id(ir.NumProgramsOp, axis, "asyncdsl.num_programs")


def cluster_cta_id(axis: int) -> Scalar:
    """Index of this CTA inside its cluster along `axis`."""
    return _axis_id(ir.ClusterCtaIdOp, axis, "asyncdsl.cluster_cta_id")


def cluster_id(axis: int) -> Scalar:
    """Index of this CTA's cluster in the grid along `axis`."""
    return _axis_id(ir.ClusterIdOp, axis, "asyncdsl.cluster_id")


def cluster_shape() -> tuple[int, int, int]:
    """The kernel's cluster dims (`cluster=` of `asyncdsl.kernel`), as Python ints: a kernel body
    decorated with several cluster shapes can lay out its work for each."""
    return tracing.current("asyncdsl.cluster_shape").launch.cluster


def warpgroup_idx() -> Scalar:
    """Index of the executing warpgroup in its CTA (for producer/consumer roles)."""
    return Scalar(tracing.current("asyncdsl.warpgroup_idx").emit(ir.WarpgroupIdxOp()).results[0])


def allocation_tracer(what: str) -> tracing.Tracer:
    tracer = tracing.current(what)
    if not tracer.at_top_level:
        raise TraceError(
            f"{what} allocates for the whole kernel: call it at the top level of the kernel, not "
            "inside asyncdsl.range or asyncdsl.when",
            user_location(),
        )
    return tracer


def smem(
    shape: Sequence[int] | int,
    dtype,
    *,
    transforms: MemRefTransform | Sequence[MemRefTransform] = (),
    swizzle: int | None = None,
) -> SmemRef:
    """A buffer of `shape` elements of `dtype` in the CTA's shared memory.

    With `transforms` and/or `swizzle`, `shape` is the logical shape and the buffer carries its
    layout (`asyncdsl.hw.smem_layout`): memory holds the shape the transforms make of it, with
    its bytes swizzled; copies take the transforms and swizzle from the buffer, and register
    loads and stores address it through them.  Without, the buffer is row-major in `shape`.
    """
    what = "asyncdsl.smem"
    tracer = allocation_tracer(what)
    shape = shape_argument(shape, what)
    try:
        element = dtypes.as_dtype(dtype)
    except ArgumentError as error:
        raise TraceError(f"{what}: {error.message}", user_location()) from None
    try:
        layout = make_layout(shape, transform_chain(transforms), swizzle_bytes(swizzle))
        if layout is not None:
            layout.check_element(element.bits)
    except TransformError as error:
        raise TraceError(f"{what}: {error.message}", user_location()) from None
    if layout is None:
        op = tracer.emit(ir.AllocSmemOp(shape, element.mlir()))
    else:
        alignment = max(128, layout.alignment)
        op = tracer.emit(ir.AllocSmemOp(layout.physical_shape, element.mlir(), alignment, layout))
    return SmemRef(op.results[0], shape, element, layout, user_location())
