"""How long a workload waits for its kernels: every kernel of the library at the shapes of its
benchmarks (the GEMM, softmax, RMSNorm, LayerNorm, SwiGLU, the fp8 row quantisation, the BHSD
permute), compiled in fresh processes by `asyncdsl.warmup`:

- the GEMM alone, empty caches: `import asyncdsl`, the first compile (the compiler's import,
  trace, passes, PTX), then on a GPU its load (the driver's JIT) or without one ptxas; and the
  same from the disk cache (`benchmarks/compile_latency.py` times the GEMM's first launch
  against Triton's);
- the workload, empty caches, compiled in this process (`processes=1`) and by one worker
  process per CPU; then from the disk cache;
- eight processes warming the workload up at once over one empty cache (the ranks of a job):
  the wall clock until the last is ready, and how many compiles they ran between them (the
  cache's per-key locks make it one per kernel).

Each case is a fresh Python process with its own empty `ASYNCDSL_CACHE_DIR` and, on a GPU,
`CUDA_CACHE_PATH` (the driver's JIT cache); the cold cases take turns over several processes.
On a GPU each kernel is loaded (the driver's JIT compile); without one (`--cpu`, or no GPU
found) nothing is loaded and the GEMM's PTX is assembled by ptxas instead.

The package's modules are compiled to bytecode first, as an install from a wheel leaves them
(pip compiles them at install): an editable install under PYTHONDONTWRITEBYTECODE has none, and
then every process compiles the compiler's modules from source, a third of its import.  The
GEMM's first compile is broken down into the imports it ran, by package (`ImportClock`: each
module's own code, its imports excluded), and the rest: trace, passes and PTX.

    python benchmarks/first_call.py          # on the GPU: printed, and kept with the other results
    python benchmarks/first_call.py --cpu    # compile only, printed
    python benchmarks/first_call.py --workload llama.workload   # a run's kernels as the workload
                                             # (`llama_train.py --save-workload llama.workload`)
"""

from __future__ import annotations

import compileall
import importlib.abc
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from common import empty_dir, plot_result, write_result  # noqa: E402

COLD_PROCESSES = 3
RANKS = 8
WORKLOAD_FILE: list[str] = []  # `--workload PATH`: the workload's kernels read from PATH


def gemm():
    """The library's GEMM kernel (the one place that says where it lives)."""
    from asyncdsl.kernels.gemm_cooperative import matmul

    return matmul


def gemm_specializations(sms: int) -> list:
    """The GEMM at the shapes of benchmarks/matmul.py, a CTA per SM."""
    import asyncdsl as ad
    from matmul import SHAPES

    kernel = gemm()
    return [kernel.specialization(ad.ArraySpec((m, k), ad.bfloat16), ad.ArraySpec((k, n), ad.bfloat16),
                                  ad.ArraySpec((m, n), ad.bfloat16), CTAS=sms) for m, n, k in SHAPES]


def workload(sms: int = 132) -> list:
    """Every kernel of the library at the shapes its benchmarks run (register_tiles.py,
    permute_bhsd.py, matmul.py), as the library's host functions would choose them."""
    import importlib

    import asyncdsl as ad
    from permute_bhsd import SHAPES as PERMUTE_SHAPES
    from register_tiles import WORKLOADS

    # The modules (`asyncdsl.kernels` exports host functions of the same names).
    layer_norm, permute_bhsd, quantize_fp8, rms_norm, softmax, swiglu = (
        importlib.import_module(f"asyncdsl.kernels.{name}")
        for name in ("layer_norm", "permute_bhsd", "quantize_fp8", "rms_norm", "softmax", "swiglu"))
    bf16, spec = ad.bfloat16, ad.ArraySpec
    specializations = gemm_specializations(sms)
    for m, n in WORKLOADS["softmax"]:
        kernel, constexprs = softmax.choose(n)
        specializations.append(kernel.specialization(spec((m, n), bf16), spec((m, n), bf16), **constexprs))
    for m, n in WORKLOADS["rms_norm"]:
        kernel, constexprs = rms_norm.choose(n)
        specializations.append(kernel.specialization(spec((m, n), bf16), spec((n,), bf16), spec((m, n), bf16),
                                                     **constexprs))
    for m, n in WORKLOADS["layer_norm"]:
        kernel, constexprs = layer_norm.choose(n)
        specializations.append(kernel.specialization(spec((m, n), bf16), spec((n,), bf16), spec((n,), bf16),
                                                     spec((m, n), bf16), **constexprs))
    for shape in WORKLOADS["swiglu"]:
        specializations.append(swiglu.swiglu_kernel.specialization(spec(shape, bf16), spec(shape, bf16),
                                                                   spec(shape, bf16)))
    for m, n in WORKLOADS["rowwise_fp8_quant"]:
        kernel, constexprs = quantize_fp8.choose(n)
        specializations.append(kernel.specialization(spec((m, n), bf16), spec((m, n), ad.float8_e4m3fn),
                                                     spec((m,), ad.float32), **constexprs))
    for b, h, s, d in PERMUTE_SHAPES:
        block = permute_bhsd.choose((b, h, s, d), 2)
        specializations.append(permute_bhsd.permute_bhsd_kernel.specialization(
            spec((b, h, s, d), bf16), spec((b, s, h, d), bf16), BS=block))
    return specializations


