"""References to memory inside a kernel: GMEM arrays, SMEM buffers, and views of them.

`x.at[...]` takes numpy-style indices: an integer (static or traced) squeezes a dim,
`asyncdsl.ds(start, size)` takes a window with a static size and a possibly traced start, a
static slice `a:b` a static window, `:` the whole dim and `...` the dims left over. A GMEM view
records the slice for `async_copy`; an SMEM view is a buffer itself, wherever it is contiguous:
integer indices on leading dims, then at most one window of whole rows of the next dim
(`buf.at[s, ds(r, n)]`; with a layout, whole blocks of its tiling from a whole swizzle atom).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import SSAValue

from asyncdsl import dtypes
from asyncdsl.dialects import asyncdsl as ir
from asyncdsl.errors import SourceLocation, TraceError, TransformError, is_int, user_location
from asyncdsl.frontend import tracer as tracing
from asyncdsl.frontend.scalars import IndexLike, Scalar, index_value, is_index
from asyncdsl.frontend.tile_arguments import layout_argument
from asyncdsl.frontend.tiles import RegisterTile, assigned
from asyncdsl.hw.fragments import Layout
from asyncdsl.hw.smem_layout import SmemLayout, describe_chain


@dataclass(frozen=True, init=False)
class ds:
    """A window of `size` elements (static) starting at `start` (static or traced)."""

    start: IndexLike
    size: int

    # Written out rather than generated: errors name the first frame outside asyncdsl, which for a
    # generated __init__ would be its "<string>" source instead of the user's line.
    def __init__(self, start: IndexLike, size: int):
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "size", size)
        if not is_index(self.start):
            raise TraceError(f"ds start must be an integer or a traced index, got {self.start!r}",
                             user_location())
        if not is_int(self.size) or self.size <= 0:
            raise TraceError(
                f"ds size must be a positive Python int known while tracing, got {self.size!r}",
                user_location(),
            )


@dataclass(frozen=True)
class DimIndex:
    """How one dim of a ref is indexed: a window (`size` set) or a squeezed position."""

    start: IndexLike
    size: int | None  # None: squeezed

    @property
    def squeezed(self) -> bool:
        return self.size is None


def parse_indices(
    indices: object, shape: tuple[int, ...], what: str, *, coordinates: bool
) -> tuple[DimIndex, ...]:
    """Turn the key of `ref.at[key]` into one DimIndex per dim of `shape`.

    With `coordinates` (GMEM refs), a traced index and a `ds` start are TMA coordinates: any
    value, a negative or too large one lying outside the array (loads read zeros there), never
    wrapped.  A literal integer index is numpy's, as a literal slice is: a negative one counts
    from the end (`-1` is the last row, the row `-1:` starts at), below `-size` it is an error;
    one past the end stays a coordinate outside the array.  Without `coordinates` (SMEM views)
    indices are Python's, in bounds.
    """
    if not isinstance(indices, tuple):
        indices = (indices,)
    # By identity: `==` on a traced index builds a comparison instead of answering.
    positions = [position for position, index in enumerate(indices) if index is Ellipsis]
    if len(positions) > 1:
        raise TraceError(f"{what}: at most one '...' in an index", user_location())
    if positions:
        at = positions[0]
        fill = len(shape) - (len(indices) - 1)
        indices = indices[:at] + (slice(None),) * max(fill, 0) + indices[at + 1:]
    if len(indices) > len(shape):
        raise TraceError(
            f"{what}: {len(indices)} indices for a {len(shape)}-d ref of shape {shape}", user_location()
        )
    indices = indices + (slice(None),) * (len(shape) - len(indices))
    return tuple(
        _parse_one(index, dim, size, what, coordinates)
        for dim, (index, size) in enumerate(zip(indices, shape))
    )


def _parse_one(index: object, dim: int, size: int, what: str, coordinates: bool) -> DimIndex:
    if isinstance(index, ds):
        return DimIndex(index.start, index.size)
    if isinstance(index, slice):
        if index.step not in (None, 1):
            raise TraceError(f"{what}: dim {dim}: strided slices are not supported", user_location())
        for bound in (index.start, index.stop):
            if bound is not None and not isinstance(bound, int):
                raise TraceError(
                    f"{what}: dim {dim}: slice bounds must be Python ints; for a traced start use "
                    "asyncdsl.ds(start, size)",
                    user_location(),
                )
        start, stop, _ = index.indices(size)
        if stop <= start:
            raise TraceError(f"{what}: dim {dim}: empty slice {index} of a dim of size {size}",
                             user_location())
        return DimIndex(start, stop - start)
    if is_index(index):
        if coordinates and not (type(index) is int and index < 0):  # a FoldedIndex is a coordinate
            return DimIndex(index, None)
        if coordinates and index < -size:
            raise TraceError(
                f"{what}: index {index} is out of bounds for dim {dim} of size {size}: a literal negative "
                f"index counts from the end, as in numpy, from -1 (the last) to -{size} (the first); for a "
                "TMA coordinate before the array's start (a load of zeros) use asyncdsl.ds(start, 1)",
                user_location(),
            )
        if isinstance(index, int) and not -size <= index < size:
            raise TraceError(f"{what}: index {index} is out of bounds for dim {dim} of size {size}",
                             user_location())
        if isinstance(index, int) and index < 0:
            index += size
        return DimIndex(index, None)
    raise TraceError(
        f"{what}: dim {dim}: cannot index with {type(index).__name__} {index!r} (use ints, traced "
        "indices, static slices or asyncdsl.ds)",
        user_location(),
    )


class _At:
    """The `.at` property object: `ref.at[...]` builds a view."""

    def __init__(self, ref):
        self._ref = ref

    def __getitem__(self, key):
        return self._ref._view(key)


class GmemRef:
    """A kernel argument: an array in global memory (this device's, or with `peer` the same
    symmetric array on device `peer`: `x.peer(pe)`)."""

    # Set once by __init__ (assignment is refused afterwards).
    argument: SSAValue
    name: str
    shape: tuple[int, ...]
    dtype: dtypes.DType
    peer_index: IndexLike | None

    def __init__(self, value: SSAValue, name: str, shape: tuple[int, ...], dtype: dtypes.DType,
                 peer: IndexLike | None = None):
        for field, given in (("argument", value), ("name", name), ("shape", shape), ("dtype", dtype),
                             ("peer_index", peer)):
            object.__setattr__(self, field, given)

    def __setattr__(self, field: str, value) -> None:
        # The array's shape and dtype are the launch's: a kernel that changed them would compute
        # bounds for an array that is not there (reads and writes past its end on the GPU).
        raise TraceError(f"{self.name}.{field} cannot be assigned: a kernel argument is the array the call "
                         "passes", user_location())

    @property
    def value(self) -> SSAValue:
        """The argument, for the APIs that address this device's memory only."""
        if self.peer_index is not None:
            raise TraceError(
                f"{self.name}.peer(...) is a peer device's array: only asyncdsl.async_copy (TMA) and "
                "asyncdsl.signal address one", user_location(),
            )
        return self.argument

    def peer(self, pe: IndexLike) -> GmemRef:
        """The same (symmetric) array on device `pe` (a Python int or a traced index), for
        `async_copy` (TMA, reductions included) and `signal`."""
        if self.peer_index is not None:
            raise TraceError(f"{self.name}.peer(...) is already a peer's array; call peer on the argument",
                             user_location())
        devices = tracing.current(f"{self.name}.peer").launch.devices
        if not is_index(pe):
            raise TraceError(f"{self.name}.peer(pe): pe must be a Python int or a traced index, got {pe!r}",
                             user_location())
        if isinstance(pe, int) and not 0 <= pe < devices:
            raise TraceError(
                f"{self.name}.peer({pe}): the kernel runs on {devices} device(s) (asyncdsl.num_devices()), "
                f"so a peer is 0 .. {devices - 1}", user_location(),
            )
        return GmemRef(self.argument, self.name, self.shape, self.dtype, pe)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def at(self) -> _At:
        return _At(self)

    def _view(self, key) -> GmemView | GmemIndexed:
        key = key if isinstance(key, tuple) else (key,)
        if any(isinstance(index, RegisterTile) for index in key):
            return GmemIndexed.of(self, key)
        return GmemView(self, parse_indices(key, self.shape, f"{self.name}.at[...]", coordinates=True))

    def whole(self) -> GmemView:
        return GmemView(self, tuple(DimIndex(0, d) for d in self.shape))

    def __repr__(self) -> str:
        where = "" if self.peer_index is None else f" on peer {self.peer_index!r}"
        return f"GmemRef({self.name}: {self.shape} {self.dtype}{where})"


