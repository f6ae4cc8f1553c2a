"""The interpreter's launcher: run a compiled kernel's module over numpy arrays on a grid.

`Kernel` compiles exactly as for a GPU launch (same specialisation cache, same passes) and hands
this launcher the module after the asyncdsl-level passes, the IR the PTX is printed from, with
the array arguments as C-contiguous numpy arrays (written in place), the runtime scalars as the
kernel receives them (ints in 32 bits, floats rounded to float32), and the checked grid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from asyncdsl.dtypes import as_dtype
from asyncdsl.errors import ArgumentError
from asyncdsl.hw import packed
from asyncdsl.hw.profile import WarpgroupRecord
from asyncdsl.interpret.grid import run_devices, run_kernel
from asyncdsl.interpret.memory import GlobalArgument


def launch(
    module: ModuleOp,
    names: Sequence[str],
    arrays: Sequence[np.ndarray],
    grid: tuple[int, int, int],
    scalars: Sequence[int | float] = (),
) -> list[WarpgroupRecord] | None:
    """Run the kernel of `module` on `grid` over `arrays` (argument `names[i]` is `arrays[i]`) and
    the runtime `scalars` (the kernel's arguments after its arrays); a kernel traced for profiling
    returns its warpgroups' records on the logical clock."""
    # 4-bit elements run packed, as on the GPU (`asyncdsl.hw.packed`), and come back unpacked.
    memory = [packed.pack(a) if _is_packed(a) else a for a in arrays]
    records = run_kernel(module, [GlobalArgument(n, m) for n, m in zip(names, memory)], grid, scalars)
    for array, held in zip(arrays, memory):
        if held is not array:
            array[...] = packed.unpack(held, as_dtype(array.dtype), array.shape)
    return records


def _is_packed(array: np.ndarray) -> bool:
    return packed.is_packed(as_dtype(array.dtype))


def launch_devices(
    module: ModuleOp,
    names: Sequence[str],
    arrays: Sequence[Sequence[np.ndarray]],
    grid: tuple[int, int, int],
    scalars: Sequence[int | float] = (),
) -> None:
    """Run the kernel of `module` on `len(arrays)` emulated devices at once: `arrays[d][i]` is
    argument `names[i]` on device d (`interpret/distributed.py`)."""
    if any(_is_packed(a) for device in arrays for a in device):
        raise ArgumentError("4-bit arrays are not supported on several devices yet")
    run_devices(module, [[GlobalArgument(n, a) for n, a in zip(names, device)] for device in arrays],
                grid, scalars)
