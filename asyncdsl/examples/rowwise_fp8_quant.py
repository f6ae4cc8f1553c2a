"""Row-wise FP8 quantisation: per row, scale = max|x| / 448, q = x / scale as float8_e4m3fn
(saturating), for FP8 training and inference.  Outputs q (M, N) and the scales (M,) in float32.

Each CTA (one warpgroup) takes one row and moves it between GMEM and registers directly
(`asyncdsl.load` / `asyncdsl.store` of a window of the row: 16-byte `ld.global.v4` per thread,
no shared memory, no barrier).  A row of up to CHUNK elements is read into registers once: the
absolute maximum (lane shuffles, then one exchange between the warps), the factor 448 / max and
the conversion (`cvt.rn.satfinite.e4m3x2`, two elements at once) all happen there.  Longer rows
take two sweeps of CHUNK-wide windows, the second reading the row again (from L2), unless a
quarter of the row is whole 1024-element steps: then `rowwise_fp8_quant_split` holds the row in
registers once, spread over four warpgroups whose maxima meet in shared memory (4096×16384 on the
H200: 1.02× Triton, where two sweeps measured 0.87×); it takes rows of 8192 too (SPLIT_FROM).
Rows longer than RING_FROM go through `rowwise_fp8_quant_ring`, persistent CTAs with the next
rows in flight in shared memory.  Rows of 2049-4096 elements go two to a CTA of two warpgroups
(`rowwise_fp8_quant_pairs`), each warpgroup quantising its own row as above: 3-4 % faster at
8192×4096 (PAIRS_FROM).  `quantize(x, q, scales)` picks the kernel for the rows' length.  A window may run
past the row's
end: those elements are never touched, so any row length works.  An all-zero row gets scale 0 and
zeros (no division by zero).  Measured on the H200 against the bulk-copy version this replaced
(the row through shared memory): 2-3 % faster (`benchmarks/register_tiles.py` has the same-run
comparison with Triton).

    python -m asyncdsl.examples.rowwise_fp8_quant     # on the GPU if there is one, else interpreted
"""

from __future__ import annotations

import sys
import time

import ml_dtypes
import numpy as np

import asyncdsl as ad
from asyncdsl.errors import user_location
from asyncdsl.examples.shapes import check_rows, row_length

E4M3_MAX = 448.0
CHUNK = 8192  # elements of a row held in registers at once: 64 per thread
PARTS = 4  # warpgroups sharing one longer row in `rowwise_fp8_quant_split` and `_ring`
# Rows longer than this whose quarters are whole 1024-element steps go to the split kernel: on the
# H200 (one process, Triton in the same run, 11 rounds, two repeats) 8192x8192 ran at 1.008x and
# 1.000x Triton against 0.993x and 0.991x for one warpgroup a row (compiled whole-program; through
# nvJitLink's relocatable compile the split kernel had 41 registers instead of 32 and ran at 0.81x,
# docs/notes/2026-12-03-row-kernels.md).
SPLIT_FROM = 4096
# Rows longer than this go through the ring: on the H200 (same run, CUDA events, L2 flush) it ran
# 2048x32768 at 1.02x Triton against 0.97x for the split kernel, 4096x16384 level with it
# (0.968x against 0.970x) and shorter rows slower (docs/notes/2026-12-03-row-kernels.md).
RING_FROM = 16384
# Rows of more than PAIRS_FROM and at most PAIRS_UP_TO elements go two to a CTA: on the H200 (same
# run, CUDA events, L2 flush, 15 rounds in turns, two repeats) 8192x4096 ran 3.1-3.7 % faster
# than one row a CTA (1.002x and 1.036x Triton), 16384x2048 14 % slower, 8192x8192 level or
# 1.7 % slower (docs/notes/2026-12-03-row-kernels.md).
PAIRS_FROM, PAIRS_UP_TO = 2048, 4096


@ad.kernel(grid=lambda x, q, scales, **_: (x.shape[0],), block=128)
def rowwise_fp8_quant(x, q, scales, CHUNK: ad.constexpr = CHUNK):
    check_rows(("x", x), ("q", q), ("scales", scales))
    _quantize_row(x, q, scales, ad.ds(ad.program_id(0), 1), CHUNK)


@ad.kernel(grid=lambda x, q, scales: (ad.cdiv(x.shape[0], 2),), block=256)
def rowwise_fp8_quant_pairs(x, q, scales):
    """Two rows a CTA, one a warpgroup, each quantised on its own as `rowwise_fp8_quant` does (a
    second row past the array's end is never read or written)."""
    check_rows(("x", x), ("q", q), ("scales", scales))
    _quantize_row(x, q, scales, ad.ds(ad.program_id(0) * 2 + ad.warpgroup_idx(), 1), CHUNK)


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


@ad.kernel(grid=lambda x, q, scales: (x.shape[0],), block=128 * PARTS)
def rowwise_fp8_quant_split(x, q, scales):
    """One row a CTA of PARTS warpgroups: warpgroup w holds its share of the row, elements
    [w·n/PARTS, (w+1)·n/PARTS), in registers and puts the share's absolute maximum in shared
    memory; all then take the largest of them in the same order, so they scale by the same
    factor."""
    check_rows(("x", x), ("q", q), ("scales", scales))
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


