"""PTX instructions of the asynchronous engines: `cp.async`, the bulk and tensor copies (TMA),
the tensor cores (`wgmma`), and the commit groups and waits that track their completion.

A copy keeps its text (the PTX ISA spells one instruction per dimension, direction, load mode
and completion mechanism); its class says which proxy it accesses memory through and what it
completes on. Commits and waits are held in their fields, from which their text is made.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import irdl_op_definition, opt_prop_def, prop_def, traits_def

from asyncdsl.dialects.ptx_effects import AccessesMemory, ActsOn, Fences
from asyncdsl.dialects.ptx_instr import FieldedInstruction, Instruction


@irdl_op_definition
class CpAsyncOp(Instruction):
    """`cp.async`: one thread's copy of 4 to 16 bytes from global into shared memory, through the
    generic proxy, completing in the thread's `cp.async` group (or on an mbarrier it arrives on
    with `cp.async.mbarrier.arrive`)."""

    name = "ptx.cp_async"
    traits = traits_def(AccessesMemory("generic"), ActsOn("start", "cp.async group"))


@irdl_op_definition
class BulkLoadOp(Instruction):
    """A bulk or tensor copy into shared memory (`cp.async.bulk[.tensor]...shared::cluster.global`:
    tile, im2col, gather4), through the async proxy, completing on an mbarrier's transaction
    count."""

    name = "ptx.bulk_load"
    traits = traits_def(AccessesMemory("async"), ActsOn("start", "mbarrier"))


@irdl_op_definition
class BulkStoreOp(Instruction):
    """A bulk or tensor copy (or reduction) out of shared memory into global memory, through the
    async proxy, completing in the thread's bulk group."""

    name = "ptx.bulk_store"
    traits = traits_def(AccessesMemory("async"), ActsOn("start", "bulk group"))


@irdl_op_definition
class BulkPrefetchOp(Instruction):
    """`cp.async.bulk.prefetch.tensor`: brings a tensor box into L2; nothing waits for it."""

    name = "ptx.bulk_prefetch"
    traits = traits_def(AccessesMemory("async"))


@irdl_op_definition
class WgmmaMmaOp(Instruction):
    """`wgmma.mma_async`: a warpgroup's matrix multiply-accumulate reading shared memory through
    the async proxy, completing in the warpgroup's wgmma group."""

    name = "ptx.wgmma_mma"
    traits = traits_def(AccessesMemory("async"), ActsOn("start", "wgmma group"))


class _Spelled(FieldedInstruction):
    """An instruction of one spelling, `SPELLING`, and no fields."""

    SPELLING: ClassVar[str]

    def __init__(self, guard: SSAValue | None = None):
        super().__init__(self.SPELLING, (), (), guard)

    def spelling(self) -> str:
        return self.SPELLING


@irdl_op_definition
class WgmmaFenceOp(_Spelled):
    """`wgmma.fence`: orders the warpgroup's register and shared-memory accesses before the
    `wgmma.mma_async` that read them."""

    name = "ptx.wgmma_fence"
    traits = traits_def(Fences("async"))
    SPELLING: ClassVar[str] = "wgmma.fence.sync.aligned;"


@irdl_op_definition
class CpAsyncCommitOp(_Spelled):
    """`cp.async.commit_group`: closes the thread's pending `cp.async` copies into one group, the
    unit `cp.async.wait_group` counts."""

    name = "ptx.cp_async_commit"
    traits = traits_def(ActsOn("close", "cp.async group"))
    SPELLING: ClassVar[str] = "cp.async.commit_group;"


@irdl_op_definition
class BulkCommitOp(_Spelled):
    """`cp.async.bulk.commit_group`: closes the thread's pending bulk stores into one bulk group,
    the unit `cp.async.bulk.wait_group` counts."""

    name = "ptx.bulk_commit"
    traits = traits_def(ActsOn("close", "bulk group"))
    SPELLING: ClassVar[str] = "cp.async.bulk.commit_group;"


@irdl_op_definition
class WgmmaCommitOp(_Spelled):
    """`wgmma.commit_group`: closes the warpgroup's pending `wgmma.mma_async` into one group, the
    unit `wgmma.wait_group` counts."""

    name = "ptx.wgmma_commit"
    traits = traits_def(ActsOn("close", "wgmma group"))
    SPELLING: ClassVar[str] = "wgmma.commit_group.sync.aligned;"


@irdl_op_definition
class CpAsyncWaitAllOp(_Spelled):
    """`cp.async.wait_all`: every `cp.async` of the thread, committed or not, has landed."""

    name = "ptx.cp_async_wait_all"
    traits = traits_def(ActsOn("wait", "cp.async group"))
    SPELLING: ClassVar[str] = "cp.async.wait_all;"


class _Wait(FieldedInstruction):
    """Waits until at most `pending` of the engine's commit groups are incomplete (`read`: only
    until their sources have been read); `HEAD` spells the instruction before that count."""

    HEAD: ClassVar[str]

    pending = prop_def(IntegerAttr)
    read = opt_prop_def(IntegerAttr)

    def __init__(self, pending: int, guard: SSAValue | None = None, read: bool = False):
        fields: dict[str, Attribute] = {"pending": IntegerAttr(pending, i64)}
        if read:
            fields["read"] = IntegerAttr(1, i64)
        super().__init__(self._text(pending, read), (), (), guard, False, fields)

    @classmethod
    def _text(cls, pending: int, read: bool) -> str:
        return f"{cls.HEAD}{'.read' if read else ''} {pending};"

    def spelling(self) -> str:
        return self._text(self.pending.value.data, self.read is not None)


@irdl_op_definition
class CpAsyncWaitOp(_Wait):
    """`cp.async.wait_group n` (a thread's own copies)."""

    name = "ptx.cp_async_wait"
    traits = traits_def(ActsOn("wait", "cp.async group"))
    HEAD: ClassVar[str] = "cp.async.wait_group"


@irdl_op_definition
class BulkWaitOp(_Wait):
    """`cp.async.bulk.wait_group[.read] n`: with `read`, only until the groups' sources have been
    read (their shared memory is free again), not until their writes are visible."""

    name = "ptx.bulk_wait"
    traits = traits_def(ActsOn("wait", "bulk group"))
    HEAD: ClassVar[str] = "cp.async.bulk.wait_group"


@irdl_op_definition
class WgmmaWaitOp(_Wait):
    """`wgmma.wait_group.sync.aligned n` (the warpgroup's multiply-accumulates)."""

    name = "ptx.wgmma_wait"
    traits = traits_def(ActsOn("wait", "wgmma group"))
    HEAD: ClassVar[str] = "wgmma.wait_group.sync.aligned"
