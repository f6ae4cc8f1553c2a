"""The interpreter's part of the user-level copy that survives resolution: waiting for the
warpgroup's bulk groups (`await_async_copy`).  Stores write GMEM when issued, so `read_only` or
not, the groups are done; what the wait changes is what the race log lets the warpgroup touch."""

from __future__ import annotations

from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.interpret.diagnosis import diagnosed
from asyncdsl.interpret.functions import WarpgroupFunctions
from asyncdsl.interpret.waits import Proceed
from asyncdsl.ir_locations import from_ir_location


@register_impls
class CopyFunctions(WarpgroupFunctions):
    """Waiting for bulk groups."""

    @impl(ir.AwaitAsyncCopyOp)
    @diagnosed
    def run_await_async_copy(self, interpreter: Interpreter, op: ir.AwaitAsyncCopyOp, args: PythonValues):
        self.warpgroup.wait_until(Proceed("awaits its bulk copies", from_ir_location(op)))
        # Stores write GMEM when issued, so `read_only` or not, the groups are done.
        self.warpgroup.retire_bulk_groups(op.allow_groups.value.data)
        if not op.read_only.value.data:
            warpgroup = self.warpgroup
            awaited = warpgroup.committed_groups - op.allow_groups.value.data
            warpgroup.writes_awaited_groups = max(warpgroup.writes_awaited_groups, awaited)
        return ()
