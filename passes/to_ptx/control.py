"""Lowering of structured control flow (`scf.for`, `scf.if`).

Loops and branches become labels and branches; loop counters and loop-carried values are
registers updated in place (registers of the `ptx` dialect are mutable).
"""

from __future__ import annotations

from xdsl.dialects import scf

from asyncdsl.passes.to_ptx.builder import register_class
from asyncdsl.passes.to_ptx.context import KernelLowering, Rules
from asyncdsl.passes.to_ptx.scalars import register_kind


def _for(ctx: KernelLowering, op: scf.ForOp) -> None:
    b = ctx.b
    counter = b.mov("b32", ctx.operand(op.lb))
    upper = ctx.operand(op.ub)
    step = ctx.operand(op.step)
    carried = [b.mov(register_kind(v.type), ctx.reg(v)) for v in op.iter_args]
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


def _if(ctx: KernelLowering, op: scf.IfOp) -> None:
    b = ctx.b
    outputs = [b.mov(register_kind(r.type), 0) if register_kind(r.type) != "pred"
               else b.emit("setp.ne.u32 {}, 0, 0;", "pred") for r in op.results]
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
    temporaries = [ctx.b.mov(register_class(t), s) for t, s in zip(targets, sources)]
    for target, temporary in zip(targets, temporaries):
        ctx.b.assign(target, temporary)


RULES: Rules = {scf.ForOp: _for, scf.IfOp: _if}
