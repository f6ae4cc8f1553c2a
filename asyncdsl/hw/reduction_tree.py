"""The order in which a warpgroup reduces a register tile, as data (the order a float reduction must follow
on the GPU and in the interpreter alike).

Float addition is not associative, so the order of a reduction is part of its meaning: the PTX
lowering and the interpreter both walk the same `ReductionTree`, which makes their float results
bit-identical.  Every thread runs the three stages on its own registers:

1. **In the thread.**  For result register k, fold the source registers `register_terms[k]`
   left to right, element by element (`acc = op(acc, regs[r])`: one chain per vector lane);
   then, if `fold_vector`, fold the vector's lanes left to right into one element.
2. **Across lanes.**  For each mask in `lane_xors`, in order: `value = op(value, other)` where
   `other` is the value of lane `lane ^ mask` (`shfl.sync.bfly.b32 … mask`), own value first.
3. **Across warps.**  If `warp_groups` is not empty: every thread writes its values to the
   scratch (`scratch_shape`: warp-major, `[warp][lane][register][vector lane]`), the warpgroup
   meets at a barrier, and a thread of warp w folds the entries of its own lane written by the
   warps of w's group, in the group's order (the first entry, then `op(acc, next)`).  Every warp
   of a group folds in the same order, so all of them hold the same result.

Afterwards thread t's result registers are the reduced tile in layout `result`, in register
order.  Copies agree: lanes and warps that reduced together computed the same folds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asyncdsl.errors import LayoutError
from asyncdsl.hw.fragments import WARP_LANES, WARPS, Layout, Replicated, SplatLayout, StridedLayout


@dataclass(frozen=True)
class ReductionTree:
    """How a warpgroup reduces a tile, step by step (see the module docstring for the walk).

    Register indices are flat, in register order (row-major over all but the last dim of the
    layout's `registers_shape`).  The results fill `result.registers_shape(result_shape)`."""

    register_terms: tuple[tuple[int, ...], ...]
    fold_vector: bool
    lane_xors: tuple[int, ...]
    warp_groups: tuple[tuple[int, ...], ...]
    result: Layout
    result_shape: tuple[int, ...]

    @property
    def scratch_shape(self) -> tuple[int, ...]:
        """The SMEM scratch the warp stage needs, in elements (warp-major); () when it has none."""
        if not self.warp_groups:
            return ()
        return (WARPS, WARP_LANES, len(self.register_terms), self.result.vector_length)


def reduction_tree(layout: Layout, shape: Sequence[int], axes: int | Sequence[int]) -> ReductionTree:
    """The tree that reduces a `shape` tile in `layout` over `axes`."""
    shape = tuple(shape)
    if isinstance(layout, SplatLayout):
        raise LayoutError(
            "a splat tile has one value: reducing it is arithmetic on that value, not a tree"
        )
    if isinstance(layout, StridedLayout):
        result = layout.reduce(shape, axes)
        if result == layout:
            # Only unit axes: the flattened tile, so every register, stays as it is.
            kept = tuple(s for a, s in enumerate(shape) if a not in _axes(axes, len(shape)))
            count = layout.registers_shape(shape)[0]
            return ReductionTree(tuple((r,) for r in range(count)), False, (), (), result, kept)
        # A strided tile reduces over every axis; its flattened tile, tiled, has the same registers.
        tree = reduction_tree(layout.as_tiled(), (math.prod(shape),), 0)
        return ReductionTree(tree.register_terms, tree.fold_vector, tree.lane_xors,
                             tree.warp_groups, result, ())
    result = layout.reduce(shape, axes)  # also checks the shape and the axes
    reduced_axes = _axes(axes, len(shape))
    result_shape = tuple(s for a, s in enumerate(shape) if a not in reduced_axes)

    dims, base = layout.tiling.dims, layout.tiling.tiles[0]
    lead = len(shape) - len(base)
    # Which dims of the register array (the tiled shape) walk a reduced axis.
    reduced = [a in reduced_axes for a in range(lead)]
    reduced += [lead + a in reduced_axes for a in range(len(base))]
    reduced += [lead + d.axis in reduced_axes for d in dims]
    registers = layout.registers_shape(shape)[:-1]
    kept = tuple(1 if r else s for r, s in zip(reduced, registers))
    folded = tuple(s if r else 1 for r, s in zip(reduced, registers))
    register_terms = tuple(
        tuple(
            int(np.ravel_multi_index(tuple(k + f for k, f in zip(out, fold)), registers))
            for fold in np.ndindex(folded)
        )
        for out in np.ndindex(kept)
    )

    def is_reduced(entry) -> bool:
        return not isinstance(entry, Replicated) and reduced[len(reduced) + entry]

    # Butterflies over the lane bits of reduced lane dims, minor dims (low bits) first.
    lane_xors, stride = [], 1
    for entry, size in zip(reversed(layout.lane_dims), reversed(layout.lane_sizes)):
        if is_reduced(entry):
            lane_xors += [stride << bit for bit in range(size.bit_length() - 1)]
        stride *= size

    warp_groups: tuple[tuple[int, ...], ...] = ()
    if any(is_reduced(e) for e in layout.warp_dims):
        # Warps whose coordinates agree on every dim not reduced combine, in ascending order.
        coordinates = list(np.ndindex(*layout.warp_sizes))  # warp w's digits, major first
        keys = [tuple(c for e, c in zip(layout.warp_dims, coordinates[w]) if not is_reduced(e))
                for w in range(WARPS)]
        warp_groups = tuple(sorted({tuple(w for w in range(WARPS) if keys[w] == key) for key in keys}))

    return ReductionTree(
        register_terms, reduced[layout.vector_dim], tuple(lane_xors), warp_groups, result, result_shape
    )


def _axes(axes: int | Sequence[int], rank: int) -> set[int]:
    return {a % rank for a in ((axes,) if isinstance(axes, int) else axes)}
