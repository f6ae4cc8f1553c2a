"""What register-tile operations accept as arguments: the dtypes a tile holds, shapes, layouts,
and Python numbers as constants of a dtype.

Each check raises a `TraceError` at the user's line naming the operation (`what`) and the rule."""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerAttr

from asyncdsl import dtypes
from asyncdsl.dialects.ir_utils import float_type, integer_type
from asyncdsl.errors import ArgumentError, TraceError, is_int, user_location
from asyncdsl.hw.fragments import Layout

# What a register tile can hold (docs/register-tiles.md): the types PTX computes on, and the
# narrow types it only loads, stores and converts.
COMPUTE_DTYPES = (dtypes.float32, dtypes.bfloat16, dtypes.float16, dtypes.int32)
TILE_DTYPES = (*COMPUTE_DTYPES, dtypes.float8_e4m3fn, dtypes.float8_e5m2, dtypes.int8,
               dtypes.int16, dtypes.uint8, dtypes.uint16, dtypes.BOOL)


def tile_dtype(dtype: dtypes.DType, what: str) -> dtypes.DType:
    if dtype not in TILE_DTYPES:
        names = ", ".join(d.name for d in TILE_DTYPES if d != dtypes.BOOL)
        raise TraceError(f"{what}: register tiles hold {names} (and bool masks), not {dtype}",
                         user_location())
    return dtype


def dtype_argument(value, what: str) -> dtypes.DType:
    """`value` as the dtype of a register tile that holds numbers."""
    dtype = tile_dtype(element_type(value, what), what)
    if dtype == dtypes.BOOL:
        raise TraceError(f"{what} makes number tiles; a bool tile comes from a comparison", user_location())
    return dtype


def check_computable(tile, what: str, allow_bool: bool = False) -> None:
    if tile.dtype not in COMPUTE_DTYPES and not (allow_bool and tile.dtype == dtypes.BOOL):
        raise TraceError(
            f"{what}: {tile_of(tile.dtype)} does not compute; arithmetic is on float32, bfloat16, "
            "float16 and int32 tiles; astype one of them first",
            user_location(),
        )


def tile_of(dtype) -> str:
    """'a float32 tile', 'an int8 tile': the dtype named with its article."""
    return f"{'an' if str(dtype).startswith('i') else 'a'} {dtype} tile"


def element_type(value, what: str) -> dtypes.DType:
    if value is bool or value is np.bool_:
        return dtypes.BOOL  # numpy's bool means uint8 for arrays; for a tile it means a mask
    try:
        return dtypes.as_dtype(value)
    except ArgumentError as error:
        raise TraceError(f"{what}: {error.message}", user_location()) from None


def shape_argument(shape, what: str, scalar: bool = False) -> tuple[int, ...]:
    """`shape` checked and made of Python ints: positive ints (numpy's too, as a shape computed
    with numpy has), or `()` (a 0-d tile) where `scalar` allows it."""
    try:
        dims = (shape,) if is_integer(shape) else tuple(shape)
    except TypeError:
        raise TraceError(f"{what} needs a shape of positive ints, got {shape!r}", user_location()) from None
    if not all(is_integer(d) and d >= 1 for d in dims) or (not dims and not scalar):
        raise TraceError(f"{what} needs a shape of positive ints, got {shape!r}", user_location())
    return tuple(int(d) for d in dims)


def is_integer(value) -> bool:
    """A Python or numpy integer that is not a bool (True as a dim is a mistake, not 1)."""
    return is_int(value) or isinstance(value, np.integer)


def layout_argument(layout, what: str) -> Layout | None:
    """`layout` checked to be a register layout (or None: inferred)."""
    if layout is not None and not isinstance(layout, Layout):
        raise TraceError(f"{what}: layout must be an asyncdsl layout (asyncdsl.WGMMA, asyncdsl.strided(4), "
                         f"...), got {layout!r}", user_location())
    return layout


def mask_hint(dtype) -> str:
    """What to add where a tile of `dtype` was given for a mask: a numpy bool array is bytes in
    memory, so its windows load as uint8 tiles."""
    if dtype == dtypes.uint8:
        return "; a bool array loads as uint8 bytes: tile.astype(asyncdsl.int32) != 0 is its mask"
    return ""


