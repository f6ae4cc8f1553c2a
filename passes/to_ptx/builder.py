"""Building `ptx` dialect instructions from Python with PTX-like spelling.

`b.emit("add.s32 {}, {}, {};", "b32", x, 4)` appends `add.s32 %rN, %rX, 4;` with a fresh b32
result: the first `{}` after the text is the result when a result class is given, register
arguments become placeholders, ints and strings are printed as they are, and lists are joined
with commas (for `{c0, c1}` coordinate vectors).

The text is how an instruction prints; the op class is what it is. `emit`, `run` and `emit_many`
append register arithmetic (`ptx.alu`) unless `instr` names another instruction class (a load
is `instr=ptx.MemoryOp`, a tensor copy `instr=ptx.BulkLoadOp`); barriers, fences, commits and
waits are built from their fields and appended with `append` (`b.bar` for named barriers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias, overload

from xdsl.ir import Block, OpResult, SSAValue

from asyncdsl.dialects import ptx
from asyncdsl.dialects.ptx_instr import Instruction

Arg: TypeAlias = SSAValue | int | str | Sequence["Arg"]


def register_class(register: SSAValue) -> str:
    """The PTX register class (`b32`, `pred`, ...) of a register the builder made."""
    type_ = register.type
    assert isinstance(type_, ptx.RegType), f"{register} is not a PTX register"
    return type_.kind.data


class PtxBuilder:
    """Appends instructions to the body of one `ptx.kernel`."""

    def __init__(self, block: Block):
        self.block = block
        self._labels = 0

    # A result class gives a result register, None gives none: the overloads say so to callers.
    @overload
    def emit(self, template: str, result: str, *args: Arg, guard: SSAValue | None = None,
             negate: bool = False, instr: type[Instruction] = ptx.AluOp) -> SSAValue: ...

    @overload
    def emit(self, template: str, result: None, *args: Arg, guard: SSAValue | None = None,
             negate: bool = False, instr: type[Instruction] = ptx.AluOp) -> None: ...

    def emit(
        self,
        template: str,
        result: str | None,
        *args: Arg,
        guard: SSAValue | None = None,
        negate: bool = False,
        instr: type[Instruction] = ptx.AluOp,
    ) -> SSAValue | None:
        """Append one instruction of class `instr`; returns its result register when `result`
        names a class."""
        operands: list[SSAValue] = []
        offset = 1 if result else 0
        rendered = [_render(arg, operands, offset) for arg in args]
        if result:
            rendered.insert(0, "#{0}")
        op = instr(
            template.format(*rendered),
            operands,
            [result] if result else [],
            guard=guard,
            guard_negated=negate,
        )
        self.block.add_op(op)
        return op.results[0] if result else None

    def emit_many(
        self, template: str, kinds: Sequence[str], *args: SSAValue | int | str,
        instr: type[Instruction] = ptx.AluOp,
    ) -> list[SSAValue]:
        """Append one instruction with several results (a vector load, unpacking a word): the
        first `len(kinds)` `{}` are the results, the rest the arguments as in `emit`."""
        results = [f"#{{{i}}}" for i in range(len(kinds))]
        operands = [a for a in args if isinstance(a, SSAValue)]
        rendered = iter(f"#{{{len(kinds) + operands.index(a)}}}" if isinstance(a, SSAValue) else str(a)
                        for a in args)
        op = instr(template.format(*results, *rendered), operands, list(kinds))
        self.block.add_op(op)
        return list(op.results)

    def run(
        self, template: str, *args: Arg, guard: SSAValue | None = None, negate: bool = False,
        instr: type[Instruction] = ptx.AluOp,
    ) -> None:
        """Append an instruction of class `instr` without a result."""
        self.emit(template, None, *args, guard=guard, negate=negate, instr=instr)

    def append(self, op: Instruction) -> None:
        """Append an instruction built from its fields (a barrier, a fence, a commit, a wait)."""
        self.block.add_op(op)

    def bar(
        self, mode: Literal["sync", "arrive"], barrier: SSAValue | int, threads: int | None = None,
        guard: SSAValue | None = None,
    ) -> None:
        """`bar.<mode> barrier[, threads];`: `threads` of the CTA (all where None) meet there."""
        self.block.add_op(ptx.BarrierOp(mode, barrier, threads, guard))

    def mov(self, kind: str, source: SSAValue | int | str) -> SSAValue:
        """A fresh register of class `kind` holding `source`."""
        spelled = {"pred": "pred", "b16": "b16", "b32": "b32", "b64": "b64", "f32": "f32"}[kind]
        return self.emit(f"mov.{spelled} {{}}, {{}};", kind, source)

    def negated(self, kind: str, value: SSAValue, bits: int = 32) -> SSAValue:
        """-value in two's complement, as `not` then `add 1`: ptxas folds a negation it recognises
        (`sub 0, x`, `neg`, `mul x, -1`) into a three-input integer min/max and drops it there
        (docs/hardware.md §20); this form it leaves alone."""
        flipped = self.emit(f"not.b{bits} {{}}, {{}};", kind, value)
        return self.emit(f"add.s{bits} {{}}, {{}}, 1;", kind, flipped)

    def assign(self, target: SSAValue, source: SSAValue | int) -> None:
        """Overwrite register `target` (registers are mutable: loop counters, phase bits)."""
        kind = register_class(target)
        self.run(f"mov.{kind} {{}}, {{}};", target, source)

    def new_label(self, hint: str) -> str:
        self._labels += 1
        return f"L{self._labels}_{hint}"

    def label(self, name: str) -> None:
        self.block.add_op(ptx.LabelOp(name))

    def branch(self, label: str, condition: SSAValue | None = None, negate: bool = False) -> None:
        self.block.add_op(ptx.BranchOp(label, condition, negate))


def _render(arg: Arg, operands: list[SSAValue], offset: int) -> str:
    """`arg` as instruction text; a register becomes the placeholder of its place in `operands`
    (appended when new), numbered after the `offset` results."""
    # Immediates first: they are common. A register is tested by its class before `isinstance`
    # against `SSAValue`, an ABC whose check costs more than the rest of this function.
    if isinstance(arg, (int, str)):
        return str(arg)
    if type(arg) is OpResult or isinstance(arg, SSAValue):
        for i, seen in enumerate(operands):
            if seen is arg:
                return f"#{{{i + offset}}}"
        operands.append(arg)
        return f"#{{{len(operands) - 1 + offset}}}"
    if isinstance(arg, (list, tuple)):
        return ", ".join([_render(a, operands, offset) for a in arg])
    return str(arg)
