"""asyncdsl kernels as torch operators, for models that run under `torch.compile` and CUDA graphs.

    import asyncdsl.torch

    copy_tiles = asyncdsl.torch.custom_op(
        tile_copy, "my_models::copy_tiles", outputs={"dst": lambda src: torch.empty_like(src)}, BM=64, BN=64
    )
    y = copy_tiles(x)                       # eager, or inside a torch.compile(fullgraph=True) model

`custom_op` registers the kernel with `torch.library` (a schema, an implementation that
launches it, and a fake implementation that only makes the outputs), so the compiler traces
through the call without a graph break and never looks inside.  The operator's parameters are the
kernel's runtime parameters in order, without the `outputs`: arrays become `Tensor`, parameters
annotated `int` or `float` become scalars (with their defaults).  Constexprs are fixed when
the operator is made.  Every array the kernel writes is an output or named in `mutates`: torch
takes any other for one the call only reads.
Launches run on torch's current stream, so calls inside `torch.cuda.graph(...)` are captured.
On CPU tensors the operator runs the kernel in the interpreter under `ASYNCDSL_INTERPRET=1`
(and is refused otherwise, as any kernel call on host arrays is).

`library_op` registers a function of the kernel library instead (one that picks its kernel per
shape and makes its outputs, as `asyncdsl.kernels.attention` does) under a schema written out;
`asyncdsl.ops` builds its differentiable operators from it, calling the library through
`library_call`, which hands CPU tensors over as the numpy arrays the interpreter runs on.

torch is imported by this module and `asyncdsl.ops` only: `import asyncdsl` never imports it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from asyncdsl.config import knobs
from asyncdsl.errors import ArgumentError, SourceLocation, user_location
from asyncdsl.jit.kernel import Kernel

_SCHEMA_TYPES = {"int": "int", "float": "float"}


def custom_op(
    kernel: Kernel,
    name: str,
    *,
    outputs: Mapping[str, Callable[..., torch.Tensor]] | None = None,
    mutates: Sequence[str] = (),
    **constexprs: Any,
) -> Callable[..., Any]:
    """Register `kernel` as the torch operator `name` ("namespace::operator") and return it.

    `outputs` maps each array parameter the operator allocates (and returns, in this order) to a
    function that makes it: it receives the operator's arguments by name and returns a new
    tensor (`lambda x, **_: torch.empty_like(x)`); it also runs on the fake tensors
    `torch.compile` traces with.  `mutates` names the input arrays the kernel writes in place.
    `constexprs` gives every constexpr parameter its value (one with a default may be left out)."""
    location = user_location()
    if not isinstance(kernel, Kernel):
        raise ArgumentError(f"custom_op takes an @asyncdsl.kernel, not {type(kernel).__qualname__}", location)
    if isinstance(mutates, str):  # its letters would be taken for names, each of them an array mutated
        raise ArgumentError(f"custom_op {name!r}: mutates takes a sequence of names, not the string "
                            f"{mutates!r} (write mutates=({mutates!r},))", location)
    outputs = dict(outputs or {})
    arrays = [n for n in kernel.runtime_names if n not in kernel.scalar_kinds]
    for what, names in (("outputs", outputs), ("mutates", mutates)):
        for unknown in [n for n in names if n not in arrays]:
            raise ArgumentError(f"custom_op {name!r}: {what} names {unknown!r}, which is not an array "
                                f"parameter of kernel {kernel.__name__} (its arrays: {', '.join(arrays)}; "
                                "scalars must be annotated int or float)", location)
    if set(outputs) & set(mutates):
        raise ArgumentError(f"custom_op {name!r}: {sorted(set(outputs) & set(mutates))} are both outputs "
                            "(made by the operator) and mutated inputs", location)
    if not outputs and not mutates:
        # The schema would promise a call without effect, which torch.compile drops from the graph
        # (eager mode still ran it, so the two differed silently).
        raise ArgumentError(f"custom_op {name!r}: the operator neither returns nor mutates an array, so "
                            f"torch takes its calls for ones without effect (torch.compile drops them); "
                            f"name the arrays kernel {kernel.__name__} makes in outputs and those it writes "
                            "in place in mutates", location)
    constexpr_defaults = {n: v for n, v in kernel.signature.defaults.items() if n in kernel.constexpr_names}
    required = set(kernel.constexpr_names) - set(constexpr_defaults)
    if not required <= set(constexprs) <= set(kernel.constexpr_names):
        raise ArgumentError(f"custom_op {name!r}: kernel {kernel.__name__} has constexprs "
                            f"({', '.join(kernel.constexpr_names) or 'none'}), given "
                            f"({', '.join(constexprs) or 'none'}); the operator fixes every one "
                            "without a default", location)
    constexprs = {**constexpr_defaults, **constexprs}
    inputs = tuple(n for n in kernel.runtime_names if n not in outputs)
    for allocate in outputs.values():
        _check_allocator(name, allocate, inputs, location)
    output_names = tuple(outputs)
    signature = _operator_signature(kernel, inputs)
    schema = _schema(kernel, signature, output_names, tuple(mutates))

    def arguments(args: tuple, kwargs: dict) -> dict[str, Any]:
        # torch hands keyword-only arguments over by keyword, and may leave defaults out
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def made_outputs(values: dict[str, Any]) -> dict[str, torch.Tensor]:
        return {output: allocate(**values) for output, allocate in outputs.items()}

    def returned(made: dict[str, torch.Tensor]) -> Any:
        if not output_names:
            return None
        if len(output_names) == 1:
            return made[output_names[0]]
        return tuple(made[output] for output in output_names)

    def launch(*args: Any, **kwargs: Any) -> Any:
        values = arguments(args, kwargs)
        made = made_outputs(values)
        # Interpreted, a call can afford to check that the inputs the schema calls read-only are
        # unchanged: torch.compile would reorder or drop a write to one, silently.
        kept = _read_only_inputs(values, made, mutates) if knobs.interpret else {}
        kernel(**values, **made, **constexprs)
        for input_name, before in kept.items():
            if not _same_bytes(values[input_name], before):
                raise ArgumentError(f"operator {name!r}: kernel {kernel.__name__} wrote its input "
                                    f"{input_name!r}, which the operator takes for read-only: name it in "
                                    "mutates (torch.compile may reorder or drop a write it is not told of)",
                                    user_location())
        return returned(made)

    def fake(*args: Any, **kwargs: Any) -> Any:
        return returned(made_outputs(arguments(args, kwargs)))

    identity = ("custom_op", kernel.fn.__module__, kernel.fn.__qualname__, schema, output_names,
                repr(sorted(constexprs.items())))
    return _register(name, launch, schema, fake, tuple(mutates), identity, location)


def library_op(name: str, function: Callable[..., Any], *, schema: str, fake: Callable[..., Any]) -> Any:
    """Register `function` as the torch operator `name` ("namespace::operator", schema as
    "(Tensor x, float eps) -> (Tensor, Tensor)") and return it.  `function` takes the operator's
    arguments and returns new tensors, never its inputs or views of them; `fake` takes the same
    arguments and makes outputs of the same shapes, dtypes and devices without computing, which is
    all `torch.compile` runs while it traces.  The operator (a `torch.library.CustomOpDef`) takes
    an autograd formula by `register_autograd`."""
    identity = ("library_op", function.__module__, function.__qualname__, schema)
    return _register(name, function, schema, fake, (), identity, user_location())


def check_not_0d(what: str, **tensors: torch.Tensor) -> None:
    """Refuse, at the caller's line, a 0-d tensor where operator `what` takes rows along the last
    axis (every other axis flattened)."""
    for name, tensor in tensors.items():
        if tensor.dim() == 0:
            raise ArgumentError(f"{what} takes {name} of rows along its last axis, got a 0-d tensor",
                                user_location())


def library_call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)` for a function of the kernel library, whose GPU tensors it
    launches on and whose numpy arrays it interprets: CPU tensors among the arguments go in as
    numpy arrays (sharing their memory) and the numpy arrays it returns (alone or in a tuple)
    come back as CPU tensors, so an operator runs the same code on either device."""
    result = function(*(_host(a) for a in args), **{key: _host(a) for key, a in kwargs.items()})
    if isinstance(result, tuple):
        return tuple(_tensor(r) for r in result)
    return _tensor(result)