class ImportClock(importlib.abc.MetaPathFinder):
    """The seconds each module's own code takes to import (the modules it imports excluded),
    summed by package group and by the phase of the case it is imported in.  First on
    `sys.meta_path`, it sees every import, `importlib.import_module`'s (the compiler's lazy
    loads) as well as `import` statements; it times a module by wrapping its loader's
    `exec_module`."""

    GROUPS = ("xdsl.dialects", "xDSL core", "asyncdsl.dialects", "asyncdsl.passes", "asyncdsl, the rest",
              "other modules")

    def __init__(self) -> None:
        self.phase = "start"
        self.seconds: dict[tuple[str, str], float] = {}
        self._inner: list[float] = []  # per module being imported: its imports' seconds

    @classmethod
    def installed(cls) -> ImportClock:
        clock = cls()
        sys.meta_path.insert(0, clock)
        return clock

    def find_spec(self, name, path, target=None):
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    loader = spec.loader
                    # Built-in and frozen modules' loaders are classes shared by all: not timed.
                    if loader is not None and not isinstance(loader, type) and hasattr(loader, "exec_module"):
                        loader.exec_module = self._timed(name, loader.exec_module)
                    return spec
        return None

    def _timed(self, name: str, exec_module):
        def exec_timed(module) -> None:
            start = time.perf_counter()
            self._inner.append(0.0)
            try:
                exec_module(module)
            finally:
                seconds, inner = time.perf_counter() - start, self._inner.pop()
                if self._inner:
                    self._inner[-1] += seconds
                key = (self.phase, self.group(name))
                self.seconds[key] = self.seconds.get(key, 0.0) + seconds - inner
        return exec_timed

    @staticmethod
    def group(name: str) -> str:
        if name.startswith("xdsl.dialects."):
            return "xdsl.dialects"
        for group in ("asyncdsl.dialects", "asyncdsl.passes"):
            if name == group or name.startswith(group + "."):
                return group
        top = name.split(".")[0]
        return {"xdsl": "xDSL core", "asyncdsl": "asyncdsl, the rest"}.get(top, "other modules")

    def by_group(self, phase: str) -> dict[str, float]:
        return {group: self.seconds.get((phase, group), 0.0) for group in self.GROUPS}


# A fresh process: imports, then the case; prints one JSON line of seconds.
GEMM_CASE = r"""
import json, sys, time
from first_call import ImportClock
clock = ImportClock.installed()
t0 = time.perf_counter()
import asyncdsl as ad
t1 = time.perf_counter()
from first_call import gemm, gemm_specializations
from asyncdsl.runtime import has_gpu, load_kernel
from asyncdsl.runtime.ptxas import assemble
on_gpu = sys.argv[1] == "gpu" and has_gpu()
sms = 132
if on_gpu:
    from asyncdsl.runtime import device_facts
    sms = device_facts(0).multiprocessor_count
specialization = gemm_specializations(sms)[0]
t2 = time.perf_counter()
clock.phase = "compile"
binary = specialization.binary()
t3 = time.perf_counter()
clock.phase = "load"
load_kernel(binary) if on_gpu else assemble(binary.ptx, binary.arch)
t4 = time.perf_counter()
imports = clock.by_group("compile")
print(json.dumps({"import asyncdsl": t1 - t0, "import the GEMM's module": t2 - t1, "compile or disk": t3 - t2,
                  **{f"compile: imports, {group}": seconds for group, seconds in imports.items()},
                  "compile: trace, passes, PTX (or the disk)": t3 - t2 - sum(imports.values()),
                  ("driver JIT and load" if on_gpu else "ptxas"): t4 - t3, "first call's work": t4 - t2}))
"""

WORKLOAD_CASE = r"""
import json, sys, time
import asyncdsl as ad
from first_call import workload
from asyncdsl.runtime import has_gpu
on_gpu = sys.argv[1] == "gpu" and has_gpu()
sms = 132
if on_gpu:
    from asyncdsl.runtime import device_facts
    sms = device_facts(0).multiprocessor_count
processes = int(sys.argv[2]) or None
specializations = ad.load_workload(sys.argv[3]) if len(sys.argv) > 3 else workload(sms)
report = ad.warmup(specializations, processes=processes, load=on_gpu)
print(json.dumps({"seconds": report.seconds, "kernels": len(report.kernels),
                  "compiled": report.count("compiled"), "from disk": report.count("disk"),
                  "processes": report.processes, "ready at": time.time()}))
"""


