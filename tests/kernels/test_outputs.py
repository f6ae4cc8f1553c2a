"""`asyncdsl.kernels.outputs.kept`: a kernel's workspace, made once per device, launch stream and
shapes and kept; under CUDA graph capture, one made before is reused, and a new one is the
graph's alone (what making it sets is only recorded, done when the graph first replays)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import asyncdsl as ad
from asyncdsl.kernels import outputs


class GpuArray:
    """An array of a library the runtime does not know: on device 0, the legacy default stream."""

    device = 0


class Tensor(GpuArray):
    """A torch tensor as `kept` sees one (a host tensor, so its stream is the default one)."""

    is_cuda = False


@pytest.fixture
def capture(monkeypatch):
    """Whether the launch stream captures, as the test sets it; a clean set of kept workspaces."""
    monkeypatch.setattr(outputs, "_KEPT", {})
    state = {"capturing": False}
    monkeypatch.setattr(outputs.runtime.streams, "capturing", lambda handle: state["capturing"])
    state["waits"] = []
    monkeypatch.setattr(outputs.runtime.streams, "wait_for_stream",
                        lambda consumer, producer: state["waits"].append((consumer, producer)))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(Tensor=Tensor))
    return state


def test_a_workspace_is_made_once_per_key_and_stream(capture):
    made = []

    def make():
        made.append(object())
        return made[-1]

    like = GpuArray()
    first = outputs.kept(like, None, ("w", 1), make)
    assert outputs.kept(like, None, ("w", 1), make) is first
    assert outputs.kept(like, 7, ("w", 1), make) is not first  # another stream
    assert outputs.kept(like, None, ("w", 2), make) is not first  # another shape
    assert len(made) == 3
    # Each made workspace is set on the current stream (the legacy one here): a launch on stream 7
    # waits for it.
    assert capture["waits"] == [(0, 0), (7, 0), (0, 0)]


def test_under_capture_a_kept_workspace_is_reused_and_a_new_one_is_the_graphs_alone(capture):
    like, tensor = GpuArray(), Tensor()
    before = outputs.kept(like, None, ("w", 1), object)
    capture["capturing"] = True
    assert outputs.kept(like, None, ("w", 1), object) is before
    graphs = [outputs.kept(tensor, None, ("w", 2), object) for _ in range(2)]
    assert graphs[0] is not graphs[1]  # each capture its own, none kept
    with pytest.raises(ad.ArgumentError, match="make the same call once before the capture"):
        outputs.kept(like, None, ("w", 3), object)
    capture["capturing"] = False
    assert outputs.kept(tensor, None, ("w", 2), object) is not graphs[1]


def test_numpy_arrays_get_a_workspace_each_call(capture):
    x = np.zeros(4)
    assert outputs.kept(x, None, ("w",), list) is not outputs.kept(x, None, ("w",), list)


class Strided:
    """A torch tensor as `outputs.apart` sees one: a start address, shape, strides, element size."""

    def __init__(self, start, shape, strides, size=2):
        self.start, self.shape, self._strides, self.size = start, shape, strides, size

    def data_ptr(self):
        return self.start

    def numel(self):
        return int(np.prod(self.shape))

    def stride(self):
        return self._strides

    def element_size(self):
        return self.size


def test_an_out_is_refused_where_its_bytes_meet_an_inputs():
    whole = Strided(1000, (8, 8), (8, 1))  # bytes 1000 .. 1128
    assert outputs.apart(Strided(1128, (8, 8), (8, 1)), a=whole) is not None  # the next matrix
    for inside in (Strided(1032, (2, 8), (8, 1)), Strided(1000, (8, 8), (1, 8)), Strided(1126, (1,), (1,))):
        with pytest.raises(ad.ArgumentError, match="out shares memory with a") as error:
            outputs.apart(inside, a=whole)
        assert error.value.location.file == __file__
    assert outputs.apart(Strided(1000, (0, 8), (8, 1)), a=whole) is not None  # empty: no bytes
    x = np.zeros((4, 4))
    with pytest.raises(ad.ArgumentError, match="out shares memory with b"):
        outputs.apart(x[1:], a=np.zeros(3), b=x[:2])


def test_partial_sums_are_float32_beside_flags_made_zero(capture):
    sums, flags = outputs.partial_sums(np.zeros(4, np.float16), None, ("w",), (3, 8, 16), 12)
    assert sums.shape == (3, 8, 16) and sums.dtype == np.float32
    assert flags.shape == (12,) and flags.dtype == np.int32 and not flags.any()