# torch dtypes numpy has only through ml_dtypes: handed over as integers of their width.
_CARRIERS = {torch.bfloat16: torch.int16, torch.float8_e4m3fn: torch.int8, torch.float8_e5m2: torch.int8}


def _host(value: Any) -> Any:
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
        return value
    value = value.detach()
    if value.dtype in _CARRIERS:
        import ml_dtypes

        return value.view(_CARRIERS[value.dtype]).numpy().view(getattr(ml_dtypes, str(value.dtype)[6:]))
    return value.numpy()


def _tensor(value: Any) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    for dtype, carrier in _CARRIERS.items():
        if value.dtype.name == str(dtype)[6:]:
            return torch.from_numpy(value.view(str(carrier)[6:])).view(dtype)
    return torch.from_numpy(value)


# Each operator registered here, by name: what made it (`_register`).
_REGISTERED: dict[str, tuple] = {}


def _register(name: str, implementation: Callable[..., Any], schema: str, fake: Callable[..., Any],
              mutates: tuple[str, ...], identity: tuple, location: SourceLocation | None) -> Any:
    """`torch.library.custom_op`, refusing a name taken by another operator: torch replaces the
    implementation an existing name dispatches to, so every handle of the earlier operator would
    run the new one silently.  The same function registered again (a module reloaded, a notebook
    cell run again) replaces itself, as torch allows."""
    known = _REGISTERED.get(name)
    if known != identity and (known is not None or _exists(name)):
        raise ArgumentError(f"torch operator {name!r} exists already; registering another under its name "
                            "would make calls of the first run this one: give this one a name of its own",
                            location)
    operator = torch.library.custom_op(name, implementation, mutates_args=mutates, schema=schema)
    operator.register_fake(fake)
    _REGISTERED[name] = identity
    return operator


