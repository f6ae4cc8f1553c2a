"""The `ptx` dialect: a thin model of PTX, one op per instruction, printed verbatim.

SSA values name *virtual registers*, typed by their PTX register class (`!ptx.reg<b32>`).
Registers are mutable as in PTX: an instruction may write a register that is one of its
operands (a loop counter, a phase bitmask), so values are names rather than single definitions.

`ptx.instr` carries the instruction text with `#{i}` placeholders for its registers, results
first, then operands; `#{param:k}` names kernel parameter k and `#{smem}` the dynamic
shared-memory symbol. `ptx.label` marks a branch target. `ptx.kernel` holds one entry point as a
flat list of these ops. The printer (`print_ptx`) assigns register names and writes the module.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    OpResult,
    ParametrizedAttribute,
    Region,
    SSAValue,
    SSAValues,
    TypeAttribute,
    Use,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, NoTerminator
from xdsl.utils.exceptions import VerifyException

# Register class -> (declaration type, name prefix).
REGISTER_CLASSES = {
    "pred": (".pred", "%p"),
    "b16": (".b16", "%rs"),
    "b32": (".b32", "%r"),
    "b64": (".b64", "%rd"),
    "f32": (".f32", "%f"),
    "f64": (".f64", "%fd"),
}

PARAM_KINDS = ("u64", "s32", "f32", "tensor_map")

_PLACEHOLDER = re.compile(r"#\{(\d+|param:\d+|smem)\}")


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


@irdl_op_definition
class InstrOp(IRDLOperation):
    """One PTX instruction. `text` is the instruction with `#{i}` register placeholders."""

    name = "ptx.instr"

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
    ):
        properties: dict[str, Attribute] = {"text": _text_attr(text)}
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
        for match in _PLACEHOLDER.finditer(self.text.data):
            key = match.group(1)
            if key.isdigit() and int(key) >= count:
                raise VerifyException(
                    f"placeholder #{{{key}}} but only {count} registers in {self.text.data!r}")
        guard = self.guard
        if guard is not None and guard.type != PRED:
            raise VerifyException("an instruction guard must be a predicate register")


@irdl_op_definition
class LabelOp(IRDLOperation):
    """A branch target `$name:`."""

    name = "ptx.label"
    label = prop_def(StringAttr)

    def __init__(self, label: str):
        super().__init__(properties={"label": StringAttr(label)})


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One `.entry`: its parameters (kinds in order), launch directives and instructions."""

    name = "ptx.kernel"

    sym_name = prop_def(StringAttr)
    param_kinds = prop_def(ArrayAttr)
    reqntid = prop_def(DenseArrayBase)
    cluster = opt_prop_def(DenseArrayBase)
    # `.maxnreg`: with `setmaxnreg` in the body, ptxas needs the count at entry stated; `.reqntid`
    # alone left it undetermined (C7508) whenever the kernel needed fewer registers than the cap.
    maxnreg = opt_prop_def(IntegerAttr)
    uses_dynamic_smem = prop_def(IntegerAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), IsolatedFromAbove())

    def __init__(
        self,
        name: str,
        param_kinds: Sequence[str],
        reqntid: Sequence[int],
        cluster: Sequence[int] | None = None,
        uses_dynamic_smem: bool = True,
        maxnreg: int | None = None,
    ):
        properties: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "param_kinds": ArrayAttr(StringAttr(k) for k in param_kinds),
            "reqntid": DenseArrayBase.from_list(i64, list(reqntid)),
            "uses_dynamic_smem": IntegerAttr(int(uses_dynamic_smem), i64),
        }
        if cluster is not None:
            properties["cluster"] = DenseArrayBase.from_list(i64, list(cluster))
        if maxnreg is not None:
            properties["maxnreg"] = IntegerAttr(maxnreg, i64)
        super().__init__(properties=properties, regions=[Region(Block())])

    def verify_(self) -> None:
        for kind in self.param_kinds:
            if kind.data not in PARAM_KINDS:
                raise VerifyException(f"unknown kernel parameter kind {kind.data!r}")


Ptx = Dialect("ptx", [InstrOp, LabelOp, KernelOp], [RegType])


# ---------------------------------------------------------------------------------------------
# Printing.

SMEM_SYMBOL = "dsmem"


