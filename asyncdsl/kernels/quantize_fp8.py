"""Row-wise FP8 quantisation, for FP8 training and inference: `q, scales =
asyncdsl.kernels.quantize_fp8(x)`.  Per row of the bfloat16 matrix x, scale = max|x| / 448 and
q = x / scale as float8_e4m3fn (saturating); q is (M, N), the scales (M,) float32.  An all-zero
row gets scale 0 and zeros (no division by zero).

`choose(N)` picks the kernel for the rows' length.  `rowwise_fp8_quant` takes one row a CTA (one
warpgroup) and moves it between GMEM and registers directly (16-byte `ld.global.v4` a thread, no
shared memory, no barrier).  A row of up to CHUNK elements is read into registers once: the
absolute maximum (lane shuffles, then one exchange between the warps), the factor 448 / max and
the conversion (`cvt.rn.satfinite.e4m3x2`, two elements at once) all happen there.  Longer rows
take two sweeps of CHUNK-wide windows, the second reading the row again (from L2), unless a
quarter of the row is whole 1024-element steps: then `rowwise_fp8_quant_split` holds the row in
registers once, spread over four warpgroups whose maxima meet in shared memory (two sweeps
measured slower: docs/hardware.md §19).  Rows longer than RING_FROM go through
`rowwise_fp8_quant_ring`, persistent CTAs with the next rows in flight in shared memory
(`asyncdsl.blocks.row_ring`).  Rows of PAIRS_FROM + 1 to PAIRS_UP_TO elements go two to a CTA of
two warpgroups (`rowwise_fp8_quant_pairs`).  A window may run past the row's end: those elements
are never touched, so any row length works.

The measurements behind these choices are in docs/notes/2026-12-04-row-kernel-choices.md.
"""

from __future__ import annotations

import numpy as np

from asyncdsl.blocks.row_reductions import across_warpgroups, combine
from asyncdsl.blocks.row_ring import RowRing
from asyncdsl.blocks.shapes import check_rows, row_length
from asyncdsl.errors import is_int, user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import Kernel, kernel
from asyncdsl.jit.persistent import persistent_grid
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import apart, empty

E4M3_MAX = 448.0
CHUNK = 8192  # elements of a row held in registers at once: 64 per thread
PARTS = 4  # warpgroups sharing one longer row in `rowwise_fp8_quant_split` and `_ring`
# Rows longer than this whose quarters are whole 1024-element steps go to the split kernel, which
# measured faster than one warpgroup a row when compiled whole-program (docs/hardware.md §19).
SPLIT_FROM = 4096
# Rows longer than this go through the ring, which measured faster than the split kernel on rows
# of 32768, level at 16384 and slower below (docs/hardware.md §19).
RING_FROM = 16384
# Rows of more than PAIRS_FROM and at most PAIRS_UP_TO elements go two to a CTA, which measured
# faster than one row a CTA for rows of 4096 and slower for 2048 and 8192 (docs/hardware.md §19).
PAIRS_FROM, PAIRS_UP_TO = 2048, 4096


@on_stream
def quantize_fp8(x, *, out=None, stream=None):
    """(q, scales): the rows of the matrix x quantised to float8_e4m3fn and their float32 scales,
    in new arrays beside x or in `out` = (q, scales)."""
    chosen, constexprs = choose(row_length("x", x))
    if out is None:
        out = empty(x, x.shape, ad.float8_e4m3fn), empty(x, x.shape[:1], ad.float32)
    elif not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ad.ArgumentError(f"out is the pair (q, scales), got {type(out).__name__}", user_location())
    else:  # the scales are written while the rows are read
        apart(out[0], x=x)
        apart(out[1], x=x, q=out[0])
    q, scales = out
    if x.shape[0]:  # no rows, nothing to launch
        launch(chosen, x, q, scales, stream=stream, **constexprs)
    return q, scales


