"""The attention consumers' tensor-core work with nothing else around it, in the two launch shapes
of `asyncdsl.examples.attention`: per block, each of two warpgroups issues s = q @ kᵀ (eight
m64n128k16 wgmmas from shared memory) and o += p @ v (eight with p from registers), waits for s,
takes its row maximum and 2^x, waits for p @ v and rescales o.  No loads, no barriers between the
warpgroups: shared memory is never written (only time matters).

- `fed`: a 256-thread CTA, both warpgroups as above (ptxas gives every thread up to 255 registers);
- `producer`: a 384-thread CTA whose third warpgroup only hands its registers over (40 kept,
  232 for each of the other two, `setmaxnreg`), as in the producer form.

With `online`, the softmax keeps the running maximum and sum the attention keeps.  The reference
is the H200's dense bf16 peak (989 TFLOP/s), not a peer system: the question is how fast the same
instructions run in each launch shape.  They run at the same rate once the kernel is compiled as
a whole program (the driver's JIT); through nvJitLink, which drops `setmaxnreg`, the producer
shape ran at half (docs/hardware.md §14.7).

    python benchmarks/attention_mix.py
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import asyncdsl as ad  # noqa: E402
from asyncdsl.blocks.mma_operands import tensor_core_layout  # noqa: E402

REPS = 4000
SCALE = 0.01  # small enough that 2^x of garbage scores stays finite


def _mix(x, REPS, ONLINE, registers):
    q_s = ad.smem((2, 64, 128), ad.bfloat16, **tensor_core_layout(64))
    k_s = ad.smem((2, 128, 128), ad.bfloat16, **tensor_core_layout(128))
    v_s = ad.smem((2, 128, 128), ad.bfloat16, **tensor_core_layout(128))
    if registers:
        with ad.warpgroup_role(2, registers=40):
            pass
    with ad.warpgroup_role((0, 1), registers=registers):
        me = ad.warpgroup_idx()
        s = ad.registers((64, 128), ad.float32, layout=ad.WGMMA)
        p = ad.registers((64, 128), ad.bfloat16, layout=ad.WGMMA)
        acc = ad.registers((64, 128), ad.float32, layout=ad.WGMMA)
        row_max = ad.registers((64,), ad.float32, layout=ad.WGMMA_ROW)
        row_sum = ad.registers((64,), ad.float32, layout=ad.WGMMA_ROW)
        p[...] = ad.full((64, 128), 1.0, ad.bfloat16)
        acc[...] = ad.zeros((64, 128), ad.float32)
        row_max[...] = ad.full((64,), -math.inf, ad.float32)
        row_sum[...] = ad.zeros((64,), ad.float32)
        for j in ad.range(REPS):
            ad.wgmma(s, q_s.at[me], k_s.at[j % 2].T, accumulate=False)
            ad.wgmma(acc, p[...], v_s.at[(j - 1) % 2])
            ad.wgmma_wait(1)
            scores = s[...]
            if ONLINE:
                new_max = ad.maximum(row_max[...], scores.max(axis=1))
                alpha = ad.exp2((row_max[...] - new_max) * SCALE, approx=True)
                probabilities = ad.exp2(ad.fma(scores, SCALE, (new_max * -SCALE)[:, None]), approx=True)
                row_sum[...] = row_sum[...] * alpha + probabilities.sum(axis=1)
                row_max[...] = new_max
                factor = alpha[:, None]
            else:
                probabilities = ad.exp2(
                    ad.fma(scores, SCALE, (scores.max(axis=1) * -SCALE)[:, None]), approx=True)
                factor = 0.999
            ad.warpgroup_barrier()
            ad.wgmma_wait(0)
            p[...] = probabilities.astype(ad.bfloat16)
            acc[...] = acc[...] * factor
        ad.store(x.at[ad.program_id(0), ad.ds(me * 64, 64), :], acc[...] + row_sum[...][:, None])


@ad.kernel(grid=lambda x, **_: (x.shape[0],), block=256)
def fed(x, REPS: ad.constexpr, ONLINE: ad.constexpr = False):
    """x (CTAS, 128, 128) receives o plus the row sums (so nothing is optimised away)."""
    _mix(x, REPS, ONLINE, registers=None)


@ad.kernel(grid=lambda x, **_: (x.shape[0],), block=384)
def producer(x, REPS: ad.constexpr, ONLINE: ad.constexpr = False):
    """`fed` in a 384-thread CTA whose consumers took 232 registers each by setmaxnreg."""
    _mix(x, REPS, ONLINE, registers=232)


def main() -> None:
    import torch
    from common import median_gpu_ms, plot_result, write_result

    from asyncdsl.runtime import device_facts

    sms = device_facts(0).multiprocessor_count
    results, times = {}, {}
    for online in (False, True):
        for kernel in (fed, producer):
            x = torch.empty(sms, 128, 128, device="cuda", dtype=torch.float32)
            launch = lambda k=kernel, x=x, o=online: k(x, REPS=REPS, ONLINE=o)
            launch()
            ms = median_gpu_ms(launch, warmup=5, rep=50)
            name = (f"{kernel.__name__} ({kernel.launch.num_warpgroups * 128} threads)"
                    + (", online" if online else ""))
            results[name] = sms * 2 * REPS * 2 * (2 * 64 * 128 * 128) / ms / 1e9
            times[name] = ms * 1e6 / REPS
            print(f"{name:40s} {results[name]:6.0f} TFLOP/s ({times[name]:.0f} ns a block)")
    plot_result(write_result("attention_mix", {
        "tensor-core rate (TFLOP/s)": results, "dense bf16 peak (TFLOP/s)": 989,
        "note": "ns per block: " + ", ".join(f"{k}: {v:.0f}" for k, v in times.items())}))


if __name__ == "__main__":
    main()
