"""The interpreter's core ops: where the running program is, and its shared-memory buffers."""

from __future__ import annotations

from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.interpret.diagnosis import diagnosed, origin
from asyncdsl.interpret.functions import WarpgroupFunctions, index_value
from asyncdsl.interpret.memory import SmemBuffer
from asyncdsl.interpret.operands import allocated_offset


@register_impls
class CoreFunctions(WarpgroupFunctions):
    """Program, cluster and warpgroup ids; shared-memory buffers and views."""

    @impl(ir.ProgramIdOp)
    def run_program_id(self, interpreter: Interpreter, op: ir.ProgramIdOp, args: PythonValues):
        return (index_value(interpreter, self.warpgroup.cta.program_id[op.axis.value.data]),)

    @impl(ir.NumProgramsOp)
    def run_num_programs(self, interpreter: Interpreter, op: ir.NumProgramsOp, args: PythonValues):
        return (index_value(interpreter, self.warpgroup.cta.launch.grid[op.axis.value.data]),)

    @impl(ir.ClusterCtaIdOp)
    def run_cluster_cta_id(self, interpreter: Interpreter, op: ir.ClusterCtaIdOp, args: PythonValues):
        return (index_value(interpreter, self.warpgroup.cta.cluster_cta_id[op.axis.value.data]),)

    @impl(ir.ClusterIdOp)
    def run_cluster_id(self, interpreter: Interpreter, op: ir.ClusterIdOp, args: PythonValues):
        return (index_value(interpreter, self.warpgroup.cta.cluster_id[op.axis.value.data]),)

    @impl(ir.WarpgroupIdxOp)
    def run_warpgroup_idx(self, interpreter: Interpreter, op: ir.WarpgroupIdxOp, args: PythonValues):
        return (index_value(interpreter, self.warpgroup.index),)

    @impl(ir.AllocSmemOp)
    @diagnosed
    def run_alloc_smem(self, interpreter: Interpreter, op: ir.AllocSmemOp, args: PythonValues):
        buffer = SmemBuffer.of_type(allocated_offset(op), op.result.type, origin(op))
        self.warpgroup.cta.smem.check(buffer.offset, buffer.nbytes,
                                      f"the buffer allocated at {buffer.origin}")
        return (buffer,)

    @impl(ir.SmemViewOp)
    @diagnosed
    def run_smem_view(self, interpreter: Interpreter, op: ir.SmemViewOp, args: PythonValues):
        source, *indices = args
        return (source.view(tuple(i.value.data for i in indices)),)

    @impl(ir.SmemWindowOp)
    @diagnosed
    def run_smem_window(self, interpreter: Interpreter, op: ir.SmemWindowOp, args: PythonValues):
        source, start = args
        size = op.size.value.data
        return (source.window(start.value.data, size, op.axis, op.extent, op.step, op.result.type),)
