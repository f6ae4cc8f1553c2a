"""Register tiles of few or unit-size dims, against numpy: unit-size iotas, (16, 16) tiles meeting
their own totals and stretched rows, reductions of keepdims results, and stretched masks on the
largest windows.  Each kernel is compiled to PTX on the way (the interpreter runs the compiled
module), so a layout the lowering cannot serve fails here too."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

SHAPES = [(16, 16), (8, 32), (64, 128)]


def _values(shape, dtype=np.float32) -> np.ndarray:
    return ((np.arange(np.prod(shape)) * 7) % 13 - 6).astype(dtype).reshape(shape)


def _kernel(body: str):
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


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("body", sorted(PROGRAMS))
def test_small_and_unit_tiles_equal_numpy(body, shape):
    x = _values(shape)
    row = np.arange(shape[1], dtype=np.float32).reshape(1, -1)
    want = np.asarray(PROGRAMS[body](x, row), np.float32)
    y = np.zeros(want.shape if want.ndim else (1,), np.float32)
    _kernel(body).interpret(x, row, y)
    assert np.array_equal(y.reshape(want.shape), want)


@pytest.mark.parametrize("mask", ["ad.iota((1, C), ad.int32, dim=1) < 93",
                                  "ad.iota((R, 1), ad.int32, dim=0) < 93"])
@pytest.mark.parametrize("where", ["load", "store"])
def test_a_stretched_mask_on_the_largest_16_bit_window(mask, where):
    # 128 registers a thread for the (128, 256) window; the mask's broadcast holds none of its own.
    body = (f"t = ad.load(x, mask={mask}, other=0.0)\n    ad.store(y, t)" if where == "load"
            else f"ad.store(y, ad.load(x), mask={mask})")
    source = (f"import asyncdsl as ad\n\n@ad.kernel(grid=(1,), block=128)\ndef k(x, y):\n"
              f"    R, C = x.shape\n    {body}\n")
    namespace: dict = {}
    exec(compile(source, "<mask>", "exec"), namespace)
    x = np.ones((128, 256), ml_dtypes.bfloat16)
    y = np.zeros_like(x)
    namespace["k"].interpret(x, y)
    along = np.arange(256)[None, :] if "dim=1" in mask else np.arange(128)[:, None]
    assert np.array_equal(y.astype(np.float32), np.broadcast_to(np.where(along < 93, 1.0, 0.0), x.shape))
