"""The `ptx` dialect: a thin model of PTX, one op per instruction, printed verbatim.

An instruction op (`ptx_instr.Instruction`) carries its text with `#{i}` placeholders for its
registers; its class says what the instruction is and declares its effects (`ptx_effects`):
register arithmetic (`ptx.alu`), plain memory accesses (`ptx.mem`), branches (`ptx.bra`),
barriers, fences and mbarrier operations (`ptx_sync_ops`), the asynchronous copies, tensor-core
instructions and their commit groups (`ptx_async_ops`), and `ptx.instr` for the few whose
effects no pass needs. `ptx.label` marks a branch target. `ptx.kernel` holds one entry point
as a flat list of these ops. The printer (`print_ptx`) assigns register names and writes the
module.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import cast

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, opt_prop_def, prop_def, region_def, traits_def
from xdsl.traits import IsolatedFromAbove, NoTerminator
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ptx_async_ops import BulkCommitOp, BulkLoadOp, BulkPrefetchOp, BulkStoreOp
from asyncdsl.dialects.ptx_async_ops import BulkWaitOp, CpAsyncCommitOp, CpAsyncOp, CpAsyncWaitAllOp
from asyncdsl.dialects.ptx_async_ops import CpAsyncWaitOp, WgmmaCommitOp, WgmmaFenceOp, WgmmaMmaOp
from asyncdsl.dialects.ptx_async_ops import WgmmaWaitOp
from asyncdsl.dialects.ptx_instr import PLACEHOLDER, REGISTER_CLASSES, AluOp, BranchOp, InstrOp, Instruction
from asyncdsl.dialects.ptx_instr import MemoryOp, RegType
from asyncdsl.dialects.ptx_sync_ops import BarrierOp, ClusterBarrierOp, MbarrierArriveOp
from asyncdsl.dialects.ptx_sync_ops import MbarrierInitFenceOp, MbarrierInitOp, MbarrierTryWaitOp
from asyncdsl.dialects.ptx_sync_ops import ProxyFenceOp
from asyncdsl.hw.options import PtxVersion

PARAM_KINDS = ("u64", "s32", "f32", "tensor_map")


@irdl_op_definition
class LabelOp(IRDLOperation):
    """A branch target `$name:`."""

    name = "ptx.label"
    label = prop_def(StringAttr)

    def __init__(self, label: str):
        super().__init__(properties={"label": StringAttr(label)})


class EntryParameters(IRDLOperation):
    """The parameters of an `.entry`, by kind in order (`PARAM_KINDS`): 64-bit pointers, 32-bit
    integers and floats, and 128-byte TMA descriptors."""

    param_kinds = prop_def(ArrayAttr)

    def parameters(self, kernel: str) -> list[str]:
        """The parameter declarations, each named `<kernel>_param_<index>`."""
        declared = []
        for index, kind in enumerate(self.param_kinds):
            name = _param_name(kernel, index)
            if kind.data == "tensor_map":
                declared.append(f"    .param .align 64 .b8 {name}[128]")
            else:
                declared.append(f"    .param .{kind.data} {name}")
        return declared

    def verify_(self) -> None:
        for kind in self.param_kinds:
            if kind.data not in PARAM_KINDS:
                raise VerifyException(f"unknown kernel parameter kind {kind.data!r}")


class EntryDirectives(IRDLOperation):
    """The performance-tuning directives of an `.entry` that ptxas reads: the CTA's thread count
    (`.reqntid`), the cluster's CTA count where the kernel has one (`.explicitcluster`,
    `.reqnctapercluster`) and the register count at entry (`.maxnreg`)."""

    reqntid = prop_def(DenseArrayBase)
    cluster = opt_prop_def(DenseArrayBase)
    # `.maxnreg`: with `setmaxnreg` in the body, ptxas needs the count at entry stated; `.reqntid`
    # alone left it undetermined (C7508) whenever the kernel needed fewer registers than the cap.
    maxnreg = opt_prop_def(IntegerAttr)

    def directives(self) -> list[str]:
        x, y, z = self.reqntid.get_values()
        lines = [f".reqntid {x}, {y}, {z}"]
        if self.maxnreg is not None:
            lines.append(f".maxnreg {self.maxnreg.value.data}")
        if self.cluster is not None:
            cx, cy, cz = self.cluster.get_values()
            lines += [".explicitcluster", f".reqnctapercluster {cx}, {cy}, {cz}"]
        return lines


@irdl_op_definition
class KernelOp(EntryParameters, EntryDirectives):
    """One `.entry`: its parameters, launch directives and instructions."""

    name = "ptx.kernel"

    sym_name = prop_def(StringAttr)
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


INSTRUCTIONS: tuple[type[Instruction], ...] = (
    InstrOp, AluOp, MemoryOp, BranchOp,
    BarrierOp, ClusterBarrierOp, ProxyFenceOp, MbarrierInitFenceOp,
    MbarrierInitOp, MbarrierArriveOp, MbarrierTryWaitOp,
    CpAsyncOp, BulkLoadOp, BulkStoreOp, BulkPrefetchOp, WgmmaFenceOp, WgmmaMmaOp,
    CpAsyncCommitOp, BulkCommitOp, WgmmaCommitOp, CpAsyncWaitOp, CpAsyncWaitAllOp, BulkWaitOp, WgmmaWaitOp,
)

Ptx = Dialect("ptx", [*INSTRUCTIONS, LabelOp, KernelOp], [RegType])

# The instruction classes are imported from their modules through this one.
__all__ = [
    "PARAM_KINDS", "REGISTER_CLASSES", "SMEM_SYMBOL", "INSTRUCTIONS", "Ptx", "RegType", "LabelOp",
    "KernelOp", "print_ptx", "InstrOp", "AluOp", "MemoryOp", "BranchOp", "BarrierOp", "ClusterBarrierOp",
    "ProxyFenceOp", "MbarrierInitFenceOp", "MbarrierInitOp", "MbarrierArriveOp",
    "MbarrierTryWaitOp", "CpAsyncOp", "BulkLoadOp", "BulkStoreOp", "BulkPrefetchOp", "WgmmaFenceOp",
    "WgmmaMmaOp", "CpAsyncCommitOp", "BulkCommitOp", "WgmmaCommitOp", "CpAsyncWaitOp", "CpAsyncWaitAllOp",
    "BulkWaitOp", "WgmmaWaitOp", "Instruction",
]


# ---------------------------------------------------------------------------------------------
# Printing.

SMEM_SYMBOL = "dsmem"


def print_ptx(module: ModuleOp, version: PtxVersion = (8, 0), target: str = "sm_90a") -> str:
    """The PTX text of every `ptx.kernel` in `module`, for PTX ISA `version` (major, minor)."""
    kernels = [op for op in module.ops if isinstance(op, KernelOp)]
    lines = [
        "//",
        "// Generated by asyncdsl.",
        "//",
        f".version {version[0]}.{version[1]}",
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
    lines = [f".visible .entry {name}("]
    lines.append(",\n".join(kernel.parameters(name)))
    lines.append(")")
    lines += kernel.directives()
    lines.append("{")

    names = _RegisterNames()
    body = []
    for op in kernel.body.block.ops:
        if isinstance(op, LabelOp):
            body.append(f"${op.label.data}:")
        elif isinstance(op, Instruction):
            body.append("    " + _format_instr(op, name, names))
        else:
            raise AssertionError(f"unexpected op {op.name} in ptx.kernel")
    lines += names.declarations()
    lines += body
    lines.append("    ret;")
    lines.append("}")
    lines.append("")
    return lines


def _format_instr(op: Instruction, kernel: str, names: _RegisterNames) -> str:
    registers = op.registers
    pieces = list(_pieces(op.text.data))
    for i in range(1, len(pieces), 2):
        key = pieces[i]
        if isinstance(key, int):
            pieces[i] = names.name(registers[key])
        elif key == "smem":
            pieces[i] = SMEM_SYMBOL
        else:
            pieces[i] = _param_name(kernel, int(key[6:]))
    text = "".join(cast("list[str]", pieces))  # every key is its text now
    negated = op.guard_negated
    if negated is not None:
        bang = "!" if negated.value.data else ""
        text = f"@{bang}{names.name(op.operands[0])} {text}"
    return text


@functools.lru_cache(maxsize=4096)
def _pieces(text: str) -> tuple[str | int, ...]:
    """`text` split at its placeholders: literal text at even positions, between them the keys, a
    register's as its index. Cached: a kernel repeats few instruction texts many times, and
    splitting each anew cost a third of the printing."""
    split: list[str] = PLACEHOLDER.split(text)
    pieces: list[str | int] = list(split)
    for i in range(1, len(split), 2):
        if split[i].isdigit():
            pieces[i] = int(split[i])
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
            register = value.type
            assert isinstance(register, RegType)
            kind = register.kind.data
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
