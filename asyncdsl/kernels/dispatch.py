"""Where the library's kernels run: numpy arrays in the interpreter, GPU arrays (torch tensors,
asyncdsl's `DeviceArray`, ...) on the GPU, so that one host function serves both.

    launch(softmax_rows, x, y, ROWS=2, CHUNK=1024)   # y = softmax(x), in place, where x lives
"""

from __future__ import annotations

import contextlib
import functools
import sys

import numpy as np

from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.jit.binding import is_truth_value


def on_host(array) -> bool:
    """Whether `array` (or, for a kernel run on several emulated devices, each array of the list)
    is a numpy array, which the interpreter runs on."""
    if isinstance(array, (list, tuple)):
        return bool(array) and all(isinstance(a, np.ndarray) for a in array)
    return isinstance(array, np.ndarray)


def launch(kernel, *args, stream=None, devices: int | None = None, **constexprs) -> None:
    """Run `kernel` on `args` where its first argument lives: in the interpreter on numpy arrays
    (on `devices` emulated devices, each array argument a list of one array a device), else on
    the GPU, on `stream` (default: the arrays' library's current stream)."""
    if on_host(args[0]):
        kernel.interpret(*args, devices=devices, **constexprs)
    else:
        kernel(*args, stream=stream, **constexprs)


def on_stream(host_function):
    """`host_function(..., stream=s)` runs as under `with torch.cuda.stream(s):` where its
    arrays are torch tensors: its outputs and temporaries are made on the stream its kernels
    run on, and so are any torch operations it runs (zeroing).  Made on the caller's current
    stream, a temporary freed on return could be handed to the caller's next tensor while the
    kernels on `s` still use it, and a zeroing could land after the kernel that reads it."""
    @functools.wraps(host_function)
    def scoped(*args, stream=None, **kwargs):
        if stream is None:
            return host_function(*args, **kwargs)
        with _torch_stream(stream, args):
            return host_function(*args, stream=stream, **kwargs)

    return scoped


def _torch_stream(stream, args):
    """torch's `stream` context for the device of the first torch GPU tensor in `args` (none
    where there is no such tensor: other arrays' memory is not torch's to hand out)."""
    from asyncdsl import runtime

    tensor = runtime.streams.torch_gpu_tensor(args)
    if tensor is None:
        return contextlib.nullcontext()
    torch = sys.modules["torch"]
    if not isinstance(stream, torch.cuda.Stream):
        handle = runtime.streams.stream_handle(stream)
        stream = (torch.cuda.ExternalStream(handle, device=tensor.device) if handle
                  else torch.cuda.default_stream(tensor.device))
    return torch.cuda.stream(stream)


def walkers(array, interpreted: int = 3) -> int:
    """How many CTAs a kernel that walks its work in a loop (a CTA a multiprocessor) launches
    where `array` lives: the GPU's multiprocessors, or a few in the interpreter (enough that
    every CTA walks several blocks of a test's rows)."""
    return interpreted if on_host(array) else multiprocessors(array)


def multiprocessors(array) -> int:
    """The multiprocessors of the GPU `array` lives on.  A torch tensor's or a `DeviceArray`'s
    device is read off it: host functions ask on every call, and checking the whole array as a
    kernel argument (`runtime.device_array`) costs microseconds the launch checks again."""
    from asyncdsl import runtime

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(array, torch.Tensor) and array.is_cuda:
        device = array.get_device()
    elif isinstance(array, runtime.DeviceArray):
        device = array.device
    else:  # any other GPU array, or what is refused as one
        device = runtime.device_array(array).device
    return runtime.device_facts(device).multiprocessor_count


def flag(value, name: str) -> bool:
    """A host function's yes/no keyword (`causal=`): True or False (numpy's too) or 1 or 0, as
    the kernels' flag constexprs take; anything else is refused at the caller's line rather than
    read for its truth (`causal="no"` is no causal=False)."""
    if is_truth_value(value):
        return bool(value)
    raise ArgumentError(f"{name} is a flag: it takes True or False (or 1 or 0), got {value!r}",
                        user_location())
