"""The `asyncdsl` dialect: shared memory, mbarriers and asynchronous copies.

Two levels of copy ops live here:

- `asyncdsl.async_copy` is what the user wrote: a GMEM slice (starts + sizes, -1 marking a squeezed
  dim), a chain of transforms, swizzle, barrier and every knob of the reference system.
- `asyncdsl.tma_load` / `asyncdsl.tma_store` are what the hardware does: a TMA descriptor (as the
  host will encode it), coordinates in the descriptor's dims, a box landing in SMEM.
  `resolve-transforms` rewrites the first into the second.

Verifiers check what can be checked locally; the frontend runs them as each op is built and
reports failures at the user's source line, so the rules live in one place.
"""

from __future__ import annotations

from asyncdsl.dialects import copy_ops, core_ops, tma_ops
from asyncdsl.dialects.asyncdsl_attrs import ATTRIBUTES
from asyncdsl.dialects.copy_ops import AsyncCopyOp, AwaitAsyncCopyOp
from asyncdsl.dialects.core_ops import (
    AllocBarriersOp,
    AllocSmemOp,
    ArriveExpectTxOp,
    ArriveOp,
    ClusterBarrierOp,
    ClusterCtaIdOp,
    ClusterIdOp,
    CtaBarrierOp,
    FenceAsyncSmemOp,
    NumProgramsOp,
    ProgramIdOp,
    SmemViewOp,
    WaitOp,
    WarpgroupBarrierOp,
    WarpgroupIdxOp,
)
from asyncdsl.dialects.ir_utils import (
    CLUSTER_DIMS,
    IMPLEMENTATIONS,
    OOB_MODES,
    REDUCTIONS,
    SWIZZLE_BYTES,
    bool_prop,
    buffer_bytes,
    element_bits,
    int_prop,
    is_gmem,
    is_smem,
    shape_of,
    smem_type,
)
from asyncdsl.dialects.tma_ops import TmaLoadOp, TmaStoreOp
from asyncdsl.dialects.transform_attrs import TRANSFORM_ATTRS
from xdsl.ir import Dialect, Operation

__all__ = [
    "AllocBarriersOp",
    "AsyncCopyOp",
    "AwaitAsyncCopyOp",
    "TmaLoadOp",
    "TmaStoreOp",
    "AllocSmemOp",
    "ArriveExpectTxOp",
    "ArriveOp",
    "CLUSTER_DIMS",
    "ClusterBarrierOp",
    "ClusterCtaIdOp",
    "ClusterIdOp",
    "CtaBarrierOp",
    "FenceAsyncSmemOp",
    "IMPLEMENTATIONS",
    "NumProgramsOp",
    "OOB_MODES",
    "ProgramIdOp",
    "REDUCTIONS",
    "SWIZZLE_BYTES",
    "SmemViewOp",
    "WaitOp",
    "WarpgroupBarrierOp",
    "WarpgroupIdxOp",
    "bool_prop",
    "buffer_bytes",
    "element_bits",
    "int_prop",
    "is_gmem",
    "is_smem",
    "shape_of",
    "smem_type",
    "OPERATIONS",
    "AsyncDSL",
]

OPERATIONS: tuple[type[Operation], ...] = (
    *core_ops.OPERATIONS,
    *copy_ops.OPERATIONS,
    *tma_ops.OPERATIONS,
)

AsyncDSL = Dialect("asyncdsl", list(OPERATIONS), [*ATTRIBUTES, *TRANSFORM_ATTRS])
