"""asyncdsl: Hopper kernels in Python, built around asynchronous data movement.

    import asyncdsl as ad

    @ad.kernel(grid=lambda x, y, B: (x.shape[0] // B, x.shape[1] // B))
    def copy(x, y, B: ad.constexpr):
        i, j = ad.program_id(0), ad.program_id(1)
        buf = ad.smem((B, B), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(i * B, B), ad.ds(j * B, B)], buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y.at[ad.ds(i * B, B), ad.ds(j * B, B)])
        ad.await_async_copy(0)
"""

from asyncdsl.dtypes import (
    DType,
    bfloat16,
    float4_e2m1fn,
    float8_e4m3fn,
    float8_e5m2,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    int4,
    int8,
    int16,
    int32,
    int64,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
)
from asyncdsl.errors import (
    ArgumentError,
    AssumptionError,
    AsyncDSLError,
    CopyError,
    DeadlockError,
    InterpretError,
    LayoutError,
    NotOnGpuYetError,
    RaceError,
    ResourceError,
    TraceError,
    TransformError,
    UnsupportedTargetError,
)
from asyncdsl.frontend.assume import multiple_of
from asyncdsl.frontend.control import range, when
from asyncdsl.frontend.copy import CopyPartition, async_copy, await_async_copy, await_cp_async_copy
from asyncdsl.frontend.core import (
    cdiv,
    cluster_cta_id,
    cluster_id,
    cluster_shape,
    num_programs,
    program_id,
    smem,
    warpgroup_idx,
)
from asyncdsl.frontend.distributed import device_id, num_devices, signal, wait_signal
from asyncdsl.frontend.im2col import async_copy_im2col
from asyncdsl.frontend.kernel import Kernel, constexpr, kernel
from asyncdsl.frontend.persistent import PersistentGrid, persistent_grid
from asyncdsl.frontend.pipeline import Pipeline
from asyncdsl.frontend.prefetch import async_prefetch
from asyncdsl.frontend.profile import region
from asyncdsl.frontend.profile_report import Profile
from asyncdsl.frontend.refs import ds
from asyncdsl.frontend.registers import RegisterRef, registers
from asyncdsl.frontend.roles import warpgroup_role
from asyncdsl.frontend.row_gather import async_gather, async_scatter
from asyncdsl.frontend.specialize import ArraySpec
from asyncdsl.frontend.sync import barrier, cluster_barrier, cta_barrier, fence_async_smem, warpgroup_barrier
from asyncdsl.frontend.tile_access import load, store
from asyncdsl.frontend.tiles import (
    RegisterTile,
    cos,
    exp2,
    fma,
    full,
    iota,
    log2,
    maximum,
    minimum,
    rsqrt,
    sin,
    tanh,
    where,
    zeros,
)
from asyncdsl.frontend.wgmma import wgmma, wgmma_wait
from asyncdsl.hw.fragments import WGMMA, WGMMA_COL, WGMMA_ROW, WGMMA_TRANSPOSED, strided
from asyncdsl.hw.transforms import (
    CollapseLeadingIndicesTransform,
    DropUnitDimsTransform,
    MemRefTransform,
    Rounding,
    TileTransform,
    TransposeTransform,
)

__version__ = "0.1.0"
