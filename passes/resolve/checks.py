"""Run-time checks of what a copy needs of its traced indices and the compiler cannot prove.

Each check is an `asyncdsl.check` of a condition built in IR right before the copy; its result is
the condition, which the copy uses as a guard (a store skipped, a load's window moved to the
array's start) so that a broken assumption reports an error instead of faulting the GPU or writing
the wrong bytes.  A copy's `predicate=` limits its checks as it limits the copy: where the copy
is skipped anyway, nothing is checked.  The interpreter always evaluates checks; the GPU does under
ASYNCDSL_DEBUG=1 and otherwise folds them away.  What the compiler proves of an index
(`index_facts.py`) needs no check.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, i1
from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.ir_utils import constant_value
from asyncdsl.errors import CopyError
from asyncdsl.hw import gmem_runs
from asyncdsl.hw.bulk import StaticLogic, clamped_store_stays_in_window
from asyncdsl.hw.transforms import Index, divisor_of
from asyncdsl.passes.resolve.index_builder import IndexBuilder

INDEX_BITS = 32
_RELATIONS = StaticLogic.COMPARE


def _compare(builder: IndexBuilder, index: Index, predicate: str, bound: int) -> SSAValue:
    return builder.emit(arith.CmpiOp(builder.value(index), builder.value(bound), predicate))


class Conditions:
    """The conditions one copy's checks accumulate, emitted before `builder`'s anchor; with the
    copy's `predicate`, each holds wherever the predicate does not."""

    def __init__(self, builder: IndexBuilder, predicate: SSAValue | None = None):
        self._builder = builder
        self._predicate = predicate
        self._checks: list[SSAValue] = []

    def require(self, conditions: Sequence[SSAValue], message: str, values: Sequence[Index] = ()) -> None:
        """One check: every condition of `conditions` holds (`message` says what breaks if not,
        and a failure reports the traced `values` it is about)."""
        if not conditions:
            return
        combined = conditions[0]
        for condition in conditions[1:]:
            combined = self._builder.emit(arith.AndIOp(combined, condition))
        if self._predicate is not None:  # a copy its predicate skips needs nothing
            combined = self._builder.emit(arith.SelectOp(self._predicate, combined, self._true()))
        reported = [self._builder.value(value) for value in values if type(value) is not int]
        self._checks.append(self._builder.emit(ir.CheckOp(combined, message, reported)))

    def at_least(self, index: Index, bound: int) -> list[SSAValue]:
        """`index >= bound` where it is traced, unless proved (`bound` 0 and the index provably
        not negative); a static index needs no run-time check."""
        if type(index) is int or (bound == 0 and index.known_non_negative):
            return []
        return self._traced(self.compare(index, ">=", bound))

    def below(self, index: Index, bound: int) -> list[SSAValue]:
        return [] if type(index) is int else self._traced(self.compare(index, "<", bound))

    def _traced(self, condition: bool | SSAValue) -> list[SSAValue]:
        """A condition on a traced index as `require` takes it (one that its range decides
        becomes nothing to check, or a constant failure)."""
        if condition is True:
            return []
        if condition is False:
            return [self._builder.emit(arith.ConstantOp(IntegerAttr(0, i1)))]
        return [condition]

    def multiple(self, index: Index, divisor: int) -> list[SSAValue]:
        """`index % divisor == 0` unless it is proved (`known_divisor`)."""
        if divisor_of(index) % divisor == 0:
            return []
        remainder = self._builder.wrap(self._builder.value(index)) % divisor
        return [_compare(self._builder, remainder, "eq", 0)]

    def _true(self) -> SSAValue:
        return self._builder.emit(arith.ConstantOp(IntegerAttr(1, i1)))

    index_bits = INDEX_BITS  # traced indices are signed 32-bit, on the GPU and in the interpreter

    def compare(self, index: Index, relation: str, bound: int) -> bool | SSAValue:
        """`index <relation> bound`: a bool for a static index, or for a bound outside the
        range of a traced one (which decides it), else the comparison in IR."""
        if type(index) is int:
            return _RELATIONS[relation](index, bound)
        low, high = -(1 << (INDEX_BITS - 1)), (1 << (INDEX_BITS - 1)) - 1
        if not low <= bound <= high:
            return _RELATIONS[relation](low if bound > high else high, bound)
        predicate = {"<": "slt", "<=": "sle", ">=": "sge", "==": "eq"}[relation]
        return _compare(self._builder, index, predicate, bound)

    def all(self, conditions) -> bool | SSAValue:
        """The conjunction, folded where a part is static."""
        if any(condition is False for condition in conditions):
            return False
        return self._combine([c for c in conditions if c is not True], arith.AndIOp, True)

    def any(self, conditions) -> bool | SSAValue:
        """The disjunction, folded where a part is static."""
        if any(condition is True for condition in conditions):
            return True
        return self._combine([c for c in conditions if c is not False], arith.OrIOp, False)

    def _combine(self, values: list[SSAValue], op_class, empty: bool) -> bool | SSAValue:
        if not values:
            return empty
        combined = values[0]
        for value in values[1:]:
            combined = self._builder.emit(op_class(combined, value))
        return combined

    def guard(self) -> SSAValue | None:
        """All checks together: the condition under which the copy may run as planned."""
        if not self._checks:
            return None
        combined = self._checks[0]
        for check in self._checks[1:]:
            combined = self._builder.emit(arith.AndIOp(combined, check))
        return combined

    def guarded_predicate(self, predicate: SSAValue | None) -> SSAValue | None:
        """The user's predicate narrowed by the checks."""
        guard = self.guard()
        if guard is None or predicate is None:
            return guard or predicate
        return self._builder.emit(arith.AndIOp(predicate, guard))

    def guarded_starts(self, starts: Sequence[SSAValue]) -> list[SSAValue]:
        """The starts, or 0 (the array's first element, always in bounds and aligned) where the
        checks fail, so that a window the GPU would fault on is moved somewhere harmless."""
        guard = self.guard()
        if guard is None:
            return list(starts)
        zero = self._builder.value(0)
        return [
            start if constant_value(start) is not None
            else self._builder.emit(arith.SelectOp(guard, start, zero))
            for start in starts
        ]


