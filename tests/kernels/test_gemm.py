"""The bf16 GEMM's host function (`asyncdsl.kernels.gemm`) in the interpreter, on every path its
configuration takes, against numpy in float64 (small integers: every sum exact)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl.kernels as K
import asyncdsl as ad
from asyncdsl.errors import ArgumentError
from asyncdsl.blocks.gemm_config import GemmConfig
from asyncdsl.kernels.gemm_choice import GemmPlan, _planned, candidates, choose, plan


def _operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16),
            rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16))


def _exact(a, b):
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("shape,config", [
    ((256, 512, 192), None),                                      # chosen on 6 CTAs: ping-pong
    ((200, 264, 200), GemmConfig(BN=64, STAGES=8)),                # ragged edges, narrow tiles
    ((128, 128, 320), GemmConfig(BN=64, BK=64, STAGES=8, SPLIT_K=3)),  # split K in order into bf16
    ((200, 264, 320), GemmPlan("narrow", GemmConfig(BM=64, BN=64, BK=128, STAGES=6, EVICT_FIRST="ab"))),
    ((300, 264, 200), GemmPlan("cooperative", GemmConfig(BM=256, BN=128, SHARE="b"), pair=True)),
    ((128, 128, 320), GemmPlan("cooperative", GemmConfig(BN=64, SPLIT_K=2, SHARE="a"), pair=True)),
], ids=str)
def test_gemm_of_numpy_arrays_is_exact(shape, config):
    m, n, k = shape
    a, b = _operands(m, n, k)
    c = K.gemm(a, b, config=config, ctas=6)  # split K: one unit a CTA
    assert c.shape == (m, n) and c.dtype == ml_dtypes.bfloat16
    assert np.array_equal(c.view(np.uint16), _exact(a, b).view(np.uint16))


@pytest.mark.parametrize("m,n,k", [(0, 64, 64), (64, 0, 64), (64, 64, 0), (0, 0, 0)])
def test_an_empty_product_is_numpys(m, n, k):
    a, b = _operands(m, n, k)
    c = K.gemm(a, b)
    assert c.shape == (m, n) and np.array_equal(c.view(np.uint16), _exact(a, b).view(np.uint16))
    out = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    assert K.gemm(a, b, out=out) is out and not np.isnan(out.astype(np.float32)).any()  # zeros where K is 0
    with pytest.raises(ArgumentError, match=r"do not multiply into c") as caught:
        K.gemm(a, np.zeros((k + 1, n), ml_dtypes.bfloat16), out=out)
    assert caught.value.location.file == __file__


def test_gemm_writes_into_out_when_given():
    a, b = _operands(128, 256, 64)
    out = np.full((128, 256), np.nan, ml_dtypes.bfloat16)
    assert K.gemm(a, b, out=out) is out
    assert np.array_equal(out.view(np.uint16), _exact(a, b).view(np.uint16))


def test_a_shape_is_planned_once_and_runs_the_plans_kernel(monkeypatch):
    a, b = _operands(256, 512, 192)
    _planned.cache_clear()
    planned = []
    monkeypatch.setattr("asyncdsl.kernels.gemm_choice.plan",
                        lambda *shape: planned.append(shape) or plan(*shape))
    launched = []
    monkeypatch.setattr("asyncdsl.kernels.gemm_choice.launch",
                        lambda kernel, *args, **kwargs: launched.append((kernel, kwargs)))
    for _ in range(3):
        K.gemm(a, b, ctas=6)
    chosen = plan(256, 512, 192, 6)
    assert planned == [(256, 512, 192, 6)]
    assert launched == 3 * [(chosen.kernel(), {"stream": None, "CTAS": 6, **chosen.constexprs()})]


@pytest.mark.parametrize("shape,expected", [
    ((8192, 8192, 8192), GemmConfig()),
    ((3000, 4104, 2056), GemmConfig(BN=192)),                     # 528 = 4 waves of 132 tiles
    ((128, 4096, 1024), GemmConfig(BN=64, STAGES=8)),
    ((128, 1024, 4096), GemmConfig(BN=64, BK=64, STAGES=8, SPLIT_K=4)),
], ids=str)
def test_the_configuration_follows_how_many_tiles_fill_the_ctas(shape, expected):
    assert choose(*shape, ctas=132) == expected


# The rows of `benchmarks/matmul.py --table` on the H200's 132 CTAs, and what the sweep beside
# them measured fastest (within its noise).
@pytest.mark.parametrize("shape,expected", [
    ((8192, 8192, 8192), GemmPlan("cooperative")),
    ((2048, 2048, 2048), GemmPlan("cooperative")),                   # 128 tiles: nearly a wave
    ((8192, 4096, 4096), GemmPlan("pingpong", GemmConfig(BN=128))),  # K short, 15 waves of 128x128
    ((8192, 4096, 14336), GemmPlan("cooperative")),                  # K long: the epilogue is cheap
    ((3000, 4104, 2056), GemmPlan("cooperative", GemmConfig(BM=256, BN=128, SHARE="b"), pair=True)),
    ((512, 4096, 14336), GemmPlan("pingpong", GemmConfig(BN=128, STAGES=6))),
    ((128, 14336, 4096), GemmPlan("cooperative", GemmConfig(BN=128, BK=128, STAGES=3, EVICT_FIRST="b"))),
    ((1024, 1024, 1024), GemmPlan("narrow", GemmConfig(BM=64, BN=128, BK=128, STAGES=4))),
    # a's rows of 2000 bytes start inside 128-byte lines: pairs share each slice of them
    ((1000, 1000, 1000),
     GemmPlan("narrow", GemmConfig(BM=128, BN=64, BK=128, STAGES=4, SHARE="a"), pair=True)),
    ((128, 4096, 4096), GemmPlan("narrow", GemmConfig(BM=64, BN=64, BK=128, STAGES=6, EVICT_FIRST="ab"))),
    ((64, 2048, 8192), GemmPlan("cooperative", GemmConfig(BN=64, STAGES=8, SPLIT_K=4))),  # 32 tiles
], ids=str)
def test_the_plan_follows_how_many_tiles_fill_the_ctas(shape, expected):
    assert plan(*shape, ctas=132) == expected


def test_every_plan_names_a_kernel_that_takes_its_configuration(ptxas):
    """What `gemm` launches for any shape on the GPU's CTAs: each distinct plan's kernel compiles
    with the plan's constexprs and ptxas assembles it."""
    shapes = [(m, n, k) for m in (1, 64, 128, 512, 3000, 8192) for n in (8, 1000, 4104, 14336)
              for k in (8, 1000, 4096, 8192)]
    plans = {plan(m, n, k, ctas=132) for m, n, k in shapes}
    assert {p.schedule for p in plans} == {"cooperative", "pingpong", "narrow"}
    assert any(p.pair for p in plans) and any(p.config.SPLIT_K > 1 for p in plans)
    bf16 = ad.bfloat16
    for chosen in plans - {p for p in plans if p.config.SPLIT_K > 1}:  # split K: the test above
        ptxas(chosen.kernel().ptx(ad.ArraySpec((512, 1024), bf16), ad.ArraySpec((1024, 1000), bf16),
                                  ad.ArraySpec((512, 1000), bf16), CTAS=132, **chosen.constexprs()))


