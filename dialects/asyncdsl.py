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

from xdsl.ir import Dialect, Operation

from asyncdsl.dialects import (
    bulk_ops,
    collective_ops,
    copy_ops,
    core_ops,
    cp_async_ops,
    im2col_ops,
    prefetch_ops,
    row_gather_ops,
    tma_ops,
)
from asyncdsl.dialects.bulk_ops import BulkLoadOp, BulkStoreOp
from asyncdsl.dialects.collective_ops import ClusterCollectiveMaskOp, SmemSliceOp
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
from asyncdsl.dialects.cp_async_ops import AwaitCpAsyncCopyOp, CpAsyncLoadOp
from asyncdsl.dialects.im2col_ops import AsyncCopyIm2colOp, Im2colDescriptorAttr, TmaIm2colLoadOp
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
from asyncdsl.dialects.memory_attrs import ATTRIBUTES
from asyncdsl.dialects.prefetch_ops import AsyncPrefetchOp, TmaPrefetchOp
from asyncdsl.dialects.row_gather_ops import AsyncCopyRowsOp, TmaGather4Op, TmaScatter4Op
from asyncdsl.dialects.tma_ops import TmaLoadOp, TmaStoreOp
from asyncdsl.dialects.transform_attrs import TRANSFORM_ATTRS

__all__ = [
    "AllocBarriersOp",
    "AsyncCopyOp",
    "AwaitAsyncCopyOp",
    "TmaLoadOp",
    "TmaStoreOp",
    "BulkLoadOp",
    "BulkStoreOp",
    "CpAsyncLoadOp",
    "AwaitCpAsyncCopyOp",
    "AsyncPrefetchOp",
    "TmaPrefetchOp",
    "AsyncCopyIm2colOp",
    "Im2colDescriptorAttr",
    "TmaIm2colLoadOp",
    "AsyncCopyRowsOp",
    "TmaGather4Op",
    "TmaScatter4Op",
    "AllocSmemOp",
    "ArriveExpectTxOp",
    "ArriveOp",
    "CLUSTER_DIMS",
    "ClusterBarrierOp",
    "ClusterCollectiveMaskOp",
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
    "SmemSliceOp",
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
    *bulk_ops.OPERATIONS,
    *cp_async_ops.OPERATIONS,
    *prefetch_ops.OPERATIONS,
    *collective_ops.OPERATIONS,
    *im2col_ops.OPERATIONS,
    *row_gather_ops.OPERATIONS,
)

AsyncDSL = Dialect("asyncdsl", list(OPERATIONS), [*ATTRIBUTES, *im2col_ops.ATTRIBUTES, *TRANSFORM_ATTRS])
