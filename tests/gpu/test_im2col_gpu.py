"""im2col loads on the H200: every window of a 3x3 convolution (NHWC), loaded tap by tap with
`async_copy_im2col` and stored to GMEM, equals numpy's im2col bit for bit, for several channel
counts and dtypes, with swizzle, with stride 2, and with rows running past the last image; the
interpreter gives the same bytes from the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import hopper_or_skip
from support import random_bits

import asyncdsl as ad
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(2027)


@ad.kernel(grid=lambda x, out, P, CB, S, LO, HI, SWIZZLE: (ad.cdiv(out.shape[1], P), 9, x.shape[3] // CB))
def conv3x3_windows(x, out, P: ad.constexpr, CB: ad.constexpr, S: ad.constexpr, LO: ad.constexpr,
                    HI: ad.constexpr, SWIZZLE: ad.constexpr):
    """out[tap, m, c] = the pixel under tap (r, s) = divmod(tap, 3) of output pixel m's window.

    Windows start at LO, LO + S, ... <= size + HI - 1 along H and W; output pixel m = (n, oh, ow)
    in row-major order. One CTA loads P rows of CB channels for one tap."""
    _, height, width, _ = x.shape
    out_w = (width + HI - LO - 1) // S + 1
    out_h = (height + HI - LO - 1) // S + 1
    rows = ad.smem((P, CB), x.dtype)
    bar = ad.barrier()
    m0 = ad.program_id(0) * P
    tap = ad.program_id(1)
    c0 = ad.program_id(2) * CB
    ad.async_copy_im2col(
        x, rows, barrier=bar, window_start_bounds=((LO, HI), (LO, HI)), window_strides=(S, S),
        start_indices=(m0 // (out_h * out_w), LO + (m0 // out_w) % out_h * S, LO + m0 % out_w * S, c0),
        filter_offsets=(tap // 3, tap % 3), swizzle=SWIZZLE,
    )
    bar.wait()
    ad.async_copy(rows, out.at[tap, ad.ds(m0, P), ad.ds(c0, CB)], swizzle=SWIZZLE)
    ad.await_async_copy(0)


def numpy_windows(x: np.ndarray, stride: int, low: int, high: int) -> np.ndarray:
    """numpy im2col of a 3x3 convolution: (9 taps, N * OH * OW, C)."""
    n, h, w, c = x.shape
    out_h, out_w = (h + high - low - 1) // stride + 1, (w + high - low - 1) // stride + 1
    # Pad so that every window start low + k * stride, plus a tap of up to 2, is inside.
    before = -low
    after_h = max(low + (out_h - 1) * stride + 3 - h, 0)
    after_w = max(low + (out_w - 1) * stride + 3 - w, 0)
    padded = np.zeros((n, before + h + after_h, before + w + after_w, c), x.dtype)
    padded[:, before : before + h, before : before + w] = x
    taps = []
    for r in range(3):
        for s in range(3):
            window = padded[:, r : r + (out_h - 1) * stride + 1 : stride,
                            s : s + (out_w - 1) * stride + 1 : stride]
            taps.append(window.reshape(-1, c))
    return np.stack(taps)


CASES = [
    # (N, H, W, C), dtype, pixels per copy, channels per copy, window stride, bounds, swizzle
    ((2, 9, 14, 16), ad.float32, 64, 16, 1, -1, -1, 0),     # SAME, rows cross lines and images
    ((1, 16, 16, 64), ad.bfloat16, 128, 64, 1, -1, -1, 128),  # SAME, 128-byte swizzle
    ((3, 7, 5, 96), ad.float16, 32, 32, 1, -1, -1, 64),     # three channel blocks, 64-byte swizzle
    ((2, 8, 8, 128), ad.int8, 256, 128, 1, -1, -1, 0),      # 256 rows, one byte per channel
    ((2, 8, 8, 32), ad.float32, 16, 32, 2, 0, -1, 128),     # stride 2 (windows at 0, 2, 4, 6)
    ((1, 5, 6, 8), ad.float32, 48, 8, 1, -1, -1, 0),        # one copy past the last image
]
IDS = [f"{shape}-{dtype}-s{stride}-sw{swizzle}" for shape, dtype, _, _, stride, _, _, swizzle in CASES]


def run_case(x, pixels, channels, stride, low, high, swizzle, on_gpu: bool) -> np.ndarray:
    expected_shape = numpy_windows(x, stride, low, high).shape
    out = np.empty(expected_shape, x.dtype)
    out.view(np.uint8)[...] = 0xA5
    constexprs = dict(P=pixels, CB=channels, S=stride, LO=low, HI=high, SWIZZLE=swizzle)
    if not on_gpu:
        conv3x3_windows.interpret(x, out, **constexprs)
        return out
    x_d, out_d = to_device(x), to_device(out)
    conv3x3_windows(x_d, out_d, **constexprs)
    return to_host(out_d)


@pytest.mark.parametrize("shape, dtype, pixels, channels, stride, low, high, swizzle", CASES, ids=IDS)
def test_windows_match_numpy_im2col_and_the_interpreter(shape, dtype, pixels, channels, stride, low,
                                                        high, swizzle):
    x = random_bits(shape, dtype, RNG)
    expected = numpy_windows(x, stride, low, high)
    on_gpu = run_case(x, pixels, channels, stride, low, high, swizzle, on_gpu=True)
    assert on_gpu.view(np.uint8).tobytes() == expected.view(np.uint8).tobytes()
    interpreted = run_case(x, pixels, channels, stride, low, high, swizzle, on_gpu=False)
    assert interpreted.view(np.uint8).tobytes() == on_gpu.view(np.uint8).tobytes()
