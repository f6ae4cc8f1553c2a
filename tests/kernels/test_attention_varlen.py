"""Variable-length attention (`asyncdsl.kernels.attention_varlen`) in the interpreter against
float64 attention sequence by sequence: causal and not, grouped k/v heads, head dims 64 to 256,
sequences of length 0 and 1 and longer than a CTA's rows, more keys than queries (the causal
diagonal at the last key) and fewer (rows that see no key are 0 with lse -inf); each sequence
alone with its neighbours' rows poisoned, which it must neither read into its output nor
overwrite; the bytes of the dense kernel on a batch of equal lengths; trace-time refusals; every
configuration through ptxas with no spill."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.attention_varlen import attention_varlen_kernel, reference
from asyncdsl.runtime.ptxas import assemble

BF16 = ml_dtypes.bfloat16


def offsets(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def inputs(lengths_q, lengths_k, heads, kv_heads, d, seed=1):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((sum(lengths_q), heads, d)).astype(BF16)
    k, v = (rng.standard_normal((sum(lengths_k), kv_heads, d)).astype(BF16) for _ in range(2))
    return q, k, v, offsets(lengths_q), offsets(lengths_k)


def check(o, lse, expected_o, expected_lse):
    # p and o are bf16: a few bf16 ulps of values of magnitude up to about 1; lse -inf where no
    # key is seen, in both.
    np.testing.assert_allclose(o.astype(np.float64), expected_o, atol=2e-2, rtol=0)
    np.testing.assert_allclose(lse, expected_lse, atol=1e-3, rtol=0)


@pytest.mark.parametrize("lengths_q,lengths_k,heads,kv_heads,d,causal", [
    ((5, 0, 130, 1, 300), (5, 0, 130, 1, 300), 2, 1, 64, False),
    ((5, 0, 130, 1, 300), (5, 0, 130, 1, 300), 2, 1, 64, True),
    ((3, 200), (70, 260), 2, 2, 128, True),  # a chunk of queries after cached keys
    ((3, 200), (70, 0), 1, 1, 128, False),  # a sequence without keys
    ((40, 129), (10, 129), 1, 1, 192, True),  # 30 rows before the first key see nothing
    ((65,), (65,), 1, 1, 256, True),
])
def test_attention_varlen_matches_float64(lengths_q, lengths_k, heads, kv_heads, d, causal):
    q, k, v, cu_q, cu_k = inputs(lengths_q, lengths_k, heads, kv_heads, d)
    o, lse = K.attention_varlen(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=causal)
    check(o, lse, *reference(q, k, v, cu_q, cu_k, causal))


@pytest.mark.parametrize("causal", [False, True])
def test_each_sequence_keeps_to_its_rows_with_its_neighbours_poisoned(causal):
    """Sequence b alone (offsets cu[b], cu[b + 1] into the whole packed batch): every other row
    of q and k is NaN, of v huge (finite: their weights are exactly 0, which NaN would not
    survive), and every other row of o and lse must keep the bytes it had."""
    lengths_q, lengths_k = (70, 1, 200), (90, 1, 150)
    q, k, v, cu_q, cu_k = inputs(lengths_q, lengths_k, 2, 1, 64, seed=2)
    for b in range(len(lengths_q)):
        (q0, q1), (k0, k1) = cu_q[b:b + 2], cu_k[b:b + 2]
        mine_q, mine_k = np.zeros(len(q), bool), np.zeros(len(k), bool)
        mine_q[q0:q1], mine_k[k0:k1] = True, True
        poisoned_q, poisoned_k, poisoned_v = q.copy(), k.copy(), v.copy()
        poisoned_q[~mine_q], poisoned_k[~mine_k], poisoned_v[~mine_k] = np.nan, np.nan, 3e30
        o, lse = np.full_like(q, 7.0), np.full((2, len(q)), -5.0, np.float32)
        one = np.array([q0, q1], np.int32), np.array([k0, k1], np.int32)
        K.attention_varlen(poisoned_q, poisoned_k, poisoned_v, *one, q1 - q0, k1 - k0, causal=causal,
                           out=o, lse=lse)
        expected_o, expected_lse = reference(q, k, v, *one, causal)
        check(o[mine_q], lse[:, mine_q], expected_o[mine_q], expected_lse[:, mine_q])
        assert (o[~mine_q].astype(np.float32) == 7.0).all() and (lse[:, ~mine_q] == -5.0).all()


@pytest.mark.parametrize("causal", [False, True])
def test_equal_lengths_give_the_dense_kernels_bytes(causal):
    """Two sequences of 256 (whole tiles; a whole and a part block of 192 keys): the packed batch
    is the dense (B, S, H, D) one.  One head: a head's bytes are its own (the heads' rows are
    checked against float64 by the tests above)."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 256, 1, 64)).astype(BF16) for _ in range(3))
    dense_o, dense_lse = K.attention(q, k, v, causal=causal, layout="BSHD")
    cu = offsets((256, 256))
    o, lse = K.attention_varlen(*(x.reshape(512, 1, 64) for x in (q, k, v)), cu, cu, 256, 256, causal=causal)
    assert np.array_equal(o.view(np.uint16), dense_o.reshape(512, 1, 64).view(np.uint16))
    assert np.array_equal(lse, dense_lse.transpose(1, 0, 2).reshape(1, 512))


