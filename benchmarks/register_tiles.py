"""Fused row and elementwise kernels on register tiles (`asyncdsl.kernels`' softmax, rms_norm,
layer_norm, swiglu and quantize_fp8, called as a user calls them, into preallocated outputs)
against torch eager, torch.compile and Triton kernels in the tutorials' style, in one run, with
the device-copy bandwidth of the same run as the roofline.  TB/s = bytes read + written / device time: each
contender's median over single launches after an L2 flush, the median of that over 9 rounds in
which the contenders take turns in random order (`common.gpu_ms_by_round`); ", per round" rows
compare asyncdsl with the faster peer within each round (`common.paired_speedups`).  Each is also timed
back to back (", back to back": the wall time of 20 launches in a row, median of 7 rounds in turns,
`common.interleaved_ms`), the steady stream a model's layers make; every tensor here is several
times the L2, so the flush changes what is cached little, but it leaves the cache's dirty lines to
be written back during the launch it precedes, and back to back nothing idles between launches.
The two orders of the peers differ by about as much as run-to-run noise (docs/hardware.md §19).
Back to back includes each contender's host launch path where a launch is shorter than it;
", in a CUDA graph" times the same 20 launches captured in one graph and replayed between CUDA
events (`common.graph_ms_by_round`, 7 rounds in turns): back to back on the GPU alone.
torch.compile compiles the write into the output buffer with the math, so Inductor may fuse it
into its kernel; torch eager copies its result there (an extra pass: eager is a reference only).

    python benchmarks/register_tiles.py [softmax rms_norm layer_norm swiglu rowwise_fp8_quant]
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import (  # noqa: E402
    gpu_ms_by_round,
    graph_ms_by_round,
    interleaved_ms,
    median_gpu_ms,
    paired_speedups,
    plot_result,
    write_result,
)

WORKLOADS = {
    "softmax": ((8192, 4096), (4096, 8192), (4096, 16384)),
    "rms_norm": ((8192, 4096), (8192, 8192)),
    "layer_norm": ((8192, 4096), (8192, 8192)),
    "swiglu": ((16384, 8192),),
    "rowwise_fp8_quant": ((8192, 4096), (8192, 8192), (4096, 16384), (2048, 32768)),
}


def _copy_tbps(nbytes: int) -> float:
    """torch copy_ of nbytes/2 bytes: read + write nbytes, the same traffic as the workload."""
    import torch

    x = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    return nbytes / median_gpu_ms(lambda: y.copy_(x)) / 1e9


def _softmax(shape):
    import torch
    import torch.nn.functional as F
    from triton_peers import triton_softmax

    import asyncdsl.kernels as K

    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 3
    y = torch.empty_like(x)
    expected = F.softmax(x.float(), dim=1).to(torch.bfloat16)
    compiled = torch.compile(lambda t, out: out.copy_(F.softmax(t, dim=1)))
    runs = {
        "asyncdsl": lambda: K.softmax(x, out=y),
        "torch eager": lambda: y.copy_(F.softmax(x, dim=1)),
        "torch.compile": lambda: compiled(x, y),
        "triton": lambda: triton_softmax(x, y),
    }
    return runs, y, expected, 2 * x.numel() * 2, {"atol": 2 ** -8, "rtol": 0}, None


def _rms_norm(shape):
    import torch
    from triton_peers import triton_rms_norm

    import asyncdsl.kernels as K

    eps = 1e-6
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    w = (1 + 0.1 * torch.randn(shape[1], device="cuda")).to(torch.bfloat16)
    y = torch.empty_like(x)

    def eager(t):
        wide = t.float()
        return (wide * torch.rsqrt(wide.pow(2).mean(dim=1, keepdim=True) + eps)
                * w.float()).to(torch.bfloat16)

    expected = eager(x)
    compiled = torch.compile(lambda t, out: out.copy_(eager(t)))
    runs = {
        "asyncdsl": lambda: K.rms_norm(x, w, eps, out=y),
        "torch eager": lambda: y.copy_(eager(x)),
        "torch.compile": lambda: compiled(x, y),
        "triton": lambda: triton_rms_norm(x, w, y, eps),
    }
    return runs, y, expected, 2 * x.numel() * 2 + shape[1] * 2, {"atol": 2 ** -6, "rtol": 2 ** -7}, None


def _layer_norm(shape):
    import torch
    import torch.nn.functional as F
    from triton_peers import triton_layer_norm

    import asyncdsl.kernels as K

    eps = 1e-5
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) + 4  # a mean the kernels must remove
    w = (1 + 0.1 * torch.randn(shape[1], device="cuda")).to(torch.bfloat16)
    b = (0.1 * torch.randn(shape[1], device="cuda")).to(torch.bfloat16)
    y = torch.empty_like(x)
    expected = F.layer_norm(x.float(), shape[1:], w.float(), b.float(), eps).to(torch.bfloat16)
    compiled = torch.compile(lambda t, out: out.copy_(F.layer_norm(t, shape[1:], w, b, eps)))
    runs = {
        "asyncdsl": lambda: K.layer_norm(x, w, b, eps, out=y),
        "torch eager": lambda: y.copy_(F.layer_norm(x, shape[1:], w, b, eps)),
        "torch.compile": lambda: compiled(x, y),
        "triton": lambda: triton_layer_norm(x, w, b, y, eps),
    }
    return runs, y, expected, 2 * x.numel() * 2 + 2 * shape[1] * 2, {"atol": 2 ** -6, "rtol": 2 ** -7}, None


def _swiglu(shape):
    import torch
    import torch.nn.functional as F
    from triton_peers import triton_swiglu

    import asyncdsl.kernels as K

    a, b = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    y = torch.empty_like(a)
    expected = (F.silu(a.float()) * b.float()).to(torch.bfloat16)
    compiled = torch.compile(lambda p, q, out: torch.mul(F.silu(p), q, out=out))
    runs = {
        "asyncdsl": lambda: K.swiglu(a, b, out=y),
        "torch eager": lambda: torch.mul(F.silu(a), b, out=y),
        "torch.compile": lambda: compiled(a, b, y),
        "triton": lambda: triton_swiglu(a, b, y),
    }
    return runs, y, expected, 3 * a.numel() * 2, {"atol": 2 ** -6, "rtol": 2 ** -6}, None


def _rowwise_fp8_quant(shape):
    import torch
    from triton_peers import triton_rowwise_fp8

    import asyncdsl.kernels as K

    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 10
    q = torch.empty(shape, device="cuda", dtype=torch.float8_e4m3fn)
    scales = torch.empty(shape[0], device="cuda", dtype=torch.float32)

    def eager(t):
        wide = t.float()
        amax = wide.abs().amax(dim=1, keepdim=True)
        factor = torch.where(amax > 0, 448.0 / amax, torch.zeros_like(amax))
        return (wide * factor).clamp(-448, 448).to(torch.float8_e4m3fn), (amax / 448.0).squeeze(1)

    def into(t, out_q, out_scales):
        values, factors = eager(t)
        out_q.copy_(values)
        out_scales.copy_(factors)

    compiled = torch.compile(into)
    expected = eager(x)[0]
    runs = {
        "asyncdsl": lambda: K.quantize_fp8(x, out=(q, scales)),
        "torch eager": lambda: into(x, q, scales),
        "torch.compile": lambda: compiled(x, q, scales),
        "triton": lambda: triton_rowwise_fp8(x, q, scales),
    }
    # Within one e4m3 step (1/8 relative): the peers divide 448 / amax approximately
    # (div.full.f32) and land on the other side of a rounding boundary now and then.
    def differing_from_numpy() -> int:
        """asyncdsl's elements that differ from the exact reference (IEEE division, nearest even)."""
        import ml_dtypes
        import numpy as np

        from asyncdsl.kernels.quantize_fp8 import reference

        runs["asyncdsl"]()
        torch.cuda.synchronize()
        exact = reference(x.float().cpu().numpy().astype(ml_dtypes.bfloat16))[0].view(np.uint8)
        return int((q.view(torch.uint8).cpu().numpy() != exact).sum())

    return (runs, q, expected, x.numel() * 3 + shape[0] * 4, {"atol": 2 ** -9, "rtol": 0.13},
            differing_from_numpy)


