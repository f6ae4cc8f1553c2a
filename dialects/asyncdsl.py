"""The `asyncdsl` dialect: one op module per feature, collected here into one xDSL `Dialect`.

Two levels of copy ops live in it:

- `asyncdsl.async_copy` (and the other user-level copies: im2col, gather/scatter rows,
  prefetch) is what the user wrote: a GMEM slice (starts + sizes, -1 marking a squeezed dim), a
  chain of transforms, swizzle, barrier and every knob of JAX Mosaic GPU's copy.
- `asyncdsl.tma_load` / `tma_store`, `bulk_load` / `bulk_store`, `cp_async_load`, ... are what
  the hardware does: a TMA descriptor (as the host will encode it) and coordinates in its dims,
  or a window of consecutive bytes.  `resolve-transforms` rewrites the first into the second.

Verifiers check what can be checked locally; the frontend runs them as each op is built and
reports failures at the user's source line, so the rules live in one place.  Kernel code and
passes import this module as `ir` and find every op and the shared helpers of `ir_utils` here.

| feature | ops module |
| --- | --- |
| ids, shared memory | `core_ops` |
| mbarriers, fences, barriers | `sync_ops` |
| warpgroups taking turns (named barriers) | `turns_ops` |
| the user's copy, waiting for stores | `copy_ops` |
| TMA tensor copies (and reductions) | `tma_ops` |
| contiguous bulk copies | `bulk_ops` |
| cp.async | `cp_async_ops` |
| cluster multicast (built by partition-collectives) | `collective_ops` |
| L2 prefetch | `prefetch_ops` |
| im2col | `im2col_ops` |
| gather4 / scatter4 rows | `row_gather_ops` |
| hints and the compiler's run-time checks | `assume_ops` |
| register tiles: making, broadcasting, reducing, relayouts | `tiles_ops` (elementwise math is \
`arith`/`math` on vectors) |
| comparisons, select and conversions of tiles (what `arith` has for scalars only) | `tile_math_ops` |
| register tiles to and from shared memory, masked GMEM windows, gathers | `tile_access_ops` |
| mutable register tiles (`asyncdsl.registers`) | `registers_ops` |
| profiler regions (`asyncdsl.region`) | `profile_ops` |
| warpgroup matrix multiply (`asyncdsl.wgmma`, `wgmma_wait`) | `wgmma_ops` |
| warpgroup roles and their register counts (`asyncdsl.warpgroup_role`) | `roles_ops` |
| several devices: device id, signals and their waits (peer copies: `peer` on the copy ops) | \
`distributed_ops` |
| an element of a GMEM integer array as an index | `index_load_ops` |
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from xdsl.ir import Attribute, Dialect, Operation, SSAValue

from asyncdsl.dialects.collective_ops import SmemSliceOp
from asyncdsl.dialects.core_ops import AllocSmemOp, SmemViewOp, SmemWindowOp
from asyncdsl.dialects.ir_utils import buffer_bytes, element_bits, is_gmem, is_smem, logical_shape, shape_of
from asyncdsl.dialects.ir_utils import constant_value, shaped_type, smem_layout

if TYPE_CHECKING:
    from asyncdsl.dialects.assume_ops import CheckOp, CheckTileOp, MultipleOfOp, check_message
    from asyncdsl.dialects.bulk_ops import BulkLoadOp, BulkStoreOp
    from asyncdsl.dialects.collective_ops import ClusterArriveOp, ClusterCollectiveMaskOp
    from asyncdsl.dialects.copy_ops import AsyncCopyOp, AwaitAsyncCopyOp
    from asyncdsl.dialects.core_ops import ClusterCtaIdOp, ClusterIdOp, NumProgramsOp, ProgramIdOp
    from asyncdsl.dialects.core_ops import WarpgroupIdxOp
    from asyncdsl.dialects.cp_async_ops import AwaitCpAsyncCopyOp, CpAsyncLoadOp
    from asyncdsl.dialects.distributed_ops import DeviceIdOp, SignalOp, WaitSignalOp
    from asyncdsl.dialects.im2col_ops import AsyncCopyIm2colOp, Im2colDescriptorAttr, TmaIm2colLoadOp
    from asyncdsl.dialects.index_load_ops import LoadIndexOp
    from asyncdsl.dialects.prefetch_ops import AsyncPrefetchOp, TmaPrefetchOp
    from asyncdsl.dialects.profile_ops import RegionBeginOp, RegionEndOp, region_names
    from asyncdsl.dialects.registers_ops import AllocRegistersOp, ReadRegistersOp, WriteRegistersOp
    from asyncdsl.dialects.roles_ops import WarpgroupRoleOp
    from asyncdsl.dialects.row_gather_ops import AsyncCopyRowsOp, TmaGather4Op, TmaScatter4Op
    from asyncdsl.dialects.sync_ops import AllocBarriersOp, ArriveExpectTxOp, ArriveOp, ClusterBarrierOp
    from asyncdsl.dialects.sync_ops import CtaBarrierOp, FenceAsyncSmemOp, WaitOp, WarpgroupBarrierOp
    from asyncdsl.dialects.tile_access_ops import SQUEEZED, GatherGmemOp, LoadGmemOp, LoadSmemOp
    from asyncdsl.dialects.tile_access_ops import ScatterGmemOp, StoreGmemOp, StoreSmemOp
    from asyncdsl.dialects.tile_math_ops import CompareOp, ConvertOp, SelectOp
    from asyncdsl.dialects.tiles_ops import BroadcastInDimOp, FullOp, IotaOp, ReduceOp, RelayoutOp, SplatOp
    from asyncdsl.dialects.tiles_ops import scratch_bytes
    from asyncdsl.dialects.tma_ops import TmaLoadOp, TmaStoreOp
    from asyncdsl.dialects.turns_ops import AllocTurnsOp, PassTurnOp, TakeTurnOp
    from asyncdsl.dialects.wgmma_ops import WgmmaOp, WgmmaOperandAttr, WgmmaWaitOp

    OPERATIONS: tuple[type[Operation], ...]
    ATTRIBUTES: tuple[type[Attribute], ...]
    AsyncDSL: Dialect

# The op modules in the dialect's order, and where each module keeps its attribute classes.
_OP_MODULES = (
    "core_ops", "sync_ops", "turns_ops", "copy_ops", "tma_ops", "bulk_ops", "cp_async_ops", "prefetch_ops",
    "collective_ops", "im2col_ops", "row_gather_ops", "assume_ops", "tiles_ops", "tile_math_ops",
    "tile_access_ops", "registers_ops", "profile_ops", "wgmma_ops", "roles_ops", "distributed_ops",
    "index_load_ops",
)
_ATTRIBUTE_TUPLES = (
    ("memory_attrs", "ATTRIBUTES"), ("descriptor_attrs", "ATTRIBUTES"), ("option_attrs", "ATTRIBUTES"),
    ("transform_attrs", "TRANSFORM_ATTRS"), ("im2col_ops", "ATTRIBUTES"), ("layout_attrs", "ATTRIBUTES"),
    ("wgmma_ops", "ATTRIBUTES"),
)

# The names this module passes on, by the op module that defines them.  An op module loads with
# the first use of one of its names (`__getattr__`): a compile loads the modules of the ops its
# kernel's IR holds (xDSL's definition of an op costs about a millisecond), the whole dialect
# loads only for `AsyncDSL` (parsing IR text) and `OPERATIONS`.
_EXPORTS = {
    name: module
    for module, names in (
        ("assume_ops", "CheckOp CheckTileOp MultipleOfOp check_message"),
        ("bulk_ops", "BulkLoadOp BulkStoreOp"),
        ("collective_ops", "ClusterArriveOp ClusterCollectiveMaskOp"),
        ("copy_ops", "AsyncCopyOp AwaitAsyncCopyOp"),
        ("core_ops", "ClusterCtaIdOp ClusterIdOp NumProgramsOp ProgramIdOp WarpgroupIdxOp"),
        ("cp_async_ops", "AwaitCpAsyncCopyOp CpAsyncLoadOp"),
        ("distributed_ops", "DeviceIdOp SignalOp WaitSignalOp"),
        ("im2col_ops", "AsyncCopyIm2colOp Im2colDescriptorAttr TmaIm2colLoadOp"),
        ("index_load_ops", "LoadIndexOp"),
        ("prefetch_ops", "AsyncPrefetchOp TmaPrefetchOp"),
        ("profile_ops", "RegionBeginOp RegionEndOp region_names"),
        ("registers_ops", "AllocRegistersOp ReadRegistersOp WriteRegistersOp"),
        ("roles_ops", "WarpgroupRoleOp"),
        ("row_gather_ops", "AsyncCopyRowsOp TmaGather4Op TmaScatter4Op"),
        ("sync_ops", "AllocBarriersOp ArriveExpectTxOp ArriveOp ClusterBarrierOp CtaBarrierOp "
                     "FenceAsyncSmemOp WaitOp WarpgroupBarrierOp"),
        ("tile_access_ops", "SQUEEZED GatherGmemOp LoadGmemOp LoadSmemOp ScatterGmemOp StoreGmemOp "
                            "StoreSmemOp"),
        ("tile_math_ops", "CompareOp ConvertOp SelectOp"),
        ("tiles_ops", "BroadcastInDimOp FullOp IotaOp ReduceOp RelayoutOp SplatOp scratch_bytes"),
        ("tma_ops", "TmaLoadOp TmaStoreOp"),
        ("turns_ops", "AllocTurnsOp PassTurnOp TakeTurnOp"),
        ("wgmma_ops", "WgmmaOp WgmmaOperandAttr WgmmaWaitOp"),
    )
    for name in names.split()
}

__all__ = [
    "OPERATIONS",
    "SQUEEZED",
    "AllocBarriersOp",
    "AllocRegistersOp",
    "AllocSmemOp",
    "AllocTurnsOp",
    "ArriveExpectTxOp",
    "ArriveOp",
    "AsyncCopyIm2colOp",
    "AsyncCopyOp",
    "AsyncCopyRowsOp",
    "AsyncDSL",
    "AsyncPrefetchOp",
    "AwaitAsyncCopyOp",
    "AwaitCpAsyncCopyOp",
    "BroadcastInDimOp",
    "BulkLoadOp",
    "BulkStoreOp",
    "CheckOp",
    "CheckTileOp",
    "ClusterArriveOp",
    "ClusterBarrierOp",
    "ClusterCollectiveMaskOp",
    "ClusterCtaIdOp",
    "ClusterIdOp",
    "CompareOp",
    "ConvertOp",
    "CpAsyncLoadOp",
    "CtaBarrierOp",
    "DeviceIdOp",
    "FenceAsyncSmemOp",
    "FullOp",
    "GatherGmemOp",
    "Im2colDescriptorAttr",
    "IotaOp",
    "LoadGmemOp",
    "LoadIndexOp",
    "LoadSmemOp",
    "MultipleOfOp",
    "NumProgramsOp",
    "PassTurnOp",
    "ProgramIdOp",
    "ReadRegistersOp",
    "ReduceOp",
    "RegionBeginOp",
    "RegionEndOp",
    "RelayoutOp",
    "ScatterGmemOp",
    "SelectOp",
    "SignalOp",
    "SmemSliceOp",
    "SmemViewOp",
    "SmemWindowOp",
    "SplatOp",
    "StoreGmemOp",
    "StoreSmemOp",
    "TakeTurnOp",
    "TmaGather4Op",
    "TmaIm2colLoadOp",
    "TmaLoadOp",
    "TmaPrefetchOp",
    "TmaScatter4Op",
    "TmaStoreOp",
    "WaitOp",
    "WaitSignalOp",
    "WarpgroupBarrierOp",
    "WarpgroupIdxOp",
    "WarpgroupRoleOp",
    "WgmmaOp",
    "WgmmaOperandAttr",
    "WgmmaWaitOp",
    "WriteRegistersOp",
    "buffer_bytes",
    "check_message",
    "element_bits",
    "is_gmem",
    "is_smem",
    "logical_shape",
    "region_names",
    "root_buffer",
    "static_smem_offset",
    "scratch_bytes",
    "shape_of",
    "shaped_type",
    "smem_layout",
]


def _module(name: str):
    return importlib.import_module(f"asyncdsl.dialects.{name}")


def _whole_dialect(name: str):
    if name == "OPERATIONS":
        return tuple(op for module in _OP_MODULES for op in _module(module).OPERATIONS)
    if name == "ATTRIBUTES":
        return tuple(attr for module, names in _ATTRIBUTE_TUPLES for attr in getattr(_module(module), names))
    return Dialect("asyncdsl", list(__getattr__("OPERATIONS")), list(__getattr__("ATTRIBUTES")))


def __getattr__(name: str):
    if name in ("OPERATIONS", "ATTRIBUTES", "AsyncDSL"):
        value = _whole_dialect(name)
    elif name in _EXPORTS:
        value = getattr(_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # the next use is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, "OPERATIONS", "ATTRIBUTES", "AsyncDSL"})


def root_buffer(value: SSAValue) -> SSAValue:
    """The shared-memory allocation a buffer value views (through leading-index views, windows
    and the per-CTA slices of collective copies)."""
    while isinstance(value.owner, (SmemViewOp, SmemWindowOp, SmemSliceOp)):
        value = value.owner.source
    return value


def static_smem_offset(value: SSAValue) -> int | None:
    """The bytes from its allocation's start at which a buffer value lies, where only constant
    indices lead there (None: a traced index moves it)."""
    offset = 0
    while not isinstance(value.owner, AllocSmemOp):
        owner = value.owner
        if isinstance(owner, SmemViewOp):
            shape = shape_of(owner.source)
            stride = buffer_bytes(owner.source.type)
            for index, size in zip(owner.indices, shape):
                stride //= size
                known = constant_value(index)
                if known is None:
                    return None
                offset += known * stride
        elif isinstance(owner, SmemWindowOp):
            known = constant_value(owner.start)
            if known is None:
                return None
            offset += known * owner.unit_bytes
        elif isinstance(owner, SmemSliceOp):
            known = constant_value(owner.offset)
            if known is None:
                return None
            offset += known
        else:
            return None
        value = owner.source
    return offset
