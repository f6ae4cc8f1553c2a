"""The PTX of signals and their waits, which needs no second device."""

from __future__ import annotations

import pytest

import asyncdsl as ad


@ad.kernel(grid=(1,))
def signal_and_wait(flags, n: int):
    ad.signal(flags.at[ad.device_id()], n, op="add")
    ad.wait_signal(flags.at[1], "ge", n)
    ad.wait_signal(flags.at[2], "eq", 3)
    ad.signal(flags.at[3], 7)


SPEC = ad.ArraySpec((4,), ad.uint32)


def test_signal_and_wait_assemble(ptxas):
    ptxas(signal_and_wait.ptx(SPEC, 5))


def test_signal_and_wait_ptx_is_a_release_and_an_acquire_spin():
    ptx = signal_and_wait.ptx(SPEC, 5)
    assert "red.release.sys.global.add.u32" in ptx
    assert "st.release.sys.global.u32" in ptx
    assert ptx.count("ld.acquire.sys.global.u32") == 2
    assert "setp.ge.u32" in ptx and "setp.eq.u32" in ptx
    assert "multimem" not in ptx and "multicast" not in ptx


@pytest.mark.parametrize("what", ["copy", "signal"])
def test_peer_addressing_is_not_on_the_gpu_yet(what):
    @ad.kernel(grid=(1,))
    def to_peer(x, flags):
        if what == "copy":
            buf = ad.smem(x.shape, x.dtype)
            ad.async_copy(buf, x.peer(0))
            ad.await_async_copy()
        else:
            ad.signal(flags.peer(0).at[0], 1)

    with pytest.raises(ad.NotOnGpuYetError, match="not supported on the GPU yet: needs NVSHMEM peer addresses"):
        to_peer.ptx(ad.ArraySpec((8, 16), ad.float32), ad.ArraySpec((1,), ad.int32))
