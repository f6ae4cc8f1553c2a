"""asyncdsl.autotune on the H200: the choices are timed on the device, the fastest by those times
runs, the result is the kernels' exact result, and arguments named in `restore` come out of the
tuning as they went in (a split-K GEMM adds into its float32 c)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from gpu_support import hopper_or_skip

import asyncdsl as ad
from asyncdsl.kernels.gemm_cooperative import matmul, matmul_narrow
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()


def _integers(m: int, n: int, k: int):
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def test_the_fastest_gemm_choice_runs_and_is_exact():
    a, b, exact = _integers(128, 1024, 2048)
    c = to_device(np.full(exact.shape, np.nan, ml_dtypes.bfloat16))
    tuned = ad.autotune([ad.Choice(matmul), ad.Choice(matmul, BN=64, STAGES=8),
                         ad.Choice(matmul_narrow, BK=128, STAGES=6)])
    a_d, b_d = to_device(a), to_device(b)
    tuned(a_d, b_d, c, CTAS=132)
    (timings,) = tuned.timings.values()
    assert all(isinstance(ms, float) and ms > 0 for ms in timings.values()), timings
    assert tuned.chosen(a_d, b_d, c, CTAS=132).name == min(timings, key=timings.get)
    assert to_host(c).view(np.uint16).tolist() == exact.astype(ml_dtypes.bfloat16).view(np.uint16).tolist()


def test_restored_arguments_see_only_the_call_after_the_tuning():
    a, b, exact = _integers(256, 512, 1024)
    start = np.ones(exact.shape, np.float32)
    c = to_device(start)
    tuned = ad.autotune([ad.Choice(matmul, SPLIT_K=2, BN=128), ad.Choice(matmul, SPLIT_K=4, BN=128)],
                        restore=("c",), warmup=1, repeat=3)
    tuned(to_device(a), to_device(b), c, CTAS=132)  # every trial added a @ b into c; one call's worth is left
    np.testing.assert_array_equal(to_host(c), start + exact)
