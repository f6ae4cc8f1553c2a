"""Cross-entropy over a vocabulary with its gradient, in one kernel:
`loss, dlogits = asyncdsl.kernels.cross_entropy(logits, targets)` for logits (N, V) (bfloat16 or
float32) and integer targets (N,), rows whose target is `ignore_index` adding nothing:

    lse = log Σ_j exp(z_j),  loss_i = lse − z_{y_i},  dz = (softmax(z) − onehot(y)) · scale,

scale = 1 / (valid rows) for reduction="mean", 1 for "sum" and "none" (dlogits is then the
gradient of the rows' losses summed), 0 on ignored rows.  The mean of no valid rows is nan (0/0,
as torch's is) and its gradient 0.

`cross_entropy_rows` takes ROWS rows a CTA (one row for vocabularies wider than one window) and
sweeps each row twice in windows of WIDTH columns (`asyncdsl.blocks.rows.padded_rows`, -inf past
the row's end): first the online log-sum-exp, each window's maximum and sum of exponentials folded
into a running pair of float32 numbers a row, then the gradient, written window by window (over
the logits themselves with `inplace=True`: each window is read before it is written, so a
vocabulary-wide buffer is never needed).  The target's logit is one gather a row.  The number of
valid rows comes from a one-CTA kernel run first and stays on the device, and the losses are
added in a fixed order by another, so nothing waits for the host and every run gives the same
bits.  A target outside [0, V) that is not `ignore_index` is an `AssumptionError` at the caller's line
in the interpreter and under ASYNCDSL_DEBUG=1; elsewhere it reads its logit as 0.  int64 targets
(torch's) are read as their low 32-bit words: the kernels take targets as int32 (N,) or as the
(N, 2) int32 words of little-endian int64s.
"""

from __future__ import annotations

import sys

import numpy as np

from asyncdsl.blocks import row_plans
from asyncdsl.blocks.rows import padded_rows
from asyncdsl.blocks.shapes import check_rows, check_shape, row_length
from asyncdsl.errors import user_location
from asyncdsl.frontend import language as ad
from asyncdsl.jit.binding import constexpr
from asyncdsl.jit.kernel import kernel
from asyncdsl.jit.specs import ArraySpec
from asyncdsl.kernels.dispatch import launch, on_stream
from asyncdsl.kernels.outputs import empty, full

LOG2E = 1.4426950408889634
WINDOW = 4096  # columns a sweep step: 32 logits a thread
LOWEST = -3.0e38  # the running maximum's start: finite, so that rows of -inf padding give no nan
SWEEP = 1024  # elements of the targets or losses the one-CTA kernels take a step
REDUCTIONS = ("mean", "sum", "none")


@on_stream
def cross_entropy(logits, targets, *, ignore_index: int = -100, reduction: str = "mean",
                  inplace: bool = False, stream=None):
    """(loss, dlogits): the cross-entropy of the rows of `logits` against `targets` (a float32
    scalar array for "mean" and "sum", the (N,) float32 losses for "none") and its gradient, in
    a new array like logits or over logits itself (`inplace`).  Rows whose target is
    `ignore_index` add 0 to the loss and get a zero gradient; with every row ignored, "mean" is
    nan (0/0, as torch's `cross_entropy` gives) and the gradient 0."""
    if reduction not in REDUCTIONS:
        raise ad.ArgumentError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}", user_location())
    n = row_length("logits", logits)
    if not logits.shape[0]:  # no rows, nothing to launch
        dlogits = logits if inplace else empty(logits, logits.shape, logits.dtype)
        return no_rows(logits, reduction), dlogits
    targets = target_words(targets)
    count = empty(logits, (1,), ad.float32)
    launch(count_valid, targets, count, stream=stream, IGNORE=ignore_index)
    losses = empty(logits, logits.shape[:1], ad.float32)
    dlogits = logits if inplace else empty(logits, logits.shape, logits.dtype)
    launch(cross_entropy_rows, logits, targets, count, losses, dlogits, stream=stream, IGNORE=ignore_index,
           MEAN=reduction == "mean", **config(n))
    if reduction == "none":
        return losses, dlogits
    total = empty(logits, (1,), ad.float32)
    launch(vector_total, losses, total, stream=stream)
    return total.reshape(()), dlogits


