"""The reduction of an SMEM -> GMEM copy, as the hardware performs it.

Expects: an `asyncdsl.async_copy` whose `reduction` names the user's op.
Gives: the op the `asyncdsl.tma_store` carries and the tensor-map type its descriptor is encoded
with (`asyncdsl.hw.reduction.ALLOWED`), or a CopyError saying why the pair is refused.

Example: `async_copy(buf, y.at[...], reduction="min")` with `y: int32` becomes

    "asyncdsl.tma_store"(%buf, ...) <{descriptor = #asyncdsl.tma_desc<arg = 1, dtype = 3, ...>,
        reduction = "smin", ...}>

(dtype 3 is INT32: signed min needs the signed map; a plain int32 store would use UINT32, 2).
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.hw import reduction


@dataclass(frozen=True)
class HardwareReduction:
    op: str  # the name the tma_store carries (signedness spelled out for integers)
    type_code: int  # the CUtensorMapDataType the descriptor is encoded with


def hardware_reduction(copy: ir.AsyncCopyOp) -> HardwareReduction | None:
    """The reduction `copy` performs, or None for a plain copy (raises CopyError if refused)."""
    if copy.reduction is None:
        return None
    dtype = dtypes.from_mlir(ir.shaped_type(copy.gmem.type).element_type)
    return HardwareReduction(*reduction.resolve(copy.reduction.data, dtype))