def is_numpy_number(value) -> bool:
    """A numpy integer or float scalar (`np.float32(0.5)`): typed, unlike a Python number."""
    return isinstance(value, (np.integer, np.floating))


def numpy_promotion(dtype: dtypes.DType, scalars, what: str, comparison: bool = False) -> dtypes.DType:
    """The dtype numpy 2 gives a tile of `dtype` combined with the numpy scalars `scalars` (NEP 50:
    a numpy scalar is typed, `bf16 * np.float32(0.1)` is float32), where a register tile computes
    on it; a Python number stays weak and takes the tile's dtype (`coerced`).

    A comparison keeps the tile's dtype where every scalar's value is exact in it: both sides are
    then the same reals in numpy's wider type, so the bools are numpy's.  A promotion to a dtype
    no tile computes on (int32 with np.int64 is int64; a float with np.float64 is float64) is
    refused, since computing narrower would round or wrap where numpy does not."""
    if not scalars:
        return dtype
    if comparison and all(_exact_in(value, dtype) for value in scalars):
        return dtype
    result = np.result_type(dtype.numpy, *scalars)
    promoted = dtypes.as_dtype(result) if result != np.bool_ else dtypes.BOOL
    if promoted not in COMPUTE_DTYPES:
        given = ", ".join(f"np.{np.asarray(v).dtype}({v.item()!r})" for v in scalars)
        raise TraceError(
            f"{what}: {tile_of(dtype)} with {given} is {result} in numpy 2, which no register tile "
            f"computes on (they compute on {', '.join(map(str, COMPUTE_DTYPES))}); write a Python "
            f"number, which takes the tile's dtype, or a numpy scalar of the tile's dtype ({dtype})",
            user_location())
    return promoted


def _exact_in(value, dtype: dtypes.DType) -> bool:
    if dtype == dtypes.BOOL:
        return False
    with np.errstate(all="ignore"):
        converted = np.asarray(value).astype(dtype.numpy)
        back = converted.astype(np.asarray(value).dtype)
    return bool(back == value) or bool(np.isnan(value) and np.isnan(converted.astype(np.float32)))


def plain_number(value):
    """A numpy integer or float as the Python number it holds (`t * np.float32(0.5)`, a count
    worked out with numpy); anything else as it is."""
    return value.item() if isinstance(value, (np.integer, np.floating)) else value


def constant_attr(value, element: dtypes.DType, what: str) -> FloatAttr | IntegerAttr:
    """Python number `value` as an element of `element` (floats rounded to nearest even, float8
    saturating), as the IR holds constants."""
    value = plain_number(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceError(f"{what}: the value must be a Python number or a traced scalar, got {value!r}",
                         user_location())
    attr: FloatAttr | IntegerAttr
    if element.is_float:
        try:
            float(value)
        except OverflowError:
            raise TraceError(f"{what}: an int of {int(value).bit_length()} bits is too large for any float "
                             f"({element} tile)", user_location()) from None
        if element.bits == 8 and math.isfinite(value):
            # Float8 conversions saturate (docs/register-tiles.md); so do float8 constants.
            import ml_dtypes  # only float8 kernels pay for importing it

            limit = float(ml_dtypes.finfo(element.numpy).max)
            value = min(max(float(value), -limit), limit)
        attr = FloatAttr(float(value), float_type(element.mlir()))
    else:
        if isinstance(value, float) and not value.is_integer():
            raise TraceError(f"{what}: {value!r} is not an integer, but the tile holds {element} (a float "
                             "value needs a float tile: astype(asyncdsl.float32))", user_location())
        # Out of the dtype's range is refused, as numpy 2 refuses it: wrapped, `x < 3_000_000_000`
        # on int32 would be false everywhere.
        span = 1 << element.bits
        low = 0 if element.kind == "uint" else -(span >> 1)
        if not low <= int(value) < low + span:
            raise TraceError(f"{what}: {value!r} is out of range for {element} ({low} to {low + span - 1}), "
                             "as numpy 2 says too", user_location())
        attr = IntegerAttr(int(value), integer_type(element.mlir()))
    return attr
