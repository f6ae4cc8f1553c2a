"""The PTX of signals and their waits, which needs no second device."""

from __future__ import annotations

import pytest

import asyncdsl as ad
from asyncdsl.jit.specs import ScalarSpec


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


def _all_gather(devices: int):
    from asyncdsl.kernels.collectives import all_gather_kernel

    specs = (ad.ArraySpec((256, 512), ad.bfloat16), ad.ArraySpec((devices, 256, 512), ad.bfloat16),
             ad.ArraySpec((devices,), ad.int32), ScalarSpec("int"))
    return all_gather_kernel.specialize(specs, {"CTAS": 4}, devices=devices)


@pytest.mark.parametrize("devices", [1, 2, 4])
def test_peer_copies_read_one_descriptor_per_device_from_consecutive_slots(devices, ptxas):
    from asyncdsl.kernel_binary import DescriptorScratchParam, PeerTableParam

    binary = _all_gather(devices).binary
    ptxas(binary.ptx)
    peers = [spec for spec in binary.descriptors if spec.peer >= 0]
    assert [spec.peer for spec in peers] == list(range(devices))  # in slot order
    assert all(spec.arg_index == 1 and spec.box_dims == (1, 64, 64) for spec in peers)
    (scratch,) = [p for p in binary.params if isinstance(p, DescriptorScratchParam)]
    first = binary.descriptors.index(peers[0])
    assert ([scratch.slot_offsets[first + pe] for pe in range(devices)]
            == [(first + pe) * 128 for pe in range(devices)])
    # The rank and the peer offsets come from the table; flags (2) and out (1) are addressed on peers.
    assert [p for p in binary.params if isinstance(p, PeerTableParam)] == [PeerTableParam(devices, (1, 2))]
    assert "ld.global.nc.u32" in binary.ptx  # device_id
    assert binary.ptx.count("red.release.sys") + binary.ptx.count("st.release.sys") == devices


def test_a_traced_peer_selects_its_descriptor_and_offset_at_run_time(ptxas):
    @ad.kernel(grid=(1,))
    def ring(x, flags):
        pe = (ad.device_id() + 1) % ad.num_devices()
        buf = ad.smem(x.shape, x.dtype)
        ad.async_copy(buf, x.peer(pe))
        ad.await_async_copy()
        ad.signal(flags.peer(pe).at[0], 1)

    compiled = ring.specialize((ad.ArraySpec((8, 16), ad.float32), ad.ArraySpec((1,), ad.int32)),
                               {}, devices=3)
    ptx = compiled.ptx
    ptxas(ptx)
    assert "mul.wide.u32" in ptx and f"{128}" in ptx  # the descriptor: 128 bytes per device
    assert "ld.global.nc.s64" in ptx  # the flag: the peer's offset from the table
    assert ptx.index("fence.proxy.async.global") < ptx.index("st.release.sys.global.u32")


def test_the_distributed_examples_assemble_for_several_devices(ptxas):
    from asyncdsl.kernels.all_gather_gemm import all_gather_matmul
    from asyncdsl.kernels.collectives import reduce_scatter_kernel

    bf16 = ad.bfloat16
    for devices in (2, 4):
        ptxas(reduce_scatter_kernel.specialize(
            (ad.ArraySpec((devices, 1000, 520), bf16), ad.ArraySpec((1000, 520), bf16),
             ad.ArraySpec((devices,), ad.int32), ScalarSpec("int")),
            {"CTAS": 132}, devices=devices).ptx)
        ptxas(all_gather_matmul.specialize(
            (ad.ArraySpec((128, 192), bf16), ad.ArraySpec((192, 256), bf16),
             ad.ArraySpec((128 * devices, 256), bf16)),
            {"CTAS": 2}, devices=devices).ptx)
