"""Collective loads through the passes and into PTX: the IR before and after
`partition-collectives`, multicast PTX for sm_90a and the `cta_group::2` forms for sm_100a, all
assembled by ptxas."""

from __future__ import annotations

import re

import pytest
from collective_kernels import broadcast_kernel
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.passes.pipeline import ir_text, make_context

F32 = ad.float32
BF16 = ad.bfloat16


def specs(dtype, groups: int, ctas: int, rows: int, cols: int):
    return ad.ArraySpec((groups * rows, cols), dtype), ad.ArraySpec((ctas * rows, cols), dtype)


def test_resolution_keeps_the_whole_slice_and_the_pass_splits_it():
    kernel = broadcast_kernel((2, 2, 1), "x", (4, 2), 64)
    stages = kernel.stages(*specs(F32, 4, 8, 64, 64))
    resolved = stages["resolve-transforms"]
    assert 'collective = ["x"]' in resolved and "box = [64, 64]" in resolved
    split = stages["partition-collectives"]
    (load,) = [line for line in split.splitlines() if '"asyncdsl.tma_load"' in line]
    assert "collective = " not in load  # consumed by the pass
    assert "box = [32, 64]" in split  # each CTA loads half the rows
    assert re.search(
        r'"asyncdsl.cluster_collective_mask"\(\) <\{collective = \["x"\], cluster = array<i64: 2, 2, 1>\}>',
        split,
    )
    assert re.search(
        r'"asyncdsl.smem_slice"\(%\d+, %\d+\) : \(memref<64x64xf32, #asyncdsl.smem>, index\) '
        r"-> memref<32x64xf32, #asyncdsl.smem>",
        split,
    )
    # ... and still expects the whole slice: the other half arrives from the peer.
    assert "expect_tx_bytes = 16384" in split
    assert 'asyncdsl.cluster_cta_id 0' in split


@pytest.mark.parametrize("stage", ["resolve-transforms", "partition-collectives"])
def test_collective_ir_round_trips(stage):
    kernel = broadcast_kernel((2, 2, 1), ("x", "y"), (2, 2), 64, swizzle=128)
    text = kernel.stages(*specs(BF16, 1, 4, 64, 64))[stage]
    parsed = Parser(make_context(), text).parse_module()
    parsed.verify()
    assert ir_text(parsed) == text


CASES = [
    ((2, 1, 1), "x", (4, 1), {}),
    ((1, 2, 1), "y", (1, 4), {}),
    ((2, 2, 1), ("x", "y"), (2, 2), {}),
    ((2, 2, 1), "x", (2, 2), {}),
    ((2, 2, 1), "y", (2, 2), {}),
    (
        (4, 1, 1),
        "x",
        (8, 1),
        {"swizzle": 128, "transforms": (ad.TileTransform((8, 64)),), "smem_shape": (8, 1, 8, 64)},
    ),
]


@pytest.mark.parametrize("cluster, collective, grid, options", CASES)
def test_multicast_ptx_assembles(cluster, collective, grid, options, ptxas):
    from collective_kernels import num_groups

    kernel = broadcast_kernel(cluster, collective, grid, 64, **options)
    ctas = grid[0] * grid[1]
    ptx = kernel.ptx(
        *specs(
            BF16,
            num_groups(cluster, (collective,) if isinstance(collective, str) else collective, grid),
            ctas,
            64,
            64,
        )
    )
    cx, cy, cz = cluster
    assert f".reqnctapercluster {cx}, {cy}, {cz}" in ptx
    assert re.search(
        r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes"
        r"\.multicast::cluster \[%r\d+\], \[%rd\d+, \{[^}]+\}\], \[%r\d+\], %rs\d+;",
        ptx,
    )
    ptxas(ptx)


def test_mask_is_shifted_by_the_other_cluster_dims():
    kernel = broadcast_kernel((2, 2, 1), "x", (2, 2), 64)
    ptx = kernel.ptx(*specs(F32, 2, 4, 64, 64))
    # Groups along x: mask 0b11 shifted by 2 * y; the rank along y is the group's own.
    assert "mov.u32 %r" in ptx and "%cluster_ctaid.y;" in ptx
    shift = re.search(
        r"mul\.lo\.s32 (%r\d+), (%r\d+), 2;\n\s+mov\.b32 (%r\d+), 3;\n\s+shl\.b32 (%r\d+), \3, \1;", ptx
    )
    assert shift, ptx
    assert re.search(rf"cvt\.u16\.u32 %rs\d+, {re.escape(shift.group(4))};", ptx)


def test_whole_cluster_mask_is_an_immediate():
    kernel = broadcast_kernel((2, 2, 1), ("x", "y"), (2, 2), 64)
    ptx = kernel.ptx(*specs(F32, 1, 4, 64, 64))
    assert re.search(r"mov\.b16 %rs\d+, 15;", ptx)


def leader_tracked(partition, rows: int = 64):
    @ad.kernel(grid=(4,), cluster=(2, 1, 1), arch="sm_100a")
    def kernel(x, y):
        pair, member = ad.cluster_id(0), ad.cluster_cta_id(0)
        shape = (rows // 2, x.shape[1]) if partition != ad.CopyPartition.REPLICATED else (rows, x.shape[1])
        tile = ad.smem(shape, x.dtype)
        loaded = ad.barrier()
        ad.async_copy(
            x.at[ad.ds(pair * rows, rows), :], tile, barrier=loaded, collective="x", partition=partition
        )
        with ad.when(member == 0):
            loaded.wait()
        ad.cluster_barrier()
        ad.async_copy(tile, y.at[ad.ds(ad.program_id(0) * shape[0], shape[0]), :])
        ad.await_async_copy(0)

    return kernel


def test_partitioned_load_is_a_cta_group_2_load_on_the_leaders_barrier(ptxas):
    kernel = leader_tracked(ad.CopyPartition.PARTITIONED(0))
    stages = kernel.stages(ad.ArraySpec((128, 64), F32), ad.ArraySpec((128, 64), F32))
    # Each CTA's half is chosen before the transforms; only x = 0 arrives, for both halves.
    assert "box = [32, 64]" in stages["resolve-transforms"]
    split = stages["partition-collectives"]
    assert re.search(r'asyncdsl.arrive_expect_tx %\d+\[%\d+\] bytes 16384 :', split)
    assert "scf.if" in split and 'partition = #asyncdsl<partition partitioned>' in split
    ptx = stages["ptx"]
    assert ".target sm_100a" in ptx
    assert re.search(r"mapa\.shared::cluster\.u32 (%r\d+), %r\d+, %r\d+;", ptx)
    assert re.search(
        r"cp\.async\.bulk\.tensor\.2d\.shared::cta\.global\.tile\.mbarrier::complete_tx::bytes\.cta_group::2 "
        r"\[%r\d+\], \[%rd\d+, \{0, %r\d+\}\], \[%r\d+\];",
        ptx,
    )
    ptxas(ptx, "sm_100a")


def test_replicated_load_multicasts_with_cta_group_2(ptxas):
    kernel = leader_tracked(ad.CopyPartition.REPLICATED)
    stages = kernel.stages(ad.ArraySpec((128, 64), F32), ad.ArraySpec((256, 64), F32))
    # Both copies of the whole slice complete on the leader's barrier.
    assert "bytes 32768" in stages["partition-collectives"]
    ptx = stages["ptx"]
    assert re.search(
        r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes"
        r"\.multicast::cluster\.cta_group::2 \[%r\d+\], \[%rd\d+, \{0, %r\d+\}\], \[%r\d+\], %rs\d+;",
        ptx,
    )
    ptxas(ptx, "sm_100a")
