"""JAX's Pallas Mosaic GPU attention kernel (`attention_mgpu`) as a same-run peer for the
attention benchmark: (run, wait) for `common.interleaved_ms`, at the fastest of a few
configurations tried on the shape, on float16 copies of the bf16 inputs (all it takes), q
scaled by 1/√D beforehand (the kernel leaves the scale to its caller).

The module's `attention(q, k, v, config)` takes (batch, sequence, heads, head dim) arrays and a
frozen `TuningConfig` dataclass; the fields used (block_q, block_kv, max_concurrent_steps and,
where the installed jax has it, causal) are checked against the dataclass, so a renamed field
reports why the peer is missing instead of running something else.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # torch shares the process

# (block_q, block_kv, max_concurrent_steps): the module's own benchmark sweeps these values.
CONFIGS = ((64, 128, 2), (64, 64, 2), (64, 128, 4))


def _module():
    from jax.experimental.pallas.ops.gpu import attention_mgpu

    return attention_mgpu


def mosaic_attention_runner(q, k, v, causal: bool):
    """For torch tensors q, k, v of shape (B, H, S, D): (run, wait, output, configuration), where
    `output()` gives the last result as a torch (B, H, S, D) tensor; or None with a printed
    reason.  The kernel reads the same values (handed over by DLPack, laid out (B, S, H, D))."""
    try:
        import jax
        import torch

        module = _module()
    except Exception as error:  # noqa: BLE001 - no jax, no module: no peer
        print(f"mosaic attention peer unavailable: {type(error).__name__}: {error}")
        return None
    fields = {field.name for field in dataclasses.fields(module.TuningConfig)}
    if causal and "causal" not in fields:
        print(f"mosaic attention peer: this jax's TuningConfig has no causal field ({sorted(fields)})")
        return None
    torch.cuda.synchronize()
    # The kernel takes float16 only (jax 0.11): the bf16 values, exactly (float16 has more
    # mantissa bits and normal inputs stay in its range), at the same speed on the tensor cores.
    # It computes softmax(q kᵀ) v without the 1/√D of the others: q comes scaled (rounded to
    # float16 once, far below the outputs' bf16 rounding).
    scaled_q = q.float() / math.sqrt(q.shape[-1])
    q_j, k_j, v_j = (jax.dlpack.from_dlpack(x.transpose(1, 2).to(torch.float16).contiguous())
                     for x in (scaled_q, k, v))
    best = None
    for block_q, block_kv, steps in CONFIGS:
        wanted = {"block_q": block_q, "block_kv": block_kv, "max_concurrent_steps": steps}
        if "causal" in fields:
            wanted["causal"] = causal
        try:
            config = module.TuningConfig(**wanted)
            function = jax.jit(lambda q, k, v, config=config: module.attention(q, k, v, config))
            jax.block_until_ready(function(q_j, k_j, v_j))  # compile outside the timing
            start = time.perf_counter()
            for _ in range(3):
                out = function(q_j, k_j, v_j)
            jax.block_until_ready(out)
            seconds = time.perf_counter() - start
        except Exception as error:  # noqa: BLE001 - a configuration the kernel refuses for this shape
            print(f"mosaic attention {tuple(q.shape)} causal={causal} {wanted}: "
                  f"{type(error).__name__}: {str(error)[:200]}")
            continue
        if best is None or seconds < best[0]:
            best = (seconds, function, wanted)
    if best is None:
        return None
    _, function, wanted = best
    last = [None]

    def run() -> None:
        last[0] = function(q_j, k_j, v_j)

    def wait() -> None:
        jax.block_until_ready(last[0])

    def output():
        wait()
        return torch.from_dlpack(last[0]).transpose(1, 2)

    return run, wait, output, wanted
