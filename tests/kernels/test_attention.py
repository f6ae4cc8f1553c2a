"""The library's attention (`asyncdsl.kernels.attention`) in the interpreter against float64
attention: causal and not, head dims 64, 128, 192 and 256 (blocks of 192, 128 and 64 keys, and
others chosen), several CTAs and heads, both layouts, grouped k/v heads, sequences that are not
whole blocks (and keys that outnumber the queries), and the log-sum-exp output; consumers taking
turns give the same bytes; bad shapes are refused at trace time; the kernel assembles with no
spill or advisory."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.errors import SourceLocation
from asyncdsl.kernels.attention import attention_kernel, reference
from asyncdsl.kernels.dispatch import launch
from asyncdsl.runtime.ptxas import assemble


def inputs(q_shape, kv_heads, layout="BHSD", kv_len=None, seed=1):
    """Random normal bf16 q, k, v (k and v with `kv_heads` heads and `kv_len` keys)."""
    rng = np.random.default_rng(seed)
    kv_shape = list(q_shape)
    kv_shape[layout.index("H")] = kv_heads
    kv_shape[layout.index("S")] = kv_len or q_shape[layout.index("S")]
    q = rng.standard_normal(q_shape).astype(ml_dtypes.bfloat16)
    k, v = (rng.standard_normal(kv_shape).astype(ml_dtypes.bfloat16) for _ in range(2))
    return q, k, v


def run(q_shape, kv_heads, causal, layout="BHSD", kv_len=None, seed=1, **constexprs):
    """Attention on random inputs in the interpreter, through the host function (or, with
    constexprs, the kernel itself); returns (o, lse) and the float64 reference's."""
    q, k, v = inputs(q_shape, kv_heads, layout, kv_len, seed)
    if constexprs:
        b, s, h = (q_shape[layout.index(axis)] for axis in "BSH")
        o, lse = np.full(q_shape, np.nan, ml_dtypes.bfloat16), np.full((b, h, s), np.nan, np.float32)
        launch(attention_kernel, q, k, v, o, lse, CAUSAL=causal, LAYOUT=layout, **constexprs)
    else:
        o, lse = K.attention(q, k, v, causal=causal, layout=layout)
    return (o, lse), reference(q, k, v, causal, layout)


def check(got, expected):
    (o, lse), (expected_o, expected_lse) = got, expected
    # p and o are bf16: a few bf16 ulps of values of magnitude up to about 1.
    np.testing.assert_allclose(o.astype(np.float64), expected_o, atol=2e-2, rtol=0)
    np.testing.assert_allclose(lse, expected_lse, atol=1e-3, rtol=0)


# 256 queries: two CTAs of 128 rows, so that a causal CTA has key blocks before its diagonal; keys
# in blocks of 192 (one whole, one of 64) at D = 64, 128 at D = 128, 64 (four, going round the
# two-slot ring twice) at D = 192 and 256.
@pytest.mark.parametrize("shape,causal", [((1, 2, 256, 64), False), ((1, 2, 256, 64), True),
                                          ((2, 1, 256, 128), True), ((1, 1, 256, 256), True),
                                          ((1, 1, 256, 256), False), ((1, 1, 256, 192), True)])
def test_attention_matches_float64(shape, causal):
    check(*run(shape, shape[1], causal))


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_in_the_bshd_layout(causal):
    check(*run((1, 256, 4, 64), 2, causal, layout="BSHD"))


@pytest.mark.parametrize("q_shape,layout,causal",
                         [((1, 2, 200, 64), "BHSD", True), ((1, 200, 2, 64), "BSHD", False),
                          ((1, 1, 70, 128), "BHSD", False), ((1, 1, 130, 256), "BHSD", True),
                          ((1, 1, 1, 64), "BHSD", False), ((1, 17, 1, 64), "BSHD", True)])
def test_sequences_that_are_not_whole_blocks(q_shape, layout, causal):
    check(*run(q_shape, 1, causal, layout=layout))


@pytest.mark.parametrize("block", [64, 128, 192])
def test_causal_blocks_narrower_or_wider_than_a_ctas_rows(block):
    """Key blocks of 64 (two cross a CTA's diagonal), 128 (one) and 192 (wider than the CTA's
    128 rows: one block crosses two CTAs' diagonals)."""
    check(*run((1, 1, 448, 64), 1, True, BK=block))


def test_more_keys_than_queries_not_whole_blocks():
    check(*run((1, 1, 128, 64), 1, False, kv_len=333))


def test_taking_turns_gives_the_same_bytes():
    (o, lse), _ = run((1, 1, 256, 64), 1, True)
    (o_turns, lse_turns), _ = run((1, 1, 256, 64), 1, True, TURNS=True)
    assert np.array_equal(o.view(np.uint16), o_turns.view(np.uint16)) and np.array_equal(lse, lse_turns)


