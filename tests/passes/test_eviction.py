"""`async_copy(..., eviction_policy=...)`: an L2 eviction priority on TMA loads, from the frontend
through the passes (resolve, tile boxes, collectives) to `createpolicy` and `.L2::cache_hint` in
the PTX, assembled by ptxas; the interpreter copies the same bytes; other copies refuse it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from eviction_kernels import arrays as _arrays
from eviction_kernels import load_with_policy
from support import line_of
from xdsl.parser import Parser

import asyncdsl as ad
from asyncdsl.kernels.gemm_cooperative import matmul_narrow
from asyncdsl.passes.pipeline import PASS_NAMES, ir_text, make_context


@pytest.mark.parametrize("policy", ["evict_first", "evict_last"])
@pytest.mark.parametrize("collective", [None, "x"])
def test_a_load_with_a_policy_carries_it_into_the_ptx_and_copies_the_same_bytes(ptxas, policy, collective):
    x, y = _arrays()
    ptx = load_with_policy.ptx(x, y, POLICY=policy, COLLECTIVE=collective)
    ptxas(ptx)
    (create,) = [line.strip() for line in ptx.splitlines() if "createpolicy" in line]
    assert create.startswith(f"createpolicy.fractional.L2::{policy}.b64 "), create
    register = create.split()[1].rstrip(",")
    (load,) = [line.strip() for line in ptx.splitlines()
               if "cp.async.bulk.tensor" in line and ".global.tile" in line
               and "shared::cluster.global" in line]
    assert ".L2::cache_hint" in load and load.endswith(f", {register};"), load
    assert (".multicast::cluster" in load) == (collective is not None)
    load_with_policy.interpret(x, y, POLICY=policy, COLLECTIVE=collective)
    assert np.array_equal(y.view(np.uint16), np.concatenate([x, x]).view(np.uint16))


def test_without_a_policy_no_hint_is_emitted():
    ptx = load_with_policy.ptx(*_arrays(), POLICY=None)
    assert "createpolicy" not in ptx and "cache_hint" not in ptx


def test_a_policy_survives_tile_boxes_and_every_stage_round_trips():
    # Rows of 104 in columns of 64: one TMA box per column, each carrying the policy.
    x, y = _arrays(104)
    stages = load_with_policy.stages(x, y, POLICY="evict_first")
    for stage in ("trace", *PASS_NAMES):
        text = stages[stage]
        parsed = Parser(make_context(), text).parse_module()
        parsed.verify()
        assert ir_text(parsed) == text
    assert "#asyncdsl<eviction evict_first>" in stages["trace"]
    loads = [line for line in stages["resolve-transforms"].splitlines() if '"asyncdsl.tma_load"' in line]
    assert len(loads) == 2 and all("eviction = #asyncdsl<eviction evict_first>" in line for line in loads)


@ad.kernel(grid=(1,))
def refused(x, y, KIND: ad.constexpr):
    buf = ad.smem((64, 64), x.dtype)
    bar = ad.barrier()
    if KIND == "store":
        ad.async_copy(buf, y.at[ad.ds(0, 64), ad.ds(0, 64)], eviction_policy="evict_first")  # the store
    elif KIND == "bulk":
        ad.async_copy(x.at[0, ad.ds(0, 64)], buf.at[0], barrier=bar, oob="undefined",  # the bulk
                      eviction_policy="evict_first")
    else:
        ad.async_copy(x.at[ad.ds(0, 64), ad.ds(0, 64)], buf, barrier=bar,  # the cp_async
                      implementation="cp_async", eviction_policy="evict_first")
    bar.wait()


@pytest.mark.parametrize("kind", ["store", "bulk", "cp_async"])
def test_copies_other_than_tma_loads_refuse_a_policy_at_their_line(kind):
    spec = ad.ArraySpec((64, 64), ad.bfloat16)
    with pytest.raises(ad.CopyError, match="is a hint of TMA tensor loads") as caught:
        refused.compile(spec, spec, KIND=kind)
    assert caught.value.location.line == line_of(refused.fn, f"# the {kind}")


def test_an_unknown_policy_is_refused_at_the_copy():
    with pytest.raises(ad.TraceError,
                       match=r"eviction_policy must be one of \('evict_first', 'evict_last'\)"):
        load_with_policy.compile(*_arrays(), POLICY="evict_normal")


@pytest.mark.parametrize("evict", ["", "b", "ab"])
def test_the_gemm_s_evict_first_option_is_exact_and_assembles(ptxas, evict):
    rng = np.random.default_rng(0)
    m, n, k = 200, 264, 320
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    ptx = matmul_narrow.ptx(a, b, c, CTAS=5, BK=128, STAGES=3, EVICT_FIRST=evict)
    ptxas(ptx)
    assert (ptx.count(".L2::cache_hint") > 0) == bool(evict)
    matmul_narrow.interpret(a, b, c, CTAS=5, BK=128, STAGES=3, EVICT_FIRST=evict)
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(c.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("evict", ["", "b", "ab"])
def test_the_fp8_gemm_s_evict_first_option_is_exact_and_assembles(ptxas, evict):
    from asyncdsl.kernels.gemm_fp8 import example_inputs, matmul_fp8, problem_specs, reference

    specs = problem_specs(136, 192, 256)  # narrow tiles (BN 64) and a ragged last row of tiles
    a, b, a_scale, b_scale, c = example_inputs(specs, np.random.default_rng(1))
    config = {"CTAS": 3, "BN": 64, "STAGES": 8, "EVICT_FIRST": evict}
    ptx = matmul_fp8.ptx(a, b, a_scale, b_scale, c, **config)
    ptxas(ptx)
    assert ptx.count(".L2::cache_hint") == {"": 0, "b": 1, "ab": 3}[evict]  # a's two halves, b's slice
    matmul_fp8.interpret(a, b, a_scale, b_scale, c, **config)
    assert np.array_equal(c.view(np.uint16), reference(a, b, a_scale, b_scale).view(np.uint16))
