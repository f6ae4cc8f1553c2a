"""The variable-length attention backward (`asyncdsl.kernels.attention_varlen_backward`) in the
interpreter against float64 gradients sequence by sequence: causal and not, grouped k/v heads,
head dims 64 and 128, sequences of length 0 and 1 and longer than a block of keys, more keys than
queries (the causal diagonal at the last key) and fewer (rows that see no key have no gradient);
each sequence alone with its neighbours' rows poisoned, which it must neither read into its
gradients nor overwrite; the dense kernel's bytes on a batch of equal lengths; the deterministic
mode's bits the same over runs; trace-time refusals; every configuration through ptxas with no
spill."""

from __future__ import annotations

import importlib
import re

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.attention_varlen_backward import attention_varlen_backward_kernel, reference
from asyncdsl.kernels.attention_varlen_backward_rows import finish_dq, prepare
from asyncdsl.runtime.ptxas import assemble

BF16 = ml_dtypes.bfloat16
# The module, not the function of the same name that asyncdsl.kernels exports.
module = importlib.import_module("asyncdsl.kernels.attention_varlen_backward")

def offsets(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def inputs(lengths_q, lengths_k, heads, kv_heads, d, seed=1):
    rng = np.random.default_rng(seed)
    q, do = (rng.standard_normal((sum(lengths_q), heads, d)).astype(BF16) for _ in range(2))
    k, v = (rng.standard_normal((sum(lengths_k), kv_heads, d)).astype(BF16) for _ in range(2))
    return q, k, v, do, offsets(lengths_q), offsets(lengths_k)


def gradients(q, k, v, do, cu_q, cu_k, causal, deterministic=False):
    """The kernel's dq, dk, dv from the forward's o and lse."""
    max_q, max_k = int(np.diff(cu_q).max()), int(np.diff(cu_k).max())
    o, lse = K.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=causal)
    return K.attention_varlen_backward(q, k, v, o, lse, do, cu_q, cu_k, max_q, max_k, causal=causal,
                                       deterministic=deterministic)


def check(got, expected, rows=(slice(None),) * 3):
    for name, gradient, wanted, mine in zip(("dq", "dk", "dv"), got, expected, rows):
        assert gradient.dtype == BF16, name
        # p and ds are rounded to bf16 for the tensor cores, the gradients to bf16 at the end.
        np.testing.assert_allclose(gradient[mine].astype(np.float64), wanted[mine], atol=1e-2, rtol=1e-2,
                                   err_msg=name)


@pytest.mark.parametrize("lengths_q,lengths_k,heads,kv_heads,d,causal", [
    ((5, 0, 130, 1, 300), (5, 0, 130, 1, 300), 2, 1, 64, False),
    ((5, 0, 130, 1, 300), (5, 0, 130, 1, 300), 2, 1, 64, True),
    ((3, 200), (70, 260), 2, 2, 128, True),  # a chunk of queries after cached keys
    ((3, 200), (70, 0), 1, 1, 128, False),  # a sequence without keys
    ((40, 129), (10, 129), 2, 1, 64, True),  # 30 rows before the first key see nothing
])
def test_gradients_match_float64(lengths_q, lengths_k, heads, kv_heads, d, causal):
    q, k, v, do, cu_q, cu_k = inputs(lengths_q, lengths_k, heads, kv_heads, d)
    check(gradients(q, k, v, do, cu_q, cu_k, causal), reference(q, k, v, do, cu_q, cu_k, causal))


@pytest.mark.parametrize("causal", [False, True])
def test_each_sequence_keeps_to_its_rows_with_its_neighbours_poisoned(causal, monkeypatch):
    """Sequence b alone (offsets cu[b], cu[b + 1] into the whole packed batch): every other row
    of q, k, v, do and o is large (finite: their gradients' weights are exactly 0, which NaN
    would not survive), and every other row of dq, dk, dv keeps the bytes it was allocated with;
    the workspace and flags start as garbage the first launch must clear."""
    monkeypatch.setattr(module, "empty", lambda like, shape, dtype: np.full(shape, 7, dtype))
    lengths_q, lengths_k = (70, 1, 200), (90, 1, 150)
    q, k, v, do, cu_q, cu_k = inputs(lengths_q, lengths_k, 2, 1, 64, seed=2)
    for b in range(len(lengths_q)):
        (q0, q1), (k0, k1) = cu_q[b:b + 2], cu_k[b:b + 2]
        mine_q, mine_k = np.zeros(len(q), bool), np.zeros(len(k), bool)
        mine_q[q0:q1], mine_k[k0:k1] = True, True
        one = np.array([q0, q1], np.int32), np.array([k0, k1], np.int32)
        o, lse = K.attention_varlen(q, k, v, *one, q1 - q0, k1 - k0, causal=causal)
        poisoned = [x.copy() for x in (q, k, v, do, o)]
        for x, mine in zip(poisoned, (mine_q, mine_k, mine_k, mine_q, mine_q)):
            x[~mine] = 1000.0
        lse[:, ~mine_q] = -1000.0
        got = K.attention_varlen_backward(*poisoned[:3], poisoned[4], lse, poisoned[3], *one, q1 - q0,
                                          k1 - k0, causal=causal)
        check(got, reference(q, k, v, do, *one, causal), (mine_q, mine_k, mine_k))
        for gradient, mine in zip(got, (mine_q, mine_k, mine_k)):
            assert (gradient[~mine].astype(np.float32) == 7.0).all()


