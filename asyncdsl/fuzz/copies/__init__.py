"""asyncdsl's differential fuzzer: random copy kernels against an independent numpy model.

Each case is one `ad.async_copy` (TMA load or store, reduction, bulk copy, cp.async, collective
load in a cluster, with transforms, swizzles, predicates, 4-bit and fp8 elements, static,
traced and hinted starts, squeezes and `...`) written as kernel source with the public API
only, imported from a file, compiled, assembled by ptxas and interpreted.  It must end in
exactly one of: PTX that ptxas accepts and an interpreter result equal to the model's, or a
clean `AsyncDSLError` naming a line of the case's file.  Anything else is a failure.

    python -m asyncdsl.fuzz.copies --cases 2000 --seed 1          # one summary line; status 1 on failures
    python -m asyncdsl.fuzz.copies --cases 500 --seed 2 --show 3  # the source and error of 3 failures a class
    python -m asyncdsl.fuzz.copies --cases 2000 --seed 1 --patterns   # outcomes per known bug pattern
    python -m asyncdsl.fuzz.copies --case 1:283                   # one case, printed
    python -m asyncdsl.fuzz.copies --gpu --cases 2000 --seed 7    # on a Hopper GPU, against the interpreter

Under compute-sanitizer (memcheck follows the worker processes the fuzzer spawns):

    compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 \\
        python -m asyncdsl.fuzz.copies --gpu --cases 50 --seed 3 --jobs 1 --budget 120

Modules: `cases` (a case as data), `expr` (index expressions), `generate`, `draw` and `scenarios`
(drawing cases, from a seed or through hypothesis), `render` (kernel source), `layout`, `window`,
`semantics`, `model`,
`rules` and `oracle` (the reference model, which shares no code with asyncdsl's planners or
interpreter), `run` (one case and its outcome), `pool` (worker processes, hard time limits),
`gpu` (cases on the GPU), `patterns` (known bug classes, for the summary), `summary`, and
`toolchain` (ptxas).  CI runs `tests/fuzz/test_copy_fuzz.py`; `tests/gpu/test_fuzz_gpu.py` runs on the H200.
"""