def print_ptx(module: ModuleOp, version: str = "8.0", target: str = "sm_90a") -> str:
    """The PTX text of every `ptx.kernel` in `module`."""
    kernels = [op for op in module.ops if isinstance(op, KernelOp)]
    lines = [
        "//",
        "// Generated by asyncdsl.",
        "//",
        f".version {version}",
        f".target {target}",
        ".address_size 64",
        "",
    ]
    if any(k.uses_dynamic_smem.value.data for k in kernels):
        lines += [f".extern .shared .align 1024 .b8 {SMEM_SYMBOL}[];", ""]
    for kernel in kernels:
        lines += _print_kernel(kernel)
    return "\n".join(lines) + "\n"


def _param_name(kernel: str, index: int) -> str:
    return f"{kernel}_param_{index}"


def _print_kernel(kernel: KernelOp) -> list[str]:
    name = kernel.sym_name.data
    params = []
    for index, kind in enumerate(kernel.param_kinds):
        pname = _param_name(name, index)
        if kind.data == "tensor_map":
            params.append(f"    .param .align 64 .b8 {pname}[128]")
        else:
            params.append(f"    .param .{kind.data} {pname}")
    lines = [f".visible .entry {name}("]
    lines.append(",\n".join(params))
    lines.append(")")
    x, y, z = kernel.reqntid.get_values()
    lines.append(f".reqntid {x}, {y}, {z}")
    if kernel.maxnreg is not None:
        lines.append(f".maxnreg {kernel.maxnreg.value.data}")
    if kernel.cluster is not None:
        cx, cy, cz = kernel.cluster.get_values()
        lines.append(".explicitcluster")
        lines.append(f".reqnctapercluster {cx}, {cy}, {cz}")
    lines.append("{")

    names = _RegisterNames()
    body = []
    for op in kernel.body.block.ops:
        if isinstance(op, LabelOp):
            body.append(f"${op.label.data}:")
        elif isinstance(op, InstrOp):
            body.append("    " + _format_instr(op, name, names))
        else:
            raise AssertionError(f"unexpected op {op.name} in ptx.kernel")
    lines += names.declarations()
    lines += body
    lines.append("    ret;")
    lines.append("}")
    lines.append("")
    return lines


def _format_instr(op: InstrOp, kernel: str, names: _RegisterNames) -> str:
    registers = op.registers
    pieces = list(_pieces(op.text.data))
    for i in range(1, len(pieces), 2):
        key = pieces[i]
        if type(key) is int:
            pieces[i] = names.name(registers[key])
        elif key == "smem":
            pieces[i] = SMEM_SYMBOL
        else:
            pieces[i] = _param_name(kernel, int(key[6:]))
    text = "".join(pieces)
    guard = op.guard
    if guard is not None:
        bang = "!" if op.guard_negated.value.data else ""
        text = f"@{bang}{names.name(guard)} {text}"
    return text


@functools.lru_cache(maxsize=4096)
def _pieces(text: str) -> tuple[str | int, ...]:
    """`text` split at its placeholders: literal text at even positions, between them the keys, a
    register's as its index. Cached: a kernel repeats few instruction texts many times, and
    splitting each anew cost a third of the printing."""
    pieces: list[str | int] = _PLACEHOLDER.split(text)
    for i in range(1, len(pieces), 2):
        if pieces[i].isdigit():
            pieces[i] = int(pieces[i])
    return tuple(pieces)


class _RegisterNames:
    """Assigns `%r1`, `%rd1`, `%p1`, ... to registers in order of first appearance."""

    def __init__(self) -> None:
        # Keyed by `id`: an SSA value hashes by its id too, but through a Python-level `__hash__`
        # called for every register every instruction names. The printed kernel keeps them alive.
        self._names: dict[int, str] = {}
        self._counts = {kind: 0 for kind in REGISTER_CLASSES}

    def name(self, value: SSAValue) -> str:
        found = self._names.get(id(value))
        if found is None:
            kind = value.type.kind.data
            self._counts[kind] += 1
            found = f"{REGISTER_CLASSES[kind][1]}{self._counts[kind]}"
            self._names[id(value)] = found
        return found

    def declarations(self) -> list[str]:
        return [
            f"    .reg {decl} {prefix}<{self._counts[kind] + 1}>;"
            for kind, (decl, prefix) in REGISTER_CLASSES.items()
            if self._counts[kind]
        ]
