"""Row plans: the windows of whole 16-byte vectors a thread the padded row kernels read rows in,
and the plans of the kernels that stage whole rows in shared memory."""

from __future__ import annotations

import doctest

from hypothesis import given
from hypothesis import strategies as st

from asyncdsl.blocks import row_plans


def test_the_docstring_examples_hold():
    assert doctest.testmod(row_plans).failed == 0


def test_the_widest_vector_of_a_row_tile():
    assert row_plans.widest_vector(1, 1024) == 8 and row_plans.widest_vector(4, 256) == 8
    assert row_plans.widest_vector(2, 768) == 4 and row_plans.widest_vector(1, 3584) == 4
    assert row_plans.widest_vector(1, 1152) == 1  # 9 elements a thread
    assert row_plans.widest_vector(3, 640) == 0  # three rows over four warps


def test_a_row_of_odd_length_moves_in_vectors_of_its_alignment():
    assert [row_plans.vector_elements(n) for n in (1000, 2100, 3001, 6)] == [8, 4, 1, 2]
    assert row_plans.vector_elements(1000, itemsize=4) == 4


def test_staged_rows_hold_whole_rows_or_pieces_of_at_least_1024_elements():
    assert row_plans.rows_config(1024, 8192, 4096, 8192) == {"ROWS": 8, "CHUNK": 1024}
    assert row_plans.rows_config(20000, 8192, 4096, 8192) is None  # no multiple of 128
    assert row_plans.rows_config(12288, 8192, 4096, 8192) == {"ROWS": 1, "CHUNK": 4096}
    assert row_plans.rows_config(8320, 8192, 8192, 2048) is None  # pieces of 128 only


@given(n=st.integers(1, 20000), elements=st.sampled_from([2048, 8192]))
def test_padded_windows_are_the_narrowest_of_whole_vectors_a_thread(n, elements):
    """A padded plan covers the row, gives every thread whole vectors as wide as the rows'
    alignment allows, keeps to its budget of elements (or one row), and no narrower window would
    do: the layout rule (warps over rows, lanes over a row's vectors) checked by brute force."""
    rows, width = row_plans.padded_rows(n, elements)
    vector = min(8, n & -n)
    assert width >= n and rows * width <= max(elements, width)
    assert row_plans.whole_vectors(rows, width, vector)
    for narrower in range(n, width):
        counts = range(1, max(1, elements // narrower) + 1)
        assert not any(row_plans.whole_vectors(rows, narrower, vector) for rows in counts)


def test_a_padded_config_takes_one_window_up_to_its_most_else_one_row_in_windows():
    assert row_plans.padded_config(1000, most=8192, window=4096) == {"ROWS": 8, "WIDTH": 1024}
    assert row_plans.padded_config(6000, most=8192, window=4096) == {"ROWS": 1, "WIDTH": 6144}
    assert row_plans.padded_config(8000, most=7168, window=4096) == {"ROWS": 1, "WIDTH": 4096}
    assert row_plans.padded_config(12345, most=8192, window=4096) == {"ROWS": 1, "WIDTH": 4096}
