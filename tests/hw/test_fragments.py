"""Laws of the register layouts (asyncdsl.hw.fragments) and their reduction trees.

The references here are written from the definitions, not from the module: the accumulator and
A-operand fragments from the formulas of docs/hardware.md §14.3/§14.4, tiled layouts by applying
the tiles one after another and undoing them in reverse, strided layouts from their one-line rule.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import examples

from asyncdsl.errors import LayoutError
from asyncdsl.hw.fragments import (
    NAMED_LAYOUTS,
    WGMMA,
    WGMMA_COL,
    WGMMA_ROW,
    WGMMA_TRANSPOSED,
    Replicated,
    SplatLayout,
    StridedLayout,
    TiledLayout,
    Tiling,
    register_window,
    replicated_layout,
    strided,
)
from asyncdsl.hw.layout_choice import narrow_row_layout, thread_linear
from asyncdsl.hw.reduction_tree import reduction_tree
from asyncdsl.hw.wgmma import wgmma_a_registers

LAWS = settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])

THREAD = np.arange(128)
WARP, LANE = THREAD // 32, THREAD % 32


# ---------------------------------------------------------------- references from the definitions


def accumulator_reference(rows: int, columns: int) -> np.ndarray:
    """§6.3: thread t's f32 accumulator d[i] of each 64-row block; (128, rows // 64, columns // 2, 2)."""
    w, lane = WARP[:, None, None], LANE[:, None, None]
    block = np.arange(rows // 64)[None, :, None]
    i = np.arange(columns // 2)[None, None, :]
    row = 64 * block + 16 * w + lane // 4 + 8 * ((i // 2) % 2)
    col = 8 * (i // 4) + 2 * (lane % 4) + i % 2
    return np.stack(np.broadcast_arrays(row, col), axis=-1)


def a_fragment_reference(rows: int, columns: int) -> np.ndarray:
    """§6.4: a0..a3 of k16 step j, low and high half; (128, rows // 64, columns // 16, 4, 2, 2)."""
    shape = (128, rows // 64, columns // 16, 4, 2)
    t, block, step, register, half = np.indices(shape)
    r0, c0 = 16 * (t // 32) + (t % 32) // 4, 2 * (t % 4)
    row = 64 * block + r0 + 8 * (register % 2)  # a1, a3: row r0 + 8
    col = 16 * step + c0 + 8 * (register // 2) + half  # a2, a3: columns c0 + 8, c0 + 9
    return np.stack([row, col], axis=-1)


def tiled_shape(tiles, shape) -> list[int]:
    for tile in tiles:
        k = len(tile)
        shape = [*shape[: len(shape) - k], *(s // t for s, t in zip(shape[len(shape) - k :], tile)), *tile]
    return list(shape)


def reference_coordinates(tiles, warp_dims, lane_dims, vector_dim, shape) -> np.ndarray:
    """Thread t, register slot s (register-major, vector lane minor) -> element: (128, slots, rank)."""
    tiled = tiled_shape(tiles, shape)
    n = len(tiled)
    spread = {n + e for e in (*warp_dims, *lane_dims) if not isinstance(e, Replicated)} | {n + vector_dim}
    registers = [1 if p in spread else s for p, s in enumerate(tiled)]
    grid = np.indices((128, *registers, tiled[vector_dim])).reshape(len(registers) + 2, 128, -1)
    index = [grid[1 + p] for p in range(n)]
    for entries, number in ((warp_dims, grid[0] // 32), (lane_dims, grid[0] % 32)):
        sizes = [e.times if isinstance(e, Replicated) else tiled[e] for e in entries]
        for j, entry in enumerate(entries):
            digit = number // math.prod(sizes[j + 1 :]) % sizes[j]
            if not isinstance(entry, Replicated):
                index[n + entry] = index[n + entry] + digit
    index[n + vector_dim] = index[n + vector_dim] + grid[-1]
    for tile in reversed(tiles):  # untile: outer * tile + inner
        k = len(tile)
        m = len(index) - 2 * k
        index = index[:m] + [index[m + i] * tile[i] + index[m + k + i] for i in range(k)]
    return np.stack(index, axis=-1)


def follow(tree, layout, shape, tile, op):
    """Walk a reduction tree the way the interpreter does: per-thread values in, per-thread out."""
    values = tile[tuple(np.moveaxis(layout.coordinates(shape), -1, 0))].reshape(128, -1, layout.vector_length)
    results = []
    for terms in tree.register_terms:
        acc = values[:, terms[0]]
        for register in terms[1:]:
            acc = op(acc, values[:, register])
        if tree.fold_vector:
            lanes = acc[:, 0]
            for v in range(1, acc.shape[1]):
                lanes = op(lanes, acc[:, v])
            acc = lanes[:, None]
        results.append(acc)
    out = np.stack(results, axis=1)
    for mask in tree.lane_xors:
        out = op(out, out[THREAD ^ mask])
    if tree.warp_groups:
        scratch = out.reshape(4, 32, *out.shape[1:]).copy()  # what the warps wrote, before any reads
        group_of = {w: group for group in tree.warp_groups for w in group}
        members = np.array([group_of[w] for w in WARP])  # each thread's group, in fold order
        out = scratch[members[:, 0], LANE]
        for k in range(1, members.shape[1]):
            out = op(out, scratch[members[:, k], LANE])
    return out.reshape(128, *tree.result.registers_shape(tree.result_shape))


def flat_index(coordinates, shape):
    return sum(coordinates[..., a] * math.prod(shape[a + 1 :]) for a in range(len(shape)))


def unravel(flat, shape):
    return np.stack([flat // math.prod(shape[a + 1 :]) % shape[a] for a in range(len(shape))], axis=-1)


def per_thread_elements(layout, shape) -> list[set]:
    coordinates = layout.coordinates(shape).reshape(128, -1, len(shape))
    return [set(map(tuple, c.tolist())) for c in coordinates]


# ------------------------------------------------------------------------------- strategies


@st.composite
def raw_layouts(draw):
    """Arguments of a TiledLayout, canonical or not: a random tiling and a random split of its
    dims over warps, lanes and the vector, padded with Replicated where the sizes fall short."""
    rank = draw(st.integers(1, 2))
    # Base tiles of 128 elements or more can fill the warps and lanes without copies.
    total = draw(st.one_of(st.integers(7, 10), st.integers(0, 10)))
    first = draw(st.integers(max(0, total - 6), min(total, 6))) if rank == 2 else total
    exponents = (first, total - first) if rank == 2 else (total,)
    tiles = [tuple(2**e for e in exponents)]
    for _ in range(draw(st.sampled_from([0, 1, 2, 2, 3, 3]))):
        cut = tiles[-1][len(tiles[-1]) - draw(st.integers(1, len(tiles[-1]))) :]
        tiles.append(tuple(2 ** draw(st.integers(0, size.bit_length() - 1)) for size in cut))
    sizes = tiled_shape(tiles, tiles[0])[rank:]
    n = len(sizes)
    order = list(draw(st.permutations(range(n))))
    vector, free = order[0], order[1:]

    def split(total):
        entries = []
        for p in list(free):
            if total % sizes[p] == 0 and draw(st.integers(0, 3)) > 0:
                entries.append(p - n)
                free.remove(p)
                total //= sizes[p]
        if total > 1:
            entries.insert(draw(st.integers(0, len(entries))), Replicated(total))
        return tuple(entries)

    return tiles, split(4), split(32), vector - n


named_layouts = st.sampled_from(
    [(layout.tiling.tiles, layout.warp_dims, layout.lane_dims, layout.vector_dim)
     for layout in NAMED_LAYOUTS.values()]
)


@st.composite
def layouts_and_shapes(draw):
    tiles, warp_dims, lane_dims, vector_dim = draw(st.one_of(named_layouts, raw_layouts()))
    layout = TiledLayout.canonical(Tiling(tiles), warp_dims, lane_dims, vector_dim)
    lead = draw(st.lists(st.integers(1, 2), max_size=1))
    shape = (*lead, *(b * draw(st.integers(1, 2)) for b in tiles[0]))
    return layout, shape, (tiles, warp_dims, lane_dims, vector_dim)


wgmma_shapes = st.tuples(st.sampled_from([64, 128, 192]), st.integers(1, 32).map(lambda n: 8 * n))


# ------------------------------------------------------------------- the hardware's fragments


@LAWS
@given(wgmma_shapes)
def test_wgmma_is_the_accumulator_fragment(shape):
    rows, columns = shape
    ours = WGMMA.coordinates(shape).reshape(128, rows // 64, columns // 2, 2)
    assert np.array_equal(ours, accumulator_reference(rows, columns))


@LAWS
@given(st.sampled_from([64, 128]), st.integers(1, 8).map(lambda k: 16 * k))
def test_wgmma_a_registers_are_the_a_operand_fragment(rows, columns):
    registers = WGMMA.coordinates((rows, columns)).reshape(128, -1, 2, 2)
    ours = registers[:, wgmma_a_registers((rows, columns))]
    assert np.array_equal(ours, a_fragment_reference(rows, columns))


def test_accumulator_registers_8j_to_8j7_are_the_a_operand_of_step_j():
    # docs/hardware.md §14.4: a<i> of step j = cvt(d[8j + 2i + 1], d[8j + 2i]).
    a = wgmma_a_registers((64, 64))[0]
    f32_registers = 2 * a[..., None] + np.arange(2)  # register r, vector lane v is d[2r + v]
    assert np.array_equal(f32_registers.reshape(4, 8), np.arange(32).reshape(4, 8))


def test_wgmma_a_registers_refuse_shapes_wgmma_cannot_feed():
    for shape in [(64, 8), (32, 16), (64, 16, 2)]:
        with pytest.raises(LayoutError, match="A operand"):
            wgmma_a_registers(shape)


# ------------------------------------------------------------------------ the tiled algebra


@LAWS
@given(layouts_and_shapes())
def test_coordinates_follow_the_tiling_step_by_step(case):
    layout, shape, raw = case
    ours = layout.coordinates(shape).reshape(128, -1, len(shape))
    assert np.array_equal(ours, reference_coordinates(*raw, shape))


@LAWS
@given(layouts_and_shapes())
def test_canonical_form_is_required_and_idempotent(case):
    layout, _, (tiles, warp_dims, lane_dims, vector_dim) = case
    assert (TiledLayout.canonical(layout.tiling, layout.warp_dims, layout.lane_dims, layout.vector_dim)
            == layout)
    written = (Tiling(tiles), warp_dims, lane_dims, vector_dim)
    if written != (layout.tiling, layout.warp_dims, layout.lane_dims, layout.vector_dim):
        with pytest.raises(LayoutError, match="not in canonical form"):
            TiledLayout(*written)


@pytest.mark.parametrize(
    "spelling, layout",
    [
        ((((64, 8), (16, 8), (8, 8), (1, 2)), (-8,), (-4, -3), -1), WGMMA),  # a leading 1 in a tile
        ((((64, 8), (16, 8), (8, 8), (2,), (1,)), (-8,), (-4, -3), -2), WGMMA),  # a (1,) nobody uses
        ((((64, 8), (64, 8), (16, 8), (8, 8), (2,)), (-7,), (-3, -2), -1), WGMMA),  # a tile repeated
        ((((8,), (2,)), (Replicated(2), Replicated(2)), (Replicated(8), -2), -1), WGMMA_COL),
        ((((64,), (64,), (16,), (8,), (1,)), (-4,), (-2, Replicated(4)), -5), WGMMA_ROW),  # a size-1 vector
    ],
)
def test_spellings_of_one_layout_share_its_canonical_form(spelling, layout):
    assert TiledLayout.canonical(*spelling) == layout


@LAWS
@given(layouts_and_shapes())
def test_every_element_is_held_replication_times(case):
    layout, shape, _ = case
    coordinates = layout.coordinates(shape)
    registers = layout.registers_shape(shape)
    assert coordinates.shape == (128, *registers, len(shape))
    assert registers[-1] == layout.vector_length
    flat = flat_index(coordinates, shape)
    assert np.array_equal(np.bincount(flat.ravel(), minlength=math.prod(shape)),
                          np.full(math.prod(shape), layout.replication))
    threads, slots = layout.holders(shape)
    held = coordinates.reshape(128, -1, len(shape))[threads, slots]
    assert np.array_equal(held, np.broadcast_to(np.stack(np.indices(shape), -1)[..., None, :], held.shape))


@LAWS
@given(layouts_and_shapes())
def test_replicas_hold_identical_registers(case):
    layout, shape, _ = case
    replicas = layout.replica_threads()
    assert replicas.shape == (128, layout.replication)
    held = [c.tobytes() for c in layout.coordinates(shape)]
    for t in range(128):
        assert replicas[t].tolist() == [u for u in range(128) if held[u] == held[t]]


@LAWS
@given(layouts_and_shapes(), st.data())
def test_reduce_leaves_each_thread_the_projections_of_its_elements(case, data):
    layout, shape, _ = case
    axes = data.draw(st.sets(st.sampled_from(range(len(shape))), min_size=1))
    kept = [a for a in range(len(shape)) if a not in axes]
    reduced = layout.reduce(shape, sorted(axes))
    if not kept:
        assert reduced == SplatLayout()
        return
    reduced_shape = tuple(shape[a] for a in kept)
    projections = [{tuple(e[a] for a in kept) for e in elements}
                   for elements in per_thread_elements(layout, shape)]
    assert per_thread_elements(reduced, reduced_shape) == projections
    assert reduced.broadcast_in_dim(shape, kept, like=layout) == layout


@pytest.mark.parametrize("axis, reduced", [(1, WGMMA_ROW), (0, WGMMA_COL), (-1, WGMMA_ROW)])
def test_wgmma_reduces_to_row_and_column_layouts_and_broadcasts_back(axis, reduced):
    assert WGMMA.reduce((128, 64), axis) == reduced
    kept = [0] if axis % 2 else [1]
    assert reduced.broadcast_in_dim((128, 64), kept) == WGMMA
    assert WGMMA.reduce((128, 64), (0, 1)) == SplatLayout()


def test_broadcast_that_would_move_data_is_refused():
    with pytest.raises(LayoutError, match="would move data"):
        WGMMA_ROW.broadcast_in_dim((64, 64), (0,), like=WGMMA_TRANSPOSED)
    with pytest.raises(LayoutError, match="would move data"):
        WGMMA_COL.broadcast_in_dim((64, 64), (1,), like=WGMMA_TRANSPOSED)


def test_new_leading_dims_keep_a_layout():
    assert WGMMA.broadcast_in_dim((3, 64, 16), (1, 2)) == WGMMA
    assert strided(4).broadcast_in_dim((3, 512), (1,)) == strided(4)
    assert SplatLayout().broadcast_in_dim((64, 16), (), like=WGMMA) == WGMMA
    with pytest.raises(LayoutError, match="new leading"):
        strided(4).broadcast_in_dim((512, 3), (0,))
    assert strided(4).broadcast_in_dim((512, 1), (0,)) == strided(4)  # a size-1 dim: the same flat tile


@LAWS
@given(layouts_and_shapes(), st.data())
def test_new_size_1_dims_keep_every_element_in_its_thread_and_register(case, data):
    layout, shape, _ = case
    # Size-1 axes put before some of the tile's axes (len(shape): after the last).
    before = data.draw(st.lists(st.integers(0, len(shape)), min_size=1, max_size=2))
    wide, dims = [], []
    for axis in range(len(shape) + 1):
        wide += [1] * before.count(axis)
        if axis < len(shape):
            dims.append(len(wide))
            wide.append(shape[axis])
    wide, dims = tuple(wide), tuple(dims)
    held = layout.broadcast_in_dim(wide, dims)
    assert held.reduce(wide, [a for a in range(len(wide)) if a not in dims]) == layout
    placed = held.coordinates(wide).reshape(128, -1, len(wide))[..., list(dims)]
    assert np.array_equal(placed, layout.coordinates(shape).reshape(128, -1, len(shape)))


def test_wgmma_transposed_swaps_2x2_blocks_between_lanes_l_and_l_xor_4():
    shape = (128, 32)
    for source, target in [(WGMMA, WGMMA_TRANSPOSED), (WGMMA_TRANSPOSED, WGMMA)]:
        wanted = target.coordinates(shape).reshape(128, -1, 2)
        # unreplicated: one holder
        source_threads = source.holders(shape)[0][wanted[..., 0], wanted[..., 1], 0]
        me = THREAD[:, None]
        assert np.all((source_threads == me) | (source_threads == me ^ 4))
    assert WGMMA_TRANSPOSED.vector_length == 2
    pair = WGMMA_TRANSPOSED.coordinates(shape)[0].reshape(-1, 2, 2)[0]
    assert pair.tolist() == [[0, 0], [1, 0]]  # a register holds two rows of one column


# ----------------------------------------------------------------------- splat and strided


@LAWS
@given(st.lists(st.integers(1, 12), min_size=1, max_size=3).map(tuple), st.sampled_from([1, 2, 4, 8]))
def test_strided_layout_deals_vec_elements_round_robin(shape, vec):
    layout = StridedLayout(vec)
    size = math.prod(shape)
    if size % (128 * vec):
        assert not layout.can_hold(shape)
        with pytest.raises(LayoutError, match=f"not a multiple of {128 * vec}"):
            layout.registers_shape(shape)
        shape = (*shape[:-1], shape[-1] * 128 * vec // math.gcd(size, 128 * vec))
        size = math.prod(shape)
    registers = size // (128 * vec)
    assert layout.registers_shape(shape) == (registers, vec)
    r, t, v = np.indices((registers, 128, vec))
    reference = unravel((128 * r + t) * vec + v, shape).transpose(1, 0, 2, 3)
    assert np.array_equal(layout.coordinates(shape), reference)
    tiled = layout.as_tiled().coordinates((size,)).reshape(128, registers, vec)
    assert np.array_equal(unravel(tiled, shape), reference)
    assert layout.reduce(shape, range(len(shape))) == SplatLayout()
    if len(shape) > 1 and shape[0] == 1:  # dropping a size-1 dim leaves the flattened tile as it was
        assert layout.reduce(shape, 0) == layout
    elif len(shape) > 1:
        with pytest.raises(LayoutError, match="over all its axes"):
            layout.reduce(shape, 0)


def test_splat_holds_any_shape_in_one_register():
    splat = SplatLayout()
    assert splat.registers_shape((7, 3)) == (1,) and splat.replication == 128
    assert splat.reduce((7, 3), 1) == splat
    threads, slots = splat.holders((2, 3))
    assert threads.shape == (2, 3, 128) and not slots.any()
    with pytest.raises(LayoutError, match="no per-element map"):
        splat.coordinates((2, 3))


# ------------------------------------------------------------------------------- reductions


@LAWS
@given(layouts_and_shapes(), st.data())
def test_reduction_tree_sums_each_element_once_and_leaves_copies_equal(case, data):
    layout, shape, _ = case
    axes = sorted(data.draw(st.sets(st.sampled_from(range(len(shape))), min_size=1)))
    check_tree(layout, shape, axes, data.draw(st.randoms()))


@LAWS
@given(st.sampled_from([1, 2, 4]), st.integers(1, 3), st.sampled_from([[1, 2], [0], [0, 1, 2]]), st.randoms())
def test_strided_reduction_tree_sums_everything_or_keeps_every_register(vec, registers, axes, random):
    # Over every axis longer than 1, the whole tile; over the unit axis alone, nothing to combine.
    check_tree(strided(vec), (1, registers * vec, 128), axes, random)


def check_tree(layout, shape, axes, random):
    tree = reduction_tree(layout, shape, axes)
    tile = np.array([random.randrange(-(2**20), 2**20) for _ in range(math.prod(shape))]).reshape(shape)
    for values, op, total in [(tile, np.add, np.sum), (tile, np.maximum, np.max),
                              (np.ones_like(tile), np.add, np.sum)]:
        got = follow(tree, layout, shape, values, op)
        expected = np.asarray(total(values, axis=tuple(axes)))
        if isinstance(tree.result, SplatLayout):
            assert np.all(got == expected)
        else:
            wanted = expected[tuple(np.moveaxis(tree.result.coordinates(tree.result_shape), -1, 0))]
            assert np.array_equal(got, wanted)


def test_wgmma_row_sum_order():
    tree = reduction_tree(WGMMA, (64, 32), 1)
    # Registers of each 8-row half, in register order, one chain per vector lane; then the two
    # lanes; then the 4 lanes of a row: xor 1, xor 2.  No warp stage.
    assert tree.register_terms == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert tree.fold_vector and tree.lane_xors == (1, 2) and tree.warp_groups == ()
    assert tree.result == WGMMA_ROW and tree.scratch_shape == ()


def test_wgmma_column_sum_crosses_lanes_and_warps():
    tree = reduction_tree(WGMMA, (128, 16), 0)
    assert tree.register_terms == ((0, 1, 4, 5), (2, 3, 6, 7))
    assert not tree.fold_vector and tree.lane_xors == (4, 8, 16)
    assert tree.warp_groups == ((0, 1, 2, 3),) and tree.scratch_shape == (4, 32, 2, 2)
    assert tree.result == WGMMA_COL


def test_splat_has_no_reduction_tree():
    with pytest.raises(LayoutError, match="one value"):
        reduction_tree(SplatLayout(), (4, 4), 0)


# ------------------------------------------------------------------ names, values, validation


def test_named_layouts_print_short_names_and_compare_by_value():
    assert [str(layout) for layout in NAMED_LAYOUTS.values()] == list(NAMED_LAYOUTS)
    rebuilt = TiledLayout(Tiling([[64, 8], [16, 8], [8, 8], [2]]), [-7], [-3, -2], -1)
    assert rebuilt == WGMMA and hash(rebuilt) == hash(WGMMA) and str(rebuilt) == "wgmma"
    assert {WGMMA: 1}[rebuilt] == 1
    assert str(strided(4)) == "strided(4)" and strided(4) == StridedLayout(4)
    assert str(SplatLayout()) == "splat"
    other = WGMMA_TRANSPOSED.reduce((64, 64), 1)
    assert str(other) == repr(other).replace("Replicated(times=", "Replicated(")
    assert str(other).startswith("TiledLayout(tiling=Tiling(((64,), (16,), (8,), (2,))), warp_dims=(-4,)")


@pytest.mark.parametrize(
    "arguments, message",
    [
        ((Tiling(((64, 8),)), (-1,), (-2,), -1), "warp_dims"),
        (((), (-1,), (-2,), -1), "one or more tiles"),
        ((((8,), (16,)), (Replicated(4),), (Replicated(32),), -1), "does not divide"),
        ((((8,), (4, 2)), (Replicated(4),), (Replicated(32),), -1), "more dims"),
        ((((64, 8), (16, 8), (8, 8)), (-6,), (-2, Replicated(4)), -2), "only one of them"),
        ((((64,), (16,)), (-2,), (Replicated(32),), 0), "vector_dim"),
        ((((64,), (16,)), (1,), (Replicated(32),), -1), "negative dims"),
        ((((64, 8), (16, 8), (8, 8), (1, 2)), (-8,), (-4, -3), -1), "not in canonical form"),
    ],
)
def test_invalid_layouts_are_layout_errors(arguments, message):
    with pytest.raises(LayoutError, match=message):
        TiledLayout(*arguments)


@LAWS
@given(layouts_and_shapes(), st.lists(st.integers(1, 70), min_size=1, max_size=3).map(tuple))
def test_shapes_a_layout_cannot_hold_are_refused(case, shape):
    layout, _, (tiles, *_) = case
    base = tiles[0]
    fits = len(shape) >= len(base) and all(s % b == 0 for s, b in zip(shape[len(shape) - len(base) :], base))
    assert layout.can_hold(shape) == fits
    if not fits:
        with pytest.raises(LayoutError, match=re.escape(f"cannot hold a tile of shape {shape}")):
            layout.registers_shape(shape)
        with pytest.raises(LayoutError, match="cannot hold"):
            layout.reduce(shape, 0)


def test_errors_name_the_layout_and_the_rule():
    with pytest.raises(LayoutError,
                       match=r"wgmma cannot hold a tile of shape \(32, 64\): its base tile \(64, 8\)"):
        WGMMA.registers_shape((32, 64))
    with pytest.raises(LayoutError, match="not distinct axes"):
        WGMMA.reduce((64, 64), (1, -1))
    with pytest.raises(LayoutError, match="positive"):
        WGMMA.registers_shape((0, 8))


@LAWS
@given(st.sampled_from(["wgmma", "wgmma_transposed", "strided"]), st.integers(1, 3),
       st.integers(1, 4), st.data())
def test_a_window_of_registers_holds_the_window_of_the_tile(name, row_blocks, column_blocks, data):
    """The registers `register_window` picks hold, thread by thread and slot by slot, the
    window's elements: the window's own coordinates shifted by its offsets."""
    layout = {"wgmma": WGMMA, "wgmma_transposed": WGMMA_TRANSPOSED, "strided": None}[name]
    if layout is None:
        with pytest.raises(LayoutError, match="needs a tiled layout"):
            register_window(strided(4), (64, 64), (0, 0), (64, 32))
        return
    base = layout.tiling.tiles[0]
    shape = (base[0] * row_blocks, base[1] * column_blocks * 2)
    rows = data.draw(st.integers(1, row_blocks)) * base[0]
    columns = data.draw(st.integers(1, column_blocks * 2)) * base[1]
    offsets = (data.draw(st.integers(0, (shape[0] - rows) // base[0])) * base[0],
               data.draw(st.integers(0, (shape[1] - columns) // base[1])) * base[1])
    whole = layout.coordinates(shape)  # (128, *registers, 2)
    picked = whole[(slice(None), *register_window(layout, shape, offsets, (rows, columns)))]
    np.testing.assert_array_equal(picked, layout.coordinates((rows, columns)) + np.array(offsets))


def test_a_window_that_cuts_the_layouts_tiles_is_refused():
    with pytest.raises(LayoutError, match="multiples of 8"):
        register_window(WGMMA, (64, 64), (0, 4), (64, 8))
    with pytest.raises(LayoutError, match="multiples of 64"):
        register_window(WGMMA, (128, 64), (32, 0), (64, 64))


def test_a_strided_tile_reduces_over_every_axis_longer_than_one():
    layout = StridedLayout(8)
    assert layout.reduce((1, 1024), 1) == SplatLayout()  # the unit row axis may stay
    assert layout.reduce((2, 1024), (0, 1)) == SplatLayout()
    with pytest.raises(LayoutError, match="longer than 1"):
        layout.reduce((2, 1024), 1)


@LAWS
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3))
def test_the_replicated_layout_gives_every_thread_every_element_in_its_own_register(shape):
    shape = tuple(shape)
    layout = replicated_layout(shape)
    assert layout.replication == len(THREAD) and layout.vector_length == 1
    threads, slots = layout.holders(shape)
    assert (threads == THREAD).all()  # each element: every thread, ascending
    assert sorted(slots[..., 0].reshape(-1).tolist()) == list(range(math.prod(shape)))  # a register apiece
    assert (slots == slots[..., :1]).all()  # in the same slot in every thread


narrow_shapes = st.one_of(
    st.tuples(st.integers(1, 256), st.integers(1, 64)),  # mostly no narrow layout
    st.builds(lambda lanes, vector, blocks: (128 // lanes * blocks, lanes * vector),  # mostly one
              st.sampled_from([1, 2, 4, 8, 16, 32]), st.sampled_from([1, 2, 4, 8]), st.integers(1, 3)),
)


@LAWS
@given(narrow_shapes, st.sampled_from([1, 2, 4]), st.randoms())
@example((16, 16), 4, None)
@example((8, 16), 4, None)
def test_a_narrow_row_layout_holds_rows_in_a_few_lanes_each(shape, element_bytes, random):
    """Where it exists, each element once (no copies), the vectors of a row in the lanes of one
    warp, and a row's sum is lane butterflies alone; it exists exactly when some vector of up to
    16 bytes cuts the rows into 1, 2, 4, ... 32 pieces and the warps into whole blocks of rows."""
    rows, columns = shape
    layout = narrow_row_layout(shape, element_bytes)
    fits = [v for v in {16 // element_bytes, 8 // element_bytes, 4 // element_bytes, 2 // element_bytes, 1}
            if 1 <= v <= columns and columns % v == 0 and 32 % (columns // v) == 0
            and rows % (128 // (columns // v)) == 0]
    assert (layout is not None) == bool(fits)
    if layout is None:
        return
    assert layout.replication == 1 and layout.vector_length == max(fits)
    threads, _ = layout.holders(shape)
    warps = threads[..., 0] // 32
    assert (warps == warps[:, :1]).all()  # a row's elements all in one warp
    tree = reduction_tree(layout, shape, 1)
    lanes = columns // layout.vector_length
    assert tree.warp_groups == () and len(tree.lane_xors) == lanes.bit_length() - 1
    if random is not None:
        check_tree(layout, shape, [1], random)


@LAWS
@given(st.integers(1, 8), st.integers(1, 600), st.sampled_from([1, 2, 4, 8]))
@example(4, 160, 1)
@example(4, 128, 4)
@example(3, 384, 2)
@example(8, 64, 4)
def test_a_strided_layout_is_thread_linear_exactly_when_its_rows_fall_alike(rows, columns, vector):
    """`thread_linear` against a direct reading of the layout: every thread's element offsets
    into a (rows, columns) window of an array with longer rows are thread 0's plus the same
    shift for all its registers, and that shift is a sum over the thread index's set bits."""
    shape = (rows, columns)
    if (rows * columns) % (len(THREAD) * vector):
        return
    layout = StridedLayout(vector)
    pitch = columns + 4096  # the array's rows: longer than the window's, so no row and column step cancel
    coordinates = layout.coordinates(shape).reshape(len(THREAD), -1, 2)
    offsets = coordinates @ np.array([pitch, 1])  # (thread, element)
    shift = offsets - offsets[0]
    same_shift = (shift == shift[:, :1]).all()
    bits = [int(shift[1 << b, 0]) for b in range(7)]
    linear = same_shift and all(shift[t, 0] == sum(bits[b] for b in range(7) if t >> b & 1) for t in THREAD)
    assert thread_linear(layout, shape) == linear
    if columns == 160 and vector == 1:
        assert not linear  # thread 32 reaches row 1 with its second element, thread 0 with its third
