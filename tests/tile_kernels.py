"""Register-tile kernels shared by the CPU suites (tracing, layouts, PTX, interpreter) and the GPU
suite (bit-exact against the interpreter): every elementwise op, every conversion and every
reduction, for each dtype and register layout, plus a loop that accumulates in registers."""

from __future__ import annotations

import operator

import ml_dtypes
import numpy as np

import asyncdsl as ad

R, C = 64, 128  # a tile every layout below holds
LAYOUTS = {"wgmma": ad.WGMMA, "strided": ad.strided(4), "row": None}  # None: inferred (row layout)
REDUCIBLE = ("wgmma", "row")  # a strided tile reduces over all its axes only
COMPUTE = (ad.float32, ad.bfloat16, ad.float16, ad.int32)


def _where_less(a, b, c):
    return ad.where(a < b, a, c)


def _compare(op):
    def make(a, b, c):
        return ad.where(op(a, b), ad.full(a.shape, 1, a.dtype), ad.zeros(a.shape, a.dtype))

    return make


# Each takes three tiles of one dtype and gives a tile of that dtype.
FLOAT_OPS = {
    "add": lambda a, b, c: a + b,
    "sub": lambda a, b, c: a - b,
    "mul": lambda a, b, c: a * b,
    "div": lambda a, b, c: a / b,
    # by powers of two: lowered as products by the exact reciprocal, which round alike
    "div_power_of_two": lambda a, b, c: a / 4.0,
    "div_small_power_of_two": lambda a, b, c: a / -0.125,
    "fma": lambda a, b, c: ad.fma(a, b, c),
    "sqrt": lambda a, b, c: ad.sqrt(a),
    "mul_add": lambda a, b, c: a * b + c,
    "neg": lambda a, b, c: -a,
    "abs": lambda a, b, c: abs(a),
    # abs whose users cannot see a NaN's bits (lowered to `abs.f32`) and one whose user can
    "abs_maximum": lambda a, b, c: ad.maximum(abs(a), b),
    "abs_sub": lambda a, b, c: b - abs(a),
    "abs_where": lambda a, b, c: ad.where(a < b, abs(a), c),
    "maximum": lambda a, b, c: ad.maximum(a, b),
    "minimum": lambda a, b, c: ad.minimum(a, b),
    "scalar": lambda a, b, c: 2.5 * a - 1.0,
    "where_less": _where_less,
    "where_not_less": lambda a, b, c: ad.where(~(a < b), a, c),  # a mask negated: true on NaN
    **{f"cmp_{name}": _compare(op) for name, op in (
        ("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
        ("eq", operator.eq), ("ne", operator.ne))},
}
INT_OPS = {
    "add": lambda a, b, c: a + b,
    "sub": lambda a, b, c: a - b,
    "mul": lambda a, b, c: a * b,
    "neg": lambda a, b, c: -a,
    "abs": lambda a, b, c: abs(a),
    "and": lambda a, b, c: a & b,
    "or": lambda a, b, c: a | b,
    "xor": lambda a, b, c: a ^ b,
    "invert": lambda a, b, c: ~a,
    # Divisors that are never 0 (whose quotient PTX leaves undefined): b, with 0 replaced.
    "floordiv": lambda a, b, c: a // ad.where(b == 0, 7, b),
    "mod": lambda a, b, c: a % ad.where(b == 0, -7, b),
    "floordiv_constant": lambda a, b, c: a // -3 + a // 8,
    "mod_constant": lambda a, b, c: a % 10 + (a % -16) * 3,
    # positive constants: shifts for powers of two, unsigned divisions of a's magnitude otherwise
    "floordiv_positive": lambda a, b, c: a // 7 + a // 1 + a // 2**30 + a // 1000003,
    "mod_positive": lambda a, b, c: a % 7 - a % 64 + a % (2**31 - 1),
    # negative constants: unsigned divisions of (a - 1) or -a, whichever is the magnitude
    "floordiv_negative": lambda a, b, c: a // -7 + a // -1 + a // -(2**31) + a // -1000003 + a // -8,
    "mod_negative": lambda a, b, c: a % -7 - a % -64 + a % -(2**31 - 1),
    "rfloordiv": lambda a, b, c: 1000 // ad.where(b == 0, 3, b),
    # Any amount: negative ones read unsigned and, like 32 and more, shift every bit out.
    "shl": lambda a, b, c: a << b,
    "shr": lambda a, b, c: a >> b,
    "shl_small": lambda a, b, c: a << (b & 31),
    "shr_small": lambda a, b, c: a >> (b & 31),
    "maximum": lambda a, b, c: ad.maximum(a, b),
    "minimum": lambda a, b, c: ad.minimum(a, b),
    "scalar": lambda a, b, c: 3 * a - 7,
    "where_less": _where_less,
    **{f"cmp_{name}": _compare(op) for name, op in (
        ("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
        ("eq", operator.eq), ("ne", operator.ne))},
}
APPROX_OPS = {  # float32 only; within a bound, not bit-exact
    "exp2": lambda a, b, c: ad.exp2(a),
    "exp2_approx": lambda a, b, c: ad.exp2(a, approx=True),
    "log2": lambda a, b, c: ad.log2(a),
    "log2_approx": lambda a, b, c: ad.log2(a, approx=True),
    "rsqrt": lambda a, b, c: ad.rsqrt(a),
    "rsqrt_approx": lambda a, b, c: ad.rsqrt(a, approx=True),
    "sqrt_approx": lambda a, b, c: ad.sqrt(a, approx=True),
    # built on exp2 and log2 (COMPOSED): within a bound of the true function, not its rounding
    "exp": lambda a, b, c: ad.exp(a),
    "exp_approx": lambda a, b, c: ad.exp(a, approx=True),
    "log": lambda a, b, c: ad.log(a),
    "log_approx": lambda a, b, c: ad.log(a, approx=True),
    "tanh": lambda a, b, c: ad.tanh(a, approx=True),
    "sin": lambda a, b, c: ad.sin(a, approx=True),
    "cos": lambda a, b, c: ad.cos(a, approx=True),
    # composed of other tile ops (COMPOSED): tanh through exp, sin and cos of exact ops only
    "tanh_exact": lambda a, b, c: ad.tanh(a),
    "sin_exact": lambda a, b, c: ad.sin(a),
    "cos_exact": lambda a, b, c: ad.cos(a),
}


COMPOSED = ("exp", "exp_approx", "log", "log_approx", "tanh_exact", "sin_exact", "cos_exact")


def ops_of(dtype) -> dict:
    return INT_OPS if dtype == ad.int32 else FLOAT_OPS


@ad.kernel(grid=(1,))
def op_matrix(a, b, c, out, OPS: ad.constexpr, LAYOUT: ad.constexpr):
    """out[i] = OPS[i](a, b, c), the operands read in register layout LAYOUT."""
    table = {**FLOAT_OPS, **APPROX_OPS} if a.dtype != ad.int32 else INT_OPS
    bufs = [ad.smem((R, C), a.dtype) for _ in range(3)]
    result = ad.smem((R, C), a.dtype)
    bar = ad.barrier()
    for source, buf in zip((a, b, c), bufs):
        ad.async_copy(source.at[:, :], buf, barrier=bar, arrive=False)
    bar.arrive_expect_tx(3 * R * C * a.dtype.itemsize)
    bar.wait()
    for position, name in enumerate(OPS):
        # Operands loaded for each op, not once for all: three float32 tiles held across every op
        # and a result take all 255 registers a thread has, and the kernel would spill.
        x, y, z = (buf.load(layout=LAYOUTS[LAYOUT]) for buf in bufs)
        result[...] = table[name](x, y, z)
        ad.fence_async_smem()
        ad.async_copy(result, out.at[position])
        ad.await_async_copy(0, read_only=True)


@ad.kernel(grid=(2,))
def index_on_the_left(a, out):
    """A traced index and Python numbers on the left of an int32 tile's operators: CTA p writes
    out[p] = (i // a, i % a, i << a, i >> a, 6 & a, i ^ a) for i = p + 5 (a's zeros avoided),
    on a's first R // 2 rows (a division an element: 64 of them a thread would spill)."""
    t = ad.load(a.at[ad.ds(0, R // 2), :])
    t = ad.where(t == 0, 9, t)
    i = ad.program_id(0) + 5
    for position, value in enumerate((lambda: i // t, lambda: i % t, lambda: i << t, lambda: i >> t,
                                      lambda: 6 & t, lambda: i ^ t)):
        ad.store(out.at[ad.program_id(0), position], value())


@ad.kernel(grid=(2,))
def traced_scalars_with_tiles(x, y, s: float):
    """Traced scalars (a runtime float, a traced index) on either side of float32 tiles, and
    `where` choosing between two scalars: numpy's rules, the scalar taking the tile's dtype."""
    t = ad.load(x.at[:, :])
    i = ad.program_id(0) + 3
    values = (lambda: s - t, lambda: i / t, lambda: ad.maximum(s, t), lambda: ad.where(s < t, 1.0, 0),
              lambda: ad.where(t > 3, i, -1).astype(ad.float32), lambda: ad.where(i == t, s, 2.5))
    for position, value in enumerate(values):
        ad.store(y.at[ad.program_id(0), position], value())


@ad.kernel(grid=(1,))
def convert(a, out, LAYOUT: ad.constexpr):
    """out = a.astype(out.dtype), read in LAYOUT."""
    source = ad.smem((R, C), a.dtype)
    target = ad.smem((R, C), out.dtype)
    bar = ad.barrier()
    ad.async_copy(a.at[:, :], source, barrier=bar)
    bar.wait()
    target[...] = source.load(layout=LAYOUTS[LAYOUT]).astype(out.dtype)
    ad.fence_async_smem()
    ad.async_copy(target, out.at[:, :])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def reductions(a, rows, columns, LAYOUT: ad.constexpr):
    """rows[k] = reduction k (sum, max, min) over axis 1; columns[k] over axis 0."""
    source = ad.smem((R, C), a.dtype)
    row_out = ad.smem((R,), a.dtype)
    column_out = ad.smem((C,), a.dtype)
    bar = ad.barrier()
    ad.async_copy(a.at[:, :], source, barrier=bar)
    bar.wait()
    x = source.load(layout=LAYOUTS[LAYOUT])
    for position, kind in enumerate(("sum", "max", "min")):
        row_out[...] = getattr(x, kind)(axis=1)
        column_out[...] = getattr(x, kind)(axis=0)
        ad.fence_async_smem()
        ad.async_copy(row_out, rows.at[position])
        ad.async_copy(column_out, columns.at[position])
        ad.await_async_copy(0, read_only=True)


@ad.kernel(grid=(1,))
def broadcast_back(a, out, LAYOUT: ad.constexpr):
    """out = (a - a.max(axis=1)[:, None]) * a.sum(axis=0)[None, :]: broadcasts of reductions."""
    source = ad.smem((R, C), a.dtype)
    bar = ad.barrier()
    ad.async_copy(a.at[:, :], source, barrier=bar)
    bar.wait()
    x = source.load(layout=LAYOUTS[LAYOUT])
    source[...] = (x - x.max(axis=1)[:, None]) * x.sum(axis=0)[None, :]
    ad.fence_async_smem()
    ad.async_copy(source, out.at[:, :])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def relayout(a, out, SOURCE: ad.constexpr, TARGET: ad.constexpr):
    """out = a, through registers in SOURCE then TARGET layout, plus its iota coordinates."""
    source = ad.smem((R, C), a.dtype)
    bar = ad.barrier()
    ad.async_copy(a.at[:, :], source, barrier=bar)
    bar.wait()
    x = source.load(layout=LAYOUTS[SOURCE]).to_layout(LAYOUTS[TARGET] or ad.WGMMA)
    column = ad.iota((R, C), ad.int32, dim=1, layout=LAYOUTS[TARGET] or ad.WGMMA)
    source[...] = x + column.astype(a.dtype)
    ad.fence_async_smem()
    ad.async_copy(source, out.at[:, :])
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def mask_relayout(a, out, SOURCE: ad.constexpr, TARGET: ad.constexpr):
    """out = where(a > 0, a, row index): a mask made in SOURCE layout and used in TARGET's, so it
    moves through the scratch, as 0s and 1s (no instruction stores a predicate)."""
    target = LAYOUTS[TARGET] or ad.WGMMA
    positive = (ad.load(a.at[:, :], layout=LAYOUTS[SOURCE]) > 0.0).to_layout(target)
    row = ad.iota((R, C), ad.int32, dim=0, layout=target).astype(ad.float32)
    ad.store(out.at[:, :], ad.where(positive, ad.load(a.at[:, :], layout=target), row))


# The spellings of an int32 negation, the constant on either side or broadcast from size-1 dims.
NEGATIONS = {
    "neg": lambda t: -t,
    "zero_minus": lambda t: 0 - t,
    "times_minus_one": lambda t: t * -1,
    "minus_one_times": lambda t: -1 * t,
    "broadcast_zero_minus": lambda t: ad.full((1, t.shape[1]), 0, ad.int32) - t,
    "times_broadcast_minus_one": lambda t: t * ad.full((t.shape[0], 1), -1, ad.int32),
}


# Integer ops with a constant that only look like a negation, each with its numpy reference.
NOT_NEGATIONS = {
    "five_minus": (lambda t: 5 - t, lambda x: 5 - x),
    "minus_zero": (lambda t: t - 0, lambda x: x),
    "times_one": (lambda t: t * 1, lambda x: x),
    # a sum of two -1s broadcast: -2, not the -1 of the `full` under it
    "times_summed_minus_ones": (
        lambda t: t * ad.full((t.shape[0], 2), -1, ad.int32).sum(axis=1, keepdims=True), lambda x: x * -2),
}


@ad.kernel(grid=(1,))
def not_negated(x, y, FORM: ad.constexpr):
    ad.store(y.at[:, :], NOT_NEGATIONS[FORM][0](ad.load(x.at[:, :])))


@ad.kernel(grid=(1,))
def negated_extremes(x, y, FORM: ad.constexpr):
    """An int32 tile negated (one of `NEGATIONS`) then shifted by its maximum and minimum: the
    pattern ptxas miscompiles when it folds the negation into a min/max (docs/hardware.md §20)."""
    t = NEGATIONS[FORM](ad.load(x.at[:, :]))
    ad.store(y.at[:, :], t + t.max() - t.min())


@ad.kernel(grid=(1,))
def accumulate(x, y):
    """y = sum over k of x[k] (bf16 stages, float32 sum in registers across a loop), scaled by
    the program id through a splat of a traced index."""
    stages = ad.smem(x.shape, x.dtype)
    out = ad.smem(y.shape, y.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[:, :, :], stages, barrier=bar)
    bar.wait()
    total = ad.registers(y.shape, ad.float32)
    total[...] = ad.zeros(y.shape, ad.float32)
    for k in ad.range(x.shape[0]):
        total[...] = total[...] + stages.at[k][...].astype(ad.float32)
    out[...] = total[...] * ad.full(y.shape, ad.program_id(0) + 2, ad.float32)
    ad.fence_async_smem()
    ad.async_copy(out, y.at[:, :])
    ad.await_async_copy(0)


def special_values(dtype: ad.DType, shape, seed: int) -> np.ndarray:
    """Random values of `dtype` with ±0, ±inf, NaN, subnormals and extremes mixed in (floats),
    or the full int32 range with its extremes."""
    rng = np.random.default_rng(seed)
    count = int(np.prod(shape))
    if dtype == ad.int32:
        values = rng.integers(-(2**31), 2**31, count, dtype=np.int64)
        values[rng.random(count) < 0.5] //= 2**20  # small values too, so products stay in range often
        values[:8] = [0, 1, -1, 2**31 - 1, -(2**31), 7, -7, 3]
        return values.astype(np.int32).reshape(shape)
    info = ml_dtypes.finfo(dtype.numpy)
    values = (rng.standard_normal(count) * 4).astype(np.float64)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, float(info.smallest_subnormal),
                         -float(info.smallest_subnormal), float(info.max), -float(info.max),
                         float(info.tiny), 1.0, -1.0, 0.5])
    picks = rng.random(count) < 0.15
    values[picks] = rng.choice(specials, int(picks.sum()))
    tiny = rng.random(count) < 0.05
    values[tiny] *= float(info.tiny)  # subnormal results and operands
    values = values.astype(dtype.numpy)
    if dtype.numpy.itemsize >= 2:  # NaNs with the sign set and a payload (float8 NaNs have none)
        bits = values.view(f"u{dtype.numpy.itemsize}")
        width, mantissa = 8 * dtype.numpy.itemsize, info.nmant
        signed_nan = ((1 << (width - mantissa)) - 1) << mantissa
        marked = rng.random(count) < 0.02
        payloads = rng.integers(1, 1 << mantissa, int(marked.sum()))
        bits[marked] = (signed_nan | payloads).astype(bits.dtype)
    return values.reshape(shape)


@ad.kernel(grid=lambda x, y, ROWS, COLUMNS: (ad.cdiv(x.shape[0], ROWS),))
def masked_rows(x, y, ROWS: ad.constexpr, COLUMNS: ad.constexpr):
    """y = where(x > 0, 2x, -1) on rows of any length (a stride TMA cannot take): a (ROWS, COLUMNS)
    window per CTA, read and written element by element; the window runs past the last row and
    the row's end, where nothing is read (those elements hold `other`) or written; odd columns
    are masked off in the store."""
    window = x.at[ad.ds(ad.program_id(0) * ROWS, ROWS), ad.ds(0, COLUMNS)]
    t = ad.load(window, other=-3.0)
    columns = ad.iota(t.shape, ad.int32, dim=1)
    doubled = ad.where(t > 0.0, t * 2.0, ad.full(t.shape, -1.0, t.dtype))
    ad.store(y.at[ad.ds(ad.program_id(0) * ROWS, ROWS), ad.ds(0, COLUMNS)], doubled, mask=(columns & 1) == 0)


def masked_rows_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = y.copy()
    doubled = np.where(x > 0, x * np.float32(2), np.float32(-1)).astype(x.dtype)
    out[:, 0::2] = doubled[:, 0::2]
    return out


@ad.kernel(grid=(1,))
def gmem_round_trip(x, y, LAYOUT: ad.constexpr):
    """y[1:] = x[1:] * 2 (a literal window inside the array: vector accesses) and y[0] = x[0, ::]
    read through a squeezed index."""
    rows, columns = x.shape
    body = ad.load(x.at[ad.ds(1, rows - 1), :], layout=LAYOUTS[LAYOUT])
    ad.store(y.at[ad.ds(1, rows - 1), :], body * 2)
    ad.store(y.at[0, :], ad.load(x.at[ad.program_id(0), :]))


@ad.kernel(grid=lambda x, y, EXTRA: (x.shape[0] + EXTRA,))
def rows_past_the_end(x, y, EXTRA: ad.constexpr):
    """y[i] = x[i] * 2 + 1 by CTA i, with EXTRA CTAs past the last row: whole-row windows at a
    traced row move in guarded vectors; past the end nothing is read (the load gives -1) or
    written."""
    row = ad.ds(ad.program_id(0), 1)
    ad.store(y.at[row, :], ad.load(x.at[row, :], other=-1.0) * 2 + 1)


@ad.kernel(grid=lambda x, y, WIDTH: (x.shape[0], ad.cdiv(x.shape[1], WIDTH) + 1))
def column_blocks(x, y, WIDTH: ad.constexpr):
    """y = x * 2 + 1 by blocks of WIDTH columns at traced starts (program_id * WIDTH: multiples of
    the vector), one block column past the end: where rows are a multiple of 8 elements the
    blocks move in guarded vectors, whole vectors inside or outside the row."""
    window = (ad.ds(ad.program_id(0), 1), ad.ds(ad.program_id(1) * WIDTH, WIDTH))
    ad.store(y.at[window], ad.load(x.at[window], layout=ad.strided(8), other=-1.0) * 2 + 1)


@ad.kernel(grid=lambda x, totals, peaks, corner: (x.shape[0] + 1,))
def strided_row_totals(x, totals, peaks, corner):
    """totals[i], peaks[i] = sum and max of row i, read in 8-element vectors (a strided tile,
    which reduces to a splat) and stored as one-element windows by CTA i (one CTA past the last
    row stores nothing); CTA 0 also writes 2.5 into the 3x5 corner at (1, 2) of `corner`, which
    the array clips."""
    row = ad.ds(ad.program_id(0), 1)
    v = ad.load(x.at[row, :], layout=ad.strided(8)).astype(ad.float32)
    ad.store(totals.at[row], v.sum(axis=1))
    ad.store(peaks.at[row], v.max(axis=1))
    with ad.when(ad.program_id(0) == 0):
        ad.store(corner.at[ad.ds(1, 3), ad.ds(2, 5)], ad.full((3, 5), 2.5, ad.float32))


@ad.kernel(grid=lambda x, peaks, y: (x.shape[0],), block=256)
def split_row_peaks(x, peaks, y):
    """Row i of x split between two warpgroups, each holding its half as a strided tile (which
    reduces to a splat); the halves' maxima meet in shared memory, and both read them back:
    peaks[i] = max of the row, y = x - peaks[i]."""
    half = x.shape[1] // 2
    row = ad.ds(ad.program_id(0), 1)
    me = ad.warpgroup_idx()
    window = (row, ad.ds(me * half, half))
    v = ad.load(x.at[window], layout=ad.strided(8)).astype(ad.float32)
    halves = ad.smem((2, 1), ad.float32)
    halves.at[me][...] = v.max(axis=1)
    ad.cta_barrier()
    peak = ad.maximum(halves.at[0][...], halves.at[1][...])
    ad.store(y.at[window], (v - peak[:, None]).astype(y.dtype))
    with ad.when(me == 0):
        ad.store(peaks.at[row], peak)


@ad.kernel(grid=(1,))
def unit_axis_peaks(x, y, THROUGH_SMEM: ad.constexpr):
    """y = x * max(x, axis=0)[None, :] for x of one row, in 8-element vectors: the reduction over
    the unit axis combines nothing and the broadcast puts it back in place.  THROUGH_SMEM: x goes
    through shared memory first and the tile read back takes its layout from what it meets (the
    broadcast back into its own class)."""
    if THROUGH_SMEM:
        staged = ad.smem(x.shape, x.dtype)
        staged[...] = ad.load(x.at[:, :], layout=ad.strided(8))
        ad.cta_barrier()
        t = staged[...].astype(ad.float32)
    else:
        t = ad.load(x.at[:, :], layout=ad.strided(8)).astype(ad.float32)
    ad.store(y.at[:, :], t * t.max(axis=0)[None, :])


@ad.kernel(grid=(1,))
def small_tiles(x, totals, y, THROUGH_SMEM: ad.constexpr):
    """For a (4, 8) x, fewer elements than the warpgroup has threads, which every thread then holds
    whole: totals = x's row totals + their row numbers (an iota of 4), y = x - totals[:, None] +
    x's column peaks[None, :].  THROUGH_SMEM: x is staged in shared memory, row by row."""
    if THROUGH_SMEM:
        staged = ad.smem(x.shape, x.dtype)
        staged[...] = ad.load(x.at[:, :])
        ad.cta_barrier()
        t = ad.zeros(x.shape, ad.float32) + staged[...]
        t = ad.where(ad.iota(x.shape, ad.int32, dim=0) == 1, staged.at[1][...][None, :], t)
    else:
        t = ad.load(x.at[:, :])
    rows = t.sum(axis=1) + ad.iota((x.shape[0],), ad.int32, dim=0).astype(ad.float32)
    ad.store(totals.at[:], rows)
    ad.store(y.at[:, :], t - rows[:, None] + t.max(axis=0)[None, :])


@ad.kernel(grid=(1,))
def nested_totals(x, totals, y):
    """For a (4, 8, 32) x: totals = x.sum(axis=2).sum(axis=1), the second reduction over every
    dim the first left to the warps and lanes (only the leading dim is left, in every thread's
    registers), and y = x - totals[:, None, None]."""
    t = ad.load(x.at[:, :, :])
    whole = t.sum(axis=2).sum(axis=1)
    ad.store(totals.at[:], whole)
    ad.store(y.at[:, :, :], t - whole[:, None, None])


@ad.kernel(grid=(1,))
def unsigned_storage(x, keep, y, z):
    """For a uint8 image x and a numpy bool array keep (bytes): y = where(keep, x / 2, -1) in
    float32, z = x * 3 - 300 as uint16 (wrapping) and x * 1.5 as uint8 (saturating), side by side:
    every conversion zero-extends or saturates unsigned."""
    t = ad.load(x.at[:, :])
    half = t.astype(ad.float32) * 0.5
    mask = ad.load(keep.at[:, :]).astype(ad.int32) != 0
    ad.store(y.at[:, :], ad.where(mask, half, -1.0))
    ad.store(z.at[0], (t.astype(ad.int32) * 3 - 300).astype(ad.uint16))
    ad.store(z.at[1], (half * 3.0).astype(ad.uint8).astype(ad.uint16))


def unsigned_storage_reference(x: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = x.astype(np.float32) * np.float32(0.5)
    wrapped = (x.astype(np.int64) * 3 - 300) % 2**16
    saturated = np.clip(np.trunc(half * np.float32(3)), 0, 255)
    return np.where(keep, half, np.float32(-1)), np.stack([wrapped, saturated]).astype(np.uint16)


@ad.kernel(grid=(1,))
def arg_extrema(x, rows_max, columns_min, means, LAYOUT: ad.constexpr):
    """rows_max = x.argmax(axis=1), columns_min = x.argmin(axis=0) (int32, numpy's first index; a
    NaN wins) and, for float x, means = x.mean(axis=1), x.mean(axis=0) and x.mean() one after
    another in x's dtype; x read in LAYOUT (one that reduces along either axis)."""
    rows, columns = x.shape
    t = ad.load(x.at[:, :], layout=LAYOUTS[LAYOUT])
    ad.store(rows_max.at[:], t.argmax(axis=1))
    ad.store(columns_min.at[:], t.argmin(axis=-2))
    if t.dtype.is_float:
        ad.store(means.at[ad.ds(0, rows)], t.mean(axis=1))
        ad.store(means.at[ad.ds(rows, columns)], t.mean(axis=0))
        ad.store(means.at[rows + columns], t.mean())


@ad.kernel(grid=(1,))
def scaled_rows(scale, x, y, z):
    """y = x * scale[:, None] for a narrow x (rows of a few elements) and z = x[0] + shift +
    shift.sum() for shift = x's first row, a vector both broadcast over the rows and reduced."""
    t = ad.load(x.at[:, :])
    ad.store(y.at[:, :], t * ad.load(scale.at[:])[:, None])
    shift = ad.load(x.at[0, :])
    ad.store(z.at[:, :], ad.load(x.at[:, :]) + shift + shift.sum())  # a tile of its own


@ad.kernel(grid=(1,))
def numpy_idioms(x, y, flags, z):
    """numpy's spellings on a (rows, 128) float32 x: keepdims, `...` and a leading None, numpy
    scalars on either side, ** 2 and ** 0.5 and ** -1, any/all/sum of a mask, masks of size-1
    dims stretched in where, load and store (z's odd rows and last column keep their value)."""
    rows = x.shape[0]
    t = ad.load(x.at[:, :])
    centred = t - t.max(axis=1, keepdims=True) + t[None].sum(axis=0) * np.float32(0.5)
    ad.store(y.at[0], centred - t.mean(axis=0)[None, ...] * 2)
    ad.store(y.at[1], abs(t) ** 0.5 + t ** 2 - np.float32(3) * (t + 0.5) ** -1)
    big = t > 5.0
    ad.store(flags.at[0], big.any(axis=1).astype(ad.int32))
    ad.store(flags.at[1], big.all(axis=1, keepdims=True).astype(ad.int32).sum(axis=1))
    ad.store(flags.at[2], big.sum(axis=1))
    even = ad.iota((rows, 1), ad.int32, dim=0) % 2 == 0
    inner = ad.iota((1, 128), ad.int32, dim=1) < 127
    ad.store(z.at[:, :], ad.where(even, ad.load(x.at[:, :], mask=inner, other=-1.0), 7.0), mask=even)


def numpy_idioms_reference(x: np.ndarray, z: np.ndarray):
    y0 = x - x.max(axis=1, keepdims=True) + x * np.float32(0.5) - x.mean(axis=0, dtype=np.float32)[None] * 2
    y1 = np.sqrt(np.abs(x)) + x * x - np.float32(3) * (np.float32(1) / (x + np.float32(0.5)))
    big = x > 5
    flags = np.stack([big.any(axis=1), big.all(axis=1), big.sum(axis=1)]).astype(np.int32)
    expected_z = z.copy()
    expected_z[::2] = np.where(np.arange(128) < 127, x, -1.0)[::2]
    return np.stack([y0, y1]).astype(np.float32), flags, expected_z


@ad.kernel(grid=(1,))
def running_total(x, y):
    """y[0] = the total of x, two rows at a time into 0-d registers; y[1] the largest row total."""
    total, peak = ad.registers((), ad.float32), ad.registers((), ad.float32)
    total[...], peak[...] = ad.zeros((), ad.float32), ad.full((), -np.inf, ad.float32)
    for i in ad.range(x.shape[0] // 2):
        rows = ad.load(x.at[ad.ds(i * 2, 2), :])
        total[...] = total[...] + rows.sum()
        peak[...] = ad.maximum(peak[...], rows.sum(axis=1).max())
    ad.store(y.at[0], total[...])
    ad.store(y.at[1], peak[...])


@ad.kernel(grid=lambda x, y: (ad.cdiv(x.shape[0], 2),))
def byte_pairs(x, y):
    """y = x + 1 for 8-bit x, two rows a CTA, in a layout of 2-element vectors: each access is a
    halfword holding two elements (rows of an even length), or one byte (odd)."""
    rows = ad.ds(ad.program_id(0) * 2, 2)
    t = ad.load(x.at[rows, ad.ds(0, 1024)], layout=ad.strided(2), other=0)
    ad.store(y.at[rows, ad.ds(0, 1024)], (t.astype(ad.int32) + 1).astype(y.dtype))


@ad.kernel(grid=(1,))
def whole_tile_totals(a, totals, centred, LAYOUT: ad.constexpr):
    """totals[k] = reduction k (sum, max, min) of all of `a`, each a 0-d tile stored as one
    element, totals[3] = max - min; centred = (a - max) * (max - min) + a[-1, -1]: 0-d tiles
    broadcast back, the last one read from a GMEM window of one element."""
    x = ad.load(a.at[:, :], layout=LAYOUTS[LAYOUT])
    for position, kind in enumerate(("sum", "max", "min")):
        ad.store(totals.at[position], getattr(x, kind)())
    spread = x.max() - x.min()
    ad.store(totals.at[ad.ds(3, 1)], spread)
    ad.store(centred.at[:, :], (x - x.max()) * spread + ad.load(a.at[R - 1, C - 1]))


@ad.kernel(grid=(3,))
def splat_windows(y, SHAPE: ad.constexpr):
    """CTA c writes c + 1 into a SHAPE window of `y` at (3c, 200) (the last rows and columns past
    y's end are skipped), the 0-d total 10 + c at (4c, 0) (past the end for c = 2), and 20 + c
    at (c, 1) where c is odd (a splat mask)."""
    c = ad.program_id(0)
    ad.store(y.at[ad.ds(c * 3, SHAPE[0]), ad.ds(200, SHAPE[1])], ad.full(SHAPE, 1.0, y.dtype) + c)
    ad.store(y.at[c * 4, 0], ad.full((4, 4), 10.0, y.dtype).max() + c)
    ad.store(y.at[c, 1], ad.full((), 20.0, y.dtype) + c, mask=ad.full((), c % 2, ad.int32) == 1)


def splat_windows_reference(y: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    y = y.copy()
    for c in range(3):
        y[c * 3:c * 3 + shape[0], 200:200 + shape[1]] = c + 1
        if c * 4 < y.shape[0]:
            y[c * 4, 0] = 10 + c
        if c % 2:
            y[c, 1] = 20 + c
    return y


@ad.kernel(grid=(1,))
def splat_at(y, row: int, col: int, value: float, SHAPE: ad.constexpr):
    """`value` into the SHAPE window of `y` at (row, col) (run-time arguments, either may be
    negative), where the window meets the array."""
    ad.store(y.at[ad.ds(row, SHAPE[0]), ad.ds(col, SHAPE[1])], ad.full(SHAPE, value, y.dtype))


def splat_at_reference(y: np.ndarray, row: int, col: int, value: float, shape: tuple[int, int]) -> np.ndarray:
    y = y.copy()
    rows = range(max(row, 0), min(row + shape[0], y.shape[0]))
    columns = range(max(col, 0), min(col + shape[1], y.shape[1]))
    y[np.ix_(rows, columns)] = value
    return y


@ad.kernel(grid=(1,))
def window_affine(x, y, SHAPE: ad.constexpr):
    """y = 2x + 1 over the SHAPE window at (1, 3), in the layout infer-layouts picks: the row
    layout where the strided one would not address the window alike in every thread (rows of 160)."""
    window = (ad.ds(1, SHAPE[0]), ad.ds(3, SHAPE[1]))
    ad.store(y.at[window], ad.load(x.at[window]) * 2.0 + 1.0)


@ad.kernel(grid=(1,))
def add_row_and_column(x, row, column, y):
    """y = x + row (broadcast down the rows, numpy's rules) + column[:, None], every operand read
    from GMEM: the vectors take the lanes or warps of the matrix's row layout."""
    window = (ad.ds(0, x.shape[0]), ad.ds(0, x.shape[1]))
    v = ad.load(row.at[ad.ds(0, x.shape[1])])
    c = ad.load(column.at[ad.ds(0, x.shape[0])])
    ad.store(y.at[window], ad.load(x.at[window]) + v + c[:, None])


@ad.kernel(grid=(1,))
def stretch_unit_dims(x, row, column, one, y, z):
    """numpy's stretching of real size-1 dims: y = x * row + column + one, where row is a (1, n),
    column an (m, 1) and one a (1, 1) window of GMEM; z = the row repeated down x's rows (a store
    broadcasts it too)."""
    m, n = x.shape
    r = ad.load(row.at[ad.ds(0, 1), ad.ds(0, n)])
    c = ad.load(column.at[ad.ds(0, m), ad.ds(0, 1)])
    ad.store(y.at[...], ad.load(x.at[...]) * r + c + ad.load(one.at[ad.ds(0, 1), ad.ds(0, 1)]))
    ad.store(z.at[...], r)


def stretch_unit_dims_reference(x, row, column, one):
    return x * row[:1] + column[:, :1] + one, np.broadcast_to(row[:1], x.shape)


@ad.kernel(grid=(2,))
def masked_element(x, y):
    """y[c] = x[3c] where c is odd, else -5: a 0-d load under a 0-d mask."""
    c = ad.program_id(0)
    ad.store(y.at[c], ad.load(x.at[c * 3], mask=ad.full((), c, ad.int32) == 1, other=-5.0))


@ad.kernel(grid=(2,))
def gathers(table, ids, picks, rows_out, picked_out):
    """Gathers by computed index.  CTA p: rows_out[p] = the table rows ids[p] names (an embedding
    lookup; ids may lie outside the table, where the row reads -1), odd columns masked off (-2);
    picked_out[p] = table[picks[p, :, 0], picks[p, :, 1] + p] elementwise, a 1-d gather whose
    column index adds a traced one, and table[3, picks[p, :, 1]] at a constant row."""
    p = ad.program_id(0)
    i = ad.load(ids.at[p, :])
    columns = ad.iota((ids.shape[1], table.shape[1]), ad.int32, dim=1)
    rows = ad.load(table.at[i[:, None], columns], mask=(columns & 1) == 0, other=-2)
    rows = ad.where((i[:, None] >= 0) & (i[:, None] < table.shape[0]), rows, -1)
    ad.store(rows_out.at[p, :, :], rows)
    r, c = ad.load(picks.at[p, :, 0]), ad.load(picks.at[p, :, 1])
    ad.store(picked_out.at[p, 0, :], ad.load(table.at[r, c + p], other=7))
    ad.store(picked_out.at[p, 1, :], ad.load(table.at[3, c]))


def gathers_reference(table: np.ndarray, ids: np.ndarray, picks: np.ndarray):
    def read(r, c, other):
        inside = (r >= 0) & (r < table.shape[0]) & (c >= 0) & (c < table.shape[1])
        return np.where(inside, table[np.where(inside, r, 0), np.where(inside, c, 0)],
                        np.asarray(other, table.dtype))

    columns = np.arange(table.shape[1])[None, None, :]
    rows_out = read(ids[:, :, None], columns, -2)
    rows_out = np.where(columns % 2 == 0, rows_out, np.asarray(-2, table.dtype))
    inside = (ids >= 0) & (ids < table.shape[0])
    rows_out = np.where(inside[:, :, None], rows_out, np.asarray(-1, table.dtype))
    programs = np.arange(ids.shape[0])[:, None]
    picked = np.stack([read(picks[..., 0], picks[..., 1] + programs, 7),
                       read(np.full_like(picks[..., 1], 3), picks[..., 1], 0)], axis=1)
    return rows_out, picked


def gather_inputs(dtype, seed: int):
    """A 300 x 128 table, 2 x 64 row ids with some outside it (negative, past the end), and 2 x
    128 (row, column) picks, some outside too."""
    rng = np.random.default_rng(seed)
    table = special_values(dtype, (300, 128), seed) if dtype.is_float or dtype == ad.int32 else \
        rng.integers(-100, 100, (300, 128)).astype(dtype.numpy)
    ids = rng.integers(0, 300, (2, 64)).astype(np.int32)
    ids[:, :4] = [-1, 300, -(2**31), 2**31 - 1]
    picks = np.stack([rng.integers(-3, 303, (2, 128)), rng.integers(-3, 131, (2, 128))],
                     axis=-1).astype(np.int32)
    return table, ids, picks


@ad.kernel(grid=(2,))
def scatters(ids, src, out):
    """Scatters by computed index.  CTA p writes 2·src[p] to the rows of out that ids[p] names,
    every third column masked off (ids past either end of out write nothing), and 5 + p to
    out[p, 0] through a 0-d scatter at a traced index."""
    p = ad.program_id(0)
    i = ad.load(ids.at[p, :])
    columns = ad.iota((ids.shape[1], out.shape[1]), ad.int32, dim=1)
    doubled = ad.load(src.at[p, :, :]) * 2
    ad.store(out.at[i[:, None], columns], doubled, mask=(columns % 3) != 0)
    ad.store(out.at[ad.full((), p, ad.int32), 0], ad.full((), 5, out.dtype) + p)


def scatters_reference(ids: np.ndarray, src: np.ndarray, out: np.ndarray) -> np.ndarray:
    out = out.copy()
    for p in range(ids.shape[0]):
        for r, row in enumerate(ids[p]):
            if 0 <= row < out.shape[0]:
                with np.errstate(over="ignore"):  # doubling is exact, or overflows to inf as on the GPU
                    doubled = (src[p, r].astype(np.float64) * 2).astype(out.dtype)
                out[row, 1::3], out[row, 2::3] = doubled[1::3], doubled[2::3]
        out[p, 0] = np.asarray(5 + p, out.dtype)
    return out


def scatter_inputs(dtype, seed: int):
    """2 x 64 distinct row ids of a 300-row array (none of rows 0 and 1, which take the
    totals), some outside it, and the rows to write."""
    rng = np.random.default_rng(seed)
    ids = (rng.permutation(298)[:128] + 2).astype(np.int32).reshape(2, 64)
    ids[:, :3] = [[-1, 300, 2**31 - 1], [-(2**31), 301, -7]]
    src = special_values(dtype, (2, 64, 128), seed)
    if dtype == ad.int32:
        src //= 4  # doubling stays in range: the reference doubles in float64
    else:
        src[np.isnan(src.astype(np.float32))] = 0  # a doubled NaN is the canonical one: not the point here
    return ids, src, np.zeros((300, 128), dtype.numpy)


@ad.kernel(grid=(1,))
def row_gathers(table, ids, rows_out):
    """rows_out[r] = table[ids[r], 1, :], whole rows of a 3-d table (each a run of consecutive
    elements, which the gather moves a vector at a time); ids outside the table and odd ids
    (masked off) read -3."""
    i = ad.load(ids)
    columns = ad.iota((1, table.shape[2]), ad.int32, 1)
    ad.store(rows_out, ad.load(table.at[i[:, None], 1, columns], mask=((i & 1) == 0)[:, None], other=-3))


def row_gathers_reference(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    inside = (ids >= 0) & (ids < table.shape[0]) & (ids % 2 == 0)
    rows = table[np.where(inside, ids, 0), 1]
    return np.where(inside[:, None], rows, np.asarray(-3, table.dtype))


def row_gather_inputs(dtype, rows: int, seed: int):
    """A (50, 2, 128) table and `rows` ids, some outside it."""
    rng = np.random.default_rng(seed)
    table = rng.integers(-100, 100, (50, 2, 128)).astype(dtype.numpy)
    ids = rng.integers(0, 50, rows).astype(np.int32)
    ids[:4] = [-2, 50, -(2**31), 2**31 - 2]
    return table, ids