def check_smem_alignment(smem: SSAValue, alignment: int, engine: str) -> None:
    """Refuse a copy whose SMEM view lies at a constant offset into its buffer that is not
    `alignment`-aligned (a traced one the interpreter checks)."""
    offset = ir.static_smem_offset(smem)
    if offset is not None and offset % alignment:
        raise CopyError(
            f"{engine} needs its shared-memory address {alignment}-byte aligned, but this view starts "
            f"{offset} bytes into its buffer (the GPU faults with a misaligned address)")


def check_window(
    conditions: Conditions, shape: Sequence[int], dtype, starts: Sequence[Index], sizes: Sequence[int],
    alignment: int, in_bounds: bool, engine: str,
) -> None:
    """What a copy without a tensor map needs of a window with traced starts: its first byte
    `alignment`-aligned, and with `in_bounds` the whole window inside the array (there is no zero
    fill to catch it)."""
    offset = gmem_runs.start_offset_bytes(shape, dtype, starts)
    if type(offset) is not int:
        conditions.require(
            conditions.multiple(offset, alignment),
            f"{engine} needs its GMEM address {alignment}-byte aligned, but the traced start of its "
            "slice puts it elsewhere (the GPU faults with a misaligned address)",
            [start for start in starts if type(start) is not int],
        )
    if not in_bounds:
        return
    for dim, (start, size, extent) in enumerate(zip(starts, sizes, shape)):
        width = 1 if size == gmem_runs.SQUEEZED else size
        conditions.require(
            conditions.at_least(start, 0) + conditions.below(start, extent - width + 1),
            f"{engine} cannot read outside the array, but its traced start along dim {dim} puts the "
            f"window of {width} outside the dim of size {extent}",
            [start],
        )


def check_clamped_store(
    conditions: Conditions, shape: Sequence[int], starts: Sequence[Index], sizes: Sequence[int], engine: str
) -> None:
    """What an oob="undefined" bulk store of a window with traced starts needs: the run of bytes
    it writes, clamped at the array's end, is empty or the window's part inside the array
    (`hw.bulk.clamped_store_stays_in_window`; static windows are checked while compiling)."""
    holds = clamped_store_stays_in_window(shape, starts, sizes, conditions)
    if holds is True:
        return
    assert holds is not False, "a window with a traced start writes at a traced offset"
    conditions.require(
        [holds],
        f"{engine} under oob='undefined' writes its slice's run of bytes up to the array's end, but its "
        "traced start puts the slice outside the array where that run holds other elements: it would "
        "overwrite them, so the store was skipped",
        [start for start in starts if type(start) is not int],
    )