@pytest.mark.parametrize("shapes,fragment", [
    (((1, 2, 128, 64), (1, 3, 128, 64)), "2 query heads cannot be grouped over 3"),
    (((1, 1, 128, 64), (1, 1, 256, 64)), "causal attention takes as many keys as queries"),
])
def test_bad_shapes_are_refused_while_tracing(shapes, fragment):
    q_shape, kv_shape = shapes
    q, kv = ad.ArraySpec(q_shape, ad.bfloat16), ad.ArraySpec(kv_shape, ad.bfloat16)
    lse = ad.ArraySpec((q_shape[0], q_shape[1], q_shape[2]), ad.float32)
    with pytest.raises(ad.TraceError, match=fragment):
        attention_kernel.ptx(q, kv, kv, q, lse, CAUSAL=True)


@pytest.mark.parametrize("head_dim", [32, 96, 320])
def test_head_dims_the_kernel_does_not_take_are_refused(head_dim):
    x = ad.ArraySpec((1, 1, 128, head_dim), ad.bfloat16)
    with pytest.raises(ad.TraceError, match=f"head dim {head_dim}: this kernel takes 64, 128, 192 or 256"):
        attention_kernel.ptx(x, x, x, x, ad.ArraySpec((1, 1, 128), ad.float32))


@pytest.mark.parametrize("block", [0, 40, -16])
def test_key_blocks_that_are_not_whole_k16_steps_are_refused(block):
    x = ad.ArraySpec((1, 1, 128, 64), ad.bfloat16)
    with pytest.raises(ad.TraceError,
                       match=f"BK, the keys of a block, must be a positive multiple of 16 .* got {block}"):
        attention_kernel.ptx(x, x, x, x, ad.ArraySpec((1, 1, 128), ad.float32), BK=block)


def test_a_mismatched_output_is_refused_while_tracing():
    x = ad.ArraySpec((1, 1, 128, 64), ad.bfloat16)
    with pytest.raises(ad.TraceError, match=r"lse has shape \(1, 128\), expected \(1, 1, 128\)"):
        attention_kernel.ptx(x, x, x, x, ad.ArraySpec((1, 128), ad.float32))


@pytest.mark.parametrize("head_dim,causal,layout",
                         [(128, False, "BHSD"), (128, True, "BSHD"), (64, False, "BHSD"),
                          (256, True, "BHSD"), (192, False, "BSHD")])
def test_attention_assembles_without_spills_or_advisories(head_dim, causal, layout):
    x = ad.ArraySpec((4, 32, 4096, head_dim) if layout == "BHSD" else (4, 4096, 32, head_dim), ad.bfloat16)
    lse = ad.ArraySpec((4, 32, 4096), ad.float32)
    _, log = assemble(attention_kernel.ptx(x, x, x, x, lse, CAUSAL=causal, LAYOUT=layout), verbose=True)
    assert not re.search(r"C75\d\d", log), log
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"], log


def test_the_host_function_allocates_its_outputs_beside_q():
    q, k, v = inputs((1, 2, 128, 64), 1)
    o, lse = K.attention(q, k, v)
    assert (o.shape, o.dtype, lse.shape, lse.dtype) == (q.shape, q.dtype, (1, 2, 128), np.float32)
    out, out_lse = np.full_like(q, np.nan), np.full((1, 2, 128), np.nan, np.float32)
    same_o, same_lse = K.attention(q, k, v, out=out, lse=out_lse)
    assert same_o is out and same_lse is out_lse
    assert np.array_equal(out.view(np.uint16), o.view(np.uint16)) and np.array_equal(out_lse, lse)


@pytest.mark.parametrize("layout,shape", [("BHDS", (1, 1, 128, 64)), ("BHSD", (1, 128, 64))])
def test_the_host_function_refuses_layouts_it_does_not_know(layout, shape):
    q = np.zeros(shape, ml_dtypes.bfloat16)
    refusal = "attention takes 4-dim q, k, v in layout 'BHSD' or 'BSHD'"
    with pytest.raises(ad.ArgumentError, match=refusal) as caught:
        K.attention(q, q, q, layout=layout)
    assert caught.value.location.file == __file__


@pytest.mark.parametrize("causal", [2, "no", None])
def test_the_host_function_refuses_a_causal_that_is_no_truth_value(causal):
    q = np.zeros((1, 1, 128, 64), ml_dtypes.bfloat16)
    with pytest.raises(ad.ArgumentError, match=r"attention_kernel's constexpr CAUSAL is a flag \(its default "
                                               r"is False\): it takes True or False \(or 1 or 0\)") as caught:
        K.attention(q, q, q, causal=causal)
    assert caught.value.location == SourceLocation(__file__, caught.tb.tb_lineno)


@pytest.mark.parametrize("dtypes", [(np.float32,) * 3, (ml_dtypes.bfloat16, np.float16, ml_dtypes.bfloat16)])
def test_the_host_function_refuses_operands_the_tensor_cores_do_not_take(dtypes):
    q, k, v = (np.zeros((1, 1, 128, 64), dtype) for dtype in dtypes)
    with pytest.raises(ad.TraceError, match="q, k, v and o must be all bfloat16 or all float16") as caught:
        K.attention(q, k, v)
    assert caught.value.location.file == __file__
