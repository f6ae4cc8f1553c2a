"""The grouped GEMM with device-side group sizes on the GPU: the kernel at its EXAMPLE_ARGS gives
the interpreter's bytes (uneven groups, an empty one), and the host functions on torch tensors
are bit-exact against float64 on small integers for uneven, empty and even groups, the masked
layout, and agree with `torch._grouped_mm` where this torch has it; one launch serves any
routing without a host sync (captured in a CUDA graph, replayed over new offsets); the
block-scaled fp8 forms are bit-exact against float64 on exact inputs."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from gpu_support import ExactBlockScaled, hopper_or_skip

import asyncdsl.kernels as K
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu
grouped = importlib.import_module("asyncdsl.kernels.grouped_gemm")  # K.<name> is the function


def test_kernel_agrees_with_the_interpreter():
    specs, constexprs = grouped.EXAMPLE_ARGS["matmul_grouped_sizes"]
    arrays = grouped.example_inputs(specs, np.random.default_rng(5))
    on_gpu = [to_device(a) for a in arrays]
    grouped.matmul_grouped_sizes(*on_gpu, **constexprs)
    interpreted = [a.copy() for a in arrays]
    grouped.matmul_grouped_sizes.interpret(*interpreted, **constexprs)
    for index, (device, host) in enumerate(zip(on_gpu, interpreted, strict=True)):
        assert np.array_equal(to_host(device).view(np.uint8), host.view(np.uint8)), f"argument {index}"


def _small(torch, shape, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-3, 4, shape, generator=generator).to("cuda", torch.bfloat16)


SIZES = {"uneven with empty": [0, 700, 1, 0, 2000, 333, 0, 1062], "even": [512] * 8,
         "one group": [4096], "all empty": [0, 0, 0]}


@pytest.mark.parametrize("sizes", SIZES.values(), ids=SIZES.keys())
def test_offsets_layout_is_bit_exact(sizes):
    torch = pytest.importorskip("torch")
    groups, k, n = len(sizes), 512, 768
    rows = max(sum(sizes), 64)
    a, b = _small(torch, (rows, k), 1), _small(torch, (groups, k, n), 2)
    offsets = torch.tensor(np.cumsum(sizes), dtype=torch.int32, device="cuda")
    c = torch.full((rows, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    K.grouped_gemm(a, b, offsets, out=c)
    first = 0
    for g, end in enumerate(np.cumsum(sizes).tolist()):
        assert torch.equal(c[first:end], (a[first:end].double() @ b[g].double()).to(torch.bfloat16)), g
        first = end
    assert torch.isnan(c[first:]).all()
    aligned = all(size % 16 == 0 for size in sizes)  # what torch._grouped_mm may ask of offsets
    if hasattr(torch, "_grouped_mm") and sum(sizes) and aligned:
        peer = torch._grouped_mm(a, b, offs=offsets)
        assert torch.equal(c[:first], peer[:first])


def test_masked_layout_is_bit_exact():
    torch = pytest.importorskip("torch")
    groups, capacity, k, n = 6, 256, 512, 384
    a, b = _small(torch, (groups, capacity, k), 3), _small(torch, (groups, k, n), 4)
    counts = torch.tensor([0, 256, 17, 128, 255, 1], dtype=torch.int32, device="cuda")
    c = torch.full((groups, capacity, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    K.grouped_gemm_masked(a, b, counts, out=c)
    for g, count in enumerate(counts.tolist()):
        assert torch.equal(c[g, :count], (a[g, :count].double() @ b[g].double()).to(torch.bfloat16)), g
        assert torch.isnan(c[g, count:]).all()


def test_one_graph_serves_any_routing():
    torch = pytest.importorskip("torch")
    groups, rows, k, n = 4, 1024, 256, 256
    a, b = _small(torch, (rows, k), 5), _small(torch, (groups, k, n), 6)
    offsets = torch.zeros(groups, dtype=torch.int32, device="cuda")
    c = torch.zeros((rows, n), device="cuda", dtype=torch.bfloat16)
    K.grouped_gemm(a, b, offsets, out=c)  # compiled and warm before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        K.grouped_gemm(a, b, offsets, out=c)
    for sizes in ([256, 256, 256, 256], [0, 1000, 0, 24], [1, 2, 3, 1018]):
        offsets.copy_(torch.tensor(np.cumsum(sizes), dtype=torch.int32))
        graph.replay()
        first = 0
        for g, end in enumerate(np.cumsum(sizes).tolist()):
            assert torch.equal(c[first:end], (a[first:end].double() @ b[g].double()).to(torch.bfloat16))
            first = end


def _fp8_inputs(torch, rows, groups, n, k, seed):
    draw, kb = ExactBlockScaled(torch, seed), -(-k // 128)
    a, a_scales = draw.values((rows, k)), draw.scales((rows, kb))
    return a, a_scales, draw.values((groups, n, k)), draw.scales((groups, n // 128, kb))


def _block_scaled(torch, a, a_scales, b, b_scales):
    total = torch.zeros(a.shape[0], b.shape[0], device="cuda", dtype=torch.float64)
    for i in range(a_scales.shape[1]):
        part = slice(i * 128, (i + 1) * 128)
        total += ((a[:, part].double() @ b[:, part].double().t()) * a_scales[:, i, None].double()
                  * b_scales[:, i].double().repeat_interleave(128)[None, :])
    return total.to(torch.bfloat16)


def test_block_scaled_fp8_groups_are_bit_exact():
    torch = pytest.importorskip("torch")
    sizes = [0, 700, 1, 0, 1000, 347]
    a, a_scales, b, b_scales = _fp8_inputs(torch, sum(sizes), len(sizes), 512, 1024, 7)
    offsets = torch.tensor(np.cumsum(sizes), dtype=torch.int32, device="cuda")
    c = K.grouped_gemm_fp8_blockscaled(a, a_scales, b, b_scales, offsets)
    first = 0
    for g, end in enumerate(np.cumsum(sizes).tolist()):
        wanted = _block_scaled(torch, a[first:end], a_scales[first:end], b[g], b_scales[g])
        assert torch.equal(c[first:end], wanted), g
        first = end


def test_block_scaled_fp8_masked_groups_are_bit_exact():
    torch = pytest.importorskip("torch")
    groups, capacity = 4, 192
    a, a_scales, b, b_scales = _fp8_inputs(torch, groups * capacity, groups, 256, 512, 8)
    a, a_scales = a.reshape(groups, capacity, -1), a_scales.reshape(groups, capacity, -1)
    counts = torch.tensor([192, 0, 65, 1], dtype=torch.int32, device="cuda")
    c = torch.full((groups, capacity, 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    K.grouped_gemm_fp8_blockscaled_masked(a, a_scales, b, b_scales, counts, out=c)
    for g, count in enumerate(counts.tolist()):
        wanted = _block_scaled(torch, a[g, :count], a_scales[g, :count], b[g], b_scales[g])
        assert torch.equal(c[g, :count], wanted), g
        assert torch.isnan(c[g, count:]).all()
