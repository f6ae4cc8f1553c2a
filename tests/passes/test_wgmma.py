"""Every wgmma kernel the project builds assembles with ptxas for sm_90a with no spill and no
wgmma advisory (C75xx: a serialized pipeline, an injected fence or wait), and `asyncdsl dump`
shows the descriptor plan of each operand."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from wgmma_kernels import CASES, ptx

import asyncdsl as ad
from asyncdsl.runtime.ptxas import assemble

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _clean(text: str) -> str:
    _, log = assemble(text, verbose=True)
    assert not re.search(r"C75\d\d", log), log
    spills = re.findall(r"(\d+) bytes spill (?:stores|loads)", log)
    assert spills and all(int(s) == 0 for s in spills), log
    return log


@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_case_assembles_without_spills_or_advisories(case):
    _clean(ptx(case))


@pytest.mark.parametrize("bn", [256, 192], ids=["128x256", "128x192"])
def test_the_gemm_example_assembles_clean(bn):
    from asyncdsl.kernels.gemm_cooperative import matmul

    a = np.zeros((8192, 8192), ml_dtypes.bfloat16)
    text = matmul.ptx(a, a, a, CTAS=132, BN=bn)
    log = _clean(text)
    registers = int(re.search(r"Used (\d+) registers", log).group(1))
    assert registers <= 168  # 384 threads: 65536 / 384 rounded down to a multiple of 8
    # One m64nNk16 per k16 of a 64-deep slot, N the tile's width (each consumer owns 64 rows).
    assert text.count("wgmma.mma_async") == 4
    assert text.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.bf16.bf16") == 4
    assert "wgmma.wait_group.sync.aligned 1;" in text


def test_the_split_k_gemm_assembles_clean_and_adds_by_tma():
    from asyncdsl.kernels.gemm_cooperative import matmul

    a = np.zeros((128, 4096), ml_dtypes.bfloat16)
    b = np.zeros((4096, 4096), ml_dtypes.bfloat16)
    text = matmul.ptx(a, b, np.zeros((128, 4096), np.float32), CTAS=132, SPLIT_K=4)
    _clean(text)
    assert "cp.reduce.async.bulk.tensor" in text and ".add." in text


@pytest.mark.parametrize("shape,bn,bk,stages",
                         [((128, 4096, 4096), 64, 64, 8), ((128, 4096, 4096), 64, 128, 4),
                          ((512, 4096, 4096), 256, 64, 4), ((1024, 1024, 1024), 128, 64, 6)])
def test_the_in_order_split_k_gemm_assembles_clean_and_passes_the_sum_by_flags(shape, bn, bk, stages):
    from asyncdsl.kernels.gemm_cooperative import matmul_split_k, split_k_flags

    m, n, k = shape
    text = matmul_split_k.ptx(ad.ArraySpec((m, k), ad.bfloat16), ad.ArraySpec((k, n), ad.bfloat16),
                              ad.ArraySpec((m, n), ad.bfloat16), ad.ArraySpec((1, m, n), ad.float32),
                              ad.ArraySpec((split_k_flags(m, n, bn),), ad.int32), CTAS=132, SPLIT_K=2, BN=bn,
                              BK=bk, STAGES=stages)
    _clean(text)
    # The first units count themselves in, the last waits for them and sets the flag back.
    assert "red.release.sys.global.add.u32" in text and "ld.acquire.sys.global.u32" in text
    assert "st.release.sys.global.u32" in text
    assert "ld.global.v2.f32" in text and "st.global.v2.f32" in text  # the sum moves in vectors


def test_the_in_order_split_k_gemm_in_cta_pairs_multicasts_a():
    from asyncdsl.kernels.gemm_cooperative import matmul_split_k_2cta, split_k_flags

    m, n, k = 128, 4096, 4096
    text = matmul_split_k_2cta.ptx(ad.ArraySpec((m, k), ad.bfloat16), ad.ArraySpec((k, n), ad.bfloat16),
                                   ad.ArraySpec((m, n), ad.bfloat16), ad.ArraySpec((1, m, n), ad.float32),
                                   ad.ArraySpec((split_k_flags(m, n, 64, pair=2),), ad.int32), CTAS=132,
                                   SPLIT_K=2, BN=64, STAGES=8)
    _clean(text)
    assert ".multicast::cluster" in text and ".reqnctapercluster 2, 1, 1" in text


@pytest.mark.parametrize("config", [{}, {"BN": 192, "SHARE": "a"}, {"BN": 64, "BK": 128, "STAGES": 4}],
                         ids=["share_b", "share_a_192", "bk128"])
def test_the_two_cta_gemm_assembles_clean(config):
    from asyncdsl.kernels.gemm_cooperative import matmul_2cta

    a = np.zeros((8192, 8192), ml_dtypes.bfloat16)
    _clean(matmul_2cta.ptx(a, a, a, CTAS=132, **config))


@pytest.mark.parametrize("shape,two_ctas,config", [
    ((128, 4096, 4096), False, {"BK": 128, "STAGES": 6}),
    ((1024, 1024, 1024), False, {"BM": 128, "BN": 64, "STAGES": 8}),
    ((1000, 1000, 1000), True, {"BN": 128, "BK": 128, "STAGES": 4}),
], ids=["64x64", "128x64", "pairs_64x128"])
def test_the_one_consumer_gemm_assembles_clean_in_256_threads(shape, two_ctas, config):
    from asyncdsl.kernels.gemm_cooperative import matmul_narrow, matmul_narrow_2cta

    m, n, k = shape
    a, b, c = (np.zeros(dims, ml_dtypes.bfloat16) for dims in ((m, k), (k, n), (m, n)))
    text = (matmul_narrow_2cta if two_ctas else matmul_narrow).ptx(a, b, c, CTAS=132, **config)
    _clean(text)
    assert ".reqntid 256, 1, 1" in text
    # One consumer owns the whole tile: one wgmma per k16 of a slot, BM / 64 rows of them.
    assert text.count("wgmma.mma_async") == config.get("BK", 64) // 16 * config.get("BM", 64) // 64


@pytest.mark.parametrize("two_ctas", [False, True])
@pytest.mark.parametrize("config", [{}, {"BN": 192, "PROMOTE": 1}, {"BN": 128, "STAGES": 6, "PROMOTE": 4},
                                    {"BN": 128, "STAGES": 6, "PROMOTE": 32},
                                    {"BN": 64, "STAGES": 8, "PROMOTE": 16, "EVICT_FIRST": "b"}],
                         ids=["whole K", "128x192 promoted", "128x128 promoted by 4",
                              "128x128 promoted by 32", "128x64 promoted by 16"])
def test_the_fp8_gemm_example_assembles_clean(two_ctas, config):
    from asyncdsl.kernels.gemm_fp8 import matmul_fp8, matmul_fp8_2cta

    m = n = k = 8192
    a = np.zeros((m, k), ml_dtypes.float8_e4m3fn)
    text = (matmul_fp8_2cta if two_ctas else matmul_fp8).ptx(
        a, a, np.zeros(m, np.float32), np.zeros(n, np.float32), np.zeros((m, n), ml_dtypes.bfloat16),
        CTAS=132, **config)
    _clean(text)
    assert f"wgmma.mma_async.sync.aligned.m64n{config.get('BN', 256)}k32.f32.e4m3.e4m3" in text
    assert ("multicast::cluster" in text) == two_ctas


@pytest.mark.parametrize("two_ctas", [False, True])
@pytest.mark.parametrize("config", [{}, {"BN": 64, "STAGES": 8, "EVICT_FIRST": "b"}])
def test_the_ping_pong_fp8_gemm_assembles_clean(two_ctas, config):
    from asyncdsl.kernels.gemm_fp8 import matmul_fp8_pingpong, matmul_fp8_pingpong_2cta

    m = n = k = 8192
    a = np.zeros((m, k), ml_dtypes.float8_e4m3fn)
    text = (matmul_fp8_pingpong_2cta if two_ctas else matmul_fp8_pingpong).ptx(
        a, a, np.zeros(m, np.float32), np.zeros(n, np.float32), np.zeros((m, n), ml_dtypes.bfloat16),
        CTAS=132, **config)
    _clean(text)
    # Two 64-row wgmmas a slice and four k32 steps each; the consumers take turns on a named barrier.
    assert text.count(f"wgmma.mma_async.sync.aligned.m64n{config.get('BN', 128)}k32.f32.e4m3.e4m3") == 8
    assert "bar.sync" in text or "barrier.sync" in text
    assert ("multicast::cluster" in text) == two_ctas


def test_the_plan_of_each_operand_is_in_the_ir():
    from asyncdsl.kernels.gemm_cooperative import matmul

    a = np.zeros((512, 512), ml_dtypes.bfloat16)
    stages = matmul.stages(a, a, a, CTAS=2)
    planned = stages["plan-smem-access"]
    assert ("#asyncdsl.wgmma_operand<k_major = 1, swizzle = 128, lbo = 16, sbo = 1024, "
            "k_offsets = [0, 32, 64, 96]" in planned)
    # b's buffer is columns of 64 (TileTransform((64, 64))): N atoms 8 KiB apart, 8-deep K groups 1 KiB.
    assert "#asyncdsl.wgmma_operand<k_major = 0, swizzle = 128, lbo = 8192, sbo = 1024" in planned


def test_a_tiled_copy_from_an_array_that_is_not_whole_tiles_goes_one_box_per_column():
    from asyncdsl.kernels.gemm_cooperative import matmul

    a = np.zeros((300, 200), ml_dtypes.bfloat16)
    b = np.zeros((200, 504), ml_dtypes.bfloat16)
    c = np.zeros((300, 504), ml_dtypes.bfloat16)
    resolved = matmul.stages(a, b, c, CTAS=2)["resolve-transforms"]
    loads = [line for line in resolved.splitlines() if "asyncdsl.tma_load" in line]
    # a: one box per consumer half (a single column of tiles); b: one box per 64-column stripe
    # (4), of which only the first announces the slot's bytes.
    assert len(loads) == 2 + 4, loads
    announced = [int(re.search(r"expect_tx_bytes = (\d+)", line).group(1)) for line in loads]
    assert announced == [8192, 8192, 32768, 0, 0, 0], announced
    # the arrays as they are, untiled
    assert "dims = [300, 200]" in resolved and "dims = [200, 504]" in resolved


def test_the_wgmma_chain_benchmark_kernels_assemble_clean():
    """benchmarks/wgmma_chains.py: every variant it times."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import wgmma_chains
    finally:
        sys.path.remove(str(BENCHMARKS))
    for n, chains, whole, wgs, a_registers in wgmma_chains.VARIANTS:
        text = wgmma_chains.chains.ptx(ad.ArraySpec((132, 128, n), ad.float32), CTAS=132, N=n, REPS=4000,
                                       CHAINS=chains, WHOLE=whole, WGS=wgs, A_REGISTERS=a_registers)
        _clean(text)
        assert text.count("wgmma.mma_async") == 16


def test_the_attention_mix_benchmark_kernels_assemble_clean():
    """benchmarks/attention_mix.py: both launch shapes, with and without the running maximum,
    issue the same sixteen wgmmas a block; only the 384-thread one hands registers over."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import attention_mix
    finally:
        sys.path.remove(str(BENCHMARKS))
    for kernel in (attention_mix.fed, attention_mix.producer):
        for online in (False, True):
            text = kernel.ptx(ad.ArraySpec((132, 128, 128), ad.float32), REPS=4000, ONLINE=online)
            _clean(text)
            assert text.count("wgmma.mma_async") == 16
            assert ("setmaxnreg" in text) == (kernel is attention_mix.producer)
