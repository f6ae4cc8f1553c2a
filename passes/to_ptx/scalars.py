"""Lowering of index arithmetic, conditions and float32 scalars' constants, comparisons and
conversions from ints (`arith`).

Index values live in 32-bit registers as signed integers (coordinates and loop counters on the
GPU are far below 2^31; runtime int arguments are checked to fit at the call); conditions live in
predicate registers; float32 scalars (runtime float arguments and arithmetic on them) in f32
registers.  Their arithmetic is lowered like one element of a register tile (`tile_math.py`:
IEEE `.rn` instructions, no contraction, no flush to zero), as the interpreter computes it.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType

from asyncdsl.passes.resolve.index_facts import known_non_negative
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.integer_division import floor_quotient, floor_quotient_by, unsigned_quotient
from asyncdsl.passes.to_ptx.tile_registers import constant_register

_COMPARE = {
    "eq": "eq.s32", "ne": "ne.s32", "slt": "lt.s32", "sle": "le.s32", "sgt": "gt.s32",
    "sge": "ge.s32", "ult": "lt.u32", "ule": "le.u32", "ugt": "gt.u32", "uge": "ge.u32",
}


# arith.cmpf predicates (but the constant false/true) as PTX float comparisons: the plain ones are
# ordered (false when either operand is NaN), the `u` ones unordered (true then).
_COMPARE_FLOAT = {
    "oeq": "eq", "ogt": "gt", "oge": "ge", "olt": "lt", "ole": "le", "one": "ne", "ord": "num",
    "ueq": "equ", "ugt": "gtu", "uge": "geu", "ult": "ltu", "ule": "leu", "une": "neu", "uno": "nan",
}


def register_kind(type_) -> str:
    if isinstance(type_, IntegerType) and type_.width.data == 1:
        return "pred"
    if isinstance(type_, (IndexType, IntegerType)):
        return "b32"
    raise NotImplementedError(f"no register class for {type_}")


def _constant(ctx: KernelLowering, op: arith.ConstantOp) -> None:
    value = op.value
    if isinstance(value, FloatAttr):
        ctx.bind(op.result, constant_register(ctx, value, op.result.type))  # a float32 scalar
        return
    assert isinstance(value, IntegerAttr)
    number = value.value.data
    if register_kind(op.result.type) == "pred":
        ctx.bind(op.result, ctx.b.emit("setp.ne.u32 {}, {}, 0;", "pred", ctx.b.mov("b32", int(bool(number)))))
        return
    ctx.bind(op.result, ctx.b.mov("b32", number), constant=number)


def _binary(instruction: str):
    def rule(ctx: KernelLowering, op) -> None:
        ctx.bind(op.result,
                 ctx.b.emit(instruction + " {}, {}, {};", "b32", ctx.reg(op.lhs), ctx.operand(op.rhs)))

    return rule




def _logic(ctx: KernelLowering, op) -> None:
    name = {arith.AndIOp: "and", arith.OrIOp: "or", arith.XOrIOp: "xor"}[type(op)]
    kind = register_kind(op.result.type)
    if name == "and" and kind == "pred":
        # `x and true` is x: what a run-time check that always passes leaves behind.
        for known, other in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            if ctx.constant(known) == 1:
                _alias(ctx, op.result, other)
                return
    if kind == "pred":
        ctx.bind(op.result,
                 ctx.b.emit(f"{name}.pred {{}}, {{}}, {{}};", kind, ctx.reg(op.lhs), ctx.reg(op.rhs)))
        return
    # An index's bits (`j % 4` is `j & 3`): a constant mask is an immediate.
    ctx.bind(op.result,
             ctx.b.emit(f"{name}.b32 {{}}, {{}}, {{}};", kind, ctx.reg(op.lhs), ctx.operand(op.rhs)))


def _floordiv(ctx: KernelLowering, op: arith.FloorDivSIOp) -> None:
    b = ctx.b
    divisor = ctx.constant(op.rhs)
    lhs = ctx.reg(op.lhs)
    if divisor is None or divisor == 0:
        ctx.bind(op.result, floor_quotient(b, lhs, ctx.operand(op.rhs)))
    elif divisor > 0 and divisor & (divisor - 1) and known_non_negative(op.lhs):
        # Floor and truncation agree on a dividend that cannot be negative (a ring's slot
        # `j % 3` of a loop counter): one unsigned division, with no sign to fold in.
        ctx.bind(op.result, unsigned_quotient(b, lhs, divisor))
    else:
        ctx.bind(op.result, floor_quotient_by(b, lhs, divisor))


def _compare(ctx: KernelLowering, op: arith.CmpiOp) -> None:
    predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    ctx.bind(op.result, ctx.b.emit(f"setp.{_COMPARE[predicate]} {{}}, {{}}, {{}};", "pred", ctx.reg(op.lhs),
                                   ctx.operand(op.rhs)))


def _compare_float(ctx: KernelLowering, op: arith.CmpfOp) -> None:
    predicate = _COMPARE_FLOAT[arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]]
    ctx.bind(op.result,
             ctx.b.emit(f"setp.{predicate}.f32 {{}}, {{}}, {{}};", "pred", ctx.reg(op.lhs), ctx.reg(op.rhs)))


def _int_to_float(ctx: KernelLowering, op: arith.SIToFPOp) -> None:
    ctx.bind(op.result, ctx.b.emit("cvt.rn.f32.s32 {}, {};", "f32", ctx.reg(op.input)))


def _alias(ctx: KernelLowering, result, value) -> None:
    """`result` is `value` (no instruction)."""
    known = ctx.constant(value)
    ctx.bind(result, None if known is not None else ctx.reg(value), constant=known)


def _select(ctx: KernelLowering, op: arith.SelectOp) -> None:
    known = ctx.constant(op.cond)
    if known is not None:
        _alias(ctx, op.result, op.lhs if known else op.rhs)
        return
    kind = register_kind(op.result.type)
    condition = ctx.reg(op.cond)
    if kind == "pred":
        # (c and t) or (not c and f)
        picked_true = ctx.b.emit("and.pred {}, {}, {};", "pred", condition, ctx.reg(op.lhs))
        not_c = ctx.b.emit("not.pred {}, {};", "pred", condition)
        picked_false = ctx.b.emit("and.pred {}, {}, {};", "pred", not_c, ctx.reg(op.rhs))
        ctx.bind(op.result, ctx.b.emit("or.pred {}, {}, {};", "pred", picked_true, picked_false))
        return
    ctx.bind(op.result,
             ctx.b.emit("selp.b32 {}, {}, {}, {};", "b32", ctx.reg(op.lhs), ctx.reg(op.rhs), condition))


def _negating(instruction: str, negated_operand):
    """`_binary(instruction)`, but where `negated_operand(ctx, op)` shows the op to be a negation
    (0 - x, x * -1), the builder's `negated` (a form ptxas keeps under min/max, which index
    arithmetic's bounds and clamps are made of)."""
    plain = _binary(instruction)

    def rule(ctx: KernelLowering, op) -> None:
        negated = negated_operand(ctx, op)
        if negated is None:
            plain(ctx, op)
            return
        ctx.bind(op.result, ctx.b.negated("b32", ctx.reg(negated)))

    return rule


