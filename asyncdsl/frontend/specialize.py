"""Running a kernel body once with tracer objects to build its `func.func`."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, MemRefType, ModuleOp, StringAttr, UnitAttr, i64
from xdsl.ir import Block, Region

from asyncdsl import dtypes
from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.option_attrs import ArchAttr
from asyncdsl.errors import ArgumentError, SourceLocation, TraceError
from asyncdsl.frontend.refs import GmemRef
from asyncdsl.frontend.tracer import LaunchShape, Tracer, tracing
from asyncdsl.ir_locations import to_ir_location


@dataclass(frozen=True)
class ArraySpec:
    """What tracing needs to know of an array argument: its shape and element type."""

    shape: tuple[int, ...]
    dtype: dtypes.DType

    @staticmethod
    def of(array: object, name: str) -> ArraySpec:
        if isinstance(array, ArraySpec):
            return array
        refuse_python_numbers(name, array)
        shape, dtype = getattr(array, "shape", None), getattr(array, "dtype", None)
        if shape is None or dtype is None:
            raise TraceError(f"argument {name!r} must be an array (with .shape and .dtype), got {type(array).__name__}")
        shape = tuple(int(d) for d in shape)
        if not shape:
            raise TraceError(f"argument {name!r} is a 0-d array; kernels take arrays of rank >= 1")
        try:
            return ArraySpec(shape, dtypes.as_dtype(dtype))
        except ArgumentError as error:
            raise TraceError(f"argument {name!r}: {error.message}") from None


def _return_statement(body: Callable) -> SourceLocation | None:
    """The line of the first `return <value>` in `body`'s source (for the error that names it)."""
    try:
        lines, first = inspect.getsourcelines(body)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            return SourceLocation(body.__code__.co_filename, first + node.lineno - 1)
    return None


def refuse_python_numbers(name: str, value: object) -> None:
    """A Python number where the kernel takes an array: say how to pass it instead."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise TraceError(
            f"argument {name!r} is a Python {type(value).__name__}, but the kernel takes an array there; "
            f"annotate the parameter `{name}: asyncdsl.constexpr` to compile with its value"
        )


def trace_kernel(
    body: Callable,
    name: str,
    array_names: Sequence[str],
    arrays: Sequence[ArraySpec],
    constexprs: Mapping[str, object],
    launch: LaunchShape,
    definition: SourceLocation | None,
    debug: bool = False,
) -> ModuleOp:
    """Build the module of one specialization of `body`."""
    arg_types = [MemRefType(a.dtype.mlir(), list(a.shape)) for a in arrays]
    entry = Block(arg_types=arg_types)
    function = func.FuncOp(name, (arg_types, []), Region(entry))
    function.attributes[attrs.KERNEL] = UnitAttr()
    function.attributes[attrs.BLOCK] = DenseArrayBase.from_list(i64, list(launch.block))
    function.attributes[attrs.CLUSTER] = DenseArrayBase.from_list(i64, list(launch.cluster))
    function.attributes[attrs.ARG_NAMES] = ArrayAttr(StringAttr(n) for n in array_names)
    function.attributes[attrs.ARCH] = ArchAttr(launch.arch)
    if debug:
        function.attributes[attrs.DEBUG] = UnitAttr()
    if definition is not None:
        function.location = to_ir_location(definition)

    refs = {
        arg_name: GmemRef(value, arg_name, spec.shape, spec.dtype)
        for arg_name, value, spec in zip(array_names, entry.args, arrays)
    }
    tracer = Tracer(entry, launch)
    with tracing(tracer):
        result = body(**refs, **constexprs)
        tracer.finish()
        if result is not None:
            raise TraceError(
                f"kernel {name} returned {type(result).__name__}; kernels write their outputs "
                "into array arguments and return nothing",
                _return_statement(body) or definition,
            )
        tracer.emit(func.ReturnOp(), definition)
    return ModuleOp([function])
