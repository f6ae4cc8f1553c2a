"""What the row kernels' tests share: random rows, the lengths that take every path of the
kernels' plans, and the check of a refused argument."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import asyncdsl as ad

# Several rows a CTA (the last CTA's past the array's end), rows split over two warpgroups, rows
# held whole, rows in pieces.
SHAPES = [(7, 512), (5, 1024), (3, 4096), (3, 5120), (3, 6144), (3, 8192), (2, 12288), (2, 16384)]
# Lengths no multiple of 128 divides (odd ones: rows not 16-byte aligned; 2100: 8-byte aligned),
# a multiple of 128 that softmax pads (1152: 9 elements a thread), windows of 6144 and 7168
# padded to whole vectors, one past a piece, and a multiple of 128 that only 128-wide pieces
# would divide.
ANY_LENGTH = [(5, 1), (5, 7), (3, 100), (3, 1000), (3, 1152), (3, 2100), (2, 3001), (2, 5000), (2, 6000),
              (2, 7000), (2, 8193), (2, 8320), (2, 12345)]


def random_rows(shape, seed, scale: float = 3.0, offset: float = 0.0) -> np.ndarray:
    """bfloat16 rows of normal values times `scale` plus `offset`."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale + offset).astype(ml_dtypes.bfloat16)


def vector(n: int, seed: int) -> np.ndarray:
    """A bfloat16 vector of n normal values."""
    return np.random.default_rng(seed).standard_normal(n).astype(ml_dtypes.bfloat16)


def assert_refused(kernel, specs, constexprs, message: str) -> None:
    """Compiling `kernel` for `specs` is a TraceError that says `message` and names a line of the
    tests (the library's kernels name their caller's line, not their own; the innermost caller
    is tests/ptx_digests.py's wrapper of the compiler while it records digests)."""
    with pytest.raises(ad.TraceError, match=message) as caught:
        kernel.compile(*specs, **constexprs)
    assert caught.value.location is not None and "/tests/" in caught.value.location.file


def matrix(rows: int, n: int) -> ad.ArraySpec:
    return ad.ArraySpec((rows, n), ad.bfloat16)
