"""Collective copies that cannot be done fail with the project's errors, naming the rule, the
numbers and the user's line."""

from __future__ import annotations

import pytest
from support import expect

import asyncdsl as ad

F32 = ad.float32
SPEC = (ad.ArraySpec((256, 64), F32),)


def collective_load(cluster=(2, 1, 1), rows=64, cols=64, smem_shape=None, arch="sm_90a", **copy_kwargs):
    @ad.kernel(grid=(cluster[0], cluster[1]), cluster=cluster, arch=arch)
    def kernel(x):
        buf = ad.smem(smem_shape or (rows, cols), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[ad.ds(0, rows), ad.ds(0, cols)], buf, barrier=bar, **copy_kwargs)  # the copy
        bar.wait()

    return kernel


def test_nothing_divides_the_box():
    kernel = collective_load((4, 1, 1), rows=6, cols=32, collective="x")
    expect(ad.CopyError, kernel, SPEC, {}, "box (6, 32)", "4 CTAs", line_text="the copy")


def test_the_swizzled_minor_dim_is_never_cut():
    @ad.kernel(grid=(2,), cluster=(2, 1, 1))
    def kernel(x):
        buf = ad.smem((32,), x.dtype)
        bar = ad.barrier()
        ad.async_copy(x.at[0, ad.ds(0, 32)], buf, barrier=bar, collective="x", swizzle=128)  # the copy
        bar.wait()

    expect(ad.CopyError, kernel, SPEC, {}, "box (1, 32)", "minor dim", "swizzle", line_text="the copy")


def test_collective_over_dims_of_one_cta_is_a_plain_copy():
    # As in the reference: one kernel can be compiled for several cluster shapes.
    from asyncdsl.dialects import asyncdsl as ir

    for cluster, dims in (((2, 1, 1), "y"), ((1, 1, 1), "x"), ((1, 1, 1), ("x", "y"))):
        module = collective_load(cluster, collective=dims).compile(*SPEC).module
        (load,) = [op for op in module.walk() if isinstance(op, ir.TmaLoadOp)]
        assert load.multicast_mask is None and not load.collective


def test_unknown_collective_dim():
    kernel = collective_load(collective="w")
    expect(ad.TraceError, kernel, SPEC, {}, "cluster dims among ('x', 'y', 'z')", line_text="the copy")


def test_parts_must_start_128_byte_aligned():
    kernel = collective_load((2, 1, 1), rows=2, cols=16, collective="x")
    expect(ad.CopyError, kernel, SPEC, {}, "byte 64", "128-byte aligned", line_text="the copy")


def test_collective_store_is_refused():
    @ad.kernel(grid=(2,), cluster=(2, 1, 1))
    def kernel(x):
        buf = ad.smem((64, 64), x.dtype)
        ad.async_copy(buf, x.at[ad.ds(0, 64), :], collective="x")  # the copy

    expect(
        ad.TraceError, kernel, SPEC, {}, "only GMEM -> SMEM copies can be collective", line_text="the copy"
    )


def test_partition_without_collective_is_refused():
    kernel = collective_load(partition=ad.CopyPartition.REPLICATED, arch="sm_100a")
    expect(ad.TraceError, kernel, SPEC, {}, "only collective loads can be partitioned", line_text="the copy")


def test_collective_copies_need_the_tma_engine():
    kernel = collective_load(collective="x", implementation="cp_async")
    # The copy op's own rules already refuse it while tracing (resolution would refuse it too).
    expect(ad.AsyncDSLError, kernel, SPEC, {}, "cp_async", "cannot be collective", line_text="the copy")


@pytest.mark.parametrize("partition", [ad.CopyPartition.PARTITIONED(0), ad.CopyPartition.REPLICATED])
def test_leader_tracked_loads_need_blackwell(partition):
    kernel = collective_load(collective="x", partition=partition, smem_shape=(32, 64))
    error = expect(
        ad.UnsupportedTargetError, kernel, SPEC, {}, "cta_group::2", "arch='sm_100a'", line_text="the copy"
    )
    assert "sm_90a" in str(error)


def test_leader_tracked_loads_pair_ctas_along_x():
    kernel = collective_load((1, 2, 1), collective="y", partition=ad.CopyPartition.REPLICATED, arch="sm_100a")
    expect(
        ad.CopyError,
        kernel,
        SPEC,
        {},
        "collective='x' in a cluster of 2 along x",
        "(1, 2, 1)",
        line_text="the copy",
    )


def test_leader_tracked_loads_need_exactly_two_ctas():
    kernel = collective_load((4, 1, 1), collective="x", partition=ad.CopyPartition.REPLICATED, arch="sm_100a")
    expect(ad.CopyError, kernel, SPEC, {}, "cluster of 2 along x", "(4, 1, 1)", line_text="the copy")


def test_partitioned_axis_must_divide():
    kernel = collective_load(
        rows=63,
        collective="x",
        partition=ad.CopyPartition.PARTITIONED(0),
        arch="sm_100a",
        smem_shape=(31, 64),
    )
    expect(ad.CopyError, kernel, SPEC, {}, "size 63", "2 does not divide 63", line_text="the copy")


def test_partitioned_axis_must_exist():
    kernel = collective_load(collective="x", partition=ad.CopyPartition.PARTITIONED(2), arch="sm_100a")
    expect(ad.CopyError, kernel, SPEC, {}, "axis=2", "2 dims", line_text="the copy")


def test_partitioned_smem_holds_only_the_half():
    kernel = collective_load(collective="x", partition=ad.CopyPartition.PARTITIONED(0), arch="sm_100a")
    expect(ad.CopyError, kernel, SPEC, {}, "(64, 64)", "(32, 64)", line_text="the copy")
