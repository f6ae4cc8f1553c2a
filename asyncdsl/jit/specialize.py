"""Running a kernel body once with tracer objects to build its `func.func`.

What a specialization knows of each argument that is not a constexpr is its spec: an array's
shape and dtype (`ArraySpec`), or a runtime scalar's kind (`ScalarSpec`), which for an int also
says whether the value is a multiple of 16.  The kernel function takes the arrays first (memrefs),
then the scalars (`index` for ints, `f32` for floats), each in the order of the signature.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Mapping, Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
    f32,
    i64,
)
from xdsl.ir import Block, Region

from asyncdsl.dialects import kernel_attrs as attrs
from asyncdsl.dialects.option_attrs import ArchAttr
from asyncdsl.errors import AsyncDSLError, SourceLocation, TraceError, raising_location, user_location
from asyncdsl.frontend.arrivals import check_arrivals
from asyncdsl.frontend.launch_shape import LaunchShape
from asyncdsl.frontend.refs import GmemRef
from asyncdsl.frontend.roles import check_roles
from asyncdsl.frontend.scalars import FloatScalar, Scalar
from asyncdsl.frontend.tracer import Tracer, tracing
from asyncdsl.ir_locations import to_ir_location
from asyncdsl.jit.specs import ArraySpec, ScalarSpec


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


def _arg_type(spec: ArraySpec | ScalarSpec):
    if isinstance(spec, ArraySpec):
        return MemRefType(spec.dtype.mlir(), list(spec.shape))
    return IndexType() if spec.kind == "int" else f32


def _arg_attributes(spec: ArraySpec | ScalarSpec) -> DictionaryAttr:
    if isinstance(spec, ScalarSpec) and spec.divisor > 1:
        return DictionaryAttr({attrs.ARG_DIVISOR: IntegerAttr(spec.divisor, i64)})
    return DictionaryAttr({})


def trace_kernel(
    body: Callable,
    name: str,
    arg_names: Sequence[str],
    specs: Sequence[ArraySpec | ScalarSpec],
    constexprs: Mapping[str, object],
    launch: LaunchShape,
    definition: SourceLocation | None,
    debug: bool = False,
    profile_events: int | None = None,
) -> ModuleOp:
    """Build the module of one specialization of `body` (`specs[i]` is argument `arg_names[i]`),
    profiled with room for `profile_events` region events per warpgroup when that is given."""
    # Arrays first: their argument index is the kernel parameter and launch argument they are.
    order = sorted(range(len(specs)), key=lambda i: isinstance(specs[i], ScalarSpec))
    arg_types = [_arg_type(specs[i]) for i in order]
    entry = Block(arg_types=arg_types)
    function = func.FuncOp(
        name, (arg_types, []), Region(entry), arg_attrs=ArrayAttr(_arg_attributes(specs[i]) for i in order)
    )
    function.attributes[attrs.KERNEL] = UnitAttr()
    function.attributes[attrs.BLOCK] = DenseArrayBase.from_list(i64, list(launch.block))
    function.attributes[attrs.CLUSTER] = DenseArrayBase.from_list(i64, list(launch.cluster))
    function.attributes[attrs.ARG_NAMES] = ArrayAttr(StringAttr(arg_names[i]) for i in order)
    function.attributes[attrs.ARCH] = ArchAttr(launch.arch)
    if launch.devices > 1:
        function.attributes[attrs.DEVICES] = IntegerAttr(launch.devices, i64)
    if launch.ctas_per_sm > 1:
        function.attributes[attrs.CTAS_PER_SM] = IntegerAttr(launch.ctas_per_sm, i64)
    if debug:
        function.attributes[attrs.DEBUG] = UnitAttr()
    if profile_events is not None:
        function.attributes[attrs.PROFILE] = IntegerAttr(profile_events, i64)
    if definition is not None:
        function.location = to_ir_location(definition)

    arguments: dict[str, object] = {}
    for position, value in zip(order, entry.args):
        arg_name, spec = arg_names[position], specs[position]
        if isinstance(spec, ArraySpec):
            arguments[arg_name] = GmemRef(value, arg_name, spec.shape, spec.dtype)
        else:
            arguments[arg_name] = Scalar(value) if spec.kind == "int" else FloatScalar(value)
    tracer = Tracer(entry, launch, profiling=profile_events is not None)
    with tracing(tracer):
        try:
            result = body(**arguments, **constexprs)
        except AsyncDSLError as error:
            # Kernel code may raise the project's errors itself (a constexpr it cannot take):
            # give them the line that raised them, or, raised in the library's kernels, the
            # user's line that called for the kernel.
            raise error.at(raising_location(error) or user_location()) from None
        except Exception as error:  # noqa: BLE001 - any other failure of the kernel's Python
            # A TypeError or a ZeroDivisionError of kernel code run on a constexpr it cannot take
            # (BK=0, BN=None) is the user's error too: name the kernel line that raised it; the
            # original stays chained for a bug inside asyncdsl itself.
            raise TraceError(f"{type(error).__name__} while tracing kernel {name}: {error}{_hint(error)}",
                             raising_location(error) or definition) from error
        tracer.finish()
        check_roles(entry, launch)
        check_arrivals(entry, launch)
        if result is not None:
            raise TraceError(
                f"kernel {name} returned {type(result).__name__}; kernels write their outputs "
                "into array arguments and return nothing",
                _return_statement(body) or definition,
            )
        tracer.emit(func.ReturnOp(), definition)
    return ModuleOp([function])


def _hint(error: Exception) -> str:
    """What a failure of kernel code most likely means, where the error alone names internals: an
    attribute of a traced scalar asked for (`x.at[...]` with a number passed for x)."""
    if isinstance(error, AttributeError) and isinstance(getattr(error, "obj", None), (Scalar, FloatScalar)):
        return (f"; a traced scalar (an int or float argument of the kernel, or arithmetic on one) has no "
                f"{error.name!r}: where an array was meant, pass an array for that argument")
    if isinstance(error, TypeError) and "does not support ufuncs" in str(error):
        return ("; numpy's functions do not run on register tiles: asyncdsl has exp, log, exp2, log2, "
                "sqrt, rsqrt, tanh, sin, cos, maximum, minimum, where and fma, and tiles have sum, max, "
                "min, mean, argmax, argmin, any and all")
    return ""
