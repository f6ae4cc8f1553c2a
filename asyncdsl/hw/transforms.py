"""The memref transform algebra: how a GMEM window is rearranged on its way into SMEM.

A transform maps four things consistently: a slice shape (`transform_shape`), an index
(`transform_index`), element strides (`transform_strides`) and the shape of the whole GMEM array
(`transform_gmem_shape`, which may round).  `batch(k)` gives the same transform for a ref with
`k` extra leading dims, and `apply_array` lays out a numpy array the way the transform says; it is
the reference the interpreter and the tests use.  Transforms are frozen dataclasses because they
become parts of descriptor cache keys.

Indices may be plain ints or traced values: anything supporting `+`, `*`, `//` and `%` with ints
(numpy index arrays work too, which the tests use to check every index at once).  Traced values
are kept on the left of each operator, and multiplications and divisions by 1 are skipped so the
traced IR stays small.
"""

from __future__ import annotations

import enum
import math
import operator
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from asyncdsl.errors import TransformError, user_location

Index = Any  # a plain int, or a traced value (duck typed: + * // % with ints)


def divisor_of(index: Index) -> int:
    """The largest number `index` is known to be a multiple of (0 for the int 0).

    A traced index reports what the compiler proved of it as `known_divisor` (from the arithmetic
    that computed it and the user's `asyncdsl.multiple_of` hints); one that does not is known to
    be a multiple of 1 only.
    """
    if type(index) is int:
        return abs(index)
    return getattr(index, "known_divisor", 1)


class Rounding(enum.Enum):
    """What a tiling does with a GMEM dim that its tile does not divide."""

    DOWN = "down"  # drop the trailing partial tile
    UP = "up"  # pad to a whole tile (not implemented)


def _int_tuple(values: Any, what: str, minimum: int) -> tuple[int, ...]:
    """`values` as a tuple of Python ints >= `minimum` (numpy ints accepted)."""
    try:
        result = tuple(operator.index(v) for v in values)
    except TypeError:
        raise TransformError(f"{what} must be a sequence of integers, got {values!r}") from None
    if any(v < minimum for v in result):
        bound = "positive" if minimum == 1 else f"at least {minimum}"
        raise TransformError(f"{what} must be {bound}, got {result}")
    return result


@contextmanager
def _at_the_users_line() -> Iterator[None]:
    """Name the user's line on errors of a transform's constructor (called from user code)."""
    try:
        yield
    except TransformError as error:
        raise error.at(user_location()) from None


def _check_rank(transform: MemRefTransform, shape: Sequence[Any], min_rank: int) -> None:
    if len(shape) < min_rank:
        raise TransformError(
            f"{transform} needs at least {min_rank} dims, got {len(shape)}: {tuple(shape)}"
        )


def _floordiv(index: Index, divisor: int) -> Index:
    return index if divisor == 1 else index // divisor


def _mod(index: Index, divisor: int) -> Index:
    return 0 if divisor == 1 else index % divisor


def linear_combination(indices: Sequence[Index], coefficients: Sequence[int]) -> Index:
    """`sum(i * c)`, folding plain ints and keeping traced values on the left of operators."""
    constant = 0
    dynamic = None
    for index, coefficient in zip(indices, coefficients, strict=True):
        if type(index) is int:
            constant += index * coefficient
            continue
        term = index if coefficient == 1 else index * coefficient
        dynamic = term if dynamic is None else dynamic + term
    if dynamic is None:
        return constant
    return dynamic if constant == 0 else dynamic + constant


