"""All-gather and reduce-scatter of bf16 across the GPUs of this host: asyncdsl's
(`asyncdsl.kernels.all_gather` and `reduce_scatter`, in an NVSHMEM job, in the configuration
they pick) against NCCL (`torch.distributed`, the same processes, the same run); and the
all-gather fused with the GEMM (`asyncdsl/kernels/all_gather_gemm.py`) against NCCL's all-gather
followed by cuBLAS.  Algorithm bandwidth: the bytes of one device's gathered output (all-gather)
or of one device's input (reduce-scatter) over the median device time of a call, per call timed
over a run of calls that all devices start together.

    python benchmarks/collectives.py [world_size]      # default: every GPU here

With one GPU both sides are a local copy (a one-rank NCCL job copies too): such a run checks the
script and the kernels' copy rate against NCCL's, not the collective, and says so in its JSON.
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import plot_result, write_result  # noqa: E402

SIZES_MIB = (64, 256, 1024)  # one device's gathered output, or its input to the reduction
COLUMNS = 4096
ROUNDS, CALLS = 7, 10
FUSED_ROWS, FUSED_K, FUSED_N = 8192, 4096, 4096  # the gathered a (rows split over the devices), b


def _timed(contenders: dict) -> dict[str, float]:
    """Median ms per call of each contender: every round, each runs CALLS calls between CUDA
    events, after a barrier of all ranks (so that no device waits for a late peer inside the
    timing); contenders take turns within a round."""
    import torch
    import torch.distributed as td

    for run in contenders.values():  # warm-up: compile, descriptors, NCCL's channels
        for _ in range(3):
            run()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(ROUNDS):
        for name, run in contenders.items():
            td.barrier()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(CALLS):
                run()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / CALLS)
    return {name: statistics.median(values) for name, values in times.items()}


def _one_size(mib: int, flags, ready, epochs: dict) -> dict:
    """Both collectives on arrays of `mib` MiB per device, asyncdsl's and NCCL's in turn."""
    import torch
    import torch.distributed as td

    import asyncdsl.distributed as dist
    import asyncdsl.kernels as K

    n, device = dist.world_size(), torch.device("cuda", torch.cuda.current_device())
    rows = mib * 2**20 // 2 // COLUMNS // n  # rows of one shard (all-gather) or chunk (reduce-scatter)
    shard = dist.symmetric_like(torch.randn((rows, COLUMNS), device=device).to(torch.bfloat16))
    gathered = dist.symmetric_empty((n, rows, COLUMNS), torch.bfloat16)
    nccl_gathered = torch.empty((n * rows, COLUMNS), dtype=torch.bfloat16, device=device)
    x = dist.symmetric_like(torch.randn((n, rows, COLUMNS), device=device).to(torch.bfloat16))
    reduced = torch.empty((rows, COLUMNS), dtype=torch.bfloat16, device=device)
    nccl_reduced = torch.empty_like(reduced)
    dist.barrier()

    def gather():
        epochs["gather"] += 1
        K.all_gather(shard, flags, epochs["gather"], out=gathered)

    def scatter():
        epochs["scatter"] += 1
        K.reduce_scatter(x, ready, epochs["scatter"], out=reduced)

    gather_ms = _timed({"asyncdsl": gather, "NCCL": lambda: td.all_gather_into_tensor(nccl_gathered, shard)})
    scatter_ms = _timed({"asyncdsl": scatter,
                         "NCCL": lambda: td.reduce_scatter_tensor(nccl_reduced, x.view(n * rows, COLUMNS))})
    torch.cuda.synchronize()
    same = torch.equal(gathered.view(n * rows, COLUMNS).view(torch.int16), nccl_gathered.view(torch.int16))
    difference = (reduced.float() - nccl_reduced.float()).abs().max().item()
    dist.barrier()  # no peer still reads these before they are freed
    for array in (shard, gathered, x):
        dist.free(array)
    gb = mib * 2**20 / 1e9
    return {
        "all-gather asyncdsl (GB/s)": gb / gather_ms["asyncdsl"] * 1e3,
        "all-gather NCCL (GB/s)": gb / gather_ms["NCCL"] * 1e3,
        "reduce-scatter asyncdsl (GB/s)": gb / scatter_ms["asyncdsl"] * 1e3,
        "reduce-scatter NCCL (GB/s)": gb / scatter_ms["NCCL"] * 1e3,
        "all-gather asyncdsl / NCCL": gather_ms["NCCL"] / gather_ms["asyncdsl"],
        "reduce-scatter asyncdsl / NCCL": scatter_ms["NCCL"] / scatter_ms["asyncdsl"],
        "all-gather equals NCCL's": bool(same),
        "reduce-scatter max |asyncdsl - NCCL|": difference,
    }


def _fused_gemm(rows: int, k: int, n_columns: int) -> dict:
    """The all-gather fused with the GEMM (`asyncdsl/kernels/all_gather_gemm.py`: c = gathered a @ b,
    every device its own b) against NCCL's all-gather followed by cuBLAS, TFLOP/s per device."""
    import torch
    import torch.distributed as td

    import asyncdsl.distributed as dist
    from asyncdsl.kernels.all_gather_gemm import all_gather_matmul

    n, device = dist.world_size(), torch.device("cuda", torch.cuda.current_device())
    ctas = torch.cuda.get_device_properties(device).multi_processor_count
    shard = dist.symmetric_like(torch.randn((rows, k), device=device).to(torch.bfloat16))
    b = torch.randn((k, n_columns), device=device).to(torch.bfloat16)
    c, c_peer = (torch.empty((n * rows, n_columns), dtype=torch.bfloat16, device=device) for _ in range(2))
    gathered = torch.empty((n * rows, k), dtype=torch.bfloat16, device=device)
    dist.barrier()

    def nccl_then_cublas():
        td.all_gather_into_tensor(gathered, shard)
        torch.matmul(gathered, b, out=c_peer)

    ms = _timed(
        {"asyncdsl": lambda: all_gather_matmul(shard, b, c, CTAS=ctas), "NCCL + cuBLAS": nccl_then_cublas})
    torch.cuda.synchronize()
    error = ((c.float() - c_peer.float()).norm() / c_peer.float().norm()).item()
    dist.barrier()
    dist.free(shard)
    tflops = 2 * n * rows * k * n_columns / 1e12
    return {
        "fused asyncdsl (TFLOP/s)": tflops / ms["asyncdsl"] * 1e3,
        "NCCL all-gather + cuBLAS (TFLOP/s)": tflops / ms["NCCL + cuBLAS"] * 1e3,
        "asyncdsl / (NCCL + cuBLAS)": ms["NCCL + cuBLAS"] / ms["asyncdsl"],
        "relative difference of the products": error,
    }


