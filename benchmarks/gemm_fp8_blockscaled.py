"""Block-scaled fp8 GEMM (e4m3, a float32 scale per 1 x 128 group of a and per 128 x 128 block of
b, bf16 out) against torch's blockwise `_scaled_mm` in one run, on random inputs, over DeepSeek-V3's
shapes (MxNxK).  TFLOP/s = 2·M·N·K / time.

The peer is `torch._scaled_mm` given 1 x 128 and 128 x 128 scales (cuBLASLt's blockwise fp8 GEMM,
CUDA 12.9 and later), in the first scale layout it accepts whose result matches the float64
reference; where this torch has none, `torch._scaled_mm` with one scale a row and a column
(rowwise: fewer scales, not the same product) stands in, and the payload says so.  asyncdsl runs the
configuration `choose` picks ("asyncdsl") and a small sweep around it ("asyncdsl sweep": 64- and
128-row tiles, 64- and 128-wide ones, split K 1 to 4, clusters of two CTAs sharing b's slices);
the ratio is the chosen configuration's.
Every contender writes into preallocated outputs (no copy timed), once into its own NaN-poisoned
output, checked against float64.  Problems under `matmul.DEVICE_TIMED_FLOPS` are timed on the
device, one launch after an L2 flush, median of rounds; larger ones as wall time of launches in a
row, contenders taking turns.

    python benchmarks/gemm_fp8_blockscaled.py [MxNxK ...]
"""

from __future__ import annotations

import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import OutputRotation, TflopsTable, poisoned_outputs, relative_error, rotated_ms  # noqa: E402
from common import shape_arguments, tflops  # noqa: E402
from matmul import DEVICE_ROUNDS, DEVICE_TIMED_FLOPS, OUTPUT_BUFFERS  # noqa: E402

SHAPES = ((4096, 7168, 16384), (4096, 4096, 7168), (4096, 2112, 7168), (64, 7168, 16384), (128, 24576, 1536),
          (1, 7168, 16384), (16384, 7168, 2048))
BARS = {(4096, 7168, 16384): 1.05, (4096, 4096, 7168): 1.05, (4096, 2112, 7168): 1.05, (64, 7168, 16384): 1.3,
        (128, 24576, 1536): 1.3}


def sweep(m: int, n: int, k: int, sms: int):
    """The configurations tried beside `choose`'s, (config, pair): tile rows, tile columns, split
    K, clusters of two CTAs."""
    from asyncdsl.blocks.gemm_config import GemmConfig

    for bm, bn, split_k, pair in ((64, 128, 1, False), (64, 128, 2, False), (64, 128, 4, False),
                                  (128, 128, 1, False), (128, 128, 2, False), (128, 64, 1, False),
                                  (128, 64, 2, False), (128, 128, 1, True), (64, 128, 1, True)):
        tiles = -(-m // bm) * -(-n // bn)
        if split_k > 1 and tiles * split_k > sms:
            continue
        stages = 7 if bm == 64 else 5 if bn == 128 else 7
        yield GemmConfig(BM=bm, BN=bn, BK=128, STAGES=stages, SPLIT="n" if bm == 64 else "m",
                         SPLIT_K=split_k), pair


def torch_blockwise(torch, a, a_scales, b, b_scales, reference):
    """`torch._scaled_mm` with block scales, in the first layout of the scales it takes whose
    product matches `reference` (float64), as (name, launcher); None where no layout works."""
    m_major = a_scales.t().contiguous().t()
    for label, sa, sb in (("a M-major, b (N/128, K/128)", m_major, b_scales),
                          ("a M-major, b (K/128, N/128) view", m_major, b_scales.t()),
                          ("a M-major, b (K/128, N/128)", m_major, b_scales.t().contiguous()),
                          ("a row-major, b (N/128, K/128)", a_scales, b_scales)):
        def run(c, sa=sa, sb=sb):
            return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, out=c)
        try:
            c = torch.empty(reference.shape, device="cuda", dtype=torch.bfloat16)
            run(c)
            torch.cuda.synchronize()
        except (RuntimeError, ValueError, NotImplementedError):
            continue
        if float((c.double() - reference).norm() / reference.norm()) < 0.02:
            return f"torch._scaled_mm blockwise ({label})", run
    return None


