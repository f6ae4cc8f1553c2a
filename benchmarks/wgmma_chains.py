"""How fast the tensor cores take m64nNk16 wgmmas from shared memory, one accumulator chain against
chains interleaved, one warpgroup issuing or two, a from shared memory or from registers: one CTA
per SM, each issuing warpgroup running REPS runs of 16 wgmmas (K = 256) and waiting for each run.
The reference is the H200's dense bf16 peak (989 TFLOP/s), not a peer system: the question is whether
small-N products in a chain keep the
tensor cores busy (docs/hardware.md §14.6).

Variants: `whole`, one `asyncdsl.wgmma` over a (64, 256) a and a K-major (256, N) b in 128-byte
swizzled columns of 64 (one fence, sixteen instructions, one commit); `chains=c`, sixteen
single-k16 wgmmas over separate 16-wide buffers (32-byte swizzle), their accumulators taking
turns among c of them (a fence and a commit each); `wgs=1`, one warpgroup of the CTA issues, the
other idles (as when consumers take turns); `a in registers`, the whole form with a (64, 256) bf16
register operand (attention's p @ v).

    python benchmarks/wgmma_chains.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import asyncdsl as ad  # noqa: E402
from asyncdsl import TileTransform  # noqa: E402
from asyncdsl.blocks.mma_operands import tensor_core_layout  # noqa: E402

REPS = 4000
VARIANTS = ((64, 1, True, 2, False), (64, 1, False, 2, False), (64, 2, False, 2, False),
            (64, 4, False, 2, False),
            (128, 1, True, 2, False), (128, 2, False, 2, False), (256, 1, True, 2, False),
            (64, 1, True, 1, False), (128, 1, True, 1, False), (256, 1, True, 1, False),
            (128, 1, True, 2, True), (128, 1, True, 1, True))  # (N, chains, whole, wgs, a in registers)


@ad.kernel(grid=lambda x, CTAS, **_: (CTAS,), block=256)
def chains(x, CTAS: ad.constexpr, CHAINS: ad.constexpr, N: ad.constexpr, REPS: ad.constexpr,
           WHOLE: ad.constexpr = False, WGS: ad.constexpr = 2, A_REGISTERS: ad.constexpr = False):
    """x (CTAS, 128, N) receives the sums of the accumulators (so nothing is optimised away);
    shared memory is never written: the products' values do not matter, only their time."""
    if WHOLE:
        a_whole = ad.smem((2, 64, 256), ad.bfloat16, **tensor_core_layout(64))
        b_whole = ad.smem((N, 256), ad.bfloat16, **tensor_core_layout(N))
    else:
        a_k16 = ad.smem((2, 16, 64, 16), ad.bfloat16, transforms=TileTransform((64, 16)), swizzle=32)
        b_k16 = ad.smem((16, N, 16), ad.bfloat16, transforms=TileTransform((N, 16)), swizzle=32)
    with ad.warpgroup_role(tuple(range(WGS))):
        me = ad.warpgroup_idx()
        if A_REGISTERS:
            a_registers = ad.registers((64, 256), ad.bfloat16, layout=ad.WGMMA)
            a_registers[...] = ad.full((64, 256), 1.0, ad.bfloat16)
        accs = [ad.registers((64, N), ad.float32, layout=ad.WGMMA) for _ in range(CHAINS)]
        for acc in accs:
            acc[...] = ad.zeros((64, N), ad.float32)
        for _ in ad.range(REPS):
            if WHOLE:
                ad.wgmma(accs[0], a_registers[...] if A_REGISTERS else a_whole.at[me], b_whole.T)
            else:
                for k in range(16 // CHAINS):
                    for c, acc in enumerate(accs):
                        step = k * CHAINS + c
                        ad.wgmma(acc, a_k16.at[me, step], b_k16.at[step].T)
            ad.wgmma_wait(0)
        total = accs[0][...]
        for acc in accs[1:]:
            total = total + acc[...]
        ad.store(x.at[ad.program_id(0), ad.ds(me * 64, 64), :], total)


def main() -> None:
    import torch
    from common import median_gpu_ms, plot_result, write_result

    from asyncdsl.runtime import device_facts

    sms = device_facts(0).multiprocessor_count
    results = {}
    for n, chain_count, whole, wgs, a_registers in VARIANTS:
        x = torch.empty(sms, 128, n, device="cuda", dtype=torch.float32)
        launch = lambda x=x, n=n, c=chain_count, w=whole, g=wgs, r=a_registers: chains(
            x, CTAS=sms, N=n, REPS=REPS, CHAINS=c, WHOLE=w, WGS=g, A_REGISTERS=r)
        launch()
        ms = median_gpu_ms(launch, warmup=5, rep=50)
        flop = sms * wgs * REPS * 16 * 64 * n * 16 * 2
        name = (f"m64n{n}k16, "
                + ("one wgmma of 16 steps" if whole else f"{chain_count} chain(s) of single steps"))
        name += (", a in registers" if a_registers else "") + (", one warpgroup" if wgs == 1 else "")
        results[name] = flop / ms / 1e9
        print(f"{name:50s} {results[name]:6.0f} TFLOP/s")
    plot_result(write_result("wgmma_chains", {"tensor-core rate (TFLOP/s)": results,
                                              "dense bf16 peak (TFLOP/s)": 989}))


if __name__ == "__main__":
    main()
