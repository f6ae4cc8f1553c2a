"""`asyncdsl.async_prefetch`: bring a GMEM slice into L2 ahead of the copies that will read it."""

from __future__ import annotations

from collections.abc import Sequence

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.transform_attrs import transform_attr
from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.options import swizzle_bytes, transform_chain
from asyncdsl.frontend.refs import GmemRef, GmemView
from asyncdsl.frontend.scalars import Scalar, condition_value, index_value
from asyncdsl.hw.transforms import MemRefTransform


def async_prefetch(
    src,
    *,
    transforms: MemRefTransform | Sequence[MemRefTransform] = (),
    swizzle: int | None = None,
    predicate: Scalar | None = None,
) -> None:
    """Start bringing the GMEM slice `src` (an array or `x.at[...]`) into L2; nothing waits for it.

    `transforms` and `swizzle` are those of the `async_copy` that will load the slice: given the
    same, the prefetch shares that copy's TMA descriptor. Only warpgroups where `predicate`
    holds issue it.
    """
    tracer = tracing.current("asyncdsl.async_prefetch")
    if isinstance(src, GmemRef):
        src = src.whole()
    if not isinstance(src, GmemView):
        raise TraceError(
            f"async_prefetch takes a kernel array argument (optionally .at[...]), got {type(src).__name__}",
            user_location(),
        )
    transforms, swizzle = transform_chain(transforms), swizzle_bytes(swizzle)
    if predicate is not None and not (isinstance(predicate, Scalar) and predicate.is_condition):
        raise TraceError("predicate must be a traced condition (e.g. asyncdsl.program_id(0) == 0)",
                         user_location())
    op = ir.AsyncPrefetchOp(
        src.ref.value,
        [index_value(d.start) for d in src.dims],
        [-1 if d.size is None else d.size for d in src.dims],
        transforms=[transform_attr(t) for t in transforms],
        swizzle=swizzle,
        predicate=condition_value(predicate) if predicate is not None else None,
    )
    tracer.emit(op)
