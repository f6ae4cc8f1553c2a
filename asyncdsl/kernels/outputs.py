"""The outputs of the library's host functions, made where their inputs live: a torch tensor on
the inputs' device, a numpy array for numpy inputs (which the kernels run in the interpreter),
and asyncdsl's own `DeviceArray` for any other GPU array."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from asyncdsl import runtime
from asyncdsl.dtypes import DType, as_dtype
from asyncdsl.errors import ArgumentError, user_location


def empty(like: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """A new, uninitialised array of `shape` and `dtype` beside the array `like`."""
    element: DType = as_dtype(dtype)
    shape = tuple(int(extent) for extent in shape)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor):
        return torch.empty(shape, dtype=getattr(torch, element.name), device=like.device)
    if isinstance(like, np.ndarray):
        return np.empty(shape, element.numpy)
    device = like.device if isinstance(like, runtime.DeviceArray) else 0
    return runtime.empty(shape, element, device)


def zeros(like: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """A new array of zeros of `shape` and `dtype` beside the array `like` (an accumulator)."""
    return full(like, shape, dtype, 0)


def full(like: Any, shape: tuple[int, ...], dtype: Any, value: float) -> Any:
    """A new array of `shape` and `dtype` holding `value` everywhere, beside the array `like`."""
    element: DType = as_dtype(dtype)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor):
        return torch.full(tuple(shape), value, dtype=getattr(torch, element.name), device=like.device)
    if isinstance(like, np.ndarray):
        return np.full(tuple(shape), value, element.numpy)
    device = like.device if isinstance(like, runtime.DeviceArray) else 0
    return runtime.to_device(np.full(tuple(shape), value, element.numpy), device)


def empty_product(a: Any, b: Any, c: Any, k: int) -> Any:
    """c = a @ b where M, N or K is 0, as torch and numpy give it (no kernel launches): nothing
    where c is empty, zeros where K is 0; refused where b's K or c's shape does not match."""
    m, n = c.shape
    if tuple(b.shape)[0] != k or tuple(a.shape) != (m, k):
        raise ArgumentError(f"a {tuple(a.shape)} and b {tuple(b.shape)} do not multiply into c "
                            f"{tuple(c.shape)}", user_location())
    if m and n:
        c[...] = 0  # a sum of no terms
    return c


def empty_elementwise(a: Any, **others: Any) -> bool:
    """Whether a has no elements, in which case an elementwise host function has nothing to
    launch (a grid of no CTAs is no launch); `others` must then have a's shape."""
    if all(a.shape):
        return False
    for name, array in others.items():
        if tuple(array.shape) != tuple(a.shape):
            raise ArgumentError(f"{name} has shape {tuple(array.shape)}, expected a's {tuple(a.shape)} "
                                "(element by element)", user_location())
    return True


def contiguous(array: Any) -> bool:
    """Whether `array` (numpy, torch, or a `DeviceArray`, which always is) is row-major contiguous."""
    flags = getattr(array, "flags", None)
    if flags is not None:
        return bool(flags["C_CONTIGUOUS"])
    is_contiguous = getattr(array, "is_contiguous", None)
    return bool(is_contiguous()) if callable(is_contiguous) else True


def checked_out(out: Any, shape: tuple[int, ...]) -> Any:
    """The caller's `out`, refused at the caller's line unless it has `shape` and is contiguous:
    a host function that reshapes its output for the kernel would otherwise have the kernel
    write a copy (a reshape of a strided array), the caller's array left as it was, or write an
    array of another shape but as many elements in another order."""
    if tuple(out.shape) != tuple(shape) or not contiguous(out):
        raise ArgumentError(f"out must be a contiguous array of shape {tuple(shape)}, got shape "
                            f"{tuple(out.shape)}{'' if contiguous(out) else ', not contiguous'}",
                            user_location())
    return out


def apart(out: Any, **inputs: Any) -> Any:
    """The caller's `out`, refused at the caller's line where it shares memory with one of the
    named `inputs`: a kernel reads its inputs tile by tile while it writes, so an out that is
    (part of) an input, `gemm(a, b, out=a)`, would have parts read after they were overwritten."""
    for name, array in inputs.items():
        if _overlap(out, array):
            raise ArgumentError(f"out shares memory with {name}, which the kernel reads while it writes "
                                "out: pass a separate array", user_location())
    return out


def _overlap(x: Any, y: Any) -> bool:
    """Whether arrays x and y may hold some of the same bytes (their spans overlap)."""
    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        return bool(np.may_share_memory(x, y))
    first, second = _span(x), _span(y)
    return first is not None and second is not None and first[0] < second[1] and second[0] < first[1]


def _span(array: Any) -> tuple[int, int] | None:
    """The bytes [first, end) a GPU array's elements span: a `DeviceArray`'s, or a torch tensor's
    by its strides; None for an empty or unknown one."""
    if isinstance(array, runtime.DeviceArray):
        return (array.address, array.address + array.nbytes) if array.nbytes else None
    data_ptr = getattr(array, "data_ptr", None)
    if not callable(data_ptr) or not array.numel():
        return None
    last = sum((extent - 1) * stride for extent, stride in zip(array.shape, array.stride()))
    return data_ptr(), data_ptr() + (last + 1) * array.element_size()


def partial_sums(like: Any, stream: Any, key: tuple, shape: tuple[int, ...], flags: int) -> tuple:
    """The workspace of a kernel that adds partial sums across CTAs (split K, stream-K): float32
    sums of `shape` and `flags` int32 flags made zero, which the kernels leave at zero when they
    finish, so one workspace serves every call: `kept` per device, stream and `key`."""
    def make():
        zeroed = empty(like, (flags,), "int32")
        zeroed[...] = 0
        return empty(like, shape, "float32"), zeroed

    return kept(like, stream, key, make)


_KEPT: dict = {}


def kept(like: Any, stream: Any, key: tuple, make: Callable[[], Any]) -> Any:
    """A kernel's workspace beside the array `like`: what `make()` returns, made once per device,
    launch stream and `key` (the shapes it depends on) and kept, so that a launch on another
    stream than the caller's current one never has its workspace freed and handed out while it
    runs; numpy ones afresh.  A call captured in a CUDA graph uses the one made before, or makes
    its own for the graph alone (a torch tensor of the graph's memory pool): what `make()` sets
    (zeroed flags) is only recorded then, done when the graph first replays, so no other call
    may take that workspace."""
    if isinstance(like, np.ndarray):
        return make()
    streams = runtime.streams
    source = streams.current_stream_source([like])
    handle = streams.launch_stream(stream, source)
    where = (str(getattr(like, "device", "")), handle)
    found = _KEPT.get((*where, *key))
    if found is not None:
        return found
    if streams.capturing(handle):
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(like, torch.Tensor):
            raise ArgumentError("this call needs a workspace of a shape not used before, which cannot be "
                                "made while its stream is captured into a CUDA graph: make the same call "
                                "once before the capture", user_location())
        return make()
    found = _KEPT[(*where, *key)] = make()
    # make() sets its arrays (zeroed flags) on the library's current stream: a launch on another
    # (`stream=`) must not start before that is done.
    streams.wait_for_stream(handle, streams.DEFAULT_STREAM if source is None else source())
    return found

