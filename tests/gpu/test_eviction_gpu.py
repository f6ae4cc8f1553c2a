"""L2 eviction policies on the H200: TMA loads with `eviction_policy` (alone and multicast) and
the GEMM's EVICT_FIRST option copy and compute the same bits as numpy and the interpreter.

    python3 -m pytest -q tests/gpu/test_eviction_gpu.py
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from eviction_kernels import arrays, load_with_policy
from gpu_support import hopper_or_skip

from asyncdsl.kernels.gemm_cooperative import matmul_narrow
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("policy", ["evict_first", "evict_last"])
@pytest.mark.parametrize("collective", [None, "x"])
@pytest.mark.parametrize("cols", [64, 104])
def test_a_load_with_a_policy_moves_the_same_bytes(policy, collective, cols):
    x, y = arrays(cols)
    y[:] = np.nan
    y_device = to_device(y)
    load_with_policy(to_device(x), y_device, POLICY=policy, COLLECTIVE=collective)
    assert to_host(y_device).view(np.uint16).tobytes() == np.concatenate([x, x]).view(np.uint16).tobytes()


@pytest.mark.parametrize("evict", ["b", "ab"])
def test_the_gemm_with_evict_first_is_exact(evict):
    rng = np.random.default_rng(1)
    m, n, k = 128, 4096, 1024
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = to_device(np.full((m, n), np.nan, ml_dtypes.bfloat16))
    matmul_narrow(to_device(a), to_device(b), c, CTAS=132, BM=64, BN=64, BK=128, STAGES=6, EVICT_FIRST=evict)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(to_host(c).view(np.uint16), expected.view(np.uint16))
