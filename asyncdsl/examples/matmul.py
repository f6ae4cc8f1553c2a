"""bf16 matrix multiply on the tensor cores: c = a @ b with float32 accumulation, bf16 out.

A persistent, warp-specialized kernel.  CTAS CTAs (about one per SM) walk the (BM, BN) tiles of
c with a stride.  Each CTA has three warpgroups:

- warpgroup 2, the producer, streams (BM, BK) slices of a and (BK, BN) slices of b into a ring of
  STAGES shared-memory slots by TMA, laid out as the tensor cores read them (`TileTransform((8,
  64))`, 128-byte swizzle); before refilling a slot it waits until both consumers released it;
- warpgroups 0 and 1, the consumers, each own BM/2 rows of the tile: for every slot they wait
  until it landed, issue one `wgmma` over it (64 x BN x BK), and release the slot the *previous*
  wgmma read once `wgmma_wait(1)` says it is done, so one wgmma is always in flight;
- after a tile's last slot each consumer converts its accumulator to bf16, writes it to its own
  shared-memory buffer and stores it by TMA, while the producer is already loading the next
  tile's slices.

Tiles past the edges of a, b and c are handled by TMA: loads zero-fill past the end (so ragged
K adds zeros), stores skip it.

    python -m asyncdsl.examples.matmul      # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl import TileTransform

TENSOR_CORE_LAYOUT = dict(transforms=TileTransform((8, 64)), swizzle=128)  # 64 bf16: one 128-byte row


@ad.kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384)
def matmul(a, b, c, CTAS: ad.constexpr, BM: ad.constexpr = 128, BN: ad.constexpr = 256, BK: ad.constexpr = 64,
           STAGES: ad.constexpr = 3, EPILOGUE: ad.constexpr = "tma", SNAKE: ad.constexpr = 0):
    M, K = a.shape
    N = b.shape[1]
    half = BM // 2
    m_tiles, n_tiles = ad.cdiv(M, BM), ad.cdiv(N, BN)
    tiles = m_tiles * n_tiles
    k_steps = ad.cdiv(K, BK)
    cta = ad.program_id(0)
    mine = (tiles - cta + CTAS - 1) // CTAS  # tiles cta, cta + CTAS, ...

    a_ring = ad.smem((STAGES, 2, half, BK), a.dtype, **TENSOR_CORE_LAYOUT)  # [slot][consumer]
    b_ring = ad.smem((STAGES, BK, BN), b.dtype, **TENSOR_CORE_LAYOUT)
    if EPILOGUE == "tma":  # c through shared memory and TMA stores; else stored from registers
        c_out = ad.smem((2, half, BN), c.dtype, **TENSOR_CORE_LAYOUT)  # [consumer]
    elif EPILOGUE == "tma64":  # the same, 64 columns at a time through two slots per consumer
        c_out = ad.smem((2, 2, half, 64), c.dtype, **TENSOR_CORE_LAYOUT)  # [consumer][slot]
    full = ad.barrier(arrival_count=3, num=STAGES)  # the copies of the two a halves and of b
    empty = ad.barrier(arrival_count=2, num=STAGES)  # both consumers released the slot
    acc = ad.registers((half, BN), ad.float32, layout=ad.WGMMA)  # a consumer's part of the tile
    role = ad.warpgroup_idx()

    def origin(t):
        m, n = tile_position(cta + t * CTAS, m_tiles, n_tiles, SNAKE)
        return m * BM, n * BN

    with ad.when(role == 2):  # the producer
        for t in ad.range(mine):
            row, col = origin(t)
            for kk in ad.range(k_steps):
                step = t * k_steps + kk
                slot = step % STAGES
                with ad.when(step >= STAGES):
                    empty[slot].wait()
                for h in range(2):
                    ad.async_copy(a.at[ad.ds(row + h * half, half), ad.ds(kk * BK, BK)], a_ring.at[slot, h],
                                  barrier=full[slot])
                ad.async_copy(b.at[ad.ds(kk * BK, BK), ad.ds(col, BN)], b_ring.at[slot], barrier=full[slot])

    with ad.when(role < 2):  # the consumers
        for t in ad.range(mine):
            row, col = origin(t)
            for kk in ad.range(k_steps):
                step = t * k_steps + kk
                slot = step % STAGES
                full[slot].wait()
                ad.wgmma(acc, a_ring.at[slot, role], b_ring.at[slot], accumulate=kk > 0)
                ad.wgmma_wait(1)  # the previous step's wgmma is done: its slot can be refilled
                with ad.when(kk > 0):
                    empty[(step - 1) % STAGES].arrive()
            ad.wgmma_wait(0)
            empty[(t * k_steps + k_steps - 1) % STAGES].arrive()
            mine_of_c = c.at[ad.ds(row + role * half, half), ad.ds(col, BN)]
            if EPILOGUE == "tma":
                ad.await_async_copy(0, read_only=True)  # the previous tile's store has read c_out
                c_out.at[role][...] = acc[...].astype(c.dtype)
                ad.fence_async_smem()
                ad.async_copy(c_out.at[role], mine_of_c)
            elif EPILOGUE == "tma64":
                for j in range(BN // 64):
                    ad.await_async_copy(1, read_only=True)  # the store two slices ago has read this slot
                    c_out.at[role, j % 2][...] = acc[:, j * 64:(j + 1) * 64].astype(c.dtype)
                    ad.fence_async_smem()
                    ad.async_copy(c_out.at[role, j % 2],
                                  c.at[ad.ds(row + role * half, half), ad.ds(col + j * 64, 64)])
            else:
                ad.store(mine_of_c, acc[...].astype(c.dtype))
        if EPILOGUE != "direct":
            ad.await_async_copy(0)


def tile_position(tile, m_tiles: int, n_tiles: int, width: int):
    """Where tile number `tile` lies, (m, n).  Row by row when `width` is 0 (or does not divide
    the rows of tiles); else a "planar snake": bands of `width` tile rows walked column by column,
    down each column of the band, every other band backwards, so the CTAs running at once work
    on a compact patch of c and share their slices of a and b in L2."""
    if not width or m_tiles % width:
        return tile // n_tiles, tile % n_tiles
    band, within = tile // (width * n_tiles), tile % (width * n_tiles)
    column = within // width
    backwards = band % 2
    return band * width + within % width, column + backwards * (n_tiles - 1 - 2 * column)


EXAMPLE_ARGS = {
    "matmul": (
        (ad.ArraySpec((256, 320), ad.bfloat16), ad.ArraySpec((320, 512), ad.bfloat16),
         ad.ArraySpec((256, 512), ad.bfloat16)),
        {"CTAS": 3},
    ),
}


def main(shape=(256, 512, 320)) -> int:
    from asyncdsl.runtime import has_gpu

    m, n, k = shape
    rng = np.random.default_rng(0)
    # Small integers: every sum is exact, so the result is a @ b whatever the order of addition.
    a = rng.integers(-3, 4, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import device_facts, to_device, to_host

        c_d = to_device(c)
        matmul(to_device(a), to_device(b), c_d, CTAS=device_facts(0).sm_count)
        c, where = to_host(c_d), "GPU"
    else:
        matmul.interpret(a, b, c, CTAS=3)
        where = "interpreter"
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(ml_dtypes.bfloat16)
    ok = np.array_equal(c.view(np.uint16), expected.view(np.uint16))
    print(f"matmul {m}x{n}x{k} on the {where}: {'exact' if ok else 'MISMATCH'} "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
