"""Decode attention over a paged KV cache, `asyncdsl.kernels.paged_decode_attention`, as KV bytes
read per second against the same run's device copy (torch `copy_` of a tensor of the KV bytes:
read + write bytes per second), and against torch SDPA and flex attention on the cache gathered
dense beforehand (the gather not timed: the peers' best case), in one run on the same random
inputs.  Llama-3-8B's heads (32 query heads over 8 KV heads, D 128), bf16, pages of 16; rows
B 32 and 64 at contexts of 4k and 8k, B 1 at 64k, and 32 sequences of Zipf-distributed lengths
from 128 to 32k (the peers mask each sequence's keys past its length).  Each figure is the median
device time over rounds in which the contenders take turns (`common.rounds_of_gpu_ms`, an L2
flush before each launch); errors are the largest absolute difference from float64 attention on
the GPU over a sample of sequences.  `--sweep` adds the kernel on the same keys in pages of 64
(whole pages a block, in sequence order; with a budget of one and of two CTAs a multiprocessor),
with its splits balanced for 1, 2 and 4 CTAs a multiprocessor (`ctas_per_sm`: the default is the
library's `CTAS_PER_SM`; 1 runs the build of one CTA a multiprocessor, 2 and 4 the paired build,
two CTAs a multiprocessor at once, 4 in two waves), and unsplit (`splits=1`: one CTA a sequence
and KV head, no merge), and with the pages of 16 gathered by the producer's threads' cp.async
on one and two CTAs a multiprocessor (`gather="cp_async"`).  Each row also reports the plan:
the CTAs the decode launches and the most splits a sequence took.

    python benchmarks/paged_decode.py [--sweep]
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from common import plot_result, rounds_of_gpu_ms, write_result  # noqa: E402

HEADS, KV_HEADS, D, PAGE = 32, 8, 128, 16
ROWS = (("B32 ctx4k", [4096] * 32), ("B32 ctx8k", [8192] * 32), ("B64 ctx4k", [4096] * 64),
        ("B64 ctx8k", [8192] * 64), ("B1 ctx64k", [65536]))
SAMPLED = 3  # sequences whose float64 attention is compared


def zipf_lengths(batch: int = 32, seed: int = 0) -> list[int]:
    """Lengths 128 · a Zipf(1.3) draw, clipped to 128 .. 32768: most short, a few long."""
    draws = np.random.default_rng(seed).zipf(1.3, batch)
    return [int(n) for n in np.clip(128 * draws, 128, 32768)]


def paged_inputs(torch, lens: list[int]):
    """q (B, H, D), caches of exactly the pages the batch needs in a random order, the table and lengths."""
    pages_each = [-(-n // PAGE) for n in lens]
    width = max(pages_each)
    order = torch.randperm(sum(pages_each), device="cuda", dtype=torch.int32)
    table = torch.zeros(len(lens), width, device="cuda", dtype=torch.int32)
    start = 0
    for b, count in enumerate(pages_each):
        table[b, :count] = order[start:start + count]
        start += count
    q = torch.randn(len(lens), HEADS, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(sum(pages_each), PAGE, KV_HEADS, D, device="cuda", dtype=torch.bfloat16)
            for _ in range(2))
    return q, k, v, table, torch.tensor(lens, device="cuda", dtype=torch.int32)


def dense(cache, table):
    """The cache gathered through the table, (B, H_kv, positions, D), as the SDPA peers read it."""
    b, width = table.shape
    return cache[table.reshape(-1).long()].reshape(b, width * PAGE, KV_HEADS, D).transpose(1, 2).contiguous()


def repaged(torch, dense_cache, page: int):
    """The dense cache (B, H_kv, positions, D) in pages of `page`, each sequence's in order
    (the positions padded to whole pages): the cache and its table."""
    b, h, n, d = dense_cache.shape
    padded = torch.nn.functional.pad(dense_cache, (0, 0, 0, -n % page))
    width = padded.shape[2] // page
    cache = padded.transpose(1, 2).reshape(b * width, page, h, d).contiguous()
    return cache, torch.arange(b * width, device="cuda", dtype=torch.int32).reshape(b, width)


def float64_rows(q, k_dense, v_dense, lens, b):
    """Sequence b's attention in float64, (H, D)."""
    kb = k_dense[b, :, :lens[b]].double().repeat_interleave(HEADS // KV_HEADS, 0)
    vb = v_dense[b, :, :lens[b]].double().repeat_interleave(HEADS // KV_HEADS, 0)
    logits = (kb @ q[b].double()[:, :, None])[..., 0] / math.sqrt(D)
    return (logits.softmax(-1)[:, None, :] @ vb)[:, 0]


def peers(torch, q, k_dense, v_dense, lens):
    """name -> fn of the peers that run here: SDPA (a length mask where lengths differ) and flex
    attention (compiled, keys past each length masked), on the dense cache."""
    import torch.nn.functional as F

    qd = q[:, :, None]
    mask = None
    if len(set(lens)) > 1:
        positions = torch.arange(k_dense.shape[2], device="cuda")
        mask = (positions[None, :] < torch.tensor(lens, device="cuda")[:, None])[:, None, None, :]
    found = {"torch SDPA (dense)": lambda: F.scaled_dot_product_attention(
        qd, k_dense, v_dense, attn_mask=mask, enable_gqa=True)}
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        lengths = torch.tensor(lens, device="cuda")
        block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: kv_idx < lengths[b], len(lens), None, 1,
                                       k_dense.shape[2])
        compiled = torch.compile(flex_attention)
        found["flex attention (dense)"] = lambda: compiled(qd, k_dense, v_dense, block_mask=block_mask,
                                                            enable_gqa=True)
        found["flex attention (dense)"]()
    except Exception as error:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
        print(f"flex attention unavailable: {type(error).__name__}: {str(error).splitlines()[0][:160]}")
        found.pop("flex attention (dense)", None)
    return found


def plan_of(lens: list[int], sms: int, ctas_per_sm: int) -> dict:
    """The plan the library makes for `lens` (numpy's copy of the device's): CTAs, most splits."""
    from asyncdsl.blocks.balanced_splits import SPLITS, SplitBudget, host_plan

    budget = SplitBudget.make(len(lens), KV_HEADS, ctas_per_sm * sms)
    splits = host_plan(lens, max(-(-n // PAGE) for n in lens) * PAGE, 64, budget.units)[SPLITS, :len(lens)]
    return {"CTAs": KV_HEADS * budget.slots, "most splits": int(splits.max()),
            "split sequences": int((splits > 1).sum())}


def measure(torch, lens: list[int], sweep: bool) -> dict:
    import asyncdsl.kernels as K
    from asyncdsl.kernels.paged_decode_config import CTAS_PER_SM

    q, k, v, table, seq_lens = paged_inputs(torch, lens)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kv_bytes = 2 * sum(lens) * KV_HEADS * D * k.element_size()
    source = torch.randn(kv_bytes // 4, device="cuda")
    target = torch.empty_like(source)
    k_dense, v_dense = dense(k, table), dense(v, table)
    contenders = {"device copy": lambda: target.copy_(source),
                  "asyncdsl": lambda: K.paged_decode_attention(q, k, v, table, seq_lens)}
    if sweep:
        k64, table64 = repaged(torch, k_dense, 64)
        v64, _ = repaged(torch, v_dense, 64)
        contenders["asyncdsl pages of 64"] = lambda: K.paged_decode_attention(q, k64, v64, table64, seq_lens)
        contenders["asyncdsl pages of 64, two CTAs a multiprocessor"] = (
            lambda: K.paged_decode_attention(q, k64, v64, table64, seq_lens, ctas_per_sm=2))
        for ctas in (1, 2, 4):  # the CTA budget of the balanced splits
            contenders[f"asyncdsl, a budget of {ctas} CTA{'s' if ctas > 1 else ''} a multiprocessor"] = (
                lambda ctas=ctas: K.paged_decode_attention(q, k, v, table, seq_lens, ctas_per_sm=ctas))
        contenders["asyncdsl unsplit"] = lambda: K.paged_decode_attention(q, k, v, table, seq_lens, splits=1)
        for ctas in (1, 2):  # pages gathered by the producer's threads rather than a TMA copy each
            name = f"asyncdsl, cp.async gathers, {ctas} CTA{'s' if ctas > 1 else ''} a multiprocessor"
            contenders[name] = (
                lambda ctas=ctas: K.paged_decode_attention(q, k, v, table, seq_lens, ctas_per_sm=ctas,
                                                           gather="cp_async"))
    contenders.update(peers(torch, q, k_dense, v_dense, lens))
    outputs = {name: fn() for name, fn in contenders.items() if name != "device copy"}
    for name in list(outputs):
        outputs[name] = outputs[name].reshape(q.shape)
    torch.cuda.synchronize()
    ms = rounds_of_gpu_ms(contenders, rounds=5)
    copy_tbps = 2 * kv_bytes / ms["device copy"] / 1e9
    tbps = {name: kv_bytes / t / 1e9 for name, t in ms.items() if name != "device copy"}
    sample = sorted({0, len(lens) - 1, int(np.argmax(lens))})[:SAMPLED]
    errors = {}
    for name, out in outputs.items():
        errors[name] = max(float((out[b].double() - float64_rows(q, k_dense, v_dense, lens, b)).abs().max())
                           for b in sample)
    return {"KV read (TB/s)": tbps, "device copy (TB/s)": copy_tbps,
            "asyncdsl / device copy": tbps["asyncdsl"] / copy_tbps,
            "asyncdsl / best peer": tbps["asyncdsl"] / max(v for n, v in tbps.items() if "asyncdsl" not in n),
            "max abs error vs float64 (sampled sequences)": errors,
            "plan": {ctas: plan_of(lens, sms, ctas) for ctas in sorted({1, 2, 4, CTAS_PER_SM})},
            "default CTAs a multiprocessor": CTAS_PER_SM,
            "KV MiB": kv_bytes / 2**20}


def main(argv: list[str]) -> None:
    import torch

    sweep = "--sweep" in argv
    payload: dict = {"unit": "TB/s"}
    details = {}
    for name, lens in (*ROWS, ("B32 Zipf 128-32k", zipf_lengths())):
        row = details[name] = measure(torch, lens, sweep)
        payload[f"{name} (TB/s)"] = {**row["KV read (TB/s)"], "device copy": row["device copy (TB/s)"]}
        errors = row["max abs error vs float64 (sampled sequences)"]
        print(name, {k: round(v, 3) for k, v in row["KV read (TB/s)"].items()},
              f"copy={row['device copy (TB/s)']:.3f}", f"ratio to copy={row['asyncdsl / device copy']:.3f}",
              f"plan={row['plan'][row['default CTAs a multiprocessor']]}",
              {k: f"{v:.1e}" for k, v in errors.items()}, flush=True)
    payload["details"] = details
    path = write_result("paged_decode", payload)
    plot_result(path)


if __name__ == "__main__":
    main(sys.argv[1:])
