"""The consumer side of a load ring: the tensor cores' K loop over a unit's slots.

    from asyncdsl.blocks.mma_loop import drain, mma_loop

    acc = ad.registers((64, 256), ad.float32, layout=ad.WGMMA)      # in a consumer warpgroup
    for work in tiles:
        mma_loop(acc, ring, work.index, k_steps, lambda slot: (a_ring.at[slot, me], b_ring.at[slot]))
        drain(ring, work.index, k_steps)
        ...                                                          # the epilogue reads acc

Each step waits for its slot, issues one wgmma on it (the first of a unit zeroes the
accumulator), keeps `in_flight` wgmmas running and releases the slot of the wgmma known done, so
the producer refills it while the tensor cores work.  Operands are whatever `operands(slot)`
gives: K-major or MN-major tiles, `.T` views of (N, K) operands.  `ping_pong_k_loop` is the
loop of consumers that take turns; `promoted_mma_loop` sums the tensor cores' partial sums into a
float32 total every few slices (fp8 products keep 14 significant bits on the tensor cores);
`block_scaled_mma_loop` scales each slice's sum before adding it (block-scaled fp8).
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad


def check_ring(ring, in_flight: int = 1) -> None:
    """Refuse, at trace time, a ring of one slot under a K loop that keeps a wgmma in flight: that
    wgmma holds its slot until the next step's is issued, and the next step waits for a free
    slot, so the loop would hang at its second step."""
    if in_flight and ring.stages < 2:
        raise ad.TraceError(f"a K loop keeping one wgmma in flight needs a ring of 2 slots or more (the "
                            f"wgmma in flight holds its slot while the next step waits for one), got "
                            f"{ring.stages}: more STAGES, or in_flight=0")


def mma_loop(acc, ring, index, k_steps, operands, in_flight: int = 1) -> None:
    """Unit `index`'s K loop: steps index * k_steps .. + k_steps of `ring`, one wgmma of
    `operands(slot)` into `acc` a step.  With `in_flight` 1 the last wgmma is left running and
    its slot held (`drain`), so that the caller can overlap the wait with other work."""
    check_ring(ring, in_flight)
    for kk in ad.range(k_steps):
        step = index * k_steps + kk
        with ad.region("k step"):
            slot = ring.consume(step)
            with ad.region("mma"):
                ad.wgmma(acc, *operands(slot), accumulate=kk > 0)
            with ad.region("wait mma"):  # keep this wgmma running (in_flight) or not
                ad.wgmma_wait(in_flight)
            with ad.region("release"):  # the slot of the wgmma that is done may be refilled
                if in_flight:
                    with ad.when(kk > 0):
                        ring.release(step - 1)
                else:
                    ring.release(step)


def drain(ring, index, k_steps, in_flight: int = 1) -> None:
    """After unit `index`'s `mma_loop` with one wgmma in flight: wait for it and release its
    slot (ring step index * k_steps + k_steps - 1)."""
    if in_flight:
        ad.wgmma_wait(0)
        ring.release(index * k_steps + k_steps - 1)


def ping_pong_k_loop(acc, ring, k_loops, first, k_steps, operands) -> None:
    """One consumer's K loop over a unit in its turn (`k_loops`, an `asyncdsl.turns`): steps
    first.. first + k_steps of `ring`, whose slots in between were the other consumer's (so it
    waits with the phase parity of each step, (step // stages) % 2), one wgmma of
    `operands(slot)` a step, one kept in flight, each slot released once the next wgmma has
    retired it; the last stays in flight and unreleased for the caller (`drain`)."""
    check_ring(ring)
    with k_loops.turn(), ad.region("k loop"):
        for kk in ad.range(k_steps):
            step = first + kk
            slot = step % ring.stages
            with ad.region("wait loaded"):
                ring.full[slot].wait(parity=(step // ring.stages) % 2)
            ad.wgmma(acc, *operands(slot), accumulate=kk > 0)
            ad.wgmma_wait(1)
            with ad.when(kk > 0):
                ring.release(step - 1)


def promoted_mma_loop(acc, total, ring, index, k_steps, every: int, operands) -> None:
    """Unit `index`'s K loop summing `every` slices at a time on the tensor cores into `acc`,
    each group's sum then added into the float32 `total` (zeroed first) on the CUDA cores.
    `k_steps` is a multiple of `every`; every wgmma is done and every slot released at the end."""
    check_ring(ring, every > 1)
    total[...] = ad.zeros(total.shape, ad.float32)
    for g in ad.range(k_steps // every):
        for i in range(every):  # the tensor cores' sum of one group
            step = index * k_steps + g * every + i
            slot = ring.consume(step)
            ad.wgmma(acc, *operands(slot), accumulate=i > 0)
            ad.wgmma_wait(1)
            if i > 0:
                ring.release(step - 1)
        ad.wgmma_wait(0)
        ring.release(index * k_steps + g * every + every - 1)
        total[...] = total[...] + acc[...]


def mma_run(acc, ring, first, count, operands) -> None:
    """`count` K steps from ring step `first` (traced bounds: a piece of a stream-K run), one
    wgmma a step, one in flight; every wgmma is done and every slot released at the end."""
    check_ring(ring)
    for kk in ad.range(count):
        slot = ring.consume(first + kk)
        ad.wgmma(acc, *operands(slot), accumulate=kk > 0)
        ad.wgmma_wait(1)
        with ad.when(kk > 0):
            ring.release(first + kk - 1)
    ad.wgmma_wait(0)
    ring.release(first + count - 1)


# Slices a group of the block-scaled loop: the wgmmas of a group alternate between the two
# accumulators, so each slice's sum is scaled and added while the next slice's wgmma runs, and
# only the group's last addition leaves the tensor cores idle.
SCALED_GROUP = 4


def block_scaled_mma_loop(accs, total, ring, first, count, operands, scale) -> None:
    """`count` K steps from ring step `first`, each one wgmma of `operands(slot)` alone into one of
    the two accumulators `accs`, whose sum is multiplied by `scale(slot, kk)` (a tile broadcasting
    against them, which the consumer's threads read from the slot of the unit's step kk) and
    added into the float32 `total`, zeroed first, rounded once (fma).  In groups of
    `SCALED_GROUP` slices (the last group what is left): slice s + 1's wgmma is issued before
    slice s's sum is scaled and added, so the tensor cores idle only through a group's last
    addition.  (A wgmma left running into the next group would hide that one too, but ptxas
    does not follow which wgmma a wait leaves running across a loop's back edge, and serializes
    every wgmma of the kernel, advisory C7514.)  Every wgmma is done and every slot released at
    the end."""
    check_ring(ring)
    total[...] = ad.zeros(total.shape, ad.float32)

    def issue(kk, acc):
        ad.wgmma(acc, *operands(ring.consume(first + kk)), accumulate=False)

    def add(kk, acc, in_flight: int):
        """Slice kk's sum, in `acc`, into the total once only `in_flight` wgmmas still run."""
        factor = scale((first + kk) % ring.stages, kk)
        ad.wgmma_wait(in_flight)
        ring.release(first + kk, after_wgmma=False)  # the threads read the scales: wait for all of them
        with ad.region("promote"):
            total[...] = ad.fma(acc[...], factor, total[...])

    def group(start, size: int):
        """Slices start.. start + size (a Python int of them), the next one's wgmma issued
        before each addition."""
        issue(start, accs[0])
        for s in range(1, size):
            issue(start + s, accs[s % 2])  # its accumulator's last sum was added before
            add(start + s - 1, accs[(s - 1) % 2], 1)
        add(start + size - 1, accs[(size - 1) % 2], 0)

    for g in ad.range(count // SCALED_GROUP):
        group(g * SCALED_GROUP, SCALED_GROUP)
    left = count % SCALED_GROUP
    if isinstance(left, int):
        if left:
            group(count - left, left)
        return
    for size in range(1, SCALED_GROUP):
        with ad.when(left == size):
            group(count - size, size)
