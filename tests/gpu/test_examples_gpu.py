"""Every example's `main()` passes on the GPU, and each example kernel gives the interpreter's
bytes on the same random inputs (the GPU and the interpreter run the same IR)."""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest
from gpu_support import assert_within_approximation, hopper_or_skip
from support import random_bits

import asyncdsl.examples
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu

EXAMPLES = [
    importlib.import_module(f"asyncdsl.examples.{info.name}")
    for info in pkgutil.iter_modules(asyncdsl.examples.__path__)
]


# The examples that run as programs.
@pytest.mark.parametrize("module", [m for m in EXAMPLES if hasattr(m, "main")],
                         ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_example_main_passes_on_the_gpu(module):
    assert module.main() == 0


@pytest.mark.parametrize(
    "module,kernel_name",
    [(m, name) for m in EXAMPLES for name in getattr(m, "EXAMPLE_ARGS", {})],
    ids=lambda v: v if isinstance(v, str) else v.__name__.rsplit(".", 1)[-1],
)
def test_example_kernels_agree_with_the_interpreter(module, kernel_name):
    rng = np.random.default_rng(5)
    kernel = getattr(module, kernel_name)
    specs, constexprs = module.EXAMPLE_ARGS[kernel_name]
    # An example whose arithmetic the interpreter models only on some inputs (the tensor cores'
    # sums: exact on small integers) says which, `example_inputs`; the rest take random bits.
    make = getattr(module, "example_inputs", None)
    arrays = make(specs, rng) if make else [random_bits(spec.shape, spec.dtype, rng) for spec in specs]
    on_gpu = [to_device(a) for a in arrays]
    kernel(*on_gpu, **constexprs)
    interpreted = [a.copy() for a in arrays]
    kernel.interpret(*interpreted, **constexprs)
    for index, (device, host) in enumerate(zip(on_gpu, interpreted)):
        gpu = to_host(device)
        # (atol, rtol) of an example whose arithmetic compounds approximations
        if hasattr(module, "TOLERANCE"):
            atol, rtol = module.TOLERANCE
            np.testing.assert_allclose(gpu.astype(np.float64), host.astype(np.float64), atol=atol, rtol=rtol,
                                       err_msg=f"argument {index}")
        elif getattr(module, "APPROXIMATE", False):
            assert_within_approximation(gpu, host, f"argument {index}")
        else:
            assert np.array_equal(gpu.view(np.uint8), host.view(np.uint8)), f"argument {index}"
