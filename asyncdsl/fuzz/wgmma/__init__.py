"""asyncdsl's wgmma fuzzer: random tensor-core configurations in the interpreter against a numpy
model of its documented numerics.

A configuration (`config`) draws M = 64·k, N, K, each operand's major, the swizzle, the input
types (bf16, f16, tf32, e4m3/e5m2 and int8/uint8 pairs), A from shared memory or registers,
whether the first call accumulates into a C loaded into the accumulator, and one or two calls;
`generate` writes it as a program of the tile fuzzer (loads by TMA into laid-out buffers,
`ad.wgmma`, `ad.wgmma_wait`, the store), so it runs, is judged and summarised as the tile
programs are (`asyncdsl.fuzz.tiles.run`).  `model` is the instruction-by-instruction arithmetic
of docs/register-tiles.md ("wgmma"), written from the text.

    python -m asyncdsl.fuzz.wgmma --seed 1 --count 300 --steps   # outcomes per type and majors
    python -m asyncdsl.fuzz.wgmma --program 1:17                # one configuration, printed
    python -m asyncdsl.fuzz.wgmma --gpu --seed 7 --count 200    # on a Hopper GPU, against the interpreter

Modules: `config`, `model`, `generate`.
"""
