"""The grouped GEMM of a mixture-of-experts layer as torch operators:
`c = asyncdsl.ops.grouped_gemm(a, b, offsets)`, `torch._grouped_mm`'s meaning, and
`c = asyncdsl.ops.grouped_gemm_masked(a, b, counts)`, the masked layout of a fixed capacity a
group (decode under CUDA graphs).

The operators are `asyncdsl.kernels.grouped_gemm` and `asyncdsl.kernels.grouped_gemm_masked`
registered with `torch.library` (`asyncdsl::grouped_gemm`, `asyncdsl::grouped_gemm_masked`) with
fake implementations: `torch.compile(fullgraph=True)` traces through them and CUDA graphs capture
them, since the group sizes stay on the device.  Rows of c that no group covers (past
offsets[G-1]; past counts[g] in group g) are not written: they hold whatever the new tensor
held, as DeepGEMM's masked GEMM leaves them, and a layer reads only its groups' rows.  They have
no backward pass (the weights' gradient is a GEMM grouped along the reduction, which the library
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


def grouped_gemm_masked(a: torch.Tensor, b: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """The first counts[g] rows of a[g] (a (groups, capacity, K)) times b[g] (groups, K, N), for
    each group g (counts: int32 (groups,), on the device); returns c (groups, capacity, N) in a's
    dtype."""
    return grouped_gemm_masked_op(a, b, counts)


def _multiply(a, b, offsets):
    return library_call(kernels.grouped_gemm, a.contiguous(), b.contiguous(), offsets)


def _multiply_masked(a, b, counts):
    return library_call(kernels.grouped_gemm_masked, a.contiguous(), b.contiguous(), counts)


grouped_gemm_op = library_op("asyncdsl::grouped_gemm", _multiply,
                             fake=lambda a, b, offsets: a.new_empty((a.shape[0], b.shape[2])),
                             schema="(Tensor a, Tensor b, Tensor offsets) -> Tensor")

grouped_gemm_masked_op = library_op(
    "asyncdsl::grouped_gemm_masked", _multiply_masked,
    fake=lambda a, b, counts: a.new_empty((a.shape[0], a.shape[1], b.shape[2])),
    schema="(Tensor a, Tensor b, Tensor counts) -> Tensor")
