"""Run-time checks of what a copy needs of its traced indices and the compiler cannot prove.

Each check is an `asyncdsl.check` of a condition built in IR right before the copy; its result is
the condition, which the copy uses as a guard (a store skipped, a window moved to the array's
start) so that a broken assumption reports an error instead of faulting the GPU.  The interpreter
always evaluates checks; the GPU does under ASYNCDSL_DEBUG=1 and otherwise folds them away.
What the compiler proves of an index (`index_facts.py`) needs no check.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.ir import SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects.ir_utils import constant_value
from asyncdsl.hw import gmem_runs
from asyncdsl.hw.transforms import Index, divisor_of
from asyncdsl.passes.resolve.index_builder import IndexBuilder


def _compare(builder: IndexBuilder, index: Index, predicate: str, bound: int) -> SSAValue:
    return builder.emit(arith.CmpiOp(builder.value(index), builder.value(bound), predicate))


class Conditions:
    """The conditions one copy's checks accumulate, emitted before `builder`'s anchor."""

    def __init__(self, builder: IndexBuilder):
        self._builder = builder
        self._checks: list[SSAValue] = []

    def require(self, conditions: Sequence[SSAValue], message: str, values: Sequence[Index] = ()) -> None:
        """One check: every condition of `conditions` holds (`message` says what breaks if not,
        and a failure reports the traced `values` it is about)."""
        if not conditions:
            return
        combined = conditions[0]
        for condition in conditions[1:]:
            combined = self._builder.emit(arith.AndIOp(combined, condition))
        reported = [self._builder.value(value) for value in values if type(value) is not int]
        self._checks.append(self._builder.emit(ir.CheckOp(combined, message, reported)))

    def at_least(self, index: Index, bound: int) -> list[SSAValue]:
        """`index >= bound` where it is traced, unless proved (`bound` 0 and the index provably
        not negative); a static index needs no run-time check."""
        if type(index) is int or (bound == 0 and index.known_non_negative):
            return []
        return [_compare(self._builder, index, "sge", bound)]

    def below(self, index: Index, bound: int) -> list[SSAValue]:
        return [] if type(index) is int else [_compare(self._builder, index, "slt", bound)]

    def multiple(self, index: Index, divisor: int) -> list[SSAValue]:
        """`index % divisor == 0` unless it is proved (`known_divisor`)."""
        if divisor_of(index) % divisor == 0:
            return []
        remainder = self._builder.wrap(self._builder.value(index)) % divisor
        return [_compare(self._builder, remainder, "eq", 0)]

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
            start if constant_value(start) is not None else self._builder.emit(arith.SelectOp(guard, start, zero))
            for start in starts
        ]


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