def test_an_out_sharing_memory_with_an_input_is_refused():
    """The kernels read a and b tile by tile while they write c: c = a had tiles of a read after
    they were overwritten (a wrong product, no error)."""
    a, b = _operands(128, 128, 128)
    kept = a.copy()
    def bias_of_out(a, b, out):
        return K.gemm_bias_activation(a, b, out[0], "relu", out=out)

    calls = ((K.gemm, a, "a"), (K.gemm, b[:, :], "b"), (K.gemm_stream_k, b, "b"),
             (bias_of_out, np.empty_like(a), "bias"))
    for call, out, name in calls:
        with pytest.raises(ArgumentError, match=f"out shares memory with {name}") as error:
            call(a, b, out=out)
        assert error.value.location.file == __file__
    assert np.array_equal(a.view(np.uint16), kept.view(np.uint16))


def test_operands_that_are_not_matrices_are_refused_at_the_callers_line():
    """The host functions size c from a's and b's shapes: a vector or a batch of matrices was
    an internal unpacking error before any check."""
    a, b = _operands(64, 64, 64)
    e4m3 = ml_dtypes.float8_e4m3fn
    calls = ((lambda: K.gemm(a[0], b), r"a must be a matrix, got shape \(64,\)"),
             (lambda: K.gemm(a, b[None]), r"b must be a matrix, got shape \(1, 64, 64\)"),
             (lambda: K.gemm_stream_k(a[None], b), "a must be a matrix"),
             (lambda: K.gemm_bias_activation(a, b.tolist(), b[0]), "b must be a matrix, got list"),
             (lambda: K.gemm_fp8_rows(a, b[0]), "b must be a matrix"),
             (lambda: K.gemm_fp8(a.astype(e4m3), b[0].astype(e4m3), a[0], b[0]), "b must be a matrix"))
    for call, message in calls:
        with pytest.raises(ArgumentError, match=message) as error:
            call()
        assert error.value.location.file == __file__


