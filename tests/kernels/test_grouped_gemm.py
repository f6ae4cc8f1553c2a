"""The grouped GEMM with its groups' sizes on the device (`asyncdsl.kernels.grouped_gemm`) in the
interpreter: each group's rows times its own weights, bit-exact against float64 on small
integers, whatever the groups' sizes (empty groups, groups ending inside a tile, all rows in one
group), rows outside every group left as they were; the masked layout likewise."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K

BF16 = ml_dtypes.bfloat16


def small(rng, shape):
    return rng.integers(-3, 4, shape).astype(BF16)


def product(a, b):
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(BF16)


def bits(x):
    return x.view(np.uint16)


@pytest.mark.parametrize("offsets,rows", [((100, 100, 300), 300), ((0, 130, 250), 300),
                                          ((300, 300, 300), 300), ((0, 0, 0), 64), ((64, 192), 256)], ids=str)
def test_each_group_of_rows_times_its_own_weights(offsets, rows):
    rng = np.random.default_rng(sum(offsets))
    k, n = 192, 320
    a, b = small(rng, (rows, k)), small(rng, (len(offsets), k, n))
    c = np.full((rows, n), np.nan, BF16)
    K.grouped_gemm(a, b, np.array(offsets, np.int32), out=c)
    first = 0
    for g, end in enumerate(offsets):
        assert np.array_equal(bits(c[first:end]), bits(product(a[first:end], b[g]))), f"group {g}"
        first = end
    assert np.isnan(c[first:].astype(np.float32)).all()  # rows past the last group: untouched


def test_masked_groups_multiply_their_first_rows_only():
    rng = np.random.default_rng(4)
    groups, capacity, k, n = 3, 192, 128, 192
    a, b = small(rng, (groups, capacity, k)), small(rng, (groups, k, n))
    counts = np.array([70, 0, 192], np.int32)
    c = np.full((groups, capacity, n), np.nan, BF16)
    K.grouped_gemm_masked(a, b, counts, out=c)
    for g, count in enumerate(counts):
        assert np.array_equal(bits(c[g, :count]), bits(product(a[g, :count], b[g]))), f"group {g}"
        assert np.isnan(c[g, count:].astype(np.float32)).all()


def test_sizes_past_the_rows_are_clamped_to_them():
    rng = np.random.default_rng(5)
    a, b = small(rng, (128, 64)), small(rng, (2, 64, 64))
    c = np.full((128, 64), np.nan, BF16)
    K.grouped_gemm(a, b, np.array([100, 1000], np.int32), out=c)  # a bad end reads and writes no row past a
    assert np.array_equal(bits(c[100:]), bits(product(a[100:], b[1])))


def test_sizes_that_are_not_int32_one_a_group_are_refused():
    a, b = np.zeros((128, 64), BF16), np.zeros((2, 64, 64), BF16)
    with pytest.raises(ad.TraceError, match="sizes int32"):
        K.grouped_gemm(a, b, np.array([64, 128], np.int64))
    with pytest.raises(ad.ArgumentError, match=r"offsets \(G,\), got b \(2, 64, 64\) and offsets \(1,\)"):
        K.grouped_gemm(a, b, np.array([128], np.int32))


def test_the_moe_layer_example_equals_float64_within_bf16_rounding(capsys):
    from asyncdsl.examples import moe_layer

    assert moe_layer.main() == 0
    assert "ok" in capsys.readouterr().out


E4M3 = ml_dtypes.float8_e4m3fn


def fp8_inputs(rng, rows, groups, n, k):
    """Small integers and power-of-two scales (every sum exact): a, a_scales, b (G, N, K), b_scales."""
    def powers(shape):
        return (2.0 ** rng.integers(-3, 4, shape)).astype(np.float32)

    kb = -(-k // 128)
    return (rng.integers(-4, 5, (rows, k)).astype(E4M3), powers((rows, kb)),
            rng.integers(-4, 5, (groups, n, k)).astype(E4M3), powers((groups, n // 128, kb)))


@pytest.mark.parametrize("offsets", [(100, 100, 300), (1, 250, 299)], ids=str)
def test_block_scaled_fp8_groups_are_bit_exact(offsets):
    from asyncdsl.kernels.block_scales import reference

    rng = np.random.default_rng(sum(offsets))
    a, sa, b, sb = fp8_inputs(rng, 300, 3, 128, 256)
    c = np.full((300, 128), np.nan, BF16)
    K.grouped_gemm_fp8_blockscaled(a, sa, b, sb, np.array(offsets, np.int32), out=c)
    first = 0
    for g, end in enumerate(offsets):
        wanted = reference(a[first:end], sa[first:end], b[g], sb[g])
        assert np.array_equal(bits(c[first:end]), bits(wanted)), g
        first = end
    assert np.isnan(c[first:].astype(np.float32)).all()


def test_block_scaled_fp8_masked_groups_are_bit_exact():
    from asyncdsl.kernels.block_scales import reference

    rng = np.random.default_rng(9)
    groups, capacity = 2, 128
    a, sa, b, sb = fp8_inputs(rng, groups * capacity, groups, 256, 384)
    a, sa = a.reshape(groups, capacity, -1), sa.reshape(groups, capacity, -1)
    counts = np.array([3, 128], np.int32)
    c = np.full((groups, capacity, 256), np.nan, BF16)
    K.grouped_gemm_fp8_blockscaled_masked(a, sa, b, sb, counts, out=c)
    for g, count in enumerate(counts):
        wanted = reference(a[g, :count], sa[g, :count], b[g], sb[g])
        assert np.array_equal(bits(c[g, :count]), bits(wanted)), g
        assert np.isnan(c[g, count:].astype(np.float32)).all()


BENCHMARK_SHAPES = [(8, 4096, 7168, 2048), (4, 8192, 4096, 7168), (128, 256, 768, 2048)]


@pytest.mark.parametrize("groups,rows,n,k", BENCHMARK_SHAPES, ids=str)
def test_the_benchmark_shapes_assemble_without_spills(groups, rows, n, k, ptxas):
    import importlib

    from asyncdsl.runtime.ptxas import assemble

    module = importlib.import_module("asyncdsl.kernels.grouped_gemm")
    spec, f8, total, kb = ad.ArraySpec, ad.float8_e4m3fn, groups * rows, -(-k // 128)
    sizes, c = spec((groups,), ad.int32), spec((total, n), ad.bfloat16)
    bf16 = module.matmul_grouped_sizes.ptx(spec((total, k), ad.bfloat16), spec((groups * k, n), ad.bfloat16),
                                           c, sizes, CTAS=132, BN=128 if n <= 1024 else 256)
    fp8 = module.matmul_grouped_fp8_blockscaled.ptx(
        spec((total, k), f8), spec((kb, total), ad.float32), spec((groups * n, k), f8),
        spec((groups * n // 128, -(-kb // 4) * 4), ad.float32), c, sizes, CTAS=132)
    for ptx in (bf16, fp8):
        report = assemble(ptx, verbose=True)[1]
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report
        assert "C75" not in report, report  # advisories: wgmmas serialized, for one


def test_block_scales_of_the_wrong_shape_are_refused():
    rng = np.random.default_rng(2)
    a, sa, b, sb = fp8_inputs(rng, 128, 2, 128, 256)
    offsets = np.array([64, 128], np.int32)
    with pytest.raises(ad.ArgumentError, match="b_scales must be"):
        K.grouped_gemm_fp8_blockscaled(a, sa, b, sb[0], offsets)
    with pytest.raises(ad.ArgumentError, match="a_scales must be"):
        K.grouped_gemm_fp8_blockscaled(a, sa[:, :1], b, sb, offsets)
    with pytest.raises(ad.ArgumentError, match="a_scales must be") as error:
        K.grouped_gemm_fp8_blockscaled_masked(a.reshape(2, 64, 256), sa, b, sb, np.array([1, 2], np.int32))
    assert error.value.location.file == __file__


def test_group_counts_that_do_not_match_b_are_refused():
    rng = np.random.default_rng(3)
    a, sa, b, sb = fp8_inputs(rng, 128, 2, 128, 256)
    with pytest.raises(ad.ArgumentError, match=r"group sizes must be \(2,\)") as error:
        K.grouped_gemm_fp8_blockscaled(a, sa, b, sb, np.array([64, 100, 128], np.int32))
    assert error.value.location.file == __file__
    # a has 4 groups, b 2: refused, never a's groups 0 and 1 taken as b's group 0.
    for counts in (np.ones(4, np.int32), np.ones(2, np.int32)):
        with pytest.raises(ad.ArgumentError, match=r"b must be \(G, N, K\) = \(4, N, 256\)") as error:
            K.grouped_gemm_fp8_blockscaled_masked(a.reshape(4, 32, 256), sa.reshape(4, 32, 2), b, sb, counts)
        assert error.value.location.file == __file__
    with pytest.raises(ad.ArgumentError, match=r"b must be \(G, N, K\), got \(128, 256\)") as error:
        K.grouped_gemm_fp8_blockscaled(a, sa, b[0], sb, np.array([64, 128], np.int32))
    assert error.value.location.file == __file__
    bf16 = ml_dtypes.bfloat16
    # b (2, 128, 128) read as (256, 128) would pass for 4 groups of K 64: refused, K is not a's.
    with pytest.raises(ad.ArgumentError, match=r"b must be \(G, K, N\) with K = 64") as error:
        K.grouped_gemm(np.zeros((256, 64), bf16), np.zeros((2, 128, 128), bf16), np.full(4, 64, np.int32))
    assert error.value.location.file == __file__
    with pytest.raises(ad.ArgumentError, match=r"b must be \(G, K, N\) = \(2, 16, N\)") as error:
        K.grouped_gemm_masked(np.zeros((2, 8, 16), bf16), np.zeros((2, 32, 8), bf16), np.ones(2, np.int32))
    assert error.value.location.file == __file__


def test_a_masked_out_that_is_strided_or_of_another_shape_is_refused():
    """The masked forms reshape out to (G·capacity, N) for the kernel: a strided out would be
    copied by the reshape (the kernel writing the copy, out left as it was) and one of another
    shape but as many elements written in another order."""
    rng = np.random.default_rng(6)
    a, b, counts = small(rng, (2, 64, 64)), small(rng, (2, 64, 128)), np.array([5, 64], np.int32)
    strided = np.zeros((2, 128, 128), BF16)[:, :64]
    for out, what in ((strided, "not contiguous"), (np.zeros((2, 64 * 128), BF16), r"got shape \(2, 8192\)")):
        with pytest.raises(ad.ArgumentError, match=what) as error:
            K.grouped_gemm_masked(a, b, counts, out=out)
        assert error.value.location.file == __file__
    assert not strided.astype(np.float32).any()
    a8, sa, b8, sb = fp8_inputs(rng, 128, 2, 128, 256)
    with pytest.raises(ad.ArgumentError, match="not contiguous"):
        K.grouped_gemm_fp8_blockscaled_masked(a8.reshape(2, 64, 256), sa.reshape(2, 64, 2), b8, sb, counts,
                                              out=strided)
    c = np.zeros((2, 64, 128), BF16)  # the right out: written in place
    assert K.grouped_gemm_masked(a, b, counts, out=c) is c
    assert np.array_equal(c[1].astype(np.float64), a[1].astype(np.float64) @ b[1].astype(np.float64))
