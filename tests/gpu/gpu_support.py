"""Helpers of the GPU tests: skipping without a Hopper GPU, running a kernel on the GPU and in
the interpreter, comparing what approximate functions computed."""

from __future__ import annotations

import numpy as np
import pytest

from asyncdsl.runtime import device_facts, has_gpu, to_device, to_host


def hopper_or_skip() -> None:
    """Skip the calling test module unless an sm_90 GPU is usable."""
    if not has_gpu():
        pytest.skip("needs a CUDA GPU (asyncdsl.runtime.has_gpu() is False)", allow_module_level=True)
    if device_facts(0).compute_capability != (9, 0):
        pytest.skip(f"needs a Hopper GPU (sm_90); {device_facts(0)} is not one", allow_module_level=True)


class ExactBlockScaled:
    """Inputs of block-scaled fp8 products whose every sum is exact: small integers in e4m3 and
    power-of-two float32 scales, drawn on the host from `seed` and moved to the GPU."""

    def __init__(self, torch, seed: int):
        self.torch, self.generator = torch, torch.Generator().manual_seed(seed)

    def values(self, shape):
        torch = self.torch
        return torch.randint(-4, 5, shape, generator=self.generator).to("cuda", torch.float8_e4m3fn)

    def scales(self, shape):
        torch = self.torch
        return (2.0 ** torch.randint(-3, 4, shape, generator=self.generator)).to("cuda", torch.float32)


def gpu_and_interpreter(kernel, inputs, outputs, **constexprs):
    """The outputs after a GPU launch and after the interpreter, from the same inputs (lists)."""
    on_gpu = [to_device(a) for a in (*inputs, *outputs)]
    kernel(*on_gpu, **constexprs)
    interpreted = [a.copy() for a in outputs]
    kernel.interpret(*inputs, *interpreted, **constexprs)
    return [to_host(a) for a in on_gpu[len(inputs):]], interpreted


def assert_within_approximation(gpu: np.ndarray, host: np.ndarray, what: str) -> None:
    """The GPU's output of a kernel using hardware approximations (ex2.approx, rsqrt.approx, ...)
    against the interpreter's correctly rounded functions: a few float32 ulps apart, so at most
    one ulp of a 16-bit output; NaNs and infinities where the interpreter has them."""
    with np.errstate(invalid="ignore"):  # NaN payloads (random bits) warn as they widen
        wide_gpu, wide_cpu = gpu.astype(np.float64), host.astype(np.float64)
    assert np.array_equal(np.isnan(wide_gpu), np.isnan(wide_cpu)), f"{what}: NaNs"
    finite = np.isfinite(wide_cpu) & np.isfinite(wide_gpu)
    assert np.array_equal(wide_gpu[~finite], wide_cpu[~finite], equal_nan=True), f"{what}: inf"
    gpu_finite, cpu_finite = wide_gpu[finite], wide_cpu[finite]  # inf - inf would warn
    assert (np.abs(gpu_finite - cpu_finite) <= 2 ** -7 * np.abs(cpu_finite) + 2 ** -126).all(), what
