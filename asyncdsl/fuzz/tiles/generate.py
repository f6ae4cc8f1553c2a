"""Drawing a program: a shape and dtype, the loads of `t` and `u`, a chain of steps, the store of
`t`.  Program i of seed S comes from `random.Random(f"{S}:{i}")` and numpy's generator seeded
with (S, i), so it is the same on every machine and in every process."""

from __future__ import annotations

import random

import numpy as np

from . import numerics as nx
from .builder import Builder
from .program import Output, Program, numpy_dtype
from .steps import draw_step

# (rows, columns): multiples of 128 elements, and small tiles a thread holds whole
SHAPES = (
    (64, 64),
    (128, 32),
    (64, 128),
    (8, 128),
    (32, 64),
    (16, 64),
    (64, 16),
    (128, 8),
    (16, 16),
    (4, 32),
    (2, 64),
    (1, 128),
    (256,),
    (1024,),
    (4, 8),
    (8,),
    (128, 128),
    (1, 16),
)
DTYPES = (("float32", 5), ("bfloat16", 3), ("float16", 2), ("int32", 3))


def _window(b: Builder, starts: tuple[int, ...]) -> str:
    parts = [f"ad.ds({start}, {size})" for start, size in zip(starts, b.shape)]
    if b.chance(0.2):  # a traced start: program_id(0) is 0 in a grid of one
        parts[0] = f"ad.ds(ad.program_id(0) + {starts[0]}, {b.shape[0]})"
    return f"x.at[{', '.join(parts)}]"


def _mask_text(b: Builder) -> tuple[str, np.ndarray]:
    dim = b.rnd.randrange(len(b.shape))
    kind = b.pick(("below", "above", "parity"))
    index = np.indices(b.shape)[dim]
    iota = f"ad.iota({b.shape}, ad.int32, dim={dim})"
    if kind == "below":
        bound = b.rnd.randint(0, b.shape[dim])
        return f"{iota} < {bound}", index < bound
    if kind == "above":
        bound = b.rnd.randint(0, b.shape[dim])
        return f"{iota} >= {bound}", index >= bound
    return f"({iota} % 3) != 1", (index % 3) != 1


def load_t(b: Builder, dtype: str) -> None:
    """`t` from a GMEM window of x (maybe past x's end, maybe masked, `other` there), straight or
    through shared memory (a buffer of its own, or a window of whole column tiles of a wider one)."""
    starts = tuple(b.pick((0, 0, 1, 3)) for _ in b.shape)
    extent = tuple(max(1, start + size + b.pick((0, 0, 2, -1, -5))) for start, size in zip(starts, b.shape))
    x = b.values(extent, dtype)
    b.add_input("x", x)
    window = _window(b, starts)
    other = b.constant(dtype) if b.chance(0.7) else "0"
    loaded = np.full(b.shape, 0, numpy_dtype(dtype))
    loaded[...] = nx.constant(eval(other), dtype)  # noqa: S307 - our own literal
    inside = tuple(slice(0, max(0, min(size, e - s))) for s, size, e in zip(starts, b.shape, extent))
    source = tuple(slice(s, s + max(0, min(size, e - s))) for s, size, e in zip(starts, b.shape, extent))
    loaded[inside] = x[source]
    arguments = f"{window}, other={other}"
    if b.chance(0.35):
        mask, keep = _mask_text(b)
        loaded = np.where(keep, loaded, nx.constant(eval(other), dtype)).astype(loaded.dtype)  # noqa: S307
        arguments = f"{window}, mask={mask}, other={other}"
    if b.chance(0.3):
        staged = b.fresh("staged")
        if len(b.shape) == 2 and b.chance(0.4):
            # one column tile of a buffer of several, tiled (rows, columns): a window of columns
            rows, columns = b.shape
            tiles, k = b.pick((2, 3)), b.rnd.randrange(2)
            b.emit(f"{staged}_all = ad.smem(({rows}, {tiles * columns}), ad.{dtype}, "
                   f"transforms=ad.TileTransform(({rows}, {columns})))",
                   f"{staged} = {staged}_all.at[:, ad.ds({k * columns}, {columns})]")
        else:
            b.emit(f"{staged} = ad.smem({b.shape}, ad.{dtype})")
        b.emit(f"{staged}[...] = ad.load({arguments})", "ad.cta_barrier()")
        b.set_t(f"t = {staged}[...]", loaded, dtype)
    else:
        b.set_t(f"t = ad.load({arguments})", loaded, dtype)


def load_u(b: Builder) -> None:
    """`u`: all of z, a second input of the tile's shape, in a dtype of its own."""
    b.u_dt = b.weighted(DTYPES)
    b.u = b.values(b.shape, b.u_dt)
    b.add_input("z", b.u)
    b.emit("u = ad.load(z)" if b.chance(0.5) else f"u = ad.load(z.at[{', '.join(':' for _ in b.shape)}])")


def store_t(b: Builder) -> None:
    """t to y: y may be smaller than the tile (elements past its end are not written), and a
    mask may leave elements alone."""
    extent = tuple(max(1, size + b.pick((0, 0, 0, -1, -3))) for size in b.shape)
    before = b.poison(extent, numpy_dtype(b.dt))
    after = before.copy()
    written = np.ones(b.shape, bool)
    arguments = f"y.at[{', '.join(f'ad.ds(0, {size})' for size in b.shape)}], t"
    if b.chance(0.3):
        mask, written = _mask_text(b)
        arguments += f", mask={mask}"
    inside = tuple(slice(0, min(size, e)) for size, e in zip(b.shape, extent))
    after[inside] = np.where(written[inside], b.t[inside], before[inside])
    b.outputs.insert(0, Output("y", before, after, what="t"))
    b.emit(f"ad.store({arguments})")


def draw_program(
    name: str,
    rnd: random.Random,
    rng: np.random.Generator,
    exact_only: bool = False,
) -> Program:
    b = Builder(name, rnd, rng, exact_only)
    b.shape = b.pick(SHAPES)
    dtype = b.weighted(DTYPES)
    load_t(b, dtype)
    load_u(b)
    for _ in range(b.rnd.randint(1, 6)):
        draw_step(b)
    store_t(b)
    b.inputs.sort(key=lambda entry: entry[0])  # x, z
    return b.program()


def program_for(seed: int, index: int, exact_only: bool = False) -> Program:
    """Program `index` of `seed`: independent of how many run and in which process.  The model
    meets NaNs and infinities on purpose: numpy's warnings about them are silenced."""
    with np.errstate(all="ignore"):
        return draw_program(
            f"{seed}:{index}",
            random.Random(f"{seed}:{index}"),
            np.random.default_rng((seed, index)),
            exact_only,
        )
