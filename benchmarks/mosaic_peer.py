"""JAX's Pallas Mosaic GPU Hopper matmul (`hopper_matmul_mgpu`) as a same-run peer for the bf16
matmul benchmark: its median device time on this GPU, at its best configuration found on an H200.

Targets jax 0.10.2 / 0.11.x, whose module exposes `TuningConfig` (a frozen dataclass),
`MatmulDimension` (enum M/N) and `matmul(a, b, c, config)`. Before jax 0.10 `matmul` took
`(a, b, config)` (no `c` addend); both are handled by looking at the signature, and config keys are
checked against the dataclass fields, so a renamed field fails with a clear reason rather than
silently falling back to a default.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import statistics
import time

# JAX grabs 75% of GPU memory when its backend starts; torch and Triton share this process in the
# benchmarks, so allocate on demand instead (only takes effect if jax has not started yet).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# Per warpgroup tile 128x128 (two consumer warpgroups side by side along N make a 128x256 CTA
# tile), 64-deep K steps, 4 stages in flight, CTAs walk the output along M in bands 16 tiles wide,
# the default 64x64 epilogue tiles, no clusters.
BEST = dict(
    tile_m=128,
    tile_n=128,
    tile_k=64,
    max_concurrent_steps=4,
    wg_dimension="N",
    grid_minor_dim="M",
    grid_tile_width=16,
)

ITERATIONS = 20
HOPPER_BF16_TFLOPS = 989.0  # dense bf16 tensor-core peak, for the utilization printed below


def _module():
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu

    return hopper_matmul_mgpu


def _tuning_config(config: dict | None):
    """BEST with `config`'s keys overriding, as the installed module's TuningConfig."""
    hm = _module()
    fields = {f.name for f in dataclasses.fields(hm.TuningConfig)}
    wanted = {**BEST, **(config or {})}
    unknown = sorted(set(wanted) - fields)
    if unknown:
        raise ValueError(f"TuningConfig of this jax has no field(s) {unknown}; it has {sorted(fields)}")
    for name in ("wg_dimension", "grid_minor_dim", "cluster_dimension"):
        if isinstance(wanted.get(name), str):
            wanted[name] = hm.MatmulDimension[wanted[name]]
    return hm.TuningConfig(**wanted)


@functools.cache
def _jitted(config):
    import jax

    hm = _module()
    if "c" in inspect.signature(hm.matmul).parameters:  # jax >= 0.10: optional C addend
        return jax.jit(lambda a, b: hm.matmul(a, b, None, config=config))
    return jax.jit(lambda a, b: hm.matmul(a, b, config=config))


def mosaic_matmul(a, b, config: dict | None = None):
    """a @ b with the Mosaic GPU Hopper kernel (bf16 in, bf16 out, f32 accumulation)."""
    return _jitted(_tuning_config(config))(a, b)


def _gpu_problem():
    """Why the kernel can't run here, or None when it can."""
    try:
        import jax

        _module()
    except Exception as e:  # noqa: BLE001 - any import failure means "no peer", not a crash
        # The module imports jax._src.test_util, which needs absl-py even outside tests.
        hint = " (pip install absl-py)" if "absl" in str(e) else ""
        return f"jax / hopper_matmul_mgpu unavailable: {type(e).__name__}: {e}{hint}"
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as e:
        return f"jax sees no GPU ({e})"
    capability = getattr(gpus[0], "compute_capability", None)
    if capability is not None and capability != "9.0":
        return f"hopper_matmul_mgpu needs sm_90 (Hopper), got compute capability {capability}"
    return None


def _check(out, a, b, tol: float = 1e-2) -> None:
    """Raise when the kernel is clearly wrong. bf16 output rounding alone gives a normwise relative
    error around 2e-3 against an f32 reference, so 1e-2 only trips on real errors (or NaNs)."""
    import jax
    import jax.numpy as jnp

    ref = jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32), precision=jax.lax.Precision.HIGHEST)
    rel = float(jnp.linalg.norm(out.astype(jnp.float32) - ref) / jnp.linalg.norm(ref))
    if not rel <= tol:
        raise AssertionError(f"Mosaic matmul {a.shape}@{b.shape} is off: relative error {rel:.3g} > {tol}")


