"""The interpreter's wgmma: integer products are numpy's, bit for bit, for every case of the
shape matrix; the numerics model keeps its promises (exact on small integers, truncation toward
zero, tf32 reads 10 mantissa bits); the GEMM host functions are exact on a small problem; and the
asynchronous rules are enforced: operand bytes overwritten before a `wgmma_wait` retired the
wgmma are a RaceError, accumulating into registers nothing wrote is an InterpretError."""

from __future__ import annotations

import importlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import examples
from wgmma_kernels import CASES, cases, integer_inputs, ptx, reference, run

import asyncdsl as ad
from asyncdsl import TileTransform
from asyncdsl.interpret.mma_numerics import integer_step, mma_step

fp8 = importlib.import_module("asyncdsl.kernels.gemm_fp8")

LAYOUT = dict(transforms=TileTransform((8, 64)), swizzle=128)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_integer_products_are_exact(case):
    a, b = integer_inputs(case, seed=5)
    c = np.zeros((case.m, case.n), case.acc_dtype.numpy)
    run(case, a, b, c, interpret=True)
    np.testing.assert_array_equal(c, reference(case, a, b))


def test_the_model_truncates_aligned_terms_toward_zero():
    # 1 + 16 products of 2**-26: each is below the 26-bit quantum (2**-25) of the largest term,
    # the accumulator 1.0, so each is truncated away, while the exact sum 1 + 2**-22 is a float32.
    a = np.full((1, 16), 2.0 ** -13, np.float32)
    b = np.full((16, 1), 2.0 ** -13, np.float32)
    acc = np.ones((1, 1), np.float32)
    assert mma_step(acc, a, b, accumulate=True)[0, 0] == np.float32(1.0)
    # Negative sums truncate toward zero too.
    assert mma_step(-acc, a, -b, accumulate=True)[0, 0] == np.float32(-1.0)
    # Without accumulation the old value is ignored, whatever it is.
    assert (mma_step(np.full((1, 1), np.nan, np.float32), a, b, accumulate=False)[0, 0]
            == np.float32(2.0 ** -22))


def test_the_model_is_exact_on_small_integers():
    rng = np.random.default_rng(0)
    a = rng.integers(-100, 100, (64, 16)).astype(np.float32)
    b = rng.integers(-100, 100, (16, 32)).astype(np.float32)
    acc = rng.integers(-10 ** 6, 10 ** 6, (64, 32)).astype(np.float32)
    np.testing.assert_array_equal(mma_step(acc, a, b, True), acc + a.astype(np.float64) @ b)


def test_tf32_reads_ten_mantissa_bits():
    a = np.array([[1.0 + 2.0 ** -10 + 2.0 ** -11]], np.float32)  # the 2**-11 bit is not read
    assert mma_step(np.zeros((1, 1), np.float32), a, np.ones((1, 1), np.float32), False, tf32=True)[0, 0] == \
        np.float32(1.0 + 2.0 ** -10)


def test_integer_accumulation_wraps():
    a = np.full((1, 32), 127, np.int8)
    b = np.full((32, 1), 127, np.int8)
    acc = np.full((1, 1), 2 ** 31 - 1, np.int32)
    assert integer_step(acc, a, b, True)[0, 0] == np.int32(-(2 ** 31) + 32 * 127 * 127 - 1)


@pytest.mark.parametrize("shape", [(256, 512, 192), (300, 504, 200)])
def test_the_gemm_host_function_is_exact_in_the_interpreter(shape):
    from asyncdsl.kernels import gemm

    m, n, k = shape
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = gemm(a, b)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert c.dtype == ml_dtypes.bfloat16 and np.array_equal(c.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("shape,config",
                         [((512, 512, 192), {}), ((300, 504, 200), {"STAGES": 3, "EPILOGUE": "tma"})])
def test_the_two_cta_gemm_multicasts_b_and_is_exact(shape, config):
    from asyncdsl.kernels.gemm_cooperative import matmul_2cta

    m, n, k = shape
    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    matmul_2cta.interpret(a, b, c, CTAS=4, SNAKE=0, **config)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))
    ptx = matmul_2cta.ptx(a, b, c, CTAS=4, SNAKE=0, **config)
    assert ".multicast::cluster" in ptx and "mbarrier.arrive.release.cta.shared::cluster" in ptx


