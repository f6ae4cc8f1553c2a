"""The ping-pong GEMM in the interpreter, exact on small integers: tile counts per CTA that are odd
(warpgroup 0 takes one more turn) and even, arrays that are not whole tiles, both tile shapes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl.kernels.gemm_pingpong import matmul_pingpong


@pytest.mark.parametrize("shape,ctas,tile",
                         [((256, 256, 192), 3, (128, 128)), ((256, 256, 192), 2, (128, 128)),
                          ((200, 296, 136), 2, (64, 256)), ((64, 256, 64), 4, (64, 256))])
def test_pingpong_gemm_is_exact(shape, ctas, tile):
    m, n, k = shape
    rng = np.random.default_rng(sum(shape))
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    matmul_pingpong.interpret(a, b, c, CTAS=ctas, BM=tile[0], BN=tile[1])
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("config,message", [({"BK": 0}, "BK must be a positive multiple of 64"),
                                            ({"BN": 96}, "BN must be a positive multiple of 64"),
                                            ({"STAGES": 0}, "STAGES must be a positive int"),
                                            ({"SNAKE": -2}, "SNAKE is the width of the bands of tiles")])
def test_tiles_the_pingpong_gemm_cannot_be_built_with_are_refused(config, message):
    spec = ad.ArraySpec((256, 256), ad.bfloat16)
    with pytest.raises(ad.TraceError, match=message):
        matmul_pingpong.compile(spec, spec, spec, CTAS=2, **config)
