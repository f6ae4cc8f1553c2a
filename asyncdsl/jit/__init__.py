"""The host side of a kernel: from `@asyncdsl.kernel` and a call to a compiled kernel launched on
the GPU or run in the interpreter.

    call = kernel.signature.bind(args, kwargs, location)           # binding
    binary = kernel.specializations.binary(call.specs(location), call.constexprs)
    kernel(*args)          # GpuLauncher: checked once per argument layout, then warm
    kernel.interpret(*args)                                          # Interpreter

Kernel code never imports this layer; it sits above the frontend (the kernel language, which
`specialize` runs with tracer objects), the passes, the interpreter and the runtime, and uses
each of them.  `import asyncdsl` loads what a launch of a kernel compiled by an earlier process
needs and nothing of the compiler (`specializations` imports `specialize` and the passes on the
first trace).

Modules: `kernel` (`Kernel`, the user's handle, and the decorator), `options` (what the decorator
fixes, checked once), `binding` (parameters, `constexpr`, a call's `BoundCall`), `specs` (what a
specialisation knows of an argument), `grid` (a launch's grid from the call), `persistent` (the
persistent grid), `specializations` (the compiled specialisations: in-process caches and the disk
cache's key), `specialize` (tracing one), `code_digest` (the code a trace depends on), `launch`
(GPU launches: checked and warm), `prepared` (`Kernel.prepare`: a call of a fixed layout),
`interpreter` (interpreted runs), `profile` (profiled runs),
`profile_report` (`Profile`), `profile_export` (its files), `autotune` (`asyncdsl.autotune`),
`tunings` (what autotuning found, in memory and on disk), `warmup` (`asyncdsl.warmup`: a
workload's kernels compiled before its first call), `workload_file` (`asyncdsl.save_workload`
and `load_workload`: the kernels a run compiled, in a file for the next run's warm-up).
"""