@pytest.mark.parametrize("two_ctas,shape,split_k", [(False, (128, 512, 640), 4), (False, (200, 264, 456), 3),
                                                     (True, (256, 256, 512), 2)])
def test_split_k_adds_every_part_into_a_float32_c(two_ctas, shape, split_k):
    from asyncdsl.kernels.gemm_cooperative import matmul, matmul_2cta

    m, n, k = shape
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.zeros((m, n), np.float32)
    (matmul_2cta if two_ctas else matmul).interpret(a, b, c, CTAS=4 if two_ctas else 6, SNAKE=0,
                                                    SPLIT_K=split_k)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64))


def test_split_k_wants_a_float32_c_and_says_so_at_the_kernels_line():
    example = importlib.import_module("asyncdsl.kernels.gemm_cooperative")

    with pytest.raises(ad.TraceError, match="must be float32, not bfloat16") as caught:
        example.matmul.compile(ad.ArraySpec((128, 64), ad.bfloat16), ad.ArraySpec((64, 256), ad.bfloat16),
                               ad.ArraySpec((128, 256), ad.bfloat16), CTAS=4, SPLIT_K=2)
    assert caught.value.location.file == __file__


@pytest.mark.parametrize("shape,split_k,bn,ctas,pair,bk", [
    ((128, 256, 640), 2, 256, 4, 1, 64), ((200, 264, 456), 3, 128, 20, 1, 64),
    ((128, 128, 512), 4, 64, 8, 1, 64),
    ((300, 512, 640), 2, 256, 12, 1, 64), ((128, 256, 640), 2, 64, 8, 2, 64),
    ((200, 264, 456), 3, 64, 36, 2, 64),
    ((200, 264, 456), 2, 64, 20, 1, 128), ((128, 256, 712), 2, 64, 8, 2, 128)])
def test_split_k_in_order_ends_in_bf16_and_leaves_the_flags_at_zero(shape, split_k, bn, ctas, pair, bk):
    """Alone, and in CTA pairs side by side sharing a (`pair` 2); slices 64 or 128 deep in K."""
    from asyncdsl.kernels.gemm_cooperative import matmul_split_k, matmul_split_k_2cta, split_k_flags

    m, n, k = shape
    rng = np.random.default_rng(6)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    partial = np.full((split_k - 1, m, n), np.nan, np.float32)
    flags = np.zeros(split_k_flags(m, n, bn, pair), np.int32)
    kernel = matmul_split_k if pair == 1 else matmul_split_k_2cta
    kernel.interpret(a, b, c, partial, flags, CTAS=ctas, SPLIT_K=split_k, BN=bn, BK=bk)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))
    assert not flags.any()


def test_cta_pairs_can_share_a_instead_of_b():
    from asyncdsl.kernels.gemm_cooperative import matmul_2cta

    # One band of tiles 128 rows high, three 256 wide: the one pair of CTAs takes two pairs of
    # tiles side by side, the second running past n; five slices of K go round the 4-slot ring.
    m, n, k = 128, 520, 320
    rng = np.random.default_rng(10)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    matmul_2cta.interpret(a, b, c, CTAS=2, SHARE="a", SNAKE=0)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))


