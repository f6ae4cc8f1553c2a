"""CUDA streams as the runtime sees them: plain integer handles.

A launch may name its stream as None (the legacy default stream), an integer handle, a
cuda-python `CUstream`, or any object following one of the common conventions: `__cuda_stream__`
(cuda.core and newer libraries), `.cuda_stream` (torch.cuda.Stream), `.ptr` (cupy.cuda.Stream).

A kernel call that names no stream runs where the library its arrays come from would run its
own work (`current_stream_source`): torch's current stream when any array is a torch tensor
(under `torch.cuda.graph` that is the capturing stream), else CuPy's current stream when any is
a CuPy array, else the legacy default stream.
"""

from __future__ import annotations

import functools
import operator
import sys
from collections.abc import Callable, Sequence
from typing import Any

from asyncdsl.errors import ArgumentError, user_location
from asyncdsl.runtime import driver

DEFAULT_STREAM = 0  # the legacy default stream, as the driver API spells it
_LEGACY_STREAM = 1  # CU_STREAM_LEGACY: the same stream under another name


def stream_handle(stream: Any) -> int:
    """The integer handle of `stream`; both spellings of the legacy default stream give 0, so
    handles compare equal exactly when they name the same stream."""
    if stream is None:
        return DEFAULT_STREAM
    if type(stream) is int:
        return _checked(stream, stream)
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        _version, handle = protocol()
        return _checked(int(handle), stream)
    for attribute in ("cuda_stream", "ptr"):
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return _checked(handle, stream)
    if type(stream).__name__ == "CUstream":  # cuda-python's handle type converts with int()
        return _checked(int(stream), stream)
    if hasattr(type(stream), "__index__"):  # other integers, such as numpy's
        return _checked(operator.index(stream), stream)
    raise ArgumentError(
        f"cannot use {stream!r} as a CUDA stream: pass None, an integer handle, a cuda-python CUstream, "
        "or a stream object with __cuda_stream__, .cuda_stream (torch) or .ptr (CuPy)",
        user_location(),
    )


def torch_gpu_tensor(arrays: Sequence[Any]) -> Any:
    """The first of `arrays` that is a torch tensor on the GPU, or None (torch not imported
    counts as none: a caller's tensors would have imported it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return next((a for a in arrays if isinstance(a, torch.Tensor) and a.is_cuda), None)


def current_stream_source(arrays: Sequence[Any]) -> Callable[[], int] | None:
    """A function that returns the handle of the current stream of the library `arrays` come
    from (torch, then CuPy), or None when no argument is one of theirs: the legacy default stream.

    The function, not the handle, is what a warm call keeps: the current stream changes with
    `with torch.cuda.stream(...)`, graph capture, or `with cupy.cuda.Stream():`."""
    tensor = torch_gpu_tensor(arrays)
    if tensor is not None:
        return _torch_current_stream(sys.modules["torch"], tensor.get_device())
    cupy = sys.modules.get("cupy")
    if cupy is not None and any(isinstance(array, cupy.ndarray) for array in arrays):
        return lambda: cupy.cuda.get_current_stream().ptr
    return None


def launch_stream(stream: Any, source: Callable[[], int] | None) -> int:
    """The handle a launch runs on: `stream` when the call names one, else the current stream of
    the arrays' library (`source`, from `current_stream_source`), else the legacy default stream."""
    if stream is not None:
        return stream_handle(stream)
    return DEFAULT_STREAM if source is None else source()


def _torch_current_stream(torch: Any, device: int) -> Callable[[], int]:
    # torch's own launchers read the raw handle without building a Stream object (a tenth of the
    # cost); the public spelling is the fallback for builds without it.
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return functools.partial(raw, device)
    return lambda: torch.cuda.current_stream(device).cuda_stream


def _checked(handle: int, stream: Any) -> int:
    if handle < 0:
        raise ArgumentError(f"stream handle {handle} (from {stream!r}) is negative", user_location())
    return DEFAULT_STREAM if handle == _LEGACY_STREAM else handle


def dlpack_stream(handle: int) -> int:
    """The `stream=` value to hand a DLPack producer for a consumer running on `handle`
    (DLPack forbids 0 and names the legacy default stream 1)."""
    return _LEGACY_STREAM if handle == DEFAULT_STREAM else handle


def capturing(handle: int) -> bool:
    """Whether work launched on stream `handle` now is recorded into a CUDA graph rather than run
    (an error asking counts as capturing: the legacy stream answers one while a blocking stream
    captures)."""
    cu = driver.api()
    driver.activate_if_none()
    result, status = cu.cuStreamIsCapturing(cu.CUstream(handle))
    return bool(result) or int(status) != int(cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)


def wait_for_stream(consumer: int, producer: int) -> None:
    """Order all work later submitted to `consumer` after the work already submitted to
    `producer`, without blocking the host (an event recorded on one, waited on by the other)."""
    if consumer == producer:
        return
    cu = driver.api()
    driver.activate_if_none()
    event = driver.check(cu.cuEventCreate(int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)), "cuEventCreate")
    try:
        driver.check(cu.cuEventRecord(event, cu.CUstream(producer)), "cuEventRecord")
        driver.check(cu.cuStreamWaitEvent(cu.CUstream(consumer), event, 0), "cuStreamWaitEvent")
    finally:
        # Destroying a recorded event is safe: the driver releases it once it completes.
        driver.check(cu.cuEventDestroy(event), "cuEventDestroy")
