"""How the paged decode (`asyncdsl.kernels.paged_decode`) is configured: the CTAs a multiprocessor
its splits are planned for, which of its two builds runs them (one CTA a multiprocessor, or two
sharing one's registers and shared memory), and the ring of key blocks each CTA holds."""

from __future__ import annotations

from asyncdsl.hw.limits import SMEM_ALIGNMENT_SLACK
from asyncdsl.hw.occupancy import smem_per_cta
from asyncdsl.kernels.paged_decode_checks import ROWS

HOST_SMS = 4  # the multiprocessors the interpreter plans for: few, so its idle CTAs are few
# The CTAs a multiprocessor the splits are planned for by default (1 to 4).  On the H200 one CTA
# a multiprocessor beat two in waves on every row of the benchmark (docs/performance.md); two at
# once (the paired build) have not been measured yet.
CTAS_PER_SM = 1
# The paired build's registers a thread, (producer, consumer): two CTAs of 256 threads share 2 x
# 128, and the producer, which issues copies (or converts fp8 pages 16 rows at a time), hands most
# of its share to the consumer (ptxas -v: no spills, every head dim, page, block, query count and
# cache dtype).  The single build leaves both at 248, what ptxas gives one CTA's threads.
PAIRED_REGISTERS = (40, 216)


def resident(ctas_per_sm: int) -> int:
    """The CTAs a multiprocessor holds at once of the build that runs splits planned for
    `ctas_per_sm`: the paired build's two where the plan is for two or more, else one."""
    return 2 if ctas_per_sm >= 2 else 1


def ring_stages(BK: int, d: int, resident: int = 1) -> int:
    """Blocks in flight, 2 to 8: what shared memory holds beside q for `resident` CTAs a
    multiprocessor at once (200 KiB for one; for two, a CTA's share less the base's alignment
    slack and 1 KiB for the barriers)."""
    budget = min(200 * 1024, smem_per_cta(resident) - SMEM_ALIGNMENT_SLACK - 1024)
    return max(2, min(8, (budget - ROWS * d * 2) // (2 * BK * d * 2)))
