"""`@asyncdsl.kernel(ctas_per_sm=n)`: a kernel built for n CTAs a multiprocessor at once.  Its
threads start at 65536 / (threads × n) registers (`.maxnreg`), warpgroup roles share that budget,
its shared memory is held to a CTA's share of a multiprocessor's; ptxas takes the result."""

from __future__ import annotations

import re

import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl.runtime.ptxas import assemble

X = ad.ArraySpec((128, 128), ad.float32)


def doubled(producer: int, consumer: int, ctas_per_sm: int = 2, rows: int = 64):
    """A producer warpgroup copying rows into shared memory, a consumer storing twice them."""

    @ad.kernel(grid=(128 // rows,), block=256, ctas_per_sm=ctas_per_sm)
    def kernel(x, y):
        buf = ad.smem((rows, 128), ad.float32)  # the buffer
        landed = ad.barrier()
        with ad.warpgroup_role(1, registers=producer):
            ad.async_copy(x.at[ad.ds(ad.program_id(0) * rows, rows), :], buf, barrier=landed)
        with ad.warpgroup_role(0, registers=consumer):  # the consumer
            landed.wait()
            ad.store(y.at[ad.ds(ad.program_id(0) * rows, rows), :], buf[...] * 2.0)

    return kernel


def test_two_ctas_share_the_registers_and_ptxas_takes_the_roles():
    kernel = doubled(40, 216)
    x = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)
    y = np.zeros_like(x)
    kernel.interpret(x, y)
    assert np.array_equal(y, 2 * x)
    ptx = kernel.ptx(X, X)
    assert ".reqntid 256, 1, 1\n.maxnreg 128\n" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx and "setmaxnreg.inc.sync.aligned.u32 216;" in ptx
    log = assemble(ptx, verbose=True)[1]
    assert "Used 128 registers" in log and not re.search(r"C75\d\d", log), log


def test_a_kernel_without_roles_is_capped_for_its_ctas_too():
    @ad.kernel(block=128, ctas_per_sm=4)
    def scaled(x, y):
        ad.store(y.at[ad.ds(0, 64), :], ad.load(x.at[ad.ds(0, 64), :]) * 3.0)

    assert ".maxnreg 128\n" in scaled.ptx(X, X)  # 65536 / (128 x 4)


def test_roles_over_the_shared_budget_are_refused_with_the_sum():
    with pytest.raises(ad.TraceError, match=r"40\*1 \+ 232\*1 = 272 > 128\*2 = 256 .*2 CTAs sharing"):
        doubled(40, 232).ptx(X, X)


def test_shared_memory_past_a_ctas_share_is_refused():
    doubled(24, 136, rows=128, ctas_per_sm=3).ptx(X, X)  # 64 KiB of rows; a third is 76800 bytes
    with pytest.raises(ad.ResourceError, match="its share of a multiprocessor's 233472 where 4 CTAs"):
        doubled(24, 104, rows=128, ctas_per_sm=4).ptx(X, X)


@pytest.mark.parametrize("value", [0, 9, 2.0, "2"])
def test_counts_no_multiprocessor_holds_are_refused_at_the_definition(value):
    with pytest.raises(ad.ArgumentError, match=r"ctas_per_sm .* 1 \.\. 8 for 256-thread CTAs"):
        doubled(40, 216, ctas_per_sm=value)
