"""A matrix of TMA copies through transforms, with an independent numpy reference.

Each case loads `transforms(x[slice])` into shared memory (optionally swizzled) and dumps the raw
shared-memory bytes with a plain store, so the test sees exactly where every byte landed; a
second kernel stores the buffer back through the same chain (a round trip). The reference is
written here from first principles (numpy slicing with zero fill, `apply_array`, and the swizzle
formula of the hardware), independently of the copy planner and the copy-engine emulation.
Used by the interpreter tests (CI) and by the GPU tests, which also compare GPU and interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import asyncdsl as ad
from asyncdsl.hw.transforms import apply_chain_array, apply_chain_shape

Tile, Transpose = ad.TileTransform, ad.TransposeTransform


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple[int, ...]
    dtype: ad.DType
    slice: tuple  # per dim: int (squeezed) or (start, size)
    transforms: tuple = ()
    swizzle: int = 0
    dynamic: bool = False  # starts computed on the GPU rather than known while tracing

    @property
    def smem_shape(self) -> tuple[int, ...]:
        sizes = tuple(entry[1] for entry in self.slice if isinstance(entry, tuple))
        return apply_chain_shape(self.transforms, sizes)

    @property
    def stores_in_bounds(self) -> bool:
        """A TMA store at negative coordinates faults on the H200: round trips need starts >= 0."""
        return all(not isinstance(e, tuple) or e[0] >= 0 for e in self.slice)


CASES = (
    Case("rank2_plain_f32", (64, 128), ad.float32, ((0, 64), (0, 128))),
    Case("rank2_tile8x64_swizzle128_bf16", (128, 256), ad.bfloat16, ((64, 64), (64, 64)),
         (Tile((8, 64)),), 128),
    Case("rank2_tile8x64_swizzle128_bf16_dynamic", (128, 256), ad.bfloat16, ((64, 64), (128, 64)),
         (Tile((8, 64)),), 128, True),
    Case("rank2_tile8x32_swizzle64_bf16", (64, 96), ad.bfloat16, ((0, 32), (32, 64)), (Tile((8, 32)),), 64),
    Case("rank2_tile8x16_swizzle32_f16", (40, 64), ad.float16, ((8, 16), (16, 32)), (Tile((8, 16)),), 32),
    Case("rank2_tile8x128_swizzle128_i8", (64, 256), ad.int8, ((0, 32), (128, 128)), (Tile((8, 128)),), 128),
    Case("rank3_transpose_f32", (6, 40, 32), ad.float32, ((0, 6), (0, 40), (0, 32)), (Transpose((1, 0, 2)),)),
    Case("rank3_transpose_dynamic_f32", (6, 40, 32), ad.float32, ((2, 4), (8, 16), (0, 32)),
         (Transpose((1, 0, 2)),), 0, True),
    Case("rank4_squeezed_f32", (3, 5, 64, 32), ad.float32, (2, (0, 5), (16, 32), (0, 32))),
    Case("rank4_squeezed_dynamic_f32", (3, 5, 64, 32), ad.float32,
         (1, (1, 4), (8, 16), (0, 32)), (), 0, True),
    Case("rank5_squeezed_middle_bf16", (2, 3, 4, 16, 32), ad.bfloat16, ((0, 2), 1, (0, 4), (8, 8), (0, 32))),
    Case("rank4_transpose_tile_unit_dropped_bf16", (2, 3, 16, 64), ad.bfloat16,
         ((0, 2), (0, 3), (0, 16), (0, 64)), (Transpose((1, 0, 2, 3)), Tile((8, 64))), 128),
    Case("rank6_collapsed_f32", (2, 2, 2, 2, 16, 32), ad.float32, (1, 1, (0, 2), (0, 2), (0, 16), (0, 32))),
    Case("rank2_past_the_edge_f32", (100, 64), ad.float32, ((80, 32), (32, 32))),
    Case("rank2_past_the_edge_dynamic_bf16", (90, 72), ad.bfloat16, ((64, 32), (64, 16)), (), 0, True),
    Case("rank2_negative_start_f32", (64, 64), ad.float32, ((-8, 16), (-4, 16))),
    Case("rank3_tile_transpose_chain_bf16", (64, 128), ad.bfloat16, ((0, 64), (0, 128)),
         (Tile((8, 64)), Transpose((1, 0, 2, 3))), 128),
)


def _index(case: Case, zero):
    # `zero * 1024` is 0 on the GPU and, as far as the compiler can prove, a multiple of 1024: the
    # traced starts are then as provably tile-aligned as the constants they stand for.
    traced = zero * 1024
    entries = []
    for entry in case.slice:
        if isinstance(entry, tuple):
            start, size = entry
            entries.append(ad.ds(traced + start if case.dynamic else start, size))
        else:
            entries.append(traced + entry if case.dynamic else entry)
    return tuple(entries)


@ad.kernel(grid=(1,))
def load_and_dump(x, dump, CASE: ad.constexpr):
    zero = ad.program_id(0)  # 0, but only known on the GPU: makes starts traced when asked
    buf = ad.smem(dump.shape, x.dtype)
    bar = ad.barrier()
    ad.async_copy(x.at[_index(CASE, zero)], buf, barrier=bar, transforms=CASE.transforms,
                  swizzle=CASE.swizzle)
    bar.wait()
    ad.async_copy(buf, dump)  # the raw shared-memory bytes, swizzled or not
    ad.await_async_copy(0)


@ad.kernel(grid=(1,))
def round_trip(x, y, CASE: ad.constexpr):
    zero = ad.program_id(0)
    buf = ad.smem(CASE.smem_shape, x.dtype)
    bar = ad.barrier()
    view = _index(CASE, zero)
    ad.async_copy(x.at[view], buf, barrier=bar, transforms=CASE.transforms, swizzle=CASE.swizzle)
    bar.wait()
    ad.async_copy(buf, y.at[view], transforms=CASE.transforms, swizzle=CASE.swizzle)
    ad.await_async_copy(0)


def padded_slice(case: Case, x: np.ndarray) -> np.ndarray:
    """x[slice] with squeezed dims removed and zeros wherever the window leaves the array."""
    padded = np.zeros(tuple(e[1] for e in case.slice if isinstance(e, tuple)), x.dtype)
    source, target = [], []
    for dim, entry in enumerate(case.slice):
        if not isinstance(entry, tuple):
            source.append(entry)
            continue
        start, size = entry
        lo, hi = max(start, 0), min(start + size, x.shape[dim])
        source.append(slice(lo, max(lo, hi)))
        target.append(slice(lo - start, max(lo, hi) - start))
    padded[tuple(target)] = x[tuple(source)]
    return padded


def swizzled(raw: np.ndarray, swizzle: int) -> np.ndarray:
    """Bytes as a swizzled TMA load leaves them: byte address A moves to A ^ (((A >> 7) & m) << 4)."""
    flat = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    if not swizzle:
        return flat
    address = np.arange(flat.size)
    target = address ^ (((address >> 7) & (swizzle // 16 - 1)) << 4)
    out = np.empty_like(flat)
    out[target] = flat
    return out


def expected_dump(case: Case, x: np.ndarray) -> np.ndarray:
    return swizzled(apply_chain_array(case.transforms, padded_slice(case, x)), case.swizzle)


def expected_round_trip(case: Case, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """y with the in-bounds part of the slice replaced by x's (stores clip at the edge)."""
    out = y.copy()
    index = []
    for dim, entry in enumerate(case.slice):
        if isinstance(entry, tuple):
            index.append(slice(max(entry[0], 0), min(entry[0] + entry[1], case.shape[dim])))
        else:
            index.append(entry)
    out[tuple(index)] = x[tuple(index)]
    return out
