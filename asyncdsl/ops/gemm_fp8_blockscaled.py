"""The block-scaled fp8 matrix multiply of DeepSeek-V3's recipe as a torch operator, for serving:
`c = asyncdsl.ops.gemm_fp8_blockscaled(a, a_scales, b, b_scales)`, DeepGEMM's meaning.

The operator is `asyncdsl.kernels.gemm_fp8_blockscaled` registered with `torch.library`
(`asyncdsl::gemm_fp8_blockscaled`) with a fake implementation: `torch.compile(fullgraph=True)`
traces through it and CUDA graphs capture it, since its tiles and its split of K follow from the
shapes alone and nothing is read back to the host.  `a_scales` goes in as laid out: M-major
(DeepGEMM's layout) is read in place, a row-major one is copied into that layout by a small
kernel each call.  It has no backward pass: fp8 inference does not train.
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.torch import library_call, library_op


def gemm_fp8_blockscaled(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor,
                         b_scales: torch.Tensor) -> torch.Tensor:
    """a (M, K) times b (N, K)ᵀ, float8_e4m3fn, each 128-deep slice of the product scaled by
    a_scales (M, K/128) float32 (a scale a row and 128 of K) and b_scales (N/128, K/128) float32
    (a scale a 128 x 128 block of b); returns c (M, N) bfloat16."""
    return gemm_fp8_blockscaled_op(a, a_scales, b, b_scales)


def _multiply(a, a_scales, b, b_scales):
    return library_call(kernels.gemm_fp8_blockscaled, a.contiguous(), a_scales, b.contiguous(), b_scales)


gemm_fp8_blockscaled_op = library_op(
    "asyncdsl::gemm_fp8_blockscaled", _multiply,
    fake=lambda a, a_scales, b, b_scales: a.new_empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16),
    schema="(Tensor a, Tensor a_scales, Tensor b, Tensor b_scales) -> Tensor")
