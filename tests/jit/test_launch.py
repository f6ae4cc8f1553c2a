"""GPU launches (`jit/launch.py`, against a stand-in loaded kernel): the checked path for an argument
layout seen first, then the warm path; a persistent grid asked of the loaded kernel once."""

from __future__ import annotations

import sys
import types

import pytest
from support import device_array

import asyncdsl as ad
from asyncdsl import runtime


@ad.kernel(grid=lambda src, dst, B: (ad.cdiv(src.shape[0], B), ad.cdiv(src.shape[1], B)))
def copy(src, dst, B: ad.constexpr):
    tile = ad.smem((B, B), src.dtype)
    bar = ad.barrier()
    row, col = ad.program_id(0) * B, ad.program_id(1) * B
    ad.async_copy(src.at[ad.ds(row, B), ad.ds(col, B)], tile, barrier=bar)
    bar.wait()
    ad.async_copy(tile, dst.at[ad.ds(row, B), ad.ds(col, B)])


def calls(recorded):
    return [call for kernel in recorded.values() for call in kernel.calls]


def test_first_call_is_checked_then_warm_with_new_addresses(recorded):
    copy(device_array((256, 128), 0x10000), device_array((256, 128), 0x20000), B=64)
    copy(device_array((256, 128), 0x30000), device_array((256, 128), 0x40000), B=64)
    assert calls(recorded) == [
        ("checked", (4, 2, 1), (0x10000, 0x20000)),
        ("warm", (4, 2, 1), (0x30000, 0x40000)),
    ]


def test_new_layout_or_constexpr_takes_the_checked_path_and_specialises(recorded):
    before = len(copy.specializations.compiled)
    copy(device_array((512, 128), 0x10000), device_array((512, 128), 0x20000), B=64)
    copy(device_array((512, 128), 0x10000), device_array((512, 128), 0x20000), B=32)
    kinds = [call[0] for call in calls(recorded)]
    assert kinds == ["checked", "checked"]
    assert len(copy.specializations.compiled) == before + 2
    assert [call[1] for call in calls(recorded)] == [(8, 2, 1), (16, 4, 1)]


def test_misaligned_address_is_checked_and_rejected(recorded):
    copy(device_array((64, 64), 0x10000), device_array((64, 64), 0x20000), B=64)
    with pytest.raises(ad.ArgumentError, match="16-byte"):
        copy(device_array((64, 64), 0x10008), device_array((64, 64), 0x20000), B=64)


def test_arguments_by_keyword_or_position_take_the_warm_path_alike(recorded):
    copy(device_array((128, 64), 0x10000), dst=device_array((128, 64), 0x20000), B=64)
    copy(src=device_array((128, 64), 0x30000), B=64, dst=device_array((128, 64), 0x40000))
    copy(device_array((128, 64), 0x50000), device_array((128, 64), 0x60000), 64)
    assert calls(recorded) == [
        ("checked", (2, 1, 1), (0x10000, 0x20000)),
        ("warm", (2, 1, 1), (0x30000, 0x40000)),
        ("warm", (2, 1, 1), (0x50000, 0x60000)),
    ]


class _TorchBool:
    def __str__(self):
        return "torch.bool"


class _BoolTensor:
    """A contiguous CUDA torch tensor of booleans, as far as a launch reads one."""

    dtype, is_cuda, layout = _TorchBool(), True, "torch.strided"

    def __init__(self, shape, address):
        self.shape, self._address = shape, address

    def stride(self):
        return (self.shape[1], 1)

    def data_ptr(self):
        return self._address

    def get_device(self):
        return 0

    def element_size(self):
        return 1

    def is_contiguous(self):
        return True


def test_torch_bool_tensors_launch_as_bytes(recorded, monkeypatch):
    torch = types.ModuleType("torch")
    torch.Tensor, torch.strided = _BoolTensor, _BoolTensor.layout
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0x700)
    monkeypatch.setitem(sys.modules, "torch", torch)
    copy(_BoolTensor((128, 128), 0x10000), _BoolTensor((128, 128), 0x20000), B=64)
    copy(_BoolTensor((128, 128), 0x30000), _BoolTensor((128, 128), 0x40000), B=64)
    assert calls(recorded) == [("checked", (2, 2, 1), (0x10000, 0x20000)),
                               ("warm", (2, 2, 1), (0x30000, 0x40000))]
    assert [binary.arg_names for binary in recorded] == [("src", "dst")]


def test_host_arrays_are_refused_with_a_pointer_to_interpret(recorded):
    import numpy as np

    with pytest.raises(ad.ArgumentError, match="interpret"):
        copy(np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32), B=64)


def test_a_persistent_grid_comes_from_the_loaded_kernel_once_per_layout(recorded, monkeypatch):
    asked = []

    def persistent_grid(loaded):
        asked.append(loaded)
        return (132, 1, 1)

    monkeypatch.setattr(runtime, "persistent_grid", persistent_grid)

    @ad.kernel(grid=ad.persistent_grid, cluster=(2, 1, 1))
    def strided(src, dst):
        tile = ad.smem((8, 8), src.dtype)
        bar = ad.barrier()
        programs = ad.num_programs(0)
        for i in ad.range((src.shape[0] // 8 - ad.program_id(0) + programs - 1) // programs):
            rows = ad.ds((ad.program_id(0) + i * programs) * 8, 8)
            ad.async_copy(src.at[rows, :], tile, barrier=bar)
            bar.wait()
            ad.async_copy(tile, dst.at[rows, :])
            ad.await_async_copy(0)

    strided(device_array((64, 8), 0x10000), device_array((64, 8), 0x20000))
    strided(device_array((64, 8), 0x30000), device_array((64, 8), 0x40000))
    assert calls(recorded) == [
        ("checked", (132, 1, 1), (0x10000, 0x20000)),
        ("warm", (132, 1, 1), (0x30000, 0x40000)),
    ]
    assert len(asked) == 1 and asked[0] is next(iter(recorded.values()))
