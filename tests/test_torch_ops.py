"""`asyncdsl.torch.custom_op` on the CPU: the schema, the fake implementation, eager calls and
`torch.compile(fullgraph=True)`, with the kernels interpreted (ASYNCDSL_INTERPRET=1 on CPU
tensors).  tests/gpu/test_torch_gpu.py runs the same operators on the GPU and in CUDA graphs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scalar_kernels import copy_loop, copy_tiles, scale_tile  # noqa: E402

import asyncdsl.torch as adt  # noqa: E402
from asyncdsl.errors import ArgumentError  # noqa: E402
from asyncdsl.examples.tile_copy import tile_copy  # noqa: E402

scale = adt.custom_op(scale_tile, "asyncdsl_tests::scale", outputs={"y": lambda x, **_: torch.empty_like(x)})
copy_into = adt.custom_op(tile_copy, "asyncdsl_tests::copy_into", mutates=("dst",), BM=32, BN=32)
copy_rows = adt.custom_op(copy_loop, "asyncdsl_tests::copy_rows", mutates=("y",))


def scale_reference(x: np.ndarray, factor: float, shift: int) -> np.ndarray:
    factor32 = np.float32(factor)
    return np.where(x > factor32, x * factor32 + np.float32(shift), -factor32 / np.float32(2))


@pytest.fixture
def interpreted(monkeypatch):
    monkeypatch.setenv("ASYNCDSL_INTERPRET", "1")


def test_schemas():
    assert (str(scale._opoverload._schema)
            == "asyncdsl_tests::scale(Tensor x, float scale, int shift) -> Tensor")
    assert str(copy_into._opoverload._schema) == "asyncdsl_tests::copy_into(Tensor src, Tensor(a!) dst) -> ()"
    assert str(copy_rows._opoverload._schema) == (
        "asyncdsl_tests::copy_rows(Tensor x, Tensor(a!) y, int row0, int count, int step) -> ()")


def test_fake_implementation_makes_outputs_without_running_the_kernel():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(64, 64)
        y = scale(x, 0.5, 3)
    assert type(y).__name__ == "FakeTensor" and y.shape == (64, 64) and y.dtype == torch.float32


def test_eager_calls_run_the_kernel(interpreted):
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(1))
    assert np.array_equal(scale(x, 0.25, -2).numpy(), scale_reference(x.numpy(), 0.25, -2))
    y = torch.zeros(64, 96)
    source = torch.randn(64, 96, generator=torch.Generator().manual_seed(2))
    assert copy_into(source, y) is None and torch.equal(y, source)


def test_a_model_compiles_whole_and_matches_eager(interpreted):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(64, 64)

        def forward(self, x):
            h = scale(torch.relu(self.linear(x)), 0.125, 1)
            out = torch.empty_like(h)
            copy_into(h * 2, out)
            return out - 1

    torch.manual_seed(0)
    model = Model()
    x = torch.randn(64, 64)
    graphs = []

    def count_graphs(graph_module, example_inputs):
        graphs.append(graph_module)
        return torch._dynamo.backends.debugging.aot_eager(graph_module, example_inputs)

    with torch.no_grad():
        compiled = torch.compile(model, fullgraph=True, backend=count_graphs)(x)
        h = torch.relu(model.linear(x)).numpy()
    expected = scale_reference(h, 0.125, 1) * 2 - 1
    assert len(graphs) == 1
    assert np.array_equal(compiled.numpy(), expected)


def test_misuse_is_an_argument_error():
    with pytest.raises(ArgumentError, match="outputs names 'row0', which is not an array parameter"):
        adt.custom_op(copy_tiles, "asyncdsl_tests::bad1", outputs={"row0": torch.empty_like})
    with pytest.raises(ArgumentError, match=r"has constexprs \(BM, BN\), given \(BM\)"):
        adt.custom_op(tile_copy, "asyncdsl_tests::bad2", mutates=("dst",), BM=32)
    with pytest.raises(ArgumentError, match="both outputs .* and mutated inputs"):
        adt.custom_op(tile_copy, "asyncdsl_tests::bad3", outputs={"dst": torch.empty_like}, mutates=("dst",),
                      BM=32, BN=32)
    with pytest.raises(ArgumentError,
                       match=r"called with the operator's arguments by name \(x, scale, shift\)"):
        adt.custom_op(scale_tile, "asyncdsl_tests::bad4", outputs={"y": lambda x: torch.empty_like(x)})
    with pytest.raises(ArgumentError, match="takes an @asyncdsl.kernel"):
        adt.custom_op(lambda x: x, "asyncdsl_tests::bad5")


def test_library_call_hands_cpu_tensors_over_as_numpy_arrays():
    x = torch.randn(3, 5).to(torch.bfloat16)
    scales = torch.ones(3, dtype=torch.float8_e4m3fn)
    seen = []

    def library_function(a, n, *, scales):
        seen.append((type(a), a.dtype.name, n, scales.dtype.name))
        return a.astype(np.float32) * 2, scales

    doubled, same = adt.library_call(library_function, x, 7, scales=scales)
    assert seen == [(np.ndarray, "bfloat16", 7, "float8_e4m3fn")]
    assert doubled.dtype == torch.float32 and torch.equal(doubled, x.float() * 2)
    assert same.dtype == torch.float8_e4m3fn and torch.equal(same.view(torch.int8), scales.view(torch.int8))
