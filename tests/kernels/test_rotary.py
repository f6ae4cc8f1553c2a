"""The rotary embedding (`asyncdsl.kernels.rotary`) in the interpreter against numpy in float64:
sequences that are not whole tiles, grouped key heads, each dtype of the angles; the inverse as
the transpose of the map (the backward pass); the refusals; ptxas."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.rotary import reference, rotary_kernel
from asyncdsl.runtime.ptxas import assemble

BF16 = ml_dtypes.bfloat16


def inputs(batch, seq, heads, kv_heads, d, angle_dtype=np.float32, seed=0):
    """q, k and Llama's cos and sin (the halves of the angles equal) at random positions."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, seq, heads, d)).astype(BF16)
    k = rng.standard_normal((batch, seq, kv_heads, d)).astype(BF16)
    angles = rng.uniform(0, 1000, (batch, seq, d // 2))
    angles = np.concatenate([angles, angles], axis=-1)
    return q, k, np.cos(angles).astype(angle_dtype), np.sin(angles).astype(angle_dtype)


def assert_close(got, x, cos, sin, inverse=False):
    """Within a bfloat16 rounding of the float64 result (the kernel rounds its float32 once)."""
    wanted = reference(x.astype(np.float64), cos, sin, inverse)
    error = np.abs(got.astype(np.float64) - wanted)
    assert (error <= 2.0 ** -8 * np.maximum(np.abs(wanted), 2.0 ** -10)).all(), error.max()


@pytest.mark.parametrize("batch,seq,heads,kv_heads,d,angle_dtype", [
    (2, 100, 4, 2, 64, np.float32), (1, 33, 2, 1, 128, BF16), (3, 7, 1, 1, 16, np.float16),
    (1, 64, 6, 3, 128, np.float32)], ids=str)
def test_rotary_matches_float64(batch, seq, heads, kv_heads, d, angle_dtype):
    q, k, cos, sin = inputs(batch, seq, heads, kv_heads, d, angle_dtype)
    q_out, k_out = K.rotary(q, k, cos, sin)
    assert q_out.dtype == q.dtype and k_out.shape == k.shape
    assert_close(q_out, q, cos, sin)
    assert_close(k_out, k, cos, sin)


def test_the_inverse_is_the_transpose_of_the_map():
    """<inverse(y), x> = <y, forward(x)> in float64 for any y, x: the backward pass of the map,
    whatever the angles (here the halves of sin differ)."""
    rng = np.random.default_rng(1)
    q, k, cos, _ = inputs(1, 40, 2, 1, 32)
    sin = rng.uniform(-1, 1, cos.shape).astype(np.float32)
    y_q, y_k = (rng.standard_normal(x.shape).astype(BF16) for x in (q, k))
    back_q, back_k = K.rotary(y_q, y_k, cos, sin, inverse=True)
    assert_close(back_q, y_q, cos, sin, inverse=True)
    for y, x, back in ((y_q, q, back_q), (y_k, k, back_k)):
        forward = reference(x.astype(np.float64), cos, sin)
        assert np.isclose(np.vdot(back.astype(np.float64), x.astype(np.float64)),
                          np.vdot(y.astype(np.float64), forward), rtol=1e-2)


def test_angles_of_one_sequence_serve_the_whole_batch():
    # transformers' position embeddings of shared positions are (1, S, D).
    q, k, cos, sin = inputs(3, 20, 2, 1, 32)
    q_out, k_out = K.rotary(q, k, cos[:1], sin[:1])
    assert_close(q_out, q, cos[:1], sin[:1])
    assert_close(k_out, k, cos[:1], sin[:1])


@pytest.mark.parametrize("shared", ["cos", "sin"])
def test_one_table_shared_by_the_batch_and_the_other_per_sequence(shared):
    # Each table is read at its own batch extent: a (1, S, D) sin beside a (B, S, D) cos was read
    # at the sequence's batch index, past its end.
    q, k, cos, sin = inputs(3, 20, 2, 1, 32)
    cos, sin = (cos[:1], sin) if shared == "cos" else (cos, sin[:1])
    q_out, k_out = K.rotary(q, k, cos, sin)
    assert_close(q_out, q, cos, sin)
    assert_close(k_out, k, cos, sin)


def test_tokens_past_the_sequence_are_never_touched_and_outputs_given_are_written():
    q, k, cos, sin = inputs(1, 40, 2, 1, 64)
    q_out, k_out = (np.full_like(x, np.nan) for x in (q, k))
    assert K.rotary(q, k, cos, sin, q_out=q_out, k_out=k_out) == (q_out, k_out)
    assert not np.isnan(q_out).any() and not np.isnan(k_out).any()


@pytest.mark.parametrize("change,rule", [
    (dict(d=24), "head dim 24: the rotary kernel takes head dims that are powers of two from 16"),
    (dict(d=96), "head dim 96: the rotary kernel takes head dims that are powers of two from 16"),
    (dict(kv_shape=(1, 40, 1, 32)), r"q and k must be \(B, S, H, D\) and \(B, S, H_kv, D\)"),
    (dict(cos_shape=(1, 40, 32)), r"cos must have shape \(1, 40, 64\)"),
    (dict(batch=3, cos_shape=(2, 40, 64)),
     r"cos must have shape \(3, 40, 64\) \(one angle a position of each sequence, or \(1, 40, 64\) for "
     "positions the sequences share"),
    (dict(k_dtype=ad.float32), "q and k must both be bfloat16 or both float16"),
])
def test_what_the_kernel_does_not_compute_is_refused_at_the_callers_line(change, rule):
    d, batch = change.get("d", 64), change.get("batch", 1)
    q = ad.ArraySpec((batch, 40, 2, d), ad.bfloat16)
    k = ad.ArraySpec(change.get("kv_shape", (batch, 40, 1, d)), change.get("k_dtype", ad.bfloat16))
    angles = ad.ArraySpec(change.get("cos_shape", (batch, 40, d)), ad.float32)
    with pytest.raises(ad.TraceError, match=rule) as caught:
        rotary_kernel.compile(q, k, angles, ad.ArraySpec((batch, 40, d), ad.float32), q, k)
    assert caught.value.location.file == __file__


@pytest.mark.parametrize("d", [64, 128])
def test_llamas_shapes_assemble_without_spills(d):
    q, k = ad.ArraySpec((1, 4096, 32, d), ad.bfloat16), ad.ArraySpec((1, 4096, 8, d), ad.bfloat16)
    angles = ad.ArraySpec((1, 4096, d), ad.bfloat16)
    for inverse in (False, True):
        log = assemble(rotary_kernel.ptx(q, k, angles, angles, q, k, INVERSE=inverse), verbose=True)[1]
        assert " 0 bytes stack frame, 0 bytes spill stores" in log, log
