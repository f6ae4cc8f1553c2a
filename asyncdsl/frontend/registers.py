"""Mutable register tiles: `asyncdsl.registers(shape, dtype, layout=None)`.

    acc = ad.registers((64, 128), ad.float32)
    acc[...] = ad.zeros((64, 128), ad.float32)
    for k in ad.range(steps):
        acc[...] = acc[...] + buf.at[k][...].astype(ad.float32)   # the previous iteration's value
    out[...] = acc[...].astype(ad.bfloat16)
    half = acc[:, 64:128]          # a window: the registers that hold it (whole tiles of the layout)

A register tile made inside an `asyncdsl.range` or `asyncdsl.when` body cannot be used after it
(the body is traced once); a `registers` variable can: it is the same registers on every
iteration, written in place.  Reads see the last write before them in program order.

A wgmma (`frontend.wgmma`) writes its accumulator ref asynchronously: until a `wgmma_wait`
retires it, reading or writing the ref is an error at the line that does it (on the GPU, ptxas
would serialize the pipeline or the read would see a partial sum).
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from xdsl.dialects.builtin import VectorType
from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import SourceLocation, TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.core import allocation_tracer
from asyncdsl.frontend.tile_arguments import dtype_argument, layout_argument, shape_argument
from asyncdsl.frontend.tiles import RegisterTile
from asyncdsl.hw.fragments import Layout


class InFlight:
    """The wgmma groups of the kernel being traced that no wait has retired, oldest first: the
    register ref each writes and the line that issued it.  Program order stands for time."""

    def __init__(self) -> None:
        self._groups: list[tuple[SSAValue, SourceLocation | None]] = []

    def issue(self, ref: RegisterRef, location: SourceLocation | None) -> None:
        self._groups.append((ref.value, location))

    def retire(self, pending: int) -> None:
        """All but the newest `pending` groups are done."""
        self._groups = self._groups[len(self._groups) - pending:] if pending else []

    def check_settled(self, ref: RegisterRef, what: str) -> None:
        for written, location in self._groups:
            if written is ref.value:
                raise TraceError(
                    f"{what}: the wgmma at {location} may still be writing these registers; "
                    "asyncdsl.wgmma_wait(0) (or a count that retires that wgmma) first",
                    user_location(),
                )


_IN_FLIGHT: WeakKeyDictionary[tracing.Tracer, InFlight] = WeakKeyDictionary()


def in_flight(tracer: tracing.Tracer) -> InFlight:
    return _IN_FLIGHT.setdefault(tracer, InFlight())


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

    def _window(self, key) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """`ref[...]`: None (the whole tile); `ref[a:b, c:d]`: (offsets, shape) of the window."""
        if key is Ellipsis or key == (Ellipsis,):
            return None
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != len(self.shape) or not all(
            isinstance(k, slice) and k.step is None
            and all(b is None or is_int(b) for b in (k.start, k.stop))
            for k in key
        ):
            raise TraceError(
                f"registers are read whole (ref[...]) or in a window of Python-int slices, one per dim "
                f"(ref[0:64, 128:192]); got {key!r}", user_location(),
            )
        bounds = [k.indices(size) for k, size in zip(key, self.shape)]
        if any(start >= stop or stop > size or k.start is not None and k.start < 0
               or k.stop is not None and k.stop > size
               for (start, stop, _), size, k in zip(bounds, self.shape, key)):
            raise TraceError(f"the window {key!r} is empty or outside the {self.shape} registers",
                             user_location())
        return tuple(start for start, _, _ in bounds), tuple(stop - start for start, stop, _ in bounds)

    def __getitem__(self, key) -> RegisterTile:
        window = self._window(key)
        tracer = tracing.current("reading registers")
        in_flight(tracer).check_settled(self, "reading registers")
        op = tracer.emit(ir.ReadRegistersOp(self.value, window))
        return RegisterTile(op.results[0], self.dtype)

    def __setitem__(self, key, tile) -> None:
        what = "writing registers"
        self._whole(key, what)
        if not isinstance(tile, RegisterTile):
            raise TraceError(f"{what}: the value must be a register tile (asyncdsl.full, ...), got {tile!r}",
                             user_location())
        if tile.shape != self.shape or tile.dtype != self.dtype:
            raise TraceError(
                f"{what}: a {tile.shape} {tile.dtype} tile does not fit {self!r} (astype first)",
                user_location()
            )
        tracer = tracing.current(what)
        in_flight(tracer).check_settled(self, what)
        tracer.emit(ir.WriteRegistersOp(tile.use(what), self.value))


def registers(shape, dtype, layout: Layout | None = None) -> RegisterRef:
    """A mutable register tile of `shape` and `dtype` for the whole kernel (call it at the top
    level), in `layout` or one inferred from the tiles written to it and read from it."""
    what = "asyncdsl.registers"
    tracer = allocation_tracer(what)
    shape, element, layout = (shape_argument(shape, what, scalar=True), dtype_argument(dtype, what),
                              layout_argument(layout, what))
    op = tracer.emit(ir.AllocRegistersOp(VectorType(element.mlir(), shape), layout))
    return RegisterRef(op.results[0], shape, element)
