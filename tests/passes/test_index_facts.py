"""The lower-bound analysis of traced indices (`passes/resolve/index_facts.known_lower_bound`):
on random arithmetic over program ids, loop counters and runtime ints, every value the
expression takes (evaluated with the kernel's semantics: `//` floors, `arith.divsi` truncates)
is at least the bound the analysis proves; and what the PTX lowering makes of a ring's slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, i1
from xdsl.ir import Block, SSAValue

import asyncdsl as ad
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.passes.resolve.index_facts import known_lower_bound, known_non_negative


@dataclass
class Traced:
    """An SSA value and, for each sample of the leaves, the value it takes."""

    value: SSAValue
    samples: list[int]


SAMPLES = 12
# The first sample takes every id and counter at its least value (program id 0, a loop's first
# trip), where a bound proved too high shows; the others are random.


def _constant(n: int) -> Traced:
    return Traced(arith.ConstantOp.from_int_and_width(n, IndexType()).result, [n] * SAMPLES)


@st.composite
def leaves(draw) -> Traced:
    kind = draw(st.sampled_from(["constant", "program_id", "loop", "runtime"]))
    if kind == "constant":
        return _constant(draw(st.integers(-20, 20)))
    if kind == "program_id":
        return Traced(ir.ProgramIdOp(0).result, [0, *draw(st.lists(st.integers(0, 500), min_size=SAMPLES - 1,
                                                                       max_size=SAMPLES - 1))])
    if kind == "runtime":  # a value the analysis knows nothing of (a runtime int may be negative)
        block = Block(arg_types=[IndexType()])
        return Traced(block.args[0],
                      draw(st.lists(st.integers(-500, 500), min_size=SAMPLES, max_size=SAMPLES)))
    # A counter of `for j in range(lb, ub, step)`: lb, lb + step, ...
    lb = draw(leaves())
    step = draw(st.integers(1, 4))
    block = Block(arg_types=[IndexType()])
    scf.ForOp(lb.value, _constant(100).value, _constant(step).value, [], block)
    trips = [0, *draw(st.lists(st.integers(0, 30), min_size=SAMPLES - 1, max_size=SAMPLES - 1))]
    return Traced(block.args[0], [start + k * step for start, k in zip(lb.samples, trips)])


def _trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


@st.composite
def expressions(draw, depth: int = 3) -> Traced:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(leaves())
    lhs = draw(expressions(depth - 1))
    kind = draw(st.sampled_from(["add", "sub", "mul", "max", "min", "floordiv", "divsi", "select",
                                 "remainder", "mask"]))
    if kind == "mask":  # `a % 2^k`, as a traced remainder by a power of two records it: a & (2^k - 1)
        mask = 2 ** draw(st.integers(0, 4)) - 1
        return Traced(arith.AndIOp(lhs.value, _constant(mask).value).result, [a & mask for a in lhs.samples])
    if kind in ("floordiv", "divsi", "remainder"):
        c = draw(st.integers(1, 7))
        divisor = _constant(c)
        if kind == "divsi":
            return Traced(arith.DivSIOp(lhs.value, divisor.value).result,
                          [_trunc_div(a, c) for a in lhs.samples])
        quotient = arith.FloorDivSIOp(lhs.value, divisor.value).result
        if kind == "floordiv":
            return Traced(quotient, [a // c for a in lhs.samples])
        # Python's remainder, as a traced `%` records it: a - (a // c) * c
        product = arith.MuliOp(quotient, divisor.value).result
        return Traced(arith.SubiOp(lhs.value, product).result, [a % c for a in lhs.samples])
    # A constant operand half the time: `j - 1`, `i * 64` are what kernels write.
    rhs = _constant(draw(st.integers(-20, 20))) if draw(st.booleans()) else draw(expressions(depth - 1))
    pairs = list(zip(lhs.samples, rhs.samples))
    if kind == "select":
        condition = Block(arg_types=[i1]).args[0]
        picks = draw(st.lists(st.booleans(), min_size=SAMPLES, max_size=SAMPLES))
        return Traced(arith.SelectOp(condition, lhs.value, rhs.value).result,
                      [a if pick else b for (a, b), pick in zip(pairs, picks)])
    op, evaluate = {
        "add": (arith.AddiOp, lambda a, b: a + b),
        "sub": (arith.SubiOp, lambda a, b: a - b),
        "mul": (arith.MuliOp, lambda a, b: a * b),
        "max": (arith.MaxSIOp, max),
        "min": (arith.MinSIOp, min),
    }[kind]
    return Traced(op(lhs.value, rhs.value).result, [evaluate(a, b) for a, b in pairs])


@settings(max_examples=examples(400), deadline=None)
@given(expressions())
def test_every_value_is_at_least_the_proved_bound(expression):
    bound = known_lower_bound(expression.value)
    if bound is not None:
        assert min(expression.samples) >= bound
    assert known_non_negative(expression.value) == (bound is not None and bound >= 0)


def test_what_the_bound_proves_of_the_usual_indices():
    program = ir.ProgramIdOp(0).result
    block = Block(arg_types=[IndexType()])
    scf.ForOp(arith.MaxSIOp(program, _constant(1).value).result, _constant(9).value,
              _constant(1).value, [], block)
    j = block.args[0]
    assert known_lower_bound(j) == 1  # for j in range(first.max(1), n)
    assert known_lower_bound(arith.SubiOp(j, _constant(1).value).result) == 0  # j - 1
    assert known_lower_bound(arith.SubiOp(j, _constant(2).value).result) == -1  # j - 2 may be negative
    assert known_lower_bound(arith.SubiOp(_constant(0).value, j).result) is None  # nothing above j is known


@ad.kernel(grid=(1,), block=128)
def _ring_slots(x, n: int):
    slots = ad.smem((3, 64), ad.float32)
    landed = ad.barrier(num=3)
    for j in ad.range(1, n):
        ad.async_copy(x.at[ad.ds(0, 64)], slots.at[(j - 1) % 3], barrier=landed[(j - 1) % 3])
        landed[(j - 1) % 3].wait()


def test_a_slot_of_a_counted_ring_is_an_unsigned_remainder(ptxas):
    """`(j - 1) % 3` with j counting up from 1: no sign fix-up in the PTX (an unsigned quotient,
    by multiply-high and shift), and ptxas takes it."""
    ptx = _ring_slots.ptx(ad.ArraySpec((64,), ad.float32), 5)
    assert "mul.hi.u32" in ptx and "shr.s32" not in ptx and "div." not in ptx and "rem." not in ptx
    ptxas(ptx)
