"""Attention forward on the tensor cores (FlashAttention's online softmax), bf16 in and out.

o = softmax(q @ kᵀ / √D) @ v for q, k, v, o of shape (B, H, S, D), optionally causal.  Each CTA
owns 2·BQ query rows of one (batch, head) and has three warpgroups:

- warpgroup 2, the producer, loads the CTA's q rows once, then streams (BK, D) blocks of k and
  v by TMA through a ring of STAGES slots; a slot is refilled once both consumers released it;
- warpgroups 0 and 1, the consumers, each own BQ query rows.  For every k/v block: s = q @ kᵀ
  (one wgmma, k read K-major through `k_s.T`), then the online softmax in registers (a running
  row maximum m and sum l; the old output scaled by 2^(m_old - m_new)), then o += p @ v with p
  straight from registers as wgmma's A operand (bf16, the accumulator's own layout);
- at the end each consumer divides by l and stores its rows through shared memory by TMA.

Exponentials are base 2 with log2(e)/√D folded into one scale, `ex2.approx` on the GPU (the
interpreter's exact exp2 differs in the last bits).  Causal attention stops at the diagonal
block and masks inside it.

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


@ad.kernel(grid=lambda q, k, v, o, BQ, **_: (q.shape[2] // (2 * BQ), q.shape[0] * q.shape[1]), block=384)
def attention(q, k, v, o, BQ: ad.constexpr = 64, BK: ad.constexpr = 128, STAGES: ad.constexpr = 2,
              CAUSAL: ad.constexpr = False):
    _, H, S, D = q.shape
    if S % (2 * BQ) or S % BK:
        raise ad.TraceError(f"the sequence length {S} must be a multiple of {2 * BQ} (query rows of a CTA) and of "
                            f"{BK} (keys of a block)")
    scale = LOG2E / math.sqrt(D)
    head = ad.program_id(1)
    b, h = head // H, head % H
    first_row = ad.program_id(0) * (2 * BQ)
    # Causal: the key blocks up to and including the CTA's last query row.
    blocks = (first_row + 2 * BQ + BK - 1) // BK if CAUSAL else S // BK

    q_s = ad.smem((2, BQ, D), q.dtype, **tensor_core_layout(BQ))  # [consumer]
    k_ring = ad.smem((STAGES, BK, D), k.dtype, **tensor_core_layout(BK))
    v_ring = ad.smem((STAGES, BK, D), v.dtype, **tensor_core_layout(BK))
    o_s = ad.smem((2, BQ, D), o.dtype, **tensor_core_layout(BQ))
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
                v_empty[slot].wait()
            ad.async_copy(k.at[b, h, ad.ds(j * BK, BK), :], k_ring.at[slot], barrier=k_full[slot])
            ad.async_copy(v.at[b, h, ad.ds(j * BK, BK), :], v_ring.at[slot], barrier=v_full[slot])

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        s = ad.registers((BQ, BK), ad.float32, layout=ad.WGMMA)
        acc = ad.registers((BQ, D), ad.float32, layout=ad.WGMMA)
        row_max = ad.registers((BQ,), ad.float32, layout=ad.WGMMA_ROW)  # the paper's m
        row_sum = ad.registers((BQ,), ad.float32, layout=ad.WGMMA_ROW)  # and l
        acc[...] = ad.zeros((BQ, D), ad.float32)
        row_max[...] = ad.full((BQ,), -math.inf, ad.float32)
        row_sum[...] = ad.zeros((BQ,), ad.float32)
        rows = first_row + me * BQ + ad.iota((BQ, BK), ad.int32, 0)
        q_landed.wait()
        for j in ad.range(blocks):
            slot = j % STAGES
            k_full[slot].wait()
            ad.wgmma(s, q_s.at[me], k_ring.at[slot].T, accumulate=False)
            ad.wgmma_wait(0)
            k_empty[slot].arrive(sync=False)
            x = s[...] * scale
            if CAUSAL:
                columns = j * BK + ad.iota((BQ, BK), ad.int32, 1)
                x = ad.where(columns > rows, -math.inf, x)
            new_max = ad.maximum(row_max[...], x.max(axis=1))
            alpha = ad.exp2(row_max[...] - new_max, approx=True)
            p = ad.exp2(x - new_max[:, None], approx=True)
            row_sum[...] = row_sum[...] * alpha + p.sum(axis=1)
            acc[...] = acc[...] * alpha[:, None]
            row_max[...] = new_max
            v_full[slot].wait()
            ad.wgmma(acc, p.astype(v.dtype), v_ring.at[slot])
            ad.wgmma_wait(0)
            v_empty[slot].arrive(sync=False)
        o_s.at[me][...] = (acc[...] / row_sum[...][:, None]).astype(o.dtype)
        ad.fence_async_smem()
        ad.async_copy(o_s.at[me], o.at[b, h, ad.ds(first_row + me * BQ, BQ), :])
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