@dataclass(frozen=True)
class GmemView:
    """A slice of a GMEM array, used as one side of an async copy."""

    ref: GmemRef
    dims: tuple[DimIndex, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        """The slice's shape with squeezed dims removed."""
        return tuple(d.size for d in self.dims if d.size is not None)

    @property
    def dtype(self) -> dtypes.DType:
        return self.ref.dtype

    def peer(self, pe: IndexLike) -> GmemView:
        raise TraceError(
            f"take the peer's array first, then slice it: {self.ref.name}.peer(pe).at[...]", user_location()
        )


@dataclass(frozen=True)
class GmemIndexed:
    """`x.at[i, j]` with int32 register tiles among the indices: the elements a gather reads
    (`asyncdsl.load`) or a scatter writes (`asyncdsl.store`), one per element of the indices
    broadcast together (numpy's advanced indexing, every dim indexed by a tile, a Python int or
    a traced index)."""

    ref: GmemRef
    indices: tuple  # one per dim: a RegisterTile, a Python int or a traced index

    @staticmethod
    def of(ref: GmemRef, key: tuple) -> GmemIndexed:
        what = f"{ref.name}.at[...]"
        if len(key) != len(ref.shape):
            raise TraceError(
                f"{what}: an array indexed by tiles takes one index for each of the {len(ref.shape)} dims of "
                f"{ref.name} with an int32 tile, an int or a traced index; got {len(key)} indices (for a "
                "range of a dim, index it with asyncdsl.iota)",
                user_location(),
            )
        for dim, index in enumerate(key):
            if isinstance(index, RegisterTile):
                if index.dtype != dtypes.int32:
                    raise TraceError(f"{what}: dim {dim}: an index tile must hold int32, not {index.dtype} "
                                     "(astype(asyncdsl.int32) first)", user_location())
            elif not is_index(index):
                raise TraceError(
                    f"{what}: dim {dim}: indices among tiles are int32 tiles, ints or traced indices, not "
                    f"{type(index).__name__} {index!r} (for a range of a dim, index it with asyncdsl.iota)",
                    user_location(),
                )
        return GmemIndexed(ref, tuple(key))

    @property
    def dtype(self) -> dtypes.DType:
        return self.ref.dtype


class TransposedSmem:
    """`buf.T`: a 2-d shared-memory buffer seen as its transpose.  Only wgmma reads it so (the
    tensor cores take either major of a 16-bit operand); nothing moves."""

    def __init__(self, ref: SmemRef):
        self.ref = ref
        self.shape = (ref.shape[1], ref.shape[0])
        self.dtype = ref.dtype

    def __repr__(self) -> str:
        return f"{self.ref!r}.T"


class SmemRef:
    """A buffer in the CTA's shared memory (or a contiguous view of one: leading indices and a
    window of whole rows, `buf.at[s, ds(r, n)]`).

    `shape` is the logical shape; a buffer allocated with transforms or a swizzle carries them
    in `layout` (None: row-major in `shape`), and `origin` is the line that allocated it.
    """

    def __init__(self, value: SSAValue, shape: tuple[int, ...], dtype: dtypes.DType,
                 layout: SmemLayout | None = None, origin: SourceLocation | None = None):
        self.value = value
        self.shape = shape
        self.dtype = dtype
        self.layout = layout
        self.origin = origin

    def peer(self, rank: IndexLike) -> PeerSmem:
        """This buffer's copy in the CTA of cluster rank `rank` (x + X·(y + Y·z) for a cluster of
        shape (X, Y, Z); a Python int or a traced index): distributed shared memory, which
        register tiles are read from and written to whole (`peer[...]`, `peer[...] = tile`)."""
        cluster = tracing.current("SmemRef.peer").launch.cluster
        size = cluster[0] * cluster[1] * cluster[2]
        if size == 1:
            raise TraceError(
                "buf.peer(rank) names another CTA of the kernel's cluster, and this kernel's cluster "
                f"{cluster} holds one CTA (declare cluster= on the kernel); an array of another device is "
                "x.peer(pe) of a kernel array argument", user_location(),
            )
        if not is_index(rank) or (isinstance(rank, int) and not 0 <= rank < size):
            raise TraceError(
                f"buf.peer(rank) takes a CTA rank in the cluster, 0 to {size - 1} (an int or a traced "
                f"index), got {rank!r}", user_location(),
            )
        return PeerSmem(self, rank)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        count = 1
        for d in self.shape:
            count *= d
        return count * self.dtype.bits // 8  # a layout is a bijection: as many bytes as logical elements

    @property
    def at(self) -> _At:
        return _At(self)

    @property
    def T(self) -> TransposedSmem:
        """This 2-d buffer read as its transpose (by `asyncdsl.wgmma`, which can)."""
        if self.ndim != 2:
            raise TraceError(f".T transposes a 2-d buffer; this one has shape {self.shape}", user_location())
        return TransposedSmem(self)

    def plain(self, what: str) -> SmemRef:
        """This buffer, checked to carry no layout (for copies that lay out rows themselves)."""
        if self.layout is not None:
            raise TraceError(
                f"{what} takes a buffer allocated without transforms or swizzle; the one allocated at "
                f"{self.origin} carries them",
                user_location(),
            )
        return self

    def _view(self, key) -> SmemRef:
        """`buf.at[i, ..., ds(r, n)]`: integer indices on leading dims, then at most one window
        of the next dim with every later dim whole, the contiguous views of a buffer; or, of a
        buffer whose layout lays out the last dim in contiguous blocks (64-column tiles), a
        window of the last dim with every other dim whole (`buf.at[s, :, ds(64 * c, 64)]`)."""
        dims = parse_indices(key, self.shape, "shared-memory view .at[...]", coordinates=False)
        kept = next((position for position, dim in enumerate(dims) if not dim.squeezed), None)
        if kept is None:
            raise TraceError(f"a shared-memory view keeps at least one dim; {len(dims)} integer indices "
                             f"index every dim of {self.shape}", user_location())
        leading = [dim.start for dim in dims[:kept]]
        window, columns = dims[kept], None
        for position, dim in enumerate(dims[kept + 1:], start=kept + 1):
            if not dim.squeezed and _whole(dim, self.shape[position]):
                continue
            if (position == len(dims) - 1 and not dim.squeezed and self.layout is not None
                    and _whole(window, self.shape[kept])):
                columns = dim  # a window of the last dim alone: its layout may make it contiguous
                continue
            raise TraceError(
                "a shared-memory view must stay contiguous: integer indices on leading dims, then "
                f"at most one window (asyncdsl.ds or a slice) on the next dim and every later dim "
                f"whole (or, where the buffer's layout tiles the last dim, a window of the last dim "
                f"alone); dim {position} of {self.shape} is not whole", user_location(),
            )
        view = self._leading(leading)
        if columns is not None:
            assert columns.size is not None  # not squeezed
            return view._window(columns.start, columns.size, dim=view.ndim - 1)
        if _whole(window, self.shape[len(leading)]):
            return view
        assert window.size is not None  # the first dim not squeezed
        return view._window(window.start, window.size)

    def _leading(self, leading: list[IndexLike]) -> SmemRef:
        if not leading:
            return self
        view_layout = None
        if self.layout is not None:
            try:
                view_layout = self.layout.view(len(leading))
            except TransformError as error:
                raise TraceError(
                    f"shared-memory view of the buffer allocated at {self.origin}: {error.message}",
                    user_location()
                ) from None
        tracer = tracing.current("SmemRef.at")
        op = tracer.emit(ir.SmemViewOp(self.value, [index_value(i) for i in leading]))
        return SmemRef(op.results[0], self.shape[len(leading):], self.dtype, view_layout, self.origin)

    def _window(self, start: IndexLike, size: int, dim: int = 0) -> SmemRef:
        """Indices start .. start + size of `dim` (the leading one, rows; or the last, columns),
        every other dim whole."""
        unit = "row" if dim == 0 else "column"
        where = f" from {unit} {start}" if isinstance(start, int) else ""
        what = f"shared-memory window of {size} {unit}(s){where} of the buffer allocated at {self.origin}"
        extent = self.shape[dim]
        unit_bits = self.dtype.bits * math.prod(self.shape) // extent
        if self.ndim == 1 or unit_bits % 8:
            raise TraceError(f"{what}: a window's rows must be whole bytes; rows of {self.shape[1:]} "
                             f"{self.dtype} elements are not (window a leading dim of whole bytes)",
                             user_location())
        if isinstance(start, int) and not 0 <= start <= extent - size:
            raise TraceError(f"{what}: the window lies outside the dim's {extent} {unit}s", user_location())
        layout, step = None, 1
        if self.layout is not None:
            try:
                layout = self.layout.window(size, dim)
                step = self.layout.window_step(self.dtype.bits // 8, dim)
            except TransformError as error:
                raise TraceError(f"{what}: {error.message}", user_location()) from None
            if isinstance(start, int) and start % step:
                atom = (f", a whole swizzle atom of {self.layout.alignment} bytes"
                        if self.layout.swizzle_bytes else "")
                raise TraceError(
                    f"{what}: a window of this layout starts at a multiple of {step} {unit}s (whole "
                    f"blocks of {describe_chain(self.layout.transforms)}{atom}), not at {unit} {start}",
                    user_location())
        op = tracing.current("SmemRef.at").emit(ir.SmemWindowOp(self.value, index_value(start), size, dim))
        shape = list(self.shape)
        shape[dim] = size
        return SmemRef(op.results[0], tuple(shape), self.dtype, layout, self.origin)

    # -- register tiles: `tile = buf[...]`, `buf[...] = tile` ----------------------------------------
    def __getitem__(self, key) -> RegisterTile:
        self._whole(key, "reading a shared-memory buffer into registers")
        return self.load()

    def __setitem__(self, key, tile) -> None:
        self._whole(key, "writing registers to a shared-memory buffer")
        self.store(tile)

    def _whole(self, key, what: str) -> None:
        if key is not Ellipsis and key != (Ellipsis,) and key != (slice(None),) * self.ndim:
            raise TraceError(
                f"{what} takes the whole buffer (buf[...]); index leading dims with buf.at[i] first",
                user_location(),
            )

    def load(self, layout: Layout | None = None, cta: IndexLike | None = None) -> RegisterTile:
        """The buffer's contents (in the CTA of cluster rank `cta`: `peer(cta).load`) as a register
        tile (in `layout`, or one inferred)."""
        layout = layout_argument(layout, "asyncdsl.load")
        rank = None if cta is None else index_value(cta)
        op = tracing.current("asyncdsl.load").emit(ir.LoadSmemOp(self.value, layout, rank))
        return RegisterTile(op.results[0], self.dtype)

    def store(self, tile, cta: IndexLike | None = None) -> None:
        """Write register tile `tile` (of this buffer's dtype, broadcast to its shape) into the
        buffer (in the CTA of cluster rank `cta`: `peer(cta).store`)."""
        what = "asyncdsl.store"
        tile = assigned(tile, self.shape, self.dtype, "the buffer", what)
        rank = None if cta is None else index_value(cta)
        tracing.current(what).emit(ir.StoreSmemOp(tile.use(what), self.value, rank))

    def __repr__(self) -> str:
        return f"SmemRef({self.shape} {self.dtype})"


def _whole(dim: DimIndex, size: int) -> bool:
    return not dim.squeezed and not isinstance(dim.start, Scalar) and dim.start == 0 and dim.size == size


class PeerSmem:
    """An SMEM buffer (or view) as it lies in another CTA of the cluster: `buf.peer(rank)`.

    Register tiles move to and from it whole, as with the buffer itself (`peer[...]`,
    `peer[...] = tile`, `asyncdsl.load` / `asyncdsl.store`), through distributed shared memory
    (`ld/st.shared::cluster`; never `ldmatrix`/`stmatrix`, which reach this CTA only).  The CTAs
    order those accesses through an mbarrier arrived on across the cluster
    (`bar.arrive(collective=...)` after the stores, a wait before the loads).  It is not a
    buffer of this CTA: copies and wgmma do not take it."""

    def __init__(self, buffer: SmemRef, rank: IndexLike):
        self.buffer = buffer
        self.rank = rank

    @property
    def shape(self) -> tuple[int, ...]:
        return self.buffer.shape

    @property
    def dtype(self) -> dtypes.DType:
        return self.buffer.dtype

    @property
    def at(self) -> _At:
        return _At(self)

    def _view(self, key) -> PeerSmem:
        return PeerSmem(self.buffer._view(key), self.rank)

    def __getitem__(self, key) -> RegisterTile:
        self.buffer._whole(key, "reading a peer CTA's shared-memory buffer into registers")
        return self.load()

    def __setitem__(self, key, tile) -> None:
        self.buffer._whole(key, "writing registers to a peer CTA's shared-memory buffer")
        self.store(tile)

    def load(self, layout: Layout | None = None) -> RegisterTile:
        return self.buffer.load(layout, cta=self.rank)

    def store(self, tile) -> None:
        self.buffer.store(tile, cta=self.rank)

    def __repr__(self) -> str:
        return f"PeerSmem({self.shape} {self.dtype} in CTA {self.rank!r})"
