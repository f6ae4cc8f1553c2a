"""The grid of a launch (`jit/grid.py`): a tuple, a function of the call's arguments by name, or a
persistent grid (the interpreter's clusters when no device says how many fit)."""

from __future__ import annotations

import pytest
from support import device_array

import asyncdsl as ad


def grid_of(kernel, *args, **kwargs) -> tuple[int, int, int]:
    return kernel.grid_rule.for_call(kernel.signature.bind(args, kwargs, None), None)


def test_a_grid_is_one_to_three_dims():
    x = device_array((8, 8), 0)
    assert grid_of(ad.kernel(grid=(3, 2))(lambda x: None), x) == (3, 2, 1)
    assert grid_of(ad.kernel(grid=5)(lambda x: None), x) == (5, 1, 1)


@pytest.mark.parametrize("grid", [(0,), (1, 2, 3, 4), (True,), "3", ()])
def test_other_grids_are_refused_at_the_call(grid):
    kernel = ad.kernel(grid=grid)(lambda x: None)
    with pytest.raises(ad.ArgumentError, match="grid must be 1 to 3 positive ints"):
        grid_of(kernel, device_array((8, 8), 0))


def test_a_grid_function_takes_the_arguments_by_name_constexprs_too():
    @ad.kernel(grid=lambda x, B: (x.shape[0] // B, x.shape[1] // B))
    def tiles(x, B: ad.constexpr):
        pass

    assert grid_of(tiles, device_array((64, 32), 0), B=16) == (4, 2, 1)
    assert tiles.grid_rule.function is not None and not tiles.grid_rule.persistent
    with pytest.raises(ad.ArgumentError, match="grid must be 1 to 3 positive ints"):
        grid_of(tiles, device_array((8, 8), 0), B=16)  # (0, 0)


def test_a_persistent_grid_in_the_interpreter_is_its_clusters():
    kernel = ad.kernel(grid=ad.PersistentGrid(interpret_clusters=3), cluster=(2, 1, 1))(lambda x: None)
    assert grid_of(kernel, device_array((8, 8), 0)) == (6, 1, 1)
    assert kernel.grid_rule.persistent and kernel.grid_rule.function is None
