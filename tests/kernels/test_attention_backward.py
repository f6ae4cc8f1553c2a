"""The library's attention backward (`asyncdsl.kernels.attention_backward`) in the interpreter
against float64 gradients: causal and not, head dims 64, 128, 192 and 256 (the wide kernel),
several key blocks, CTAs and
heads, both layouts, grouped k/v heads (dk, dv summed over a group), sequences that are not whole
blocks; the float64 gradients against finite differences of attention; the deterministic mode's
bits the same over runs; bad shapes and head dims refused at trace time; every configuration
assembles with no spill or advisory."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.errors import SourceLocation
from asyncdsl.kernels.attention import reference as forward_reference
from asyncdsl.kernels.attention_backward import attention_backward_kernel, reference
from asyncdsl.kernels.attention_backward_rows import finish_dq, prepare
from asyncdsl.kernels.attention_backward_wide import attention_backward_wide_kernel
from asyncdsl.runtime.ptxas import assemble


def inputs(q_shape, kv_heads, layout="BHSD", kv_len=None, seed=1):
    """Random normal bf16 q, k, v, do (k and v with `kv_heads` heads and `kv_len` keys)."""
    rng = np.random.default_rng(seed)
    kv_shape = list(q_shape)
    kv_shape[layout.index("H")] = kv_heads
    kv_shape[layout.index("S")] = kv_len or q_shape[layout.index("S")]
    q, do = (rng.standard_normal(q_shape).astype(ml_dtypes.bfloat16) for _ in range(2))
    k, v = (rng.standard_normal(kv_shape).astype(ml_dtypes.bfloat16) for _ in range(2))
    return q, k, v, do


def gradients(q_shape, kv_heads, causal, layout="BHSD", kv_len=None, deterministic=False, seed=1):
    """The kernel's dq, dk, dv from the forward's o and lse, and the float64 reference's."""
    q, k, v, do = inputs(q_shape, kv_heads, layout, kv_len, seed)
    o, lse = K.attention(q, k, v, causal=causal, layout=layout)
    got = K.attention_backward(q, k, v, o, lse, do, causal=causal, deterministic=deterministic, layout=layout)
    return got, reference(q, k, v, do, causal, layout)


def check(got, expected):
    for name, gradient, wanted in zip(("dq", "dk", "dv"), got, expected):
        assert gradient.shape == wanted.shape and gradient.dtype == ml_dtypes.bfloat16, name
        # p and ds are rounded to bf16 for the tensor cores, the gradients to bf16 at the end.
        np.testing.assert_allclose(gradient.astype(np.float64), wanted, atol=1e-2, rtol=1e-2, err_msg=name)


# Every shape has at least two key blocks (CTAs: 128 keys at D <= 128, 64 at D >= 192) and two
# query blocks of 64 rows, so that dq adds shares of several CTAs and a causal run has blocks on
# and past the diagonal; more heads and longer sequences only repeat those paths.
@pytest.mark.parametrize("q_shape,causal", [((1, 1, 256, 64), False), ((1, 1, 256, 64), True),
                                            ((2, 1, 256, 128), True), ((1, 1, 256, 128), False),
                                            ((1, 1, 130, 192), True), ((1, 1, 130, 256), False)])
def test_gradients_match_float64(q_shape, causal):
    check(*gradients(q_shape, q_shape[1], causal))


# Query heads in groups of two: at D = 64 two groups (a group reading another's k/v would be
# caught), over 130 rows: two key blocks (the second ragged) and a ragged query block; the wide
# kernel over 70 rows: two key blocks of 64, both ragged at the end.
@pytest.mark.parametrize("q_shape,causal", [((1, 130, 4, 64), False), ((1, 130, 4, 64), True),
                                            ((1, 70, 2, 256), True)])
