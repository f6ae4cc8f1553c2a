"""`asyncdsl.async_copy_im2col`: the load of implicit-GEMM convolutions.

    # x: (N, H, W, C) channels-last; a 3x3 SAME convolution's windows start at -1 .. size - 2
    rows = ad.smem((128, 64), x.dtype)
    ad.async_copy_im2col(
        x, rows, barrier=bar,
        window_start_bounds=((-1, -1), (-1, -1)),
        start_indices=(n, h - 1, w - 1, c),     # the first row's window, and the first channel
        filter_offsets=(r, s),                  # the filter tap: pixel (h - 1 + r, w - 1 + s)
    )

Row i of `rows` receives channels `c .. c + 63` of the tap's pixel in the i-th window after the
first, windows walking W, then H, then the image index (`asyncdsl.interpret.im2col`).
"""

from __future__ import annotations

from collections.abc import Sequence

from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import TraceError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.options import flag, swizzle_bytes
from asyncdsl.frontend.refs import GmemRef, GmemView, SmemRef
from asyncdsl.frontend.scalars import IndexLike, Scalar, condition_value, index_value
from asyncdsl.frontend.sync import Barrier


def _image_batch(src: object) -> GmemRef:
    if isinstance(src, GmemRef):
        return src
    if isinstance(src, GmemView):
        whole = all(
            not d.squeezed and isinstance(d.start, int) and d.start == 0 and d.size == size
            for d, size in zip(src.dims, src.ref.shape)
        )
        if whole:
            return src.ref
        raise TraceError(
            "async_copy_im2col reads whole image batches: pass the array itself and say where the "
            "windows start with start_indices=(n, *spatial, c)",
            user_location(),
        )
    raise TraceError(
        "async_copy_im2col source must be a kernel array argument (an image batch), got "
        f"{type(src).__name__}",
        user_location(),
    )


def _python_ints(values: object, what: str) -> tuple[int, ...]:
    if not isinstance(values, Sequence) or any(not is_int(v) for v in values):
        raise TraceError(f"{what} must be a sequence of Python ints, got {values!r}", user_location())
    return tuple(values)


def async_copy_im2col(
    src,
    dst: SmemRef,
    *,
    barrier: Barrier,
    window_start_bounds: Sequence[tuple[int, int]],
    start_indices: Sequence[IndexLike],
    filter_offsets: Sequence[IndexLike],
    window_strides: Sequence[int] | None = None,
    swizzle: int | None = None,
    arrive: bool = True,
    predicate: Scalar | None = None,
) -> None:
    """Start an im2col load from a channels-last image batch into the rows of an SMEM buffer.

    - `src`: the image batch, `(N, W, C)`, `(N, H, W, C)` or `(N, D, H, W, C)`.
    - `dst`: an SMEM buffer `(*rows, channels)`; its leading dims are flattened into 1 to 1024
      rows, one pixel of one window each, of 1 to 256 channels.
    - `window_start_bounds`: per spatial dim of size `S` a `(lo, hi)` pair: windows start at
      `lo`, `lo + stride`, ... up to `S + hi - 1`, the image being zero outside `[0, S)` (a 3x3
      SAME convolution uses `(-1, -1)`). Both lie in [-32768, 32767] for rank 3, [-128, 127]
      for rank 4 and [-16, 15] for rank 5.
    - `start_indices`: `(n, *start, c)`: the image and window start of the first row, and the
      first channel. Later rows take the next windows, W fastest, then H, D and the image;
      rows past the last image are zeros.
    - `filter_offsets`: per spatial dim, the pixel within the window (the filter tap), in
      [0, 65535] for rank 3, [0, 255] for rank 4 and [0, 31] for rank 5.
    - `window_strides`: per spatial dim the step between window starts, 1 to 8 (default 1).

    `barrier`, `swizzle`, `arrive` and `predicate` work as in `async_copy`.
    """
    tracer = tracing.current("asyncdsl.async_copy_im2col")
    image = _image_batch(src)
    if not isinstance(dst, SmemRef):
        raise TraceError(
            f"async_copy_im2col destination must be an asyncdsl.smem buffer, got {type(dst).__name__}",
            user_location(),
        )
    dst.plain("async_copy_im2col")
    if not isinstance(barrier, Barrier):
        raise TraceError(f"barrier must come from asyncdsl.barrier(...), got {barrier!r}", user_location())
    if not isinstance(window_start_bounds, Sequence) or any(
        not isinstance(pair, Sequence) or len(pair) != 2 for pair in window_start_bounds
    ):
        raise TraceError(
            f"window_start_bounds must be one (lo, hi) pair per spatial dim, got {window_start_bounds!r}",
            user_location(),
        )
    bounds = []
    for pair in window_start_bounds:  # pairs, as checked above
        lo, hi = _python_ints(pair, "each window_start_bounds pair")
        bounds.append((lo, hi))
    spatial = len(image.shape) - 2
    strides = (1,) * spatial if window_strides is None else _python_ints(window_strides, "window_strides")
    for name, values in (("start_indices", start_indices), ("filter_offsets", filter_offsets)):
        if not isinstance(values, Sequence):
            raise TraceError(f"{name} must be a sequence of ints or traced indices, got {values!r}",
                             user_location())
    if predicate is not None and not (isinstance(predicate, Scalar) and predicate.is_condition):
        raise TraceError("predicate must be a traced condition (e.g. asyncdsl.program_id(0) == 0)",
                         user_location())
    barriers, barrier_index = barrier.operands()
    tracer.emit(
        ir.AsyncCopyIm2colOp(
            image.value,
            dst.value,
            [index_value(i) for i in start_indices],
            [index_value(o) for o in filter_offsets],
            barriers,
            barrier_index,
            window_bounds=bounds,
            window_strides=strides,
            swizzle=swizzle_bytes(swizzle),
            arrive=flag(arrive, "arrive"),
            predicate=condition_value(predicate) if predicate is not None else None,
        )
    )