def _subtracted_from_zero(ctx: KernelLowering, op):
    return op.rhs if ctx.constant(op.lhs) == 0 and ctx.constant(op.rhs) is None else None


def _times_minus_one(ctx: KernelLowering, op):
    if ctx.constant(op.rhs) == -1 and ctx.constant(op.lhs) is None:
        return op.lhs
    return op.rhs if ctx.constant(op.lhs) == -1 and ctx.constant(op.rhs) is None else None


RULES: Rules = {
    arith.ConstantOp: _constant,
    arith.AddiOp: _binary("add.s32"),
    arith.SubiOp: _negating("sub.s32", _subtracted_from_zero),
    arith.MuliOp: _negating("mul.lo.s32", _times_minus_one),
    arith.DivSIOp: _binary("div.s32"),
    arith.RemSIOp: _binary("rem.s32"),
    arith.MinSIOp: _binary("min.s32"),
    arith.MaxSIOp: _binary("max.s32"),
    arith.AndIOp: _logic,
    arith.OrIOp: _logic,
    arith.XOrIOp: _logic,
    arith.FloorDivSIOp: _floordiv,
    arith.CmpiOp: _compare,
    arith.SelectOp: _select,
    arith.CmpfOp: _compare_float,
    arith.SIToFPOp: _int_to_float,
}
