"""Register tiles of few or unit-size dims, against numpy: the programs of small_tile_programs.py
on three shapes, and stretched masks on the largest windows.  Each kernel is compiled to PTX on
the way (the interpreter runs the compiled module), so a layout the lowering cannot serve fails
here too."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from small_tile_programs import PROGRAMS, SHAPES, kernel, values


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("body", sorted(PROGRAMS))
def test_small_and_unit_tiles_equal_numpy(body, shape):
    x = values(shape)
    row = np.arange(shape[1], dtype=np.float32).reshape(1, -1)
    want = np.asarray(PROGRAMS[body](x, row), np.float32)
    y = np.zeros(want.shape if want.ndim else (1,), np.float32)
    kernel(body).interpret(x, row, y)
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
