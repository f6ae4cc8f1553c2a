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


# -- row kernels in the style of Triton's tutorials (fused softmax, layer norm), one row per program


@triton.jit
def _softmax_rows(x, y, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    v = tl.load(x + row * n + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y + row * n + offsets, (e / tl.sum(e, axis=0)).to(y.dtype.element_ty), mask=mask)


def triton_softmax(x, y) -> None:
    n = x.shape[1]
    block = triton.next_power_of_2(n)
    _softmax_rows[(x.shape[0],)](x, y, n, BLOCK=block, num_warps=8 if block <= 4096 else 16)


@triton.jit
def _rms_norm_rows(x, w, y, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    v = tl.load(x + row * n + offsets, mask=mask, other=0.0).to(tl.float32)
    scale = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / n + eps)
    weight = tl.load(w + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(y + row * n + offsets, (v * scale * weight).to(y.dtype.element_ty), mask=mask)


def triton_rms_norm(x, w, y, eps: float) -> None:
    n = x.shape[1]
    block = triton.next_power_of_2(n)
    _rms_norm_rows[(x.shape[0],)](x, w, y, n, eps, BLOCK=block, num_warps=8 if block <= 4096 else 16)


@triton.jit
def _swiglu(a, b, y, count, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    g = tl.load(a + offsets, mask=mask).to(tl.float32)
    u = tl.load(b + offsets, mask=mask).to(tl.float32)
    tl.store(y + offsets, (g * tl.sigmoid(g) * u).to(y.dtype.element_ty), mask=mask)


def triton_swiglu(a, b, y, block: int = 4096) -> None:
    _swiglu[(triton.cdiv(a.numel(), block),)](a, b, y, a.numel(), BLOCK=block, num_warps=8)


@triton.jit
def _fp8_rows(x, q, scales, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    v = tl.load(x + row * n + offsets, mask=mask, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(v), axis=0)
    factor = tl.where(amax > 0, 448.0 / amax, 0.0)
    scaled = tl.clamp(v * factor, -448.0, 448.0)
    tl.store(q + row * n + offsets, scaled.to(q.dtype.element_ty), mask=mask)
    tl.store(scales + row, amax / 448.0)


def triton_rowwise_fp8(x, q, scales) -> None:
    n = x.shape[1]
    block = triton.next_power_of_2(n)
    _fp8_rows[(x.shape[0],)](x, q, scales, n, BLOCK=block, num_warps=8 if block <= 4096 else 16)
