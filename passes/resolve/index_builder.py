"""Index arithmetic emitted as IR right before an op, for coordinates computed from traced starts."""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from asyncdsl.dialects.ir_utils import constant_value, index_constant
from asyncdsl.passes.resolve.index_facts import known_divisor, known_non_negative


class IndexBuilder:
    """Index arithmetic emitted as `arith` ops right before one op, for traced coordinates.

    Supports what the transform algebra uses (`+ - * // %` with ints and each other); plain ints
    never reach it, so constant parts fold in Python.
    """

    def __init__(self, anchor: Operation):
        self._anchor = anchor
        # What the index analyses found, shared by the queries on this op's indices: they mostly
        # ask about the same arithmetic.
        self.divisors: dict[SSAValue, int] = {}
        self.lower_bounds: dict[SSAValue, int | None] = {}

    def wrap(self, value: SSAValue | int):
        return value if isinstance(value, int) else _IrIndex(value, self)

    def emit(self, op: Operation) -> SSAValue:
        op.location = self._anchor.location
        Rewriter.insert_op(op, InsertPoint.before(self._anchor))
        return op.results[0]

    def value(self, index) -> SSAValue:
        if isinstance(index, _IrIndex):
            return index.value
        return self.emit(index_constant(int(index)))


class _IrIndex:
    __slots__ = ("value", "builder")

    def __init__(self, value: SSAValue, builder: IndexBuilder):
        self.value = value
        self.builder = builder

    @property
    def known_divisor(self) -> int:
        """What the planners may assume of this traced index (`hw.transforms.divisor_of`)."""
        return known_divisor(self.value, self.builder.divisors)

    @property
    def known_non_negative(self) -> bool:
        return known_non_negative(self.value, self.builder.lower_bounds)

    def _binary(self, other, op_class, reverse: bool = False):
        lhs, rhs = self.value, self.builder.value(other)
        if reverse:
            lhs, rhs = rhs, lhs
        return _IrIndex(self.builder.emit(op_class(lhs, rhs)), self.builder)

    def __add__(self, other):
        return self if isinstance(other, int) and other == 0 else self._binary(other, arith.AddiOp)

    __radd__ = __add__

    def __sub__(self, other):
        return self if isinstance(other, int) and other == 0 else self._binary(other, arith.SubiOp)

    def __rsub__(self, other):
        return self._binary(other, arith.SubiOp, reverse=True)

    def __mul__(self, other):
        return self if isinstance(other, int) and other == 1 else self._binary(other, arith.MuliOp)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return self._binary(other, arith.FloorDivSIOp)

    def __mod__(self, other):
        return self - (self // other) * other


def slice_entries(starts, sizes, builder: IndexBuilder) -> list:
    """The GMEM slice of a copy op as the copy planners take it: per dim an index (squeezed,
    size -1) or a window `(start, size)`; constant starts as ints, traced ones wrapped."""
    entries = []
    for start, size in zip(starts, sizes):
        known = constant_value(start)
        index = known if known is not None else builder.wrap(start)
        entries.append(index if size == -1 else (index, size))
    return entries


def traced_starts(starts, builder: IndexBuilder) -> list:
    """Slice starts as index arithmetic can use them: ints where constant, traced ones wrapped."""
    return [known if (known := constant_value(start)) is not None else builder.wrap(start)
            for start in starts]


def static_starts(starts) -> list:
    """Slice starts as the planners of copies without a tensor map take them: ints where
    constant, the traced SSA values (only their presence matters) otherwise."""
    return [known if (known := constant_value(start)) is not None else start for start in starts]
