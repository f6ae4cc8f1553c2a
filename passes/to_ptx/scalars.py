"""Lowering of index arithmetic (`arith`) and structured control flow (`scf`).

Index values live in 32-bit registers as signed integers (coordinates and loop counters on the
GPU are far below 2^31); conditions live in predicate registers. Loops and branches become
labels and branches; loop counters and loop-carried values are registers updated in place.
"""

from __future__ import annotations

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType

from asyncdsl.passes.to_ptx.context import KernelLowering, lowers

_COMPARE = {
    "eq": "eq.s32", "ne": "ne.s32", "slt": "lt.s32", "sle": "le.s32", "sgt": "gt.s32",
    "sge": "ge.s32", "ult": "lt.u32", "ule": "le.u32", "ugt": "gt.u32", "uge": "ge.u32",
}


def _kind(type_) -> str:
    if isinstance(type_, IntegerType) and type_.width.data == 1:
        return "pred"
    if isinstance(type_, (IndexType, IntegerType)):
        return "b32"
    raise NotImplementedError(f"no register class for {type_}")


@lowers(arith.ConstantOp)
def _constant(ctx: KernelLowering, op: arith.ConstantOp) -> None:
    value = op.value
    assert isinstance(value, IntegerAttr)
    number = value.value.data
    if _kind(op.result.type) == "pred":
        ctx.bind(op.result, ctx.b.emit("setp.ne.u32 {}, {}, 0;", "pred", ctx.b.mov("b32", int(bool(number)))))
        return
    ctx.bind(op.result, ctx.b.mov("b32", number), constant=number)


def _binary(instruction: str):
    def rule(ctx: KernelLowering, op) -> None:
        ctx.bind(op.result, ctx.b.emit(instruction + " {}, {}, {};", "b32", ctx.reg(op.lhs), ctx.operand(op.rhs)))

    return rule


lowers(arith.AddiOp)(_binary("add.s32"))
lowers(arith.SubiOp)(_binary("sub.s32"))
lowers(arith.MuliOp)(_binary("mul.lo.s32"))
lowers(arith.DivSIOp)(_binary("div.s32"))
lowers(arith.RemSIOp)(_binary("rem.s32"))
lowers(arith.MinSIOp)(_binary("min.s32"))
lowers(arith.MaxSIOp)(_binary("max.s32"))


@lowers(arith.AndIOp, arith.OrIOp, arith.XOrIOp)
def _logic(ctx: KernelLowering, op) -> None:
    name = {arith.AndIOp: "and", arith.OrIOp: "or", arith.XOrIOp: "xor"}[type(op)]
    kind = _kind(op.result.type)
    spelled = "pred" if kind == "pred" else "b32"
    ctx.bind(op.result, ctx.b.emit(f"{name}.{spelled} {{}}, {{}}, {{}};", kind, ctx.reg(op.lhs), ctx.reg(op.rhs)))


@lowers(arith.FloorDivSIOp)
def _floordiv(ctx: KernelLowering, op: arith.FloorDivSIOp) -> None:
    b = ctx.b
    divisor = ctx.constant(op.rhs)
    lhs = ctx.reg(op.lhs)
    if divisor is not None and divisor > 0 and divisor & (divisor - 1) == 0:
        # An arithmetic shift right is a floor division by a power of two.
        ctx.bind(op.result, b.emit("shr.s32 {}, {}, {};", "b32", lhs, divisor.bit_length() - 1))
        return
    rhs = ctx.operand(op.rhs)
    quotient = b.emit("div.s32 {}, {}, {};", "b32", lhs, rhs)
    remainder = b.emit("rem.s32 {}, {}, {};", "b32", lhs, rhs)
    # Truncation rounds toward zero; step down once when the remainder and divisor differ in sign.
    inexact = b.emit("setp.ne.s32 {}, {}, 0;", "pred", remainder)
    signs = b.emit("xor.b32 {}, {}, {};", "b32", remainder, rhs)
    opposite = b.emit("setp.lt.s32 {}, {}, 0;", "pred", signs)
    adjust = b.emit("and.pred {}, {}, {};", "pred", inexact, opposite)
    step = b.emit("selp.s32 {}, 1, 0, {};", "b32", adjust)
    ctx.bind(op.result, b.emit("sub.s32 {}, {}, {};", "b32", quotient, step))