class MemRefTransform(ABC):
    """One step of the layout a GMEM window takes in SMEM."""

    @abstractmethod
    def transform_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The shape a slice of `shape` takes after the transform."""

    @abstractmethod
    def transform_index(self, index: Sequence[Index]) -> tuple[Index, ...]:
        """Where the element at `index` lands after the transform."""

    @abstractmethod
    def transform_strides(self, strides: Sequence[int]) -> tuple[int, ...]:
        """The strides of the transformed view of an array with `strides`."""

    @abstractmethod
    def transform_gmem_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The shape of the transformed view of a whole GMEM array (may round)."""

    @abstractmethod
    def batch(self, leading_rank: int) -> MemRefTransform:
        """The same transform on a ref with `leading_rank` extra leading dims left in place."""

    @abstractmethod
    def unbatch(self, leading_rank: int) -> MemRefTransform:
        """The transform whose `batch(leading_rank)` is this one: how it acts on the trailing
        dims of a ref whose first `leading_rank` dims it leaves in place (an SMEM view indexing
        them).  TransformError when it moves, merges or drops one of those dims."""

    @abstractmethod
    def apply_array(self, array: np.ndarray) -> np.ndarray:
        """`array` laid out as the transform says (a view of it where numpy allows)."""


@dataclass(frozen=True, init=False)
class TileTransform(MemRefTransform):
    """Tiles the trailing `len(tiling)` dims: tile counts first, then the tile itself.

    Shape `(5, 128, 128)` tiled by `(64, 32)` becomes `(5, 2, 4, 64, 32)`; index `i` along a
    tiled dim maps to `(i // t, i % t)`.  A GMEM dim smaller than its tile is one tile of its own
    size.  A GMEM dim larger than its tile and not divisible by it needs `Rounding.DOWN`, which
    drops the partial tile from the view (copies see zeros there and stores skip it).
    """

    tiling: tuple[int, ...]
    rounding: Rounding | None = None

    # Constructors are written out (not generated) so that errors name the user's line.
    def __init__(self, tiling: Sequence[int], rounding: Rounding | None = None):
        with _at_the_users_line():
            object.__setattr__(self, "tiling", _int_tuple(tiling, "tile sizes", 1))
            object.__setattr__(self, "rounding", rounding)
            if not self.tiling:
                raise TransformError("a tiling needs at least one dim, got ()")
            if rounding is Rounding.UP:
                raise TransformError(
                    "Rounding.UP is not implemented: tile with Rounding.DOWN (drops the partial "
                    "tile) or copy full tiles that run past the end of the array (zero-filled)"
                )
            if rounding is not None and not isinstance(rounding, Rounding):
                raise TransformError(f"rounding must be None or Rounding.DOWN, got {rounding!r}")

    def __str__(self) -> str:
        return f"tile{self.tiling}"

    def _split(self, dims: Sequence[Any], counts: Sequence[Any], tiles: Sequence[Any]) -> tuple:
        rank = len(self.tiling)
        return (*dims[: len(dims) - rank], *counts, *tiles)

    def transform_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        rank = len(self.tiling)
        _check_rank(self, shape, rank)
        tiled = tuple(shape[len(shape) - rank :])
        if self.rounding is None and any(s % t for s, t in zip(tiled, self.tiling)):
            raise TransformError(
                f"slice shape {tuple(shape)} is not a multiple of the tiling {self.tiling} "
                f"along its last {rank} dims; to copy a partial tile, slice a whole tile that "
                "runs past the end of the GMEM array (loads zero-fill there, stores skip it)"
            )
        counts = [s // t for s, t in zip(tiled, self.tiling)]
        return self._split(shape, counts, self.tiling)

    def transform_index(self, index: Sequence[Index]) -> tuple[Index, ...]:
        rank = len(self.tiling)
        _check_rank(self, index, rank)
        tiled = index[len(index) - rank :]
        counts = [_floordiv(i, t) for i, t in zip(tiled, self.tiling)]
        offsets = [_mod(i, t) for i, t in zip(tiled, self.tiling)]
        return self._split(index, counts, offsets)

    def transform_strides(self, strides: Sequence[int]) -> tuple[int, ...]:
        rank = len(self.tiling)
        _check_rank(self, strides, rank)
        tiled = strides[len(strides) - rank :]
        return self._split(strides, [s * t for s, t in zip(tiled, self.tiling)], tiled)

    def _gmem_tiles(self, shape: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(kept size, tile) per tiled dim of a whole GMEM array."""
        rank = len(self.tiling)
        _check_rank(self, shape, rank)
        kept, tiles = [], []
        for dim, (size, tile) in enumerate(zip(shape[len(shape) - rank :], self.tiling)):
            if size <= tile:
                kept.append(size)
                tiles.append(size)
                continue
            if size % tile and self.rounding is None:
                raise TransformError(
                    f"GMEM dim {len(shape) - rank + dim} of shape {tuple(shape)} has size {size}, "
                    f"neither at most nor a multiple of its tile {tile}; tile with "
                    "Rounding.DOWN to drop the partial tile"
                )
            kept.append(size // tile * tile)
            tiles.append(tile)
        return tuple(kept), tuple(tiles)

    def transform_gmem_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        kept, tiles = self._gmem_tiles(shape)
        return self._split(shape, [k // t for k, t in zip(kept, tiles)], tiles)

    def batch(self, leading_rank: int) -> MemRefTransform:
        return self  # it only touches trailing dims

    def unbatch(self, leading_rank: int) -> MemRefTransform:
        return self  # whether the trailing dims still hold the tiled ones is the shape's business

    def apply_array(self, array: np.ndarray) -> np.ndarray:
        kept, tiles = self._gmem_tiles(array.shape)
        untiled = array.ndim - len(self.tiling)
        array = array[(slice(None),) * untiled + tuple(slice(0, k) for k in kept)]
        split_shape = list(array.shape[:untiled])
        for size, tile in zip(kept, tiles):
            split_shape += [size // tile, tile]
        counts = range(untiled, untiled + 2 * len(tiles), 2)
        order = (*range(untiled), *counts, *(c + 1 for c in counts))
        return array.reshape(split_shape).transpose(order)


@dataclass(frozen=True, init=False)
class TransposeTransform(MemRefTransform):
    """Permutes dims: dim `d` of the result is dim `permutation[d]` of the input."""

    permutation: tuple[int, ...]

    def __init__(self, permutation: Sequence[int]):
        with _at_the_users_line():
            permutation = _int_tuple(permutation, "permutation entries", 0)
            for dim in permutation:
                if permutation.count(dim) > 1:
                    raise TransformError(f"permutation {permutation} repeats dim {dim}")
            if sorted(permutation) != list(range(len(permutation))):
                raise TransformError(
                    f"permutation {permutation} is not a permutation of 0..{len(permutation) - 1}"
                )
            object.__setattr__(self, "permutation", permutation)

    def __str__(self) -> str:
        return f"transpose{self.permutation}"

    def _permute(self, values: Sequence[Any]) -> tuple:
        if len(values) != len(self.permutation):
            raise TransformError(
                f"{self} needs exactly {len(self.permutation)} dims, got {len(values)}"
            )
        return tuple(values[p] for p in self.permutation)

    def transform_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return self._permute(shape)

    def transform_index(self, index: Sequence[Index]) -> tuple[Index, ...]:
        return self._permute(index)

    def transform_strides(self, strides: Sequence[int]) -> tuple[int, ...]:
        return self._permute(strides)

    def transform_gmem_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return self._permute(shape)

    def batch(self, leading_rank: int) -> MemRefTransform:
        return TransposeTransform(
            (*range(leading_rank), *(p + leading_rank for p in self.permutation))
        )

    def unbatch(self, leading_rank: int) -> MemRefTransform:
        if (self.permutation[:leading_rank] != tuple(range(leading_rank))
                or len(self.permutation) == leading_rank):
            raise TransformError(f"{self} moves one of the leading {leading_rank} dim(s)")
        return TransposeTransform(tuple(p - leading_rank for p in self.permutation[leading_rank:]))

    def apply_array(self, array: np.ndarray) -> np.ndarray:
        self._permute(array.shape)
        return array.transpose(self.permutation)


@dataclass(frozen=True, init=False)
class CollapseLeadingIndicesTransform(MemRefTransform):
    """Merges `len(strides)` dims, after `batch_rank` leading dims, into one.

    The merged index is `sum(i * s) // gcd(strides)`, so this is a view of the same memory whose
    merged dim steps by the common stride.  `strides` are the element strides of the merged dims
    in the array the transform applies to.  Copies use it to fit squeezed dims into TMA's 5 dims;
    a slice must therefore have size 1 along the merged dims.
    """

    strides: tuple[int, ...]
    batch_rank: int = 0

    def __init__(self, strides: Sequence[int], batch_rank: int = 0):
        with _at_the_users_line():
            object.__setattr__(self, "strides", _int_tuple(strides, "collapsed strides", 1))
            object.__setattr__(self, "batch_rank", batch_rank)
            if not self.strides:
                raise TransformError("collapsing needs at least one dim, got no strides")
            if type(batch_rank) is not int or batch_rank < 0:
                raise TransformError(f"batch_rank must be a non-negative int, got {batch_rank}")

    def __str__(self) -> str:
        return f"collapse{self.strides}"

    @property
    def common_stride(self) -> int:
        """The element stride of the merged dim."""
        return math.gcd(*self.strides)

    @property
    def _end(self) -> int:
        return self.batch_rank + len(self.strides)

    def _merge(self, values: Sequence[Any], merged: Any) -> tuple:
        _check_rank(self, values, self._end)
        return (*values[: self.batch_rank], merged, *values[self._end :])

    def transform_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        collapsed = tuple(shape[self.batch_rank : self._end])
        if any(size != 1 for size in collapsed):
            raise TransformError(
                f"{self} merges dims {self.batch_rank}..{self._end - 1} of slice shape "
                f"{tuple(shape)}, which must all have size 1 (squeezed), got {collapsed}"
            )
        return self._merge(shape, 1)

    def transform_index(self, index: Sequence[Index]) -> tuple[Index, ...]:
        common = self.common_stride
        scales = [s // common for s in self.strides]
        return self._merge(index, linear_combination(index[self.batch_rank : self._end], scales))

    def transform_strides(self, strides: Sequence[int]) -> tuple[int, ...]:
        actual = tuple(strides[self.batch_rank : self._end])
        if actual != self.strides:
            raise TransformError(
                f"{self} was built for strides {self.strides} but the view has strides {actual}"
            )
        return self._merge(strides, self.common_stride)

    def transform_gmem_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        _check_rank(self, shape, self._end)
        common = self.common_stride
        sizes = shape[self.batch_rank : self._end]
        extent = sum((size - 1) * (s // common) for size, s in zip(sizes, self.strides)) + 1
        return self._merge(shape, extent)

    def batch(self, leading_rank: int) -> MemRefTransform:
        return replace(self, batch_rank=self.batch_rank + leading_rank)

    def unbatch(self, leading_rank: int) -> MemRefTransform:
        if self.batch_rank < leading_rank:
            raise TransformError(f"{self} merges one of the leading {leading_rank} dim(s)")
        return replace(self, batch_rank=self.batch_rank - leading_rank)

    def apply_array(self, array: np.ndarray) -> np.ndarray:
        shape = self.transform_gmem_shape(array.shape)
        itemsize = array.itemsize
        for dim, expected in enumerate(self.strides, start=self.batch_rank):
            if array.shape[dim] > 1 and array.strides[dim] != expected * itemsize:
                raise TransformError(
                    f"{self} expects element stride {expected} along dim {dim}, "
                    f"the array has {array.strides[dim] // itemsize}"
                )
        strides = self._merge(array.strides, self.common_stride * itemsize)
        return np.lib.stride_tricks.as_strided(array, shape, strides, writeable=False)


@dataclass(frozen=True, init=False)
class DropUnitDimsTransform(MemRefTransform):
    """Removes the size-1 dims at positions `unit_dims` (kept sorted)."""

    unit_dims: tuple[int, ...]

    def __init__(self, unit_dims: Sequence[int]):
        with _at_the_users_line():
            dims = _int_tuple(unit_dims, "unit dims", 0)
            if len(set(dims)) != len(dims):
                raise TransformError(f"unit dims must be distinct, got {dims}")
            object.__setattr__(self, "unit_dims", tuple(sorted(dims)))

    def __str__(self) -> str:
        return f"drop_unit_dims{self.unit_dims}"

    def _drop(self, values: Sequence[Any]) -> tuple:
        if self.unit_dims:
            _check_rank(self, values, self.unit_dims[-1] + 1)
        return tuple(v for d, v in enumerate(values) if d not in self.unit_dims)

    def transform_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        kept = self._drop(shape)
        for dim in self.unit_dims:
            if shape[dim] != 1:
                raise TransformError(
                    f"cannot drop dim {dim} of shape {tuple(shape)}: "
                    f"its size is {shape[dim]}, not 1"
                )
        return kept

    def transform_index(self, index: Sequence[Index]) -> tuple[Index, ...]:
        return self._drop(index)

    def transform_strides(self, strides: Sequence[int]) -> tuple[int, ...]:
        return self._drop(strides)

    def transform_gmem_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return self.transform_shape(shape)

    def batch(self, leading_rank: int) -> MemRefTransform:
        return DropUnitDimsTransform(tuple(d + leading_rank for d in self.unit_dims))

    def unbatch(self, leading_rank: int) -> MemRefTransform:
        if any(d < leading_rank for d in self.unit_dims):
            raise TransformError(f"{self} drops one of the leading {leading_rank} dim(s)")
        return DropUnitDimsTransform(tuple(d - leading_rank for d in self.unit_dims))

    def apply_array(self, array: np.ndarray) -> np.ndarray:
        self.transform_shape(array.shape)
        return array[tuple(0 if d in self.unit_dims else slice(None) for d in range(array.ndim))]


TransformChain = tuple[MemRefTransform, ...]


def apply_chain_shape(chain: Sequence[MemRefTransform], shape: Sequence[int]) -> tuple[int, ...]:
    """`transform_shape` of every transform of `chain`, first to last."""
    shape = tuple(shape)
    for transform in chain:
        shape = transform.transform_shape(shape)
    return shape


def apply_chain_gmem_shape(
    chain: Sequence[MemRefTransform], shape: Sequence[int]
) -> tuple[int, ...]:
    """`transform_gmem_shape` of every transform of `chain`, first to last."""
    shape = tuple(shape)
    for transform in chain:
        shape = transform.transform_gmem_shape(shape)
    return shape


def apply_chain_index(chain: Sequence[MemRefTransform], index: Sequence[Index]) -> tuple:
    """`transform_index` of every transform of `chain`, first to last."""
    index = tuple(index)
    for transform in chain:
        index = transform.transform_index(index)
    return index


def apply_chain_strides(
    chain: Sequence[MemRefTransform], strides: Sequence[int]
) -> tuple[int, ...]:
    """`transform_strides` of every transform of `chain`, first to last."""
    strides = tuple(strides)
    for transform in chain:
        strides = transform.transform_strides(strides)
    return strides


def apply_chain_array(chain: Sequence[MemRefTransform], array: np.ndarray) -> np.ndarray:
    """`apply_array` of every transform of `chain`, first to last."""
    for transform in chain:
        array = transform.apply_array(array)
    return array


def batch_chain(chain: Sequence[MemRefTransform], leading_rank: int) -> TransformChain:
    """Every transform of `chain` batched over `leading_rank` leading dims."""
    return tuple(transform.batch(leading_rank) for transform in chain)


def unbatch_chain(chain: Sequence[MemRefTransform], leading_rank: int) -> TransformChain:
    """Every transform of `chain` unbatched from `leading_rank` leading dims (the inverse of
    `batch_chain`); TransformError when one of them touches those dims."""
    return tuple(transform.unbatch(leading_rank) for transform in chain)