def test_sharing_something_else_than_a_or_b_is_refused_at_the_kernels_line():
    example = importlib.import_module("asyncdsl.kernels.gemm_cooperative")

    with pytest.raises(ad.TraceError, match="SHARE says which operand the CTAs of a cluster share") as caught:
        example.matmul_2cta.compile(ad.ArraySpec((256, 64), ad.bfloat16),
                                    ad.ArraySpec((64, 256), ad.bfloat16),
                                    ad.ArraySpec((256, 256), ad.bfloat16), CTAS=4, SHARE="c")
    assert caught.value.location.file == __file__


@pytest.mark.parametrize("config,message", [
    ({"BK": 96}, "BK must be a positive multiple of 64 .* got 96"),
    ({"BK": 0}, "BK must be a positive multiple"),
    ({"BN": 160}, "BN must be a positive multiple of 64"), ({"STAGES": 0}, "STAGES must be a positive int"),
    ({"SPLIT": "k"}, "SPLIT says how the consumers halve a tile"), ({"EPILOGUE": "st"}, "EPILOGUE is 'tma'"),
    ({"SNAKE": -1}, "SNAKE is the width of the bands of tiles .* got -1"),
])
def test_a_configuration_the_gemm_cannot_be_built_for_is_refused_at_the_kernels_line(config, message):
    example = importlib.import_module("asyncdsl.kernels.gemm_cooperative")

    spec = ad.ArraySpec((256, 256), ad.bfloat16)
    with pytest.raises(ad.TraceError, match=message) as caught:
        example.matmul.compile(spec, spec, spec, CTAS=4, **config)
    assert caught.value.location.file == __file__


BF16 = ad.bfloat16


@pytest.mark.parametrize("kernel", ["matmul", "matmul_pingpong", "matmul_narrow"])
@pytest.mark.parametrize("a,b,c,message", [
    ((128, 64), (128, 256), (128, 256),
     r"a is \(M, K\) = \(128, 64\) and b is \(K, N\) = \(128, 256\): their K differ"),
    ((128, 64), (64, 256), (64, 256), r"c must be \(M, N\) = \(128, 256\) .* got \(64, 256\)"),
    ((128, 64), (64, 256), (128, 256, 1), r"c must be a matrix, got shape \(128, 256, 1\)"),
    ((128, 64), (64, 252), (128, 252),
     r"b's rows are 504 bytes \(252 bfloat16\): TMA copies rows of a multiple of 16"),
    ((128, 64, ad.float32), (64, 256), (128, 256),
     "a and b must both be bfloat16 or both float16, got float32 and"),
    ((128, 64), (64, 256), (128, 256, ad.int8), "c must be bfloat16 or float16"),
])
def test_arrays_that_do_not_make_a_product_are_refused_at_the_kernels_line(kernel, a, b, c, message):
    """A K or an (M, N) that disagree would be multiplied as far as the smaller array reaches,
    the rest of c left as it was: refused when traced, as are rows TMA cannot copy and element
    types the layouts do not hold."""
    example = importlib.import_module("asyncdsl.kernels.gemm_cooperative")
    matmul_pingpong = importlib.import_module("asyncdsl.kernels.gemm_pingpong")

    def spec(shape):
        dims = tuple(d for d in shape if isinstance(d, int))
        dtype = next((d for d in shape if not isinstance(d, int)), BF16)
        return ad.ArraySpec(dims, dtype)

    module = matmul_pingpong if kernel == "matmul_pingpong" else example
    with pytest.raises(ad.TraceError, match=message) as caught:
        getattr(module, kernel).compile(spec(a), spec(b), spec(c), CTAS=2)
    assert caught.value.location.file == __file__


@pytest.mark.parametrize("ctas", [0, -1, 1.5, True])
def test_a_count_of_ctas_that_is_no_positive_int_is_refused(ctas):
    example = importlib.import_module("asyncdsl.kernels.gemm_cooperative")

    spec = ad.ArraySpec((128, 128), BF16)
    with pytest.raises(ad.TraceError, match=f"CTAS .* must be a positive int, got {ctas!r}"):
        example.matmul.compile(spec, spec, spec, CTAS=ctas)


