"""Warpgroup roles in the interpreter: a role's body runs in its warpgroups only.

`registers` is not modelled: the interpreter keeps no register file, so a role's register count
changes nothing here (the frontend has already checked the budget that `setmaxnreg` needs on the
GPU).
"""

from __future__ import annotations

from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.interpret.functions import WarpgroupFunctions


@register_impls
class RolesFunctions(WarpgroupFunctions):
    """`asyncdsl.warpgroup_role`."""

    @impl(ir.WarpgroupRoleOp)
    def run_warpgroup_role(self, interpreter: Interpreter, op: ir.WarpgroupRoleOp, args: PythonValues):
        if self.warpgroup.index in op.warpgroup_indices:
            interpreter.run_ssacfg_region(op.body, (), "warpgroup_role")
        return ()
