"""The bf16 GEMM's host function (`asyncdsl.kernels.gemm`) in the interpreter, on every path its
configuration takes, against numpy in float64 (small integers: every sum exact)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl.kernels as K
from asyncdsl.blocks.gemm_config import GemmConfig
from asyncdsl.kernels.gemm import choose


def _operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16),
            rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16))


def _exact(a, b):
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("shape,config", [
    ((256, 512, 192), None),                                      # chosen: 128 x 256 tiles
    ((200, 264, 200), GemmConfig(BN=64, STAGES=8)),                # ragged edges, narrow tiles
    ((128, 128, 320), GemmConfig(BN=64, BK=64, STAGES=8, SPLIT_K=3)),  # split K in order into bf16
], ids=str)
def test_gemm_of_numpy_arrays_is_exact(shape, config):
    m, n, k = shape
    a, b = _operands(m, n, k)
    c = K.gemm(a, b, config=config, ctas=6)  # split K: one unit a CTA
    assert c.shape == (m, n) and c.dtype == ml_dtypes.bfloat16
    assert np.array_equal(c.view(np.uint16), _exact(a, b).view(np.uint16))


def test_gemm_writes_into_out_when_given():
    a, b = _operands(128, 256, 64)
    out = np.full((128, 256), np.nan, ml_dtypes.bfloat16)
    assert K.gemm(a, b, out=out) is out
    assert np.array_equal(out.view(np.uint16), _exact(a, b).view(np.uint16))


@pytest.mark.parametrize("shape,expected", [
    ((8192, 8192, 8192), GemmConfig()),
    ((3000, 4104, 2056), GemmConfig(BN=192)),                     # 528 = 4 waves of 132 tiles
    ((128, 4096, 1024), GemmConfig(BN=64, STAGES=8)),
    ((128, 1024, 4096), GemmConfig(BN=64, BK=64, STAGES=8, SPLIT_K=4)),
], ids=str)
def test_the_configuration_follows_how_many_tiles_fill_the_ctas(shape, expected):
    assert choose(*shape, ctas=132) == expected
