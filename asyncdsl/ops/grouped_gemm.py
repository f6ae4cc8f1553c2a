"""The grouped GEMM of a mixture-of-experts layer as a torch operator:
`c = asyncdsl.ops.grouped_gemm(a, b, offsets)`, `torch._grouped_mm`'s meaning.

The operator is `asyncdsl.kernels.grouped_gemm` registered with `torch.library`
(`asyncdsl::grouped_gemm`) with a fake implementation: `torch.compile(fullgraph=True)` traces
through it and CUDA graphs capture it, since the group sizes stay on the device.  It has no
backward pass (the weights' gradient is a GEMM grouped along the reduction, which the library
does not have).
"""

from __future__ import annotations

import torch

from asyncdsl import kernels
from asyncdsl.torch import library_call, library_op


def grouped_gemm(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Rows offsets[g-1]:offsets[g] of a (rows, K) times b[g] (groups, K, N), for each group g
    (offsets: the int32 cumulative ends of the groups, on the device, group 0 starting at row 0);
    returns c (rows, N) in a's dtype."""
    return grouped_gemm_op(a, b, offsets)


def _multiply(a, b, offsets):
    return library_call(kernels.grouped_gemm, a.contiguous(), b.contiguous(), offsets)


grouped_gemm_op = library_op("asyncdsl::grouped_gemm", _multiply,
                             fake=lambda a, b, offsets: a.new_empty((a.shape[0], b.shape[2])),
                             schema="(Tensor a, Tensor b, Tensor offsets) -> Tensor")
