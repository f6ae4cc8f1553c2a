"""The elementwise functions of float32 register tiles, declared once.

Each `TileFunction` says everything the layers need about one function: the `math` op a call
traces into, the PTX instruction that op lowers to (`passes/to_ptx/tile_math.py`), when that
instruction flushes subnormals, the float64 function the interpreter rounds to float32
(`interpret/tile_math.py`), and what the default, `approx=False`, means
(`frontend/tile_functions.py` makes `asyncdsl.<name>` from the entry):

- `EXACT_HARDWARE`: the instruction's form that keeps subnormals (`ex2.approx.f32`), within the
  bound docs/register-tiles.md states;
- `EXACT_COMPOSED`: a composition of tile ops the GPU and the interpreter compute alike
  (`frontend/tile_compositions.py` has one function of the entry's name), accurate to a few ulps.

`approx=True` is always the instruction alone (`.ftz` where `flush` says so), which the
interpreter models as the float64 function rounded to float32, flushing as the instruction does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import math as xmath

EXACT_HARDWARE, EXACT_COMPOSED = "hardware", "composed"
# When the instruction flushes subnormal inputs and results: with approx=True (its `.ftz` form
# then, the form without it otherwise), always (`sin.approx.ftz.f32`: PTX has no other), never
# (`tanh.approx.f32` has no `.ftz` form and keeps subnormals on the H200).
FLUSH_WITH_APPROX, FLUSH_ALWAYS, FLUSH_NEVER = "approx", "always", "never"


@dataclass(frozen=True)
class TileFunction:
    name: str  # asyncdsl.<name>
    op: type[xmath.FloatingPointLikeUnaryMathOperation]  # the `math` op the instruction form traces into
    instruction: str  # PTX's `<instruction>.approx[.ftz].f32`
    reference: Callable[[np.ndarray], np.ndarray]  # in float64, rounded to float32 by the interpreter
    default: str  # EXACT_HARDWARE or EXACT_COMPOSED
    flush: str = FLUSH_WITH_APPROX
    summary: str = ""  # the docstring's first sentence

    def flushes(self, approx: bool) -> bool:
        """Whether the instruction form flushes subnormals (approx: the user's approx=True)."""
        return self.flush == FLUSH_ALWAYS or (self.flush == FLUSH_WITH_APPROX and approx)


TILE_FUNCTIONS: tuple[TileFunction, ...] = (
    TileFunction("exp2", xmath.Exp2Op, "ex2", np.exp2, EXACT_HARDWARE, summary="Elementwise 2^x"),
    TileFunction("log2", xmath.Log2Op, "lg2", np.log2, EXACT_HARDWARE, summary="Elementwise log2(x)"),
    TileFunction("rsqrt", xmath.RsqrtOp, "rsqrt", lambda x: 1.0 / np.sqrt(x), EXACT_HARDWARE,
                 summary="Elementwise 1/sqrt(x)"),
    TileFunction("tanh", xmath.TanhOp, "tanh", np.tanh, EXACT_COMPOSED, FLUSH_NEVER,
                 summary="Elementwise hyperbolic tangent"),
    TileFunction("sin", xmath.SinOp, "sin", np.sin, EXACT_COMPOSED, FLUSH_ALWAYS, summary="Elementwise sine"),
    TileFunction("cos", xmath.CosOp, "cos", np.cos, EXACT_COMPOSED, FLUSH_ALWAYS,
                 summary="Elementwise cosine"),
)

BY_NAME: dict[str, TileFunction] = {f.name: f for f in TILE_FUNCTIONS}
