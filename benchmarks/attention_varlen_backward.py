"""Variable-length attention backward (`asyncdsl.kernels.attention_varlen_backward`, packed
(total, H, D) sequences), bf16, default and `deterministic=True`, in one run on the same random
normal inputs, causal and not:

- equal lengths (4 sequences of tokens / 4): against the dense backward
  (`asyncdsl.kernels.attention_backward`, layout "BSHD": the same bytes) on the same tokens, the
  ratio the varlen kernel is held to (≥ 0.95), with torch SDPA's backward (cuDNN) on the dense
  batch as the peer;
- ragged lengths (`attention_varlen.ragged_lengths`: 128 to 8192 summing to the same tokens):
  against torch's backward of SDPA run sequence by sequence and of
  `torch.nn.attention.varlen.varlen_attn`, where this torch has them.

Times are the wall time of launches in a row, the contenders taking turns in a random order
(`common.interleaved_ms`); torch's time is its backward alone (`torch.autograd.grad` of a kept
forward graph), asyncdsl's its host function (δ and the dq conversion included).  TFLOP/s count
the five products of the (query, key) pairs a row sees (10·D a pair and head).  asyncdsl's
gradients land in memory just freed from NaN-filled tensors of their sizes and must have no NaN
left; errors are the largest absolute differences of dq, dk, dv from float64 gradients of the
first and last sequences' first key/value head (and its query heads).

    python benchmarks/attention_varlen_backward.py [--tokens 16384] [--heads 16] [--dim 128]
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from attention_varlen import offsets, packed_shape, pairs, ragged_lengths  # noqa: E402
from common import TflopsTable, best_peer_ratio, interleaved_ms, plot_result, runnable, tflops  # noqa: E402


def float64_errors(torch, got, q, k, v, do, lengths, causal: bool) -> dict:
    """Largest |gradient - float64 gradient| over the first and last sequences' rows of key/value
    head 0 and its query heads."""
    group = q.shape[1] // k.shape[1]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    worst = {"dq": 0.0, "dk": 0.0, "dv": 0.0}
    for b in {0, len(lengths) - 1}:
        start, end = int(bounds[b]), int(bounds[b + 1])
        qs, dos = (x[start:end, :group].double().transpose(0, 1) for x in (q, do))
        ks, vs = (x[start:end, :1].double().transpose(0, 1).requires_grad_() for x in (k, v))
        qs.requires_grad_()
        logits = qs @ ks.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if causal:
            logits = logits.masked_fill(torch.ones_like(logits[0], dtype=torch.bool).triu(1), float("-inf"))
        (torch.softmax(logits, dim=-1) @ vs).backward(dos)
        mine = (got[0][start:end, :group], got[1][start:end, :1], got[2][start:end, :1])
        for name, mine, exact in zip(("dq", "dk", "dv"), mine, (qs.grad, ks.grad, vs.grad)):
            worst[name] = max(worst[name], float((mine.double().transpose(0, 1) - exact).abs().max()))
    return worst


def poisoned_run(torch, run, shapes):
    """`run()` after NaN-filled tensors of the gradients' and workspace's sizes were freed: a row
    it does not write shows up as NaN."""
    garbage = [torch.full(shape, float("nan"), device="cuda", dtype=dtype) for shape, dtype in shapes]
    del garbage
    got = run()
    torch.cuda.synchronize()
    assert not any(x.isnan().any() for x in got), "rows of the gradients were not written"
    return got


def backward_of(torch, forward, inputs, do):
    """A contender builder: torch's backward alone of `forward(*leaves)`, the graph kept."""
    def build():
        leaves = [x.detach().requires_grad_() for x in inputs]
        out = forward(*leaves)
        return lambda: torch.autograd.grad(out, leaves, do, retain_graph=True)
    return build


