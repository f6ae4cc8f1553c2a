"""The serving operators of asyncdsl.ops on the CPU.  On the float64 references of conftest.py:
`torch.library.opcheck` of paged decode attention and the grouped GEMM, the arguments reaching the
kernel function in order (against attention and products computed here with torch), and a decode
step with a grouped GEMM traced whole by `torch.compile(fullgraph=True)`.  On the kernels,
interpreted: the schemas, `opcheck` of chunked prefill and the fp8 and grouped GEMMs, each
operator's result the kernel function's bit for bit and float64's within bf16 rounding, a step
calling them all traced whole, and shapes the host functions refuse refused at the caller's
line.  tests/gpu/test_ops_gpu.py runs them on the GPU and in a CUDA graph."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import asyncdsl.kernels as K  # noqa: E402
import asyncdsl.ops as ops  # noqa: E402
from asyncdsl.errors import ArgumentError  # noqa: E402
from asyncdsl.ops.gemm_fp8_blockscaled import gemm_fp8_blockscaled_op  # noqa: E402
from asyncdsl.ops.grouped_gemm import grouped_gemm_masked_op, grouped_gemm_op  # noqa: E402
from asyncdsl.ops.grouped_gemm_fp8_blockscaled import (  # noqa: E402
    grouped_gemm_fp8_blockscaled_masked_op, grouped_gemm_fp8_blockscaled_op)
from asyncdsl.ops.paged_decode_attention import paged_decode_attention_op  # noqa: E402
from asyncdsl.ops.paged_prefill import paged_prefill_op  # noqa: E402

PAGE = 4


def cache(batch: int = 3, heads: int = 4, kv_heads: int = 2, d: int = 8, tokens: int = 1):
    """q (B, L, H, D), paged caches of 12 pages in shuffled order, a block table and lengths."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(batch, tokens, heads, d, generator=generator, dtype=torch.float64)
    k_cache, v_cache = (torch.randn(12, PAGE, kv_heads, d, generator=generator, dtype=torch.float64)
                        for _ in range(2))
    block_table = torch.randperm(12, generator=generator, dtype=torch.int32)[:12].view(batch, -1)
    seq_lens = torch.tensor([max(length, tokens) for length in (5, 16, 1)][:batch], dtype=torch.int32)
    return q, k_cache, v_cache, block_table, seq_lens


def dense(q, k_cache, v_cache, block_table, seq_lens):
    """The same attention with each sequence's keys gathered into a dense tensor, by SDPA."""
    out = []
    for b, length in enumerate(seq_lens.tolist()):
        k, v = (c[block_table[b].long()].flatten(0, 1)[:length].transpose(0, 1) for c in (k_cache, v_cache))
        tokens = q.shape[1]
        visible = torch.arange(length)[None, :] <= length - tokens + torch.arange(tokens)[:, None]
        out.append(F.scaled_dot_product_attention(q[b].transpose(0, 1), k, v, attn_mask=visible,
                                                  enable_gqa=True).transpose(0, 1))
    return torch.stack(out)


def test_opcheck(reference_kernels):
    q, k_cache, v_cache, block_table, seq_lens = cache()
    torch.library.opcheck(paged_decode_attention_op,
                          (q[:, 0], k_cache, v_cache, block_table, seq_lens, None, None))
    torch.library.opcheck(paged_decode_attention_op, (q, k_cache, v_cache, block_table, seq_lens,
                                                      torch.tensor(0.5), torch.tensor(2.0)))
    a, b = torch.randn(10, 8, dtype=torch.float64), torch.randn(4, 8, 6, dtype=torch.float64)
    torch.library.opcheck(grouped_gemm_op, (a, b, torch.tensor([3, 3, 9, 10], dtype=torch.int32)))


@pytest.mark.parametrize("tokens", [1, 3])
def test_decode_attention_reads_the_pages_of_each_sequence(reference_kernels, tokens):
    q, k_cache, v_cache, block_table, seq_lens = cache(tokens=tokens)
    want = dense(q, k_cache * 0.5, v_cache * 2, block_table, seq_lens)
    got = ops.paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens, k_scale=torch.tensor(0.5),
                                     v_scale=torch.tensor(2.0))
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(ops.paged_decode_attention(q[:, :1].squeeze(1), k_cache, v_cache, block_table,
                                                          seq_lens),
                               dense(q[:, :1], k_cache, v_cache, block_table, seq_lens).squeeze(1))


