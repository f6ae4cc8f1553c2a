"""allocate-smem and allocate-descriptor-scratch: offsets, alignment, dedupe, both descriptor modes."""

from __future__ import annotations

import re

import asyncdsl as ad
from asyncdsl.dialects import asyncdsl as ir

BF16 = ad.ArraySpec((256, 256), ad.bfloat16)


def two_buffers(descriptors="grid_constant"):
    @ad.kernel(descriptors=descriptors)
    def kernel(x):
        small = ad.smem((16, 8), x.dtype)  # 256 bytes: would leave the next buffer misaligned
        tiled = ad.smem((8, 1, 8, 64), x.dtype)
        bar = ad.barrier(num=2)
        ad.async_copy(x.at[ad.ds(0, 16), ad.ds(0, 8)], small, barrier=bar[0])
        ad.async_copy(x.at[ad.ds(0, 64), ad.ds(0, 64)], tiled, barrier=bar[1],
                      transforms=ad.TileTransform((8, 64)), swizzle=128)
        ad.async_copy(x.at[ad.ds(64, 64), ad.ds(0, 64)], tiled, barrier=bar[1],
                      transforms=ad.TileTransform((8, 64)), swizzle=128)

    return kernel


def test_swizzled_buffers_start_on_their_swizzle_repeat():
    module = two_buffers().compile(BF16).module
    offsets = [op.offset.value.data for op in module.walk() if isinstance(op, ir.AllocSmemOp)]
    assert offsets == [0, 1024]  # 128-byte swizzle repeats every 8 rows of 128 bytes
    barriers = [op for op in module.walk() if isinstance(op, ir.AllocBarriersOp)]
    assert barriers[0].offset.value.data == 1024 + 8 * 8 * 64 * 2


def test_identical_descriptors_are_shared():
    compiled = two_buffers().compile(BF16)
    # Two loads of the same tiled box share one descriptor; the small box has its own.
    assert len(compiled.binary.descriptors) == 2
    indices = [op.descriptor_index.value.data for op in compiled.module.walk()
               if isinstance(op, ir.TmaLoadOp)]
    assert indices == [0, 1, 1]


def test_scratch_mode_reads_descriptors_from_one_buffer(ptxas):
    kernel = two_buffers("scratch")
    stages = kernel.stages(BF16)
    assert 'asyncdsl.descriptor_mode = "scratch"' in stages["allocate-descriptor-scratch"]
    assert "asyncdsl.descriptor_slots = array<i64: 0, 128>" in stages["allocate-descriptor-scratch"]
    ptx = stages["ptx"]
    params = ptx[ptx.index(".entry"):ptx.index(")")]
    assert ".b8" not in params and params.count(".param .u64") == 2  # the array, then the scratch
    assert len(re.findall(r"prefetch\.tensormap", ptx)) == 2
    ptxas(ptx)


def test_grid_constant_mode_passes_descriptors_by_value(ptxas):
    ptx = two_buffers().ptx(BF16)
    assert len(re.findall(r"\.param \.align 64 \.b8 kernel_param_\d\[128\]", ptx)) == 2
    assert "cvta.param.u64" in ptx
    ptxas(ptx)
