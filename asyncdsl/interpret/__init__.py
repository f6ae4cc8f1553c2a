"""The interpreter: kernels run on numpy, byte-exact, with the diagnostics a GPU cannot give.

    kernel.interpret(x, y, BM=64, BN=64)      # numpy arrays, outputs written in place
    ASYNCDSL_INTERPRET=1 python app.py        # ordinary kernel calls run here (torch/CuPy copied)

It runs `CompiledKernel.module`, the IR after the asyncdsl-level passes that the PTX is printed
from, on xDSL's `Interpreter`, so it checks the compiler along with the kernel.

Concurrency (`scheduler`): all warpgroups of all CTAs of a cluster are live at once, one runs at a
time, and each is switched out at every blocking point; clusters run one after another, except
on several emulated devices (`launch_devices`, `distributed`), where every CTA of every device is
live at once so that devices can wait for each other's signals.

Completion model: an async copy completes when it is issued.  A TMA load reads GMEM, lands in
SMEM (zero-filled out of bounds, swizzled byte for byte) and completes its bytes on the mbarrier
immediately; a TMA store reads SMEM and writes GMEM (clipped) immediately.  Any interleaving the
hardware could produce is then a legal outcome of the kernel only if the kernel synchronised
properly, and that is what is checked instead of simulated (`races`, `clocks`): reading SMEM a
load wrote before knowing its barrier phase completed, and writing SMEM a store read (or a load
wrote) before knowing that copy is over, are errors even though the bytes happen to be right.
mbarriers (`mbarrier`) count arrivals, tx bytes and phases exactly; a state where every live
warpgroup waits is a deadlock, since nothing in flight could end it.

Register tiles are numpy arrays of their logical shape (`tiles`; elementwise math in `tile_math`,
with the element arithmetic of `numerics`; mutable ones in `registers`), loaded and stored
whole through shared memory (`tile_access`); those loads and stores are generic-proxy accesses,
raced against everything else like the copies.

Modules: `launch` (the entry point), `grid` (CTAs, clusters, interpreters, and the list of op
implementations), `functions` (the base of op implementations), one module of op implementations
per feature (`core`, `sync`, `copy`, `tma`, `bulk`, `cp_async`, `collective`, `reduction`,
`prefetch`, `im2col`, `row_gather`, `scalars`, `assume`, `tiles`, `tile_math`, `tile_access`,
`tile_gmem`, `registers`, `wgmma`, `roles`, `turns`, `profile`, `distributed`, `index_loads`), the element
arithmetic they share (`numerics` for tiles, `mma_numerics` for wgmma), the machine they run on
(`state`: launch, CTA, warpgroup; `memory`: GMEM/SMEM and references; `operands`: a copy's
operands read; `mbarrier`; `scheduler` and `waits`: blocking), and what may be touched when
(`races`, `clocks`); `diagnosis` names the op and warpgroup on errors.
"""

from asyncdsl.interpret.launch import launch, launch_devices

__all__ = ["launch", "launch_devices"]
