"""Variable-length attention forward (`asyncdsl.kernels.attention_varlen`, packed (total, H, D)
sequences) and chunked prefill over a paged KV cache (`asyncdsl.kernels.paged_prefill`), bf16,
in one run on the same random normal inputs, causal and not:

- equal lengths: the packed batch against the dense kernel (`asyncdsl.kernels.attention`,
  layout "BSHD": the same bytes) on the same tokens, the ratio the varlen kernel is held to
  (≥ 0.95), with torch SDPA (cuDNN, flash) on the dense batch as the peers;
- ragged lengths (a fixed random draw from 128 to 8192 summing to the same tokens): against
  torch SDPA run sequence by sequence, SDPA on a nested (jagged) tensor, `flex_attention` with a
  document mask (compiled) and `torch.nn.attention.varlen.varlen_attn`, each where this torch has
  it (a peer that fails is reported and left out);
- chunked prefill: chunks of 512 new tokens after 3,584 cached ones, pages of 16 and 64, against
  `attention_varlen` on the same keys gathered into a contiguous cache (the cost of the pages).

Times are the wall time of launches in a row, the contenders taking turns in a random order
(`common.interleaved_ms`); TFLOP/s count the score and output products of the (query, key) pairs
a row sees (4·D a pair and head).  asyncdsl's output is written into a NaN-poisoned buffer first
and must have no NaN left; errors are the largest absolute difference from float64 attention
over the rows of the first and the last sequence in the first two heads.

    python benchmarks/attention_varlen.py [--tokens 16384] [--heads 16] [--dim 128]
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from common import TflopsTable, best_peer_ratio, interleaved_ms, plot_result, runnable, tflops  # noqa: E402

SAMPLE_HEADS = 2


def ragged_lengths(tokens: int, seed: int = 0) -> list[int]:
    """Lengths from 128 to 8192 (log-uniform) summing to `tokens`, the last one cut to fit."""
    rng = np.random.default_rng(seed)
    lengths: list[int] = []
    while sum(lengths) < tokens:
        lengths.append(int(min(2 ** rng.uniform(7, 13), tokens - sum(lengths))))
    return lengths


def pairs(lengths_q, lengths_k, causal: bool) -> int:
    """(query, key) pairs the rows see, the causal diagonal at the last key."""
    total = 0
    for sq, sk in zip(lengths_q, lengths_k):
        total += sum(min(sk, sk - sq + i + 1) for i in range(sq)) if causal else sq * sk
    return total


def offsets(torch, lengths):
    return torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32, device="cuda")


def float64_error(torch, out, q, k, v, lengths_q, lengths_k, causal: bool) -> float:
    """Largest |out - float64 attention| over the first and the last sequence's rows, first heads."""
    cu_q, cu_k = np.concatenate([[0], np.cumsum(lengths_q)]), np.concatenate([[0], np.cumsum(lengths_k)])
    worst = 0.0
    for b in {0, len(lengths_q) - 1}:
        (q0, q1), (k0, k1) = cu_q[b:b + 2], cu_k[b:b + 2]
        qs = q[q0:q1, :SAMPLE_HEADS].double().transpose(0, 1)
        ks, vs = (x[k0:k1].double().repeat_interleave(q.shape[1] // k.shape[1], dim=1)[:, :SAMPLE_HEADS]
                  .transpose(0, 1) for x in (k, v))
        logits = qs @ ks.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if causal:
            rows = torch.arange(q1 - q0, device="cuda")[:, None] + (k1 - k0) - (q1 - q0)
            logits = logits.masked_fill(torch.arange(k1 - k0, device="cuda")[None, :] > rows, float("-inf"))
        exact = torch.softmax(logits, dim=-1) @ vs
        worst = max(worst, float((out[q0:q1, :SAMPLE_HEADS].double().transpose(0, 1) - exact).abs().max()))
    return worst


def poisoned_run(torch, run, like, heads):
    """asyncdsl's host function into NaN-filled o and lse: every row must be written."""
    out = torch.full_like(like, float("nan"))
    lse = torch.full((heads, like.shape[0]), float("nan"), device="cuda")
    run(out=out, lse=lse)
    torch.cuda.synchronize()
    assert not out.isnan().any() and not lse.isnan().any(), "rows of the output were not written"
    return out


def sdpa_peers(torch, q, k, v, lengths, causal: bool) -> dict:
    """torch's ways of running a packed batch, each as a function that builds the peer (raising
    where this torch lacks it): SDPA per sequence, on a nested tensor, flex_attention with a
    document mask, varlen_attn."""
    import torch.nn.functional as F

    cu, longest = offsets(torch, lengths), max(lengths)
    bounds = np.concatenate([[0], np.cumsum(lengths)])

    def per_sequence():
        views = [tuple(x[start:end].transpose(0, 1)[None] for x in (q, k, v))
                 for start, end in zip(bounds[:-1], bounds[1:])]
        return lambda: [F.scaled_dot_product_attention(*view, is_causal=causal) for view in views]

    def nested():
        jagged = [torch.nested.nested_tensor_from_jagged(x, cu.long()).transpose(1, 2) for x in (q, k, v)]
        return lambda: F.scaled_dot_product_attention(*jagged, is_causal=causal)

    def flex():
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        document = torch.repeat_interleave(torch.arange(len(lengths), device="cuda"),
                                           torch.tensor(lengths, device="cuda"))

        def same_document(b, h, q_idx, kv_idx):
            visible = document[q_idx] == document[kv_idx]
            return visible & (q_idx >= kv_idx) if causal else visible

        mask = create_block_mask(same_document, None, None, q.shape[0], q.shape[0], device="cuda")
        compiled, dense = torch.compile(flex_attention), [x.transpose(0, 1)[None] for x in (q, k, v)]
        return lambda: compiled(*dense, block_mask=mask)

    def varlen():
        from torch.nn.attention.varlen import varlen_attn

        return lambda: varlen_attn(q, k, v, cu, cu, longest, longest, is_causal=causal)

    return {"torch SDPA per sequence": per_sequence, "torch SDPA nested": nested,
            "torch flex_attention": flex, "torch varlen_attn": varlen}


def measure_equal(torch, tokens: int, heads: int, d: int, causal: bool) -> dict:
    """4 sequences of tokens / 4: varlen against the dense kernel on the same bytes."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import asyncdsl.kernels as K

    s = tokens // 4
    q, k, v = (torch.randn(tokens, heads, d, device="cuda").to(torch.bfloat16) for _ in range(3))
    dense = [x.view(4, s, heads, d) for x in (q, k, v)]
    cu = offsets(torch, [s] * 4)
    contenders = {
        "asyncdsl varlen": lambda: lambda: K.attention_varlen(q, k, v, cu, cu, s, s, causal=causal),
        "asyncdsl dense": lambda: lambda: K.attention(*dense, causal=causal, layout="BSHD"),
    }
    bhsd = [x.transpose(1, 2) for x in dense]
    for name, backend in (("torch SDPA cuDNN", SDPBackend.CUDNN_ATTENTION),
                          ("torch SDPA flash", SDPBackend.FLASH_ATTENTION)):
        def sdpa(backend=backend):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(*bhsd, is_causal=causal)
        contenders[name] = lambda sdpa=sdpa: sdpa
    times = interleaved_ms(runnable(torch, contenders), rounds=5, launches=10)
    out = poisoned_run(torch, lambda **o: K.attention_varlen(q, k, v, cu, cu, s, s, causal=causal, **o), q,
                       heads)
    return {"TFLOP/s": tflops(4 * d * heads * pairs([s] * 4, [s] * 4, causal), times),
            "asyncdsl varlen / asyncdsl dense": times["asyncdsl dense"] / times["asyncdsl varlen"],
            "max abs error vs float64": float64_error(torch, out, q, k, v, [s] * 4, [s] * 4, causal)}


def measure_ragged(torch, tokens: int, heads: int, d: int, causal: bool) -> dict:
    import asyncdsl.kernels as K

    lengths = ragged_lengths(tokens)
    q, k, v = (torch.randn(tokens, heads, d, device="cuda").to(torch.bfloat16) for _ in range(3))
    cu, longest = offsets(torch, lengths), max(lengths)
    contenders = {"asyncdsl varlen": lambda: lambda: K.attention_varlen(q, k, v, cu, cu, longest, longest,
                                                                        causal=causal),
                  **sdpa_peers(torch, q, k, v, lengths, causal)}
    times = interleaved_ms(runnable(torch, contenders), rounds=5, launches=10)
    out = poisoned_run(torch, lambda **o: K.attention_varlen(q, k, v, cu, cu, longest, longest, causal=causal,
                                                             **o), q, heads)
    speed = tflops(4 * d * heads * pairs(lengths, lengths, causal), times)
    return {"TFLOP/s": speed, "lengths": lengths, **best_peer_ratio(speed, "asyncdsl varlen"),
            "max abs error vs float64": float64_error(torch, out, q, k, v, lengths, lengths, causal)}


def measure_prefill(torch, heads: int, d: int, page: int, batch: int = 8, chunk: int = 512,
                    context: int = 4096) -> dict:
    """Chunks of `chunk` new tokens at the end of `context` keys, in pages, against varlen on
    the same keys gathered contiguously."""
    import asyncdsl.kernels as K

    kv_heads = max(heads // 4, 1)
    pages_each = context // page
    q = torch.randn(batch * chunk, heads, d, device="cuda").to(torch.bfloat16)
    shape = (batch * pages_each + 7, page, kv_heads, d)  # 7 pages no table names
    k_cache, v_cache = (torch.randn(shape, device="cuda").to(torch.bfloat16) for _ in range(2))
    table = torch.randperm(k_cache.shape[0], device="cuda")[:batch * pages_each].view(batch, pages_each)
    table = table.to(torch.int32).contiguous()
    seq_lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
    cu_q, cu_k = offsets(torch, [chunk] * batch), offsets(torch, [context] * batch)
    k, v = (cache[table.long()].reshape(batch * context, kv_heads, d) for cache in (k_cache, v_cache))
    def paged():
        return K.paged_prefill(q, k_cache, v_cache, table, seq_lens, cu_q, chunk)

    def gathered():
        return K.attention_varlen(q, k, v, cu_q, cu_k, chunk, context, causal=True)

    contenders = {"asyncdsl paged_prefill": lambda: paged,
                  "asyncdsl varlen, gathered cache": lambda: gathered}
    times = interleaved_ms(runnable(torch, contenders), rounds=5, launches=10)
    out = poisoned_run(torch, lambda **o: K.paged_prefill(q, k_cache, v_cache, table, seq_lens, cu_q, chunk,
                                                          **o), q, heads)
    return {"TFLOP/s": tflops(4 * d * heads * pairs([chunk] * batch, [context] * batch, True), times),
            "paged / gathered": times["asyncdsl varlen, gathered cache"] / times["asyncdsl paged_prefill"],
            "max abs error vs float64": float64_error(torch, out, q, k, v, [chunk] * batch, [context] * batch,
                                                      True)}


def packed_shape(argv: list[str]) -> tuple[int, int, int]:
    """The packed batch the command line names: --tokens, --heads, --dim (head dim)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--dim", type=int, default=128)
    options = parser.parse_args(argv)
    return options.tokens, options.heads, options.dim


def main(argv: list[str]) -> None:
    import torch

    tokens, heads, d = packed_shape(argv)
    table = TflopsTable()
    for causal in (False, True):
        for kind, measure in (("equal lengths", measure_equal), ("ragged", measure_ragged)):
            row = measure(torch, tokens, heads, d, causal)
            table.add(f"{kind} {tokens} tokens H{heads} D{d}{' causal' if causal else ''}", row,
                      {key: round(value, 3) for key, value in row.items() if " / " in key},
                      f"error={row['max abs error vs float64']:.1e}")
    for page in (16, 64):
        row = measure_prefill(torch, heads, d, page)
        table.add(f"chunked prefill 8 x 512 after 3584, pages of {page}, H{heads} D{d}", row,
                  f"paged / gathered={row['paged / gathered']:.3f}",
                  f"error={row['max abs error vs float64']:.1e}")
    worst = min(row["asyncdsl varlen / asyncdsl dense"] for row in table.details.values()
                if "asyncdsl varlen / asyncdsl dense" in row)
    print(f"varlen / dense on equal lengths, worst row: {worst:.3f} (held to >= 0.95)")
    plot_result(table.write("attention_varlen", {"asyncdsl varlen / asyncdsl dense, worst row": worst}))


if __name__ == "__main__":
    main(sys.argv[1:])
