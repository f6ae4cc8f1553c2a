"""Register tiles in kernel code: warpgroup values spread over the 128 threads' registers.

    x = buf[...]                                   # a whole SMEM buffer into registers
    y = (x.astype(ad.float32) * scale + 1.0)       # elementwise, numpy broadcasting
    m = y.max(axis=1)                              # a (rows,) tile: reductions in a fixed order
    total = y.sum()                                # every axis: a 0-d tile, numpy's scalar
    out[...] = (y - m[:, None]).astype(ad.bfloat16)

A `RegisterTile` is immutable, like a numpy array: operators make new tiles (`arith`/`math` ops on
`vector` values).  Arithmetic follows IEEE round-to-nearest-even with no contraction (`a * b + c`
rounds twice; `asyncdsl.fma` rounds once); 16-bit floats compute each op exactly rounded to their
own type.  Operands combine by numpy's broadcasting rules; a Python number or a traced scalar
becomes a tile of the other operand's dtype; two tiles must have the same dtype (`astype` first).

A tile is made in the body it is traced in (`asyncdsl.range`, `asyncdsl.when`): using it after
that body is an error, since the loop's body is traced once; state that crosses loops lives in
`asyncdsl.registers`.  Layouts (`asyncdsl.WGMMA`, `asyncdsl.strided(4)`, ...) are given where
they matter and inferred elsewhere (`passes/infer_layouts.py`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import IndexType, IntegerAttr, VectorType
from xdsl.ir import SSAValue

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import ResourceError, TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.scalars import FloatScalar, Scalar
from asyncdsl.frontend.tile_arguments import (
    COMPUTE_DTYPES,
    check_computable,
    constant_attr,
    dtype_argument,
    element_type,
    is_numpy_number,
    layout_argument,
    numpy_promotion,
    plain_number,
    shape_argument,
    tile_dtype,
    tile_of,
)
from asyncdsl.frontend.tile_operators import MODULO, TileOperators
from asyncdsl.hw.fragments import Layout, SplatLayout
from asyncdsl.hw.limits import MAX_REGISTERS_PER_THREAD, WARPGROUP_THREADS
from asyncdsl.hw.options import TileReduction

Number = int | float


def _emit(op, what: str) -> SSAValue:
    return tracing.current(what).emit(op).results[0]


def _check_fits_registers(shape: tuple[int, ...], dtype: dtypes.DType) -> None:
    """Refuse a tile that cannot be held in a warpgroup's registers: spread over its 128 threads
    without copies, its bits would still need more 32-bit registers a thread than a thread can
    have (ptxas would spill all of it, after a compile that grows with it)."""
    registers = -(-math.prod(shape) * dtype.bits // (WARPGROUP_THREADS * 32))
    if registers > MAX_REGISTERS_PER_THREAD:
        raise ResourceError(f"a register tile of shape {shape} {dtype} needs at least {registers} 32-bit "
                            f"registers in each of a warpgroup's {WARPGROUP_THREADS} threads, which have at "
                            f"most {MAX_REGISTERS_PER_THREAD}: work on smaller tiles (a loop over windows of "
                            "the array)", user_location())


class RegisterTile(TileOperators):
    """A warpgroup's tile of `shape` elements of `dtype`, held in registers."""

    __slots__ = ("value", "dtype", "shape", "view", "spread")

    def __init__(self, value: SSAValue, dtype: dtypes.DType, spread: bool = True,
                 holds_new_values: bool = True):
        self.value: SSAValue | None = value
        self.dtype = tile_dtype(dtype, "a register tile")
        assert isinstance(value.type, VectorType)  # register tiles are vectors in the IR
        self.shape = tuple(value.type.get_shape())
        # Whether the tile's elements may differ, so that its threads share them out: a constant
        # (`asyncdsl.full`) and what elementwise math makes of constants alone may stay one value
        # a thread whatever their shape (a splat filling a large window), anything else may not.
        self.spread = spread
        # A broadcast holds no values of its own (each result register is one its source has,
        # `passes/to_ptx/tiles.py`): the ops that use it are what may not fit.
        if spread and holds_new_values:
            _check_fits_registers(self.shape, self.dtype)
        # `tile[:, None]` is a view: (the tile, where its axes sit). It needs no layout of its own:
        # elementwise math runs on the tile and broadcasting reads the tile directly.
        self.view: tuple[RegisterTile, tuple[int, ...]] | None = None

    def _expanded(self, shape: tuple[int, ...], dims: tuple[int, ...]) -> RegisterTile:
        """A view of this tile with size-1 axes added: its axis i at `dims[i]` of `shape`."""
        view = object.__new__(RegisterTile)
        view.value, view.dtype, view.shape, view.spread = None, self.dtype, shape, self.spread
        view.view = (self, dims)
        return view

    def _view_key(self):
        return (self.shape, self.view[1]) if self.view is not None else None

    def __repr__(self) -> str:
        return f"RegisterTile({self.shape} {self.dtype})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def use(self, what: str) -> SSAValue:
        """This tile's IR value where it is used (the tracer refuses an op that uses a value of a
        loop or branch body that has ended, tiles included: `Tracer._append`)."""
        tracer = tracing.current(what)
        # A view used as a tile of its own shape is broadcast where it is used; again where the
        # last broadcast was traced inside a loop or branch body that has ended.
        if self.view is not None and (self.value is None
                                      or not tracer.visible(tracing.defining_block(self.value))):
            source, dims = self.view
            self.value = _broadcast(source, self.shape, dims).value
        assert self.value is not None  # a tile that is no view has its value
        return self.value

    # -- elementwise arithmetic ------------------------------------------------------------------
    def _binary(self, other, float_op, int_op, reverse: bool = False,
                what: str = "arithmetic on register tiles", bitwise: bool = False):
        lhs, rhs = coerced(self, other, what)
        check_computable(lhs, what, allow_bool=bitwise)
        if reverse:
            lhs, rhs = rhs, lhs
        op_class = float_op if lhs.dtype.is_float else int_op
        if op_class is None:
            raise TraceError(f"{what} is not defined for {lhs.dtype} tiles", user_location())
        return elementwise(what, op_class, (lhs, rhs), lhs.dtype)

    def _modulo(self, other, reverse: bool) -> RegisterTile:
        lhs, rhs = coerced(self, other, MODULO)
        if reverse:
            lhs, rhs = rhs, lhs
        # a - (a // b) * b: the floor division's remainder, its sign the divisor's.
        return lhs - lhs._binary(rhs, None, arith.FloorDivSIOp, what=MODULO) * rhs

    def __invert__(self):
        check_computable(self, "~tile", allow_bool=True)
        if self.dtype.is_float:
            raise TraceError(f"~tile is for int32 tiles and bool masks, not {self.dtype} ones",
                             user_location())
        if self.dtype != dtypes.BOOL:
            return self ^ -1  # every bit flipped
        # A mask negated: xor with an all-true mask (`full` makes number tiles only).
        element = dtypes.BOOL.mlir()
        every = _emit(ir.FullOp(IntegerAttr(1, element), VectorType(element, self.shape), None), "~tile")
        return self ^ RegisterTile(every, dtypes.BOOL, spread=False)

    def __neg__(self):
        check_computable(self, "-tile")
        if self.dtype.is_float:
            return elementwise("-tile", arith.NegfOp, (self,), self.dtype)
        return 0 - self

    def __abs__(self):
        check_computable(self, "abs(tile)")
        op = xmath.AbsFOp if self.dtype.is_float else xmath.AbsIOp
        return elementwise("abs(tile)", op, (self,), self.dtype)

    def __pow__(self, exponent):
        # numpy's exact cases (its scalar power takes square, sqrt and reciprocal for them):
        # every other power rounds as powf does, which no PTX instruction gives.
        exponent = plain_number(exponent)
        if not isinstance(exponent, (int, float)):
            raise TraceError(f"tile ** {exponent!r}: the exponent is a Python number (for a tile of them, "
                             "asyncdsl.exp2(e * asyncdsl.log2(t)))", user_location())
        what = f"tile ** {exponent!r}"
        check_computable(self, what)
        if exponent == 2 and not isinstance(exponent, bool):
            return self * self
        if exponent == 1 and not isinstance(exponent, bool):
            return self
        if exponent == 0 and not isinstance(exponent, bool):
            return full(self.shape, 1, self.dtype)
        if exponent in (-1, 0.5) and self.dtype.is_float:
            if exponent == -1:
                return 1 / self
            return elementwise(what, lambda v: xmath.SqrtOp(v, arith.FastMathFlagsAttr("none")), (self,),
                               self.dtype)
        raise TraceError(f"{what}: a tile's power takes the exponents numpy computes exactly, 2, 1, 0 "
                         "and, for floats, -1 and 0.5 (asyncdsl.sqrt); for others write the product, or "
                         "asyncdsl.exp2(e * asyncdsl.log2(t))", user_location())

    def __rpow__(self, base):
        raise TraceError(f"{plain_number(base)!r} ** tile: use asyncdsl.exp2(tile * log2(base))",
                         user_location())

    # -- comparisons make bool tiles -------------------------------------------------------------
    def _compare(self, predicate: str, other):
        what = "comparison of register tiles"
        lhs, rhs = coerced(self, other, what, comparison=True)
        check_computable(lhs, what)
        return elementwise(what, lambda a, b: ir.CompareOp(predicate, a, b), (lhs, rhs), dtypes.BOOL)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TraceError(
            "a register tile has no Python truth value; select elementwise with asyncdsl.where(mask, a, b)",
            user_location(),
        )

    # -- conversions -----------------------------------------------------------------------------
    def astype(self, dtype) -> RegisterTile:
        """The tile converted elementwise: floats round to nearest even (to float8: saturating),
        floats to integers truncate toward zero (saturating; NaN gives 0), integers to floats
        round, integers wrap (docs/register-tiles.md)."""
        target = tile_dtype(element_type(dtype, "astype"), "astype")
        if target == dtypes.BOOL:
            raise TraceError("astype(bool): compare instead (tile != 0)", user_location())
        if target == self.dtype:
            return self
        return elementwise(
            "astype", lambda value: ir.ConvertOp(value, VectorType(target.mlir(), value.type.get_shape())),
            (self,), target)

    def to_layout(self, layout: Layout) -> RegisterTile:
        """The same tile in register layout `layout` (data moves between threads)."""
        target = layout_argument(layout, "to_layout")
        if target is None:
            raise TraceError("to_layout: say which layout (asyncdsl.WGMMA, asyncdsl.strided(4), ...), "
                             "got None", user_location())
        return RegisterTile(_emit(ir.RelayoutOp(self.use("to_layout"), target), "to_layout"), self.dtype,
                            spread=not isinstance(target, SplatLayout))

    # -- reductions ------------------------------------------------------------------------------
    def _reduce(self, kind: TileReduction, axis) -> RegisterTile:
        what = f"tile.{kind}"
        if isinstance(axis, np.integer):
            axis = int(axis)
        if isinstance(axis, bool) or (axis is not None and not isinstance(axis, (int, tuple, list))):
            raise TraceError(f"{what}: axis must be an int, a tuple of ints or None, got {axis!r}",
                             user_location())
        axes = (tuple(range(self.ndim)) if axis is None
                else ((axis,) if isinstance(axis, int) else tuple(axis)))
        normalized = sorted({a + self.ndim if isinstance(a, int) and a < 0 else a for a in axes})
        if not axes:
            return self  # over no axes (a 0-d tile's total, axis=()): the tile, as numpy gives
        if (len(normalized) != len(axes)
                or any(not isinstance(a, int) or not 0 <= a < self.ndim for a in normalized)):
            raise TraceError(f"{what}: axis {axis!r} is not one or more distinct axes of a {self.shape} tile",
                             user_location())
        check_computable(self, what)
        if self.view is not None:
            return self._reduce_view(kind, normalized)
        return RegisterTile(_emit(ir.ReduceOp(self.use(what), kind, normalized), what), self.dtype)

    def _reduce_view(self, kind: TileReduction, axes: list[int]) -> RegisterTile:
        """A view (`r[:, None]`, a keepdims result) reduced: its added size-1 axes hold one
        element each, so reducing them combines nothing; the viewed tile is reduced over the
        other axes in its own layout, and the axes left over are viewed again.  (Reducing the
        view's broadcast instead would need that broadcast in a layout that reduces.)"""
        assert self.view is not None, "_reduce_view reduces a view; `_reduce` takes the other tiles"
        source, dims = self.view
        reduced = source._reduce(kind, tuple(i for i, d in enumerate(dims) if d in axes))
        kept = [a for a in range(self.ndim) if a not in axes]
        shape = tuple(self.shape[a] for a in kept)
        if shape == reduced.shape:
            return reduced
        return reduced._expanded(shape, tuple(kept.index(d) for d in dims if d not in axes))

    # Without `axis`, every axis: a 0-d tile, numpy's scalar (`x - x.max()` broadcasts it back).
    # keepdims=True keeps the reduced axes with size 1, as numpy does.  A bool mask reduces as
    # 0s and 1s: its sum counts (int32), its max is numpy's any and its min all (bool).
    def sum(self, axis=None, keepdims: bool = False) -> RegisterTile:
        return self._reduced(TileReduction.SUM, axis, keepdims)

    def max(self, axis=None, keepdims: bool = False) -> RegisterTile:
        return self._reduced(TileReduction.MAX, axis, keepdims)

    def min(self, axis=None, keepdims: bool = False) -> RegisterTile:
        return self._reduced(TileReduction.MIN, axis, keepdims)

    def any(self, axis=None, keepdims: bool = False) -> RegisterTile:
        return self._mask("tile.any").max(axis, keepdims)

    def all(self, axis=None, keepdims: bool = False) -> RegisterTile:
        return self._mask("tile.all").min(axis, keepdims)

    def _mask(self, what: str) -> RegisterTile:
        if self.dtype != dtypes.BOOL:
            raise TraceError(f"{what} is for bool tiles (a comparison), not {self.dtype} ones",
                             user_location())
        return self

    def _reduced(self, kind: TileReduction, axis, keepdims: bool) -> RegisterTile:
        what = f"tile.{kind}"
        if not isinstance(keepdims, bool):
            raise TraceError(f"{what}: keepdims must be True or False, got {keepdims!r}", user_location())
        if self.dtype == dtypes.BOOL:
            counts = self.astype(dtypes.int32)._reduce(kind, axis)
            result = counts if kind == TileReduction.SUM else counts != 0
        else:
            result = self._reduce(kind, axis)
        if not keepdims:
            return result
        reduced = range(self.ndim) if axis is None else [a % self.ndim for a in
                                                          ((axis,) if is_int(axis) else axis)]
        return result[tuple(None if a in reduced else slice(None) for a in range(self.ndim))]

    # Built on the three above, as numpy names them: the ops they trace into decide their bits.
    def mean(self, axis=None, keepdims: bool = False) -> RegisterTile:
        """The sum over `axis` divided by the number of elements it took (float tiles: one IEEE
        division of the sum)."""
        if not self.dtype.is_float:
            raise TraceError(f"tile.mean of {self.dtype} tiles: numpy's mean of integers is a float; "
                             "astype(asyncdsl.float32) first", user_location())
        total = self.sum(axis, keepdims)
        return total / (math.prod(self.shape) // math.prod(total.shape))

    def argmax(self, axis: int) -> RegisterTile:
        """The int32 index along `axis` of the first largest element (a NaN counts as largest)."""
        return self._arg_extremum(axis, largest=True)

    def argmin(self, axis: int) -> RegisterTile:
        """The int32 index along `axis` of the first smallest element (a NaN counts as smallest)."""
        return self._arg_extremum(axis, largest=False)

    def _arg_extremum(self, axis, largest: bool) -> RegisterTile:
        # numpy's first index of the extremum: the extremum broadcast back and compared, then the
        # smallest index that matched.  max.NaN gave a NaN extremum only if the tile holds a NaN,
        # which then matches as numpy's argmax takes the first NaN.
        what = f"tile.{'argmax' if largest else 'argmin'}"
        if not is_int(axis) or not -self.ndim <= axis < self.ndim:
            raise TraceError(f"{what}: axis must be one axis (an int) of the {self.shape} tile, got {axis!r}",
                             user_location())
        axis %= self.ndim
        peak = self.max(axis) if largest else self.min(axis)
        hit = self == peak[tuple(None if a == axis else slice(None) for a in range(self.ndim))]
        if self.dtype.is_float:
            hit = hit | (self != self)
        positions = iota(self.shape, dtypes.int32, dim=axis)
        last = full(self.shape, 2**31 - 1, dtypes.int32)
        return elementwise(what, ir.SelectOp, (hit, positions, last), dtypes.int32).min(axis)

    def __iter__(self):
        # Python's iteration (sum(t), max(t), list(t), `for v in t`) would index the tile element
        # by element, which the GPU's registers cannot do.
        raise TraceError("a register tile is not iterable: reduce it with tile.sum(axis), .max(axis) or "
                         ".min(axis)", user_location())

    # -- new axes: tile[:, None] -----------------------------------------------------------------
    def __getitem__(self, key) -> RegisterTile:
        key = key if isinstance(key, tuple) else (key,)
        # numpy's `...` and implied trailing dims: t[None] and t[..., None] name every axis.
        # (identity tests throughout: `==` on a tile in the key would trace a comparison)
        given = sum(k is not None and k is not Ellipsis for k in key)
        ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
        if len(ellipses) > 1:
            raise TraceError("a register tile's index has at most one ... (numpy's rule)", user_location())
        position = ellipses[0] if ellipses else len(key)
        missing = (slice(None),) * max(0, self.ndim - given)
        key = key[:position] + missing + key[position + 1:]
        # not `!=`: a tile's own
        whole = [k is None or (isinstance(k, slice) and k == slice(None)) for k in key]
        if not all(whole) or sum(k is not None for k in key) != self.ndim:
            raise TraceError(
                "register tiles are indexed only to add axes, numpy style (tile[:, None]); they do not slice",
                user_location(),
            )
        shape = []
        dims = []
        for k in key:
            if k is None:
                shape.append(1)
            else:
                dims.append(len(shape))
                shape.append(self.shape[len(dims) - 1])
        if len(shape) == self.ndim:
            return self
        if self.view is not None:  # a view of a view: compose the axis maps
            source, inner = self.view
            return source._expanded(tuple(shape), tuple(dims[i] for i in inner))
        return self._expanded(tuple(shape), tuple(dims))


def _broadcast(tile: RegisterTile, shape: tuple[int, ...], dims: tuple[int, ...]) -> RegisterTile:
    if shape == tile.shape:
        return tile
    result = VectorType(tile.dtype.mlir(), shape)
    return RegisterTile(_emit(ir.BroadcastInDimOp(tile.use("broadcasting"), result, dims), "broadcasting"),
                        tile.dtype, spread=tile.spread, holds_new_values=False)


def stretches_to(source: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether numpy broadcasts a `source` shape to `shape` (trailing dims aligned, each 1 or equal)."""
    return len(shape) >= len(source) and all(s in (1, t) for s, t in zip(source[::-1], shape[::-1]))


def broadcast_to(tile: RegisterTile, shape: Sequence[int]) -> RegisterTile:
    """`tile` repeated to `shape` by numpy's rules (trailing dims aligned, size-1 dims stretched)."""
    shape = tuple(shape)
    if not stretches_to(tile.shape, shape):
        raise TraceError(f"cannot broadcast a {tile.shape} tile to {shape}", user_location())
    if tile.shape == shape:
        return tile
    offset = len(shape) - tile.ndim
    source, dims = tile.view if tile.view is not None else (tile, tuple(range(tile.ndim)))
    dims = tuple(offset + d for d in dims)
    if any(size != shape[d] for size, d in zip(source.shape, dims)):
        if tile.dtype == dtypes.BOOL:  # a mask stretches as 0s and 1s (a predicate has no scratch form)
            return broadcast_to(tile.astype(dtypes.int32), shape) != 0
        # Every size-1 dim goes, stretched or not, and comes back as a new axis: a tile without
        # them is laid out along its real dims only (a (1, 1) element becomes a 0-d one).
        unit = tuple(i for i, size in enumerate(source.shape) if size == 1)
        source, dims = _squeezed(source, unit), tuple(d for i, d in enumerate(dims) if i not in unit)
    return _broadcast(source, shape, dims)


def _squeezed(tile: RegisterTile, axes: tuple[int, ...]) -> RegisterTile:
    """`tile` without its size-1 `axes`, as a reduction over them: one element each, so nothing is
    combined and the values stay bit for bit, and the layout algebra already says where a
    reduction leaves its elements (`Layout.reduce`), which the broadcast then starts from."""
    what = f"broadcasting the size-1 dims of a {tile.shape} tile"
    if tile.dtype not in COMPUTE_DTYPES:
        raise TraceError(
            f"{what}: stretching size-1 dims is for {', '.join(map(str, COMPUTE_DTYPES))} tiles, not "
            f"{tile.dtype}; astype one of them first, or make the tile without the size-1 dims",
            user_location(),
        )
    return RegisterTile(_emit(ir.ReduceOp(tile.use(what), TileReduction.MAX, list(axes)), what), tile.dtype)


def assigned(tile, shape: tuple[int, ...], dtype: dtypes.DType, where: str, what: str) -> RegisterTile:
    """`tile` as written to `where` of `shape` and `dtype`: broadcast to the shape as numpy's
    assignment does (a 0-d total into every element, or into a window of one); the dtype must
    match (no implicit conversion)."""
    if not isinstance(tile, RegisterTile):
        raise TraceError(f"{what} writes a register tile into {where}, got {tile!r}", user_location())
    fits = len(tile.shape) <= len(shape) and all(t in (1, s) for t, s in zip(tile.shape[::-1], shape[::-1]))
    if not fits or tile.dtype != dtype:
        raise TraceError(
            f"{what}: a {tile.shape} {tile.dtype} tile does not fit {where} of {shape} {dtype} "
            "(astype first; shapes broadcast by numpy's rules)",
            user_location(),
        )
    return broadcast_to(tile, shape)


def elementwise(what: str, make_op, operands: tuple[RegisterTile, ...], dtype: dtypes.DType) -> RegisterTile:
    """The tile `make_op(*values)` makes from `operands` (tiles of one shape).  When they are
    all the same view (`m[:, None]`), the op runs on the viewed tiles and the result is that view."""
    keys = {t._view_key() for t in operands}
    if len(keys) == 1 and operands[0].view is not None:
        sources = [t.view[0] for t in operands if t.view is not None]  # all of them, one view
        result = RegisterTile(_emit(make_op(*(t.use(what) for t in sources)), what), dtype,
                              spread=any(t.spread for t in sources))
        return result._expanded(operands[0].shape, operands[0].view[1])
    return RegisterTile(_emit(make_op(*(t.use(what) for t in operands)), what), dtype,
                        spread=any(t.spread for t in operands))


def coerced(tile: RegisterTile, other, what: str,
            comparison: bool = False) -> tuple[RegisterTile, RegisterTile]:
    """`tile` and `other` as two tiles of one dtype and one (broadcast) shape: a numpy scalar
    promotes as numpy 2 says (`numpy_promotion`), a Python number or traced scalar takes the
    tile's dtype."""
    if is_numpy_number(other):
        tile = promoted_to(tile, numpy_promotion(tile.dtype, [other], what, comparison))
        other = other.item()
    if isinstance(other, RegisterTile):
        if other.dtype != tile.dtype:
            raise TraceError(
                f"{what}: {tile_of(tile.dtype)} and {tile_of(other.dtype)}; convert one with .astype(...) "
                "first",
                user_location(),
            )
        shape = broadcast_shape(tile.shape, other.shape, what)
        if tile._view_key() is not None and tile._view_key() == other._view_key():
            return tile, other
        return broadcast_to(tile, shape), broadcast_to(other, shape)
    if tile.view is not None:  # a number or scalar with a view: the same view of a splat
        source, dims = tile.view
        return tile, _full(source.shape, other, tile.dtype, None, what)._expanded(tile.shape, dims)
    return tile, _full(tile.shape, other, tile.dtype, None, what)


def promoted_to(tile: RegisterTile, dtype: dtypes.DType) -> RegisterTile:
    """`tile` in the dtype a numpy scalar promoted it to (exact: numpy promotes only to a dtype
    that holds every value of the tile's)."""
    return tile if tile.dtype == dtype else tile.astype(dtype)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...], what: str) -> tuple[int, ...]:
    result = []
    for x, y in zip((1,) * (len(b) - len(a)) + a, (1,) * (len(a) - len(b)) + b):
        if x != y and 1 not in (x, y):
            raise TraceError(f"{what}: shapes {a} and {b} do not broadcast", user_location())
        result.append(max(x, y))
    return tuple(result)