def measure(torch, lengths, heads: int, d: int, causal: bool, equal: bool) -> dict:
    import torch.nn.functional as F

    import asyncdsl.kernels as K

    tokens, longest = sum(lengths), max(lengths)
    q, k, v, do = (torch.randn(tokens, heads, d, device="cuda").to(torch.bfloat16) for _ in range(4))
    cu = offsets(torch, lengths)
    o, lse = K.attention_varlen(q, k, v, cu, cu, longest, longest, causal=causal)

    def ours(deterministic=False):
        return lambda: K.attention_varlen_backward(q, k, v, o, lse, do, cu, cu, longest, longest,
                                                   causal=causal, deterministic=deterministic)
    contenders = {"asyncdsl varlen": ours, "asyncdsl varlen deterministic": lambda: ours(True)}
    if equal:
        dense = [x.view(4, tokens // 4, heads, d) for x in (q, k, v, o, do)]
        dense_lse = lse.view(heads, 4, tokens // 4).transpose(0, 1).contiguous()
        contenders["asyncdsl dense"] = lambda: lambda: K.attention_backward(
            *dense[:4], dense_lse, dense[4], causal=causal, layout="BSHD")
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def cudnn(*leaves):
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                dense_leaves = (x.view(4, -1, heads, d).transpose(1, 2) for x in leaves)
                return F.scaled_dot_product_attention(*dense_leaves, is_causal=causal)
        contenders["torch SDPA cuDNN"] = backward_of(torch, cudnn, (q, k, v),
                                                     do.view(4, -1, heads, d).transpose(1, 2))
    else:
        bounds = np.concatenate([[0], np.cumsum(lengths)])

        def per_sequence(*leaves):
            return torch.cat([F.scaled_dot_product_attention(*(x[s:e].transpose(0, 1)[None] for x in leaves),
                                                             is_causal=causal)[0].transpose(0, 1)
                              for s, e in zip(bounds[:-1], bounds[1:])])

        def varlen(*leaves):
            from torch.nn.attention.varlen import varlen_attn

            return varlen_attn(*leaves, cu, cu, longest, longest, is_causal=causal)
        contenders["torch SDPA per sequence"] = backward_of(torch, per_sequence, (q, k, v), do)
        contenders["torch varlen_attn"] = backward_of(torch, varlen, (q, k, v), do)
    times = interleaved_ms(runnable(torch, contenders), rounds=5, launches=10)
    got = poisoned_run(torch, ours(), [(q.shape, torch.bfloat16), (k.shape, torch.bfloat16),
                                       (v.shape, torch.bfloat16), ((heads, tokens + 64 * len(lengths), d),
                                                                   torch.float32)])
    speed = tflops(10 * d * heads * pairs(lengths, lengths, causal), times)
    cost = times["asyncdsl varlen deterministic"] / times["asyncdsl varlen"] - 1
    row = {"TFLOP/s": speed, "deterministic cost": cost,
           "max abs error vs float64": float64_errors(torch, got, q, k, v, do, lengths, causal)}
    if "asyncdsl dense" in times:
        row["asyncdsl varlen / asyncdsl dense"] = times["asyncdsl dense"] / times["asyncdsl varlen"]
    row |= best_peer_ratio(speed, "asyncdsl varlen")
    if not equal:
        row["lengths"] = lengths
    return row


def main(argv: list[str]) -> None:
    import torch

    tokens, heads, d = packed_shape(argv)
    table = TflopsTable()
    for causal in (False, True):
        for kind, lengths in (("equal lengths", [tokens // 4] * 4), ("ragged", ragged_lengths(tokens))):
            row = measure(torch, lengths, heads, d, causal, kind == "equal lengths")
            table.add(f"backward, {kind} {tokens} tokens H{heads} D{d}{' causal' if causal else ''}", row,
                      {key: round(value, 3) for key, value in row.items()
                       if " / " in key or key.endswith("cost")},
                      {key: f"{value:.1e}" for key, value in row["max abs error vs float64"].items()})
    ratios = [row["asyncdsl varlen / asyncdsl dense"] for row in table.details.values()
              if "asyncdsl varlen / asyncdsl dense" in row]
    summary = {"asyncdsl varlen / asyncdsl dense, worst row": min(ratios)} if ratios else {}
    if ratios:
        print(f"varlen / dense backward on equal lengths, worst row: {min(ratios):.3f} (held to >= 0.95)")
    plot_result(table.write("attention_varlen_backward", summary))


if __name__ == "__main__":
    main(sys.argv[1:])
