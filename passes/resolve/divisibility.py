"""What the compiler can prove about a traced index: the largest number it is known to be a
multiple of, read from the arithmetic that computed it.

    pid * 64 + 128          -> 64        (a multiple of 64 plus a multiple of 128)
    pid * 64 + 1            -> 1
    (pid * 64) // 8         -> 8
    multiple_of(off, 64)    -> 64        (the user's hint, checked at run time)
    for i in range(0, n, 16): i -> 16

`known_divisor` returns 0 for the constant 0 (a multiple of everything): gcd and lcm treat it so.
Everything it does not understand (a program id, a loop bound, a value from memory) is a multiple
of 1 only.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Block, BlockArgument, SSAValue

from asyncdsl.dialects import asyncdsl as ir


def known_divisor(value: SSAValue) -> int:
    """The largest d this analysis proves `value` a multiple of (0: `value` is the constant 0)."""
    return _divisor(value, {})


def _divisor(value: SSAValue, seen: dict[SSAValue, int]) -> int:
    if value in seen:
        return seen[value]
    seen[value] = 1  # a value defined through itself (a loop) proves nothing more
    seen[value] = result = _compute(value, seen)
    return result


def _compute(value: SSAValue, seen: dict[SSAValue, int]) -> int:
    if isinstance(value, BlockArgument):
        return _loop_counter(value, seen)
    op = value.owner

    def of(operand: SSAValue) -> int:
        return _divisor(operand, seen)

    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return abs(op.value.value.data)
    if isinstance(op, (arith.AddiOp, arith.SubiOp, arith.MinSIOp, arith.MaxSIOp)):
        return math.gcd(of(op.lhs), of(op.rhs))
    if isinstance(op, arith.SelectOp):
        return math.gcd(of(op.lhs), of(op.rhs))
    if isinstance(op, arith.MuliOp):
        return of(op.lhs) * of(op.rhs)
    if isinstance(op, (arith.FloorDivSIOp, arith.DivSIOp)):
        dividend, divisor = of(op.lhs), _constant(op.rhs)
        if dividend == 0:
            return 0
        return dividend // abs(divisor) if divisor and dividend % divisor == 0 else 1
    if isinstance(op, arith.RemSIOp):
        divisor = _constant(op.rhs)
        return math.gcd(of(op.lhs), abs(divisor)) if divisor else 1
    if isinstance(op, ir.MultipleOfOp):
        return math.lcm(of(op.value), op.divisor.value.data)
    return 1


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _loop_counter(argument: BlockArgument, seen: dict[SSAValue, int]) -> int:
    """An `scf.for` counter runs lb, lb + step, ...: a multiple of gcd(lb, step)."""
    block: Block = argument.block
    loop = block.parent_op()
    if isinstance(loop, scf.ForOp) and argument.index == 0:
        return math.gcd(_divisor(loop.lb, seen), _divisor(loop.step, seen))
    return 1
