"""Python's remainder of a traced index by a power of two, traced as `a & (2^k - 1)` (the low k
bits, in two's complement for negatives too): what the divisibility and lower-bound analyses prove
of it is what they prove of the general `a - (a // c) * c`, and the PTX is one `and`."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block

import asyncdsl as ad
from asyncdsl.passes.resolve.index_facts import known_divisor, known_lower_bound


def _constant(n: int):
    return arith.ConstantOp.from_int_and_width(n, IndexType()).result


def _general_remainder(a, c: int):
    """`a - (a // c) * c`: how a remainder by any other constant is traced."""
    divisor = _constant(c)
    product = arith.MuliOp(arith.FloorDivSIOp(a, divisor).result, divisor).result
    return arith.SubiOp(a, product).result


@given(st.integers(0, 300), st.integers(0, 9), st.integers(-2000, 2000))
def test_a_masked_index_has_the_facts_of_the_general_remainder(multiple, k, sample):
    """For a = runtime * multiple: the mask's divisor and lower bound equal the general form's,
    and the divisor divides the remainder Python computes."""
    runtime = Block(arg_types=[IndexType()]).args[0]
    a = arith.MuliOp(runtime, _constant(multiple)).result
    masked = arith.AndIOp(a, _constant(2**k - 1)).result
    general = _general_remainder(a, 2**k)
    assert known_divisor(masked) == known_divisor(general)
    assert known_lower_bound(masked) == known_lower_bound(general) == 0
    value = (sample * multiple) % 2**k
    assert value == (sample * multiple) & (2**k - 1)
    divisor = known_divisor(masked)
    assert value == 0 if divisor == 0 else value % divisor == 0


@ad.kernel(grid=(4,), block=128)
def _slots_by_mask(x, n: int):
    slots = ad.smem((4, 64), ad.float32)
    landed = ad.barrier(num=4)
    for j in ad.range(n):
        slot = (j + ad.program_id(0) - 2) % 4  # may be negative before the remainder
        ad.async_copy(x.at[ad.ds(0, 64)], slots.at[slot], barrier=landed[slot])
        landed[slot].wait()


def test_a_remainder_by_a_power_of_two_is_one_and(ptxas):
    ptx = _slots_by_mask.ptx(ad.ArraySpec((64,), ad.float32), 5)
    assert "and.b32" in ptx
    for division in ("div.s32", "rem.s32", "div.u32", "shr.s32"):
        assert division not in ptx
    assert "arith.andi" in _slots_by_mask.ir(ad.ArraySpec((64,), ad.float32), 5)
    ptxas(ptx)


@ad.kernel(grid=(1,), block=128)
def _remainder_of_an_index(y, MODULUS: ad.constexpr):
    ad.store(y.at[:], ad.full((128,), 0, ad.int32) + (ad.program_id(0) - 5) % MODULUS)


@pytest.mark.parametrize("modulus", [1, 4, 2**31])
def test_a_remainder_of_a_negative_index_by_a_power_of_two_is_pythons(modulus):
    y = np.zeros(128, np.int32)
    _remainder_of_an_index.interpret(y, MODULUS=modulus)
    assert (y == (-5) % modulus - (2**32 if (-5) % modulus >= 2**31 else 0)).all()


def test_a_power_of_two_past_int32_is_refused_as_written():
    with pytest.raises(ad.TraceError, match="4294967296 does not fit traced index arithmetic"):
        _remainder_of_an_index.interpret(np.zeros(128, np.int32), MODULUS=2**32)
