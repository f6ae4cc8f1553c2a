"""Running kernels with register tiles in the interpreter before their PTX lowering exists:
`kernel.interpret` compiles to PTX too, which for tiles lands separately, so `interpret` runs
the asyncdsl-level passes and the interpreter only (the same IR `kernel.interpret` runs)."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from asyncdsl import runtime
from asyncdsl.config import knobs
from asyncdsl.frontend.specialize import trace_kernel
from asyncdsl.interpret import launch
from asyncdsl.passes.pipeline import async_passes, make_context


def interpret(kernel, *arrays, **constexprs) -> ModuleOp:
    """Trace `kernel`, run the asyncdsl-level passes, and interpret it over `arrays`; the module
    it ran."""
    call = kernel.bind(arrays, constexprs, None)
    module = trace_kernel(kernel.fn, kernel.name, kernel.array_names, kernel.specs(call, None),
                          call.constexprs, kernel.launch, kernel.definition, knobs.debug)
    context = make_context()
    for compiler_pass in async_passes(kernel.descriptor_mode):
        compiler_pass.apply(context, module)
    grid = runtime.launch_grid(kernel.grid_for(call, None), kernel.launch.cluster)
    launch(module, [name for name, _ in call.arrays], [array for _, array in call.arrays], grid)
    return module
