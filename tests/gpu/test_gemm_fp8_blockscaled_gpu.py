"""The block-scaled fp8 GEMM on the GPU: its kernels at their EXAMPLE_ARGS give the interpreter's
bytes on exact inputs (small integers, power-of-two scales), the host function on torch tensors
is bit-exact against float64 on every path `choose` takes (64- and 128-row tiles, split K, M = 1,
M not a multiple of 4, ragged N and K) and in pairs of CTAs sharing b, and on random e4m3
values at a DeepSeek-V3 shape its error against float64 is that of the tensor cores' rounding."""

from __future__ import annotations

import importlib

import ml_dtypes
import numpy as np
import pytest
from gpu_support import ExactBlockScaled, hopper_or_skip

import asyncdsl.kernels as K
from asyncdsl.blocks.gemm_config import GemmConfig
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu
blockscaled = importlib.import_module("asyncdsl.kernels.gemm_fp8_blockscaled")  # K.<name> is the function


def exact_inputs(specs, rng) -> list:
    """Small integers in a and b, powers of two in the scales (the padding included), c and the
    split-K partial sums NaN, the flags zero."""
    a, a_scales, b, b_scales, c, *workspace = specs
    arrays = [rng.integers(-4, 5, a.shape).astype(ml_dtypes.float8_e4m3fn),
              (2.0 ** rng.integers(-3, 4, a_scales.shape)).astype(np.float32),
              rng.integers(-4, 5, b.shape).astype(ml_dtypes.float8_e4m3fn),
              (2.0 ** rng.integers(-3, 4, b_scales.shape)).astype(np.float32),
              np.full(c.shape, np.nan, ml_dtypes.bfloat16)]
    if workspace:
        partial, flags = workspace
        arrays += [np.full(partial.shape, np.nan, np.float32), np.zeros(flags.shape, np.int32)]
    return arrays


@pytest.mark.parametrize("kernel_name", list(blockscaled.EXAMPLE_ARGS))
def test_kernels_agree_with_the_interpreter(kernel_name):
    kernel = getattr(blockscaled, kernel_name)
    specs, constexprs = blockscaled.EXAMPLE_ARGS[kernel_name]
    arrays = exact_inputs(specs, np.random.default_rng(5))
    on_gpu = [to_device(a) for a in arrays]
    kernel(*on_gpu, **constexprs)
    interpreted = [a.copy() for a in arrays]
    kernel.interpret(*interpreted, **constexprs)
    for index, (device, host) in enumerate(zip(on_gpu, interpreted, strict=True)):
        assert np.array_equal(to_host(device).view(np.uint8), host.view(np.uint8)), f"argument {index}"


def _exact_torch_inputs(torch, m, n, k, seed):
    draw, kb = ExactBlockScaled(torch, seed), -(-k // 128)
    return draw.values((m, k)), draw.scales((kb, m)).t(), draw.values((n, k)), draw.scales((-(-n // 128), kb))


def _float64_reference(torch, a, a_scales, b, b_scales):
    (m, k), n = a.shape, b.shape[0]
    total = torch.zeros(m, n, device="cuda", dtype=torch.float64)
    for i in range(-(-k // 128)):
        part = slice(i * 128, (i + 1) * 128)
        total += ((a[:, part].double() @ b[:, part].double().t()) * a_scales[:, i, None].double()
                  * b_scales[:, i].double().repeat_interleave(128)[None, :n])
    return total


# 128 x 128 tiles (alone and split K 2); 64-row tiles split K 4; M = 1; M not a multiple
# of 4; ragged N and K (rows of fp8 a and b stay a multiple of the 16 bytes TMA copies)
@pytest.mark.parametrize("shape", [(1024, 2048, 1024), (64, 1024, 4096), (1, 2048, 7168), (70, 1024, 2048),
                                   (300, 520, 1008), (256, 24576, 1536)], ids=str)
def test_host_function_is_bit_exact_on_every_path(shape):
    torch = pytest.importorskip("torch")
    a, a_scales, b, b_scales = _exact_torch_inputs(torch, *shape, seed=sum(shape))
    c = K.gemm_fp8_blockscaled(a, a_scales, b, b_scales)
    assert c.dtype == torch.bfloat16 and c.shape == (shape[0], shape[1])
    wanted = _float64_reference(torch, a, a_scales, b, b_scales).to(torch.bfloat16)
    assert torch.equal(c, wanted)
    row_major = K.gemm_fp8_blockscaled(a, a_scales.contiguous(), b, b_scales)  # copied into M-major
    assert torch.equal(row_major, wanted)


@pytest.mark.parametrize("shape", [(1024, 2048, 1024), (300, 520, 1008), (4096, 1024, 2048)], ids=str)
def test_pairs_of_ctas_sharing_b_are_bit_exact(shape):
    torch = pytest.importorskip("torch")
    a, a_scales, b, b_scales = _exact_torch_inputs(torch, *shape, seed=sum(shape) + 1)
    config = GemmConfig(BM=128, BN=128, BK=128, STAGES=5)  # whole tiles, no split K, whatever the shape
    c = K.gemm_fp8_blockscaled(a, a_scales, b, b_scales, config=config, pair=True)
    assert torch.equal(c, _float64_reference(torch, a, a_scales, b, b_scales).to(torch.bfloat16))


def test_random_values_within_the_tensor_cores_rounding():
    torch = pytest.importorskip("torch")
    m, n, k = 512, 7168, 16384
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    a_scales = (torch.rand(k // 128, m, device="cuda") + 0.5).t()
    b_scales = torch.rand(n // 128, k // 128, device="cuda") + 0.5
    exact = _float64_reference(torch, a, a_scales, b, b_scales)
    c = K.gemm_fp8_blockscaled(a, a_scales, b, b_scales)
    # bf16's rounding (2^-9 relative) dominates: the promotion every 128 keeps the sum's error small
    assert float((c.double() - exact).norm() / exact.norm()) < 3e-3
