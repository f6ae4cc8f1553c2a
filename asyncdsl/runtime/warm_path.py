"""The warm path of a kernel's calls: launches already checked, kept by argument layout.

The first call of a layout takes the full path (bind, check every array, compile on a miss,
launch) and `remember`s it: a `PreparedLaunch` of its own and where its stream comes from.  A
later call is warm when every parameter is given (by position or name) or has a default, every
array is an asyncdsl `DeviceArray` or a torch tensor and every runtime scalar a Python int
or float, and the call has the layout of one seen before: arrays of the same shape, dtype and
device (and contiguous), scalars of the same class (int or float; for an int, whether it is a
multiple of `INT_SPECIALIZATION_DIVISOR`, which the kernel is specialized on), the same
constexprs and debug mode.  What the layout does not fix is still checked on every warm call:
each address's 16-byte alignment (a misaligned one takes the full path, which names it) and that
each scalar fits its parameter (`PreparedLaunch`).  Grids are assumed to depend on array shapes
and constexprs only, except that a grid function is called again on a launch with scalars (it
may read them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from asyncdsl.config import knobs
from asyncdsl.hw.limits import GMEM_ADDRESS_ALIGNMENT
from asyncdsl.kernel_binary import INT_SPECIALIZATION_DIVISOR, constexpr_key
from asyncdsl.runtime.arrays import DeviceArray
from asyncdsl.runtime.launch import LoadedKernel, PreparedLaunch
from asyncdsl.runtime.streams import launch_stream

_ALIGNMENT_BITS = GMEM_ADDRESS_ALIGNMENT - 1
_NONE = object()  # no default


class WarmLaunches:
    """The prepared launches of one kernel, by argument layout."""

    def __init__(self, params: tuple[str, ...], constexpr_names: frozenset[str],
                 grid_function: Callable | None, defaults: dict[str, Any] | None = None):
        self._params = params
        # Each parameter's default (`_NONE` where it has none), to fill what a call leaves out.
        self._defaults = tuple((defaults or {}).get(name, _NONE) for name in params)
        self._positions = {name: position for position, name in enumerate(params)}
        self._required = tuple(position for position, default in enumerate(self._defaults)
                               if default is _NONE)  # the parameters a call must give
        self._constexpr = tuple(name in constexpr_names for name in params)
        self._grid_function = grid_function
        self._launches: dict[tuple, tuple[PreparedLaunch, Callable[[], int] | None]] = {}
        # torch.Tensor, once a remembered call brought one (torch is never imported here, and
        # ships no types the checker reads).
        self._tensor_type: Any = None

    def launch(self, args: tuple, kwargs: dict, stream: Any) -> bool:
        """Launch if this layout was seen before and the addresses are aligned; say whether it did."""
        found = self._key(args, kwargs)
        if found is None:
            return False
        key, addresses, scalars, values = found
        try:
            entry = self._launches.get(key)
        except TypeError:  # an unhashable constexpr: the full path says what is wrong with it
            return False
        if entry is None:
            return False
        prepared, stream_source = entry
        handle = launch_stream(stream, stream_source)
        grid = None
        if scalars and self._grid_function is not None:
            grid = self._grid_function(**dict(zip(self._params, values)))
        prepared.launch(addresses, handle, scalars, grid)
        return True

    def remember(
        self,
        args: tuple,
        kwargs: dict,
        loaded: LoadedKernel,
        grid: tuple[int, int, int],
        stream_source: Callable[[], int] | None,
    ) -> None:
        """Record a launch the full path just checked, for later calls of the same layout;
        `stream_source` gives the stream such a call runs on when it names none."""
        if self._tensor_type is None:
            self._tensor_type = getattr(sys.modules.get("torch"), "Tensor", None)
        found = self._key(args, kwargs)
        if found is None:
            return
        try:
            hash(found[0])
        except TypeError:
            return
        self._launches[found[0]] = (loaded.prepare(grid), stream_source)

    def _key(self, args: tuple, kwargs: dict) -> tuple[tuple, tuple[int, ...], list, Any] | None:
        """(layout key, array addresses, scalar values, every argument in signature order), or
        None for a call the full path takes.  Runs on every call: kept to plain loops."""
        given = len(args)
        values: Sequence[Any] = args
        if kwargs or given != len(self._params):
            if given > len(self._params):
                return None
            filled = [*args, *self._defaults[given:]]
            for name, value in kwargs.items():
                position = self._positions.get(name, -1)
                if position < given:  # unknown, or also given by position: the full path says so
                    return None
                filled[position] = value
            for position in self._required:
                if filled[position] is _NONE:  # neither given nor defaulted: the full path says so
                    return None
            values = filled
        tensor_type = self._tensor_type
        parts: list[object] = []
        addresses: list[int] = []
        scalars: list[int | float] = []
        address_bits = 0
        for value, constexpr in zip(values, self._constexpr):
            kind = type(value)
            if constexpr:  # 1, 1.0 and True are equal but trace differently; floats go by their bits
                parts.append(constexpr_key(value) if kind is float or kind is tuple else (kind, value))
                continue
            if kind is int:
                parts.append(value % INT_SPECIALIZATION_DIVISOR == 0)
                scalars.append(value)
            elif kind is float:
                parts.append(float)
                scalars.append(value)
            elif kind is DeviceArray:
                # The dtype by name: a DType's own hash is a dataclass's, hashing its fields.
                parts.append((value.shape, value.dtype.name, value.strides, value.device))
                address = value.address
                address_bits |= address
                addresses.append(address)
            elif tensor_type is not None and isinstance(value, tensor_type):
                # A contiguous tensor's strides follow from its shape (extent-1 dims aside, which
                # no kernel reads), so shape, dtype and device fix its layout.
                if not value.is_contiguous():
                    return None
                parts.append((value.shape, value.dtype, value.get_device()))
                address = value.data_ptr()
                address_bits |= address
                addresses.append(address)
            else:
                return None
        if address_bits & _ALIGNMENT_BITS:
            return None
        parts.append(knobs.debug)  # debug mode compiles another kernel
        return tuple(parts), tuple(addresses), scalars, values

