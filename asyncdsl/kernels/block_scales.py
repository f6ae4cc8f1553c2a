"""Block scales as the block-scaled fp8 kernels read them: a float32 scale per group of 128
elements of a row (a's scales, (M, K/128)) or per 128 x 128 block (b's, (N/128, K/128)), laid out
so that TMA copies the scales of one K block: the (K/128, M') array a's scales are the transpose of
(M-major, M' = M rounded up to 4 for TMA's 16-byte rows), b's row-major with K/128 rounded up;
and `reference`, the product such scales define, in float64.

    from asyncdsl.kernels.block_scales import check_scale_shapes, tma_layout

    check_scale_shapes(a, a_scales, b, b_scales)      # host side, before any padding
    sa, sb = tma_layout(a_scales), tma_layout(b_scales.T)
"""

from __future__ import annotations

from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.kernels.outputs import contiguous, empty


def check_scale_shapes(a, a_scales, b, b_scales, block: int = 128) -> None:
    """Refuse scales that are not (M, K/block) and (N/block, K/block) for a (M, K) and b (N, K)
    before they are laid out for a kernel (where padding would hide the mismatch)."""
    (m, k), n = a.shape, b.shape[0]
    k_blocks = -(-k // block)
    for name, scales, shape, each in (("a_scales", a_scales, (m, k_blocks), "row and 128 of K"),
                                      ("b_scales", b_scales, (-(-n // block), k_blocks), "block of b")):
        if tuple(scales.shape) != shape:
            raise ad.ArgumentError(f"{name} must be {shape} (one scale a {each}) for a {tuple(a.shape)} and "
                                   f"b {tuple(b.shape)}, got {tuple(scales.shape)}", user_location())


def tma_layout(scales):
    """`scales` (rows, blocks) as the kernel reads them: the (blocks, rows') array it is the
    transpose of, rows' the rows rounded up to 4 (TMA copies rows of a multiple of 16 bytes).
    A transposed view of such an array (or of its first rows) passes unchanged; anything else is
    copied into one, zeros in the padding."""
    rows, blocks = scales.shape
    base, padded = scales.T, -(-rows // 4) * 4
    if rows == padded and contiguous(base):
        return base
    if _padded_view(base, padded):  # a torch view of the first rows of a padded array: the array
        return base.as_strided((blocks, padded), (padded, 1))
    fresh = empty(scales, (blocks, padded), ad.float32)
    fresh[...] = 0
    fresh[:, :rows] = base
    return fresh


def _padded_view(array, padded: int) -> bool:
    """Whether torch tensor `array` (blocks, rows) lies in rows of `padded` elements of a storage
    that holds all of them."""
    stride = getattr(array, "stride", None)
    if not callable(stride) or stride() != (padded, 1):
        return False
    end = (array.storage_offset() + array.shape[0] * padded) * array.element_size()
    return end <= array.untyped_storage().nbytes()


def reference(a, a_scales, b, b_scales):
    """The block-scaled product a (M, K) times b (N, K)ᵀ in float64, each 128-deep block of K
    scaled by its row's and block's scales (a_scales (M, K/128), b_scales (N/128, K/128)),
    rounded to bf16 once: what the block-scaled kernels compute."""
    import ml_dtypes
    import numpy as np

    (m, k), n = a.shape, b.shape[0]
    total = np.zeros((m, n))
    for kb in range(-(-k // 128)):
        part = slice(kb * 128, (kb + 1) * 128)
        product = a[:, part].astype(np.float64) @ b[:, part].astype(np.float64).T
        column_scales = np.repeat(b_scales[:, kb].astype(np.float64), 128)[:n]
        total += product * a_scales[:, kb].astype(np.float64)[:, None] * column_scales[None, :]
    return total.astype(ml_dtypes.bfloat16)
