"""Mutable register tiles: `asyncdsl.registers(shape, dtype, layout=None)`.

    acc = ad.registers((64, 128), ad.float32)
    acc[...] = ad.zeros((64, 128), ad.float32)
    for k in ad.range(steps):
        acc[...] = acc[...] + buf.at[k][...].astype(ad.float32)   # the previous iteration's value
    out[...] = acc[...].astype(ad.bfloat16)

A register tile made inside an `asyncdsl.range` or `asyncdsl.when` body cannot be used after it
(the body is traced once); a `registers` variable can: it is the same registers on every
iteration, written in place.  Reads see the last write before them in program order.
"""

from __future__ import annotations

from xdsl.dialects.builtin import VectorType

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.core import allocation_tracer
from asyncdsl.frontend.tiles import RegisterTile, dtype_argument, layout_argument, shape_argument
from asyncdsl.hw.fragments import Layout


class RegisterRef:
    """A warpgroup's mutable tile of `shape` and `dtype`: `ref[...]` reads it, `ref[...] = t` writes."""

    def __init__(self, value, shape: tuple[int, ...], dtype):
        self.value = value
        self.shape = shape
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"RegisterRef({self.shape} {self.dtype})"

    def _whole(self, key, what: str) -> None:
        if key is not Ellipsis and key != (Ellipsis,):
            raise TraceError(f"{what} takes the whole tile: ref[...]", user_location())

    def __getitem__(self, key) -> RegisterTile:
        self._whole(key, "reading registers")
        op = tracing.current("reading registers").emit(ir.ReadRegistersOp(self.value))
        return RegisterTile(op.results[0], self.dtype)

    def __setitem__(self, key, tile) -> None:
        what = "writing registers"
        self._whole(key, what)
        if not isinstance(tile, RegisterTile):
            raise TraceError(f"{what}: the value must be a register tile (asyncdsl.full, ...), got {tile!r}", user_location())
        if tile.shape != self.shape or tile.dtype != self.dtype:
            raise TraceError(
                f"{what}: a {tile.shape} {tile.dtype} tile does not fit {self!r} (astype first)", user_location()
            )
        tracing.current(what).emit(ir.WriteRegistersOp(tile.use(what), self.value))


def registers(shape, dtype, layout: Layout | None = None) -> RegisterRef:
    """A mutable register tile of `shape` and `dtype` for the whole kernel (call it at the top
    level), in `layout` or one inferred from the tiles written to it and read from it."""
    what = "asyncdsl.registers"
    tracer = allocation_tracer(what)
    shape, element, layout = shape_argument(shape, what), dtype_argument(dtype, what), layout_argument(layout, what)
    op = tracer.emit(ir.AllocRegistersOp(VectorType(element.mlir(), shape), layout))
    return RegisterRef(op.results[0], shape, element)
