"""The paged decode (`asyncdsl.kernels.paged_decode_attention`) on the GPU: the kernel against
the interpreter from the same inputs and plan (page sizes 16 and 64, head dims 64 and 128,
grouped heads, several queries, fp8 caches, skewed batches whose long sequences the plan splits),
the plan and merge launches against numpy and the interpreter, the host function on torch
tensors against float64 at a serving size and on a skewed batch, a bad block table read without
a fault (and reported under ASYNCDSL_DEBUG=1), and a CUDA graph replayed over new lengths and
tables."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_support import gpu_and_interpreter, hopper_or_skip

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.blocks.balanced_splits import SPLITS, host_plan
from asyncdsl.kernels.paged_decode import paged_decode_kernel, paired_decode_kernel
from asyncdsl.kernels.paged_decode_splits import merge_kernel, plan_kernel
from asyncdsl.kernels.paged_decode_reference import reference

hopper_or_skip()
pytestmark = pytest.mark.gpu

BF16 = ml_dtypes.bfloat16
# ex2.approx on the GPU, exact exp2 in the interpreter (and float64 in the reference): p and o
# are bf16, values below 1 agree to a few bf16 ulps.
TOLERANCE = 2e-2


def _inputs(batch, queries, heads, kv_heads, d, page, pages, max_pages, lens, dtype=BF16, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, queries, heads, d)).astype(BF16)
    k, v = (rng.standard_normal((pages, page, kv_heads, d)).astype(dtype) for _ in range(2))
    table = rng.integers(0, pages, (batch, max_pages), dtype=np.int32)
    return q, k, v, table, np.array(lens, np.int32)


def _decode_on_both(q, k, v, table, seq_lens, block, units, dtype, decode=paged_decode_kernel, gather="tma"):
    """The decode kernel (`decode`: either build), then the merge, on the GPU and in the
    interpreter from the same inputs and numpy's plan for `units` units; each launch's outputs
    compared."""
    _, queries, heads, d = q.shape
    plan = host_plan(seq_lens, table.shape[1] * k.shape[1], block, units)
    scales = np.array([0.5, 2.0], np.float32)
    outputs = [np.full(q.shape, np.nan, BF16), np.full((2 * units, queries * heads, d), np.nan, np.float32),
               np.full((2 * units, queries * heads), np.nan, np.float32)]
    gpu, host = gpu_and_interpreter(decode, [q, k, v, table, seq_lens, scales, plan], outputs,
                                    SCALED=dtype != BF16, BK=block, GATHER=gather)
    for got, expected in zip(gpu, host):
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), atol=TOLERANCE,
                                   rtol=0, equal_nan=True)
    o = host[0].reshape(len(seq_lens), queries * heads, d)
    merged_gpu, merged_host = gpu_and_interpreter(merge_kernel, [plan, host[1], host[2]], [o])
    np.testing.assert_allclose(merged_gpu[0].astype(np.float64), merged_host[0].astype(np.float64),
                               atol=TOLERANCE, rtol=0, equal_nan=True)
    return plan


@pytest.mark.parametrize("page,d,queries,heads,kv_heads,block,dtype", [
    (16, 128, 1, 8, 2, 64, BF16), (64, 64, 1, 4, 4, 64, BF16), (16, 64, 4, 8, 1, 32, BF16),
    (64, 128, 8, 8, 1, 32, BF16), (16, 128, 2, 4, 2, 64, ml_dtypes.float8_e4m3fn)])
@pytest.mark.parametrize("decode", [paged_decode_kernel, paired_decode_kernel], ids=["single", "paired"])
def test_the_kernel_on_the_gpu_is_the_interpreters(page, d, queries, heads, kv_heads, block, dtype, decode):
    lens = (1, 77, 200) if queries == 1 else (queries, 77, 200)
    # The narrowest table (13 pages of 16: a last block of 64 keys past the last page).
    q, k, v, table, seq_lens = _inputs(3, queries, heads, kv_heads, d, page, 24, -(-200 // page), lens, dtype)
    _decode_on_both(q, k, v, table, seq_lens, block, 2, dtype, decode)


@pytest.mark.parametrize("page,d,queries,block", [(16, 128, 1, 64), (16, 64, 4, 32), (64, 128, 2, 64)])
@pytest.mark.parametrize("decode", [paged_decode_kernel, paired_decode_kernel], ids=["single", "paired"])
def test_pages_gathered_by_cp_async_on_the_gpu_are_the_interpreters(page, d, queries, block, decode):
    lens = (queries, 77, 200)
    q, k, v, table, seq_lens = _inputs(3, queries, 8, 2, d, page, 24, -(-200 // page), lens)
    _decode_on_both(q, k, v, table, seq_lens, block, 2, BF16, decode, gather="cp_async")


@pytest.mark.parametrize("page,queries,dtype", [(16, 1, BF16), (64, 4, BF16),
                                                 (16, 1, ml_dtypes.float8_e4m3fn)])
def test_a_skewed_batch_on_the_gpu_is_the_interpreters(page, queries, dtype):
    """One long sequence among short, empty and one-key ones: the plan splits the long one."""
    lens = (0, queries, 64, 2500, 17, 130, 1)
    q, k, v, table, seq_lens = _inputs(7, queries, 8, 2, 128, page, 400, -(-2500 // page), lens, dtype)
    plan = _decode_on_both(q, k, v, table, seq_lens, 64, 6, dtype)
    assert plan[SPLITS, 3] > 1 and (np.delete(plan[SPLITS, :7], 3) == 1).all()


@pytest.mark.parametrize("batch,units", [(32, 33), (300, 17), (3000, 264)])
def test_the_plan_on_the_gpu_is_numpys(batch, units):
    rng = np.random.default_rng(batch)
    lens = np.clip(128 * rng.zipf(1.3, batch), 0, 40000).astype(np.int32)
    lens[:3] = (0, -1, 1 << 20)
    gpu, host = gpu_and_interpreter(plan_kernel, [lens], [np.zeros((5, units + batch), np.int32)],
                                    CAPACITY=32768, BK=64)
    expected = host_plan(lens, 32768, 64, units)
    np.testing.assert_array_equal(gpu[0], host[0])
    np.testing.assert_array_equal(gpu[0][:2, :batch], expected[:2, :batch])  # each sequence's splits
    np.testing.assert_array_equal(gpu[0][2:4], expected[2:4])  # each slot's sequence and split


def _torch_inputs(torch, batch, queries, heads, kv_heads, d, page, pages, lens, dtype):
    q = torch.randn(batch, queries, heads, d, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(pages, page, kv_heads, d, device="cuda").to(dtype) for _ in range(2))
    max_pages = -(-max(lens) // page)
    table = torch.randint(0, pages, (batch, max_pages), device="cuda", dtype=torch.int32)
    return q, k, v, table, torch.tensor(lens, device="cuda", dtype=torch.int32)


def _host(torch, *tensors):
    return [t.cpu().numpy() if t.dtype in (torch.int32, torch.float32) else
            t.float().cpu().numpy().astype(BF16 if t.dtype == torch.bfloat16 else ml_dtypes.float8_e4m3fn)
            for t in tensors]


@pytest.mark.parametrize("queries,page,fp8", [(1, 16, False), (4, 64, False), (1, 16, True)])
def test_the_host_function_on_torch_tensors_matches_float64(queries, page, fp8):
    """8 sequences of 1 to 3000 positions, 32 query heads over 8 KV heads, D 128, the chosen splits."""
    torch = pytest.importorskip("torch")
    dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    lens = [max(queries, n) for n in (1, 3000, 17, 640, 1025, 64, 2048, 333)]
    q, k, v, table, seq_lens = _torch_inputs(torch, 8, queries, 32, 8, 128, page, 512, lens, dtype)
    scales = {"k_scale": torch.tensor([0.75], device="cuda"), "v_scale": torch.tensor([1.5], device="cuda")}
    o = K.paged_decode_attention(q[:, 0] if queries == 1 else q, k, v, table, seq_lens,
                                 **(scales if fp8 else {}))
    assert o.device == q.device and o.dtype == torch.bfloat16
    expected = reference(*_host(torch, q, k, v, table, seq_lens),
                         **({"k_scale": 0.75, "v_scale": 1.5} if fp8 else {}))
    got = o.float().cpu().numpy().reshape(expected.shape)
    np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("ctas_per_sm", [1, 2, 4])
def test_the_host_function_on_a_skewed_batch_matches_float64(ctas_per_sm):
    """32 sequences of Zipf lengths from 128 to 8k (the benchmark's law, shorter), 32 query heads
    over 8 KV heads: the long ones split over the device's multiprocessors, then merged."""
    torch = pytest.importorskip("torch")
    draws = np.random.default_rng(0).zipf(1.3, 32)
    lens = [int(n) for n in np.clip(128 * draws, 128, 8192)]
    q, k, v, table, seq_lens = _torch_inputs(torch, 32, 1, 32, 8, 128, 16, 4096, lens, torch.bfloat16)
    o = K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, ctas_per_sm=ctas_per_sm)
    again = K.paged_decode_attention(q[:, 0], k, v, table, seq_lens, ctas_per_sm=ctas_per_sm)
    assert torch.equal(o.view(torch.int16), again.view(torch.int16))  # merged in order: the same bits
    expected = reference(*_host(torch, q[:, 0], k, v, table, seq_lens))[:, 0]
    np.testing.assert_allclose(o.float().cpu().numpy(), expected, atol=TOLERANCE, rtol=0)


