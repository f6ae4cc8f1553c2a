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
annotated `int` or `float` become scalars.  Constexprs are fixed when the operator is made.
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

from asyncdsl.errors import ArgumentError, user_location
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
    `constexprs` gives every constexpr parameter its value."""
    if not isinstance(kernel, Kernel):
        raise ArgumentError(f"custom_op takes an @asyncdsl.kernel, not {type(kernel).__qualname__}")
    outputs = dict(outputs or {})
    arrays = [n for n in kernel.runtime_names if n not in kernel.scalar_kinds]
    for what, names in (("outputs", outputs), ("mutates", mutates)):
        for unknown in [n for n in names if n not in arrays]:
            raise ArgumentError(f"custom_op {name!r}: {what} names {unknown!r}, which is not an array "
                                f"parameter of kernel {kernel.__name__} (its arrays: {', '.join(arrays)}; "
                                "scalars must be annotated int or float)")
    if set(outputs) & set(mutates):
        raise ArgumentError(f"custom_op {name!r}: {sorted(set(outputs) & set(mutates))} are both outputs "
                            "(made by the operator) and mutated inputs")
    if set(constexprs) != set(kernel.constexpr_names):
        raise ArgumentError(f"custom_op {name!r}: kernel {kernel.__name__} has constexprs "
                            f"({', '.join(kernel.constexpr_names) or 'none'}), given "
                            f"({', '.join(constexprs) or 'none'}); the operator fixes every one")
    inputs = tuple(n for n in kernel.runtime_names if n not in outputs)
    for allocate in outputs.values():
        _check_allocator(name, allocate, inputs)
    output_names = tuple(outputs)
    schema = _schema(kernel, inputs, output_names, tuple(mutates))

    def made_outputs(values: dict[str, Any]) -> dict[str, torch.Tensor]:
        return {output: allocate(**values) for output, allocate in outputs.items()}

    def returned(made: dict[str, torch.Tensor]) -> Any:
        if not output_names:
            return None
        if len(output_names) == 1:
            return made[output_names[0]]
        return tuple(made[output] for output in output_names)

    def launch(*args: Any) -> Any:
        values = dict(zip(inputs, args))
        made = made_outputs(values)
        kernel(**values, **made, **constexprs)
        return returned(made)

    def fake(*args: Any) -> Any:
        return returned(made_outputs(dict(zip(inputs, args))))

    return _register(name, launch, schema, fake, tuple(mutates))


def library_op(name: str, function: Callable[..., Any], *, schema: str, fake: Callable[..., Any]) -> Any:
    """Register `function` as the torch operator `name` ("namespace::operator", schema as
    "(Tensor x, float eps) -> (Tensor, Tensor)") and return it.  `function` takes the operator's
    arguments and returns new tensors, never its inputs or views of them; `fake` takes the same
    arguments and makes outputs of the same shapes, dtypes and devices without computing, which is
    all `torch.compile` runs while it traces.  The operator (a `torch.library.CustomOpDef`) takes
    an autograd formula by `register_autograd`."""
    return _register(name, function, schema, fake, ())


def check_rows(what: str, **tensors: torch.Tensor) -> None:
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


def _register(name: str, implementation: Callable[..., Any], schema: str, fake: Callable[..., Any],
              mutates: tuple[str, ...]) -> Any:
    operator = torch.library.custom_op(name, implementation, mutates_args=mutates, schema=schema)
    operator.register_fake(fake)
    return operator


def _schema(kernel: Kernel, inputs: tuple[str, ...], outputs: tuple[str, ...],
            mutates: tuple[str, ...]) -> str:
    """The operator's schema: `(Tensor x, Tensor(a!) y, int n) -> Tensor`."""
    aliases = iter("abcdefghijklmnopqrstuvwxyz")
    parameters = []
    for input_name in inputs:
        kind = kernel.scalar_kinds.get(input_name)
        if kind is not None:
            parameters.append(f"{_SCHEMA_TYPES[kind]} {input_name}")
        elif input_name in mutates:
            parameters.append(f"Tensor({next(aliases)}!) {input_name}")
        else:
            parameters.append(f"Tensor {input_name}")
    results = ("()" if not outputs else "Tensor" if len(outputs) == 1
               else f"({', '.join(['Tensor'] * len(outputs))})")
    return f"({', '.join(parameters)}) -> {results}"


def _check_allocator(name: str, allocate: Any, inputs: tuple[str, ...]) -> None:
    """An output's allocator must take the operator's arguments by name (as a grid function does)."""
    if not callable(allocate):
        raise ArgumentError(f"custom_op {name!r}: an output's value must be a function that makes the "
                            f"tensor, not {type(allocate).__qualname__}")
    try:
        signature = inspect.signature(allocate)
    except ValueError:  # a builtin without a signature (torch.empty_like): its call will tell
        return
    try:
        signature.bind(**dict.fromkeys(inputs))
    except TypeError as error:
        raise ArgumentError(f"custom_op {name!r}: an output allocator is called with the operator's "
                            f"arguments by name ({', '.join(inputs)}) and cannot take them: {error}; give it "
                            "those parameters (or **kwargs)") from None
