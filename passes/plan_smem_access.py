"""`plan-smem-access`: what the tensor cores are told of each shared-memory wgmma operand.

Expects: `asyncdsl.wgmma` ops as traced (their verifier already accepted the operands' layouts).
Guarantees: every SMEM operand carries its plan (`a_plan`, `b_plan`: `hw.wgmma.OperandPlan` as a
`#asyncdsl.wgmma_operand`): K-major or MN-major, swizzle, LBO and SBO, and the byte offset of
each K step and 64-row group from the buffer's address.  The lowering ORs the address onto
these constants; the interpreter encodes the same descriptors and reads them back as the
hardware does.

Example: a (128, 64) bf16 A tiled (8, 64) with the 128-byte swizzle and a (64, 256) B alike give

    asyncdsl.wgmma %acc, %a, %b, %true {a_plan = #asyncdsl.wgmma_operand<k_major = 1, swizzle = 128,
        lbo = 16, sbo = 1024, k_offsets = [0, 32, 64, 96], mn_offsets = [0, 8192]>,
        b_plan = #asyncdsl.wgmma_operand<k_major = 0, swizzle = 128, lbo = 1024, sbo = 4096,
        k_offsets = [0, 8192, 16384, 24576], mn_offsets = [0]>} ...
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from asyncdsl.dialects import asyncdsl as ir


@dataclass(frozen=True)
class PlanSmemAccess(ModulePass):
    name = "plan-smem-access"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for wgmma in op.walk():
            if not isinstance(wgmma, ir.WgmmaOp):
                continue
            a_plan, b_plan = wgmma.operand_plans()
            if a_plan is not None:
                wgmma.a_plan = ir.WgmmaOperandAttr.from_spec(a_plan)
            wgmma.b_plan = ir.WgmmaOperandAttr.from_spec(b_plan)