@pytest.mark.parametrize("change,message", [
    ({"b": ad.ArraySpec((256, 256), ad.float8_e4m3fn)}, r"b is \(N, K\) = \(256, 256\): their K differ"),
    ({"c": ad.ArraySpec((128, 128), BF16)}, r"c must be \(M, N\) = \(128, 256\)"),
    ({"a_scale": ad.ArraySpec((64,), ad.float32)}, r"a_scale must be float32 of shape \(128,\)"),
    ({"b_scale": ad.ArraySpec((256,), BF16)}, r"b_scale must be float32 of shape \(256,\)"),
    ({"c": ad.ArraySpec((128, 256), ad.float32)}, "c must be bfloat16 or float16, got float32"),
    ({"a": ad.ArraySpec((128, 128), BF16)}, "a and b must be float8 .* got bfloat16 and float8_e4m3fn"),
])
def test_the_fp8_gemm_refuses_arrays_that_do_not_make_its_product(change, message):
    example = importlib.import_module("asyncdsl.kernels.gemm_fp8")

    arguments = {"a": ad.ArraySpec((128, 128), ad.float8_e4m3fn),
                 "b": ad.ArraySpec((256, 128), ad.float8_e4m3fn),
                 "a_scale": ad.ArraySpec((128,), ad.float32), "b_scale": ad.ArraySpec((256,), ad.float32),
                 "c": ad.ArraySpec((128, 256), BF16), "CTAS": 2, **change}
    with pytest.raises(ad.TraceError, match=message) as caught:
        example.matmul_fp8.compile(**arguments)
    assert caught.value.location.file == __file__


def test_split_k_in_order_sums_the_splits_in_their_order():
    """Parts p0 = 1 + 2^-8, p1 = p2 = 2^-24 (each one exact product): in float32 (p0 + p1) + p2
    ties back to p0 twice, which rounds to 1.0 in bf16; summed any other way (p1 + p2 first, or
    from the last split down) it is p0 + 2^-23, which rounds up to 1 + 2^-7."""
    from asyncdsl.kernels.gemm_cooperative import matmul_split_k, split_k_flags

    m, n, k = 128, 64, 192  # three splits of one 64-deep K step each
    a = np.zeros((m, k), ml_dtypes.bfloat16)
    b = np.zeros((k, n), ml_dtypes.bfloat16)
    a[:, 0], a[:, 1], b[0], b[1] = 1, 2.0 ** -8, 1, 1
    for s in (1, 2):
        a[:, 64 * s], b[64 * s] = 2.0 ** -12, 2.0 ** -12
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    flags = np.zeros(split_k_flags(m, n, 64), np.int32)
    matmul_split_k.interpret(a, b, c, np.full((2, m, n), np.nan, np.float32), flags, CTAS=3, SPLIT_K=3, BN=64)
    assert (c.astype(np.float32) == 1.0).all()


@pytest.mark.parametrize("change,message", [
    ({"SPLIT_K": 1}, "splits K in two or more parts"),
    ({"partial": ad.ArraySpec((1, 128, 256), ad.bfloat16)}, "partial must be a float32 array"),
    ({"partial": ad.ArraySpec((128, 256), ad.float32)}, r"SPLIT_K - 1 slots of c's shape: \(1, 128, 256\)"),
    ({"SPLIT_K": 3, "partial": ad.ArraySpec((1, 128, 256), ad.float32)}, r"\(2, 128, 256\) or more slots"),
    ({"flags": ad.ArraySpec((1,), ad.int32)}, r"one per half tile: shape \(2,\)"),
    ({"CTAS": 2, "SPLIT_K": 4, "partial": ad.ArraySpec((3, 128, 256), ad.float32)},
     "4 units of work for 2 CTAs: matmul_split_k takes one unit per CTA"),
    ({"c": ad.ArraySpec((128, 256), ad.float32)}, "c must be bfloat16 or float16"),
])
def test_split_k_in_order_says_what_its_arguments_lack(change, message):
    example = importlib.import_module("asyncdsl.kernels.gemm_cooperative")

    arguments = {"a": ad.ArraySpec((128, 512), ad.bfloat16), "b": ad.ArraySpec((512, 256), ad.bfloat16),
                 "c": ad.ArraySpec((128, 256), ad.bfloat16),
                 "partial": ad.ArraySpec((1, 128, 256), ad.float32),
                 "flags": ad.ArraySpec((2,), ad.int32), "CTAS": 8, "SPLIT_K": 2, **change}
    with pytest.raises(ad.TraceError, match=message) as caught:
        example.matmul_split_k.compile(**arguments)
    assert caught.value.location.file == __file__


