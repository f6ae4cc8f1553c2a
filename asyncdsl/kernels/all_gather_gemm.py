"""All-gather fused with a GEMM: c = concat(a of every device) @ b, on every device.

The tensor-parallel layer: each device holds a shard of rows `a` (rows, K) and its own `b`
(K, N); every device needs the product of the gathered `a` with its `b`, (devices·rows, N).
Rather than gathering `a` first, the producer reads the K slices of every device's shard
straight from that device (`a.peer(work.group)`, a TMA load across devices) into the ring the consumers
multiply from, its own shard first, then round the ring of devices, so the next peer's rows
arrive while the current ones are multiplied: `PersistentTiles` with one copy of the tile grid
a shard.  The shards must be ready before the launch.  `kernel.interpret(..., devices=N)`
emulates N devices; on GPUs it runs in an NVSHMEM job (`asyncdsl.distributed`), `a` on the
symmetric heap: `c = all_gather_gemm(a, b)`.
"""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks.epilogues import store_in_pieces, store_ring
from asyncdsl.blocks.load_ring import produce
from asyncdsl.blocks.mma_loop import drain, mma_loop
from asyncdsl.blocks.mma_operands import check_16_bit, check_operands, tensor_core_layout
from asyncdsl.blocks.persistent_tiles import PersistentTiles
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.kernels.dispatch import launch, on_host, on_stream
from asyncdsl.kernels.outputs import empty
from asyncdsl.runtime import symmetric


@kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384)
def all_gather_matmul(a, b, c, CTAS: constexpr, BM: constexpr = 128, BN: constexpr = 256,
                      BK: constexpr = 64, STAGES: constexpr = 4):
    devices, rank = ad.num_devices(), ad.device_id()
    check_operands(a, b, c, CTAS, rows=devices * a.shape[0])  # c holds every device's rows
    check_16_bit(a, b, c)
    (rows, K), N = a.shape, b.shape[1]
    if rows % BM:  # a partial last tile would store zeros over the next shard's rows of c
        raise ad.TraceError(f"each shard's rows must be whole {BM}-row tiles, got {rows}")
    half = BM // 2
    k_steps = ad.cdiv(K, BK)
    tiles = PersistentTiles(rows, N, BM, BN, CTAS, groups=devices, first_group=rank)  # group: the shard

    a_ring = ad.smem((STAGES, 2, half, BK), a.dtype, **tensor_core_layout(half))
    b_ring = ad.smem((STAGES, 1, BK, BN), b.dtype, **tensor_core_layout(BK))
    c_out = store_ring(2, c.dtype)
    ring = ad.Pipeline(STAGES, loads=3, consumers=2)

    def load(work, kk, slot, landed):
        for h in range(2):
            ad.async_copy(a.peer(work.group).at[ad.ds(work.row + h * half, half), ad.ds(kk * BK, BK)],
                          a_ring.at[slot, h], barrier=landed)
        ad.async_copy(b.at[ad.ds(kk * BK, BK), ad.ds(work.col, BN)], b_ring.at[slot, 0], barrier=landed)

    with ad.warpgroup_role(2, registers=40):
        produce(ring, tiles, k_steps, load)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((half, BN), ad.float32, layout=ad.WGMMA)
        for work in tiles:
            out_row = work.group * rows + work.row + me * half  # in the gathered product
            mma_loop(acc, ring, work.index, k_steps, lambda slot: (a_ring.at[slot, me], b_ring.at[slot, 0]))
            drain(ring, work.index, k_steps)
            store_in_pieces(acc, c_out, me, c, out_row, work.col)
        ad.await_async_copy(0)


@on_stream
def all_gather_gemm(a, b, *, out=None, ctas: int = 8, stream=None):
    """c = concat(a of every device) @ b on this device, in a new array or `out`.  On GPUs `a` is
    this PE's shard on the symmetric heap, ready on every PE before the call; in the interpreter
    `a` and `b` are lists of one numpy array a device, and so is the result (numpy arrays: one
    device).  Without an NVSHMEM job it runs on this GPU alone, as a GEMM."""
    if isinstance(a, np.ndarray):  # one device, in the interpreter
        return all_gather_gemm([a], [b], out=None if out is None else [out], ctas=ctas)[0]
    if on_host(a):
        devices = len(a)
        c = out if out is not None else [empty(x, (devices * x.shape[0], y.shape[1]), x.dtype)
                                          for x, y in zip(a, b)]
        launch(all_gather_matmul, a, b, c, devices=devices, CTAS=ctas)
        return c
    c = empty(a, (symmetric.world_size() * a.shape[0], b.shape[1]), a.dtype) if out is None else out
    launch(all_gather_matmul, a, b, c, stream=stream, CTAS=ctas)
    return c
