"""Stand-ins the runtime's CPU tests share: a stream object, tensor-map specs and images, a PTX
compiler, kernel binaries with changed fields and device facts."""

from __future__ import annotations

import struct

from asyncdsl import dtypes
from asyncdsl.kernel_binary import KernelBinary, TiledTensorMapSpec
from asyncdsl.runtime import driver

PTX = ".version 8.0\n.target sm_90a\n.address_size 64\n"


class TorchLikeStream:
    """A stream object as torch spells it (`.cuda_stream`)."""

    cuda_stream = 0x1234


def tiled_spec(**changes) -> TiledTensorMapSpec:
    """A valid tiled tensor-map spec (f32, 256 x 192, boxes of 64 x 32, 128-byte swizzle), changed."""
    fields = dict(arg_index=1, dtype_code=dtypes.TMA_FLOAT32, element_bytes=4, global_dims=(256, 192),
                  global_strides=(768, 4), box_dims=(64, 32), swizzle_bytes=128)
    fields.update(changes)
    return TiledTensorMapSpec(**fields)


def fake_image(index: int, address: int) -> bytes:
    """128 recognisable bytes standing for descriptor `index` encoded at `address`."""
    return struct.pack("<QQ", index, address) * 8


class FakeCompiler:
    """A PTX compiler that counts its calls and returns a cubin naming what it was given."""

    def __init__(self):
        self.calls = 0

    def compile(self, ptx, arch, name):
        self.calls += 1
        return b"\x7fELF" + f"{arch}:{name}:{len(ptx)}".encode()


def binary_with(binary: KernelBinary, **changes) -> KernelBinary:
    fields = {name: getattr(binary, name) for name in binary.__dataclass_fields__}
    fields.update(changes)
    return KernelBinary(**fields)


def device_facts_of(major: int, minor: int) -> driver.DeviceFacts:
    """An H200-like device of compute capability major.minor."""
    return driver.DeviceFacts(0, "Fake GPU", (major, minor), 232448, 132, 13000)
