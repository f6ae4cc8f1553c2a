"""What the CTAs resident together on one multiprocessor share: its shared memory, less what the
hardware reserves for each (`@asyncdsl.kernel(ctas_per_sm=n)`; registers: `hw.roles`)."""

from __future__ import annotations

from asyncdsl.hw.limits import MAX_SMEM_PER_BLOCK, SMEM_PER_SM, SMEM_RESERVED_PER_BLOCK


def smem_per_cta(ctas_per_sm: int = 1) -> int:
    """The dynamic shared memory one CTA may take where `ctas_per_sm` are to be resident at once:
    its share of the multiprocessor's, at most the opt-in maximum (which is one CTA's share)."""
    return min(MAX_SMEM_PER_BLOCK, SMEM_PER_SM // ctas_per_sm - SMEM_RESERVED_PER_BLOCK)
