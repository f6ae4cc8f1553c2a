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

from __future__ import annotations

import importlib

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
    DistributedError,
    InterpretError,
    LayoutError,
    PerformanceWarning,
    RaceError,
    ResourceError,
    TraceError,
    TransformError,
    UnsupportedTargetError,
)
from asyncdsl.frontend.cdiv import cdiv
from asyncdsl.jit.autotune import Autotuned, Choice, autotune
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import Kernel, kernel
from asyncdsl.jit.persistent import PersistentGrid, persistent_grid
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.jit.warmup import Specialization, WarmupReport, warmup

# What kernel bodies call comes with the compiler (xDSL, the dialects, the passes): loaded on first
# use, so that `import asyncdsl` and launches of kernels compiled by earlier processes (their
# binaries come from the disk, `runtime/binary_cache.py`) never load it.
_LAZY = {
    "multiple_of": "asyncdsl.frontend.assume",
    "range": "asyncdsl.frontend.control",
    "when": "asyncdsl.frontend.control",
    "CopyPartition": "asyncdsl.frontend.copy",
    "async_copy": "asyncdsl.frontend.copy",
    "await_async_copy": "asyncdsl.frontend.copy",
    "await_cp_async_copy": "asyncdsl.frontend.copy",
    "cluster_cta_id": "asyncdsl.frontend.core",
    "cluster_id": "asyncdsl.frontend.core",
    "cluster_shape": "asyncdsl.frontend.core",
    "num_programs": "asyncdsl.frontend.core",
    "program_id": "asyncdsl.frontend.core",
    "smem": "asyncdsl.frontend.core",
    "warpgroup_idx": "asyncdsl.frontend.core",
    "device_id": "asyncdsl.frontend.distributed",
    "num_devices": "asyncdsl.frontend.distributed",
    "signal": "asyncdsl.frontend.distributed",
    "wait_signal": "asyncdsl.frontend.distributed",
    "async_copy_im2col": "asyncdsl.frontend.im2col",
    "Pipeline": "asyncdsl.frontend.pipeline",
    "async_prefetch": "asyncdsl.frontend.prefetch",
    "region": "asyncdsl.frontend.profile",
    "Profile": "asyncdsl.jit.profile_report",
    "ds": "asyncdsl.frontend.refs",
    "RegisterRef": "asyncdsl.frontend.registers",
    "registers": "asyncdsl.frontend.registers",
    "warpgroup_role": "asyncdsl.frontend.roles",
    "async_gather": "asyncdsl.frontend.row_gather",
    "async_scatter": "asyncdsl.frontend.row_gather",
    "barrier": "asyncdsl.frontend.sync",
    "cluster_barrier": "asyncdsl.frontend.sync",
    "cta_barrier": "asyncdsl.frontend.sync",
    "fence_async_smem": "asyncdsl.frontend.sync",
    "warpgroup_barrier": "asyncdsl.frontend.sync",
    "Turns": "asyncdsl.frontend.turns",
    "turns": "asyncdsl.frontend.turns",
    "load": "asyncdsl.frontend.tile_access",
    "store": "asyncdsl.frontend.tile_access",
    "RegisterTile": "asyncdsl.frontend.tiles",
    "cos": "asyncdsl.frontend.tile_functions",
    "exp2": "asyncdsl.frontend.tile_functions",
    "fma": "asyncdsl.frontend.tile_functions",
    "full": "asyncdsl.frontend.tiles",
    "iota": "asyncdsl.frontend.tiles",
    "log2": "asyncdsl.frontend.tile_functions",
    "maximum": "asyncdsl.frontend.tile_functions",
    "minimum": "asyncdsl.frontend.tile_functions",
    "rsqrt": "asyncdsl.frontend.tile_functions",
    "exp": "asyncdsl.frontend.tile_functions",
    "log": "asyncdsl.frontend.tile_functions",
    "sqrt": "asyncdsl.frontend.tile_functions",
    "sin": "asyncdsl.frontend.tile_functions",
    "tanh": "asyncdsl.frontend.tile_functions",
    "where": "asyncdsl.frontend.tile_functions",
    "zeros": "asyncdsl.frontend.tiles",
    "wgmma": "asyncdsl.frontend.wgmma",
    "wgmma_wait": "asyncdsl.frontend.wgmma",
    "WGMMA": "asyncdsl.hw.fragments",
    "WGMMA_COL": "asyncdsl.hw.fragments",
    "WGMMA_ROW": "asyncdsl.hw.fragments",
    "WGMMA_TRANSPOSED": "asyncdsl.hw.fragments",
    "strided": "asyncdsl.hw.fragments",
    "CollapseLeadingIndicesTransform": "asyncdsl.hw.transforms",
    "DropUnitDimsTransform": "asyncdsl.hw.transforms",
    "MemRefTransform": "asyncdsl.hw.transforms",
    "Rounding": "asyncdsl.hw.transforms",
    "TileTransform": "asyncdsl.hw.transforms",
    "TransposeTransform": "asyncdsl.hw.transforms",
}

__version__ = "0.1.0"
__all__ = [
    "WGMMA",
    "WGMMA_COL",
    "WGMMA_ROW",
    "WGMMA_TRANSPOSED",
    "ArgumentError",
    "ArraySpec",
    "AssumptionError",
    "AsyncDSLError",
    "Autotuned",
    "Choice",
    "CollapseLeadingIndicesTransform",
    "CopyError",
    "CopyPartition",
    "DType",
    "DeadlockError",
    "DistributedError",
    "DropUnitDimsTransform",
    "InterpretError",
    "Kernel",
    "LayoutError",
    "MemRefTransform",
    "PerformanceWarning",
    "PersistentGrid",
    "Pipeline",
    "Profile",
    "RaceError",
    "RegisterRef",
    "RegisterTile",
    "ResourceError",
    "Specialization",
    "Rounding",
    "TileTransform",
    "TraceError",
    "TransformError",
    "TransposeTransform",
    "Turns",
    "UnsupportedTargetError",
    "WarmupReport",
    "async_copy",
    "async_copy_im2col",
    "async_gather",
    "async_prefetch",
    "async_scatter",
    "autotune",
    "await_async_copy",
    "await_cp_async_copy",
    "barrier",
    "bfloat16",
    "cdiv",
    "cluster_barrier",
    "cluster_cta_id",
    "cluster_id",
    "cluster_shape",
    "constexpr",
    "cos",
    "cta_barrier",
    "device_id",
    "ds",
    "exp",
    "exp2",
    "fence_async_smem",
    "float4_e2m1fn",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e8m0fnu",
    "float16",
    "float32",
    "float64",
    "fma",
    "full",
    "int4",
    "int8",
    "int16",
    "int32",
    "int64",
    "iota",
    "kernel",
    "load",
    "log",
    "log2",
    "maximum",
    "minimum",
    "multiple_of",
    "num_devices",
    "num_programs",
    "persistent_grid",
    "program_id",
    "range",
    "region",
    "registers",
    "rsqrt",
    "signal",
    "sin",
    "smem",
    "sqrt",
    "store",
    "strided",
    "tanh",
    "turns",
    "uint4",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "wait_signal",
    "warmup",
    "warpgroup_barrier",
    "warpgroup_idx",
    "warpgroup_role",
    "wgmma",
    "wgmma_wait",
    "when",
    "where",
    "zeros",
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'asyncdsl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
