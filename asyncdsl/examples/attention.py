"""Attention forward on the tensor cores (FlashAttention's online softmax), bf16 in and out.

o = softmax(q @ kᵀ / √D) @ v, optionally causal, for q, o of shape (B, H, S, D) and k, v of
shape (B, H_KV, S_KV, D) (`LAYOUT="BHSD"`), or the same with S before H (`"BSHD"`: TMA addresses
either, nothing is transposed).  H_KV may divide H (grouped-query attention: query head h reads
k/v head h // (H / H_KV)); S and S_KV need not be multiples of the blocks (TMA fills rows past
the end with zeros, the keys there are masked on the last block only, rows past the end are not
stored); S_KV may differ from S when not causal.  `lse` (B, H, S) float32 receives each row's
log-sum-exp of the scaled scores (natural log), what a backward pass needs.

Each CTA owns 2·BQ query rows of one (batch, head): two consumer warpgroups (0 and 1) each own
BQ of them, and a producer warpgroup (2) loads q once, then streams k and v by TMA through a
ring of STAGES slots, a slot refilled once both consumers released it.  The producer keeps 40
registers a thread and hands the rest to the consumers (232 each, `setmaxnreg`).

For block j a consumer issues s = q @ k_jᵀ (one wgmma, k read K-major through `k_s.T`), then
o += p_{j-1} @ v_{j-1} (p straight from registers as wgmma's A operand); once s is done, the
online softmax of s (a running row maximum m and sum l) runs while that second wgmma does, and o
is scaled by 2^(m_old - m_new) after it.  At the end each consumer stores its rows' log-sum-exp,
scales its rows by 1/l and stores them by TMA through its q buffer.

Blocks of 192 keys at D = 64, 128 up to D = 128, 64 above (the scores of a block and the output
share the registers).  Exponentials are base 2 with log2(e)/√D folded into one scale applied by
an fma, `ex2.approx` on the GPU (the interpreter's exact exp2 differs in the last bits).  Causal
attention stops at the diagonal: only the blocks that cross it are masked, and the CTAs with the
most blocks start first.

Measured on the H200 (`benchmarks/attention.py`, cuDNN in the same run): at or above cuDNN at
D = 64, 128 and 256, causal or not.  A warpgroup barrier before the wait for p @ v keeps ptxas
from hoisting that wait above the exponentials (+10 % at D = 128, docs/hardware.md §14.6).
The register hand-over only holds when the kernel is compiled as a whole program: through
nvJitLink the consumers kept 168 registers and ran at half the rate (docs/hardware.md §14.7; the
runtime compiles such kernels with the driver's JIT).  Measured and slower, so not the default:
the consumers taking turns to issue (`TURNS=True`, `asyncdsl.turns`: 627 against 676 TFLOP/s at
D = 128 with three stages); blocks of 256 keys at D = 64 (421 against 475 for 192); q as wgmma's
register operand (measured before the register fix only); three stages (no gain at D = 64
or 128, run to run within 5 %).

    python -m asyncdsl.examples.attention    # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import contextlib
import math
import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.blocks.mma_operands import tensor_core_layout

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def _shape(q, k, LAYOUT):
    """(B, H, S, D) of q and (H_kv, S_kv) of k in either layout."""
    if LAYOUT not in LAYOUTS:
        raise ad.TraceError(f"LAYOUT must be one of {LAYOUTS}, got {LAYOUT!r}")
    for name, array in (("q", q), ("k", k)):
        if len(array.shape) != 4:
            raise ad.TraceError(
                f"{name} must have 4 dims ({', '.join(LAYOUT)}), got shape {tuple(array.shape)}")
    if LAYOUT == "BHSD":
        return q.shape, k.shape[1:3]
    (b, s, h, d), (_, s_kv, h_kv, _) = q.shape, k.shape
    return (b, h, s, d), (h_kv, s_kv)


def _grid(q, k, v, o, lse, BQ, LAYOUT, **_):
    (b, h, s, _), _ = _shape(q, k, LAYOUT)
    return (ad.cdiv(s, 2 * BQ), b * h)


LAYOUTS = ("BHSD", "BSHD")


@ad.kernel(grid=_grid, block=384, profile_events=1536)
def attention(q, k, v, o, lse, BQ: ad.constexpr = 64, BK: ad.constexpr = None, STAGES: ad.constexpr = 2,
              CAUSAL: ad.constexpr = False, LAYOUT: ad.constexpr = "BHSD", TURNS: ad.constexpr = False):
    """o = softmax(q kᵀ / √D) v and the rows' log-sum-exp (see the module's docstring)."""
    (B, H, S, D), (H_KV, S_KV) = _shape(q, k, LAYOUT)
    if BK is None:
        BK = {64: 192, 128: 128}.get(D, 64)  # the scores of a block and the output share the registers
    elif not isinstance(BK, int) or BK <= 0 or BK % 16:
        raise ad.TraceError("BK, the keys of a block, must be a positive multiple of 16 (p @ v takes them "
                            f"16 at a time), got {BK!r}")
    expected = {"q": q.shape, "k": k.shape, "v": k.shape, "o": q.shape, "lse": (B, H, S)}
    for name, array in (("v", v), ("o", o), ("lse", lse)):
        if array.shape != expected[name]:
            raise ad.TraceError(
                f"{name} has shape {array.shape}, expected {expected[name]} ({LAYOUT} layout)")
    if D % 64 or not 64 <= D <= 256:
        raise ad.TraceError(f"head dim {D}: this kernel takes 64, 128, 192 or 256 (columns of 64 elements, "
                            "one 128-byte swizzled row each; a wgmma's N is at most 256)")
    if H % H_KV:
        raise ad.TraceError(f"{H} query heads cannot be grouped over {H_KV} key/value heads (not a divisor)")
    if CAUSAL and S_KV != S:
        raise ad.TraceError(
            f"causal attention takes as many keys as queries, got {S_KV} keys for {S} queries")
    scale = LOG2E / math.sqrt(D)
    head = ad.program_id(1)
    b, h = head // H, head % H
    h_kv = h // (H // H_KV)  # grouped-query attention: H / H_KV query heads share a k, v head

    def rows(x, head, start, count):
        """Rows start.. of one head of x, (count, D), in the kernel's layout."""
        if LAYOUT == "BHSD":
            return x.at[b, head, ad.ds(start, count), :]
        return x.at[b, ad.ds(start, count), head, :]

    # Causal CTAs differ in work (the later rows see more keys): the longest start first.
    first_row = ((ad.cdiv(S, 2 * BQ) - 1 - ad.program_id(0)) if CAUSAL else ad.program_id(0)) * (2 * BQ)
    if CAUSAL:
        # The key blocks up to the CTA's last query row; those from `first_masked` on cross the
        # diagonal and are masked (which also masks keys past S for the rows that exist).
        blocks = ((first_row + 2 * BQ + BK - 1) // BK).min(ad.cdiv(S, BK))
        first_masked = first_row // BK
    else:
        # Only a last block that runs past S_KV is masked.
        blocks = ad.cdiv(S_KV, BK)
        ragged = S_KV % BK != 0

    q_s = ad.smem((2, BQ, D), q.dtype, **tensor_core_layout(BQ))  # [consumer]; the output goes out through it
    k_ring = ad.smem((STAGES, BK, D), k.dtype, **tensor_core_layout(BK))
    v_ring = ad.smem((STAGES, BK, D), v.dtype, **tensor_core_layout(BK))
    q_landed = ad.barrier(arrival_count=2)
    k_full, v_full = ad.barrier(num=STAGES), ad.barrier(num=STAGES)
    k_empty, v_empty = ad.barrier(arrival_count=2, num=STAGES), ad.barrier(arrival_count=2, num=STAGES)
    issue_order = ad.turns((0, 1)) if TURNS else None  # the consumers' turns to issue (`TURNS`)

    with ad.warpgroup_role(2, registers=40):
        for half in range(2):
            ad.async_copy(rows(q, h, first_row + half * BQ, BQ), q_s.at[half], barrier=q_landed)
        for j in ad.range(blocks):
            slot = j % STAGES
            with ad.region("wait k slot"), ad.when(j >= STAGES):
                k_empty[slot].wait()
            ad.async_copy(rows(k, h_kv, j * BK, BK), k_ring.at[slot], barrier=k_full[slot])
            with ad.region("wait v slot"), ad.when(j >= STAGES):
                v_empty[slot].wait()
            ad.async_copy(rows(v, h_kv, j * BK, BK), v_ring.at[slot], barrier=v_full[slot])

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        my_first_row = first_row + me * BQ
        s = ad.registers((BQ, BK), ad.float32, layout=ad.WGMMA)  # q @ kᵀ of one block
        p = ad.registers((BQ, BK), v.dtype, layout=ad.WGMMA)  # its probabilities, A of p @ v
        acc = ad.registers((BQ, D), ad.float32, layout=ad.WGMMA)
        row_max = ad.registers((BQ,), ad.float32, layout=ad.WGMMA_ROW)  # the paper's m
        row_sum = ad.registers((BQ,), ad.float32, layout=ad.WGMMA_ROW)  # and l
        acc[...] = ad.zeros((BQ, D), ad.float32)
        row_max[...] = ad.full((BQ,), -math.inf, ad.float32)
        row_sum[...] = ad.zeros((BQ,), ad.float32)

        def turn():
            """Taking turns to issue the wgmmas (`TURNS`): one consumer's run while the other's
            softmax does.  Measured slower here (see the module's docstring)."""
            return issue_order.turn() if TURNS else contextlib.nullcontext()

        def scores(j):
            """Issue s = q @ k_jᵀ (k read K-major through the transposed view)."""
            with ad.region("wait k"):
                k_full[j % STAGES].wait()
            ad.wgmma(s, q_s.at[me], k_ring.at[j % STAGES].T, accumulate=False)

        def softmax(j, masked: bool):
            """The online softmax of block j's scores: the new row maximum (of the unscaled
            scores) and sum; returns the probabilities (bf16) and the factor the output so far
            must be scaled by.  2^(scale·x - scale·max) is one fma and one ex2 an element."""
            x = s[...]
            if masked:
                keys = j * BK + ad.iota((BQ, BK), ad.int32, 1)
                if CAUSAL:
                    hidden = keys > my_first_row + ad.iota((BQ, BK), ad.int32, 0)
                else:
                    hidden = keys >= S_KV
                x = ad.where(hidden, -math.inf, x)
            new_max = ad.maximum(row_max[...], x.max(axis=1))
            alpha = ad.exp2((row_max[...] - new_max) * scale, approx=True)
            probabilities = ad.exp2(ad.fma(x, scale, (new_max * -scale)[:, None]), approx=True)
            row_sum[...] = row_sum[...] * alpha + probabilities.sum(axis=1)
            row_max[...] = new_max
            return probabilities.astype(v.dtype), alpha

        def step(j, masked: bool):
            """Block j while block j - 1's p @ v runs: issue s_j, then o += p_{j-1} @ v_{j-1};
            the softmax of s_j overlaps that wgmma, whose end it waits for to scale o."""
            with ad.region("block"):
                with turn():
                    with ad.region("issue s"):
                        scores(j)
                    with ad.region("issue pv"):
                        v_full[(j - 1) % STAGES].wait()
                        ad.wgmma(acc, p[...], v_ring.at[(j - 1) % STAGES])
                with ad.region("wait s"):
                    ad.wgmma_wait(1)  # s_j is done, p_{j-1} @ v_{j-1} may still run
                k_empty[j % STAGES].arrive(sync=False)
                with ad.region("softmax"):
                    probabilities, alpha = softmax(j, masked)
                with ad.region("wait pv"):
                    # ptxas moves a wgmma wait up to where its scheduler likes it, here above
                    # most exponentials, which then no longer overlap p @ v; it moves nothing
                    # across a barrier (SASS: the WARPGROUP.DEPBAR now follows the last MUFU.EX2;
                    # docs/hardware.md §14.6).
                    ad.warpgroup_barrier()
                    ad.wgmma_wait(0)
                v_empty[(j - 1) % STAGES].arrive(sync=False)
                with ad.region("rescale"):
                    p[...] = probabilities
                    acc[...] = acc[...] * alpha[:, None]

        q_landed.wait()
        with turn():
            scores(0)
        ad.wgmma_wait(0)
        k_empty[0].arrive(sync=False)
        if CAUSAL:
            # Block 0 crosses the diagonal in the first CTAs (it was masked above): start after it.
            p[...], _ = softmax(0, masked=True)
            for j in ad.range(1, first_masked):
                step(j, masked=False)
            for j in ad.range(first_masked.max(1), blocks):
                step(j, masked=True)
        else:
            p[...], _ = softmax(0, masked=ragged and blocks == 1)
            for j in ad.range(1, blocks - ragged):
                step(j, masked=False)
            if ragged and blocks > 1:
                step(blocks - 1, masked=True)
        last = (blocks - 1) % STAGES
        v_full[last].wait()
        with turn():
            ad.wgmma(acc, p[...], v_ring.at[last])
        ad.wgmma_wait(0)
        v_empty[last].arrive(sync=False)
        # The natural log of each row's sum of exponentials, for a backward pass.
        lse_rows = (row_max[...] * (scale * LN2) + ad.log2(row_sum[...]) * LN2)
        ad.store(lse.at[b, h, ad.ds(my_first_row, BQ)], lse_rows)
        q_s.at[me][...] = (acc[...] * (1.0 / row_sum[...])[:, None]).astype(o.dtype)  # a division a row
        ad.fence_async_smem()
        ad.async_copy(q_s.at[me], rows(o, h, my_first_row, BQ))
        ad.await_async_copy(0)


def reference(q, k, v, causal: bool, layout: str = "BHSD") -> tuple[np.ndarray, np.ndarray]:
    """Attention in float64 from the bf16 inputs: the output (in `layout`) and the log-sum-exp
    of each row's scores, (B, H, S)."""
    to_bhsd = (lambda x: x) if layout == "BHSD" else (lambda x: np.swapaxes(x, 1, 2))
    q64, k64, v64 = (to_bhsd(x).astype(np.float64) for x in (q, k, v))
    group = q64.shape[1] // k64.shape[1]  # query heads per k, v head
    k64, v64 = np.repeat(k64, group, axis=1), np.repeat(v64, group, axis=1)
    logits = q64 @ np.swapaxes(k64, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = q64.shape[2]
        logits = np.where(np.triu(np.ones((s, s), bool), 1), -np.inf, logits)
    top = logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits - top)
    total = weights.sum(axis=-1, keepdims=True)
    return to_bhsd((weights / total) @ v64), (top + np.log(total))[..., 0]


# ex2.approx on the GPU, exact exp2 in the interpreter: probabilities may round to neighbouring
# bf16 values, so outputs (of magnitude below 1) agree to a few bf16 ulps.
TOLERANCE = (2e-2, 0.0)


def example_inputs(specs, rng) -> list[np.ndarray]:
    """Random normal q, k, v (finite: attention of random bit patterns is mostly NaN); o, lse NaN."""
    return [*(rng.standard_normal(spec.shape).astype(ml_dtypes.bfloat16) for spec in specs[:3]),
            np.full(specs[3].shape, np.nan, ml_dtypes.bfloat16), np.full(specs[4].shape, np.nan, np.float32)]


EXAMPLE_ARGS = {
    "attention": (
        (*(ad.ArraySpec((1, 2, 256, 64), ad.bfloat16) for _ in range(4)),
         ad.ArraySpec((1, 2, 256), ad.float32)),
        {"CAUSAL": True},
    ),
}


def main(q_shape=(1, 200, 4, 64), kv_heads: int = 2, causal: bool = True, layout: str = "BSHD") -> int:
    """Grouped-query attention on a sequence that is not a multiple of the blocks, in `layout`."""
    from asyncdsl.runtime import has_gpu

    rng = np.random.default_rng(0)
    kv_shape = list(q_shape)
    kv_shape[layout.index("H")] = kv_heads
    q = rng.standard_normal(q_shape).astype(ml_dtypes.bfloat16)
    k, v = (rng.standard_normal(kv_shape).astype(ml_dtypes.bfloat16) for _ in range(2))
    b, s, h = (q_shape[layout.index(axis)] for axis in "BSH")
    o, lse = np.full(q_shape, np.nan, ml_dtypes.bfloat16), np.full((b, h, s), np.nan, np.float32)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        o_d, lse_d = to_device(o), to_device(lse)
        attention(to_device(q), to_device(k), to_device(v), o_d, lse_d, CAUSAL=causal, LAYOUT=layout)
        o, lse, where = to_host(o_d), to_host(lse_d), "GPU"
    else:
        attention.interpret(q, k, v, o, lse, CAUSAL=causal, LAYOUT=layout)
        where = "interpreter"
    expected_o, expected_lse = reference(q, k, v, causal, layout)
    error = np.abs(o.astype(np.float64) - expected_o).max()
    lse_error = np.abs(lse - expected_lse).max()
    ok = error <= 2e-2 and lse_error <= 1e-3  # bf16 p and o: a few bf16 ulps of values below 1
    print(f"attention q {q_shape} ({layout}), {kv_heads} k/v heads, causal={causal} on the {where}: max "
          f"error {error:.2e}, log-sum-exp {lse_error:.2e} ({'ok' if ok else 'TOO LARGE'}; "
          f"{(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
