"""`asyncdsl.torch.custom_op` on the CPU: the schema, the fake implementation, eager calls and
`torch.compile(fullgraph=True)`, with the kernels interpreted (ASYNCDSL_INTERPRET=1 on CPU
tensors).  tests/gpu/test_torch_gpu.py runs the same operators on the GPU and in CUDA graphs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scalar_kernels import copy_loop, copy_tiles, scale_tile  # noqa: E402

import asyncdsl as ad  # noqa: E402
import asyncdsl.torch as adt  # noqa: E402
from asyncdsl.errors import ArgumentError  # noqa: E402
from asyncdsl.examples.tile_copy import tile_copy  # noqa: E402

scale = adt.custom_op(scale_tile, "asyncdsl_tests::scale", outputs={"y": lambda x, **_: torch.empty_like(x)})
copy_into = adt.custom_op(tile_copy, "asyncdsl_tests::copy_into", mutates=("dst",), BM=32, BN=32)
copy_rows = adt.custom_op(copy_loop, "asyncdsl_tests::copy_rows", mutates=("y",))


@ad.kernel(grid=(1,))
def affine(x, y, scale: float = 2.0, *, shift: int = 1, NEGATE: ad.constexpr = False):
    """y = x * scale + shift (negated with NEGATE), for a 64 x 64 float32 x."""
    buf = ad.smem((64, 64), ad.float32)
    bar = ad.barrier()
    ad.async_copy(x, buf, barrier=bar)
    bar.wait()
    t = buf[...] * scale + shift
    buf[...] = -t if NEGATE else t
    ad.fence_async_smem()
    ad.async_copy(buf, y)
    ad.await_async_copy(0)


affine_op = adt.custom_op(affine, "asyncdsl_tests::affine", outputs={"y": lambda x, **_: torch.empty_like(x)})


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


def test_an_operator_that_neither_returns_nor_mutates_is_refused():
    # its schema would promise no effect, and torch.compile dropped its calls: eager and compiled differed
    with pytest.raises(ArgumentError, match="neither returns nor mutates an array") as error:
        adt.custom_op(tile_copy, "asyncdsl_tests::no_effect", BM=32, BN=32)
    assert error.value.location.file == __file__
    with pytest.raises(ArgumentError, match=r"not the string 'dst' \(write mutates=\('dst',\)\)"):
        adt.custom_op(tile_copy, "asyncdsl_tests::letters", mutates="dst", BM=32, BN=32)


def test_an_interpreted_call_refuses_a_write_to_an_input_the_schema_calls_read_only(interpreted):
    # dst is written but not declared: torch.compile takes it for unchanged and may drop the write
    undeclared = adt.custom_op(copy_loop, "asyncdsl_tests::copy_rows_undeclared",
                               outputs={"x": lambda y, **_: torch.ones_like(y)})
    with pytest.raises(ArgumentError, match="wrote its input 'y', which the operator takes for read-only") \
            as error:
        undeclared(torch.zeros(64, 32), 0, 1, 16)
    assert error.value.location.file == __file__
    x = torch.randn(64, 64)
    copy_into(x, x)  # one tensor read and written: declared through dst
    nans = torch.full((64, 64), float("nan"))
    copy_into(nans, torch.zeros(64, 64))  # unchanged bit for bit, though NaN != NaN


def test_a_name_taken_is_refused():
    # torch re-points the name at the new implementation: calls of the earlier handle ran it (or crashed)
    with pytest.raises(ArgumentError, match="'asyncdsl_tests::scale' exists already") as error:
        adt.custom_op(copy_loop, "asyncdsl_tests::scale", mutates=("y",))
    assert error.value.location.file == __file__
    with pytest.raises(ArgumentError, match="'aten::add' exists already"):
        adt.custom_op(scale_tile, "aten::add", outputs={"y": lambda x, **_: torch.empty_like(x)})
    for _ in range(2):  # the same operator again (a module reloaded) replaces itself, as torch allows
        adt.custom_op(copy_loop, "asyncdsl_tests::copy_rows_again", mutates=("y",))


def test_defaults_and_keyword_only_parameters_carry_over(interpreted):
    assert (str(affine_op._opoverload._schema)
            == "asyncdsl_tests::affine(Tensor x, float scale=2., *, int shift=1) -> Tensor")
    negated = adt.custom_op(affine, "asyncdsl_tests::affine_negated", NEGATE=True,
                            outputs={"y": lambda x, **_: torch.empty_like(x)})
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(3))
    assert torch.equal(affine_op(x), x * 2 + 1)
    assert torch.equal(affine_op(x, 0.5, shift=-3), x * 0.5 - 3)
    assert torch.equal(negated(x, shift=2), -(x * 2 + 2))
    compiled = torch.compile(lambda x: affine_op(x) - affine_op(x, shift=4), fullgraph=True,
                             backend="aot_eager")
    assert torch.equal(compiled(x), (x * 2 + 1) - (x * 2 + 4))
    torch.library.opcheck(affine_op, (x,), {"shift": 5})


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