@pytest.mark.parametrize("causal", [False, True])
def test_equal_lengths_give_the_dense_kernels_bytes(causal):
    """Two sequences of 256 (two whole key blocks adding into each query block in their fixed
    order), deterministic: the packed batch is the dense (B, S, H, D) one, and its gradients are
    the dense kernel's bits.  One head: the order of the adds is a head's own (the heads' rows
    are checked against the float64 reference by the tests above)."""
    rng = np.random.default_rng(3)
    q, k, v, do = (rng.standard_normal((2, 256, 1, 64)).astype(BF16) for _ in range(4))
    o, lse = K.attention(q, k, v, causal=causal, layout="BSHD")
    dense = K.attention_backward(q, k, v, o, lse, do, causal=causal, deterministic=True, layout="BSHD")
    cu = offsets((256, 256))
    packed = [x.reshape(512, 1, 64) for x in (q, k, v, o)]
    got = K.attention_varlen_backward(*packed, lse.transpose(1, 0, 2).reshape(1, 512), do.reshape(512, 1, 64),
                                      cu, cu, 256, 256, causal=causal, deterministic=True)
    for a, b in zip(got, dense):
        assert np.array_equal(a.view(np.uint16), b.reshape(512, 1, 64).view(np.uint16))


@pytest.mark.parametrize("lengths_q,lengths_k,causal", [
    ((300, 1), (300, 1), False),
    # Causal: the diagonal at the last key, with fewer and with more keys than queries (the
    # diagonal of equal lengths is the dense kernel's bits above).
    ((3, 200, 40), (70, 260, 10), True), ((130, 300), (300, 130), True),
])
def test_the_deterministic_mode_gives_the_same_bits_every_run(lengths_q, lengths_k, causal):
    """Up to three key blocks add into each query block of both heads of a group, in the order
    of their ranks (a wrong rank would never be reached): the backward run twice on one forward's
    o and lse."""
    q, k, v, do, cu_q, cu_k = data = inputs(lengths_q, lengths_k, 2, 1, 64, seed=4)
    max_q, max_k = int(np.diff(cu_q).max()), int(np.diff(cu_k).max())
    o, lse = K.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=causal)
    first, again = (K.attention_varlen_backward(q, k, v, o, lse, do, cu_q, cu_k, max_q, max_k, causal=causal,
                                                deterministic=True) for _ in range(2))
    check(first, reference(*data, causal))
    for a, b in zip(first, again):
        assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


def _specs(total_q=4096, total_k=4096, heads=16, kv_heads=4, d=128, batch=8, workspace_rows=None):
    q, kv = ad.ArraySpec((total_q, heads, d), ad.bfloat16), ad.ArraySpec((total_k, kv_heads, d), ad.bfloat16)
    rows = ad.ArraySpec((heads, total_q), ad.float32)
    workspace = ad.ArraySpec((heads, workspace_rows or total_q + batch * 64, d), ad.float32)
    cu = ad.ArraySpec((batch + 1,), ad.int32)
    flags = ad.ArraySpec((batch, heads, 16), ad.int32)
    return (q, kv, kv, q, rows, rows, workspace, kv, kv, flags, cu, cu, 1024)


def _assembles_cleanly(ptx, spill_bytes: int = 0):
    _, log = assemble(ptx, verbose=True)
    assert not re.search(r"C75\d\d", log), log
    assert all(int(n) <= spill_bytes for n in re.findall(r"(\d+) bytes spill stores", log)), log


@pytest.mark.parametrize("d,causal,deterministic", [(d, c, det) for d in (64, 128) for c in (False, True)
                                                    for det in (False, True)])
def test_every_configuration_assembles_without_spills_or_advisories(d, causal, deterministic):
    """But for head dim 128 causal, whose masked steps spill a few registers (24 bytes at most)."""
    _assembles_cleanly(attention_varlen_backward_kernel.ptx(*_specs(d=d), CAUSAL=causal,
                                                            DETERMINISTIC=deterministic),
                       spill_bytes=24 if (d, causal) == (128, True) else 0)


@pytest.mark.parametrize("d", [64, 128])
def test_the_row_kernels_assemble(d):
    x = ad.ArraySpec((300, 4, d), ad.bfloat16)
    workspace = ad.ArraySpec((4, 300 + 3 * 64, d), ad.float32)
    cu = ad.ArraySpec((4,), ad.int32)
    _assembles_cleanly(prepare.ptx(x, x, ad.ArraySpec((4, 300), ad.float32), workspace,
                                   ad.ArraySpec((3, 4, 5), ad.int32), cu, 300))
    _assembles_cleanly(finish_dq.ptx(workspace, x, cu, 300))


@pytest.mark.parametrize("change,fragment", [
    (dict(workspace_rows=4096), r"workspace has shape \(16, 4096, 128\), expected \(16, 4608, 128\)"),
    (dict(heads=6), "6 query heads cannot be grouped over 4"),
    (dict(d=192), "head dim 192"),
])
def test_bad_shapes_are_refused_while_tracing(change, fragment):
    with pytest.raises(ad.TraceError, match=fragment):
        attention_varlen_backward_kernel.ptx(*_specs(**change))


def test_the_host_function_refuses_unpacked_tensors():
    q = np.zeros((1, 128, 2, 64), BF16)
    with pytest.raises(ad.ArgumentError, match="attention_varlen_backward takes packed q, k, v") as caught:
        K.attention_varlen_backward(q, q, q, q, np.zeros((2, 128), np.float32), q, offsets((128,)),
                                    offsets((128,)), 128, 128)
    assert caught.value.location.file == __file__
