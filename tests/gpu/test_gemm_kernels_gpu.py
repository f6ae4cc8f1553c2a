"""The library's GEMMs on the GPU: every kernel of `asyncdsl.kernels.gemm*` at its EXAMPLE_ARGS
gives the interpreter's bytes on the same small-integer inputs (exact sums), and the host
functions `gemm` and `gemm_fp8` on torch tensors, on every path `choose` takes, against torch in
float64 (small integers: exact)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from gpu_support import assert_within_approximation, hopper_or_skip

import asyncdsl.kernels as K
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

MODULES = [importlib.import_module(f"asyncdsl.kernels.{name}") for name in (
    "gemm_cooperative", "gemm_pingpong", "gemm_fp8", "gemm_epilogue", "gemm_stream_k")]


# Kernels whose epilogue uses ex2/lg2.approx, which the interpreter computes correctly rounded
APPROXIMATING = {"matmul_bias_activation"}


@pytest.mark.parametrize("module,kernel_name", [(m, name) for m in MODULES for name in m.EXAMPLE_ARGS],
                         ids=lambda v: v if isinstance(v, str) else v.__name__.rsplit(".", 1)[-1])
def test_gemm_kernels_agree_with_the_interpreter(module, kernel_name):
    kernel = getattr(module, kernel_name)
    specs, constexprs = module.EXAMPLE_ARGS[kernel_name]
    arrays = module.example_inputs(specs, np.random.default_rng(5))
    on_gpu = [to_device(a) for a in arrays]
    kernel(*on_gpu, **constexprs)
    interpreted = [a.copy() for a in arrays]
    kernel.interpret(*interpreted, **constexprs)
    for index, (device, host) in enumerate(zip(on_gpu, interpreted)):
        if kernel_name in APPROXIMATING:
            assert_within_approximation(to_host(device), host, f"argument {index}")
        else:
            assert np.array_equal(to_host(device).view(np.uint8), host.view(np.uint8)), f"argument {index}"


def _small_integers(shape, torch, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-3, 4, shape, generator=generator).to("cuda", torch.bfloat16)


# Every plan `gemm` picks on 132 SMs (`gemm_choice.plan`): 128 x 256 tiles; 256 x 128 in CTA pairs;
# one consumer with 64 x 64 and 64 x 128 tiles, and 128 x 64 ones in pairs sharing a (rows of a
# off 128-byte lines); split K in order; ping-pong over many tiles and over about a wave of them;
# 128 x 128 tiles of one row.
@pytest.mark.parametrize("shape", [
    (2048, 2048, 512), (3000, 4104, 264), (128, 4096, 1024), (1024, 1024, 1024), (1000, 1000, 1000),
    (128, 1024, 4096), (8192, 4096, 256), (512, 4096, 2048), (128, 14336, 512)], ids=str)
def test_gemm_of_torch_tensors_is_exact_on_every_path(shape):
    torch = pytest.importorskip("torch")
    m, n, k = shape
    a, b = _small_integers((m, k), torch, 1), _small_integers((k, n), torch, 2)
    c = K.gemm(a, b)
    assert c.dtype == torch.bfloat16 and c.device == a.device
    assert torch.equal(c.cpu(), (a.double() @ b.double()).to(torch.bfloat16).cpu())


@pytest.mark.parametrize("shape", [(1000, 1000, 1000), (2048, 2048, 512)], ids=str)
def test_a_tuned_gemm_times_its_candidates_once_and_is_exact(shape):
    """`gemm(tune=True)`: the first call of a shape times the candidates and keeps one; every
    call's product is exact on small integers."""
    torch = pytest.importorskip("torch")
    from asyncdsl.kernels.gemm_choice import _tuned, candidates

    m, n, k = shape
    a, b = _small_integers((m, k), torch, 5), _small_integers((k, n), torch, 6)
    exact = (a.double() @ b.double()).to(torch.bfloat16).cpu()
    for _ in range(2):
        assert torch.equal(K.gemm(a, b, tune=True).cpu(), exact)
    ctas = torch.cuda.get_device_properties(0).multi_processor_count // 2 * 2
    timed = _tuned(m, n, k, ctas).timings
    assert len(timed) == 1 and len(next(iter(timed.values()))) == len(candidates(m, n, k, ctas))


@pytest.mark.parametrize("k", [1024, 8192])  # ping-pong, promoted
def test_gemm_fp8_of_torch_tensors_is_exact(k):
    torch = pytest.importorskip("torch")
    m, n = 512, 768
    a = _small_integers((m, k), torch, 3).to(torch.float8_e4m3fn)
    b = _small_integers((n, k), torch, 4).to(torch.float8_e4m3fn)
    sa, sb = torch.full((m,), 0.5, device="cuda"), torch.full((n,), 2.0, device="cuda")
    c = K.gemm_fp8(a, b, sa, sb)
    assert torch.equal(c.cpu(), (a.double() @ b.double().T).to(torch.bfloat16).cpu())


