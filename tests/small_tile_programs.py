"""Register-tile programs of few or unit-size dims, each with its numpy model: unit-size iotas
as masks and operands, (16, 16) tiles meeting their own totals and stretched rows or vectors,
and reductions of keepdims results (the interpreter's test, test_small_tiles.py, and the GPU's,
test_small_tiles_gpu.py)."""

from __future__ import annotations

import numpy as np

SHAPES = [(16, 16), (8, 32), (64, 128)]


def values(shape, dtype=np.float32) -> np.ndarray:
    return ((np.arange(np.prod(shape)) * 7) % 13 - 6).astype(dtype).reshape(shape)


def kernel(body: str):
    """A kernel of inputs x, row and output y whose body computes `r` (kept as text, so each
    program is traced on its own)."""
    source = (f"import asyncdsl as ad\n\n@ad.kernel(grid=(1,), block=128)\ndef k(x, row, y):\n"
              f"    C = x.shape[1]\n    t = ad.load(x)\n    {body}\n"
              "    ad.store(y, r if r.ndim else r[None])\n")
    namespace: dict = {}
    exec(compile(source, f"<{body}>", "exec"), namespace)
    return namespace["k"]


PROGRAMS = {
    "r = t + ad.iota((1, 1), ad.int32, dim=0).astype(ad.float32)": lambda x, row: x,
    "r = ad.where(ad.iota((1, 1), ad.int32, dim=1) < 1, t, 0.0)": lambda x, row: x,
    "r = ad.load(x, mask=ad.iota((1, 1), ad.int32, dim=0) < 1, other=0.0)": lambda x, row: x,
    "r = ad.load(x, mask=ad.iota((1, C), ad.int32, dim=1) < 3, other=-1.5).max()":
        lambda x, row: np.where(np.arange(x.shape[1]) < 3, x, np.float32(-1.5)).max(),
    "r = (t + ad.load(row)) * t.max()": lambda x, row: (x + row) * x.max(),
    "r = (t + ad.load(row.at[0])).max()": lambda x, row: (x + row[0]).max(),
    "r = ad.where(t > 2.0, ad.load(row.at[0]), t).max()": lambda x, row: np.where(x > 2, row[0], x).max(),
    "r = t - ad.load(x).max()": lambda x, row: x - x.max(),
    "r = t.sum(axis=1, keepdims=True).sum(axis=0, keepdims=True)":
        lambda x, row: x.sum(axis=1, keepdims=True).sum(axis=0, keepdims=True),
    "r = t.sum(axis=1, keepdims=True).max(axis=0)": lambda x, row: x.sum(axis=1, keepdims=True).max(axis=0),
    "r = t.min(axis=1, keepdims=True) - t.min(axis=1, keepdims=True).max()":
        lambda x, row: x.min(axis=1, keepdims=True) - x.min(axis=1, keepdims=True).max(),
    "r = t.max(axis=0, keepdims=True).mean(axis=1, keepdims=True)":
        lambda x, row: x.max(axis=0, keepdims=True).mean(axis=1, keepdims=True),
    "r = t.sum(axis=1)[:, None].sum(axis=0, keepdims=True)":
        lambda x, row: x.sum(axis=1)[:, None].sum(axis=0, keepdims=True),
    "r = t.max(axis=1)[:, None, None].max(axis=(1, 2))": lambda x, row: x.max(axis=1),
}
