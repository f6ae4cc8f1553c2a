"""The serving operators of asyncdsl.ops on the CPU, the kernel functions by the float64 references
of conftest.py: `torch.library.opcheck`, the arguments reaching the kernel function in order
(against attention and products computed here with torch), and a decode step with a grouped GEMM
traced whole by `torch.compile(fullgraph=True)`."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import asyncdsl.ops as ops  # noqa: E402
from asyncdsl.ops.grouped_gemm import grouped_gemm_op  # noqa: E402
from asyncdsl.ops.paged_decode_attention import paged_decode_attention_op  # noqa: E402

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
