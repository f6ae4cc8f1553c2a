"""The interpreter's entry points behind `Kernel.interpret` and `ASYNCDSL_INTERPRET=1`.

Both compile the kernel exactly as a GPU launch would (same specialisation cache, same passes)
and run `CompiledKernel.module`, the IR the PTX is printed from, on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from asyncdsl import packed_elements
from asyncdsl.dtypes import as_dtype
from asyncdsl.errors import SourceLocation
from asyncdsl.frontend.kernel import BoundCall
from asyncdsl.interpret.grid import run_kernel
from asyncdsl.interpret.host_arrays import host_copy, numpy_argument
from asyncdsl.interpret.memory import GlobalArgument
from asyncdsl.runtime.launch import launch_grid

if TYPE_CHECKING:
    from asyncdsl.frontend.kernel import Kernel


def interpret_numpy(kernel: Kernel, args: tuple, kwargs: dict, location: SourceLocation | None) -> None:
    """`kernel.interpret(*args, **kwargs)`: run on numpy arrays, writing outputs in place."""
    call = kernel.bind(args, kwargs, location)
    arrays = [numpy_argument(name, value, location) for name, value in call.arrays]
    _interpret(kernel, call, arrays, location)


def interpret_any_arrays(kernel: Kernel, args: tuple, kwargs: dict, location: SourceLocation | None) -> None:
    """An ordinary kernel call under ASYNCDSL_INTERPRET=1: arrays of any supported framework
    are copied to numpy, interpreted, and copied back in place."""
    call = kernel.bind(args, kwargs, location)
    copies = [host_copy(name, value, location) for name, value in call.arrays]
    _interpret(kernel, call, [c.array for c in copies], location)
    for copy in copies:
        copy.write_back()


def _interpret(kernel: Kernel, call: BoundCall, arrays: Sequence[np.ndarray], location: SourceLocation | None) -> None:
    names = [name for name, _ in call.arrays]
    numpy_call = BoundCall(tuple(zip(names, arrays)), call.constexprs)
    compiled = kernel.specialize(kernel.specs(numpy_call, location), numpy_call.constexprs)
    grid = launch_grid(kernel.grid_for(numpy_call, location), kernel.launch.cluster)
    # 4-bit elements run packed, as on the GPU (`asyncdsl.packed_elements`), and come back unpacked.
    memory = [packed_elements.pack(a) if _is_packed(a) else a for a in arrays]
    run_kernel(compiled.module, [GlobalArgument(n, m) for n, m in zip(names, memory)], grid)
    for array, held in zip(arrays, memory):
        if held is not array:
            array[...] = packed_elements.unpack(held, as_dtype(array.dtype), array.shape)


def _is_packed(array: np.ndarray) -> bool:
    return packed_elements.is_packed(as_dtype(array.dtype))