@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (4096, 14336, 4096), (300, 520, 200)], ids=str)
def test_gemm_bias_gelu_of_torch_tensors_is_torchs_within_bf16(shape):
    """The benchmark's shapes (`benchmarks/gemm_epilogue.py`) and a ragged one."""
    torch = pytest.importorskip("torch")
    m, n, k = shape
    generator = torch.Generator().manual_seed(7)
    a = torch.randn(m, k, generator=generator).to("cuda", torch.bfloat16)
    b = (torch.randn(k, n, generator=generator) / k ** 0.5).to("cuda", torch.bfloat16)
    bias = torch.randn(n, generator=generator).to("cuda", torch.bfloat16)
    c = K.gemm_bias_activation(a, b, bias, "gelu")
    exact = torch.nn.functional.gelu(a.double() @ b.double() + bias.double(), approximate="tanh")
    assert float((c.double() - exact).norm() / exact.norm()) < 1e-2


WAVE_QUANTISED = [(2200, 4104, 2056), (1000, 1000, 1000), (512, 4096, 14336), (128, 4096, 4096)]


@pytest.mark.parametrize("shape", WAVE_QUANTISED, ids=str)
def test_gemm_stream_k_of_torch_tensors_is_exact(shape):
    """Shapes whose 128 x 128 tiles leave the last wave part idle."""
    torch = pytest.importorskip("torch")
    m, n, k = shape
    a, b = _small_integers((m, k), torch, 5), _small_integers((k, n), torch, 6)
    c = K.gemm_stream_k(a, b)
    assert torch.equal(c.cpu(), (a.double() @ b.double()).to(torch.bfloat16).cpu())


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (300, 528, 200)], ids=str)
def test_gemm_fp8_rows_of_torch_tensors_rounds_the_product_to_e4m3_with_row_scales(shape):
    torch = pytest.importorskip("torch")
    m, n, k = shape
    generator = torch.Generator().manual_seed(8)
    a = torch.randn(m, k, generator=generator).to("cuda", torch.bfloat16)
    b = torch.randn(k, n, generator=generator).to("cuda", torch.bfloat16)
    q, scales = K.gemm_fp8_rows(a, b)
    exact = (a.double() @ b.double()).cpu()
    tile_scales = scales.double().cpu().repeat_interleave(256, dim=1)[:, :n]
    assert torch.allclose(scales.double().cpu()[:, 0], exact[:, :256].abs().amax(dim=1) / 448, rtol=1e-5)
    # e4m3 rounds to 2^-4 of the value (normal) or half a step of 2^-9 scales (subnormal); the
    # rounded value is the float32 accumulator's, off the exact product by the K-long sum's own
    # rounding, well under 2^-22 of sum |a| |b| (it shows on products near 0 at K = 4096)
    accumulated = (a.double().abs() @ b.double().abs()).cpu() * 2.0 ** -22
    rounding = torch.maximum((exact.abs() + accumulated) * 2.0 ** -4, tile_scales * 2.0 ** -9)
    bound = rounding * 1.01 + accumulated
    assert ((q.cpu().double() * tile_scales - exact).abs() <= bound).all()


def test_split_k_gemms_on_two_streams_at_once_keep_their_own_sums():
    torch = pytest.importorskip("torch")
    m, n, k = 128, 1024, 4096  # split K (few tiles, long K)
    from asyncdsl.kernels.gemm_choice import plan
    assert plan(m, n, k, 132).config.SPLIT_K > 1
    pairs = [(_small_integers((m, k), torch, 10 + i), _small_integers((k, n), torch, 20 + i))
             for i in range(8)]
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    results = []
    for i, (a, b) in enumerate(pairs):
        with torch.cuda.stream(streams[i % 2]):
            results.append(K.gemm(a, b))
    torch.cuda.synchronize()
    for (a, b), c in zip(pairs, results):
        assert torch.equal(c, (a.double() @ b.double()).to(torch.bfloat16))


def test_a_split_k_gemm_on_a_named_stream_waits_for_its_new_workspace():
    # The first call of a shape zeroes split K's flags on torch's current stream; the kernel runs
    # on the stream the call names, which must wait for that.
    torch = pytest.importorskip("torch")
    m, n, k = 64, 1536, 8192
    from asyncdsl.kernels.gemm_choice import plan
    assert plan(m, n, k, 132).config.SPLIT_K > 1
    a, b = _small_integers((m, k), torch, 31), _small_integers((k, n), torch, 32)
    named = torch.cuda.Stream()
    torch.cuda.synchronize()  # a and b written
    torch.cuda._sleep(50_000_000)  # the current stream busy, so an unordered kernel would run first
    c = K.gemm(a, b, stream=named)
    torch.cuda.synchronize()
    assert torch.equal(c, (a.double() @ b.double()).to(torch.bfloat16))