# -- making tiles ----------------------------------------------------------------------------------


def full(shape, value, dtype, layout: Layout | None = None) -> RegisterTile:
    """A tile of `shape` (`()`: a 0-d tile) whose every element is `value`: a Python number, or a
    traced scalar (an index, or a float, which fills float tiles only)."""
    return _full(shape, value, dtype, layout, "asyncdsl.full")


def _full(shape, value, dtype, layout: Layout | None, what: str) -> RegisterTile:
    """`full`, its refusals naming `what` (the operation a number or scalar takes part in)."""
    shape, element = shape_argument(shape, what, scalar=True), dtype_argument(dtype, what)
    layout = layout_argument(layout, what)
    result = VectorType(element.mlir(), shape)
    spread = layout is not None and not isinstance(layout, SplatLayout)
    if isinstance(value, (Scalar, FloatScalar)):
        scalar = _scalar_as(value, element, what)
        return RegisterTile(_emit(ir.SplatOp(scalar, result, layout), what), element, spread)
    attr = constant_attr(value, element, what)
    return RegisterTile(_emit(ir.FullOp(attr, result, layout), what), element, spread)


def zeros(shape, dtype, layout: Layout | None = None) -> RegisterTile:
    return full(shape, 0, dtype, layout)


def iota(shape, dtype, dim: int, layout: Layout | None = None) -> RegisterTile:
    """A tile of integers holding each element's index along `dim`."""
    what = "asyncdsl.iota"
    shape, element = shape_argument(shape, what), element_type(dtype, what)
    layout = layout_argument(layout, what)
    if element != dtypes.int32:
        raise TraceError(f"{what} makes int32 tiles, not {element} (astype after)", user_location())
    if not is_int(dim) or not -len(shape) <= dim < len(shape):
        raise TraceError(f"{what}: dim {dim!r} is not a dim of shape {shape}", user_location())
    if shape[dim] == 1:
        # One index along `dim`: every element is 0, a constant (a unit-size iota has no spread
        # of indices for a layout to place).
        return full(shape, 0, element, layout)
    op = ir.IotaOp(VectorType(element.mlir(), shape), dim % len(shape), layout)
    return RegisterTile(_emit(op, what), element)


def _scalar_as(scalar: Scalar | FloatScalar, element: dtypes.DType, what: str) -> SSAValue:
    """A traced index or float32 scalar converted to `element` (a float rounded to nearest even)."""
    tracer = tracing.current(what)
    if isinstance(scalar, FloatScalar):
        if not element.is_float:
            # As with a Python float: a value that may not be whole cannot fill an integer tile.
            raise TraceError(f"{what}: a traced float cannot become a {element} tile; astype the tile to a "
                             "float type first", user_location())
        if element == dtypes.float32:
            return scalar.value
        return tracer.emit(ir.ConvertOp(scalar.value, element.mlir())).results[0]
    if scalar.is_condition or not isinstance(scalar.value.type, IndexType):
        raise TraceError(f"{what}: only traced index values become tiles, got {scalar!r}", user_location())
    as_int = tracer.emit(arith.IndexCastOp(scalar.value, dtypes.int32.mlir())).results[0]
    if element == dtypes.int32:
        return as_int
    return tracer.emit(ir.ConvertOp(as_int, element.mlir())).results[0]


__all__ = ["RegisterTile", "assigned", "broadcast_to", "full", "iota", "promoted_to", "zeros"]
