"""Interpreting register-tile ops built directly as IR, one (or a few) at a time: each op on
exactly the tiles a test picks, with the function sets registered as `interpret/grid.py` does."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, VectorType
from xdsl.interpreter import Interpreter
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.ir import Block, Region

from asyncdsl import dtypes
from asyncdsl.interpret.scalars import FloatArithFunctions, IndexArithFunctions
from asyncdsl.interpret.state import Cta, Launch
from asyncdsl.interpret.tile_math import TileMathFunctions
from asyncdsl.interpret.tiles import TileFunctions

LINE = 4242  # the source line the ops built here carry
BOOL = np.dtype(np.bool_)


def mlir(dtype: np.dtype):
    return dtypes.BOOL.mlir() if np.dtype(dtype) == BOOL else dtypes.as_dtype(dtype).mlir()


def run_op(build, *inputs: np.ndarray, result: np.dtype | None = None):
    """Interpret the op `build(*block arguments, result type)` makes (or the ops: the last one's
    result is returned) on tile `inputs`; the result type has `result`'s element type (by
    default the first input's)."""
    shape = inputs[0].shape
    block = Block(arg_types=[VectorType(mlir(a.dtype), shape) for a in inputs])
    ops = build(*block.args, VectorType(mlir(result if result is not None else inputs[0].dtype), shape))
    ops = ops if isinstance(ops, list) else [ops]
    for op in ops:
        op.location = FileLineColLoc(StringAttr("kernel.py"), IntAttr(LINE), IntAttr(0))
    block.add_ops([*ops, func.ReturnOp(*ops[-1].results)])
    function = func.FuncOp("f", ([a.type for a in block.args], [r.type for r in ops[-1].results]),
                           Region(block))
    interpreter = Interpreter(ModuleOp([function]), index_bitwidth=32)
    for stateless in (ArithFunctions(), FloatArithFunctions(), FuncFunctions()):
        interpreter.register_implementations(stateless)
    interpreter.register_implementations(IndexArithFunctions(), override=True)
    warpgroup = Cta(Launch("k", (1, 1, 1), (1, 1, 1), 1, 0, ()), (0, 0, 0), 0, []).warpgroups[0]
    interpreter.register_implementations(TileFunctions(warpgroup))
    interpreter.register_implementations(TileMathFunctions(warpgroup), override=True)
    (out,) = interpreter.call_op("f", inputs)
    return out