def choose(n: int) -> tuple[Kernel, dict]:
    """The kernel and constexprs for rows of n elements: rows longer than SPLIT_FROM whose quarters
    are whole 1024-element steps go to `rowwise_fp8_quant_split` (held in registers at once, by
    four warpgroups; one warpgroup would read rows longer than CHUNK twice), and of those the ones
    longer than RING_FROM to `rowwise_fp8_quant_ring`, which keeps the next rows' loads in flight;
    rows of PAIRS_FROM + 1 to PAIRS_UP_TO elements go two to a CTA (`rowwise_fp8_quant_pairs`)."""
    if SPLIT_FROM < n <= PARTS * CHUNK and n % (PARTS * 1024) == 0:
        return (rowwise_fp8_quant_ring, {}) if n > RING_FROM else (rowwise_fp8_quant_split, {})
    if PAIRS_FROM < n <= PAIRS_UP_TO:
        return rowwise_fp8_quant_pairs, {}
    return rowwise_fp8_quant, {}


@kernel(grid=lambda x, q, scales, **_: (x.shape[0],), block=128)
def rowwise_fp8_quant(x, q, scales, CHUNK: constexpr = CHUNK):
    """One row a CTA, in windows of up to CHUNK elements (a multiple of 1024)."""
    _check(x, q, scales)
    if not is_int(CHUNK) or CHUNK <= 0 or CHUNK % 1024:
        raise ad.TraceError(f"CHUNK must be a positive multiple of 1024 (a window is whole 16-byte vectors "
                            f"of all 128 threads), got {CHUNK!r}", user_location())
    _quantize_row(x, q, scales, ad.ds(ad.program_id(0), 1), CHUNK)


@kernel(grid=lambda x, q, scales: (ad.cdiv(x.shape[0], 2),), block=256)
def rowwise_fp8_quant_pairs(x, q, scales):
    """Two rows a CTA, one a warpgroup, each quantised on its own as `rowwise_fp8_quant` does (a
    second row past the array's end is never read or written)."""
    _check(x, q, scales)
    _quantize_row(x, q, scales, ad.ds(ad.program_id(0) * 2 + ad.warpgroup_idx(), 1), CHUNK)


def _check(x, q, scales) -> None:
    """The kernels' arguments (`check_rows`), x floating point and q float8_e4m3fn: the rows are
    converted to q's type, so a uint8 or int8 q (fp8 bytes as some code holds them) would get
    rounded integers, and an int16 x would be read as integers, not as bfloat16's bits."""
    check_rows(("x", x), ("q", q), ("scales", scales))
    if x.dtype not in (ad.bfloat16, ad.float16, ad.float32) or q.dtype != ad.float8_e4m3fn:
        raise ad.TraceError(f"x must be bfloat16, float16 or float32 and q float8_e4m3fn, got {x.dtype} and "
                            f"{q.dtype}", user_location())


def _quantize_row(x, q, scales, row, chunk: int) -> None:
    """One warpgroup quantises `row` (a one-row slice) of x into q and its scale into scales."""
    n = x.shape[1]
    # Windows of whole 1024-element steps (8 per thread: one 16-byte vector) covering the row.
    width = min(chunk, ad.cdiv(n, 1024) * 1024)
    windows = [(row, ad.ds(start, width)) for start in range(0, n, width)]
    first = ad.load(x.at[windows[0]]).astype(ad.float32)
    peak = abs(first)
    for window in windows[1:]:
        peak = ad.maximum(peak, abs(ad.load(x.at[window]).astype(ad.float32)))
    amax = peak.max(axis=1)
    factor = _factor(amax)
    for window in windows:  # a row in one window is still in registers; longer ones are read again
        v = first if len(windows) == 1 else ad.load(x.at[window]).astype(ad.float32)
        ad.store(q.at[window], (v * factor).astype(q.dtype))
    ad.store(scales.at[row], amax * (1.0 / E4M3_MAX))


