"""Traced scalars: values computed on the GPU, uniform across a warpgroup.

A `Scalar` is an index (or, as a condition, an i1); a `FloatScalar` a float32 (a kernel's `float`
argument, and arithmetic on it).  Arithmetic on them records `arith` ops; arithmetic on Python
numbers stays in Python, so `i * 64 + 1` with a Python `i` costs nothing at run time.  Python
semantics are kept: `//` floors and `%` takes the sign of the divisor, on the GPU and in the
interpreter alike; `/`, and an index combined with a float, give a float (float32 throughout, as
on the GPU: Python floats meeting a traced value are rounded to float32).  Operands of other types
are left to their own operators, so `n * tile` is the register tile's `tile.__rmul__(n)`.
"""

from __future__ import annotations

import functools
from typing import TypeGuard, Union

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerType, f32, i32
from xdsl.ir import BlockArgument, SSAValue

from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.ir_utils import index_binary
from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.kernel_binary import INT32_MAX, INT32_MIN

IndexLike = Union[int, "Scalar"]
FloatLike = Union[int, float, "Scalar", "FloatScalar"]

_FLOAT_AS_INDEX = (
    "a traced float cannot be used as an integer or an index (a slice start, a loop bound, a shape); "
    "pass the value as an int argument"
)


def _promoting(method):
    """A `Scalar` operator that Python would compute in floats when the other operand is a float
    (do it in float32), and that leaves operands it does not know to their own operators."""
    name = method.__name__

    @functools.wraps(method)
    def operator(self: Scalar, other):
        if isinstance(other, (float, FloatScalar)):
            return getattr(FloatScalar.of(self), name)(other)
        if not isinstance(other, (int, Scalar)):
            return NotImplemented
        return method(self, other)

    return operator


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
        lhs, rhs = index_value(self), int32_index(other)
        if reverse:
            lhs, rhs = rhs, lhs
        tracer = tracing.current("arithmetic on traced values")
        op = tracer.emit_valid(index_binary(op_class, lhs, rhs))  # both indices
        return Scalar(op.results[0])

    @_promoting
    def __add__(self, other: IndexLike) -> Scalar:
        if isinstance(other, int) and other == 0:
            return self
        return self._binary(other, arith.AddiOp)

    @_promoting
    def __radd__(self, other: IndexLike) -> Scalar:
        return self.__add__(other)

    @_promoting
    def __sub__(self, other: IndexLike) -> Scalar:
        if isinstance(other, int) and other == 0:
            return self
        return self._binary(other, arith.SubiOp)

    @_promoting
    def __rsub__(self, other: IndexLike) -> Scalar:
        return self._binary(other, arith.SubiOp, reverse=True)

    @_promoting
    def __mul__(self, other: IndexLike) -> Scalar | FoldedIndex:
        if isinstance(other, int):
            if other == 1:
                return self
            if other == 0:
                return FoldedIndex(0)
        return self._binary(other, arith.MuliOp)

    @_promoting
    def __rmul__(self, other: IndexLike) -> Scalar | FoldedIndex:
        return self.__mul__(other)

    def __truediv__(self, other: FloatLike) -> FloatScalar:
        return FloatScalar.of(self) / other

    def __rtruediv__(self, other: FloatLike) -> FloatScalar:
        return other / FloatScalar.of(self)

    def __floordiv__(self, other: IndexLike) -> Scalar:
        if not isinstance(other, (int, float, Scalar, FloatScalar)):
            return NotImplemented  # a register tile's own operator takes it
        if isinstance(other, int) and other == 1:
            return self
        check_divisor(other)
        return self._binary(other, arith.FloorDivSIOp)

    def __rfloordiv__(self, other: IndexLike) -> Scalar:
        return self._binary(other, arith.FloorDivSIOp, reverse=True)

    def __mod__(self, other: IndexLike) -> Scalar | int:
        if not isinstance(other, (int, float, Scalar, FloatScalar)):
            return NotImplemented
        if isinstance(other, int) and other == 1:
            return 0
        check_divisor(other)
        if is_power_of_two(other) and other <= 2**31:  # (a larger one is refused below, as given)
            # The low k bits are the remainder by 2^k in two's complement, negatives too
            # (-5 % 8 == 3 == -5 & 7): a ring's slot `j % 4` is one `and`.
            return self._binary(other - 1, arith.AndIOp)
        # Python's modulo: a - (a // b) * b keeps the divisor's sign, unlike arith.remsi.
        return self - (self // other) * other

    def __rmod__(self, other: IndexLike) -> Scalar | int:
        return Scalar(int32_index(other)) % self

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
        return Scalar(_emit(arith.CmpiOp(index_value(self), int32_index(other), predicate)).results[0])

    @_promoting
    def __lt__(self, other: IndexLike) -> Scalar:
        return self._compare(other, "slt")

    @_promoting
    def __le__(self, other: IndexLike) -> Scalar:
        return self._compare(other, "sle")

    @_promoting
    def __gt__(self, other: IndexLike) -> Scalar:
        return self._compare(other, "sgt")

    @_promoting
    def __ge__(self, other: IndexLike) -> Scalar:
        return self._compare(other, "sge")

    @_promoting
    def __eq__(self, other: object) -> Scalar:  # type: ignore[override]
        return self._compare(other, "eq")  # type: ignore[arg-type]

    @_promoting
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
        name = argument_name(self.value)
        if name is not None:
            raise TraceError(
                f"argument {name!r} is a runtime int of the kernel (a kernel parameter, unknown while "
                f"tracing) and cannot be used as a Python int (shape, range bound or list index); "
                f"annotate it `{name}: asyncdsl.constexpr` to compile with its value",
                user_location(),
            )
        raise TraceError(
            "a value computed on the GPU cannot be used as a Python int (shape, range bound or "
            "list index); use asyncdsl.range(...) for loops and .at[asyncdsl.ds(start, size)] for "
            "slices",
            user_location(),
        )

    def __repr__(self) -> str:
        return _described("Scalar", self.value)


class FloatScalar:
    """A float32 value recorded in the kernel's IR: a kernel's `float` argument, or arithmetic on
    one.  It combines with Python numbers, traced indices and register tiles; comparisons give
    conditions (NaN compares unequal to everything, as in Python)."""

    __slots__ = ("value",)

    def __init__(self, value: SSAValue):
        self.value = value

    @staticmethod
    def of(value: FloatLike) -> FloatScalar:
        """`value` (a Python number, a traced index or float) as a traced float32."""
        return value if isinstance(value, FloatScalar) else FloatScalar(float_value(value))

    # -- arithmetic: IEEE float32, rounded to nearest even, one op at a time ---------------------
    def _binary(self, other: FloatLike, op_class, reverse: bool = False):
        if not isinstance(other, (int, float, Scalar, FloatScalar)):
            return NotImplemented
        lhs, rhs = self.value, float_value(other)
        if reverse:
            lhs, rhs = rhs, lhs
        return FloatScalar(_emit(op_class(lhs, rhs)).results[0])

    def __add__(self, other: FloatLike) -> FloatScalar:
        return self._binary(other, arith.AddfOp)

    def __radd__(self, other: FloatLike) -> FloatScalar:
        return self._binary(other, arith.AddfOp, reverse=True)

    def __sub__(self, other: FloatLike) -> FloatScalar:
        return self._binary(other, arith.SubfOp)

    def __rsub__(self, other: FloatLike) -> FloatScalar:
        return self._binary(other, arith.SubfOp, reverse=True)

    def __mul__(self, other: FloatLike) -> FloatScalar:
        return self._binary(other, arith.MulfOp)

    def __rmul__(self, other: FloatLike) -> FloatScalar:
        return self._binary(other, arith.MulfOp, reverse=True)

    def __truediv__(self, other: FloatLike) -> FloatScalar:
        return self._binary(other, arith.DivfOp)

    def __rtruediv__(self, other: FloatLike) -> FloatScalar:
        return self._binary(other, arith.DivfOp, reverse=True)

    def __neg__(self) -> FloatScalar:
        return FloatScalar(_emit(arith.NegfOp(self.value)).results[0])

    def __pos__(self) -> FloatScalar:
        return self

    def __floordiv__(self, other: object):
        raise TraceError("// and % are index arithmetic; a traced float has neither", user_location())

    __rfloordiv__ = __mod__ = __rmod__ = __floordiv__

    # -- comparisons produce conditions: ordered, but != is true for NaN (Python's rules) ---------
    def _compare(self, other: FloatLike, predicate: str):
        if not isinstance(other, (int, float, Scalar, FloatScalar)):
            return NotImplemented
        return Scalar(_emit(arith.CmpfOp(self.value, float_value(other), predicate)).results[0])

    def __lt__(self, other: FloatLike) -> Scalar:
        return self._compare(other, "olt")

    def __le__(self, other: FloatLike) -> Scalar:
        return self._compare(other, "ole")

    def __gt__(self, other: FloatLike) -> Scalar:
        return self._compare(other, "ogt")

    def __ge__(self, other: FloatLike) -> Scalar:
        return self._compare(other, "oge")

    def __eq__(self, other: object) -> Scalar:  # type: ignore[override]
        return self._compare(other, "oeq")  # type: ignore[arg-type]

    def __ne__(self, other: object) -> Scalar:  # type: ignore[override]
        return self._compare(other, "une")  # type: ignore[arg-type]

    __hash__ = object.__hash__

    # -- what a traced float cannot do ------------------------------------------------------------
    def __bool__(self) -> bool:
        raise TraceError(
            "a float computed on the GPU has no Python truth value while tracing; branch on a "
            "comparison with `with asyncdsl.when(x > 0.5):`",
            user_location(),
        )

    def __float__(self) -> float:
        raise TraceError(
            "a float computed on the GPU has no Python value while tracing; annotate the kernel "
            "argument `asyncdsl.constexpr` to compile with its value",
            user_location(),
        )

    def __index__(self) -> int:
        raise TraceError(_FLOAT_AS_INDEX, user_location())

    __int__ = __index__

    def __repr__(self) -> str:
        return _described("FloatScalar", self.value)


def argument_name(value: SSAValue) -> str | None:
    """The name of the kernel argument `value` is, if it is one."""
    if isinstance(value, BlockArgument):
        owner = value.block.parent_op()
        if isinstance(owner, func.FuncOp):
            names = attrs.arg_names(owner)
            return names[value.index] if value.index < len(names) else None
    return None


def _described(kind: str, value: SSAValue) -> str:
    name = argument_name(value)
    return f"{kind}({value.type}, argument {name!r})" if name is not None else f"{kind}({value.type})"


def _emit(op):
    return tracing.current("arithmetic on traced values").emit(op)


def is_power_of_two(value) -> bool:
    """Whether `value` is a Python int 2^k, k >= 0 (a constant a remainder by is a mask)."""
    return is_int(value) and value > 0 and value & (value - 1) == 0


def check_divisor(divisor, where: str = "index arithmetic") -> None:
    """A divisor known to be 0 while tracing is refused at the line (on the GPU the quotient
    would be undefined)."""
    if isinstance(divisor, int) and divisor == 0:
        raise TraceError(f"division by zero in {where}", user_location())


def _folded(method: str):
    """`int`'s `method`, its result a FoldedIndex again."""

    def operation(self, *other):
        result = getattr(int, method)(self, *other)
        return result if result is NotImplemented else FoldedIndex(result)
    return operation


class FoldedIndex(int):
    """A traced index the frontend computed while tracing (`i * 0`, and int arithmetic on that):
    an int for every purpose but one, that it stays a traced index's meaning, a TMA coordinate,
    where a literal integer index counts from the end as numpy's (`refs.parse_indices`)."""

    __add__ = _folded("__add__")
    __radd__ = _folded("__radd__")
    __sub__ = _folded("__sub__")
    __rsub__ = _folded("__rsub__")
    __mul__ = _folded("__mul__")
    __rmul__ = _folded("__rmul__")
    __floordiv__ = _folded("__floordiv__")
    __rfloordiv__ = _folded("__rfloordiv__")
    __mod__ = _folded("__mod__")
    __rmod__ = _folded("__rmod__")
    __neg__ = _folded("__neg__")
    __pos__ = _folded("__pos__")


def int32_index(value: IndexLike) -> SSAValue:
    """The IR value of an index that is signed 32-bit on the GPU and in the interpreter alike (an
    operand of traced index arithmetic, a loop bound, a register-tile window's start, a signal
    cell): a Python int that does not fit would wrap silently, so it is refused.  (Copies check
    their own starts: a bulk copy's is a 64-bit address offset, TMA's a 32-bit coordinate.)"""
    if is_int(value) and not INT32_MIN <= value <= INT32_MAX:
        raise TraceError(
            f"{value} does not fit traced index arithmetic, which is signed 32-bit as on the GPU "
            f"({INT32_MIN} .. {INT32_MAX})",
            user_location(),
        )
    return index_value(value)


def index_value(value: IndexLike) -> SSAValue:
    """The IR value of an index: a traced scalar's own value or a constant for a Python int."""
    if isinstance(value, FloatScalar):
        raise TraceError(_FLOAT_AS_INDEX, user_location())
    if isinstance(value, Scalar):
        if value.is_condition:
            raise TraceError("a condition (comparison result) cannot be used as an index", user_location())
        return value.value
    if not is_int(value):
        raise TraceError(
            f"expected an integer or a traced index, got {type(value).__name__} {value!r}",
            user_location(),
        )
    return tracing.current("index arithmetic").constant(int(value))  # a FoldedIndex is an int in the IR


def float_value(value: FloatLike) -> SSAValue:
    """The float32 IR value of a number: a traced float's own, a traced index converted, or a
    constant for a Python number (rounded to float32)."""
    if isinstance(value, FloatScalar):
        return value.value
    tracer = tracing.current("float arithmetic")
    if isinstance(value, Scalar):
        as_int = tracer.emit(arith.IndexCastOp(index_value(value), i32)).results[0]
        return tracer.emit(arith.SIToFPOp(as_int, f32)).results[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceError(f"expected a number or a traced value, got {type(value).__name__} {value!r}",
                         user_location())
    return tracer.emit(arith.ConstantOp(FloatAttr(float(value), f32))).results[0]


def condition_value(value: Scalar | bool) -> SSAValue:
    """The i1 value of a condition."""
    if isinstance(value, Scalar) and value.is_condition:
        return value.value
    if isinstance(value, bool):
        return _emit(arith.ConstantOp.from_int_and_width(int(value), 1)).results[0]
    raise TraceError(
        f"expected a condition (a comparison of traced values), got {value!r}", user_location()
    )


def is_index(value: object) -> TypeGuard[IndexLike]:
    return is_int(value) or (
        isinstance(value, Scalar) and isinstance(value.value.type, IndexType)
    )
