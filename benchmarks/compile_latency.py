"""How long the first GEMM call of a process takes to launch, asyncdsl against Triton's persistent
TMA matmul, in one run: host seconds from the first call to its return (the launch enqueued),
measured inside a fresh process after its imports (no Python start-up, no import time: also not
cuda-python's, which asyncdsl otherwise imports on its first launch), the median of several
processes each (the cold cases, whose time is mostly the driver's JIT, take turns over COLD_PROCESSES
processes each and keep every sample: on the H200's host one JIT of the GEMM took either about 125
or about 200 ms, so three processes could land on either side):

- empty caches: trace, passes, PTX, cubin, load, tensor maps, launch (Triton: its JIT compile);
  the driver's JIT cache (`CUDA_CACHE_PATH`) empty too, since a kernel with `setmaxnreg` is
  compiled by that JIT (`runtime/jit_link.py`);
- empty caches, the compiler imported before the call (xDSL, the dialects and the passes load
  with the first trace otherwise): what the first call costs beyond imports, i.e. trace,
  passes, PTX, the JIT compile, load and launch;
- empty caches, after another kernel: the same first call of the GEMM in a process that first ran
  an unrelated kernel (the library's softmax): what compiling one more kernel costs once the
  compiler, the driver's JIT and the launch path are loaded;
- the two cases before with the GEMM in 128x192 tiles (`BN=192`, as fast at 8192^3 within a
  few per cent, `benchmarks/matmul.py`), whose PTX ptxas compiles in about two thirds of the time;
- warm disk cache: a second process over the caches the first filled (asyncdsl takes the
  compiled kernel from disk without tracing it, `runtime/binary_cache.py`);
- warm disk cache with ASYNCDSL_KERNEL_CACHE=0: the cubin alone from disk, traced again.

    python benchmarks/compile_latency.py
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))

from common import empty_dir, fresh_process_seconds, plot_result, write_result  # noqa: E402

FIRST_CALL = r"""
import time, torch
from asyncdsl.kernels.gemm_cooperative import matmul
from asyncdsl.runtime import driver
driver.api()  # cuda-python's import (~80 ms) is import time, as torch's and triton's are
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
c = torch.empty(8192, 8192, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
t0 = time.perf_counter()
matmul(a, b, c, CTAS=torch.cuda.get_device_properties(0).multi_processor_count)
t = time.perf_counter() - t0
torch.cuda.synchronize()
assert torch.isfinite(c[:64, :64].float()).all()
print(t)
"""

# The same first call with the compiler's modules imported beforehand (what `import asyncdsl`
# leaves to the first trace), so that the time is trace, passes, PTX, JIT compile, load, launch.
FIRST_CALL_COMPILER_IMPORTED = FIRST_CALL.replace(
    "a = torch.randn", "import asyncdsl.jit.specialize, asyncdsl.passes.pipeline\na = torch.randn", 1)

# The same first call after an unrelated kernel (softmax, register tiles: no wgmma) ran in the process.
FIRST_CALL_AFTER_ANOTHER = FIRST_CALL.replace(
    "a = torch.randn", """import asyncdsl.kernels
x = torch.randn(256, 1024, device="cuda", dtype=torch.bfloat16)
asyncdsl.kernels.softmax(x)
torch.cuda.synchronize()
a = torch.randn""", 1)


def in_128x192_tiles(code: str) -> str:
    """The same first call of the GEMM in its 128x192 configuration: 96 accumulator registers a
    consumer thread against 128, and ptxas's time grows with them (docs/hardware.md §14.7)."""
    return code.replace("multi_processor_count)", "multi_processor_count, BN=192)", 1)


TRITON_FIRST_CALL = r"""
import time, torch
from triton_peers import triton_matmul
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
c = torch.empty(8192, 8192, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
t0 = time.perf_counter()
triton_matmul(a, b, c, num_sms=torch.cuda.get_device_properties(0).multi_processor_count)
t = time.perf_counter() - t0
torch.cuda.synchronize()
print(t)
"""

PROCESSES = 3
COLD_PROCESSES = 9


def median_seconds(code: str, env: dict) -> float:
    return statistics.median(fresh_process_seconds(code, env) for _ in range(PROCESSES))


def empty_caches() -> dict:
    """asyncdsl's disk caches and the driver's JIT cache, all new and empty."""
    return {"ASYNCDSL_CACHE_DIR": empty_dir(), "CUDA_CACHE_PATH": empty_dir()}


def main() -> None:
    results: dict = {}
    cold = (("empty caches", FIRST_CALL), ("empty caches, compiler imported", FIRST_CALL_COMPILER_IMPORTED),
            ("empty caches, after another kernel", FIRST_CALL_AFTER_ANOTHER),
            ("128x192 tiles, empty caches, compiler imported",
             in_128x192_tiles(FIRST_CALL_COMPILER_IMPORTED)),
            ("128x192 tiles, empty caches, after another kernel", in_128x192_tiles(FIRST_CALL_AFTER_ANOTHER)))
    samples: dict[str, list[float]] = {name: [] for name, _ in cold}
    for _ in range(COLD_PROCESSES):  # in turns, so that a slow spell of the host falls on all alike
        for name, code in cold:
            samples[name].append(fresh_process_seconds(code, empty_caches()))
    for name, values in samples.items():
        results[f"asyncdsl, {name} (s)"] = statistics.median(values)
    caches = empty_caches()
    fresh_process_seconds(FIRST_CALL, caches)
    results["asyncdsl, warm disk cache (s)"] = median_seconds(FIRST_CALL, caches)
    results["asyncdsl, warm cubin cache, traced again (s)"] = median_seconds(
        FIRST_CALL, {**caches, "ASYNCDSL_KERNEL_CACHE": "0"})
    triton_cold = [fresh_process_seconds(TRITON_FIRST_CALL, {"TRITON_CACHE_DIR": empty_dir()})
                   for _ in range(PROCESSES)]
    results["Triton, empty caches (s)"] = statistics.median(triton_cold)
    triton_cache = empty_dir()
    fresh_process_seconds(TRITON_FIRST_CALL, {"TRITON_CACHE_DIR": triton_cache})
    results["Triton, warm disk cache (s)"] = median_seconds(TRITON_FIRST_CALL,
                                                            {"TRITON_CACHE_DIR": triton_cache})
    path = write_result("compile_latency", {
        "bf16 GEMM 8192^3, first call (s)": results,
        "cold samples, in the order taken (s)": {
            name: [round(v, 4) for v in values] for name, values in samples.items()},
    })
    plot_result(path)
    for key, value in results.items():
        print(f"{key:48s} {value * 1e3:9.2f} ms")
    print(path)


if __name__ == "__main__":
    main()