@kernel(grid=lambda x, q, scales: (x.shape[0],), block=128 * PARTS)
def rowwise_fp8_quant_split(x, q, scales):
    """One row a CTA of PARTS warpgroups: warpgroup w holds its share of the row, elements
    [w·n/PARTS, (w+1)·n/PARTS), in registers; the shares' absolute maxima meet in shared memory
    and all take the largest in the same order, so they scale by the same factor."""
    _check(x, q, scales)
    share = x.shape[1] // PARTS
    row = ad.ds(ad.program_id(0), 1)
    me = ad.warpgroup_idx()
    window = (row, ad.ds(me * share, share))
    v = ad.load(x.at[window]).astype(ad.float32)
    peaks = ad.smem((PARTS, 1), ad.float32)
    amax = across_warpgroups(peaks, me, abs(v).max(axis=1), ad.maximum)
    factor = _factor(amax)
    ad.store(q.at[window], (v * factor).astype(q.dtype))
    with ad.when(me == 0):
        ad.store(scales.at[row], amax * (1.0 / E4M3_MAX))


@kernel(grid=persistent_grid, block=128 * PARTS)
def rowwise_fp8_quant_ring(x, q, scales, STAGES: constexpr = 3):
    """Persistent: each CTA walks its rows (`RowRing`) with STAGES of them in flight through
    shared memory, warpgroup w holding the row's w-th quarter in registers; the quarters'
    maxima meet in shared memory (two sets, taken in turns: a warpgroup may write the next
    row's before the others read this one's), and all take the largest in the same order.
    Rows of any multiple of 512 elements up to 32768 (64 per thread; STAGES slots of a row
    each must fit in shared memory)."""
    _check(x, q, scales)
    ring = RowRing(x, STAGES, PARTS)
    peaks = ad.smem((2, PARTS, 1), ad.float32)
    for t in ad.range(ring.count):
        v = ring.share(t).astype(ad.float32)
        peaks.at[t % 2, ring.me][...] = abs(v).max(axis=1)
        ring.release(t)  # also: every quarter's maximum is in `peaks`
        amax = combine(peaks.at[t % 2], ad.maximum)
        row = ring.row(t)
        ad.store(q.at[row, ring.columns()], (v * _factor(amax)).astype(q.dtype))
        with ad.when(ring.me == 0):
            ad.store(scales.at[row], amax * (1.0 / E4M3_MAX))


def _factor(amax):
    """What each row is multiplied by, from its absolute maximum: 448 / amax (IEEE division, as
    `reference` computes it), 0 for an all-zero row; a column, to broadcast over the row."""
    return ad.where(amax > 0.0, E4M3_MAX / amax, 0.0)[:, None]


def reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(q, scales) as numpy computes them, in float32 with IEEE division: what the kernels give
    bit for bit."""
    import ml_dtypes  # not at module level: importing it costs more than the whole kernel library

    wide = x.astype(np.float32)
    amax = np.abs(wide).max(axis=1)
    factor = np.where(amax > 0, np.float32(E4M3_MAX) / np.maximum(amax, np.float32(1e-30)),
                      0).astype(np.float32)
    scaled = np.clip(wide * factor[:, None], -E4M3_MAX, E4M3_MAX)
    return scaled.astype(ml_dtypes.float8_e4m3fn), (amax * np.float32(1 / E4M3_MAX)).astype(np.float32)


def _specs(rows: int, n: int) -> tuple:
    return (ArraySpec((rows, n), ad.bfloat16), ArraySpec((rows, n), ad.float8_e4m3fn),
            ArraySpec((rows,), ad.float32))


# Arguments `asyncdsl dump` traces each kernel with.
EXAMPLE_ARGS = {"rowwise_fp8_quant": (_specs(64, 3000), {"CHUNK": 1024}),
                # an odd number of rows: the last CTA's second row is past the end
                "rowwise_fp8_quant_pairs": (_specs(5, 2000), {}),
                "rowwise_fp8_quant_ring": (_specs(5, 2048), {"STAGES": 2}),
                "rowwise_fp8_quant_split": (_specs(5, 4096), {})}