BUILDERS = {"softmax": _softmax, "rms_norm": _rms_norm, "layer_norm": _layer_norm, "swiglu": _swiglu,
            "rowwise_fp8_quant": _rowwise_fp8_quant}


def main(names) -> None:
    import torch

    results = {}
    for name in names:
        for shape in WORKLOADS[name]:
            runs, out, expected, nbytes, tolerance, exact_check = BUILDERS[name](shape)
            row = {}
            for peer, fn in runs.items():
                out.zero_()
                fn()
                torch.cuda.synchronize()
                try:
                    torch.testing.assert_close(out.float(), expected.float(), **tolerance)
                except AssertionError as error:  # reported, and the run goes on to the timings
                    bad = ~torch.isclose(out.float(), expected.float(), **tolerance)
                    where = bad.nonzero()[:3].tolist()
                    row[f"{peer} MISMATCH"] = f"{int(bad.sum())} elements, e.g. {where}: " + ", ".join(
                        f"{out[tuple(i)].float().item()} vs {expected[tuple(i)].float().item()}"
                        for i in where
                    ) + f" ({str(error).splitlines()[0]})"
            by_round = gpu_ms_by_round(runs, rounds=9)
            for peer, times in by_round.items():
                row[peer] = nbytes / statistics.median(times) / 1e9
                print(name, shape, peer, f"{row[peer]:.3f} TB/s", flush=True)
            streamed = {peer: (fn, torch.cuda.synchronize) for peer, fn in runs.items()}
            for peer, ms in interleaved_ms(streamed, rounds=7, launches=20).items():
                row[f"{peer}, back to back"] = nbytes / ms / 1e9
            graphed = graph_ms_by_round(runs, rounds=7, launches=20)
            for peer, times in graphed.items():
                row[f"{peer}, in a CUDA graph"] = nbytes / statistics.median(times) / 1e9
            if exact_check is not None:
                row["asyncdsl elements differing from numpy"] = exact_check()
            row["device copy"] = _copy_tbps(nbytes)
            best_peer = max(row["torch.compile"], row["triton"])  # the same run's peers
            row["asyncdsl / best of triton, torch.compile"] = row["asyncdsl"] / best_peer
            paired = paired_speedups(by_round, "asyncdsl", ["torch.compile", "triton"])
            row |= {f"asyncdsl / best of triton, torch.compile, per round: {what}": value
                    for what, value in paired.items()}
            row["asyncdsl / device copy"] = row["asyncdsl"] / row["device copy"]
            best_streamed = max(row["torch.compile, back to back"], row["triton, back to back"])
            row["asyncdsl / best of triton, torch.compile, back to back"] = (
                row["asyncdsl, back to back"] / best_streamed)
            in_graph = paired_speedups(graphed, "asyncdsl", ["torch.compile", "triton"])
            row |= {f"asyncdsl / best of triton, torch.compile, in a CUDA graph, per round: {what}": value
                    for what, value in in_graph.items()}
            results[f"{name} {shape[0]}x{shape[1]} bf16 (TB/s)"] = row
    plot_result(write_result("register_tiles", results))
    for key, row in results.items():
        print(key)
        for peer, value in row.items():
            print(f"    {peer:42s} {value:6.3f}" if isinstance(value, float) else f"    {peer:42s} {value}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(WORKLOADS))
