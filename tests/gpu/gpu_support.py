"""Helpers of the GPU tests: skipping without a Hopper GPU, random inputs."""

from __future__ import annotations

import pytest

from asyncdsl.runtime import device_facts, has_gpu, to_device, to_host


def hopper_or_skip() -> None:
    """Skip the calling test module unless an sm_90 GPU is usable."""
    if not has_gpu():
        pytest.skip("needs a CUDA GPU (asyncdsl.runtime.has_gpu() is False)", allow_module_level=True)
    if device_facts(0).compute_capability != (9, 0):
        pytest.skip(f"needs a Hopper GPU (sm_90); {device_facts(0)} is not one", allow_module_level=True)




def gpu_and_interpreter(kernel, inputs, outputs, **constexprs):
    """The outputs after a GPU launch and after the interpreter, from the same inputs (lists)."""
    on_gpu = [to_device(a) for a in (*inputs, *outputs)]
    kernel(*on_gpu, **constexprs)
    interpreted = [a.copy() for a in outputs]
    kernel.interpret(*inputs, *interpreted, **constexprs)
    return [to_host(a) for a in on_gpu[len(inputs):]], interpreted