@pytest.mark.parametrize("shape", [(256, 512, 256), (300, 264, 384)])
def test_the_fp8_gemm_host_function_is_exact_in_the_interpreter(shape):
    from asyncdsl.kernels import gemm_fp8

    a, b, a_scale, b_scale, _ = fp8.example_inputs(fp8.problem_specs(*shape), np.random.default_rng(1))
    c = gemm_fp8(a, b, a_scale, b_scale)
    assert np.array_equal(c.view(np.uint16), fp8.reference(a, b, a_scale, b_scale).view(np.uint16))


def _fp8_gemm_is_exact(kernel, shape, seed: int, **config) -> None:
    """`kernel` (an fp8 GEMM of the example) gives numpy's product, bit for bit, in the
    interpreter on the example's small-integer inputs."""
    a, b, a_scale, b_scale, c = fp8.example_inputs(fp8.problem_specs(*shape), np.random.default_rng(seed))
    kernel.interpret(a, b, a_scale, b_scale, c, **config)
    assert np.array_equal(c.view(np.uint16), fp8.reference(a, b, a_scale, b_scale).view(np.uint16))


@pytest.mark.parametrize("shape,config", [
    ((300, 320, 384), {"CTAS": 4, "BN": 128, "STAGES": 6}),  # the last pair of tile rows half past a
    ((128, 256, 256), {"CTAS": 10, "BN": 64, "STAGES": 8, "EVICT_FIRST": "b"}),  # a pair with no tile
])
def test_the_fp8_gemm_in_cta_pairs_sharing_b_is_exact(shape, config):
    _fp8_gemm_is_exact(fp8.matmul_fp8_2cta, shape, seed=2, **config)
    assert "multicast::cluster" in fp8.matmul_fp8_2cta.ptx(*fp8.problem_specs(*shape), **config)


@pytest.mark.parametrize("two_ctas", [False, True])
@pytest.mark.parametrize("promote", [1, 2, 3])
def test_the_fp8_gemm_adding_groups_of_slices_into_a_float32_total_is_exact(two_ctas, promote):
    shape = (200, 192, 640)  # five slices of K: groups of 2 and 3 end past K (zero filled)
    kernel = fp8.matmul_fp8_2cta if two_ctas else fp8.matmul_fp8
    _fp8_gemm_is_exact(kernel, shape, seed=promote, CTAS=4, BN=192, STAGES=4, PROMOTE=promote)


@pytest.mark.parametrize("shape,config", [
    ((300, 320, 384), {"CTAS": 2}),  # 9 tiles: 5 and 4 a CTA, so 3 and 2 for each first consumer
    ((256, 256, 512), {"CTAS": 2}),  # 4 tiles: 2 a CTA, one a consumer
    ((128, 128, 256), {"CTAS": 3, "BN": 64, "STAGES": 8, "EVICT_FIRST": "b"}),  # a CTA without a tile
])
def test_the_fp8_gemm_with_ping_pong_consumers_is_exact(shape, config):
    _fp8_gemm_is_exact(fp8.matmul_fp8_pingpong, shape, seed=3, **config)


