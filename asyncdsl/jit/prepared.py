"""`Kernel.prepare`: a kernel call whose argument layout is fixed once, for callers that pass
arrays of the same shapes every time (a model's layer, a training step).

    step = matmul.prepare(a, b, c, CTAS=132)     # checked, compiled, loaded: nothing launched
    step(a, b, c)                                # the runtime arguments only, in signature order
    step(a2, b2, c2)                             # other arrays of the same layout

`prepare` takes the checked path of a first call (binding, every array checked, the binary from
the caches or compiled, loaded, parameters packed) and keeps a `PreparedLaunch` of its own.  A
call then reads each array's layout and address (asyncdsl's `DeviceArray` and torch tensors by
their attributes; other arrays through `runtime.device_array`), checks them against the layout
prepared (another layout is an `ArgumentError`, never a launch of a kernel compiled for other
shapes) and launches: the parameters are refilled only where an address, a scalar or the stream
changed, tensor maps of addresses seen before come from their cache and new addresses are
patched into a copy (`runtime/tensormap.py`).  Constexprs are fixed by `prepare`; runtime
scalars are passed on each call, and an int must keep its divisibility by
`INT_SPECIALIZATION_DIVISOR`, which the kernel was compiled for.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from asyncdsl import runtime
from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.hw.limits import GMEM_ADDRESS_ALIGNMENT
from asyncdsl.jit.binding import BoundCall
from asyncdsl.kernel_binary import INT_SPECIALIZATION_DIVISOR, scalar_argument
from asyncdsl.runtime.arrays import DeviceArray
from asyncdsl.runtime.launch import PreparedLaunch
from asyncdsl.runtime.streams import launch_stream

_ALIGNMENT_BITS = GMEM_ADDRESS_ALIGNMENT - 1


def _layout(array: DeviceArray) -> tuple:
    return array.shape, array.dtype, array.strides, array.device


class PreparedCall:
    """A kernel call prepared for one argument layout (see the module docstring)."""

    def __init__(self, name: str, call: BoundCall, arrays: list[DeviceArray], launch: PreparedLaunch,
                 stream: Any, stream_source: Callable[[], int] | None, grid_function: Callable | None):
        self.name = name
        self._names = tuple(argument for argument, _ in call.runtime)
        self._constexprs = dict(call.constexprs)
        self._launch = launch
        self._stream = None if stream is None else launch_stream(stream, None)
        self._stream_source = stream_source
        self._grid_function = grid_function
        by_name = dict(zip((n for n, _ in call.arrays()), arrays))
        tensor_type = getattr(sys.modules.get("torch"), "Tensor", None)
        self._tensor_type = tensor_type
        # (position, layout of a DeviceArray, layout of a torch tensor or None) per array argument.
        self._arrays = []
        for position, ((argument, value), kind) in enumerate(zip(call.runtime, call.kinds)):
            if kind is None:
                array = by_name[argument]
                tensor = (tuple(array.shape), value.dtype, value.get_device()) if (
                    tensor_type is not None and isinstance(value, tensor_type)) else None
                self._arrays.append((position, _layout(array), tensor))
        # (position, kind, divisible) per scalar argument.
        self._scalars = [(position, kind, kind == "int" and value % INT_SPECIALIZATION_DIVISOR == 0)
                         for position, ((_, value), kind) in enumerate(zip(call.runtime, call.kinds)) if kind]

    def __call__(self, *args: Any, stream: Any = None) -> None:
        """Launch with these runtime arguments (arrays and scalars, in the kernel's signature
        order, constexprs left out), on `stream`, else the stream given to `prepare`, else the
        current stream of the arrays' library."""
        if len(args) != len(self._names):
            raise ArgumentError(f"{self.name} was prepared for {len(self._names)} runtime arguments "
                                f"({', '.join(self._names)}), got {len(args)}", user_location())
        tensor_type = self._tensor_type
        addresses = []
        bits = 0
        for position, layout, tensor in self._arrays:
            value = args[position]
            if value.__class__ is DeviceArray:
                if (value.shape, value.dtype, value.strides, value.device) != layout:
                    raise self._other_layout(position, value)
                address = value.address
            elif (tensor is not None and tensor_type is not None and isinstance(value, tensor_type)
                  and value.is_contiguous()):
                if value.dtype != tensor[1] or value.shape != tensor[0] or value.get_device() != tensor[2]:
                    raise self._other_layout(position, value)
                address = value.data_ptr()
            else:
                array = runtime.device_array(value, self._names[position])
                if _layout(array) != layout:
                    raise self._other_layout(position, value)
                address = array.address
            bits |= address
            addresses.append(address)
        if bits & _ALIGNMENT_BITS:
            raise self._misaligned(addresses)
        scalars = []
        if self._scalars:
            scalars = [self._scalar(position, kind, divisible, args[position])
                       for position, kind, divisible in self._scalars]
        if stream is not None:
            handle = launch_stream(stream, None)
        elif self._stream is not None:
            handle = self._stream
        else:
            handle = launch_stream(None, self._stream_source)
        grid = None
        if scalars and self._grid_function is not None:  # a grid may read the scalars
            grid = self._grid_function(**dict(zip(self._names, args)), **self._constexprs)
        self._launch.launch(tuple(addresses), handle, scalars, grid)

    def _scalar(self, position: int, kind: str, divisible: bool, value: Any) -> int | float:
        number = scalar_argument(kind, value, self._names[position])
        if kind == "int" and (number % INT_SPECIALIZATION_DIVISOR == 0) != divisible:
            raise ArgumentError(
                f"{self.name} was prepared with {self._names[position]} "
                f"{'a' if divisible else 'not a'} multiple of {INT_SPECIALIZATION_DIVISOR}, which the kernel "
                f"is compiled for; {number} is {'not ' if divisible else ''}one: prepare another call",
                user_location())
        return number

    def _other_layout(self, position: int, value: Any) -> ArgumentError:
        expected = next(layout for at, layout, _ in self._arrays if at == position)
        got = (f"shape {tuple(value.shape)}, {value.dtype}" if hasattr(value, "shape")
               else type(value).__name__)
        return ArgumentError(
            f"{self.name} was prepared for {self._names[position]} of shape {expected[0]}, {expected[1]} "
            f"(contiguous, on cuda:{expected[3]}); got {got}: prepare a call for that layout",
            user_location())

    def _misaligned(self, addresses: list[int]) -> ArgumentError:
        index = next(i for i, address in enumerate(addresses) if address & _ALIGNMENT_BITS)
        position = self._arrays[index][0]
        return ArgumentError(f"{self._names[position]} of {self.name} starts at {addresses[index]:#x}, "
                             f"not a multiple of {GMEM_ADDRESS_ALIGNMENT} bytes", user_location())

    def __repr__(self) -> str:
        return f"<prepared {self.name}({', '.join(self._names)})>"
