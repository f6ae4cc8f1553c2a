"""All-gather fused with a GEMM: c = concat(a of every device) @ b, on every device.

The tensor-parallel layer: each device holds a shard of rows `a` (rows, K) and its own `b`
(K, N); every device needs the product of the gathered `a` with its `b`, (devices·rows, N).
Rather than gathering `a` first and multiplying after, the producer warpgroup reads the k-slices
of every device's shard straight from that device (`a.peer(pe)`, a TMA load across devices) into
the ring the consumers multiply from, starting with its own shard and going round the ring of
devices, so the next peer's rows arrive while the current ones are multiplied.  The kernel is
the bf16 GEMM's (`matmul.py`): a producer and two consumer warpgroups over an `asyncdsl.Pipeline`,
wgmma, a TMA-store epilogue; the shards must be ready before the launch (no signals needed).

`kernel.interpret(..., devices=N)` emulates N devices; on GPUs it runs in an NVSHMEM job
(`asyncdsl.distributed`, docs/distributed.md), `a` on the symmetric heap.

    python -m asyncdsl.examples.all_gather_matmul
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

import asyncdsl as ad
import asyncdsl.distributed as dist
from asyncdsl.examples.matmul import (
    check_16_bit,
    check_operands,
    store_in_pieces,
    tensor_core_layout,
    tile_position,
)


@ad.kernel(grid=lambda a, b, c, CTAS, **_: (CTAS,), block=384)
def all_gather_matmul(a, b, c, CTAS: ad.constexpr, BM: ad.constexpr = 128, BN: ad.constexpr = 256,
                      BK: ad.constexpr = 64, STAGES: ad.constexpr = 4):
    devices, rank = ad.num_devices(), ad.device_id()
    check_operands(a, b, c, CTAS, rows=devices * a.shape[0])  # c holds every device's rows
    check_16_bit(a, b, c)
    rows, K = a.shape
    N = b.shape[1]
    if rows % BM:  # a partial last tile would store zeros over the next shard's rows of c
        raise ad.TraceError(f"each shard's rows must be whole {BM}-row tiles, got {rows}")
    half = BM // 2
    m_tiles, n_tiles = ad.cdiv(rows, BM), ad.cdiv(N, BN)  # per shard
    tiles = devices * m_tiles * n_tiles
    k_steps = ad.cdiv(K, BK)
    cta = ad.program_id(0)
    mine = (tiles - cta + CTAS - 1) // CTAS

    a_ring = ad.smem((STAGES, 2, half, BK), a.dtype, **tensor_core_layout(half))
    b_ring = ad.smem((STAGES, 1, BK, BN), b.dtype, **tensor_core_layout(BK))
    c_out = ad.smem((2, 2, 64, 64), c.dtype, **tensor_core_layout(64))
    ring = ad.Pipeline(STAGES, loads=3, consumers=2)

    def origin(t):
        """Unit t's source device (own shard first, then round the ring) and tile in that shard."""
        unit = cta + t * CTAS
        shard = unit // (m_tiles * n_tiles)
        m, n = tile_position(unit % (m_tiles * n_tiles), m_tiles, n_tiles, 16)  # a planar snake per shard
        return (rank + shard) % devices, m * BM, n * BN

    with ad.warpgroup_role(2, registers=40):
        for t in ad.range(mine):
            pe, row, col = origin(t)
            for kk in ad.range(k_steps):
                slot, landed = ring.produce(t * k_steps + kk)
                for h in range(2):
                    ad.async_copy(a.peer(pe).at[ad.ds(row + h * half, half), ad.ds(kk * BK, BK)],
                                  a_ring.at[slot, h], barrier=landed)
                ad.async_copy(b.at[ad.ds(kk * BK, BK), ad.ds(col, BN)], b_ring.at[slot, 0], barrier=landed)

    with ad.warpgroup_role((0, 1), registers=232):
        me = ad.warpgroup_idx()
        acc = ad.registers((half, BN), ad.float32, layout=ad.WGMMA)
        for t in ad.range(mine):
            pe, row, col = origin(t)
            out_row = pe * rows + row + me * half  # the source's rows in the gathered product
            for kk in ad.range(k_steps):
                step = t * k_steps + kk
                slot = ring.consume(step)
                ad.wgmma(acc, a_ring.at[slot, me], b_ring.at[slot, 0], accumulate=kk > 0)
                ad.wgmma_wait(1)
                with ad.when(kk > 0):
                    ring.release(step - 1)
            ad.wgmma_wait(0)
            ring.release(t * k_steps + k_steps - 1)
            store_in_pieces(acc, c_out, me, c, out_row, col)
        ad.await_async_copy(0)


def run(devices: int, rows: int = 128, k: int = 192, n: int = 256, seed: int = 0) -> bool:
    """The fused kernel on `devices` emulated devices against numpy (small integers: exact)."""
    rng = np.random.default_rng(seed)
    shards = [rng.integers(-3, 4, (rows, k)).astype(ml_dtypes.bfloat16) for _ in range(devices)]
    weights = [rng.integers(-3, 4, (k, n)).astype(ml_dtypes.bfloat16) for _ in range(devices)]
    outs = [np.full((devices * rows, n), np.nan, ml_dtypes.bfloat16) for _ in range(devices)]
    all_gather_matmul.interpret(shards, weights, outs, CTAS=2, devices=devices)
    gathered = np.concatenate(shards).astype(np.float64)
    expected = [(gathered @ w.astype(np.float64)).astype(ml_dtypes.bfloat16) for w in weights]
    return all(out.view(np.uint16).tobytes() == e.view(np.uint16).tobytes() for out, e in zip(outs, expected))


def on_gpus(rows: int = 256, k: int = 512, n: int = 512, seed: int = 0) -> bool:
    """In an NVSHMEM job: the fused kernel on small-integer shards and this PE's own weights;
    whether its output is exactly numpy's product of the gathered rows."""
    import torch

    devices, rank = dist.world_size(), dist.rank()
    rng = np.random.default_rng(seed)
    shards = [rng.integers(-3, 4, (rows, k)).astype(np.float32) for _ in range(devices)]
    weights = rng.integers(-3, 4, (k, n)).astype(np.float32) + rank  # each PE's own b
    a = dist.symmetric_like(torch.from_numpy(shards[rank]).to("cuda", torch.bfloat16))
    b = torch.from_numpy(weights).to("cuda", torch.bfloat16)
    c = torch.full((devices * rows, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    dist.barrier()  # every shard is in place before anyone reads it
    all_gather_matmul(a, b, c, CTAS=8)
    torch.cuda.synchronize()
    expected = torch.from_numpy(np.concatenate(shards).astype(np.float64) @ weights).to(torch.bfloat16)
    dist.barrier()  # nobody frees its shard while a peer may still read it
    return bool(torch.equal(c.cpu(), expected))


def main() -> int:
    failures = 0
    for devices in (2, 4):
        ok = run(devices)
        failures += not ok
        print(f"all_gather_matmul on {devices} emulated devices: {'exact' if ok else 'MISMATCH'}")
    gpus = dist.gpus_available()
    if gpus:
        ok = all(dist.spawn(on_gpus, gpus))
        failures += not ok
        print(f"all_gather_matmul on {gpus} GPU(s) (NVSHMEM): {'exact' if ok else 'MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