@pytest.mark.parametrize("shape,config", [
    ((300, 320, 384), {"CTAS": 2, "BN": 64}),  # 10 tiles a CTA, the second pair half past a
    ((384, 128, 256), {"CTAS": 4}),  # 2 pairs of tile rows: one tile a CTA, for its consumer 0
    ((128, 128, 256), {"CTAS": 4, "BN": 64, "STAGES": 8, "EVICT_FIRST": "b"}),  # a pair without a tile
])
def test_the_fp8_gemm_with_ping_pong_consumers_in_cta_pairs_is_exact(shape, config):
    _fp8_gemm_is_exact(fp8.matmul_fp8_pingpong_2cta, shape, seed=4, **config)
    assert "multicast::cluster" in fp8.matmul_fp8_pingpong_2cta.ptx(*fp8.problem_specs(*shape), **config)


@pytest.mark.parametrize("config,fragment", [
    ({"PROMOTE": 1}, "fits the consumers' 232 registers a thread for BN <= 192, got BN=256"),
    ({"PROMOTE": -1, "BN": 128}, "a non-negative int (0: the whole K), got -1"),
    ({"PROMOTE": True, "BN": 128}, "a non-negative int (0: the whole K), got True"),
])
def test_the_fp8_gemm_refuses_a_promotion_it_cannot_make(config, fragment):
    with pytest.raises(ad.TraceError) as caught:
        fp8.matmul_fp8.compile(*fp8.problem_specs(256, 256, 256), CTAS=2, **config)
    assert fragment in caught.value.message, caught.value.message


@pytest.mark.parametrize("bn", [256, 192, 96, "128"])
def test_the_ping_pong_fp8_gemm_refuses_tiles_whose_accumulator_does_not_fit(bn):
    with pytest.raises(ad.TraceError, match="BN must be 64 or 128"):
        fp8.matmul_fp8_pingpong.compile(*fp8.problem_specs(256, 256, 256), CTAS=2, BN=bn)


@ad.kernel(grid=(1,), block=128)
def _misused(a, b, c, MISTAKE: ad.constexpr):
    a_s = ad.smem(a.shape, a.dtype, **LAYOUT)
    b_s = ad.smem(b.shape, b.dtype, **LAYOUT)
    landed = ad.barrier(arrival_count=2)
    ad.async_copy(a, a_s, barrier=landed)
    ad.async_copy(b, b_s, barrier=landed)
    landed.wait()
    acc = ad.registers((64, 64), ad.float32, layout=ad.WGMMA)
    ad.wgmma(acc, a_s, b_s, accumulate=MISTAKE == "accumulate into nothing")
    if MISTAKE == "refill too early":
        again = ad.barrier()
        ad.async_copy(a, a_s, barrier=again)  # the wgmma may still be reading a_s
        again.wait()
    ad.wgmma_wait(0)
    ad.store(c, acc[...])


def _operands():
    a = np.ones((64, 64), ml_dtypes.bfloat16)
    return a, a.copy(), np.zeros((64, 64), np.float32)


def test_refilling_an_operand_before_the_wgmma_retired_is_a_race():
    with pytest.raises(ad.RaceError, match="wgmma at .* may still be reading"):
        _misused.interpret(*_operands(), MISTAKE="refill too early")


def test_accumulating_into_unwritten_registers_is_an_error():
    with pytest.raises(ad.InterpretError, match="accumulate=False"):
        _misused.interpret(*_operands(), MISTAKE="accumulate into nothing")