def test_grouped_gemm_multiplies_each_group_by_its_matrix(reference_kernels):
    a, b = torch.randn(10, 8, dtype=torch.float64), torch.randn(4, 8, 6, dtype=torch.float64)
    offsets = torch.tensor([3, 3, 9, 10], dtype=torch.int32)  # group 1 is empty
    want = torch.cat([a[:3] @ b[0], a[3:9] @ b[2], a[9:] @ b[3]])
    torch.testing.assert_close(ops.grouped_gemm(a, b, offsets), want)


def test_a_serving_step_compiles_whole(reference_kernels):
    q, k_cache, v_cache, block_table, seq_lens = cache()
    experts = torch.randn(2, 32, 32, dtype=torch.float64)
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return torch._dynamo.backends.debugging.aot_eager(graph_module, example_inputs)

    def step(q, offsets):
        o = ops.paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens)
        return ops.grouped_gemm(o.reshape(3, 32), experts, offsets)

    offsets = torch.tensor([1, 3], dtype=torch.int32)
    compiled = torch.compile(step, fullgraph=True, backend=backend)(q[:, 0], offsets)
    assert len(graphs) == 1
    torch.testing.assert_close(compiled, step(q[:, 0], offsets))


# The operators on the kernels themselves, interpreted: tiny shapes (each run is a kernel launch
# in the interpreter), ragged where the kernels' tiles allow.

E4M3 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16


def tensor(array: np.ndarray) -> torch.Tensor:
    """A CPU tensor of `array`'s values and dtype (bf16 and e4m3 go through float32, exactly)."""
    dtype = {np.dtype(BF16): torch.bfloat16, np.dtype(E4M3): torch.float8_e4m3fn}.get(array.dtype)
    if dtype is None:
        return torch.from_numpy(array.copy())
    return torch.from_numpy(array.astype(np.float32)).to(dtype)


def bits(array) -> np.ndarray:
    """The bytes of a tensor's or array's elements, to compare two results bit for bit."""
    if isinstance(array, torch.Tensor):
        return array.contiguous().view(torch.uint8).numpy()
    return array.view(np.uint8)


