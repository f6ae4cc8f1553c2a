"""What the row kernels' tests share: random rows, the lengths that take every path of the
kernels' plans, and the PTX of a kernel's GMEM accesses."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np

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
# The lengths of benchmarks/register_tiles.py and benchmarks/row_lengths.py, with their rows.
BENCHMARKED = [(8192, 4096), (4096, 8192), (4096, 16384), (8192, 8192), (8192, 1000), (16384, 2100),
               (4096, 5000), (4096, 6000), (4096, 7000), (4096, 8000), (2048, 12345)]


def random_rows(shape, seed, scale: float = 3.0, offset: float = 0.0) -> np.ndarray:
    """bfloat16 rows of normal values times `scale` plus `offset`."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale + offset).astype(ml_dtypes.bfloat16)


def vector(n: int, seed: int) -> np.ndarray:
    """A bfloat16 vector of n normal values."""
    return np.random.default_rng(seed).standard_normal(n).astype(ml_dtypes.bfloat16)


def assert_whole_vectors(kernel, specs, constexprs, n: int) -> None:
    """Rows of n elements move between GMEM and registers in vectors as wide as their alignment
    allows (16 bytes for a multiple of 8 elements, 8 for a multiple of 4): a window that left a
    thread part of a vector would move every element alone."""
    accesses = set(re.findall(r"\b(?:ld|st)\.global(?:\.\w+)*", kernel.ptx(*specs, **constexprs)))
    wanted = "v4.b32" if n % 8 == 0 else "v2.b32"
    assert accesses and all(access.endswith(wanted) for access in accesses), (constexprs, accesses)


def matrix(rows: int, n: int) -> ad.ArraySpec:
    return ad.ArraySpec((rows, n), ad.bfloat16)