def test_an_odd_count_of_ctas_is_never_planned_in_cta_pairs():
    """A pair's grid is whole clusters of two: on 5 CTAs the 256 x 128 tiles in pairs that fill
    896 x 256 better than 128 x 256 ones (as on 6) would not launch."""
    assert plan(896, 256, 64, ctas=6).pair and not plan(896, 256, 64, ctas=5).pair
    assert plan(3000, 4104, 4096, ctas=132).pair and not plan(3000, 4104, 4096, ctas=131).pair
    assert PAIRS_SHARING_A in candidates(1000, 1000, 1000, ctas=132)
    assert not any(chosen.pair for chosen in candidates(1000, 1000, 1000, ctas=131))
    a, b = _operands(896, 256, 64)
    assert np.array_equal(K.gemm(a, b, ctas=5).view(np.uint16), _exact(a, b).view(np.uint16))


def test_a_plan_the_kernels_cannot_run_is_refused_at_the_callers_line():
    a, b = _operands(128, 128, 64)
    with pytest.raises(ArgumentError, match="schedule is one of") as error:
        K.gemm(a, b, config=GemmPlan("stream"))
    assert error.value.location.file == __file__
    with pytest.raises(ArgumentError, match="pair=False"):
        K.gemm(a, b, config=GemmPlan("pingpong", pair=True))
    with pytest.raises(ArgumentError, match="GemmConfig or a GemmPlan"):
        K.gemm(a, b, config={"BN": 64})


@pytest.mark.parametrize("chosen,message", [
    (GemmPlan("cooperative", GemmConfig(BM=256, BN=64, SPLIT_K=2)), "split-K kernel takes .*not BM=256"),
    (GemmPlan("pingpong", GemmConfig(BN=128, EPILOGUE="tma")), "pingpong kernel takes .*not EPILOGUE='tma'"),
    (GemmPlan("narrow", GemmConfig(BM=64, BN=64, SPLIT="n")), "narrow kernel takes .*not SPLIT='n'"),
    (GemmPlan("narrow", GemmConfig(BM=64, BN=64, SPLIT_K=2)), "SPLIT_K=2 is 'cooperative', got 'narrow'"),
], ids=str)
def test_a_plan_whose_kernel_would_not_take_some_of_its_configuration_is_refused(chosen, message):
    # Each ran a kernel of another configuration than the plan's, silently (split K: BM=128 tiles
    # of the cooperative kernel whatever the schedule).
    a, b = _operands(128, 128, 256)
    with pytest.raises(ArgumentError, match=message) as error:
        K.gemm(a, b, config=chosen, ctas=4)
    assert error.value.location.file == __file__


def test_a_plan_asking_for_what_its_kernel_fixes_runs():
    a, b = _operands(128, 128, 256)
    for chosen in (GemmPlan("cooperative", GemmConfig(BN=64, SPLIT_K=2, SHARE="a")),
                   GemmPlan("narrow", GemmConfig(BM=64, BN=64, REGISTERS=None))):
        c = K.gemm(a, b, config=chosen, ctas=4)
        assert np.array_equal(c.view(np.uint16), _exact(a, b).view(np.uint16))


PAIRS_SHARING_A = GemmPlan("narrow", GemmConfig(BM=128, BN=64, BK=128, STAGES=4, SHARE="a"), pair=True)


@pytest.mark.parametrize("shape,neighbour", [
    ((1000, 1000, 1000), PAIRS_SHARING_A),
    ((8192, 4096, 4096), GemmPlan("cooperative")),
    ((3000, 4104, 2056), GemmPlan("pingpong", GemmConfig(BN=128))),
], ids=str)
def test_tuning_times_the_plan_first_and_its_neighbours(shape, neighbour, ptxas):
    """`gemm(tune=True)` times `candidates`: the plan's choice first, then distinct neighbours of
    the same kind of problem, each a kernel that compiles for the shape and assembles."""
    tried = candidates(*shape, ctas=132)
    assert tried[0] == plan(*shape, ctas=132) and neighbour in tried and len(set(tried)) == len(tried) > 2
    m, n, k = shape
    bf16 = ad.bfloat16
    for chosen in tried:
        ptxas(chosen.kernel().ptx(ad.ArraySpec((m, k), bf16), ad.ArraySpec((k, n), bf16),
                                  ad.ArraySpec((m, n), bf16), CTAS=132, **chosen.constexprs()))


def test_a_split_k_plan_is_tuned_against_nothing_and_the_interpreter_times_nothing():
    assert candidates(64, 2048, 8192, ctas=132) == [plan(64, 2048, 8192, ctas=132)]
    a, b = _operands(256, 512, 192)
    tuned = K.gemm(a, b, tune=True, ctas=6)  # numpy: the plan's own choice runs
    assert np.array_equal(tuned.view(np.uint16), K.gemm(a, b, ctas=6).view(np.uint16))
    with pytest.raises(ArgumentError, match="tune is a flag") as error:
        K.gemm(a, b, tune="fast")
    assert error.value.location.file == __file__