@ad.kernel(grid=(1,), block=128)
def _windows_and_releases(a, b, c, d, LOAD_FIRST: ad.constexpr):
    a_s = ad.smem(a.shape, a.dtype, **LAYOUT)
    b_s = ad.smem(b.shape, b.dtype, **LAYOUT)
    landed = ad.barrier(arrival_count=2)
    done = ad.barrier()
    ad.async_copy(a, a_s, barrier=landed)
    ad.async_copy(b, b_s, barrier=landed)
    landed.wait()
    if LOAD_FIRST:
        ad.store(d, ad.load(a_s).astype(ad.float32))  # a register-tile read of a_s
    acc = ad.registers((64, 128), ad.float32, layout=ad.WGMMA)
    ad.wgmma(acc, a_s, b_s, accumulate=False)
    ad.wgmma_wait(0)
    done.arrive(sync=False)  # fine unless the warpgroup itself read a_s (LOAD_FIRST)
    ad.store(c, acc[:, 64:128])


def test_a_window_of_registers_and_a_release_without_a_meeting():
    a = np.arange(64 * 64).reshape(64, 64).astype(ml_dtypes.bfloat16) % 7
    b = np.ones((64, 128), ml_dtypes.bfloat16)
    c, d = np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32)
    _windows_and_releases.interpret(a, b, c, d, False)
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b.astype(np.float64))[:, 64:])
    ptx = _windows_and_releases.ptx(a, b, c, d, False)
    arrive = ptx.index("mbarrier.arrive.release")
    assert "bar.sync" not in ptx[ptx.rindex("wgmma.wait_group", 0, arrive):arrive]
    with pytest.raises(ad.InterpretError, match="sync=False after the register-tile load"):
        _windows_and_releases.interpret(a, b, c, d, True)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_any_wgmma_is_exact_on_integers_and_assembles(case):
    from asyncdsl.runtime.ptxas import assemble

    a, b = integer_inputs(case, seed=case.n)
    c = np.zeros((case.m, case.n), case.acc_dtype.numpy)
    run(case, a, b, c, interpret=True)
    np.testing.assert_array_equal(c, reference(case, a, b))
    assemble(ptx(case))


@ad.kernel(grid=(1,), block=128)
def _constant_a(b, c):
    b_s = ad.smem(b.shape, b.dtype, **LAYOUT)
    landed = ad.barrier()
    ad.async_copy(b, b_s, barrier=landed)
    landed.wait()
    acc = ad.registers((64, 64), ad.float32, layout=ad.WGMMA)
    ad.wgmma(acc, ad.full((64, 64), 1.0, ad.bfloat16), b_s, accumulate=False)  # a constant register A
    ad.wgmma_wait(0)
    ad.store(c, acc[...])


def test_a_constant_register_a_is_every_register_of_the_layout():
    from asyncdsl.runtime.ptxas import assemble

    b = np.random.default_rng(6).integers(-3, 4, (64, 64)).astype(ml_dtypes.bfloat16)
    c = np.zeros((64, 64), np.float32)
    _constant_a.interpret(b, c)
    np.testing.assert_array_equal(c, np.ones((64, 64)) @ b.astype(np.float64))
    assemble(_constant_a.ptx(b, c))


@pytest.mark.parametrize("block_n", [64, 192])
def test_an_odd_number_of_epilogue_pieces_does_not_race_the_next_tile(block_n):
    from asyncdsl.kernels.gemm_cooperative import matmul

    m, n, k = 128, 3 * block_n, 64
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.zeros((m, n), ml_dtypes.bfloat16)
    matmul.interpret(a, b, c, CTAS=1, BN=block_n, SNAKE=0)  # one CTA walks three tiles
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))


@given(st.integers(1, 40), st.integers(1, 40), st.sampled_from([0, 1, 2, 3, 4, 8, 16]))
def test_the_tile_order_is_row_by_row_or_a_planar_snake_with_a_short_last_band(m_tiles, n_tiles, width):
    from asyncdsl.blocks.tile_order import tile_position

    if width == 0:
        expected = [(m, n) for m in range(m_tiles) for n in range(n_tiles)]
    else:
        expected = []
        for band, first in enumerate(range(0, m_tiles, width)):
            columns = range(n_tiles) if band % 2 == 0 else reversed(range(n_tiles))
            expected += [(m, n) for n in columns for m in range(first, min(first + width, m_tiles))]
    assert [tile_position(t, m_tiles, n_tiles, width) for t in range(m_tiles * n_tiles)] == expected