def fresh(code: str, mode: str, *args: str, caches: dict) -> dict:
    """Run `code` in a new process over `caches` (environment variables); its JSON line."""
    path = os.pathsep.join(p for p in (os.path.dirname(__file__), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", code, mode, *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path, **caches}, check=False)
    if done.returncode:
        raise RuntimeError(f"benchmark subprocess failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def empty_caches() -> dict:
    return {"ASYNCDSL_CACHE_DIR": empty_dir(), "CUDA_CACHE_PATH": empty_dir(), "ASYNCDSL_KERNEL_CACHE": "1"}


def ranks_at_once(mode: str, caches: dict) -> dict:
    """`RANKS` processes warming the workload up at once over `caches`: seconds until the last is
    ready, and the compiles they ran between them."""
    path = os.pathsep.join(p for p in (os.path.dirname(__file__), os.environ.get("PYTHONPATH")) if p)
    start = time.time()
    environment = {**os.environ, "PYTHONPATH": path, **caches}
    ranks = [subprocess.Popen([sys.executable, "-c", WORKLOAD_CASE, mode, "1", *WORKLOAD_FILE],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
             for _ in range(RANKS)]
    reports = []
    for rank in ranks:
        out, err = rank.communicate()
        if rank.returncode:
            raise RuntimeError(f"a rank failed:\n{out}\n{err}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return {"seconds until every rank is ready": max(r["ready at"] for r in reports) - start,
            "kernels": reports[0]["kernels"], "compiles between them": sum(r["compiled"] for r in reports)}


def compile_bytecode() -> None:
    """The package's modules compiled to bytecode, where they have none (see the docstring)."""
    import asyncdsl.dialects
    import asyncdsl.passes

    for package in (asyncdsl, asyncdsl.dialects, asyncdsl.passes):  # apart in a source tree
        for folder in package.__path__:
            compileall.compile_dir(folder, quiet=1)


def main() -> None:
    from asyncdsl.runtime import has_gpu

    mode = "cpu" if "--cpu" in sys.argv or not has_gpu() else "gpu"
    if "--workload" in sys.argv:  # a run's kernels (`asyncdsl.save_workload`) instead of `workload()`
        WORKLOAD_FILE.append(os.path.abspath(sys.argv[sys.argv.index("--workload") + 1]))
    compile_bytecode()
    gemm_cold: dict[str, list[float]] = {}
    workload_cold: dict[str, list[float]] = {"1 process": [], "a worker per CPU": []}
    for _ in range(COLD_PROCESSES):  # in turns, so that a slow spell of the host falls on all alike
        for name, seconds in fresh(GEMM_CASE, mode, caches=empty_caches()).items():
            gemm_cold.setdefault(name, []).append(seconds)
        workload_cold["1 process"].append(
            fresh(WORKLOAD_CASE, mode, "1", *WORKLOAD_FILE, caches=empty_caches())["seconds"])
        workload_cold["a worker per CPU"].append(
            fresh(WORKLOAD_CASE, mode, "0", *WORKLOAD_FILE, caches=empty_caches())["seconds"])
        print("cold, so far:", json.dumps(gemm_cold), json.dumps(workload_cold), flush=True)
    caches = empty_caches()
    fresh(GEMM_CASE, mode, caches=caches)
    gemm_warm = [fresh(GEMM_CASE, mode, caches=caches) for _ in range(COLD_PROCESSES)]
    first = fresh(WORKLOAD_CASE, mode, "1", *WORKLOAD_FILE, caches=caches)
    from_disk = [fresh(WORKLOAD_CASE, mode, "1", *WORKLOAD_FILE, caches=caches)
                 for _ in range(COLD_PROCESSES)]
    assert all(report["from disk"] == report["kernels"] for report in from_disk), from_disk
    results = {
        "GEMM, empty caches (s)": {name: statistics.median(values) for name, values in gemm_cold.items()},
        "GEMM, disk cache (s)": {name: statistics.median(case[name] for case in gemm_warm)
                                 for name in gemm_warm[0]},
        f"{os.path.basename(WORKLOAD_FILE[0]) if WORKLOAD_FILE else 'workload'} of {first['kernels']} "
        "kernels (s)": {
            "empty caches, 1 process": statistics.median(workload_cold["1 process"]),
            f"empty caches, a worker per CPU ({os.cpu_count()})":
                statistics.median(workload_cold["a worker per CPU"]),
            "disk cache": statistics.median(report["seconds"] for report in from_disk),
        },
        f"{RANKS} processes, one empty cache": ranks_at_once(mode, empty_caches()),
        "mode": ("GPU: kernels loaded (driver JIT)" if mode == "gpu"
                 else "CPU: compile only, the GEMM assembled by ptxas"),
    }
    text = json.dumps(results, indent=1)
    print(text)
    if mode == "gpu":
        plot_result(write_result("first_call", results))


if __name__ == "__main__":
    main()
