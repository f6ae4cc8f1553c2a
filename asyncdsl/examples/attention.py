"""Attention forward from the library's blocks, the plain way: o = softmax(q kᵀ / √D) v.

A CTA owns 64 query rows of one (batch, head).  Its second warpgroup is the producer: it loads
the rows of q once, then the keys and values of the sequence 64 at a time into a ring of two
slots (`asyncdsl.blocks.attention_loads`).  Its first warpgroup computes, block by block:

    s = q @ kᵀ                       a wgmma from shared memory (k read K-major: `keys(slot)`)
    p, α = online softmax of s       running row maximum m and sum l (`blocks.online_softmax`)
    o = α·o + p @ v                  a wgmma with p straight from registers

and at the end divides o by l and writes the rows' log-sum-exp, ln l + m/√D, that a backward
pass needs.  Which key blocks a query tile walks, and which keys it must not see (after its own
row when causal, past the end of the sequence), is `asyncdsl.blocks.attention_tiles`.

The library's kernel (`asyncdsl.kernels.attention`, what `o, lse = asyncdsl.kernels.attention(q,
k, v, causal=True)` runs) is built from the same blocks and adds what makes it fast: two
consumer warpgroups of 64 rows sharing each key block, the softmax of block j overlapping the
p @ v of block j - 1, only the blocks crossing the diagonal masked, the producer's registers
handed to the consumers (`setmaxnreg`), wider key blocks, both layouts and grouped k/v heads.

    python -m asyncdsl.examples.attention    # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import math
import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.blocks.attention_loads import AttentionLoads
from asyncdsl.blocks.attention_tiles import QueryTile
from asyncdsl.blocks.online_softmax import OnlineSoftmax
from asyncdsl.kernels.attention import reference

LOG2E = 1.4426950408889634
ROWS = 64  # query rows of a CTA, and keys of a block


@ad.kernel(grid=lambda q, k, v, o, lse, **_: (ad.cdiv(q.shape[2], ROWS), q.shape[0] * q.shape[1]), block=256)
def attention(q, k, v, o, lse, CAUSAL: ad.constexpr = False):
    """o and lse of bf16 q, k, v of shape (B, H, S, D), D a multiple of 64 up to 256."""
    B, H, S, D = q.shape
    b, h = ad.program_id(1) // H, ad.program_id(1) % H
    tile = QueryTile(S, S_KV=k.shape[2], rows=ROWS, BK=ROWS, causal=CAUSAL)
    loads = AttentionLoads(q.dtype, ROWS, 1, ROWS, k.dtype, v.dtype, D, stages=2)

    with ad.warpgroup_role(1):  # the producer
        loads.load_query(0, q.at[b, h, ad.ds(tile.first_row, ROWS), :])
        for j in ad.range(tile.blocks):
            loads.load(j, lambda i: k.at[b, h, ad.ds(i * ROWS, ROWS), :],
                       lambda i: v.at[b, h, ad.ds(i * ROWS, ROWS), :])

    with ad.warpgroup_role(0):  # the consumer
        s = ad.registers((ROWS, ROWS), ad.float32, layout=ad.WGMMA)  # q @ kᵀ of one block
        p = ad.registers((ROWS, ROWS), v.dtype, layout=ad.WGMMA)  # its probabilities
        acc = ad.registers((ROWS, D), ad.float32, layout=ad.WGMMA)  # o, not yet divided by l
        state = OnlineSoftmax(ROWS, scale=LOG2E / math.sqrt(D))  # 2^(scale·s) = e^(s / √D)
        acc[...] = ad.zeros((ROWS, D), ad.float32)
        state.start()
        loads.query_landed.wait()
        for j in ad.range(tile.blocks):
            slot = loads.slot(j)
            loads.wait_keys(slot)
            ad.wgmma(s, loads.q.at[0], loads.keys(slot), accumulate=False)
            ad.wgmma_wait(0)
            loads.release_keys(slot)  # the producer may load block j + 2's keys
            probabilities, alpha = state.update(tile.mask(s[...], j, tile.first_row), v.dtype)
            p[...] = probabilities
            acc[...] = acc[...] * alpha[:, None]  # what was summed under the old maximum
            loads.wait_values(slot)
            ad.wgmma(acc, p[...], loads.values(slot))
            ad.wgmma_wait(0)
            loads.release_values(slot)
        ad.store(lse.at[b, h, ad.ds(tile.first_row, ROWS)], state.log_sum_exp())
        loads.q.at[0][...] = state.normalize(acc[...]).astype(o.dtype)  # o leaves through q's buffer
        ad.fence_async_smem()
        ad.async_copy(loads.q.at[0], o.at[b, h, ad.ds(tile.first_row, ROWS), :])
        ad.await_async_copy(0)


# ex2.approx on the GPU, exact exp2 in the interpreter: probabilities may round to neighbouring
# bf16 values, so outputs (of magnitude below 1) agree to a few bf16 ulps.
TOLERANCE = (2e-2, 0.0)


def example_inputs(specs, rng) -> list[np.ndarray]:
    """Random normal q, k, v (finite: attention of random bit patterns is mostly NaN); o, lse NaN."""
    return [*(rng.standard_normal(spec.shape).astype(ml_dtypes.bfloat16) for spec in specs[:3]),
            np.full(specs[3].shape, np.nan, ml_dtypes.bfloat16), np.full(specs[4].shape, np.nan, np.float32)]


EXAMPLE_ARGS = {"attention": ((*(ad.ArraySpec((1, 2, 200, 64), ad.bfloat16) for _ in range(4)),
                               ad.ArraySpec((1, 2, 200), ad.float32)), {"CAUSAL": True})}


def main(shape=(1, 1, 200, 64), causal: bool = True) -> int:
    """Causal attention over a sequence that is not a multiple of the blocks, against float64
    attention and the library's kernel."""
    import asyncdsl.kernels as K
    from asyncdsl.runtime import has_gpu

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for _ in range(3))
    o, lse = np.full(shape, np.nan, ml_dtypes.bfloat16), np.full(shape[:3], np.nan, np.float32)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        o_d, lse_d = to_device(o), to_device(lse)
        attention(to_device(q), to_device(k), to_device(v), o_d, lse_d, CAUSAL=causal)
        o, lse, where = to_host(o_d), to_host(lse_d), "GPU"
        library_o, _ = (to_host(x) for x in K.attention(*(to_device(x) for x in (q, k, v)), causal=causal))
    else:
        attention.interpret(q, k, v, o, lse, CAUSAL=causal)
        library_o, _ = K.attention(q, k, v, causal=causal)
        where = "interpreter"
    expected_o, expected_lse = reference(q, k, v, causal)
    error = np.abs(o.astype(np.float64) - expected_o).max()
    lse_error = np.abs(lse - expected_lse).max()
    library_error = np.abs(library_o.astype(np.float64) - expected_o).max()
    ok = max(error, library_error) <= 2e-2 and lse_error <= 1e-3  # a few bf16 ulps of values below 1
    print(f"attention {shape}, causal={causal} on the {where}: max error {error:.2e} (the library's kernel "
          f"{library_error:.2e}), log-sum-exp {lse_error:.2e} ({'ok' if ok else 'TOO LARGE'}; "
          f"{(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