def test_a_gemm_whose_last_band_of_tile_rows_is_short_is_exact():
    from asyncdsl.kernels.gemm_cooperative import matmul

    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (300, 200)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (200, 504)).astype(ml_dtypes.bfloat16)
    c = np.full((300, 504), np.nan, ml_dtypes.bfloat16)
    matmul.interpret(a, b, c, CTAS=2, SNAKE=2)  # 3 rows of tiles: a band of 2, then one of 1 (traced)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("two_ctas", [False, True])
def test_the_gemm_with_slices_128_deep_in_k_is_exact(two_ctas):
    from asyncdsl.kernels.gemm_cooperative import matmul, matmul_2cta

    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (300, 328)).astype(ml_dtypes.bfloat16)  # K: two slices and a ragged one
    b = rng.integers(-3, 4, (328, 200)).astype(ml_dtypes.bfloat16)
    c = np.full((300, 200), np.nan, ml_dtypes.bfloat16)
    (matmul_2cta if two_ctas else matmul).interpret(a, b, c, CTAS=4, BN=64, BK=128, STAGES=4)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("two_ctas,shape,config", [
    (False, (200, 264, 328), {"BK": 128, "STAGES": 3}),  # 64-row tiles, every dim ragged
    (False, (300, 200, 136), {"BM": 128, "BN": 64, "STAGES": 4}),
    (True, (200, 264, 200), {"BN": 128, "STAGES": 3}),  # pairs one above the other sharing b
    (True, (136, 520, 136), {"BM": 128, "BN": 64, "STAGES": 3, "SHARE": "a"}),  # side by side sharing a
])
def test_the_one_consumer_gemm_is_exact(two_ctas, shape, config):
    from asyncdsl.kernels.gemm_cooperative import matmul_narrow, matmul_narrow_2cta

    m, n, k = shape
    rng = np.random.default_rng(6)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    (matmul_narrow_2cta if two_ctas else matmul_narrow).interpret(a, b, c, CTAS=4, SNAKE=0, **config)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("two_ctas,share", [(False, "b"), (True, "b"), (True, "a")])
def test_the_gemm_with_192_wide_tiles_is_exact(two_ctas, share):
    from asyncdsl.kernels.gemm_cooperative import matmul, matmul_2cta

    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (512, 128)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (128, 400)).astype(ml_dtypes.bfloat16)
    c = np.full((512, 400), np.nan, ml_dtypes.bfloat16)
    (matmul_2cta if two_ctas else matmul).interpret(a, b, c, CTAS=4, BN=192, SHARE=share)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))


@given(st.integers(1, 1100), st.integers(8, 2100), st.sampled_from([64, 128, 256]), st.sampled_from([1, 2]))
def test_every_consumer_part_of_a_split_k_tile_has_a_flag_of_its_own(m, n, bn, pair):
    """The flag numbers `matmul_split_k` gives the consumers' parts of its tiles (128 x bn,
    two 64-row parts each; pairs of CTAs side by side) are distinct and below split_k_flags."""
    from asyncdsl.blocks.split_k_sum import part_number, split_k_flags

    m_tiles, n_tiles = -(-m // 128), -(-n // (bn * pair))
    columns = n_tiles * pair
    numbers = [part_number(tile_m * 128 + me * 64, (tile_n * pair + cta) * bn, (64, bn), columns)
               for tile_m in range(m_tiles) for tile_n in range(n_tiles) for cta in range(pair)
               for me in range(2)]
    assert len(set(numbers)) == len(numbers)
    assert min(numbers) == 0 and max(numbers) == split_k_flags(m, n, bn, pair) - 1
