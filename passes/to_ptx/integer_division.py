"""Integer division in PTX, by what the divisor is: Python's floor division of int32 values
(index arithmetic and int32 tiles), and unsigned quotients and remainders of non-negative values
by constants (addresses, copy chunks).

No `div` by a constant is emitted: ptxas expands one into the general reciprocal sequence even
when the divisor is an immediate (docs/hardware.md §19), so a constant divisor is a shift, or a
multiply-high and a shift (`reciprocal_multiplier`), with any sign folded around an unsigned
quotient.  A divisor known only at run time takes `div.s32` and `rem.s32`.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from asyncdsl.passes.to_ptx.builder import PtxBuilder


def floor_quotient(b: PtxBuilder, dividend: SSAValue, divisor: SSAValue | int) -> SSAValue:
    """Python's floor division of 32-bit integers: PTX's `div.s32` truncates, so the quotient
    steps down once where the remainder is nonzero and its sign is not the divisor's.  Index
    arithmetic (`scalars.py`) and int32 tiles share it."""
    quotient = b.emit("div.s32 {}, {}, {};", "b32", dividend, divisor)
    remainder = b.emit("rem.s32 {}, {}, {};", "b32", dividend, divisor)
    inexact = b.emit("setp.ne.s32 {}, {}, 0;", "pred", remainder)
    signs = b.emit("xor.b32 {}, {}, {};", "b32", remainder, divisor)
    opposite = b.emit("setp.lt.s32 {}, {}, 0;", "pred", signs)
    adjust = b.emit("and.pred {}, {}, {};", "pred", inexact, opposite)
    step = b.emit("selp.s32 {}, 1, 0, {};", "b32", adjust)
    return b.emit("sub.s32 {}, {}, {};", "b32", quotient, step)


def floor_quotient_by(b: PtxBuilder, dividend: SSAValue, divisor: int) -> SSAValue:
    """Python's floor division by a nonzero constant, without the signed division and its fix-up
    (about twenty instructions an element from ptxas, and a large tile of them spilled): an
    unsigned quotient of a magnitude of at most 2^31 (`unsigned_quotient`), the sign folded
    around it.
    A positive power of two is an arithmetic shift right.  Another d > 0: with s the dividend's
    sign spread over its bits, floor(a / d) = s ^ ((a ^ s) / d), since for a < 0, a ^ s = -a - 1
    >= 0 and floor(a / d) = -(floor((-a - 1) / d) + 1).
    d = -m < 0: floor(a / -m) is ~((a - 1) / m) for a > 0 and (-a) / m for a <= 0; with u all
    ones where a <= 0, both are ~(u ^ (((a - 1) ^ u) / m)), as -a = ~(a - 1).  For a = INT_MIN,
    (a - 1) ^ u is 2^31, exact as an unsigned number."""
    assert divisor != 0
    if divisor > 0 and divisor & (divisor - 1) == 0:
        return b.emit("shr.s32 {}, {}, {};", "b32", dividend, divisor.bit_length() - 1)
    if divisor > 0:
        sign = b.emit("shr.s32 {}, {}, 31;", "b32", dividend)
        magnitude = b.emit("xor.b32 {}, {}, {};", "b32", dividend, sign)
        return b.emit("xor.b32 {}, {}, {};", "b32", unsigned_quotient(b, magnitude, divisor), sign)
    not_positive = b.emit("set.le.s32.s32 {}, {}, 0;", "b32", dividend)
    less_one = b.emit("add.s32 {}, {}, -1;", "b32", dividend)
    magnitude = b.emit("xor.b32 {}, {}, {};", "b32", less_one, not_positive)
    flipped = b.emit("xor.b32 {}, {}, {};", "b32", unsigned_quotient(b, magnitude, -divisor), not_positive)
    return b.emit("not.b32 {}, {};", "b32", flipped)


def unsigned_quotient(b: PtxBuilder, dividend: SSAValue, divisor: int) -> SSAValue:
    """dividend // divisor for a dividend in 0 .. 2^31 and a constant divisor in 1 .. 2^31: a shift
    for a power of two, else a multiply-high and a shift (`reciprocal_multiplier`).  ptxas
    expands `div.u32` by a constant into the general reciprocal sequence, seven instructions an
    element (docs/hardware.md §19); this takes two."""
    if divisor & (divisor - 1) == 0:
        shift = divisor.bit_length() - 1
        return b.emit("shr.u32 {}, {}, {};", "b32", dividend, shift) if shift else dividend
    multiplier, shift = reciprocal_multiplier(divisor)
    high = b.emit("mul.hi.u32 {}, {}, {};", "b32", dividend, multiplier)
    return b.emit("shr.u32 {}, {}, {};", "b32", high, shift)


def reciprocal_multiplier(divisor: int) -> tuple[int, int]:
    """(M, s) with n // divisor == ((n * M) >> 32) >> s for every n in 0 .. 2^31, for a divisor
    in 3 .. 2^31 - 1 that is no power of two.  With l = ceil(log2 divisor), M = ceil(2^(31+l) /
    divisor) = (2^(31+l) + e) / divisor, e < divisor <= 2^l: n·M / 2^(31+l) exceeds n / divisor
    by n·e / (divisor·2^(31+l)) < 1 / divisor, too little to reach the next integer; and
    divisor > 2^(l-1) keeps M below 2^32."""
    l = (divisor - 1).bit_length()
    return -(-(1 << (31 + l)) // divisor), l - 1


def unsigned_remainder(
    b: PtxBuilder, dividend: SSAValue, divisor: int, quotient: SSAValue | None = None
) -> SSAValue:
    """dividend % divisor, for the same dividends and divisors as `unsigned_quotient`: a mask for a
    power of two, else dividend - quotient * divisor (one `mad`; the quotient as given, when the
    caller has it)."""
    if divisor & (divisor - 1) == 0:
        return b.emit("and.b32 {}, {}, {};", "b32", dividend, divisor - 1)
    if quotient is None:
        quotient = unsigned_quotient(b, dividend, divisor)
    return b.emit("mad.lo.s32 {}, {}, {}, {};", "b32", quotient, -divisor, dividend)
