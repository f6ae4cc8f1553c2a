"""Traced scalars: index values and conditions computed on the GPU, uniform across a warpgroup.

Arithmetic on a `Scalar` records `arith` ops; arithmetic on Python ints stays in Python, so
`i * 64 + 1` with a Python `i` costs nothing at run time. Python semantics are kept: `//` floors
and `%` takes the sign of the divisor, on the GPU and in the interpreter alike.
"""

from __future__ import annotations

from typing import Union

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerType
from xdsl.ir import SSAValue

from asyncdsl.errors import TraceError, user_location
from asyncdsl.frontend import tracer as tracing

IndexLike = Union[int, "Scalar"]


class Scalar:
    """An index-typed value (or, with `is_condition`, an i1) recorded in the kernel's IR."""

    __slots__ = ("value",)

    def __init__(self, value: SSAValue):
        self.value = value

    @property
    def is_condition(self) -> bool:
        return isinstance(self.value.type, IntegerType)

    # -- arithmetic ---------------------------------------------------------------------------
    def _binary(self, other: IndexLike, op_class, reverse: bool = False) -> Scalar:
        lhs, rhs = index_value(self), index_value(other)
        if reverse:
            lhs, rhs = rhs, lhs
        return Scalar(_emit(op_class(lhs, rhs)).results[0])

    def __add__(self, other: IndexLike) -> Scalar:
        if isinstance(other, int) and other == 0:
            return self
        return self._binary(other, arith.AddiOp)

    def __radd__(self, other: IndexLike) -> Scalar:
        return self.__add__(other)

    def __sub__(self, other: IndexLike) -> Scalar:
        if isinstance(other, int) and other == 0:
            return self
        return self._binary(other, arith.SubiOp)

    def __rsub__(self, other: IndexLike) -> Scalar:
        return self._binary(other, arith.SubiOp, reverse=True)

    def __mul__(self, other: IndexLike) -> Scalar | int:
        if isinstance(other, int):
            if other == 1:
                return self
            if other == 0:
                return 0
        return self._binary(other, arith.MuliOp)

    def __rmul__(self, other: IndexLike) -> Scalar | int:
        return self.__mul__(other)

    def __floordiv__(self, other: IndexLike) -> Scalar:
        if isinstance(other, int) and other == 1:
            return self
        _check_divisor(other)
        return self._binary(other, arith.FloorDivSIOp)

    def __rfloordiv__(self, other: IndexLike) -> Scalar:
        return self._binary(other, arith.FloorDivSIOp, reverse=True)

    def __mod__(self, other: IndexLike) -> Scalar | int:
        if isinstance(other, int) and other == 1:
            return 0
        _check_divisor(other)
        # Python's modulo: a - (a // b) * b keeps the divisor's sign, unlike arith.remsi.
        return self - (self // other) * other

    def __rmod__(self, other: IndexLike) -> Scalar:
        return Scalar(index_value(other)) % self

    def __neg__(self) -> Scalar:
        return 0 - self

    def __pos__(self) -> Scalar:
        return self

    def min(self, other: IndexLike) -> Scalar:
        return self._binary(other, arith.MinSIOp)

    def max(self, other: IndexLike) -> Scalar:
        return self._binary(other, arith.MaxSIOp)

    # -- comparisons produce conditions -------------------------------------------------------
    def _compare(self, other: IndexLike, predicate: str) -> Scalar:
        return Scalar(_emit(arith.CmpiOp(index_value(self), index_value(other), predicate)).results[0])

    def __lt__(self, other: IndexLike) -> Scalar:
        return self._compare(other, "slt")

    def __le__(self, other: IndexLike) -> Scalar:
        return self._compare(other, "sle")

    def __gt__(self, other: IndexLike) -> Scalar:
        return self._compare(other, "sgt")

    def __ge__(self, other: IndexLike) -> Scalar:
        return self._compare(other, "sge")

    def __eq__(self, other: object) -> Scalar:  # type: ignore[override]
        return self._compare(other, "eq")  # type: ignore[arg-type]

    def __ne__(self, other: object) -> Scalar:  # type: ignore[override]
        return self._compare(other, "ne")  # type: ignore[arg-type]

    __hash__ = object.__hash__

    def __and__(self, other: Scalar) -> Scalar:
        return Scalar(_emit(arith.AndIOp(condition_value(self), condition_value(other))).results[0])

    def __or__(self, other: Scalar) -> Scalar:
        return Scalar(_emit(arith.OrIOp(condition_value(self), condition_value(other))).results[0])

    # -- what a traced value cannot do --------------------------------------------------------
    def __bool__(self) -> bool:
        raise TraceError(
            "a value computed on the GPU has no Python truth value while tracing; branch on it "
            "with `with asyncdsl.when(condition):`",
            user_location(),
        )

    def __iter__(self):
        raise TraceError(
            "a value computed on the GPU cannot be iterated while tracing; loop on the GPU with "
            "`for i in asyncdsl.range(n):` (or over a Python range to unroll)",
            user_location(),
        )

    def __index__(self) -> int:
        raise TraceError(
            "a value computed on the GPU cannot be used as a Python int (shape, range bound or "
            "list index); use asyncdsl.range(...) for loops and .at[asyncdsl.ds(start, size)] for "
            "slices",
            user_location(),
        )

    def __repr__(self) -> str:
        return f"Scalar({self.value.type})"


def _emit(op):
    return tracing.current("arithmetic on traced values").emit(op)


def _check_divisor(divisor: IndexLike) -> None:
    if isinstance(divisor, int) and divisor == 0:
        raise TraceError("division by zero in index arithmetic", user_location())


def index_value(value: IndexLike) -> SSAValue:
    """The IR value of an index: a traced scalar's own value or a constant for a Python int."""
    if isinstance(value, Scalar):
        if value.is_condition:
            raise TraceError("a condition (comparison result) cannot be used as an index", user_location())
        return value.value
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(
            f"expected an integer or a traced index, got {type(value).__name__} {value!r}",
            user_location(),
        )
    return tracing.current("index arithmetic").constant(value)


def condition_value(value: Scalar | bool) -> SSAValue:
    """The i1 value of a condition."""
    if isinstance(value, Scalar) and value.is_condition:
        return value.value
    if isinstance(value, bool):
        return _emit(arith.ConstantOp.from_int_and_width(int(value), 1)).results[0]
    raise TraceError(
        f"expected a condition (a comparison of traced values), got {value!r}", user_location()
    )


def is_index(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, Scalar) and isinstance(value.value.type, IndexType)
    )