# -- RowRing: a persistent walk over the rows of a matrix through a ring of shared-memory slots ---
#
#     ring = RowRing(x, stages=3, parts=4)        # in a kernel of 4 warpgroups, grid=persistent_grid
#     for t in ad.range(ring.count):              # this CTA's rows: program_id, + num_programs, ...
#         v = ring.share(t)                       # waits for row t; this warpgroup's share of it
#         ring.release(t)                         # all have read row t: its slot takes row t + stages
#         ad.store(y.at[ring.row(t), ring.columns()], result)
#
# Each CTA keeps `stages` rows in flight: one bulk copy a row (no tensor map), issued as soon as
# the slot it lands in is free.  A row-at-a-time kernel without a ring has its next row's loads
# start only when a CTA ends and another begins; here they overlap this row's reductions and
# stores.  The warpgroups split each row into `parts` equal shares, warpgroup w holding columns
# [w·n/parts, (w+1)·n/parts) in registers.  `release(t)` is a CTA barrier: every thread's read of
# the slot is over before the copy that overwrites it is issued, and what the warpgroups wrote to
# shared memory before it (a share's maximum, say) is there for all after it.  A row needs a whole
# number of 16-byte pieces (bulk copies move those) and shares of a whole number of 128-element
# vectors (the register layouts' unit): rows of a multiple of 128·parts elements.


class RowRing:
    """This CTA's rows of the (rows, n) array `x`, `stages` of them in flight, each read as
    `parts` shares by as many warpgroups.  Call it at the kernel's top level."""

    def __init__(self, x, stages: int, parts: int):
        rows, n = x.shape
        if n % (128 * parts):  # an error at the kernel's line that made the ring
            raise ad.TraceError(f"RowRing: rows of {n} elements do not split into {parts} shares of a whole "
                                "number of 128-element vectors", user_location(skip=2))
        self.x, self.stages, self.share_size = x, stages, n // parts
        ctas, self._first = ad.num_programs(0), ad.program_id(0)
        self._ctas = ctas
        self.count = (rows - self._first + ctas - 1) // ctas  # rows first, first + ctas, ...
        # slots.at[s, 0, w]: share w of the row in slot s (the row as it lies, seen as shares)
        self._slots = ad.smem((stages, 1, parts, 1, self.share_size), x.dtype)
        self._landed = ad.barrier(num=stages)
        self.me = ad.warpgroup_idx()
        with ad.when(self.me == 0):
            for t in range(stages):
                with ad.when(self.count > t):
                    self._fetch(t)

    def row(self, t):
        """The row the CTA's t-th is, as a one-row slice."""
        return ad.ds(self._first + t * self._ctas, 1)

    def columns(self):
        """This warpgroup's columns."""
        return ad.ds(self.me * self.share_size, self.share_size)

    def share(self, t):
        """This warpgroup's share of the CTA's t-th row, as a (1, n / parts) tile, once it landed."""
        slot = t % self.stages
        self._landed[slot].wait()
        return self._slots.at[slot, 0, self.me][...]

    def release(self, t) -> None:
        """Every warpgroup is done reading row t (a CTA barrier): its slot takes row t + stages."""
        ad.cta_barrier()
        with ad.when((self.me == 0) & (t + self.stages < self.count)):
            self._fetch(t + self.stages)

    def _fetch(self, t) -> None:
        slot = t % self.stages
        ad.async_copy(self.x.at[self.row(t), :], self._slots.at[slot], barrier=self._landed[slot],
                      transforms=ad.TileTransform((1, self.share_size)), oob="undefined")


@ad.kernel(grid=ad.persistent_grid, block=128 * PARTS)
def rowwise_fp8_quant_ring(x, q, scales, STAGES: ad.constexpr = 3):
    """Persistent: each CTA walks its rows (`RowRing`) with STAGES of them in flight through
    shared memory, warpgroup w holding the row's w-th quarter in registers; the quarters'
    maxima meet in shared memory (two sets, taken in turns: a warpgroup may write the next
    row's before the others read this one's), and all take the largest in the same order.
    Rows of any multiple of 512 elements up to 32768 (64 per thread; STAGES slots of a row
    each must fit in shared memory).  It overlaps the next rows' loads with this row's
    reduction, which a row-a-CTA kernel leaves to CTA turnover: `quantize` picks it for rows
    longer than RING_FROM, where that paid on the H200."""
    check_rows(("x", x), ("q", q), ("scales", scales))
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


def quantize(x, q, scales, stream=None) -> None:
    """x's rows quantised into q, their scales into `scales`, with the kernel for their length."""
    kernel, constexprs = choose(row_length("x", x))
    kernel(x, q, scales, **constexprs, stream=stream)


def reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    wide = x.astype(np.float32)
    amax = np.abs(wide).max(axis=1)
    factor = np.where(amax > 0, np.float32(E4M3_MAX) / np.maximum(amax, np.float32(1e-30)),
                      0).astype(np.float32)
    scaled = np.clip(wide * factor[:, None], -E4M3_MAX, E4M3_MAX)
    return scaled.astype(ml_dtypes.float8_e4m3fn), (amax * np.float32(1 / E4M3_MAX)).astype(np.float32)


EXAMPLE_ARGS = {
    "rowwise_fp8_quant": (
        (ad.ArraySpec((64, 3000), ad.bfloat16), ad.ArraySpec((64, 3000), ad.float8_e4m3fn),
         ad.ArraySpec((64,), ad.float32)),
        {"CHUNK": 1024},
    ),
    "rowwise_fp8_quant_pairs": (  # an odd number of rows: the last CTA's second row is past the end
        (ad.ArraySpec((5, 2000), ad.bfloat16), ad.ArraySpec((5, 2000), ad.float8_e4m3fn),
         ad.ArraySpec((5,), ad.float32)),
        {},
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
    ok = (q.view(np.uint8).tobytes() == expected_q.view(np.uint8).tobytes()
          and np.array_equal(scales, expected_scales))
    print(f"rowwise_fp8_quant {shape} on the {where}: {'bit-exact' if ok else 'MISMATCH'} against numpy "
          f"({(time.perf_counter() - start) * 1e3:.1f} ms incl. compile)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
