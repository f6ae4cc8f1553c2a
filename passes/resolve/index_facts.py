"""What the compiler can prove about a traced index, read from the arithmetic that computed it:
the largest number it is a multiple of (`known_divisor`), and whether it cannot be negative
(`known_non_negative`, from `known_lower_bound`).

    pid * 64 + 128          -> 64        (a multiple of 64 plus a multiple of 128)
    pid * 64 + 1            -> 1
    (pid * 64) // 8         -> 8
    multiple_of(off, 64)    -> 64        (the user's hint, checked at run time)
    for i in range(0, n, 16): i -> 16
    n * 4                   -> 64        (n a runtime int argument whose value was a multiple of 16)

`known_divisor` returns 0 for the constant 0 (a multiple of everything): gcd and lcm treat it so.
Everything it does not understand (a program id, a loop bound, a value from memory) is a multiple
of 1 only.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Block, BlockArgument, SSAValue

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.dialects import kernel_attrs as attrs


def known_divisor(value: SSAValue, seen: dict[SSAValue, int] | None = None) -> int:
    """The largest d this analysis proves `value` a multiple of (0: `value` is the constant 0).
    `seen` holds what earlier queries found, to share among queries on the same IR (what a
    value was computed from never changes once it is built)."""
    return _divisor(value, {} if seen is None else seen)


def _divisor(value: SSAValue, seen: dict[SSAValue, int]) -> int:
    if value in seen:
        return seen[value]
    seen[value] = 1  # a value defined through itself (a loop) proves nothing more
    seen[value] = result = _compute(value, seen)
    return result


def _compute(value: SSAValue, seen: dict[SSAValue, int]) -> int:
    if isinstance(value, BlockArgument):
        owner = value.block.parent_op()
        if isinstance(owner, func.FuncOp):
            return attrs.arg_divisor(owner, value.index)  # a runtime int, specialized per call
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
    if isinstance(op, arith.AndIOp):
        # `a % 2^k`, traced as `a & (2^k - 1)`: what `a - (a // c) * c`, how any other `a % c`
        # is traced, composes to from the rules above.
        mask = _constant(op.rhs)
        if mask is None or mask < 0 or mask & (mask + 1):
            return 1
        return _remainder_divisor(of(op.lhs), mask + 1)
    return 1


def _remainder_divisor(dividend: int, modulus: int) -> int:
    """What `a % modulus` (modulus > 0) is a multiple of, a a multiple of `dividend`: `dividend`
    itself where the modulus divides it (the remainder is then 0), else their gcd."""
    return dividend if dividend % modulus == 0 else math.gcd(dividend, modulus)


def known_non_negative(value: SSAValue, seen: dict[SSAValue, int | None] | None = None) -> bool:
    """Whether `value` is provably at least 0 (`seen` as for `known_divisor`)."""
    bound = known_lower_bound(value, seen)
    return bound is not None and bound >= 0


def known_lower_bound(value: SSAValue, seen: dict[SSAValue, int | None] | None = None) -> int | None:
    """The least value this analysis proves `value` cannot go below (None: none proved).

        pid, a count, warpgroup_idx()        -> 0
        for j in range(1, n): j - 1          -> 0      (a counter from 1 that only steps up)
        first.max(1)                         -> 1
        x % 3, x % 4                         -> 0      (Python's remainder by a positive constant)
        (j + 5) // 2                         -> 3      (floor quotients of bounded values)

    The slot of a ring, `j % stages`, is then an unsigned remainder (no sign fix-up), which the
    PTX lowering uses (`passes/to_ptx/scalars.py`).
    """
    return _lower_bound(value, {} if seen is None else seen)


_IDS = (ir.ProgramIdOp, ir.NumProgramsOp, ir.ClusterCtaIdOp, ir.ClusterIdOp, ir.WarpgroupIdxOp)


def _lower_bound(value: SSAValue, seen: dict[SSAValue, int | None]) -> int | None:
    if value in seen:
        return seen[value]
    seen[value] = None  # a value defined through itself proves nothing
    seen[value] = bound = _compute_lower_bound(value, seen)
    return bound


def _compute_lower_bound(value: SSAValue, seen: dict[SSAValue, int | None]) -> int | None:
    def of(operand: SSAValue) -> int | None:
        return _lower_bound(operand, seen)

    if isinstance(value, BlockArgument):
        loop = value.block.parent_op()
        # A counter that only steps up never goes below its start.
        if isinstance(loop, scf.ForOp) and value.index == 0 and (_constant(loop.step) or 0) > 0:
            return of(loop.lb)
        return None
    op = value.owner
    constant = _constant(value)
    if constant is not None:
        return constant
    if isinstance(op, _IDS):
        return 0
    if isinstance(op, ir.MultipleOfOp):
        return of(op.value)
    if isinstance(op, arith.AndIOp) and isinstance(op.result.type, IndexType):
        # A mask that cannot be negative clears the sign bit (`j % 4` is traced as `j & 3`).
        masks = [_constant(operand) for operand in (op.lhs, op.rhs)]
        return 0 if any(mask is not None and mask >= 0 for mask in masks) else None
    if isinstance(op, arith.MaxSIOp):
        bounds = [b for b in (of(op.lhs), of(op.rhs)) if b is not None]
        return max(bounds) if bounds else None
    if isinstance(op, arith.SubiOp):
        if _is_python_remainder(op):
            return 0
        lhs, subtrahend = of(op.lhs), _constant(op.rhs)
        return None if lhs is None or subtrahend is None else lhs - subtrahend
    if not isinstance(op, _BINARY):
        return None
    lhs, rhs = of(op.lhs), of(op.rhs)
    if lhs is None or rhs is None:
        return None
    if isinstance(op, arith.AddiOp):
        return lhs + rhs
    if isinstance(op, (arith.MinSIOp, arith.SelectOp)):
        return min(lhs, rhs)
    if isinstance(op, arith.MuliOp):
        return lhs * rhs if lhs >= 0 and rhs >= 0 else None  # the least product of non-negatives
    divisor = _constant(op.rhs)
    if divisor is None or divisor <= 0:
        return None
    if isinstance(op, arith.FloorDivSIOp):
        return lhs // divisor
    return lhs // divisor if lhs >= 0 else -(-lhs // divisor)  # DivSIOp truncates toward zero


_BINARY = (arith.AddiOp, arith.MinSIOp, arith.SelectOp, arith.MuliOp, arith.FloorDivSIOp, arith.DivSIOp)


def _is_python_remainder(op: arith.SubiOp) -> bool:
    """`a - (a // c) * c` with c > 0: how traced `%` is computed, always in [0, c)."""
    product = op.rhs.owner
    if not isinstance(product, arith.MuliOp):
        return False
    quotient, divisor = product.lhs.owner, _constant(product.rhs)
    return (
        isinstance(quotient, arith.FloorDivSIOp)
        and quotient.lhs == op.lhs
        and divisor is not None
        and divisor > 0
        and _constant(quotient.rhs) == divisor
    )


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
