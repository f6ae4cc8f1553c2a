"""The (B, H, S, D) -> (B, S, H, D) permute (`asyncdsl.kernels.permute_bhsd`) in the interpreter,
bit for bit against numpy's transpose; the block it picks; its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from support import line_of, random_bits

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.permute_bhsd import choose, permute_bhsd_kernel


@pytest.mark.parametrize("shape,block_s",
                         [((2, 16, 1000, 64), 32), ((1, 3, 40, 8), 16), ((2, 4, 17, 16), None)], ids=str)
def test_the_permute_is_numpys_transpose_bit_for_bit(shape, block_s):
    """Sequence lengths that are not whole blocks: the last block's box runs past the end."""
    x = random_bits(shape, ad.bfloat16, 1)
    y = K.permute_bhsd(x, block_s=block_s)
    assert y.view(np.uint16).tobytes() == x.transpose(0, 2, 1, 3).copy().view(np.uint16).tobytes()


def test_the_output_given_is_written():
    x = random_bits((1, 2, 64, 32), ad.float32, 2)
    out = np.full((1, 64, 2, 32), np.nan, np.float32)
    assert K.permute_bhsd(x, out=out) is out and np.array_equal(out, x.transpose(0, 2, 1, 3), equal_nan=True)


def test_a_block_is_16_positions_unless_its_tile_passes_64_kib():
    assert choose((8, 16, 4096, 128), 2) == 16  # 64 KiB
    assert choose((4, 32, 8192, 64), 2) == 16
    assert choose((8, 32, 4096, 128), 2) == 8
    assert choose((1, 64, 128, 256), 4) == 1


def test_an_x_of_other_than_four_dims_is_refused_at_the_callers_line():
    with pytest.raises(ad.ArgumentError, match=r"x must be \(B, H, S, D\), got shape \(16, 64\)") as caught:
        K.permute_bhsd(np.zeros((16, 64), np.float32))  # the call
    test = test_an_x_of_other_than_four_dims_is_refused_at_the_callers_line
    assert caught.value.location.line == line_of(test, "# the call")


def test_an_output_that_is_not_x_permuted_is_refused():
    spec = ad.ArraySpec((2, 16, 1000, 64), ad.bfloat16)
    with pytest.raises(ad.TraceError, match=r"y must have shape \(2, 1000, 16, 64\) \(x's \(B, H, S, D\) as "
                                            r"\(B, S, H, D\)\)"):
        permute_bhsd_kernel.compile(spec, spec, BS=32)


@pytest.mark.parametrize("shape", [(8, 16, 4096, 128), (4, 32, 8192, 64), (16, 8, 2048, 128)], ids=str)
def test_the_kernel_at_the_benchmarks_shapes_assembles(shape, ptxas):
    b, h, s, d = shape
    ptxas(permute_bhsd_kernel.ptx(ad.ArraySpec(shape, ad.bfloat16), ad.ArraySpec((b, s, h, d), ad.bfloat16),
                                  BS=choose(shape, 2)))
