"""`asyncdsl.load_index`: offsets read from device memory drive TMA coordinates and loop bounds
in the interpreter (against numpy) and through ptxas; a read past the array is reported and
elements that are no 32-bit integers, or windows, are refused while tracing."""

from __future__ import annotations

import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl.errors import OutOfBoundsError
from asyncdsl.runtime.ptxas import assemble

B = 16


@ad.kernel(grid=lambda x, y, offsets, counts: (counts.shape[0],))
def copy_segments(x, y, offsets, counts):
    """CTA g copies counts[g] tiles of B rows of x from row offsets[g] on into y."""
    g = ad.program_id(0)
    start = ad.load_index(offsets.at[g])
    buf = ad.smem((B, x.shape[1]), x.dtype)
    bar = ad.barrier()
    for i in ad.range(ad.load_index(counts.at[g])):
        rows = ad.ds(start + i * B, B)
        ad.async_copy(x.at[rows, :], buf, barrier=bar)
        bar.wait()
        ad.async_copy(buf, y.at[rows, :])
        ad.await_async_copy(0)


def test_offsets_and_counts_from_device_memory():
    x = np.arange(128 * 32, dtype=np.float32).reshape(128, 32)
    y = np.zeros_like(x)
    offsets, counts = np.array([0, 48, 96], np.int32), np.array([2, 0, 1], np.int32)
    copy_segments.interpret(x, y, offsets, counts)
    expected = np.zeros_like(x)
    for start, count in zip(offsets, counts):
        expected[start:start + count * B] = x[start:start + count * B]
    assert np.array_equal(y, expected)


def test_the_kernel_assembles():
    x = ad.ArraySpec((128, 32), ad.float32)
    ptx = copy_segments.ptx(x, x, ad.ArraySpec((3,), ad.int32), ad.ArraySpec((3,), ad.int32))
    assert ptx.count("ld.global.nc.u32") == 2
    assemble(ptx)


def test_a_read_past_the_array_is_reported():
    x = np.zeros((128, 32), np.float32)

    @ad.kernel(grid=(1,))
    def past(x, offsets):
        start = ad.load_index(offsets.at[3])
        ad.store(x.at[ad.ds(start, 16), :], ad.zeros((16, 32), ad.float32))

    with pytest.raises(OutOfBoundsError, match=r"load_index: index \(3,\) of 'offsets' \(shape \(3,\)\)"):
        past.interpret(x, np.zeros(3, np.int32))


@pytest.mark.parametrize("dtype,index,fragment", [
    (ad.float32, 0, "reads an int32 or uint32 element, offsets holds float32"),
    (ad.int32, slice(0, 2), "index every dim"),
])
def test_what_is_no_32_bit_integer_element_is_refused(dtype, index, fragment):
    @ad.kernel(grid=(1,))
    def bad(offsets):
        ad.load_index(offsets.at[index])

    with pytest.raises(ad.TraceError, match=fragment):
        bad.ptx(ad.ArraySpec((4,), dtype))