def _exists(name: str) -> bool:
    namespace, _, operator = name.partition("::")
    try:
        getattr(getattr(torch.ops, namespace), operator)
    except (AttributeError, RuntimeError):
        return False
    return True


def _read_only_inputs(values: dict[str, Any], made: dict[str, torch.Tensor],
                      mutates: Sequence[str]) -> dict[str, torch.Tensor]:
    """A copy of each CPU tensor among `values` that the call may not write: not mutated, and
    sharing no storage with an array it writes (`copy(x, out=x)` changes x through out)."""
    written = [t for t in [*made.values(), *(values[n] for n in mutates)] if isinstance(t, torch.Tensor)]
    storages = {t.untyped_storage().data_ptr() for t in written}
    return {n: value.clone() for n, value in values.items()
            if n not in mutates and isinstance(value, torch.Tensor) and value.device.type == "cpu"
            and value.untyped_storage().data_ptr() not in storages}


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit (NaNs are equal to themselves here, as no value comparison has them)."""
    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def _operator_signature(kernel: Kernel, inputs: tuple[str, ...]) -> inspect.Signature:
    """The operator's parameters as Python declares them: the kernel's inputs in order, keyword-
    only ones still keyword-only, scalars with the kernel's defaults where a schema can write them
    (an int or float default, followed by no positional parameter without one)."""
    declared = inspect.signature(kernel.fn).parameters
    parameters: list[inspect.Parameter] = []
    defaults_allowed = True  # walking backwards: no positional parameter without a default after
    for input_name in reversed(inputs):
        parameter = declared[input_name]
        kind = kernel.scalar_kinds.get(input_name)
        default = parameter.default
        keyword = parameter.kind is parameter.KEYWORD_ONLY
        if not (kind and (keyword or defaults_allowed) and _schema_default(kind, default) is not None):
            default = inspect.Parameter.empty
        if not keyword and default is inspect.Parameter.empty:
            defaults_allowed = False
        parameters.insert(0, inspect.Parameter(input_name, parameter.kind, default=default))
    return inspect.Signature(parameters)


def _schema_default(kind: str, value: Any) -> str | None:
    """`value` as a schema writes the default of an `int` or `float` parameter, None if it cannot."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        if kind == "int" and float(value) == int(value):
            return str(int(value))
        if kind == "float" and np.isfinite(float(value)):
            return repr(float(value))
    return None


def _schema(kernel: Kernel, signature: inspect.Signature, outputs: tuple[str, ...],
            mutates: tuple[str, ...]) -> str:
    """The operator's schema: `(Tensor x, Tensor(a!) y, int n, *, float eps=1e-05) -> Tensor`."""
    aliases = iter("abcdefghijklmnopqrstuvwxyz")
    parameters = []
    for parameter in signature.parameters.values():
        input_name = parameter.name
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in parameters:
            parameters.append("*")
        kind = kernel.scalar_kinds.get(input_name)
        if kind is not None:
            default = ("" if parameter.default is parameter.empty
                       else f"={_schema_default(kind, parameter.default)}")
            parameters.append(f"{_SCHEMA_TYPES[kind]} {input_name}{default}")
        elif input_name in mutates:
            parameters.append(f"Tensor({next(aliases)}!) {input_name}")
        else:
            parameters.append(f"Tensor {input_name}")
    results = ("()" if not outputs else "Tensor" if len(outputs) == 1
               else f"({', '.join(['Tensor'] * len(outputs))})")
    return f"({', '.join(parameters)}) -> {results}"


def _check_allocator(name: str, allocate: Any, inputs: tuple[str, ...],
                     location: SourceLocation | None) -> None:
    """An output's allocator must take the operator's arguments by name (as a grid function does)."""
    if not callable(allocate):
        raise ArgumentError(f"custom_op {name!r}: an output's value must be a function that makes the "
                            f"tensor, not {type(allocate).__qualname__}", location)
    try:
        signature = inspect.signature(allocate)
    except ValueError:  # a builtin without a signature (torch.empty_like): its call will tell
        return
    try:
        signature.bind(**dict.fromkeys(inputs))
    except TypeError as error:
        raise ArgumentError(f"custom_op {name!r}: an output allocator is called with the operator's "
                            f"arguments by name ({', '.join(inputs)}) and cannot take them: {error}; give it "
                            "those parameters (or **kwargs)", location) from None
