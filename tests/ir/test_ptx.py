"""Every kernel the project builds assembles with `ptxas -arch=sm_90a`, and says what it should."""

from __future__ import annotations

import importlib
import re

import pytest

import asyncdsl as ad
from asyncdsl.errors import PtxAssemblyError
from asyncdsl.runtime.ptxas import assemble
from library_kernels import example_kernels


_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def assert_no_spills(ptx: str) -> None:
    """ptxas -v reports for every function no stack frame and nothing spilled."""
    frames = _FRAME.findall(assemble(ptx, verbose=True)[1])
    assert frames and all(frame == ("0", "0", "0") for frame in frames), frames


@pytest.mark.parametrize("kernel,args,kwargs", list(example_kernels()))
def test_examples_assemble_without_spills(kernel, args, kwargs, ptxas):
    assert_no_spills(kernel.ptx(*args, **kwargs))


def row_example_kernels():
    """The kernels the library's row kernels' `choose` picks at the benchmarks' shapes
    (register_tiles.py, row_lengths.py), where each thread holds the most."""
    layer_norm, rms_norm, rowwise_fp8_quant, softmax = (importlib.import_module(f"asyncdsl.kernels.{name}")
                                                        for name in ("layer_norm", "rms_norm", "quantize_fp8",
                                                                     "softmax"))

    bf16, S = ad.bfloat16, ad.ArraySpec
    odd = [(8192, 1000), (4096, 5000), (2048, 12345)]
    for m, n in [(8192, 4096), (4096, 8192), (4096, 16384), *odd]:
        yield pytest.param(*softmax.choose(n), (S((m, n), bf16),) * 2, id=f"softmax-{m}x{n}")
    for m, n in [(8192, 4096), (8192, 8192), *odd]:
        kernel, constexprs = rms_norm.choose(n)
        matrix, vector = S((m, n), bf16), S((n,), bf16)
        yield pytest.param(kernel, constexprs, (matrix, vector, matrix), id=f"rms_norm-{m}x{n}")
        kernel, constexprs = layer_norm.choose(n)
        yield pytest.param(kernel, constexprs, (matrix, vector, vector, matrix), id=f"layer_norm-{m}x{n}")
    for m, n in [(8192, 4096), (8192, 8192), (4096, 16384), (2048, 32768)]:
        kernel, constexprs = rowwise_fp8_quant.choose(n)
        specs = (S((m, n), bf16), S((m, n), ad.float8_e4m3fn), S((m,), ad.float32))
        yield pytest.param(kernel, constexprs, specs, id=f"rowwise_fp8_quant-{m}x{n}")


@pytest.mark.parametrize("kernel,constexprs,specs", list(row_example_kernels()))
def test_row_examples_at_the_benchmark_shapes_assemble_without_spills(kernel, constexprs, specs, ptxas):
    assert_no_spills(kernel.ptx(*specs, **constexprs))


@pytest.mark.parametrize("n", [1000, 2100, 3000, 5000, 6000, 7000, 8000, 9000])
@pytest.mark.parametrize("example", ["softmax", "rms_norm", "layer_norm"])
def test_padded_row_kernels_move_whole_vectors(example, n):
    """Rows of a length no multiple of 128 move between GMEM and registers in vectors as wide as
    their alignment allows (16 bytes for a multiple of 8 elements, 8 for a multiple of 4): a
    window that left a thread part of a vector would move every element alone."""
    module = importlib.import_module(f"asyncdsl.kernels.{example}")
    kernel, constexprs = module.choose(n)
    matrix, vector = ad.ArraySpec((64, n), ad.bfloat16), ad.ArraySpec((n,), ad.bfloat16)
    specs = {"softmax": (matrix, matrix), "rms_norm": (matrix, vector, matrix),
             "layer_norm": (matrix, vector, vector, matrix)}[example]
    accesses = set(re.findall(r"\b(?:ld|st)\.global(?:\.\w+)*", kernel.ptx(*specs, **constexprs)))
    wanted = "v4.b32" if n % 8 == 0 else "v2.b32"
    assert accesses and all(access.endswith(wanted) for access in accesses), (constexprs, accesses)


def test_swiglu_at_the_benchmark_shape_assembles_without_spills(ptxas):
    from asyncdsl.kernels.swiglu import swiglu_kernel as swiglu

    assert_no_spills(swiglu.ptx(*(ad.ArraySpec((16384, 8192), ad.bfloat16),) * 3))


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