def _specs(total_q=4096, total_k=4096, heads=16, kv_heads=4, d=128, batch=8, lse_shape=None):
    q, kv = ad.ArraySpec((total_q, heads, d), ad.bfloat16), ad.ArraySpec((total_k, kv_heads, d), ad.bfloat16)
    lse = ad.ArraySpec(lse_shape or (heads, total_q), ad.float32)
    cu = ad.ArraySpec((batch + 1,), ad.int32)
    return (q, kv, kv, q, lse, cu, cu, 1024)


@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, False), (128, True), (192, True),
                                      (256, False)])
def test_attention_varlen_assembles_without_spills_or_advisories(d, causal):
    _, log = assemble(attention_varlen_kernel.ptx(*_specs(d=d), CAUSAL=causal), verbose=True)
    assert not re.search(r"C75\d\d", log), log
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"], log


@pytest.mark.parametrize("change,fragment", [
    (dict(lse_shape=(4096, 16)), r"lse has shape \(4096, 16\), expected \(16, 4096\)"),
    (dict(heads=6), "6 query heads cannot be grouped over 4"),
    (dict(d=96), "head dim 96"),
])
def test_bad_shapes_are_refused_while_tracing(change, fragment):
    with pytest.raises(ad.TraceError, match=fragment):
        attention_varlen_kernel.ptx(*_specs(**change))


def test_offsets_of_different_batches_are_refused_while_tracing():
    specs = list(_specs())
    specs[6] = ad.ArraySpec((5,), ad.int32)
    with pytest.raises(ad.TraceError, match=r"cu_seqlens_q and cu_seqlens_k must both be \(B \+ 1,\)"):
        attention_varlen_kernel.ptx(*specs)


def test_the_host_function_refuses_unpacked_tensors():
    q = np.zeros((1, 128, 2, 64), BF16)
    with pytest.raises(ad.ArgumentError, match="attention_varlen takes packed q, k, v of 3 dims") as caught:
        K.attention_varlen(q, q, q, offsets((128,)), offsets((128,)), 128, 128)
    assert caught.value.location.file == __file__


@pytest.mark.parametrize("cu_q,max_q,fragment", [
    ((0, 100, 90), 100, "cu_seqlens_q must be ascending offsets from 0 to at most the 128 rows"),
    ((0, 100, 140), 100, "cu_seqlens_q must be ascending"),
    ((0, 100, 128), 64, "max_seqlen_q is 64 but a sequence has 100 rows"),
])
def test_bad_offsets_in_host_memory_are_refused(cu_q, max_q, fragment):
    q = np.zeros((128, 1, 64), BF16)
    cu_k = offsets((64, 64))
    with pytest.raises(ad.ArgumentError, match=fragment):
        K.attention_varlen(q, q, q, np.array(cu_q, np.int32), cu_k, max_q, 64)
