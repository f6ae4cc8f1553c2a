"""The library's row kernels (softmax, RMSNorm, LayerNorm, fp8 quantisation, SwiGLU, the permute)
on every path their `choose` takes, on the GPU against the interpreter from the same random
rows: several rows a CTA, rows held whole, rows split over warpgroups, rows in pieces, rows of
any length read padded, and the fp8 ring.  IEEE arithmetic (the fp8 quantisation, the permute)
bit for bit; kernels using `ex2.approx` or `rsqrt.approx` within one ulp of their bfloat16
output.  Then the host functions on torch tensors: the outputs they make, on x's device."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_support import assert_within_approximation, gpu_and_interpreter, hopper_or_skip
from support import random_bits

import asyncdsl as ad
import asyncdsl.kernels as K
from asyncdsl.kernels.layer_norm import choose as layer_norm_plan
from asyncdsl.kernels.permute_bhsd import permute_bhsd_kernel
from asyncdsl.kernels.quantize_fp8 import choose as quantize_fp8_plan
from asyncdsl.kernels.rms_norm import choose as rms_norm_plan
from asyncdsl.kernels.softmax import choose as softmax_plan
from asyncdsl.kernels.swiglu import swiglu_kernel

hopper_or_skip()
pytestmark = pytest.mark.gpu

# Rows a CTA, halves, whole rows, pieces, padded lengths (odd ones: rows not 16-byte aligned).
LENGTHS = [512, 640, 1000, 1152, 2100, 4096, 5000, 5120, 6000, 6144, 7000, 8000, 8192, 8193, 12288, 12345,
           16384]


def _rows(rows: int, n: int, seed: int, offset: float = 0.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((rows, n)) * 3 + offset).astype(ml_dtypes.bfloat16)


def _vector(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("n", LENGTHS)
def test_softmax_on_the_gpu_is_the_interpreters_on_every_path(n):
    x = _rows(5, n, n)
    kernel, constexprs = softmax_plan(n)
    (gpu,), (host,) = gpu_and_interpreter(kernel, [x], [np.full_like(x, np.nan)], **constexprs)
    assert_within_approximation(gpu, host, f"{kernel.name} {constexprs}")


@pytest.mark.parametrize("n", LENGTHS)
def test_rms_norm_on_the_gpu_is_the_interpreters_on_every_path(n):
    x, w = _rows(5, n, n), _vector(n, n + 1)
    kernel, constexprs = rms_norm_plan(n)
    (gpu,), (host,) = gpu_and_interpreter(kernel, [x, w], [np.full_like(x, np.nan)], **constexprs)
    assert_within_approximation(gpu, host, f"{kernel.name} {constexprs}")


@pytest.mark.parametrize("n", LENGTHS)
def test_layer_norm_on_the_gpu_is_the_interpreters_on_every_path(n):
    x, w, b = _rows(5, n, n, offset=50.0), _vector(n, n + 1), _vector(n, n + 2)
    x[2] = 7  # a constant row: its output is the bias, on both
    kernel, constexprs = layer_norm_plan(n)
    (gpu,), (host,) = gpu_and_interpreter(kernel, [x, w, b], [np.full_like(x, np.nan)], **constexprs)
    assert_within_approximation(gpu, host, f"{kernel.name} {constexprs}")
    assert np.array_equal(gpu[2], b)


@pytest.mark.parametrize("n", [*LENGTHS, 2048, 20000, 32768])
def test_fp8_quantisation_on_the_gpu_is_the_interpreters_bit_for_bit_on_every_path(n):
    x = _rows(5, n, n)
    x[1] = 0  # an all-zero row: scale 0 and zeros
    kernel, constexprs = quantize_fp8_plan(n)
    q = np.zeros(x.shape, ml_dtypes.float8_e4m3fn)
    scales = np.full(x.shape[0], np.nan, np.float32)
    (gpu_q, gpu_scales), (host_q, host_scales) = gpu_and_interpreter(kernel, [x], [q, scales], **constexprs)
    assert gpu_q.view(np.uint8).tobytes() == host_q.view(np.uint8).tobytes(), f"{kernel.name} {constexprs}"
    assert gpu_scales.tobytes() == host_scales.tobytes()


@pytest.mark.parametrize("shape", [(16384, 8192), (5, 3000), (3, 7)], ids=str)
def test_swiglu_on_the_gpu_is_the_interpreters(shape):
    a, b = _rows(*shape, 1), _rows(*shape, 2)
    (gpu,), (host,) = gpu_and_interpreter(swiglu_kernel, [a, b], [np.full_like(a, np.nan)])
    assert_within_approximation(gpu, host, f"swiglu {shape}")


@pytest.mark.parametrize("shape,block_s",
                         [((8, 16, 4096, 128), 16), ((2, 16, 1000, 64), 32), ((1, 3, 40, 8), 8)], ids=str)
def test_the_permute_on_the_gpu_is_numpys_transpose(shape, block_s):
    x = random_bits(shape, ad.bfloat16, 3)
    b, h, s, d = shape
    (gpu,), _ = gpu_and_interpreter(permute_bhsd_kernel, [x], [np.zeros((b, s, h, d), x.dtype)], BS=block_s)
    assert gpu.view(np.uint16).tobytes() == x.transpose(0, 2, 1, 3).copy().view(np.uint16).tobytes()


def test_the_host_functions_make_their_outputs_on_the_inputs_device():
    torch = pytest.importorskip("torch")
    x = torch.randn(16, 5000, device="cuda").to(torch.bfloat16)
    w, b = (torch.randn(5000, device="cuda").to(torch.bfloat16) for _ in range(2))
    host = [t.float().cpu().numpy().astype(ml_dtypes.bfloat16) for t in (x, w, b)]
    calls = {"softmax": (K.softmax(x), K.softmax(host[0])),
             "rms_norm": (K.rms_norm(x, w), K.rms_norm(host[0], host[1])),
             "layer_norm": (K.layer_norm(x, w, b), K.layer_norm(*host)),
             "swiglu": (K.swiglu(x, x), K.swiglu(host[0], host[0]))}
    for name, (gpu, interpreted) in calls.items():
        assert gpu.device == x.device and gpu.dtype == torch.bfloat16 and gpu.shape == x.shape, name
        assert_within_approximation(gpu.float().cpu().numpy().astype(ml_dtypes.bfloat16), interpreted, name)
    q, scales = K.quantize_fp8(x)
    host_q, host_scales = K.quantize_fp8(host[0])
    assert q.dtype == torch.float8_e4m3fn and scales.dtype == torch.float32 and q.device == x.device
    assert q.view(torch.uint8).cpu().numpy().tobytes() == host_q.view(np.uint8).tobytes()
    assert scales.cpu().numpy().tobytes() == host_scales.tobytes()
    heads = torch.randn(4, 8, 50, 200, device="cuda").to(torch.bfloat16)  # (B, H, S, D)
    assert torch.equal(K.permute_bhsd(heads), heads.permute(0, 2, 1, 3))
