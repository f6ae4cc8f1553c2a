"""Row-wise FP8 quantisation: per row, scale = max|x| / 448, q = x / scale as float8_e4m3fn
(saturating), for FP8 training and inference.  Outputs q (M, N) and the scales (M,) in float32.

Each CTA (one warpgroup) takes one row and moves it between GMEM and registers directly
(`asyncdsl.load` / `asyncdsl.store` of a window of the row: 16-byte `ld.global.v4` per thread,
no shared memory, no barrier).  A row of up to CHUNK elements is read into registers once: the
absolute maximum (lane shuffles, then one exchange between the warps), the factor 448 / max and
the conversion (`cvt.rn.satfinite.e4m3x2`) all happen there.  Longer rows take two sweeps of
CHUNK-wide windows, the second reading the row again (from L2), unless a quarter of the row is
whole 1024-element steps: then `rowwise_fp8_quant_split` holds the row in registers once, spread
over four warpgroups whose maxima meet in shared memory (4096×16384 on the H200: 0.98-1.00×
Triton against 0.87× for two sweeps; for rows up to CHUNK two or four warpgroups a row were no
faster or slower than one, docs/hardware.md §19).  `quantize(x, q, scales)` picks the kernel for
the rows' length.  A window may run past the row's end: those elements are never touched, so any
row length works.  An all-zero row gets scale 0 and zeros (no division by zero).  Measured on the
H200 against the bulk-copy version this replaced (the row through shared memory): 2-3 % faster
(`benchmarks/register_tiles.py` has the same-run comparison with Triton).

    python -m asyncdsl.examples.rowwise_fp8_quant     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.examples.row_ring import RowRing

E4M3_MAX = 448.0
CHUNK = 8192  # elements of a row held in registers at once: 64 per thread
PARTS = 4  # warpgroups sharing one longer row in `rowwise_fp8_quant_split`


@ad.kernel(grid=lambda x, q, scales, **_: (x.shape[0],), block=128)
def rowwise_fp8_quant(x, q, scales, CHUNK: ad.constexpr = CHUNK):
    n = x.shape[1]
    row = ad.ds(ad.program_id(0), 1)
    # Windows of whole 1024-element steps (8 per thread: one 16-byte vector) covering the row.
    width = min(CHUNK, ad.cdiv(n, 1024) * 1024)
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


@ad.kernel(grid=lambda x, q, scales: (x.shape[0],), block=128 * PARTS)
def rowwise_fp8_quant_split(x, q, scales):
    """One row a CTA of PARTS warpgroups: warpgroup w holds its share of the row, elements
    [w·n/PARTS, (w+1)·n/PARTS), in registers and puts the share's absolute maximum in shared
    memory; all then take the largest of them in the same order, so they scale by the same
    factor."""
    share = x.shape[1] // PARTS
    row = ad.ds(ad.program_id(0), 1)
    me = ad.warpgroup_idx()
    window = (row, ad.ds(me * share, share))
    v = ad.load(x.at[window]).astype(ad.float32)
    peaks = ad.smem((PARTS, 1), ad.float32)
    peaks.at[me][...] = abs(v).max(axis=1)
    ad.cta_barrier()
    amax = _largest(peaks)
    factor = _factor(amax)
    ad.store(q.at[window], (v * factor).astype(q.dtype))
    with ad.when(me == 0):
        ad.store(scales.at[row], amax * (1.0 / E4M3_MAX))


@ad.kernel(grid=ad.persistent_grid, block=128 * PARTS)
def rowwise_fp8_quant_ring(x, q, scales, STAGES: ad.constexpr = 3):
    """Persistent: each CTA walks its rows (`RowRing`) with STAGES of them in flight through
    shared memory, warpgroup w holding the row's w-th quarter in registers; the quarters'
    maxima meet in shared memory (two sets, taken in turns: a warpgroup may write the next
    row's before the others read this one's), and all take the largest in the same order.
    Rows of any multiple of 512 elements up to 32768 (64 per thread; STAGES slots of a row
    each must fit in shared memory).  It overlaps the next rows' loads with this row's
    reduction, which a row-a-CTA kernel leaves to CTA turnover; `quantize` does not pick it
    until a same-run benchmark against Triton on the H200 says it is faster
    (`benchmarks/register_tiles.py`)."""
    ring = RowRing(x, STAGES, PARTS)
    peaks = ad.smem((2, PARTS, 1), ad.float32)
    for t in ad.range(ring.count):
        v = ring.share(t).astype(ad.float32)
        peaks.at[t % 2, ring.me][...] = abs(v).max(axis=1)
        ring.release(t)  # also: every quarter's maximum is in `peaks`
        amax = _largest(peaks.at[t % 2])
        row = ring.row(t)
        ad.store(q.at[row, ring.columns()], (v * _factor(amax)).astype(q.dtype))
        with ad.when(ring.me == 0):
            ad.store(scales.at[row], amax * (1.0 / E4M3_MAX))


def _largest(peaks):
    """The largest of the warpgroups' maxima in `peaks` ((PARTS, 1) shared memory), taken in
    the same order by every warpgroup, so that all scale by the same factor."""
    amax = peaks.at[0][...]
    for part in range(1, PARTS):
        amax = ad.maximum(amax, peaks.at[part][...])
    return amax


def _factor(amax):
    """What each row is multiplied by, from its absolute maximum: 448 / amax (IEEE division, as
    `reference` computes it), 0 for an all-zero row; a column, to broadcast over the row."""
    return ad.where(amax > 0.0, E4M3_MAX / amax, 0.0)[:, None]


def choose(n: int) -> tuple[ad.Kernel, dict]:
    """The kernel and constexprs for rows of n elements: rows longer than CHUNK whose quarters are
    whole 1024-element steps go to `rowwise_fp8_quant_split` (held in registers at once, by four
    warpgroups, instead of read twice by one)."""
    if CHUNK < n <= PARTS * CHUNK and n % (PARTS * 1024) == 0:
        return rowwise_fp8_quant_split, {}
    return rowwise_fp8_quant, {}


def quantize(x, q, scales, stream=None) -> None:
    """x's rows quantised into q, their scales into `scales`, with the kernel for their length."""
    kernel, constexprs = choose(x.shape[1])
    kernel(x, q, scales, **constexprs, stream=stream)


def reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    wide = x.astype(np.float32)
    amax = np.abs(wide).max(axis=1)
    factor = np.where(amax > 0, np.float32(E4M3_MAX) / np.maximum(amax, np.float32(1e-30)), 0).astype(np.float32)
    scaled = np.clip(wide * factor[:, None], -E4M3_MAX, E4M3_MAX)
    return scaled.astype(ml_dtypes.float8_e4m3fn), (amax * np.float32(1 / E4M3_MAX)).astype(np.float32)


EXAMPLE_ARGS = {
    "rowwise_fp8_quant": (
        (ad.ArraySpec((64, 3000), ad.bfloat16), ad.ArraySpec((64, 3000), ad.float8_e4m3fn), ad.ArraySpec((64,), ad.float32)),
        {"CHUNK": 1024},
    ),
    "rowwise_fp8_quant_ring": (
        (ad.ArraySpec((5, 2048), ad.bfloat16), ad.ArraySpec((5, 2048), ad.float8_e4m3fn),
         ad.ArraySpec((5,), ad.float32)),
        {"STAGES": 2},
    ),
    "rowwise_fp8_quant_split": (
        (ad.ArraySpec((5, 4096), ad.bfloat16), ad.ArraySpec((5, 4096), ad.float8_e4m3fn),
         ad.ArraySpec((5,), ad.float32)),
        {},
    ),
}


def main(shape=(64, 10000)) -> int:
    from asyncdsl.runtime import has_gpu

    x = (np.random.default_rng(0).standard_normal(shape) * 10).astype(ml_dtypes.bfloat16)
    x[3] = 0  # an all-zero row
    q = np.zeros(shape, ml_dtypes.float8_e4m3fn)
    scales = np.full(shape[0], np.nan, np.float32)
    start = time.perf_counter()
    if has_gpu():
        from asyncdsl.runtime import to_device, to_host

        q_d, s_d = to_device(q), to_device(scales)
        quantize(to_device(x), q_d, s_d)
        q, scales, where = to_host(q_d), to_host(s_d), "GPU"
    else:
        kernel, constexprs = choose(shape[1])
        kernel.interpret(x, q, scales, **constexprs)
        where = "interpreter"
    expected_q, expected_scales = reference(x)
    ok = q.view(np.uint8).tobytes() == expected_q.view(np.uint8).tobytes() and np.array_equal(scales, expected_scales)
    print(f"rowwise_fp8_quant {shape} on the {where}: {'bit-exact' if ok else 'MISMATCH'} against numpy "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