def work(sizes: tuple[int, ...], port: int) -> dict:
    """One rank: NCCL joins the NVSHMEM job's processes; both collectives at every size."""
    import torch
    import torch.distributed as td

    import asyncdsl.distributed as dist

    device = torch.device("cuda", torch.cuda.current_device())
    td.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=dist.rank(),
                          world_size=dist.world_size(), device_id=device)
    flags, ready = (dist.symmetric_empty((dist.world_size(),), torch.int32) for _ in range(2))
    flags.zero_()
    ready.zero_()
    epochs = {"gather": 0, "scatter": 0}
    table = {f"{mib} MiB": _one_size(mib, flags, ready, epochs) for mib in sizes}
    table[f"all-gather GEMM {FUSED_ROWS}x{FUSED_K}x{FUSED_N}"] = _fused_gemm(
        FUSED_ROWS // dist.world_size(), FUSED_K, FUSED_N)
    td.destroy_process_group()
    return table


def main() -> None:
    import torch

    import asyncdsl.distributed as dist

    world = int(sys.argv[1]) if len(sys.argv) > 1 else torch.cuda.device_count()
    results = dist.spawn(work, world, SIZES_MIB, 29533)
    table = results[0]  # rank 0's timings (every rank times the same collective calls)
    payload = {
        "world_size": world,
        "what": "one-GPU run: both sides are local copies (script and copy-rate check, not the collective)"
        if world == 1 else f"{world} GPUs of one host over NVLink",
        "configs": "the host functions' own: tiles of 128x128 (all-gather) and 32x128 (reduce-scatter) "
                   "bf16, 4 and 2 in flight, one CTA per SM",
        **table,
    }
    path = write_result(f"collectives-{world}gpu", payload)
    plot_result(path)
    print(f"{'size':>9} {'AG asyncdsl':>12} {'AG NCCL':>9} {'ratio':>6} {'RS asyncdsl':>12} "
          f"{'RS NCCL':>9} {'ratio':>6}")
    for size, row in table.items():
        if "fused asyncdsl (TFLOP/s)" in row:
            print(f"{size}: fused {row['fused asyncdsl (TFLOP/s)']:.0f} TFLOP/s, NCCL + cuBLAS "
                  f"{row['NCCL all-gather + cuBLAS (TFLOP/s)']:.0f} "
                  f"({row['asyncdsl / (NCCL + cuBLAS)']:.2f}x)")
            continue
        print(f"{size:>9} {row['all-gather asyncdsl (GB/s)']:12.0f} {row['all-gather NCCL (GB/s)']:9.0f} "
              f"{row['all-gather asyncdsl / NCCL']:6.2f} {row['reduce-scatter asyncdsl (GB/s)']:12.0f} "
              f"{row['reduce-scatter NCCL (GB/s)']:9.0f} {row['reduce-scatter asyncdsl / NCCL']:6.2f}")


if __name__ == "__main__":
    main()