def measure(m: int, n: int, k: int) -> dict:
    import torch

    from asyncdsl.kernels.gemm_fp8_blockscaled_choice import choose
    from asyncdsl.runtime import device_facts

    blockscaled = importlib.import_module("asyncdsl.kernels.gemm_fp8_blockscaled")
    sms = device_facts(0).multiprocessor_count
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    kb = -(-k // 128)
    a_scales = (torch.rand(kb, m, device="cuda") + 0.5).t()  # M-major, as both take it
    b_scales = torch.rand(-(-n // 128), kb, device="cuda") + 0.5
    exact = torch.zeros(m, n, device="cuda", dtype=torch.float64)
    for i in range(kb):
        part = slice(i * 128, (i + 1) * 128)
        exact += ((a[:, part].double() @ b[:, part].double().t()) * a_scales[:, i, None].double()
                  * b_scales[:, i].double().repeat_interleave(128)[None, :n])
    rotation = OutputRotation(lambda: torch.empty((m, n), device="cuda", dtype=torch.bfloat16),
                              OUTPUT_BUFFERS)
    launchers = {}
    peer = torch_blockwise(torch, a, a_scales, b, b_scales, exact)
    if peer is None:
        row_scale = a_scales.mean(1, keepdim=True).contiguous()
        column_scale = b_scales.mean(1).repeat_interleave(128)[None, :n].contiguous()
        peer = ("torch._scaled_mm rowwise (no blockwise path in this torch)",
                lambda c: torch._scaled_mm(a, b.t(), scale_a=row_scale, scale_b=column_scale,
                                           out_dtype=torch.bfloat16, out=c))
    peer_name, launchers[peer[0]] = peer
    chosen = choose(m, n, k, sms)
    launchers["asyncdsl"] = lambda c: blockscaled.gemm_fp8_blockscaled(a, a_scales, b, b_scales, out=c,
                                                                       ctas=sms)
    for config, pair in sweep(m, n, k, sms):
        if config != chosen or pair:
            name = (f"asyncdsl sweep BM={config.BM} BN={config.BN} SPLIT_K={config.SPLIT_K}"
                    f"{' pairs' if pair else ''}")
            launchers[name] = lambda c, config=config, pair=pair: blockscaled.gemm_fp8_blockscaled(
                a, a_scales, b, b_scales, out=c, ctas=sms, config=config, pair=pair)
    outputs = poisoned_outputs(torch, launchers, (m, n), torch.bfloat16)
    small = 2 * m * n * k < DEVICE_TIMED_FLOPS  # timed on the device; larger ones by the wall clock
    times, timing = rotated_ms(torch, launchers, rotation, DEVICE_ROUNDS, device=small)
    errors = {name: relative_error(out, exact) for name, out in outputs.items()}
    tflops_by_name = tflops(2 * m * n * k, times)
    return {"peer": peer_name, "TFLOP/s": tflops_by_name, "relative error vs float64": errors,
            "chosen": f"BM={chosen.BM} BN={chosen.BN} SPLIT_K={chosen.SPLIT_K}",
            "ratio": tflops_by_name["asyncdsl"] / tflops_by_name[peer_name], "timing": timing}


def main(argv: list[str]) -> None:
    table = TflopsTable()
    for m, n, k in shape_arguments(argv, SHAPES):
        result = measure(m, n, k)
        bar = BARS.get((m, n, k))
        table.add(f"{m}x{n}x{k}", result, f"ratio {result['ratio']:.3f}" + (f" (bar {bar})" if bar else ""),
                  {key: f"{value:.2e}" for key, value in result["relative error vs float64"].items()
                   if not _swept(key)}, shown=lambda contender: not _swept(contender))
        print("  sweep:", {key.removeprefix("asyncdsl sweep "): round(value)
                           for key, value in result["TFLOP/s"].items() if _swept(key)}, flush=True)
    summary = {}
    if not argv:
        summary["rows at their bar"] = sum(table.details[f"{m}x{n}x{k}"]["ratio"] >= bar
                                           for (m, n, k), bar in BARS.items())
    print(table.write("gemm_fp8_blockscaled", summary))


def _swept(contender: str) -> bool:
    """A configuration of the sweep: in the details, not in the row."""
    return contender.startswith("asyncdsl sweep")


if __name__ == "__main__":
    main(sys.argv[1:])
