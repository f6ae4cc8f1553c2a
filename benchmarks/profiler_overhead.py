"""What the on-device profiler costs a kernel: the bf16 GEMM of
`asyncdsl/kernels/gemm_cooperative.py`, launched plainly and profiled (its regions timed: a
dozen per K step of a CTA, from the producer's "wait free" and "load" to each consumer's "k
step", "wait loaded", "mma", "wait mma" and "release"), taking turns in a random order each
round, each launch alone between two CUDA events enqueued while the stream is held (as
`kernel.profile` records them, `runtime/profile.py`), so that neither includes the host's launch
time. Also: how far the trace's span (first warpgroup entry to last exit) is from the events'
time, in the last profiled run.

    python benchmarks/profiler_overhead.py [MxNxK ...]
"""

from __future__ import annotations

import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import plot_result, write_result  # noqa: E402

SHAPES = ((8192, 8192, 8192), (4096, 8192, 4096))
ROUNDS = 15
HOLD_CYCLES = 1_000_000  # about 0.5 ms of the SMs' clock


def measure(m: int, n: int, k: int) -> dict:
    import torch

    from asyncdsl.kernels.gemm_cooperative import matmul
    from asyncdsl.runtime import device_facts

    ctas = device_facts(0).multiprocessor_count
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    exact = a.float() @ b.float()

    def plain() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(HOLD_CYCLES)  # the GPU is busy while the host launches: the events time the kernel
        start.record()
        matmul(a, b, c, CTAS=ctas)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    profiles = []  # the regions are decoded only for the last one (seconds of host time each)

    def profiled() -> float:
        torch.cuda._sleep(HOLD_CYCLES)  # as for `plain`: the same idle time before the kernel
        profiles[:] = [matmul.profile(a, b, c, CTAS=ctas)]
        return profiles[0].event_ns * 1e-6

    for run in (plain, profiled, plain, profiled):  # compile, load, warm up
        run()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {"plain": [], "profiled": []}
    order, shuffle = list(times), random.Random(0).shuffle
    for _ in range(ROUNDS):
        shuffle(order)
        for name in order:
            torch.cuda.synchronize()
            times[name].append((plain if name == "plain" else profiled)())
    error = float((c.float() - exact).norm() / exact.norm())
    assert error < 1e-2, f"the profiled GEMM is wrong: relative error {error}"
    last = profiles[0]
    rows = last.summary_rows()
    steps = sum(row["count"] for row in rows if row["region"] == "k step") // 2  # two consumers a CTA
    regions = sum(row["count"] for row in rows if row["region"] != "epilogue")
    ms = {name: statistics.median(values) for name, values in times.items()}
    return {
        "time (ms)": ms,
        "overhead": ms["profiled"] / ms["plain"] - 1,
        "regions per CTA K step": regions / steps,
        "trace span / event time (last run)": last.total / last.event_ns,
        "rounds": ROUNDS,
        "relative error vs float32 (profiled run)": error,
        "summary": rows,
    }


def main(argv: list[str]) -> None:
    shapes = [tuple(int(x) for x in s.split("x")) for s in argv] or SHAPES
    payload: dict = {}
    details = {}
    for m, n, k in shapes:
        name = f"{m}x{n}x{k}"
        row = measure(m, n, k)
        payload[f"{name} GEMM (ms)"] = row["time (ms)"]
        details[name] = {key: value for key, value in row.items() if key != "time (ms)"}
        print(name, {key: round(value, 4) for key, value in row["time (ms)"].items()},
              f"overhead={row['overhead']:+.2%}", f"regions/step={row['regions per CTA K step']:.1f}",
              f"span/events={row['trace span / event time (last run)']:.3f}", flush=True)
    payload["details"] = details
    path = write_result("profiler_overhead", payload)
    plot_result(path)
    print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
