"""Every kernel the project builds assembles with `ptxas -arch=sm_90a`, and says what it should."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest
from support import assert_no_spills

import asyncdsl as ad
import asyncdsl.examples
import asyncdsl.kernels
from asyncdsl.errors import PtxAssemblyError
from asyncdsl.runtime.ptxas import assemble


def example_kernels():
    """The examples' and the library's kernels, with the arguments `asyncdsl dump` takes."""
    for package in (asyncdsl.examples, asyncdsl.kernels):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, (args, kwargs) in getattr(module, "EXAMPLE_ARGS", {}).items():
                yield pytest.param(getattr(module, name), args, kwargs, id=f"{info.name}:{name}")


@pytest.mark.parametrize("kernel,args,kwargs", list(example_kernels()))
def test_examples_assemble_without_spills(kernel, args, kwargs, ptxas):
    assert_no_spills(kernel.ptx(*args, **kwargs))


@pytest.mark.parametrize("dtype,bm,bn",
                         [(d, m, n)
                          for d, m, n in __import__("asyncdsl.examples.tile_copy", fromlist=["CASES"]).CASES])
def test_tile_copy_every_dtype_assembles(dtype, bm, bn, ptxas):
    from asyncdsl.examples.tile_copy import tile_copy

    spec = ad.ArraySpec((1000, 528), dtype)
    ptxas(tile_copy.ptx(spec, spec, BM=bm, BN=bn))


def test_tile_copy_ptx_has_the_tma_protocol():
    from asyncdsl.examples.tile_copy import tile_copy

    spec = ad.ArraySpec((1000, 528), ad.float32)
    ptx = tile_copy.ptx(spec, spec, BM=64, BN=64)
    # Two by-value tensor maps after the two array pointers.
    assert len(re.findall(r"\.param \.align 64 \.b8 tile_copy_param_\d\[128\]", ptx)) == 2
    # The leader arms the barrier with the whole box, then loads with coordinates innermost first.
    assert re.search(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], 16384;", ptx)
    load = re.search(
        r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes "
        r"\[(%r\d+)\], \[%rd\d+, \{(%r\d+), (%r\d+)\}\]", ptx)
    assert load
    assert "and.b32 %r4, %r4, -1024;" in ptx  # run-time 1024-byte alignment of shared memory
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in ptx
    assert "cp.async.bulk.wait_group.read 0;" in ptx  # await_async_copy(0, read_only=True)


def test_cluster_kernel_declares_its_cluster(ptxas):
    @ad.kernel(grid=(4,), cluster=(2, 1, 1))
    def k(x):
        ad.cluster_barrier()

    ptx = k.ptx(ad.ArraySpec((8, 8), ad.float32))
    assert ".reqnctapercluster 2, 1, 1" in ptx and ".explicitcluster" in ptx
    ptxas(ptx)


def test_loops_and_branches_assemble(ptxas):
    @ad.kernel(grid=(8,), block=256)
    def k(x, y):
        buf = ad.smem((2, 16, 64), ad.float32)
        bars = ad.barrier(num=2)
        wg = ad.warpgroup_idx()
        for i in ad.range(1, ad.num_programs(0), 3):
            slot = i % 2
            with ad.when((wg == 0) & (i // 7 >= -3)):
                ad.async_copy(x.at[ad.ds(i * 16, 16), :], buf.at[slot], barrier=bars[slot])
                bars[slot].wait()
                ad.async_copy(buf.at[slot], y.at[ad.ds(i * 16, 16), :])
                ad.await_async_copy(1, read_only=True)
            with ad.when(wg != 0):
                bars[slot].wait(parity=i % 2)
                ad.warpgroup_barrier()
        ad.fence_async_smem()
        ad.cta_barrier()

    spec = ad.ArraySpec((256, 64), ad.float32)
    ptxas(k.ptx(spec, spec))


def test_ptxas_rejection_is_reported_with_the_source():
    with pytest.raises(PtxAssemblyError) as caught:
        assemble(
            ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { bogus.instr; ret; }\n")
    assert "bogus" in str(caught.value)
