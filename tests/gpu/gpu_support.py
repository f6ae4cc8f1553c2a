"""Helpers of the GPU tests: skipping without a Hopper GPU, random inputs."""

from __future__ import annotations

import pytest

from asyncdsl.runtime import device_facts, has_gpu


def hopper_or_skip() -> None:
    """Skip the calling test module unless an sm_90 GPU is usable."""
    if not has_gpu():
        pytest.skip("needs a CUDA GPU (asyncdsl.runtime.has_gpu() is False)", allow_module_level=True)
    if device_facts(0).compute_capability != (9, 0):
        pytest.skip(f"needs a Hopper GPU (sm_90); {device_facts(0)} is not one", allow_module_level=True)


def random_bytes_array(shape, dtype, rng):
    """Random bits of every class the dtype has (a copy moves bytes, so NaNs must survive too)."""
    import numpy as np

    raw = rng.integers(0, 256, size=(*shape, dtype.itemsize), dtype=np.uint8)
    return raw.view(dtype.numpy).reshape(shape)
