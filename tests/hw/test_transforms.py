"""Laws of the memref transform algebra (asyncdsl.hw.transforms) and its IR attributes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import Traced, evaluated, examples
from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, Builtin, IntAttr, ModuleOp
from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from asyncdsl.dialects.transform_attrs import (
    TRANSFORM_ATTRS,
    AnyTransformAttr,
    TileTransformAttr,
    transform_attr,
    transform_from_attr,
)
from asyncdsl.errors import TransformError
from asyncdsl.hw.transforms import (
    CollapseLeadingIndicesTransform,
    DropUnitDimsTransform,
    MemRefTransform,
    Rounding,
    TileTransform,
    TransposeTransform,
    apply_chain_array,
    apply_chain_gmem_shape,
    apply_chain_index,
    apply_chain_shape,
    apply_chain_strides,
    batch_chain,
)

LAWS = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def element_strides(shape):
    return tuple(int(np.prod(shape[d + 1 :])) for d in range(len(shape)))


def array_element_strides(array):
    return tuple(s // array.itemsize for s in array.strides)


shapes = st.lists(st.integers(1, 6), min_size=1, max_size=5).map(tuple)


@st.composite
def transform_for(draw, shape, strides=None):
    """A transform that accepts a GMEM array of `shape` (with element `strides`)."""
    strides = element_strides(shape) if strides is None else strides
    rank = len(shape)
    kinds = ["tile", "transpose"]
    unit = [d for d, s in enumerate(shape) if s == 1]
    if unit:
        kinds.append("drop")
    kinds.append("collapse")
    kind = draw(st.sampled_from(kinds))
    if kind == "tile":
        tiling_rank = draw(st.integers(1, rank))
        rounding = draw(st.sampled_from([None, Rounding.DOWN]))
        tiled = shape[rank - tiling_rank :]
        if rounding is None:  # tiles that the GMEM dims accept: not smaller, or dividing
            tiling = tuple(
                draw(st.sampled_from([t for t in range(1, 8) if size <= t or size % t == 0]))
                for size in tiled
            )
        else:
            tiling = tuple(draw(st.integers(1, 7)) for _ in tiled)
        return TileTransform(tiling, rounding)
    if kind == "transpose":
        return TransposeTransform(tuple(draw(st.permutations(range(rank)))))
    if kind == "drop":
        return DropUnitDimsTransform(tuple(draw(st.sets(st.sampled_from(unit), min_size=1))))
    batch_rank = draw(st.integers(0, rank - 1))
    count = draw(st.integers(1, rank - batch_rank))
    return CollapseLeadingIndicesTransform(strides[batch_rank : batch_rank + count], batch_rank)


@st.composite
def array_and_transform(draw):
    shape = draw(shapes)
    return np.arange(math.prod(shape), dtype=np.int32).reshape(shape), draw(transform_for(shape))


def kept_mask(transform: MemRefTransform, shape) -> np.ndarray:
    """Indices a transform keeps, computed from its definition (only DOWN tiling drops)."""
    mask = np.ones(shape, dtype=bool)
    if isinstance(transform, TileTransform) and transform.rounding is Rounding.DOWN:
        first = len(shape) - len(transform.tiling)
        for dim, tile in enumerate(transform.tiling, start=first):
            size = shape[dim]
            kept = size if size <= tile else size // tile * tile
            index = [slice(None)] * len(shape)
            index[dim] = slice(kept, None)
            mask[tuple(index)] = False
    return mask


def divides_evenly(transform: MemRefTransform, shape) -> bool:
    if isinstance(transform, TileTransform):
        tiled = shape[len(shape) - len(transform.tiling) :]
        return all(s % t == 0 for s, t in zip(tiled, transform.tiling))
    if isinstance(transform, CollapseLeadingIndicesTransform):
        merged = shape[transform.batch_rank : transform.batch_rank + len(transform.strides)]
        return all(s == 1 for s in merged)
    return True


# --- single-transform laws ---------------------------------------------------------------


@LAWS
@given(array_and_transform())
def test_apply_array_shape_matches_gmem_shape_and_slice_shape(case):
    array, transform = case
    out = transform.apply_array(array)
    assert out.shape == transform.transform_gmem_shape(array.shape)
    if divides_evenly(transform, array.shape):
        assert out.shape == transform.transform_shape(array.shape)


@LAWS
@given(array_and_transform())
def test_apply_array_agrees_with_transform_index(case):
    array, transform = case
    out = transform.apply_array(array)
    mask = kept_mask(transform, array.shape)
    index = np.indices(array.shape)
    moved = transform.transform_index([i[mask] for i in index])
    np.testing.assert_array_equal(out[tuple(moved)], array[mask])
    # Every element of the output comes from some kept input element.
    assert out.size == mask.sum()


@LAWS
@given(array_and_transform())
def test_transform_strides_preserve_offsets(case):
    array, transform = case
    strides = element_strides(array.shape)
    index = np.indices(array.shape).reshape(array.ndim, -1)
    moved = transform.transform_index(list(index))
    moved_strides = transform.transform_strides(strides)
    offset = sum(i * s for i, s in zip(index, strides))
    moved_offset = sum(np.asarray(i) * s for i, s in zip(moved, moved_strides))
    np.testing.assert_array_equal(moved_offset, offset)
    # numpy's own view strides agree along every dim that has more than one element.
    out = transform.apply_array(array)
    for size, actual, expected in zip(out.shape, array_element_strides(out), moved_strides):
        if size > 1:
            assert actual == expected


@LAWS
@given(array_and_transform(), st.lists(st.integers(1, 3), max_size=2).map(tuple))
def test_batch_leaves_leading_dims_alone(case, leading):
    array, transform = case
    batched = transform.batch(len(leading))
    shape = array.shape
    full = np.arange(math.prod(leading) * array.size, dtype=np.int32).reshape(leading + shape)
    assert batched.transform_gmem_shape(full.shape) == leading + transform.transform_gmem_shape(
        shape
    )
    if divides_evenly(transform, shape):
        assert batched.transform_shape(full.shape) == leading + transform.transform_shape(shape)
    strides = element_strides(full.shape)
    assert batched.transform_strides(strides) == strides[
        : len(leading)
    ] + transform.transform_strides(strides[len(leading) :])
    index = tuple(range(7, 7 + len(leading))) + tuple(s - 1 for s in shape)
    assert batched.transform_index(index) == index[: len(leading)] + transform.transform_index(
        index[len(leading) :]
    )
    out = batched.apply_array(full).reshape((-1, *transform.transform_gmem_shape(shape)))
    for row, sub in zip(out, full.reshape((-1, *shape))):
        np.testing.assert_array_equal(row, transform.apply_array(sub))


# --- chains -----------------------------------------------------------------------------


@st.composite
def array_and_chain(draw):
    shape = draw(shapes)
    array = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    chain = []
    strides = element_strides(shape)
    for _ in range(draw(st.integers(1, 3))):
        if not shape:  # every dim was dropped
            break
        transform = draw(transform_for(shape, strides))
        chain.append(transform)
        shape = transform.transform_gmem_shape(shape)
        strides = transform.transform_strides(strides)
    return array, tuple(chain)


@LAWS
@given(array_and_chain())
def test_chains_compose(case):
    array, chain = case
    out = apply_chain_array(chain, array)
    assert out.shape == apply_chain_gmem_shape(chain, array.shape)
    if all(divides_evenly(t, s) for t, s in _shapes_along(chain, array.shape)):
        assert out.shape == apply_chain_shape(chain, array.shape)
    index = np.indices(array.shape).reshape(array.ndim, -1)
    moved = [np.broadcast_to(i, index.shape[1:]) for i in apply_chain_index(chain, list(index))]
    # An index is valid if every step keeps it inside that step's view (DOWN tiling drops some).
    inside = np.ones(array.size, dtype=bool)
    step, shape = list(index), array.shape
    for transform in chain:
        step, shape = transform.transform_index(step), transform.transform_gmem_shape(shape)
        for i, n in zip(step, shape):
            inside &= (0 <= i) & (i < n)
    if not any(isinstance(t, TileTransform) and t.rounding for t in chain):
        assert inside.all()
    np.testing.assert_array_equal(out[tuple(i[inside] for i in moved)], array.reshape(-1)[inside])
    strides = apply_chain_strides(chain, element_strides(array.shape))
    offsets = sum((i * s for i, s in zip(moved, strides)), np.zeros(array.size, np.int64))
    np.testing.assert_array_equal(offsets[inside], np.arange(array.size)[inside])


def _shapes_along(chain, shape):
    for transform in chain:
        yield transform, shape
        shape = transform.transform_gmem_shape(shape)


def test_batch_chain_batches_each_transform():
    chain = (TransposeTransform((1, 0)), TileTransform((2, 4)), DropUnitDimsTransform((0,)))
    assert batch_chain(chain, 2) == (
        TransposeTransform((0, 1, 3, 2)),
        TileTransform((2, 4)),
        DropUnitDimsTransform((2,)),
    )


def test_tile_example_from_the_docs():
    tile = TileTransform((64, 32))
    assert tile.transform_shape((5, 128, 128)) == (5, 2, 4, 64, 32)
    assert tile.transform_index((1, 70, 33)) == (1, 1, 1, 6, 1)
    assert tile.transform_strides((16384, 128, 1)) == (16384, 8192, 32, 128, 1)
    assert tile.transform_gmem_shape((5, 40, 128)) == (5, 1, 4, 40, 32)
    assert TileTransform((64,), Rounding.DOWN).transform_gmem_shape((100,)) == (1, 64)


@pytest.mark.parametrize(
    "transform",
    [
        TileTransform((4, 8)),
        TileTransform((1, 8)),
        TransposeTransform((2, 0, 1)),
        CollapseLeadingIndicesTransform((96, 8)),
        DropUnitDimsTransform((1,)),
    ],
)
def test_transform_index_accepts_traced_values(transform):
    env = {"x": 5, "y": 0, "z": 13}
    traced = transform.transform_index((Traced("x"), Traced("y"), Traced("z")))
    assert evaluated(traced, env) == transform.transform_index((5, 0, 13))


def test_traced_and_constant_indices_mix():
    collapse = CollapseLeadingIndicesTransform((12, 4, 1))
    (merged, rest) = collapse.transform_index((2, Traced("i"), 3, 7))
    assert merged.eval(i=5) == 12 * 2 + 4 * 5 + 3 and rest == 7


# --- IR attributes ----------------------------------------------------------------------


def _context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Dialect("asyncdsl", [], list(TRANSFORM_ATTRS)))
    return ctx


@settings(max_examples=examples(200), deadline=None)
@given(array_and_transform(), st.integers(0, 2))
def test_attribute_round_trip(case, leading):
    _, transform = case
    transform = transform.batch(leading)
    text = str(transform_attr(transform))
    parsed = Parser(_context(), text).parse_attribute()
    assert transform_from_attr(parsed) == transform


@pytest.mark.parametrize(
    "text",
    [
        "#asyncdsl.tile<[64, 32]>",
        "#asyncdsl.tile<[64, 32], down>",
        "#asyncdsl.transpose<[1, 0, 2]>",
        "#asyncdsl.collapse<[4096, 64]>",
        "#asyncdsl.collapse<[4096, 64], batch_rank = 1>",
        "#asyncdsl.drop_unit_dims<[0, 2]>",
    ],
)
def test_attributes_print_as_documented(text):
    attr = Parser(_context(), text).parse_attribute()
    assert str(attr) == text
    assert transform_attr(transform_from_attr(attr)) == attr


def test_attributes_round_trip_inside_a_module():
    text = (
        "builtin.module attributes {t = [#asyncdsl.tile<[8, 16], down>, "
        "#asyncdsl.transpose<[1, 0]>, #asyncdsl.drop_unit_dims<[]>]} {\n}"
    )
    module = Parser(_context(), text).parse_module()
    assert isinstance(module, ModuleOp)
    assert str(module) == text


@pytest.mark.parametrize(
    "text, message",
    [
        ("#asyncdsl.tile<[0, 4]>", "tile sizes must be positive, got (0, 4)"),
        ("#asyncdsl.tile<[4], up>", "Rounding.UP is not implemented"),
        ("#asyncdsl.tile<[4], sideways>", "unknown rounding 'sideways'"),
        ("#asyncdsl.transpose<[0, 0]>", "repeats dim 0"),
        ("#asyncdsl.drop_unit_dims<[1, 1]>", "unit dims must be distinct"),
    ],
)
def test_invalid_attributes_fail_verification(text, message):
    with pytest.raises(VerifyException, match=message.replace("(", r"\(").replace(")", r"\)")):
        Parser(_context(), text).parse_attribute()


def test_transform_chains_fit_an_op_property():
    @irdl_op_definition
    class CopyOp(IRDLOperation):
        name = "asyncdsl.test_copy"
        transforms = prop_def(ArrayAttr[AnyTransformAttr])

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Dialect("asyncdsl", [CopyOp], list(TRANSFORM_ATTRS)))
    chain = (TileTransform((8, 16)), TransposeTransform((1, 0, 2, 3)))
    op = CopyOp.create(properties={"transforms": ArrayAttr([transform_attr(t) for t in chain])})
    op.verify()
    parsed = Parser(ctx, str(op)).parse_op()
    parsed.verify()
    assert tuple(transform_from_attr(a) for a in parsed.transforms) == chain
    with pytest.raises(VerifyException):
        CopyOp.create(properties={"transforms": ArrayAttr([IntAttr(3)])}).verify()


def test_transform_from_attr_rejects_other_attributes():
    with pytest.raises(TransformError, match="not a memref transform attribute"):
        transform_from_attr(IntAttr(3))
    assert isinstance(transform_attr(TileTransform((4,))), TileTransformAttr)


# --- construction and application errors -------------------------------------------------


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: TransposeTransform((1, 0, 1)), r"permutation \(1, 0, 1\) repeats dim 1"),
        (lambda: TransposeTransform((0, 2)), r"not a permutation of 0..1"),
        (lambda: TileTransform(()), "a tiling needs at least one dim"),
        (lambda: TileTransform((64, -1)), r"tile sizes must be positive, got \(64, -1\)"),
        (lambda: TileTransform(64), "tile sizes must be a sequence of integers"),
        (lambda: TileTransform((64,), Rounding.UP), "Rounding.UP is not implemented"),
        (lambda: TileTransform((64,), "down"), "rounding must be None or Rounding.DOWN"),
        (lambda: CollapseLeadingIndicesTransform(()), "collapsing needs at least one dim"),
        (lambda: CollapseLeadingIndicesTransform((4, 0)), "collapsed strides must be positive"),
        (lambda: CollapseLeadingIndicesTransform((4,), -1), "batch_rank must be"),
        (lambda: DropUnitDimsTransform((0, 0)), "unit dims must be distinct"),
        (lambda: DropUnitDimsTransform((-1,)), "unit dims must be at least 0"),
    ],
)
def test_invalid_construction(build, message):
    with pytest.raises(TransformError, match=message):
        build()


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: TileTransform((64, 32)).transform_shape((5, 100, 64)),
            r"slice shape \(5, 100, 64\) is not a multiple of the tiling \(64, 32\).*runs past "
            "the end of the GMEM array",
        ),
        (
            lambda: TileTransform((64,)).transform_gmem_shape((3, 100)),
            r"GMEM dim 1 of shape \(3, 100\) has size 100.*Rounding.DOWN",
        ),
        (lambda: TileTransform((4, 4)).transform_shape((8,)), "needs at least 2 dims"),
        (lambda: TransposeTransform((1, 0)).transform_shape((1, 2, 3)), "needs exactly 2 dims"),
        (
            lambda: DropUnitDimsTransform((1,)).transform_shape((4, 3)),
            r"cannot drop dim 1 of shape \(4, 3\): its size is 3, not 1",
        ),
        (
            lambda: CollapseLeadingIndicesTransform((8, 4)).transform_shape((2, 1, 4)),
            "must all have size 1",
        ),
        (
            lambda: CollapseLeadingIndicesTransform((8, 4)).transform_strides((12, 4, 1)),
            r"built for strides \(8, 4\) but the view has strides \(12, 4\)",
        ),
        (
            lambda: CollapseLeadingIndicesTransform((1,)).apply_array(np.zeros((3, 4))),
            "expects element stride 1 along dim 0, the array has 4",
        ),
    ],
)
def test_invalid_application(call, message):
    with pytest.raises(TransformError, match=message):
        call()


def test_transforms_are_hashable_cache_keys():
    key = {TileTransform([64, 32]): 1, TransposeTransform([1, 0]): 2}
    assert key[TileTransform((64, 32))] == 1 and key[TransposeTransform((1, 0))] == 2
    assert TileTransform((np.int64(8),)) == TileTransform((8,))
