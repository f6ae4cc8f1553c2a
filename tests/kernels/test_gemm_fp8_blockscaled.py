"""The block-scaled fp8 GEMM (`asyncdsl.kernels.gemm_fp8_blockscaled`) in the interpreter against
float64: bit-exact where every product, sum and scale is exact (small integers, powers of two),
within the tensor cores' rounding on random e4m3 values; every configuration `choose` makes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.blocks.gemm_config import GemmConfig
from asyncdsl.kernels.block_scales import reference
from asyncdsl.kernels.gemm_fp8_blockscaled import (
    matmul_fp8_blockscaled,
    matmul_fp8_blockscaled_2cta,
    matmul_fp8_blockscaled_split_k,
    problem_specs,
)
from asyncdsl.kernels.gemm_fp8_blockscaled_choice import choose, constexprs
from asyncdsl.runtime.ptxas import assemble

E4M3 = ml_dtypes.float8_e4m3fn


def exact_inputs(m, n, k, seed=0):
    """Small integers and power-of-two scales: the float32 total is the float64 one."""
    rng = np.random.default_rng(seed)
    kb, nb = -(-k // 128), -(-n // 128)
    def scales(shape):
        return (2.0 ** rng.integers(-3, 4, shape)).astype(np.float32)

    a, b = (rng.integers(-4, 5, shape).astype(E4M3) for shape in ((m, k), (n, k)))
    return a, scales((m, kb)), b, scales((nb, kb))


def bits(x):
    return x.view(np.uint16)


CONFIGS = {
    "128x128": GemmConfig(BM=128, BN=128, BK=128, STAGES=3),
    "64 rows, columns halved": GemmConfig(BM=64, BN=128, BK=128, STAGES=3, SPLIT="n"),
    "128x64": GemmConfig(BM=128, BN=64, BK=128, STAGES=2),
    "split K 2": GemmConfig(BM=128, BN=128, BK=128, STAGES=3, SPLIT_K=2),
    "64 rows, split K 3": GemmConfig(BM=64, BN=128, BK=128, STAGES=2, SPLIT="n", SPLIT_K=3),
}


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
# K steps 1 to 7: the K loop takes the slices in groups of four, the last group what is left.
@pytest.mark.parametrize("m,n,k", [(200, 320, 400), (1, 136, 256), (64, 128, 768), (72, 256, 640),
                                   (130, 128, 128), (96, 128, 896)], ids=str)
def test_exact_products_are_bit_exact(m, n, k, config):
    a, sa, b, sb = exact_inputs(m, n, k)
    c = K.gemm_fp8_blockscaled(a, sa, b, sb, config=config, ctas=4 if config.SPLIT_K == 1 else 40)
    assert np.array_equal(bits(c), bits(reference(a, sa, b, sb)))


@pytest.mark.parametrize("config", [CONFIGS["128x128"], CONFIGS["64 rows, columns halved"]], ids=str)
# tiles in pairs one above the other: an odd count of tile rows leaves the last pair's lower tile past M
@pytest.mark.parametrize("m,n,k", [(200, 320, 400), (384, 256, 512), (1, 136, 256)], ids=str)
def test_pairs_of_ctas_sharing_b_are_bit_exact(m, n, k, config):
    a, sa, b, sb = exact_inputs(m, n, k, seed=11)
    c = K.gemm_fp8_blockscaled(a, sa, b, sb, config=config, pair=True, ctas=4)
    assert np.array_equal(bits(c), bits(reference(a, sa, b, sb)))


def test_pairs_take_neither_split_k_nor_an_odd_count_of_ctas():
    a, sa, b, sb = exact_inputs(64, 128, 256)
    for config, ctas in ((CONFIGS["split K 2"], 4), (CONFIGS["128x128"], 3)):
        with pytest.raises(ad.ArgumentError, match="clusters of two CTAs share b's slices") as error:
            K.gemm_fp8_blockscaled(a, sa, b, sb, config=config, pair=True, ctas=ctas)
        assert error.value.location.file == __file__  # the caller's line


def test_each_block_has_its_own_scales():
    """One nonzero scale at a time: c is exactly that row block's, that K block's contribution."""
    m, n, k = 64, 256, 384
    a, _, b, _ = exact_inputs(m, n, k, seed=3)
    for kb, nb in [(0, 1), (2, 0), (1, 1)]:
        sa = np.zeros((m, 3), np.float32)
        sa[:, kb] = 2.0 ** np.arange(m) % 7
        sb = np.zeros((2, 3), np.float32)
        sb[nb, kb] = 0.5
        c = K.gemm_fp8_blockscaled(a, sa, b, sb)
        block = slice(kb * 128, (kb + 1) * 128)
        part = a[:, block].astype(np.float64) @ b[:, block].astype(np.float64).T
        wanted = np.zeros((m, n))
        wanted[:, nb * 128:(nb + 1) * 128] = (part * sa[:, kb, None] * 0.5)[:, nb * 128:(nb + 1) * 128]
        assert np.array_equal(bits(c), bits(wanted.astype(ml_dtypes.bfloat16))), (kb, nb)


def test_m_major_scales_are_read_in_place_and_row_major_ones_copied():
    a, sa, b, sb = exact_inputs(72, 128, 256, seed=5)
    m_major = np.ascontiguousarray(sa.T).T  # (M, K/128) indexed, K blocks' columns contiguous
    assert np.array_equal(bits(K.gemm_fp8_blockscaled(a, m_major, b, sb)),
                          bits(K.gemm_fp8_blockscaled(a, sa, b, sb)))


def test_random_e4m3_within_the_tensor_cores_rounding():
    rng = np.random.default_rng(7)
    m, n, k = 128, 256, 640
    a = rng.standard_normal((m, k)).astype(E4M3)
    b = rng.standard_normal((n, k)).astype(E4M3)
    sa = rng.uniform(0.01, 1, (m, 5)).astype(np.float32)
    sb = rng.uniform(0.01, 1, (2, 5)).astype(np.float32)
    c = K.gemm_fp8_blockscaled(a, sa, b, sb).astype(np.float64)
    wanted = reference(a, sa, b, sb).astype(np.float64)
    assert np.allclose(c, wanted, rtol=2 ** -7, atol=1e-3 * np.abs(wanted).max())


@pytest.mark.parametrize("m,n,k,ctas,wanted", [
    (4096, 7168, 16384, 132, (128, 128, 1)), (64, 7168, 16384, 132, (64, 128, 2)),
    (128, 24576, 1536, 132, (128, 128, 1)), (1, 4096, 7168, 132, (64, 128, 4)),
    (16384, 2112, 7168, 132, (128, 128, 1)), (4096, 4096, 7168, 132, (128, 128, 1)),
    (4096, 2112, 7168, 132, (128, 128, 1))])
def test_choose_picks_row_tiles_and_split_k_by_shape(m, n, k, ctas, wanted):
    config = choose(m, n, k, ctas)
    assert (config.BM, config.BN, config.SPLIT_K) == wanted


def test_scales_of_the_wrong_shape_are_refused():
    a, sa, b, sb = exact_inputs(64, 128, 256)
    with pytest.raises(ad.ArgumentError, match=r"b_scales must be \(1, 2\)") as error:
        K.gemm_fp8_blockscaled(a, sa, b, np.ones((1, 3), np.float32))
    assert error.value.location.file == __file__  # the caller's line
    with pytest.raises(ad.TraceError, match="BN must divide 128"):
        K.gemm_fp8_blockscaled(a, sa, b, sb, config=GemmConfig(BM=128, BN=256, BK=128))
    with pytest.raises(ad.TraceError, match="a_scales must be float32"):  # the kernel's own layout
        matmul_fp8_blockscaled.interpret(a, np.ones((2, 63), np.float32), b, np.ones((1, 4), np.float32),
                                         np.zeros((64, 128), ml_dtypes.bfloat16), CTAS=1)


SHAPES = [(4096, 7168, 16384), (4096, 4096, 7168), (4096, 2112, 7168), (64, 7168, 16384), (128, 24576, 1536),
          (1, 7168, 2048), (16384, 7168, 2048)]


@pytest.mark.parametrize("m,n,k", SHAPES, ids=str)
def test_chosen_configurations_assemble_without_spills(m, n, k, ptxas):
    config = choose(m, n, k, 132)
    specs = problem_specs(m, n, k)
    if config.SPLIT_K > 1:
        workspace = (ad.ArraySpec((config.SPLIT_K - 1, m, n), ad.float32), ad.ArraySpec((1024,), ad.int32))
        ptx = matmul_fp8_blockscaled_split_k.ptx(*specs, *workspace, CTAS=132, **constexprs(config))
    else:
        ptx = matmul_fp8_blockscaled.ptx(*specs, CTAS=132, **constexprs(config))
    report = assemble(ptx, verbose=True)[1]
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report
    assert "C75" not in report, report  # advisories: wgmmas serialized, for one


def test_pairs_assemble_without_spills():
    ptx = matmul_fp8_blockscaled_2cta.ptx(*problem_specs(4096, 7168, 16384), CTAS=132,
                                          **constexprs(choose(4096, 7168, 16384, 132)))
    report = assemble(ptx, verbose=True)[1]
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report
    assert "C75" not in report and ".multicast::cluster" in ptx, report
