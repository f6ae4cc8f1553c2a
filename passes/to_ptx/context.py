"""The state of lowering one kernel to PTX.

Rules live in one module per feature, each listing them in its `RULES` table; `lower-to-ptx`
merges the tables in one visible list.  A rule reads its operands' registers with
`ctx.reg(value)`, emits through `ctx.b`, and binds its results with `ctx.bind(result, register)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Block, Operation, SSAValue

from asyncdsl.passes.to_ptx.builder import PtxBuilder

if TYPE_CHECKING:
    from asyncdsl.passes.to_ptx.profile import ProfileRecord
    from asyncdsl.passes.to_ptx.tile_registers import TileRegisters

# A rule takes an op of the class its table keys it by (`KernelLowering.lower` looks it up by the
# op's class): the op's type is the key's, which a dict's type cannot say, so it is Any here.
Rule = Callable[["KernelLowering", Any], None]
Rules = dict[type[Operation], Rule]

A = TypeVar("A", bound=Operation)
B = TypeVar("B", bound=Operation)
C = TypeVar("C", bound=Operation)


@dataclass
class KernelFacts:
    """What the prologue computed once for the whole kernel."""

    tid: SSAValue
    thread: SSAValue  # the thread's index in its warpgroup (0-127)
    warpgroup: SSAValue  # warpgroup index of the thread
    named_barrier: SSAValue  # 1 + warpgroup index: the warpgroup's `bar.sync` id
    leader: SSAValue  # predicate: the thread that issues the warpgroup's single-thread work
    smem_base: SSAValue  # 1024-aligned shared address of the kernel's shared memory
    descriptor_addresses: list[SSAValue] = field(default_factory=list)
    cluster_size: int = 1
    arch: str = "sm_90a"
    error_buffer: SSAValue | None = None  # debug mode: where failed run-time checks are reported
    tile_scratch: SSAValue | None = None  # this warpgroup's shared scratch for register tiles
    profile: ProfileRecord | None = None  # a profiled kernel: this warpgroup's profile record
    threads: int = 128  # threads per CTA (`.reqntid`), which fixes each thread's registers at entry
    ctas_per_sm: int = 1  # CTAs to share a multiprocessor's registers (`asyncdsl.ctas_per_sm`)
    peer_table: SSAValue | None = None  # a multi-device kernel: its rank and peer offsets (`distributed.py`)


class KernelLowering:
    """Maps IR values to registers while lowering one kernel body."""

    def __init__(self, block: Block, rules: Rules, kernel_ops: Sequence[Operation],
                 check_ids: dict[Operation, int] | None = None):
        self.b = PtxBuilder(block)
        self._rules = rules
        # Every op of the kernel in walk order, walked once: the prologue, the epilogue and some
        # rules each look for ops of a few kinds anywhere in it (`ops_of`).
        self._kernel_ops = kernel_ops
        # Debug mode: the number each run-time check reports when it fails (none: checks vanish).
        self.check_ids = check_ids or {}
        self._registers: dict[SSAValue, SSAValue] = {}
        self._constants: dict[SSAValue, int] = {}
        # Register tiles: each value's `tile_registers.TileRegisters` (its registers by layout).
        self.tiles: dict[SSAValue, TileRegisters] = {}
        # 8-bit elements converted two at a time (`tile_math`): each element's register -> the
        # halfword holding the pair and the element's byte in it, for stores to pack whole pairs.
        self.byte_pairs: dict[SSAValue, tuple[SSAValue, int]] = {}
        self._facts: KernelFacts | None = None
        # Per barrier group (its alloc value): the register of phase bits this thread tracks.
        self.phase_bits: dict[SSAValue, SSAValue] = {}
        # What a rule found about the whole kernel, kept for its next use (keyed by the rule's
        # own function): one walk of the kernel instead of one per op.
        self.analyses: dict[object, object] = {}

    @property
    def facts(self) -> KernelFacts:
        """What the prologue computed for the whole kernel: set before any rule runs."""
        if self._facts is None:
            raise RuntimeError("the kernel's facts are read before the prologue computed them")
        return self._facts

    @facts.setter
    def facts(self, facts: KernelFacts) -> None:
        self._facts = facts

    @overload
    def ops_of(self, cls: type[A], /) -> list[A]: ...
    @overload
    def ops_of(self, cls: type[A], other: type[B], /) -> list[A | B]: ...
    @overload
    def ops_of(self, cls: type[A], other: type[B], third: type[C], /) -> list[A | B | C]: ...

    def ops_of(self, *classes: type[Operation]) -> Sequence[Operation]:
        """The kernel's ops of these classes, in walk order."""
        return [op for op in self._kernel_ops if isinstance(op, classes)]

    def reg(self, value: SSAValue) -> SSAValue:
        register = self._registers.get(value)
        if register is None:
            # A constant bound without a register (a check that always passes) is materialised
            # where something needs it as a register.
            constant = self._constants[value]
            if isinstance(value.type, IntegerType) and value.type.width.data == 1:
                register = self.b.emit("setp.ne.u32 {}, {}, 0;", "pred",
                                       self.b.mov("b32", int(bool(constant))))
            else:
                register = self.b.mov("b32", constant)
            self._registers[value] = register
        return register

    def bind(self, value: SSAValue, register: SSAValue | None, constant: int | None = None) -> None:
        """`value` lives in `register`; a known `constant` may stand alone (no register until used)."""
        assert register is not None or constant is not None
        if register is not None:
            self._registers[value] = register
        if constant is not None:
            self._constants[value] = constant

    def constant(self, value: SSAValue) -> int | None:
        """The value of `value` if it is a compile-time constant."""
        return self._constants.get(value)

    def operand(self, value: SSAValue) -> SSAValue | int:
        """An immediate when the value is a known constant, else its register."""
        known = self.constant(value)
        return known if known is not None else self.reg(value)

    def lower_block(self, block: Block) -> None:
        for op in block.ops:
            self.lower(op)

    def lower(self, op: Operation) -> None:
        rule = self._rules.get(type(op))
        if rule is None:
            raise NotImplementedError(
                f"no PTX lowering rule for {op.name} (an earlier pass should have rewritten it)")
        rule(self, op)