def test_grouped_query_heads_in_the_bshd_layout(q_shape, causal):
    check(*gradients(q_shape, q_shape[2] // 2, causal, layout="BSHD"))


@pytest.mark.parametrize("q_shape,layout,causal", [
    ((1, 2, 200, 64), "BHSD", True), ((1, 70, 1, 128), "BSHD", False),
    ((1, 1, 1, 64), "BHSD", True), ((1, 1, 130, 64), "BHSD", False)])
def test_sequences_that_are_not_whole_blocks(q_shape, layout, causal):
    check(*gradients(q_shape, 1, causal, layout))


def test_more_keys_than_queries_not_whole_blocks():
    check(*gradients((1, 1, 100, 64), 1, False, kv_len=333))


@pytest.mark.parametrize("q_shape,causal", [((1, 2, 320, 64), False), ((1, 2, 320, 64), True),
                                            ((1, 2, 150, 192), True)])
def test_the_deterministic_mode_gives_the_same_bits_every_run(q_shape, causal):
    """Three key blocks (two at 64) add into each query block of both heads of a group: the
    backward run twice on one forward's o and lse."""
    q, k, v, do = inputs(q_shape, 1, "BHSD", None, 1)
    o, lse = K.attention(q, k, v, causal=causal)
    first, again = (K.attention_backward(q, k, v, o, lse, do, causal=causal, deterministic=True)
                    for _ in range(2))
    check(first, reference(q, k, v, do, causal, "BHSD"))
    for a, b in zip(first, again):
        assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


@pytest.mark.parametrize("causal,kv_heads", [(False, 2), (True, 1)])
def test_the_float64_reference_is_the_gradient_of_attention(causal, kv_heads):
    """Central differences of L = Σ o ∘ do (o from the forward's float64 reference) against the
    reference's dq, dk, dv at every element of a tiny problem."""
    rng = np.random.default_rng(7)
    q, do = rng.standard_normal((2, 1, 2, 5, 4))
    k, v = rng.standard_normal((2, 1, kv_heads, 5, 4))
    analytic = reference(q, k, v, do, causal)

    def loss(q, k, v):
        return float((forward_reference(q, k, v, causal)[0] * do).sum())

    step = 1e-6
    for which, gradient in enumerate(analytic):
        numeric = np.zeros_like(gradient)
        for index in np.ndindex(gradient.shape):
            args = [q.copy(), k.copy(), v.copy()]
            args[which][index] += step
            up = loss(*args)
            args[which][index] -= 2 * step
            numeric[index] = (up - loss(*args)) / (2 * step)
        np.testing.assert_allclose(gradient, numeric, atol=1e-7, rtol=1e-6)


def _specs(q_shape, kv_shape, layout="BHSD"):
    b, h, s, d = (q_shape[layout.index(axis)] for axis in "BHSD")
    q, kv = ad.ArraySpec(q_shape, ad.bfloat16), ad.ArraySpec(kv_shape, ad.bfloat16)
    rows = ad.ArraySpec((b, h, s), ad.float32)
    return (q, kv, kv, q, rows, rows, ad.ArraySpec((b, h, s, d), ad.float32), kv, kv,
            ad.ArraySpec((b, h, -(-s // 64)), ad.int32))


@pytest.mark.parametrize("shapes,fragment", [
    (((1, 2, 128, 64), (1, 3, 128, 64)), "2 query heads cannot be grouped over 3"),
    (((1, 1, 128, 64), (1, 1, 256, 64)), "causal attention takes as many keys as queries"),
])
def test_bad_shapes_are_refused_while_tracing(shapes, fragment):
    with pytest.raises(ad.TraceError, match=fragment):
        attention_backward_kernel.ptx(*_specs(*shapes), CAUSAL=True)


@pytest.mark.parametrize("kernel,head_dim,dims", [
    (attention_backward_kernel, 32, "64 or 128"), (attention_backward_kernel, 192, "64 or 128"),
    (attention_backward_wide_kernel, 128, "192 or 256"), (attention_backward_wide_kernel, 320, "192 or 256")])
def test_head_dims_a_kernel_does_not_take_are_refused(kernel, head_dim, dims):
    shape = (1, 1, 128, head_dim)
    with pytest.raises(ad.TraceError, match=f"head dim {head_dim}: this backward kernel takes {dims}"):
        kernel.ptx(*_specs(shape, shape))


def test_the_host_function_refuses_layouts_it_does_not_know():
    q = np.zeros((1, 1, 128, 64), ml_dtypes.bfloat16)
    with pytest.raises(ad.ArgumentError, match="attention_backward takes 4-dim q, k, v") as caught:
        K.attention_backward(q, q, q, q, np.zeros((1, 1, 128), np.float32), q, layout="BHDS")
    assert caught.value.location.file == __file__


@pytest.mark.parametrize("switch", [{"causal": 2}, {"deterministic": "yes"}])
def test_the_host_function_refuses_a_switch_that_is_no_truth_value(switch):
    q = np.zeros((1, 1, 128, 64), ml_dtypes.bfloat16)
    (flag,) = (name.upper() for name in switch)
    rule = f"constexpr {flag} is a flag .*: it takes True or False"
    with pytest.raises(ad.ArgumentError, match=rule) as caught:
        K.attention_backward(q, q, q, q, np.zeros((1, 1, 128), np.float32), q, **switch)
    assert caught.value.location == SourceLocation(__file__, caught.tb.tb_lineno)


def _assembles_cleanly(ptx):
    _, log = assemble(ptx, verbose=True)
    assert not re.search(r"C75\d\d", log), log
    assert all(int(n) == 0 for n in re.findall(r"(\d+) bytes spill stores", log)), log


@pytest.mark.parametrize("head_dim,causal,deterministic,layout",
                         [(d, c, det, "BSHD" if c == det else "BHSD")
                          for d in (64, 128, 192, 256) for c in (False, True) for det in (False, True)])
def test_every_configuration_assembles_without_spills_or_advisories(head_dim, causal, deterministic, layout):
    q_shape = (4, 32, 4096, head_dim) if layout == "BHSD" else (4, 4096, 32, head_dim)
    kv_shape = (4, 8, 4096, head_dim) if layout == "BHSD" else (4, 4096, 8, head_dim)
    kernel = attention_backward_kernel if head_dim <= 128 else attention_backward_wide_kernel
    ptx = kernel.ptx(*_specs(q_shape, kv_shape, layout), CAUSAL=causal, DETERMINISTIC=deterministic,
                     LAYOUT=layout)
    _assembles_cleanly(ptx)


@pytest.mark.parametrize("head_dim,layout", [(64, "BHSD"), (128, "BSHD")])
def test_the_row_kernels_assemble(head_dim, layout):
    x = ad.ArraySpec((2, 300, 4, head_dim) if layout == "BSHD" else (2, 4, 300, head_dim), ad.bfloat16)
    workspace = ad.ArraySpec((2, 4, 300, head_dim), ad.float32)
    _assembles_cleanly(prepare.ptx(x, x, ad.ArraySpec((2, 4, 300), ad.float32), workspace,
                                   ad.ArraySpec((2, 4, 5), ad.int32), LAYOUT=layout))
    _assembles_cleanly(finish_dq.ptx(workspace, x, LAYOUT=layout))


def test_the_host_functions_refuse_operands_the_tensor_cores_do_not_take():
    q, lse = np.zeros((1, 1, 128, 64), np.float32), np.zeros((1, 1, 128), np.float32)
    with pytest.raises(ad.ArgumentError, match=r"attention_backward: q, k, v, o, do must be all bfloat16 or "
                                               r"all float16 .* got q float32") as caught:
        K.attention_backward(q, q, q, q, lse, q)
    assert caught.value.location.file == __file__
    packed, offsets = np.zeros((128, 1, 64), ml_dtypes.bfloat16), np.array([0, 128], np.int32)
    with pytest.raises(ad.ArgumentError, match=r"lse float32, got .* lse bfloat16") as caught:
        K.attention_varlen_backward(packed, packed, packed, packed, np.zeros((1, 128), ml_dtypes.bfloat16),
                                    packed, offsets, offsets, 128, 128)
    assert caught.value.location.file == __file__
    with pytest.raises(ad.ArgumentError, match=r"attention_varlen: q, k, v must be .* got q bfloat16, "
                                               r"k float16"):
        K.attention_varlen(packed, packed.astype(np.float16), packed, offsets, offsets, 128, 128)