@lowers(arith.CmpiOp)
def _compare(ctx: KernelLowering, op: arith.CmpiOp) -> None:
    predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    ctx.bind(op.result, ctx.b.emit(f"setp.{_COMPARE[predicate]} {{}}, {{}}, {{}};", "pred", ctx.reg(op.lhs), ctx.operand(op.rhs)))


@lowers(arith.SelectOp)
def _select(ctx: KernelLowering, op: arith.SelectOp) -> None:
    kind = _kind(op.result.type)
    condition = ctx.reg(op.cond)
    if kind == "pred":
        # (c and t) or (not c and f)
        picked_true = ctx.b.emit("and.pred {}, {}, {};", "pred", condition, ctx.reg(op.lhs))
        not_c = ctx.b.emit("not.pred {}, {};", "pred", condition)
        picked_false = ctx.b.emit("and.pred {}, {}, {};", "pred", not_c, ctx.reg(op.rhs))
        ctx.bind(op.result, ctx.b.emit("or.pred {}, {}, {};", "pred", picked_true, picked_false))
        return
    ctx.bind(op.result, ctx.b.emit("selp.b32 {}, {}, {}, {};", "b32", ctx.reg(op.lhs), ctx.reg(op.rhs), condition))


@lowers(scf.ForOp)
def _for(ctx: KernelLowering, op: scf.ForOp) -> None:
    b = ctx.b
    counter = b.mov("b32", ctx.operand(op.lb))
    upper = ctx.operand(op.ub)
    step = ctx.operand(op.step)
    carried = [b.mov(_kind(v.type), ctx.reg(v)) for v in op.iter_args]
    head, done = b.new_label("loop"), b.new_label("loop_end")
    b.label(head)
    exit_now = b.emit("setp.ge.s32 {}, {}, {};", "pred", counter, upper)
    b.branch(done, exit_now)
    body = op.body.block
    ctx.bind(body.args[0], counter)
    for arg, register in zip(body.args[1:], carried):
        ctx.bind(arg, register)
    for inner in body.ops:
        if isinstance(inner, scf.YieldOp):
            _assign_all(ctx, carried, [ctx.reg(v) for v in inner.arguments])
        else:
            ctx.lower(inner)
    b.run("add.s32 {}, {}, {};", counter, counter, step)
    b.branch(head)
    b.label(done)
    for result, register in zip(op.results, carried):
        ctx.bind(result, register)


@lowers(scf.IfOp)
def _if(ctx: KernelLowering, op: scf.IfOp) -> None:
    b = ctx.b
    outputs = [b.mov(_kind(r.type), 0) if _kind(r.type) != "pred" else b.emit("setp.ne.u32 {}, 0, 0;", "pred") for r in op.results]
    otherwise, done = b.new_label("else"), b.new_label("endif")
    has_else = bool(op.false_region.blocks) and any(
        not isinstance(o, scf.YieldOp) or o.arguments for o in op.false_region.block.ops
    )
    b.branch(otherwise if has_else else done, ctx.reg(op.cond), negate=True)
    _lower_branch(ctx, op.true_region.block, outputs)
    if has_else:
        b.branch(done)
        b.label(otherwise)
        _lower_branch(ctx, op.false_region.block, outputs)
    b.label(done)
    for result, register in zip(op.results, outputs):
        ctx.bind(result, register)


def _lower_branch(ctx: KernelLowering, block, outputs) -> None:
    for inner in block.ops:
        if isinstance(inner, scf.YieldOp):
            _assign_all(ctx, outputs, [ctx.reg(v) for v in inner.arguments])
        else:
            ctx.lower(inner)


def _assign_all(ctx: KernelLowering, targets, sources) -> None:
    """Parallel assignment: copy through temporaries so that swaps come out right."""
    temporaries = [ctx.b.mov(t.type.kind.data, s) for t, s in zip(targets, sources)]
    for target, temporary in zip(targets, temporaries):
        ctx.b.assign(target, temporary)
