"""The interpreter: kernels run on numpy, byte-exact, with the diagnostics a GPU cannot give.

    kernel.interpret(x, y, BM=64, BN=64)      # numpy arrays, outputs written in place
    ASYNCDSL_INTERPRET=1 python app.py        # ordinary kernel calls run here (torch/CuPy copied)

It runs `CompiledKernel.module`, the IR after the asyncdsl-level passes that the PTX is printed
from, on xDSL's `Interpreter`, so it checks the compiler along with the kernel.

Concurrency (`scheduler`): all warpgroups of all CTAs of a cluster are live at once, one runs at a
time, and each is switched out at every blocking point; clusters run one after another.

Completion model: an async copy completes when it is issued.  A TMA load reads GMEM, lands in
SMEM (zero-filled out of bounds, swizzled byte for byte) and completes its bytes on the mbarrier
immediately; a TMA store reads SMEM and writes GMEM (clipped) immediately.  Any interleaving the
hardware could produce is then a legal outcome of the kernel only if the kernel synchronised
properly, and that is what is checked instead of simulated (`races`, `clocks`): reading SMEM a
load wrote before knowing its barrier phase completed, and writing SMEM a store read (or a load
wrote) before knowing that copy is over, are errors even though the bytes happen to be right.
mbarriers (`mbarrier`) count arrivals, tx bytes and phases exactly; a state where every live
warpgroup waits is a deadlock, since nothing in flight could end it.

Modules: `host` (entry points), `host_arrays` (arguments), `grid` (CTAs, clusters, interpreters),
`functions` (the ops; `im2col` and `row_gather` add those copy families to it, `diagnosis` names
the op and warpgroup on errors), `state` (launch, CTA, warpgroup), `scheduler` and `sync` (blocking),
`mbarrier`, `copies` (TMA data movement), `reductions` (TMA reductions' read-modify-write),
`prefetch` (L2 prefetches, checked, moving nothing), `bulk_copies` (contiguous bulk copies,
clamped tails), `cp_async` (the per-thread fallback and its commit groups), `memory` (GMEM/SMEM
and references), `races` and
`clocks` (what may be touched when).
"""

from asyncdsl.interpret.host import interpret_any_arrays, interpret_numpy

__all__ = ["interpret_any_arrays", "interpret_numpy"]