def _bad_table(torch):
    q, k, v, table, _ = _torch_inputs(torch, 4, 1, 8, 2, 128, 16, 32, [128] * 4, torch.bfloat16)
    table[0, 3], table[1, 0], table[2, 5] = 32, -7, 1 << 30
    seq_lens = torch.tensor([128, 100, 90, 1 << 20], device="cuda", dtype=torch.int32)
    return q[:, 0], k, v, table, seq_lens


def test_a_bad_block_table_reads_nothing_outside_the_cache():
    """Entries past the cache, negative ones and a length past the table are left out (run it
    under compute-sanitizer: no access outside the cache)."""
    torch = pytest.importorskip("torch")
    q, k, v, table, seq_lens = _bad_table(torch)
    o = K.paged_decode_attention(q, k, v, table, seq_lens)
    expected = reference(*_host(torch, q, k, v, table, seq_lens))[:, 0]
    np.testing.assert_allclose(o.float().cpu().numpy(), expected, atol=TOLERANCE, rtol=0)


def test_debug_mode_reports_a_bad_block_table(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    q, k, v, table, seq_lens = _bad_table(torch)
    reported = "a block table entry names no page|a sequence length runs past"
    with pytest.raises(ad.AssumptionError, match=reported):
        K.paged_decode_attention(q, k, v, table, seq_lens)
    good = torch.zeros_like(table)
    K.paged_decode_attention(q, k, v, good, torch.full_like(seq_lens, 64))  # passes its checks


def test_a_captured_graph_replays_over_new_lengths_and_tables():
    """Lengths and tables are read on the device: a graph captured once serves the next steps."""
    torch = pytest.importorskip("torch")
    q, k, v, table, seq_lens = _torch_inputs(torch, 16, 1, 32, 8, 128, 16, 1024, [4096] * 16, torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        K.paged_decode_attention(q[:, 0], k, v, table, seq_lens)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = K.paged_decode_attention(q[:, 0], k, v, table, seq_lens)
    for step in range(2):
        seq_lens.copy_(torch.randint(1, 4097, (16,), device="cuda", dtype=torch.int32))
        table.copy_(torch.randint(0, 1024, table.shape, device="cuda", dtype=torch.int32))
        q.normal_()
        graph.replay()
        torch.cuda.synchronize()
        expected = reference(*_host(torch, q[:, 0], k, v, table, seq_lens))[:, 0]
        np.testing.assert_allclose(o.float().cpu().numpy(), expected, atol=TOLERANCE, rtol=0,
                                   err_msg=f"step {step}")