def _median_ms(f, a, b) -> float:
    """Median kernel time over ITERATIONS back-to-back runs, measured with CUPTI through Mosaic
    GPU's own profiler (what the module's main() uses): kernel time only, no launch gaps. CUDA events
    on torch's stream (triton's do_bench) can't be used: JAX launches on its own stream, so they
    time only the asynchronous dispatch (~3 us for a 0.35 ms kernel). Falls back
    to host wall clock per run if CUPTI can't be used in this process."""
    import jax
    from jax.experimental.mosaic.gpu import profiler

    try:
        _, times = profiler.measure(f, iterations=ITERATIONS)(a, b)
    except RuntimeError as e:
        print(f"mosaic_peer: CUPTI timing unavailable ({e}); using wall clock")
        times = None
    if times:
        return statistics.median(times)
    walls = []
    for _ in range(ITERATIONS):
        start = time.perf_counter()
        jax.block_until_ready(f(a, b))
        walls.append((time.perf_counter() - start) * 1e3)
    return statistics.median(walls)


def _prepared(m: int, n: int, k: int, config: dict | None):
    """(the compiled kernel, a, b) on random normal bf16 inputs, compiled and checked; None (with
    a printed reason) when it can't run."""
    problem = _gpu_problem()
    if problem:
        print(f"mosaic_peer: {problem}")
        return None
    import jax
    import jax.numpy as jnp

    try:
        f = _jitted(_tuning_config(config))
        a = jax.random.normal(jax.random.key(0), (m, k), jnp.bfloat16)
        b = jax.random.normal(jax.random.key(1), (k, n), jnp.bfloat16)
        out = jax.block_until_ready(f(a, b))  # compiles here, outside any timing
    except Exception as e:  # noqa: BLE001 - shape not tileable, SMEM overflow, lowering errors
        print(f"mosaic_peer: kernel can't run for {m}x{n}x{k}: {type(e).__name__}: {e}")
        return None
    _check(out, a, b)
    return f, a, b


def mosaic_matmul_runner(m: int, n: int, k: int, config: dict | None = None):
    """(run, wait) for the Mosaic kernel on random normal (m,k)@(k,n) bf16 inputs, compiled and
    checked: `run()` launches once (asynchronously), `wait()` blocks until the last launch ended;
    None (with a printed reason) when it can't run.  For timing it among other kernels under the
    same clock and power conditions (`common.interleaved_ms`)."""
    prepared = _prepared(m, n, k, config)
    if prepared is None:
        return None
    import jax

    f, a, b = prepared
    last = [None]

    def run() -> None:
        last[0] = f(a, b)

    def wait() -> None:
        jax.block_until_ready(last[0])

    return run, wait


def mosaic_matmul_ms(m: int, n: int, k: int, config: dict | None = None) -> float | None:
    """Median device time (ms) of JAX Mosaic GPU's Pallas `hopper_matmul_mgpu` kernel for
    (m,k)@(k,n) bf16 -> bf16 on random normal inputs, at its best configuration measured on this
    H200 (BEST) unless `config` overrides; None (with a printed reason) when jax or the kernel can't
    run."""
    prepared = _prepared(m, n, k, config)
    if prepared is None:
        return None
    f, a, b = prepared
    return _median_ms(f, a, b)


def _tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2 * m * n * k / (ms * 1e-3) / 1e12


if __name__ == "__main__":
    try:
        import jax

        print(f"jax {jax.__version__}, config {BEST}")
    except ImportError:
        pass
    for m, n, k in [(8192, 8192, 8192), (4096, 8192, 4096)]:
        ms = mosaic_matmul_ms(m, n, k)
        if ms is not None:
            tf = _tflops(m, n, k, ms)
            print(f"{m}x{n}x{k}: {ms:.3f} ms  {tf:.0f} TFLOP/s  ({tf / HOPPER_BF16_TFLOPS:.0%} of bf16 peak)")
