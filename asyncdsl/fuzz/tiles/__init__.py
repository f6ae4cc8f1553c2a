"""asyncdsl's differential fuzzer of the compute layer: random register-tile programs against an
independent numpy model.

Each program is one warpgroup's kernel written with the public API only: `t` loaded from a GMEM
window (past the array's end, masked, `other` there; straight or staged through shared memory),
a second tile `u`, then a chain of steps (arithmetic with tiles and Python numbers, fma, sqrt,
signs, maximum/minimum, comparisons combined into masks, `where`, casts between float, integer
and float8 dtypes, reductions with `keepdims` or `[:, None]` broadcast back, 0-d totals,
`ad.registers` across `ad.range` loops, shared-memory round trips, approximate functions), and
the store of `t` (maybe masked, maybe past the output's end).  It is imported from a file,
interpreted, compared with the model, compiled and assembled by ptxas, and ends in one of:

- `ok`, `refused` (an AsyncDSLError at one of the program's lines): not failures;
- `internal` (another exception, an error without such a line, PTX ptxas rejects), `hang`,
  `mismatch` (an output the model does not allow): failures.

The model (`numerics`) computes what docs/register-tiles.md promises: float ops exactly rounded
once, integers wrapping, max/min bit-exact, sums bit-exact where every order of addition gives
the same bits (otherwise held to the classic error bound of any order), approximate functions
within a few ulps of the float64 function.  It shares no code with asyncdsl.

    python -m asyncdsl.fuzz.tiles --seed 1 --count 2000          # one summary line; status 1 on failures
    python -m asyncdsl.fuzz.tiles --seed 1 --count 500 --show 3 --show-refused 3 --steps
    python -m asyncdsl.fuzz.tiles --program 1:283                # one program, printed
    python -m asyncdsl.fuzz.tiles --gpu --seed 7 --count 1000    # on a Hopper GPU, against the interpreter

Modules: `numerics` (the reference arithmetic), `program` (a program and its outputs' checks),
`builder` (the drawing state), `steps` (the chain's steps), `generate` (a program from a seed),
`render` (the program's module), `run` (one program and its outcome), `gpu` (programs
on the GPU), `summary`, `cli` (the command line, shared with `asyncdsl.fuzz.wgmma`).
CI runs `tests/fuzz/test_tile_fuzz.py`; `tests/gpu/test_fuzz_tiles_gpu.py` runs on the H200.
"""