def target_words(targets):
    """int64 targets as (N, 2) int32 words (a view), int32 ones as they are.  numpy and torch
    targets that start off a 16-byte boundary, as the labels a causal LM shifts by one position
    do, or that are strided (a column of a table) are copied first, contiguous: every kernel
    argument must be aligned and dense, and the copy is N integers against N x V logits.  Other
    GPU arrays are taken as they are (the launch refuses a misaligned one)."""
    torch = sys.modules.get("torch")
    if isinstance(targets, np.ndarray):
        if targets.ctypes.data % 16 or not targets.flags.c_contiguous:
            targets = np.array(targets, order="C")  # a new buffer, aligned as numpy allocates
        int32 = np.int32
    elif torch is not None and isinstance(targets, torch.Tensor):
        if targets.data_ptr() % 16 or not targets.is_contiguous():
            targets = targets.clone(memory_format=torch.contiguous_format)
        int32 = torch.int32
    else:
        return targets
    if str(targets.dtype) not in ("int64", "torch.int64"):
        return targets
    return targets.view(int32).reshape(-1, 2)


def _targets(targets, rows):
    """The targets of the int32 index tile `rows` (to load, IGNORE past the end), given as
    `target_words` makes them; refused unless int32 of one or two words a row."""
    if targets.dtype != ad.int32 or len(targets.shape) not in (1, 2) or targets.shape[1:] not in ((), (2,)):
        raise ad.TraceError("targets must be int32 (N,) or the (N, 2) int32 words of int64 ones, got "
                            f"{targets.dtype} {tuple(targets.shape)}", user_location())
    return targets.at[(rows,) if len(targets.shape) == 1 else (rows, 0)]


def no_rows(like, reduction: str):
    """The loss of no rows, as torch gives it: no losses ("none"), 0 ("sum"), or nan (0/0,
    "mean")."""
    if reduction == "none":
        return empty(like, (0,), ad.float32)
    return full(like, (), ad.float32, float("nan") if reduction == "mean" else 0.0)


def config(v: int) -> dict:
    """ROWS and WIDTH for a vocabulary of v: one window of whole 16-byte vectors a thread holding
    rows of up to WINDOW, as many rows as fill it, else one row a CTA in windows of WINDOW."""
    return row_plans.padded_config(v, WINDOW, WINDOW, elements=WINDOW)


@kernel(grid=lambda targets, count, IGNORE: (1,))
def count_valid(targets, count, IGNORE: constexpr):
    """count[0] = the number of targets that are not IGNORE (float32, exact up to 2^24)."""
    def valid(step):
        return ad.where(ad.load(_targets(targets, _sweep(step)), other=IGNORE) != IGNORE, 1.0, 0.0)

    _total(targets, count, valid)


@kernel(grid=lambda values, total: (1,))
def vector_total(values, total):
    """total[0] = Σ values (float32, in a fixed order)."""
    if len(values.shape) != 1:
        raise ad.TraceError(f"values must be a vector (N,), got shape {tuple(values.shape)}", user_location())
    _total(values, total, lambda step: ad.load(values.at[ad.ds(step * SWEEP, SWEEP)]))


def _sweep(step):
    """The indices of a sweep's step: an int32 tile of SWEEP."""
    return ad.iota((SWEEP,), ad.int32, dim=0) + step * SWEEP


def _total(vector, total, term) -> None:
    """One CTA sweeps `vector` SWEEP elements a step, adding term(step) (a float32 tile of SWEEP)
    element by element in float32 registers, then across the threads once."""
    check_shape("total", total, (1,), "one float32 number")
    running = ad.registers((SWEEP,), ad.float32)
    running[...] = ad.zeros((SWEEP,), ad.float32)
    for step in ad.range(ad.cdiv(vector.shape[0], SWEEP)):
        running[...] = running[...] + term(step)
    ad.store(total.at[ad.ds(0, 1)], running[...].sum(axis=0, keepdims=True))


@kernel(grid=lambda logits, targets, count, losses, dlogits, IGNORE, MEAN, ROWS, WIDTH:
        (ad.cdiv(logits.shape[0], ROWS),))