def fp8_gemm_inputs(m=40, n=160, k=208, seed=0):
    """a (M, K) and b (N, K) in e4m3, a's scales (M, K/128) and b's (N/128, K/128) float32 about 1:
    K and N past a whole block, so that the partial blocks have scales of their own."""
    rng = np.random.default_rng(seed)
    kb = -(-k // 128)
    return ((rng.standard_normal((m, k)) * 2).astype(E4M3), rng.uniform(0.5, 2, (m, kb)).astype(np.float32),
            (rng.standard_normal((n, k)) * 2).astype(E4M3),
            rng.uniform(0.5, 2, (-(-n // 128), kb)).astype(np.float32))


def grouped_fp8_inputs(rows=50, groups=3, n=128, k=160, seed=1):
    """a (rows, K), a's scales, b (G, N, K) and b's scales (G, N/128, K/128)."""
    a, a_scales, _, _ = fp8_gemm_inputs(rows, 128, k, seed)
    rng = np.random.default_rng(seed + 100)
    kb = -(-k // 128)
    return (a, a_scales, (rng.standard_normal((groups, n, k)) * 2).astype(E4M3),
            rng.uniform(0.5, 2, (groups, n // 128, kb)).astype(np.float32))


def bf16(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(BF16)


PREFILL_PAGE = 16


def prefill_inputs(seed=2):
    """Two sequences: 5 new tokens after 32 cached, and a first chunk of 20; pages of 16 in any order."""
    rng = np.random.default_rng(seed)
    chunks, contexts = [5, 20], [37, 20]
    cu_q = np.concatenate([[0], np.cumsum(chunks)]).astype(np.int32)
    return (bf16(rng, 25, 2, 64), bf16(rng, 8, PREFILL_PAGE, 1, 64), bf16(rng, 8, PREFILL_PAGE, 1, 64),
            np.array([[6, 1, 4], [3, 7, 0]], np.int32), np.array(contexts, np.int32), cu_q, max(chunks))


def serving_cases():
    """name: (the operator's function, the kernel function, their inputs as numpy arrays)."""
    rng = np.random.default_rng(3)
    a, a_scales, b, b_scales = fp8_gemm_inputs()
    ga, ga_scales, gb, gb_scales = grouped_fp8_inputs()
    counts = np.array([16, 0, 5], np.int32)
    q, k_cache, v_cache, block_table, _, _, _ = prefill_inputs()
    return {
        "paged_decode_attention": (ops.paged_decode_attention, K.paged_decode_attention,
                                   (q[:2], k_cache, v_cache, block_table, np.array([37, 5], np.int32))),
        "grouped_gemm": (ops.grouped_gemm, K.grouped_gemm,
                         (bf16(rng, 30, 32), bf16(rng, 3, 32, 40), np.array([10, 10, 30], np.int32))),
        "gemm_fp8_blockscaled": (ops.gemm_fp8_blockscaled, K.gemm_fp8_blockscaled,
                                 (a, a_scales, b, b_scales)),
        "grouped_gemm_masked": (ops.grouped_gemm_masked, K.grouped_gemm_masked,
                                (bf16(rng, 3, 24, 32), bf16(rng, 3, 32, 40), np.array([24, 0, 7], np.int32))),
        "grouped_gemm_fp8_blockscaled": (ops.grouped_gemm_fp8_blockscaled, K.grouped_gemm_fp8_blockscaled,
                                         (ga, ga_scales, gb, gb_scales, np.array([20, 20, 50], np.int32))),
        "grouped_gemm_fp8_blockscaled_masked": (
            ops.grouped_gemm_fp8_blockscaled_masked, K.grouped_gemm_fp8_blockscaled_masked,
            (ga[:48].reshape(3, 16, -1), ga_scales[:48].reshape(3, 16, -1), gb, gb_scales, counts)),
        "paged_prefill": (ops.paged_prefill, K.paged_prefill, prefill_inputs()),
    }


def counted(name: str, result, args) -> list:
    """The parts of an operator's outputs that its groups cover (a masked layout leaves the rest
    unwritten), as tensors or arrays."""
    outputs = list(result) if isinstance(result, tuple) else [result]
    if name.endswith("_masked"):
        return [c[g, :int(n)] for c in outputs for g, n in enumerate(args[-1])]
    return outputs


def as_operands(args) -> tuple:
    return tuple(tensor(x) if isinstance(x, np.ndarray) else x for x in args)


@pytest.mark.parametrize("name", serving_cases())
def test_the_operator_is_the_kernel_function_bit_for_bit(name):
    operator, function, args = serving_cases()[name]
    got = counted(name, operator(*as_operands(args)), args)
    want = counted(name, function(*args), args)
    assert len(got) == len(want)
    for mine, kernels_own in zip(got, want):
        assert mine.dtype == {BF16: torch.bfloat16, np.float32: torch.float32}[kernels_own.dtype.type]
        assert np.array_equal(bits(mine), bits(kernels_own))


def block_scaled(a, a_scales, b, b_scales) -> torch.Tensor:
    """a (M, K) times b (N, K)ᵀ in float64, each 128-deep block of K scaled by its row's and
    block's scales."""
    total = torch.zeros(a.shape[0], b.shape[0], dtype=torch.float64)
    for block in range(a_scales.shape[1]):
        part = slice(128 * block, 128 * (block + 1))
        column_scales = b_scales[:, block].double().repeat_interleave(128)[: b.shape[0]]
        product = a[:, part].double() @ b[:, part].double().T
        total += product * a_scales[:, block, None].double() * column_scales
    return total


def chunked_prefill(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q):
    """o and lse in float64: each sequence's keys gathered from its pages, its chunk's queries
    causal aligned to the end."""
    o = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.zeros(q.shape[1], q.shape[0], dtype=torch.float64)
    for b, (first, end) in enumerate(zip(cu_seqlens_q.tolist(), cu_seqlens_q.tolist()[1:])):
        length, chunk = int(seq_lens[b]), end - first
        k, v = (c[block_table[b].long()].flatten(0, 1)[:length].double() for c in (k_cache, v_cache))
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        s = torch.einsum("qhd,khd->hqk", q[first:end].double(), k) / q.shape[2] ** 0.5
        visible = torch.arange(length)[None, :] <= length - chunk + torch.arange(chunk)[:, None]
        s = s.masked_fill(~visible, -torch.inf)
        lse[:, first:end] = s.logsumexp(-1)
        o[first:end] = torch.einsum("hqk,khd->qhd", (s - lse[:, first:end, None]).exp(), v)
    return o, lse


def test_the_operators_agree_with_float64():
    cases = serving_cases()
    a, a_scales, b, b_scales = as_operands(cases["gemm_fp8_blockscaled"][2])
    want = block_scaled(a, a_scales, b, b_scales)
    assert_near_bf16(ops.gemm_fp8_blockscaled(a, a_scales, b, b_scales), want)
    a, b, counts = as_operands(cases["grouped_gemm_masked"][2])
    c = ops.grouped_gemm_masked(a, b, counts)
    for g, n in enumerate(counts.tolist()):
        assert_near_bf16(c[g, :n], a[g, :n].double() @ b[g].double())
    a, a_scales, b, b_scales, offsets = as_operands(cases["grouped_gemm_fp8_blockscaled"][2])
    c = ops.grouped_gemm_fp8_blockscaled(a, a_scales, b, b_scales, offsets)
    for g, (first, end) in enumerate(zip([0, *offsets.tolist()], offsets.tolist())):
        assert_near_bf16(c[first:end], block_scaled(a[first:end], a_scales[first:end], b[g], b_scales[g]))
    a, a_scales, b, b_scales, counts = as_operands(cases["grouped_gemm_fp8_blockscaled_masked"][2])
    c = ops.grouped_gemm_fp8_blockscaled_masked(a, a_scales, b, b_scales, counts)
    for g, n in enumerate(counts.tolist()):
        assert_near_bf16(c[g, :n], block_scaled(a[g, :n], a_scales[g, :n], b[g], b_scales[g]))
    args = as_operands(cases["paged_prefill"][2])
    o, lse = ops.paged_prefill(*args)
    want_o, want_lse = chunked_prefill(*args[:6])
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32 and lse.shape == (2, 25)
    torch.testing.assert_close(o.double(), want_o, atol=2e-2, rtol=0)
    torch.testing.assert_close(lse.double(), want_lse, atol=2e-3, rtol=0)


def assert_near_bf16(got: torch.Tensor, want: torch.Tensor) -> None:
    """A bf16 result against float64: within a bf16 rounding and float32 sums, relative to the
    largest value."""
    assert got.dtype == torch.bfloat16 and got.shape == want.shape
    largest = want.abs().max().item() if want.numel() else 0.0
    torch.testing.assert_close(got.double(), want, rtol=2 ** -7, atol=2 ** -8 * max(largest, 1.0))


def test_the_serving_operators_have_their_schemas():
    schemas = {
        "paged_decode_attention": "(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, "
                                  "Tensor seq_lens, Tensor? k_scale, Tensor? v_scale) -> Tensor",
        "paged_prefill": "(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens, "
                         "Tensor cu_seqlens_q, int max_seqlen_q) -> (Tensor, Tensor)",
        "gemm_fp8_blockscaled": "(Tensor a, Tensor a_scales, Tensor b, Tensor b_scales) -> Tensor",
        "grouped_gemm": "(Tensor a, Tensor b, Tensor offsets) -> Tensor",
        "grouped_gemm_masked": "(Tensor a, Tensor b, Tensor counts) -> Tensor",
        "grouped_gemm_fp8_blockscaled": "(Tensor a, Tensor a_scales, Tensor b, Tensor b_scales, "
                                        "Tensor offsets) -> Tensor",
        "grouped_gemm_fp8_blockscaled_masked": "(Tensor a, Tensor a_scales, Tensor b, Tensor b_scales, "
                                               "Tensor counts) -> Tensor",
    }
    for name, schema in schemas.items():
        assert str(getattr(torch.ops.asyncdsl, name).default._schema) == f"asyncdsl::{name}{schema}"


OPERATORS = {"gemm_fp8_blockscaled": gemm_fp8_blockscaled_op, "grouped_gemm_masked": grouped_gemm_masked_op,
             "grouped_gemm_fp8_blockscaled": grouped_gemm_fp8_blockscaled_op,
             "grouped_gemm_fp8_blockscaled_masked": grouped_gemm_fp8_blockscaled_masked_op,
             "paged_prefill": paged_prefill_op}


@pytest.mark.parametrize("name", OPERATORS)
def test_opcheck_on_the_kernels(name):
    """Schema, fake implementation (also with dynamic shapes) and autograd registration against
    the kernels run in the interpreter.  The masked layouts' groups are full here: the checks
    compare whole outputs, and rows past a group's count are never written.  torch's schema check
    compares the inputs before and after the call with `allclose`, which CPU float8 tensors do
    not have: for the fp8 operators the inputs' bytes are compared here instead."""
    _, _, args = serving_cases()[name]
    if name.endswith("_masked"):
        args = (*args[:-1], np.full_like(args[-1], args[0].shape[1]))
    operands = as_operands(args)
    checks = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(OPERATORS[name], operands,
                          test_utils=checks if "fp8" in name else (*checks, "test_schema"))
    tensors = [x for x in operands if isinstance(x, torch.Tensor)]
    before = [bits(x) for x in tensors]
    OPERATORS[name](*operands)
    assert all(np.array_equal(old, bits(x)) for old, x in zip(before, tensors))


def test_m_major_scales_are_read_as_they_lie():
    """DeepGEMM's a_scales: the (K/128, M') array transposed, M' = M rounded up to 4."""
    a, a_scales, b, b_scales = as_operands(fp8_gemm_inputs(m=38))
    m_major = torch.zeros(a_scales.shape[1], 40).t()[:38]
    m_major.copy_(a_scales)
    assert not m_major.is_contiguous()
    assert torch.equal(ops.gemm_fp8_blockscaled(a, m_major, b, b_scales),
                       ops.gemm_fp8_blockscaled(a, a_scales, b, b_scales))


def test_a_serving_step_on_the_kernels_compiles_whole():
    cases = serving_cases()
    inputs = {name: as_operands(args) for name, (_, _, args) in cases.items()}
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return torch._dynamo.backends.debugging.aot_eager(graph_module, example_inputs)

    def step(inputs):
        return {name: function(*inputs[name]) for name, (function, _, _) in cases.items()}

    compiled = torch.compile(step, fullgraph=True, backend=backend)(inputs)
    eager = step(inputs)
    assert len(graphs) == 1
    called = {node.target for node in graphs[0].graph.nodes if node.op == "call_function"}
    assert {getattr(torch.ops.asyncdsl, name).default for name in cases} <= called
    for name, (_, _, args) in cases.items():
        for got, want in zip(counted(name, compiled[name], args), counted(name, eager[name], args)):
            assert torch.equal(got, want), name


def test_wrong_shapes_are_refused_at_the_callers_line():
    cases = serving_cases()
    a, a_scales, b, b_scales = as_operands(cases["gemm_fp8_blockscaled"][2])
    ga, gb, counts = as_operands(cases["grouped_gemm_masked"][2])
    fa, fa_scales, fb, fb_scales, offsets = as_operands(cases["grouped_gemm_fp8_blockscaled"][2])
    ma, ma_scales, _, _, fp8_counts = as_operands(cases["grouped_gemm_fp8_blockscaled_masked"][2])
    q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, _ = as_operands(cases["paged_prefill"][2])
    refusals = [
        (lambda: ops.gemm_fp8_blockscaled(a, a_scales[:, :1], b, b_scales), r"a_scales must be \(40, 2\)"),
        (lambda: ops.grouped_gemm_masked(ga, gb[:2], counts), r"b must be \(G, K, N\) = \(3, 32, N\)"),
        (lambda: ops.grouped_gemm_fp8_blockscaled(fa, fa_scales, fb, fb_scales, offsets[:2]),
         r"group sizes must be \(3,\)"),
        (lambda: ops.grouped_gemm_fp8_blockscaled_masked(ma, ma_scales[:, :8], fb, fb_scales, fp8_counts),
         r"a_scales must be \(G, capacity, K/128\) = \(3, 16, 2\)"),
        (lambda: ops.paged_prefill(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, 19),
         "max_seqlen_q is 19 but a sequence has 20 rows"),
    ]
    for call, message in refusals:
        with pytest.raises(ArgumentError, match=message) as error:
            call()
        assert error.value.location.file == __file__, message
