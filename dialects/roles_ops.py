"""Warpgroup roles: a region of kernel code that only some warpgroups of each CTA run, optionally
with its own per-thread register count (`setmaxnreg`).

    "asyncdsl.warpgroup_role"() <{warpgroups = array<i64: 0, 1>, registers = 232 : i64}> ({
      ...                                   // only warpgroups 0 and 1 run this
    }) : () -> ()

The op checks what is local (a non-empty set of distinct warpgroups, a register count
`setmaxnreg` can take, no role inside another); the rules that involve every role of the kernel
(disjoint sets, covering every warpgroup, the register budget, `asyncdsl.hw.roles`) are the
frontend's, which sees them all when the trace ends.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, i64
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.irdl import IRDLOperation, irdl_op_definition, opt_prop_def, prop_def, region_def, traits_def
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.ir_utils import int_prop
from asyncdsl.errors import TraceError
from asyncdsl.hw.roles import check_registers


@irdl_op_definition
class WarpgroupRoleOp(IRDLOperation):
    """Its body runs only in the warpgroups `warpgroups` of each CTA, which first set their
    per-thread register count to `registers` (when given)."""

    name = "asyncdsl.warpgroup_role"
    warpgroups = prop_def(DenseArrayBase)
    registers = opt_prop_def(IntegerAttr[I64])
    body = region_def("single_block")
    traits = traits_def(NoTerminator())

    def __init__(self, warpgroups: Sequence[int], registers: int | None = None, body: Block | None = None):
        properties: dict[str, Attribute] = {"warpgroups": DenseArrayBase.from_list(i64, list(warpgroups))}
        if registers is not None:
            properties["registers"] = int_prop(registers)
        super().__init__(properties=properties, regions=[Region(body or Block())])

    @property
    def warpgroup_indices(self) -> tuple[int, ...]:
        return tuple(self.warpgroups.get_values())

    @property
    def register_count(self) -> int | None:
        return self.registers.value.data if self.registers is not None else None

    def verify_(self) -> None:
        indices = self.warpgroup_indices
        if not indices or any(index < 0 for index in indices) or len(set(indices)) != len(indices):
            raise VerifyException(f"a role names distinct warpgroups (at least one), got {indices}")
        if self.registers is not None:
            try:
                check_registers(self.registers.value.data)
            except TraceError as error:
                raise VerifyException(error.message) from None
        parent = self.parent_op()
        while parent is not None:
            if isinstance(parent, WarpgroupRoleOp):
                raise VerifyException(
                    f"roles may not nest: this role (warpgroups {indices}) is inside the role of "
                    f"warpgroups {parent.warpgroup_indices}"
                )
            parent = parent.parent_op()


OPERATIONS: tuple[type[Operation], ...] = (WarpgroupRoleOp,)
