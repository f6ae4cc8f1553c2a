"""The attention example in the interpreter against float64 attention: causal and not, head
dims 64, 128 and 256 (blocks of 64 keys, so two blocks cross the diagonal), several CTAs and
heads; and its kernel assembles with no spill or advisory."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from asyncdsl.examples.attention import attention, reference
from asyncdsl.runtime.ptxas import assemble


@pytest.mark.parametrize("shape,causal", [((1, 2, 256, 64), False), ((1, 2, 256, 64), True),
                                          ((2, 1, 256, 128), True), ((1, 1, 384, 256), True),
                                          ((1, 1, 256, 256), False)])
def test_attention_matches_float64(shape, causal):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for _ in range(3))
    o = np.full(shape, np.nan, ml_dtypes.bfloat16)
    attention.interpret(q, k, v, o, CAUSAL=causal)
    # p and o are bf16: a few bf16 ulps of values of magnitude up to about 1.
    np.testing.assert_allclose(o.astype(np.float64), reference(q, k, v, causal), atol=2e-2, rtol=0)


@pytest.mark.parametrize("head_dim,causal", [(128, False), (128, True), (64, False), (256, True)])
def test_attention_assembles_without_spills_or_advisories(head_dim, causal):
    x = np.zeros((4, 32, 4096, head_dim), ml_dtypes.bfloat16)
    _, log = assemble(attention.ptx(x, x, x, x, CAUSAL=causal), verbose=True)
    assert not re.search(r"C75\d\d", log), log
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"], log


def test_a_sequence_that_is_not_whole_blocks_is_refused():
    import asyncdsl as ad

    x = np.zeros((1, 1, 192, 64), ml_dtypes.bfloat16)
    with pytest.raises(ad.TraceError, match="sequence length 192 must be a multiple of 128"):
        attention.ptx(x, x, x, x)
