"""Random register-tile programs for differential tests: a hypothesis strategy that draws a
kernel of one warpgroup (loads of a window in any register layout, straight from GMEM or
through shared memory, swizzled or tiled; elementwise math, reductions over any axes and their
broadcasts back, relayouts, round trips through shared memory, `ad.registers` in loops, iota
masks, integer and float8 casts, integer division, modulo and shifts, gathers and scatters by
computed index, a second tile meeting the first) as Python source, with a numpy model of what it
computes that shares no code with asyncdsl.

Inputs are small integers and every step keeps the values integers of at most a few thousand, so
float sums are exact in any order and the model must match bit for bit.  A program either
compiles, assembles and computes what the model says, or is refused with an `AsyncDSLError`
naming a line of its own source (a layout that cannot hold the shape, two given layouts meeting,
a reduction the layout cannot make): anything else is a bug.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

SHAPES = ((64, 128), (8, 256), (1, 1024), (128, 64), (2, 512), (64, 64), (4, 32), (64, 8), (3, 128), (16, 16),
          (4, 8), (3, 5))  # the last hold fewer elements than the warpgroup has threads
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "int32": np.int32,
          "int8": np.int8}
LAYOUTS = ("None", "ad.WGMMA", "ad.strided(1)", "ad.strided(2)", "ad.strided(4)", "ad.strided(8)")
ROW_LAYOUTS = ("ad.WGMMA_ROW", "ad.WGMMA_COL", "ad.strided(1)", "ad.strided(2)")
# Every step ends by clamping, so values stay integers whose sums are exact in float32.
CLAMP = ("t = ad.minimum(ad.maximum(t, -1000.0), 1000.0)", "t = np.clip(t, -1000, 1000).astype(np.float32)")
# Steps that draw nothing: the kernel's lines and the model's.
FIXED_STEPS = {
    "abs": (["t = -abs(t)"], ["t = -np.abs(t)"]),
    "where": (["t = ad.where(t >= 1.0, t, 0.0 - t)"], ["t = np.where(t >= 1, t, -t).astype(np.float32)"]),
    "whole": (["t = t - t.min()"], ["t = t - t.min()"]),
    "bf16": (["t = t.astype(ad.bfloat16).astype(ad.float32)"],
             ["t = t.astype(ml_dtypes.bfloat16).astype(np.float32)"]),
    "ints": (["u = t.astype(ad.int32)", "t = ((u & 7) ^ (u | 2)).astype(ad.float32)"],
             ["u = t.astype(np.int32)", "t = ((u & 7) ^ (u | 2)).astype(np.float32)"]),
    "fp8": (["t = ad.minimum(ad.maximum(t, -16.0), 16.0).astype(ad.float8_e4m3fn).astype(ad.float32)"],
            ["t = np.clip(t, -16, 16).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)"]),
    "row_totals": (["t = t - t.sum(axis=1)[:, None]"],
                   ["t = t - t.sum(axis=1, dtype=np.float64).astype(np.float32)[:, None]"]),
    "column_peaks": (["t = t * t.max(axis=0)[None, :]"], ["t = t * t.max(axis=0)[None, :]"]),
    "arg_peaks": (["t = t + (t.argmax(axis=1)[:, None] - t.argmin(axis=0)[None, :]).astype(ad.float32)"],
                  ["t = t + (np.argmax(t, axis=1)[:, None]"
                   " - np.argmin(t, axis=0)[None, :]).astype(np.float32)"]),
}


@dataclass
class TileProgram:
    """A kernel `case(x, y, o0, ...)` as source, and numpy statements computing y, o0, ... from x."""

    rows: int
    columns: int
    x_columns: int  # fewer than `columns`: the window runs past the array's end (masked, `other`)
    dtype: str
    source: list[str] = field(default_factory=list)
    model: list[str] = field(default_factory=list)
    outputs: list[tuple[int, ...]] = field(default_factory=list)  # shapes of o0, o1, ...

    def text(self) -> str:
        params = ", ".join(["x", "y", *(f"o{i}" for i in range(len(self.outputs)))])
        body = "".join(f"    {line}\n" for line in self.source)
        return f"import asyncdsl as ad\n\n\n@ad.kernel(grid=(1,))\ndef case({params}):\n{body}"

    def kernel(self, path: Path):
        """The program's kernel, imported from `path` (tracing reads its source lines there)."""
        path.write_text(self.text())
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.case

    def arrays(self, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """A random input of small integers and NaN-poisoned outputs (y first)."""
        x = np.random.default_rng(seed).integers(-8, 9, (self.rows, self.x_columns)).astype(
            DTYPES[self.dtype])
        shapes = [(self.rows, self.x_columns), *self.outputs]
        return x, [np.full(shape, np.nan, np.float32) for shape in shapes]

    def expected(self, x: np.ndarray) -> list[np.ndarray]:
        scope = {"np": np, "ml_dtypes": ml_dtypes, "x": x}
        for statement in self.model:
            exec(statement, scope)  # noqa: S102 - the model's own statements
        return [scope["y"], *(scope[f"o{i}"] for i in range(len(self.outputs)))]


@st.composite
def tile_programs(draw) -> TileProgram:
    rows, columns = draw(st.sampled_from(SHAPES))
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    ragged = draw(st.sampled_from([0, 0, 0, 1, 3, 8, 17]))
    program = TileProgram(rows, columns, max(1, columns - ragged), dtype)
    src, model = program.source, program.model

    def holds(layout: str) -> bool:
        if layout == "ad.WGMMA":
            return rows % 64 == 0 and columns % 8 == 0
        if layout.startswith("ad.strided"):
            return rows * columns % (128 * int(layout[-2])) == 0
        return True

    fitting = [layout for layout in LAYOUTS if holds(layout)]

    def layout() -> str:  # mostly one that holds the shape; now and then any, for the errors
        return draw(st.sampled_from(fitting)) if draw(st.integers(0, 9)) else draw(st.sampled_from(LAYOUTS))

    given = layout()
    other = draw(st.sampled_from([0, 2]))
    start = draw(st.sampled_from(["0", "ad.program_id(0)"]))  # a traced start is 0 too: one CTA
    window = f"x.at[ad.ds({start}, {rows}), ad.ds(0, {columns})]"
    load = f"ad.load({window}, layout={given}, other={other})"
    def padded(name: str) -> str:  # the model of the window loaded with `other` past the array
        return f"{name} = np.full(({rows}, {columns}), {other}, np.float32); {name}[:, :x.shape[1]] = x"

    model.append(padded("t"))
    if draw(st.integers(0, 2)) == 0:
        width = columns * np.dtype(DTYPES[dtype]).itemsize
        options = [""] + [f", swizzle={s}" for s in (128, 64) if width == s]
        if width % 128 == 0 and np.dtype(DTYPES[dtype]).itemsize == 2 and rows % 8 == 0:
            options.append(", transforms=(ad.TileTransform((8, 64)),), swizzle=128")
        src += [f"staged = ad.smem(({rows}, {columns}), ad.{dtype}{draw(st.sampled_from(options))})",
                f"staged[...] = {load}", "ad.cta_barrier()",
                draw(
                    st.sampled_from(["t = staged[...]", f"t = ad.load(staged.at[:, :], layout={layout()})"]))]
    else:
        src.append(f"t = {load}")
    src.append("t = t.astype(ad.float32)")
    strided = given.startswith("ad.strided") and rows > 1  # reduces over all its axes only
    for step in range(draw(st.integers(1, 6))):
        kinds = ["arith", "abs", "minimum", "where", "whole", "smem", "relayout", "bf16", "loop", "iota",
                 "ints", "fp8", "two_tiles", "masked_tile", "half_arith", "int_ops", "gather", "scatter_out"]
        if not strided or draw(st.integers(0, 9)) == 0:
            kinds += ["row_totals", "column_peaks", "arg_peaks", "row_minima_via_smem", "row_peaks_out"]
        kind = draw(st.sampled_from(kinds))
        if kind in FIXED_STEPS:
            src += FIXED_STEPS[kind][0]
            model += FIXED_STEPS[kind][1]
        elif kind == "arith":
            a, b = draw(st.integers(-3, 3)), draw(st.integers(-4, 4))
            src.append(f"t = t * {a} + {b}")
            model.append(f"t = t * np.float32({a}) + np.float32({b})")
        elif kind == "minimum":
            c = draw(st.integers(-2, 2))
            src.append(f"t = ad.minimum({c}.0, t)")
            model.append(f"t = np.minimum(np.float32({c}), t)")
        elif kind == "smem":
            src += [f"spill{step} = ad.smem(({rows}, {columns}), ad.float32)", f"spill{step}[...] = t",
                    "ad.cta_barrier()", f"t = spill{step}[...]", "ad.cta_barrier()"]
        elif kind == "relayout":
            target = draw(st.sampled_from([f for f in fitting if f != "None"] or ["ad.WGMMA"]))
            src.append(f"t = t.to_layout({target})")
            strided = strided or (target.startswith("ad.strided") and rows > 1)
        elif kind == "loop":
            count = draw(st.integers(1, 3))
            src += [f"acc = ad.registers(({rows}, {columns}), ad.float32, "
                    f"layout={draw(st.sampled_from(['None', given]))})",
                    f"acc[...] = ad.zeros(({rows}, {columns}), ad.float32)",
                    f"for i in ad.range({count}):", "    acc[...] = acc[...] + t", "t = acc[...]"]
            model.append(f"t = t * np.float32({count})")
        elif kind == "iota":
            dim, bound = draw(st.integers(0, 1)), draw(st.integers(0, max(rows, columns)))
            src.append(f"t = ad.where(ad.iota(({rows}, {columns}), ad.int32, dim={dim}) < {bound}, t, 1.0)")
            model.append(f"t = np.where(np.indices(({rows}, {columns}))[{dim}] < {bound}, t, np.float32(1))")
        elif kind == "two_tiles":
            src += [f"u = ad.load({window}, layout={draw(st.sampled_from(['None', given]))}, other={other})",
                    "t = ad.maximum(t, u.astype(ad.float32))"]
            model += [padded("u"), "t = np.maximum(t, u)"]
        elif kind == "masked_tile":
            bound, fill = draw(st.integers(0, columns)), draw(st.integers(-3, 3))
            mask = f"ad.iota(({rows}, {columns}), ad.int32, dim=1) < {bound}"
            src += [f"u = ad.load({window}, layout={draw(st.sampled_from(['None', given]))}, "
                    f"mask={mask}, other={fill})",
                    "t = t + u.astype(ad.float32)"]
            model += [f"u = np.full(({rows}, {columns}), {fill}, np.float32)",
                      f"u[:, :min({bound}, x.shape[1])] = x[:, :{bound}]", "t = t + u"]
        elif kind == "half_arith":  # rounded after every op, as numpy's 16-bit floats do
            half, numpy_half = draw(
                st.sampled_from([("bfloat16", "ml_dtypes.bfloat16"), ("float16", "np.float16")]))
            a, b = draw(st.integers(-3, 3)), draw(st.integers(-9, 9))
            src.append(f"t = (t.astype(ad.{half}) * {a} + {b}).astype(ad.float32)")
            model.append(
                f"t = ((t.astype({numpy_half}) * {numpy_half}({a})) + {numpy_half}({b})).astype(np.float32)")
        elif kind == "int_ops":  # floor division and modulo by either sign, shifts, ~
            # by constants: shifts, masks and multiply-high quotients of either sign
            d = draw(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 64])) * draw(st.sampled_from([1, -1]))
            k = draw(st.integers(0, 3))
            ops = f"((u // {d}) + (u % {d}) * 3 - ((u << {k}) >> 1) + (~u & 7))"
            src += ["u = t.astype(ad.int32)", f"t = {ops}.astype(ad.float32)"]
            model += ["u = t.astype(np.int32)", f"t = {ops}.astype(np.float32)"]
        elif kind == "gather":  # x read at computed indices, some of them outside it
            a, b, fill = draw(st.integers(1, 5)), draw(st.integers(0, 7)), draw(st.integers(-3, 3))
            r = f"(ad.iota(({rows}, {columns}), ad.int32, dim=0) * {a} + {b}) % {rows + 2} - 1"
            c = f"(ad.iota(({rows}, {columns}), ad.int32, dim=1) * {a} + {b}) % {columns + 2} - 1"
            src.append(f"t = t + ad.load(x.at[{r}, {c}], other={fill}).astype(ad.float32)")
            model += [f"gr, gc = np.indices(({rows}, {columns}))",
                      f"gr, gc = (gr * {a} + {b}) % {rows + 2} - 1, (gc * {a} + {b}) % {columns + 2} - 1",
                      "inside = (gr >= 0) & (gr < x.shape[0]) & (gc >= 0) & (gc < x.shape[1])",
                      "gathered = x[np.where(inside, gr, 0), np.where(inside, gc, 0)].astype(np.float32)",
                      f"t = t + np.where(inside, gathered, np.float32({fill}))"]
        # t written to an output at permuted places (rows reversed, columns rotated)
        elif kind == "scatter_out":
            out, shift = len(program.outputs), draw(st.integers(0, columns - 1))
            program.outputs.append((rows, columns))
            r = f"{rows - 1} - ad.iota(({rows}, {columns}), ad.int32, dim=0)"
            c = f"(ad.iota(({rows}, {columns}), ad.int32, dim=1) + {shift}) % {columns}"
            src.append(f"ad.store(o{out}.at[{r}, {c}], t)")
            model += [f"o{out} = np.empty(({rows}, {columns}), np.float32)",
                      f"sr, sc = np.indices(({rows}, {columns}))",
                      f"o{out}[{rows - 1} - sr, (sc + {shift}) % {columns}] = t"]
        elif kind == "row_minima_via_smem":
            src += [f"minima{step} = ad.smem(({rows},), ad.float32)", f"minima{step}[...] = t.min(axis=1)",
                    "ad.cta_barrier()", f"t = t + minima{step}[...][:, None]", "ad.cta_barrier()"]
            model.append("t = t + t.min(axis=1)[:, None]")
        elif kind == "row_peaks_out":
            out = len(program.outputs)
            program.outputs.append((rows,))
            src.append(
                f"ad.store(o{out}.at[:], t.max(axis=1).to_layout({draw(st.sampled_from(ROW_LAYOUTS))}) * 2)")
            model.append(f"o{out} = t.max(axis=1) * 2")
        src.append(CLAMP[0])
        model.append(CLAMP[1])
    store = f"y.at[ad.ds({start}, {rows}), ad.ds(0, {columns})]"
    ending = draw(st.sampled_from(["plain", "masked", "when"]))
    if ending == "masked":
        bound = draw(st.integers(0, rows))
        src.append(f"ad.store({store}, t, mask=ad.iota(({rows}, {columns}), ad.int32, dim=0) < {bound})")
        model.append(f"t[{bound}:] = np.nan")
    elif ending == "when":
        src += ["with ad.when(ad.program_id(0) == 0):", f"    ad.store({store}, t)"]
    else:
        src.append(f"ad.store({store}, t)")
    model.append("y = t[:, :x.shape[1]].copy()")
    return program
