"""Triton kernels the benchmarks compare against (Triton needs them in a file to compile them)."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def triton_tile_copy(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    i = tl.program_id(0) * BM
    j = tl.program_id(1) * BN
    dst.store([i, j], src.load([i, j]))


def triton_copy(x, y, BM: int = 128, BN: int = 128) -> None:
    """Tile copy with TMA through host-built tensor descriptors (Triton's TMA path on Hopper)."""
    s, d = TensorDescriptor.from_tensor(x, [BM, BN]), TensorDescriptor.from_tensor(y, [BM, BN])
    triton_tile_copy[(triton.cdiv(x.shape[0], BM), triton.cdiv(x.shape[1], BN))](s, d, BM, BN)
