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
def _layer_norm_rows(x, w, b, y, n, eps, BLOCK: tl.constexpr):
    """The layer-norm tutorial's forward held in registers (one load of the row instead of one a
    statistic), without the mean and rstd outputs the tutorial keeps for its backward pass."""
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    v = tl.load(x + row * n + offsets, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(v, axis=0) / n
    d = tl.where(mask, v - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
    weight = tl.load(w + offsets, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(b + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(y + row * n + offsets, (d * rstd * weight + bias).to(y.dtype.element_ty), mask=mask)


def triton_layer_norm(x, w, b, y, eps: float) -> None:
    n = x.shape[1]
    block = triton.next_power_of_2(n)
    _layer_norm_rows[(x.shape[0],)](x, w, b, y, n, eps, BLOCK=block, num_warps=8 if block <= 4096 else 16)


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


# -- matmul: a persistent TMA matmul in the style of Triton's tutorial 09 (the configuration that
# measured best here: 128x256x64, 3 stages (4 do not fit with its epilogue), 8 warps), grouped tile order.


@triton.jit
def _matmul_persistent(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                       GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    m_tiles = tl.cdiv(M, BM)
    n_tiles = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    per_group = GROUP_M * n_tiles
    for tile in tl.range(tl.program_id(0), m_tiles * n_tiles, NUM_SMS, flatten=True):
        group = tile // per_group
        first_m = group * GROUP_M
        rows = min(m_tiles - first_m, GROUP_M)
        pid_m = first_m + (tile % rows)
        pid_n = (tile % per_group) // rows
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(k_tiles):
            a = a_desc.load([pid_m * BM, kk * BK])
            b = b_desc.load([kk * BK, pid_n * BN])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.bfloat16))


def triton_matmul(a, b, c, BM: int = 128, BN: int = 256, BK: int = 64, stages: int = 3,
                  num_sms: int = 132) -> None:
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK])
    b_desc = TensorDescriptor.from_tensor(b, [BK, BN])
    c_desc = TensorDescriptor.from_tensor(c, [BM, BN])
    m, k = a.shape
    n = b.shape[1]
    grid = (min(num_sms, triton.cdiv(m, BM) * triton.cdiv(n, BN)),)
    _matmul_persistent[grid](a_desc, b_desc, c_desc, m, n, k, BM, BN, BK, 8, num_sms,
                             num_stages=stages, num_warps=8)
