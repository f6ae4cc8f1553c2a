"""The driver wrapper (errors, has_gpu) and stream handles, without a GPU."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from runtime_fakes import TorchLikeStream

from asyncdsl.errors import (
    ArgumentError,
    AsyncDSLError,
    CudaError,
)
from asyncdsl.runtime import (
    driver,
    has_gpu,
    streams,
)

# ----------------------------------------------------------------------------------------- driver


def test_has_gpu_answers_a_bool_and_caches_it():
    first = has_gpu()
    assert first in (True, False)
    assert has_gpu() is first


def test_has_gpu_is_false_and_silent_without_a_driver(monkeypatch):
    monkeypatch.setattr(driver, "_gpu_usable", None)

    def no_driver(device=0):
        raise CudaError("cuInit failed: the CUDA driver library could not be loaded")

    monkeypatch.setattr(driver, "activate", no_driver)
    assert driver.has_gpu() is False


def test_has_gpu_is_false_without_cuda_python(monkeypatch):
    monkeypatch.setattr(driver, "_gpu_usable", None)
    monkeypatch.setattr(driver, "_driver_module", None)
    monkeypatch.setattr(driver, "_initialized", False)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # makes the import fail
    assert driver.has_gpu() is False
    with pytest.raises(CudaError, match="cuda-python is not installed"):
        driver.api()


def test_check_unpacks_results_and_names_failures():
    cu = driver.api()
    success = cu.CUresult.CUDA_SUCCESS
    assert driver.check((success,), "cuFoo") is None
    assert driver.check((success, 7), "cuFoo") == 7
    assert driver.check((success, 7, 8), "cuFoo") == (7, 8)
    with pytest.raises(CudaError) as caught:
        driver.check((cu.CUresult.CUDA_ERROR_INVALID_VALUE, None), "cuTensorMapEncodeTiled")
    assert caught.value.message.startswith("cuTensorMapEncodeTiled failed: CUDA_ERROR_INVALID_VALUE")
    assert caught.value.code == 1
    assert isinstance(caught.value, AsyncDSLError) and not isinstance(caught.value, ValueError)


# ---------------------------------------------------------------------------------------- streams


class _CupyLikeStream:
    ptr = 0x5678


class _CoreLikeStream:
    def __cuda_stream__(self):
        return (0, 0x9ABC)


def test_stream_handles_from_every_spelling():
    cu = driver.api()
    assert streams.stream_handle(None) == 0
    assert streams.stream_handle(0) == 0
    assert streams.stream_handle(1) == 0  # CU_STREAM_LEGACY is the same stream as 0
    assert streams.stream_handle(2) == 2
    assert streams.stream_handle(0xABC) == 0xABC
    assert streams.stream_handle(np.uint64(0xABC)) == 0xABC
    assert streams.stream_handle(cu.CUstream(0xDEF)) == 0xDEF
    assert streams.stream_handle(TorchLikeStream()) == 0x1234
    assert streams.stream_handle(_CupyLikeStream()) == 0x5678
    assert streams.stream_handle(_CoreLikeStream()) == 0x9ABC
    assert streams.dlpack_stream(0) == 1 and streams.dlpack_stream(0x1234) == 0x1234


def test_stream_handle_rejects_what_is_not_a_stream():
    with pytest.raises(ArgumentError, match="cannot use 'main' as a CUDA stream"):
        streams.stream_handle("main")
    with pytest.raises(ArgumentError, match="negative"):
        streams.stream_handle(-3)


def test_a_named_stream_wins_over_the_arrays_library_and_none_means_the_legacy_stream():
    asked = []

    def library_stream() -> int:
        asked.append(True)
        return 0x4242

    assert streams.launch_stream(TorchLikeStream(), library_stream) == 0x1234
    assert streams.launch_stream(1, library_stream) == 0  # the legacy stream, however spelled
    assert asked == []  # the library is not asked when the call names a stream
    assert streams.launch_stream(None, library_stream) == 0x4242
    assert streams.launch_stream(None, None) == streams.DEFAULT_STREAM
    with pytest.raises(ArgumentError, match="cannot use 'main'"):
        streams.launch_stream("main", library_stream)


def test_waiting_for_the_same_stream_does_nothing():
    streams.wait_for_stream(0, 0)  # no driver call: would fail on a machine without one
    streams.wait_for_stream(0x1234, 0x1234)
