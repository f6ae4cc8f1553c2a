"""What resolving a user's copy reads off it and its kernel that its verifier and the frontend
guarantee, as the types the hardware ops take."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import BlockArgument, Operation, SSAValue

from asyncdsl.dialects.copy_bases import OptionalBarrierTarget


def enclosing_kernel(op: Operation) -> func.FuncOp:
    """The kernel function `op` is in (through any loops and conditionals)."""
    parent = op.parent_op()
    while not isinstance(parent, func.FuncOp):
        assert parent is not None, f"{op.name} is outside every kernel"
        parent = parent.parent_op()
    return parent


def argument_index(gmem: SSAValue) -> int:
    """The kernel parameter a GMEM array is (the host encodes its tensor maps by it): every
    GMEM array a kernel names is one of its arguments."""
    assert isinstance(gmem, BlockArgument), "GMEM arrays are kernel arguments"
    return gmem.index


def load_barrier(copy: OptionalBarrierTarget) -> tuple[SSAValue, SSAValue]:
    """The barriers and the index of the one a TMA load completes on, which its verifier
    requires it to name."""
    assert copy.barriers is not None and copy.barrier_index is not None, "a TMA load names its barrier"
    return copy.barriers, copy.barrier_index
