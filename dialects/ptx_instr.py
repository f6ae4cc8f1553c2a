"""PTX registers and the instruction ops every `ptx` op of the kernel body is built on.

SSA values name *virtual registers*, typed by their PTX register class (`!ptx.reg<b32>`).
Registers are mutable as in PTX: an instruction may write a register that is one of its
operands (a loop counter, a phase bitmask), so values are names rather than single definitions.

Every instruction op carries its text with `#{i}` placeholders for its registers, results
first, then operands; `#{param:k}` names kernel parameter k and `#{smem}` the dynamic
shared-memory symbol. The text is how the instruction prints; what it *is* to a pass is its op
class and the effects that class declares (`ptx_effects`). Here are the classes of the
instructions no pass reasons about one by one: register arithmetic, plain memory accesses,
branches, and `ptx.instr`, whose effects are not declared.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from xdsl.dialects.builtin import UNKNOWN_LOC, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, OpResult, ParametrizedAttribute, SSAValue, SSAValues, TypeAttribute, Use
from xdsl.irdl import IRDLOperation, irdl_attr_definition, irdl_op_definition, opt_prop_def, prop_def
from xdsl.irdl import traits_def, var_operand_def, var_result_def
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ptx_effects import AccessesMemory, RegistersOnly

# Register class -> (declaration type, name prefix).
REGISTER_CLASSES = {
    "pred": (".pred", "%p"),
    "b16": (".b16", "%rs"),
    "b32": (".b32", "%r"),
    "b64": (".b64", "%rd"),
    "f32": (".f32", "%f"),
    "f64": (".f64", "%fd"),
}

PLACEHOLDER = re.compile(r"#\{(\d+|param:\d+|smem)\}")


@irdl_attr_definition
class RegType(ParametrizedAttribute, TypeAttribute):
    """A virtual register of one PTX register class: `!ptx.reg<b32>`."""

    name = "ptx.reg"

    kind: StringAttr

    def __init__(self, kind: str | StringAttr):
        super().__init__(StringAttr(kind) if isinstance(kind, str) else kind)

    def verify(self) -> None:
        if self.kind.data not in REGISTER_CLASSES:
            raise VerifyException(f"unknown PTX register class {self.kind.data!r}")

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.kind.data}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[StringAttr]:
        with parser.in_angle_brackets():
            return (StringAttr(parser.parse_identifier()),)


PRED, B16, B32, B64, F32 = (RegType(k) for k in ("pred", "b16", "b32", "b64", "f32"))
_REGISTER_TYPES = {kind: RegType(kind) for kind in REGISTER_CLASSES}
# `guard_negated` of a guarded instruction, shared: attributes are immutable, and building one
# costs as much as the rest of an instruction.
_GUARD_NEGATED = {negated: IntegerAttr(int(negated), i64) for negated in (False, True)}


@functools.lru_cache(maxsize=4096)
def _text_attr(text: str) -> StringAttr:
    """The `text` of an instruction, shared: a kernel repeats few texts many times (the GEMM 146
    in 976 instructions), and building the attribute checks it each time."""
    return StringAttr(text)


class Instruction(IRDLOperation):
    """One PTX instruction: its text with `#{i}` register placeholders, its registers, and an
    optional guard predicate. Subclasses say which instruction it is and declare its effects."""

    text = prop_def(StringAttr)
    guard_negated = opt_prop_def(IntegerAttr)  # present: operand 0 is the guard predicate
    args = var_operand_def(RegType)
    defs = var_result_def(RegType)

    def __init__(
        self,
        text: str,
        operands: Sequence[SSAValue] = (),
        result_kinds: Sequence[str] = (),
        guard: SSAValue | None = None,
        guard_negated: bool = False,
        fields: dict[str, Attribute] | None = None,
    ):
        properties: dict[str, Attribute] = {"text": _text_attr(text)}
        if fields:
            properties.update(fields)
        if guard is not None:
            properties["guard_negated"] = _GUARD_NEGATED[bool(guard_negated)]
            operands = (guard, *operands)
        # A kernel has thousands of these, so the fields are set here directly: xDSL's constructor
        # (pinned to 0.75) costs twice as much doing general work this op never needs (successor and
        # region lists, whose class defaults are empty, a location lookup, IRDL's default filling:
        # no property has a default). The operand uses are linked as its `operands` setter does.
        self._operands = SSAValues(operands)
        self._operand_uses = uses = tuple([Use(self, index) for index in range(len(operands))])
        for operand, use in zip(operands, uses):
            operand.add_use(use)
        self.results = SSAValues([OpResult(_REGISTER_TYPES[k], self, i) for i, k in enumerate(result_kinds)])
        self.properties = properties
        self.attributes = {}
        self.location = UNKNOWN_LOC

    # `args` and `defs` are all the operands and results: these read them as such, which costs a
    # fraction of IRDL's accessors (printing reads every instruction's).
    @property
    def guard(self) -> SSAValue | None:
        return self.operands[0] if self.guard_negated is not None else None

    @property
    def registers(self) -> tuple[SSAValue, ...]:
        """The values the `#{i}` placeholders refer to: results, then non-guard operands."""
        operands = self.operands
        return (*self.results, *(operands[1:] if self.guard_negated is not None else operands))

    def verify_(self) -> None:
        count = len(self.registers)
        for match in PLACEHOLDER.finditer(self.text.data):
            key = match.group(1)
            if key.isdigit() and int(key) >= count:
                raise VerifyException(
                    f"placeholder #{{{key}}} but only {count} registers in {self.text.data!r}")
        guard = self.guard
        if guard is not None and guard.type != PRED:
            raise VerifyException("an instruction guard must be a predicate register")


class FieldedInstruction(Instruction):
    """An instruction whose text is made from its fields, so that what a pass reads of it and
    what prints agree: `spelling` makes the text from the fields, and the verifier holds the
    text to it."""

    def spelling(self) -> str:
        raise NotImplementedError

    def verify_(self) -> None:
        super().verify_()
        expected = self.spelling()
        if self.text.data != expected:
            raise VerifyException(f"{self.name} fields spell {expected!r}, its text is {self.text.data!r}")


@irdl_op_definition
class InstrOp(Instruction):
    """An instruction whose effects are not declared (`mapa`, `createpolicy`, `setmaxnreg`): a
    pass must assume it touches any memory and synchronises with anything."""

    name = "ptx.instr"


@irdl_op_definition
class AluOp(Instruction):
    """Arithmetic, comparisons, conversions, moves, shuffles, parameter loads: an instruction
    that reads and writes registers only."""

    name = "ptx.alu"
    traits = traits_def(RegistersOnly())


@irdl_op_definition
class MemoryOp(Instruction):
    """A load, store, atomic or prefetch of the generic proxy (`ld`, `st`, `atom`, `red`,
    `prefetch`), ordered by barriers and fences as any memory access."""

    name = "ptx.mem"
    traits = traits_def(AccessesMemory("generic"))


@irdl_op_definition
class BranchOp(FieldedInstruction):
    """`bra $label;`, guarded where it is conditional: where paths split."""

    name = "ptx.bra"
    label = prop_def(StringAttr)

    def __init__(self, label: str, guard: SSAValue | None = None, guard_negated: bool = False):
        super().__init__(f"bra ${label};", (), (), guard, guard_negated, {"label": StringAttr(label)})

    def spelling(self) -> str:
        return f"bra ${self.label.data};"
