"""The operands of a tensor-core GEMM: how they lie in shared memory, and the checks that a, b
and c make c = a @ b.

    from asyncdsl.blocks.mma_operands import check_operands, tensor_core_layout

    a_ring = ad.smem((STAGES, BM, BK), a.dtype, **tensor_core_layout(BM))   # in a kernel body
    check_operands(a, b, c, CTAS)                   # K agrees, c is (M, N), 16-byte rows
"""

from __future__ import annotations

from asyncdsl.frontend import language as ad


def tensor_core_layout(rows: int, columns: int = 64) -> dict:
    """Columns of `columns` elements (one 128-byte swizzled row each: 64 bf16, 128 fp8, 32 f32),
    one column after the other: how the tensor cores read an operand, and what one TMA box per
    column lands (arrays that are not a whole number of tiles are copied so,
    `passes/resolve/tile_boxes.py`)."""
    return dict(transforms=ad.TileTransform((rows, columns)), swizzle=128)


def as_read(slice_, transposed: bool):
    """An operand's slice in shared memory as the tensor cores take it: its `.T` where it lies
    transposed (an a slice of (K, M), a b slice of (N, K))."""
    return slice_.T if transposed else slice_


def check_operands(a, b, c, CTAS, rows=None, b_is_transposed=False, a_is_transposed=False) -> None:
    """Refuse, at trace time, arrays that do not make c = a @ b: matrices whose K differ, or a c
    of another shape, would otherwise be multiplied as far as the smaller reaches, the rest of c
    left as it was.  a is (M, K), or (K, M) when `a_is_transposed`; b is (K, N), or (N, K) when
    `b_is_transposed`; c has `rows` rows (a's by default).  Every row a whole number of 16-byte
    pieces (TMA's rule); CTAS, the CTAs walking the tiles, a positive int."""
    if isinstance(CTAS, bool) or not isinstance(CTAS, int) or CTAS < 1:
        raise ad.TraceError(f"CTAS (how many CTAs walk the tiles) must be a positive int, got {CTAS!r}")
    for name, array in (("a", a), ("b", b), ("c", c)):
        if len(array.shape) != 2:
            raise ad.TraceError(f"{name} must be a matrix, got shape {tuple(array.shape)}")
    m, k = reversed(a.shape) if a_is_transposed else a.shape
    n, b_k = b.shape if b_is_transposed else reversed(b.shape)
    if b_k != k:
        form = "(N, K)" if b_is_transposed else "(K, N)"
        raise ad.TraceError(f"a is {'(K, M)' if a_is_transposed else '(M, K)'} = {tuple(a.shape)} and b is "
                            f"{form} = {tuple(b.shape)}: their K differ")
    wanted = (m if rows is None else rows, n)
    if tuple(c.shape) != wanted:
        raise ad.TraceError(f"c must be (M, N) = {wanted} for a {tuple(a.shape)} and b {tuple(b.shape)}, "
                            f"got {tuple(c.shape)}")
    for name, array in (("a", a), ("b", b), ("c", c)):
        row_bytes = array.shape[1] * array.dtype.itemsize
        if row_bytes % 16:
            raise ad.TraceError(f"{name}'s rows are {row_bytes} bytes ({array.shape[1]} {array.dtype}): TMA "
                                "copies rows of a multiple of 16 bytes (a multiple of "
                                f"{16 // array.dtype.itemsize} elements of {array.dtype})")


def check_16_bit(a, b, c, c_float32: bool = False, c_float8: bool = False) -> None:
    """Refuse, at trace time, element types the bf16 GEMM's layouts do not hold: a and b both
    bfloat16 or both float16 (64 to a 128-byte row, as the tensor cores read them), c bfloat16 or
    float16 (64 x 64 pieces of 128-byte rows), or float32 where `c_float32` (split K adding into c),
    or float8_e4m3fn where `c_float8` (a quantised product)."""
    if a.dtype not in (ad.bfloat16, ad.float16) or b.dtype != a.dtype:
        raise ad.TraceError(f"a and b must both be bfloat16 or both float16, got {a.dtype} and {b.dtype}")
    if c_float8:
        if c.dtype != ad.float8_e4m3fn:
            raise ad.TraceError(f"c must be float8_e4m3fn (the quantised product), got {c.dtype}")
        return
    if c_float32 and c.dtype != ad.float32:
        raise ad.TraceError("SPLIT_K > 1 adds the splits' parts into c, which must be float32, not "
                            f"{c.dtype} (matmul_split_k ends in bfloat16 or float16)")
    if not c_float32 and c.dtype not in (ad.bfloat16, ad.float16):
        raise ad.TraceError(f"c must be bfloat16 or float16 (matmul with SPLIT_K adds into a float32 c), "
                            f"got {c.dtype}")


def check_fp8_operands(a, b, a_scale, b_scale, c, CTAS) -> None:
    """Refuse, at trace time, what the fp8 GEMMs do not multiply: besides `check_fp8_matrices`,
    scales that are not float32 one a row."""
    check_fp8_matrices(a, b, c, CTAS)
    for name, scale, length in (("a_scale", a_scale, a.shape[0]), ("b_scale", b_scale, b.shape[0])):
        if tuple(scale.shape) != (length,) or scale.dtype != ad.float32:
            raise ad.TraceError(f"{name} must be float32 of shape ({length},), one scale a row, got "
                                f"{scale.dtype} {tuple(scale.shape)}")


def check_fp8_matrices(a, b, c, CTAS) -> None:
    """Refuse, at trace time, besides what `check_operands` refuses (b is (N, K)), a and b not
    float8, a c that is not 16-bit."""
    check_operands(a, b, c, CTAS, b_is_transposed=True)
    fp8 = (ad.float8_e4m3fn, ad.float8_e5m2)
    if a.dtype not in fp8 or b.dtype not in fp8:
        raise ad.TraceError(
            f"a and b must be float8 (e4m3fn or e5m2, either for each), got {a.dtype} and {b.dtype}")
    if c.dtype not in (ad.bfloat16, ad.float16):  # 64 x 64 pieces of 128-byte rows
        raise ad.TraceError(f"c must be bfloat16 or float16, got {c.dtype}")


def check_block_scales(a, a_scales, b, b_scales, block: int = 128, pad: int = 4) -> None:
    """Refuse, at trace time, block scales that do not fit a (M, K) and b (N, K) as the
    block-scaled GEMM reads them: a_scales float32 (K/block, M') with M' >= M (one scale a row
    and block of K, M-major), b_scales float32 (N/block, K'/block) with K'/block >= K/block (one
    a block x block block of b), the padded extents multiples of `pad` (16-byte rows for TMA);
    the block counts round up."""
    (m, k), n = a.shape, b.shape[0]
    k_blocks, n_blocks = -(-k // block), -(-n // block)
    for name, scales, (blocks, least) in (("a_scales", a_scales, (k_blocks, m)),
                                          ("b_scales", b_scales, (n_blocks, k_blocks))):
        shape = tuple(scales.shape)
        if scales.dtype != ad.float32 or len(shape) != 2 or shape[0] != blocks or shape[1] < least \
                or shape[1] % pad:
            raise ad.TraceError(f"{name} must be float32 ({blocks}, {least} rounded up to a multiple of "
                                f"{pad} or more) for a {tuple(a.shape)} and b {tuple(b.shape)} in blocks of "
                                f"{block}, got {scales.dtype} {shape}")
