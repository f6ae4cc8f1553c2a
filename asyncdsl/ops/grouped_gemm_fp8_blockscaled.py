"""The block-scaled fp8 grouped GEMM of a mixture-of-experts layer as torch operators, for
serving: `c = asyncdsl.ops.grouped_gemm_fp8_blockscaled(a, a_scales, b, b_scales, offsets)` (the
groups' rows one group after the other) and
`c = asyncdsl.ops.grouped_gemm_fp8_blockscaled_masked(a, a_scales, b, b_scales, counts)` (a fixed
capacity a group), DeepGEMM's grouped fp8 GEMMs.

The operators are `asyncdsl.kernels.grouped_gemm_fp8_blockscaled` and
`asyncdsl.kernels.grouped_gemm_fp8_blockscaled_masked` registered with `torch.library`
(`asyncdsl::grouped_gemm_fp8_blockscaled`, `asyncdsl::grouped_gemm_fp8_blockscaled_masked`) with
fake implementations: `torch.compile(fullgraph=True)` traces through them and CUDA graphs capture
them, since the group sizes stay on the device.  The scales are `asyncdsl.ops.gemm_fp8_blockscaled`'s,
b's a group.  Rows of c that no group covers are not written, as in `asyncdsl.ops.grouped_gemm`.
They have no backward pass: fp8 inference does not train.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.torch import library_call, library_op


def grouped_gemm_fp8_blockscaled(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor,
                                 b_scales: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Rows offsets[g-1]:offsets[g] of a (rows, K) times b[g]ᵀ (b (groups, N, K)), float8_e4m3fn,
    block-scaled by a_scales (rows, K/128) and b_scales (groups, N/128, K/128) float32, for each
    group g (offsets: the int32 cumulative ends of the groups, on the device); N a multiple of 128;
    returns c (rows, N) bfloat16."""
    return grouped_gemm_fp8_blockscaled_op(a, a_scales, b, b_scales, offsets)


def grouped_gemm_fp8_blockscaled_masked(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor,
                                        b_scales: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """The first counts[g] rows of a[g] (a (groups, capacity, K)) times b[g]ᵀ (b (groups, N, K)),
    float8_e4m3fn, block-scaled by a_scales (groups, capacity, K/128) and b_scales (groups, N/128,
    K/128) float32, for each group g (counts: int32 (groups,), on the device); returns c (groups,
    capacity, N) bfloat16."""
    return grouped_gemm_fp8_blockscaled_masked_op(a, a_scales, b, b_scales, counts)


def _multiply(a, a_scales, b, b_scales, offsets):
    return library_call(kernels.grouped_gemm_fp8_blockscaled, a.contiguous(), a_scales, b.contiguous(),
                        b_scales, offsets)


def _multiply_masked(a, a_scales, b, b_scales, counts):
    return library_call(kernels.grouped_gemm_fp8_blockscaled_masked, a.contiguous(), a_scales,
                        b.contiguous(), b_scales, counts)


grouped_gemm_fp8_blockscaled_op = library_op(
    "asyncdsl::grouped_gemm_fp8_blockscaled", _multiply,
    fake=lambda a, a_scales, b, b_scales, offsets: a.new_empty((a.shape[0], b.shape[1]),
                                                               dtype=torch.bfloat16),
    schema="(Tensor a, Tensor a_scales, Tensor b, Tensor b_scales, Tensor offsets) -> Tensor")

grouped_gemm_fp8_blockscaled_masked_op = library_op(
    "asyncdsl::grouped_gemm_fp8_blockscaled_masked", _multiply_masked,
    fake=lambda a, a_scales, b, b_scales, counts: a.new_empty((a.shape[0], a.shape[1], b.shape[1]),
                                                              dtype=torch.bfloat16),
    schema="(Tensor a, Tensor a_scales, Tensor b, Tensor b_scales, Tensor counts) -> Tensor")
