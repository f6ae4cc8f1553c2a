"""The silent-wrong-data regressions on the H200: the GPU gives the interpreter's bytes, and under
ASYNCDSL_DEBUG=1 a broken assumption is an AssumptionError at its line instead of a fault."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_support import gpu_and_interpreter as both
from gpu_support import hopper_or_skip
from reliability_kernels import (
    bulk_store_rows,
    dropped_row_past_a_unit_dim,
    folded_negative_row,
    hinted_tiles,
    last_row,
    multicast_tile,
    row_past_a_unit_dim,
    store_past_a_unit_dim,
    stores_above,
    stores_below_a_guard,
)
from support import line_of, random_bits

import asyncdsl as ad
from asyncdsl.runtime import to_device, to_host

hopper_or_skip()
pytestmark = pytest.mark.gpu
F32 = ad.float32


def test_a_traced_index_past_a_unit_dim_reads_zeros():
    (gpu,), (cpu,) = both(row_past_a_unit_dim, [random_bits((1, 16), F32, 1)],
                          [np.full((2, 16), 7.0, np.float32)])
    assert not gpu.any() and gpu.tobytes() == cpu.tobytes()


def test_a_traced_store_past_a_unit_dim_writes_nothing():
    y = random_bits((1, 16), F32, 2)
    (gpu,), (cpu,) = both(store_past_a_unit_dim, [random_bits((2, 16), F32, 1)], [y])
    assert gpu.tobytes() == y.tobytes() == cpu.tobytes()


def test_a_folded_negative_index_reads_zeros():
    (gpu,), (cpu,) = both(folded_negative_row, [random_bits((4, 16), F32, 4)],
                          [np.full((1, 16), 3.0, np.float32)])
    assert not gpu.any() and gpu.tobytes() == cpu.tobytes()


def test_a_dropped_unit_dim_keeps_its_start():
    x = random_bits((1, 8, 16), F32, 5)
    (gpu,), (cpu,) = both(dropped_row_past_a_unit_dim, [x], [np.full((2, 8, 16), 3.0, np.float32)])
    assert gpu[0].tobytes() == x[0].tobytes() and not gpu[1].any() and gpu.tobytes() == cpu.tobytes()


def test_a_literal_negative_index_is_the_last_row():
    x = random_bits((4, 16), F32, 6)
    (gpu,), (cpu,) = both(last_row, [x], [np.zeros((1, 16), np.float32)])
    assert gpu[0].tobytes() == x[-1].tobytes() == cpu[0].tobytes()


def test_a_hinted_tile_start_is_bit_exact():
    x = random_bits((32, 16), F32, 3)
    (gpu,), (cpu,) = both(hinted_tiles, [x], [np.zeros_like(x)], OFFSET=0)
    assert gpu[:16].tobytes() == x[:16].tobytes() and gpu.tobytes() == cpu.tobytes()


@pytest.mark.parametrize("dtype", [ad.float4_e2m1fn, ad.int4, ad.int8])
def test_4_bit_multicast_matches_the_interpreter(dtype):
    raw = np.random.default_rng(5).integers(0, 16, (16, 256)).astype(np.uint8)
    (gpu,), (cpu,) = both(multicast_tile, [raw.view(dtype.numpy)], [np.zeros((32, 256), dtype.numpy)])
    assert (gpu.view(np.uint8).tobytes() == cpu.view(np.uint8).tobytes()
            == np.concatenate([raw, raw]).tobytes())


def test_debug_mode_reports_a_false_hint_at_its_line(monkeypatch):
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    x = to_device(random_bits((32, 16), F32, 3))
    y = to_device(np.zeros((32, 16), np.float32))
    with pytest.raises(ad.AssumptionError,
                       match=r"CTA \([01], 0, 0\): asyncdsl.multiple_of promised a multiple of 8") as caught:
        hinted_tiles(x, y, OFFSET=4)
    assert caught.value.location.line == line_of(hinted_tiles.fn, "# the hint")
    hinted_tiles(x, y, OFFSET=0)  # the same debug-mode kernel passes its checks, and the GPU is fine


def test_debug_mode_skips_a_negative_store_and_says_so(monkeypatch):
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    x = random_bits((16, 16), F32, 7)
    y = np.full((32, 16), 5.0, np.float32)
    on_gpu = to_device(y)
    with pytest.raises(ad.AssumptionError,
                       match=r"CTA \(0, 0, 0\): the TMA store's coordinate .* negative") as caught:
        stores_above(to_device(x), on_gpu)
    assert caught.value.location.line == line_of(stores_above.fn, "# the store")
    result = to_host(on_gpu)  # CTA 1 stored rows 0..15; CTA 0's store at row -16 was skipped
    assert result[:16].tobytes() == x.tobytes() and (result[16:] == 5.0).all()


def test_a_predicated_off_negative_store_is_skipped_without_a_report(monkeypatch):
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    x, y = random_bits((16, 16), F32, 11), random_bits((32, 16), F32, 12)
    (gpu,), (cpu,) = both(stores_below_a_guard, [x], [y])
    assert gpu[:16].tobytes() == x.tobytes() and gpu.tobytes() == cpu.tobytes()


def test_bulk_stores_clamped_at_the_arrays_end_match_the_interpreter():
    x, y = random_bits((2, 2, 16), F32, 9), random_bits((4, 4, 16), F32, 10)
    (gpu,), (cpu,) = both(bulk_store_rows, [x], [y], SLAB=3, ROW=1, STEP=2)
    assert gpu.tobytes() == cpu.tobytes()
    assert gpu[3, 3].tobytes() == x[1, 0].tobytes() and gpu[:3].tobytes() == y[:3].tobytes()


def test_debug_mode_skips_a_bulk_store_that_would_leave_its_slice(monkeypatch):
    monkeypatch.setenv("ASYNCDSL_DEBUG", "1")
    x, y = random_bits((2, 2, 16), F32, 9), random_bits((4, 4, 16), F32, 10)
    on_gpu = to_device(y)
    with pytest.raises(ad.AssumptionError,
                       match=r"CTA \(1, 0, 0\): a bulk store .* would overwrite them") as caught:
        bulk_store_rows(to_device(x), on_gpu, SLAB=1, ROW=1, STEP=2)
    assert caught.value.location.line == line_of(bulk_store_rows.fn, "# the store")
    result = to_host(on_gpu)  # CTA 0 stored rows 1..2 of slab 1; CTA 1's store (rows 3..4) was skipped
    expected = y.copy()
    expected[1, 1:3] = x[0]
    assert result.tobytes() == expected.tobytes()
