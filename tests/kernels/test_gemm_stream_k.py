"""Stream-K (`asyncdsl.blocks.stream_k`, `asyncdsl.kernels.gemm_stream_k`): the plan covers
every K iteration of every tile once, and the kernel's sums are exact in the interpreter."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncdsl.blocks.stream_k import MIN_ITERS, StreamKPlan
from asyncdsl.kernels.gemm_stream_k import gemm_stream_k


def test_the_docstring_plan():
    plan = StreamKPlan.make(tiles=150, k_iters=64, ctas=132)
    assert (plan.dp_tiles, plan.sk_tiles, plan.units) == (0, 150, 132)
    assert plan.run(0) == (0, 73) and plan.unit_of(73) == 1


@given(tiles=st.integers(1, 600), k_iters=st.integers(1, 200), ctas=st.integers(1, 140))
def test_the_units_cover_the_stream_k_iterations_once_each_at_least_min_iters(tiles, k_iters, ctas):
    plan = StreamKPlan.make(tiles, k_iters, ctas)
    assert plan.dp_tiles + plan.sk_tiles == tiles and (plan.dp_tiles % ctas == 0 or not plan.units)
    runs = [plan.run(u) for u in range(plan.units)]
    assert [r[0] for r in runs[1:]] == [r[1] for r in runs[:-1]]  # back to back
    if plan.units:
        assert runs[0][0] == 0 and runs[-1][1] == plan.sk_tiles * k_iters
        assert min(end - begin for begin, end in runs) >= MIN_ITERS and plan.units <= ctas
        for u, (begin, end) in enumerate(runs):
            assert plan.unit_of(begin) == u and plan.unit_of(end - 1) == u


@pytest.mark.parametrize("shape,ctas", [((256, 256, 1024), 3),     # 4 tiles over 3 units, all stream-K
                                        ((384, 384, 1088), 4)],     # 9 tiles: 4 whole, 5 stream-K
                         ids=str)
def test_stream_k_is_exact(shape, ctas):
    m, n, k = shape
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    plan_tiles = -(-m // 128) * -(-n // 128)
    assert plan_tiles % ctas  # a last wave a static schedule would leave part idle
    c = gemm_stream_k(a, b, ctas=ctas)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))


WAVE_QUANTISED = [(2200, 4104, 2056), (1000, 1000, 1000), (512, 4096, 14336), (128, 4096, 4096)]


@pytest.mark.parametrize("shape", WAVE_QUANTISED, ids=str)
def test_stream_k_kernels_assemble_at_wave_quantised_shapes(shape, ptxas):
    import asyncdsl as ad
    from asyncdsl.kernels.gemm_stream_k import matmul_stream_k, plan_for

    m, n, k = shape
    plan = plan_for(m, n, k, 132)
    assert plan.units  # stream-K is on
    bf16 = ad.bfloat16
    workspace = ad.ArraySpec(plan.workspace_shape(128, 128), ad.float32)
    operands = (ad.ArraySpec((m, k), bf16), ad.ArraySpec((k, n), bf16), ad.ArraySpec((m, n), bf16))
    ptxas(matmul_stream_k.ptx(*operands, workspace, ad.ArraySpec((2 * plan.tiles,), ad.int32), CTAS=132))
