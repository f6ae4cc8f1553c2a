"""Attention forward on the tensor cores (FlashAttention's online softmax), bf16 in and out.

o = softmax(q @ kᵀ / √D) @ v for q, k, v, o of shape (B, H, S, D), optionally causal.  Each CTA
owns 2·BQ query rows of one (batch, head) and has three warpgroups:

- warpgroup 2, the producer, loads the CTA's q rows once, then streams (BK, D) blocks of k and
  v by TMA through a ring of STAGES slots; a slot is refilled once both consumers released it;
- warpgroups 0 and 1, the consumers, each own BQ query rows.  For block j: s = q @ k_jᵀ (one
  wgmma, k read K-major through `k_s.T`) is issued, then o += p_{j-1} @ v_{j-1} (p straight from
  registers as wgmma's A operand); once s is done, the online softmax of s (a running row maximum
  m and sum l) runs while that second wgmma does, and o is scaled by 2^(m_old - m_new) after it.
  Tried on the H200 and slower: the consumers taking turns to issue (a pair of mbarriers passing
  the turn: two thirds of the speed), and two score buffers so that a block's softmax overlaps
  the next block's scores (ptxas then needs more registers than the consumers have at 128 keys a
  block, and at 64 the smaller wgmmas lose more than the overlap gains);
- at the end each consumer divides by l and stores its rows by TMA through its q buffer.

Blocks of 128 keys up to D = 128, of 64 above (the scores and the output share the registers).
Exponentials are base 2 with log2(e)/√D folded into one scale applied by an fma, `ex2.approx` on
the GPU (the interpreter's exact exp2 differs in the last bits).  Causal attention stops at the diagonal: only
the blocks that cross it are masked, and the CTAs with the most blocks start first.

    python -m asyncdsl.examples.attention    # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import math
import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.examples.matmul import tensor_core_layout

LOG2E = 1.4426950408889634


def _grid(q, k, v, o, BQ, **_):
    return (q.shape[2] // (2 * BQ), q.shape[0] * q.shape[1])


@ad.kernel(grid=_grid, block=384)
def attention(q, k, v, o, BQ: ad.constexpr = 64, BK: ad.constexpr = None, STAGES: ad.constexpr = 2,
              CAUSAL: ad.constexpr = False):
    _, H, S, D = q.shape
    BK = BK or (128 if D <= 128 else 64)  # the scores of a block and the output share the registers
    if S % (2 * BQ) or S % BK:
        raise ad.TraceError(f"the sequence length {S} must be a multiple of {2 * BQ} (query rows of a CTA) and of "
                            f"{BK} (keys of a block)")
    scale = LOG2E / math.sqrt(D)
    head = ad.program_id(1)
    b, h = head // H, head % H
    row_blocks = S // (2 * BQ)
    # Causal CTAs differ in work (the later rows see more keys): the longest start first.
    first_row = ((row_blocks - 1 - ad.program_id(0)) if CAUSAL else ad.program_id(0)) * (2 * BQ)
    # Causal: the key blocks up to and including the CTA's last query row; those from
    # `first_masked` on cross the diagonal and are masked, the others are not.
    blocks = (first_row + 2 * BQ + BK - 1) // BK if CAUSAL else S // BK
    first_masked = blocks - ad.cdiv(2 * BQ, BK)

    q_s = ad.smem((2, BQ, D), q.dtype, **tensor_core_layout(BQ))  # [consumer]; the output goes out through it
    k_ring = ad.smem((STAGES, BK, D), k.dtype, **tensor_core_layout(BK))
    v_ring = ad.smem((STAGES, BK, D), v.dtype, **tensor_core_layout(BK))
    q_landed = ad.barrier(arrival_count=2)
    k_full, v_full = ad.barrier(num=STAGES), ad.barrier(num=STAGES)
    k_empty, v_empty = ad.barrier(arrival_count=2, num=STAGES), ad.barrier(arrival_count=2, num=STAGES)

    with ad.warpgroup_role(2, registers=40):
        for half in range(2):
            ad.async_copy(q.at[b, h, ad.ds(first_row + half * BQ, BQ), :], q_s.at[half], barrier=q_landed)
        for j in ad.range(blocks):
            slot = j % STAGES
            with ad.when(j >= STAGES):
                k_empty[slot].wait()
            ad.async_copy(k.at[b, h, ad.ds(j * BK, BK), :], k_ring.at[slot], barrier=k_full[slot])
            with ad.when(j >= STAGES):
                v_empty[slot].wait()
            ad.async_copy(v.at[b, h, ad.ds(j * BK, BK), :], v_ring.at[slot], barrier=v_full[slot])

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        s = ad.registers((BQ, BK), ad.float32, layout=ad.WGMMA)  # q @ kᵀ of one block
        p = ad.registers((BQ, BK), v.dtype, layout=ad.WGMMA)  # its probabilities, A of p @ v
        acc = ad.registers((BQ, D), ad.float32, layout=ad.WGMMA)
        row_max = ad.registers((BQ,), ad.float32, layout=ad.WGMMA_ROW)  # the paper's m
        row_sum = ad.registers((BQ,), ad.float32, layout=ad.WGMMA_ROW)  # and l
        acc[...] = ad.zeros((BQ, D), ad.float32)
        row_max[...] = ad.full((BQ,), -math.inf, ad.float32)
        row_sum[...] = ad.zeros((BQ,), ad.float32)

        def scores(j):
            """Issue s = q @ k_jᵀ (k read K-major through the transposed view)."""
            k_full[j % STAGES].wait()
            ad.wgmma(s, q_s.at[me], k_ring.at[j % STAGES].T, accumulate=False)

        def softmax(j, masked: bool):
            """The online softmax of block j's scores: the new row maximum (of the unscaled
            scores) and sum; returns the probabilities (bf16) and the factor the output so far
            must be scaled by.  2^(scale·x - scale·max) is one fma and one ex2 an element."""
            x = s[...]
            if masked:
                rows = first_row + me * BQ + ad.iota((BQ, BK), ad.int32, 0)
                x = ad.where(j * BK + ad.iota((BQ, BK), ad.int32, 1) > rows, -math.inf, x)
            new_max = ad.maximum(row_max[...], x.max(axis=1))
            alpha = ad.exp2((row_max[...] - new_max) * scale, approx=True)
            probabilities = ad.exp2(ad.fma(x, scale, (new_max * -scale)[:, None]), approx=True)
            row_sum[...] = row_sum[...] * alpha + probabilities.sum(axis=1)
            row_max[...] = new_max
            return probabilities.astype(v.dtype), alpha

        def step(j, masked: bool):
            """Block j while block j - 1's p @ v runs: issue s_j, then o += p_{j-1} @ v_{j-1};
            the softmax of s_j overlaps that wgmma, whose end it waits for to scale o."""
            scores(j)
            v_full[(j - 1) % STAGES].wait()
            ad.wgmma(acc, p[...], v_ring.at[(j - 1) % STAGES])
            ad.wgmma_wait(1)  # s_j is done, p_{j-1} @ v_{j-1} may still run
            k_empty[j % STAGES].arrive(sync=False)
            probabilities, alpha = softmax(j, masked)
            ad.wgmma_wait(0)
            v_empty[(j - 1) % STAGES].arrive(sync=False)
            p[...] = probabilities
            acc[...] = acc[...] * alpha[:, None]

        q_landed.wait()
        scores(0)
        ad.wgmma_wait(0)
        k_empty[0].arrive(sync=False)
        p[...], _ = softmax(0, masked=CAUSAL)
        if CAUSAL:
            # Block 0 crosses the diagonal in the first CTAs (it was masked above): start after it.
            for j in ad.range(1, first_masked):
                step(j, masked=False)
            for j in ad.range(first_masked.max(1), blocks):
                step(j, masked=True)
        else:
            for j in ad.range(1, blocks):
                step(j, masked=False)
        last = (blocks - 1) % STAGES
        v_full[last].wait()
        ad.wgmma(acc, p[...], v_ring.at[last])
        ad.wgmma_wait(0)
        v_empty[last].arrive(sync=False)
        q_s.at[me][...] = (acc[...] / row_sum[...][:, None]).astype(o.dtype)
        ad.fence_async_smem()
        ad.async_copy(q_s.at[me], o.at[b, h, ad.ds(first_row + me * BQ, BQ), :])
        ad.await_async_copy(0)


def reference(q, k, v, causal: bool) -> np.ndarray:
    """Attention in float64 from the bf16 inputs."""
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    logits = q64 @ np.swapaxes(k64, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = q.shape[2]
        logits = np.where(np.triu(np.ones((s, s), bool), 1), -np.inf, logits)
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v64


# ex2.approx on the GPU, exact exp2 in the interpreter: probabilities may round to neighbouring
# bf16 values, so outputs (of magnitude below 1) agree to a few bf16 ulps.
TOLERANCE = (2e-2, 0.0)


def example_inputs(specs, rng) -> list[np.ndarray]:
    """Random normal q, k, v (finite: attention of random bit patterns is mostly NaN); o NaN."""
    return [*(rng.standard_normal(spec.shape).astype(ml_dtypes.bfloat16) for spec in specs[:3]),
            np.full(specs[3].shape, np.nan, ml_dtypes.bfloat16)]


EXAMPLE_ARGS = {
    "attention": (
        tuple(ad.ArraySpec((1, 2, 256, 64), ad.bfloat16) for _ in range(4)),
        {"CAUSAL": True},
    ),
}


def main(shape=(1, 2, 256, 64), causal: bool = True) -> int:
    from asyncdsl.runtime import has_gpu

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for _ in range(3))
    o = np.full(shape, np.nan, ml_dtypes.bfloat16)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        o_d = to_device(o)
        attention(to_device(q), to_device(k), to_device(v), o_d, CAUSAL=causal)
        o, where = to_host(o_d), "GPU"
    else:
        attention.interpret(q, k, v, o, CAUSAL=causal)
        where = "interpreter"
    error = np.abs(o.astype(np.float64) - reference(q, k, v, causal)).max()
    ok = error <= 2e-2  # bf16 p and o: a few bf16 ulps of values below 1
    print(f"attention {shape} causal={causal} on the {where}: max error {error:.2e} "
          f"({'ok' if ok else 'TOO LARGE'}; {(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