def cross_entropy_rows(logits, targets, count, losses, dlogits, IGNORE: constexpr, MEAN: constexpr,
                       ROWS: constexpr, WIDTH: constexpr):
    """ROWS rows a CTA: their losses (scaled as the gradient is) and dlogits."""
    check_rows(("logits", logits), ("dlogits", dlogits), ("losses", losses))
    check_shape("targets", targets, logits.shape[:1] + targets.shape[1:], "one target a row of logits")
    rows = padded_rows(logits, ROWS, WIDTH, other=-np.inf)
    peak, total = ad.registers((ROWS,), ad.float32), ad.registers((ROWS,), ad.float32)
    peak[...], total[...] = ad.full((ROWS,), LOWEST, ad.float32), ad.zeros((ROWS,), ad.float32)
    for c in rows.pieces():  # the online log-sum-exp: a window's maximum, then its exponentials
        z = rows.piece(c)
        higher = ad.maximum(peak[...], z.max(axis=1))
        shift = higher * LOG2E
        kept = total[...] * ad.exp2(ad.fma(peak[...], LOG2E, -shift), approx=True)
        total[...] = kept + ad.exp2(ad.fma(z, LOG2E, -shift[:, None]), approx=True).sum(axis=1)
        peak[...] = higher
    lse = peak[...] + ad.log(total[...])
    row = ad.iota((ROWS,), ad.int32, dim=0) + ad.program_id(0) * ROWS
    target = ad.load(_targets(targets, row), other=IGNORE)
    valid = target != IGNORE
    ad.check_all((target == IGNORE) | ((target >= 0) & (target < logits.shape[1])),
                 f"a target is outside [0, {logits.shape[1]}) and is not ignore_index ({IGNORE})")
    share = 1.0 / ad.load(count.at[ad.ds(0, 1)]) if MEAN else 1.0  # a valid row's weight in the loss
    scale = ad.where(valid, share, 0.0)
    picked = ad.load(logits.at[row, target], mask=valid).astype(ad.float32)
    loss = ad.where(valid, lse - picked, 0.0)
    # "mean" weighs an ignored row's 0 too: 0 while some row is valid, 0 · ∞ = nan when none is,
    # so that the mean of no rows is 0/0 = nan, as torch's is (the gradient stays 0).
    ad.store(losses.at[rows.rows], loss * share if MEAN else loss)
    shift = (lse * LOG2E)[:, None]
    for c in rows.pieces():  # the gradient, window by window
        p = ad.exp2(ad.fma(rows.piece(c), LOG2E, -shift), approx=True)
        hit = ad.iota(rows.shape, ad.int32, dim=1) + c * WIDTH == target[:, None]
        dz = (p - ad.where(hit, 1.0, 0.0)) * scale[:, None]
        ad.store(rows.window(dlogits, c), dz.astype(dlogits.dtype))


def reference(logits: np.ndarray, targets: np.ndarray, ignore_index: int = -100, reduction: str = "mean"):
    """(loss, dlogits) in float64."""
    z = logits.astype(np.float64)
    shifted = z - z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=1)) + z.max(axis=1)
    valid = targets != ignore_index
    safe = np.where(valid, targets, 0)
    losses = np.where(valid, lse - z[np.arange(len(z)), safe], 0.0)
    grad = np.exp(z - lse[:, None])
    grad[np.arange(len(z)), safe] -= 1
    with np.errstate(divide="ignore", invalid="ignore"):  # the mean of no rows: 0/0 = nan
        share = 1.0 / valid.sum() if reduction == "mean" else 1.0
        loss = losses if reduction == "none" else losses.sum() * share
    return loss, grad * np.where(valid, share, 0.0)[:, None]


def _specs(n: int, v: int, dtype=ad.bfloat16) -> tuple:
    matrix, vector = ArraySpec((n, v), dtype), ArraySpec((n,), ad.float32)
    return matrix, ArraySpec((n, 2), ad.int32), ArraySpec((1,), ad.float32), vector, matrix


# Arguments `asyncdsl dump` traces each kernel with.
EXAMPLE_ARGS = {"cross_entropy_rows": (_specs(64, 32000), {"IGNORE": -100, "MEAN": True, **config(32000)}),
                "count_valid": ((ArraySpec((4096,), ad.int32), ArraySpec((1,), ad.float32)),
                                {"IGNORE": -100}),
                "vector_total": ((ArraySpec((4096,), ad.float32), ArraySpec((1,), ad.float32)), {})}
