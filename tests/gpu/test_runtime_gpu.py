"""The runtime on a real Hopper GPU: load hand-written PTX through `load_kernel(KernelBinary(...))`,
launch it on torch tensors (and CuPy/JAX arrays where present) and compare bit-exactly with numpy.

The kernel is the reference TMA tile copy of `ptx-examples/tma_copy_tile.ptx` (one CTA: TMA 2-D load
into shared memory, y = 2x + 1 in place, TMA 2-D store), rewritten so that its only parameters are
the kinds a `KernelBinary` has: tensor maps by value, a descriptor scratch pointer, and a pointer
to a counter every CTA increments.  The box shape and the shared-memory offset are baked into the
PTX, and the descriptors are read from wherever the binary's parameters say they are.

Run:  python -m pytest tests/gpu/test_runtime_gpu.py -v -rA -s
"""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

from asyncdsl import dtypes
from asyncdsl.errors import ArgumentError, PtxAssemblyError, ResourceError
from asyncdsl.kernel_binary import (
    DescriptorScratchParam,
    KernelBinary,
    PointerParam,
    TensorMapParam,
    TiledTensorMapSpec,
)
from asyncdsl.runtime import (
    clear_loaded_kernels,
    device_array,
    device_facts,
    has_gpu,
    host_seconds_per_call,
    load_kernel,
)

pytestmark = pytest.mark.gpu

if not has_gpu():
    pytest.skip("needs a CUDA GPU (asyncdsl.runtime.has_gpu() is False)", allow_module_level=True)
if device_facts(0).compute_capability != (9, 0):
    pytest.skip(f"needs a Hopper GPU (sm_90); {device_facts(0)} is not one", allow_module_level=True)
torch = pytest.importorskip("torch")

ROWS, COLS = 256, 192  # the copied matrix (f32)
BOX_ROWS, BOX_COLS = 64, 32  # one CTA's tile: 8 KiB, 128 bytes per row (fits the 128B swizzle)
SRC, DST, COUNTER = 0, 1, 2  # argument indices


# --------------------------------------------------------------------------------------- the kernel


def copy_tile_ptx(name: str, params: tuple, box_rows: int, box_cols: int, tile_offset: int = 0) -> str:
    """PTX of the tile-copy kernel whose parameters are `params` (KernelBinary params): descriptor
    0 is the source map, descriptor 1 the destination map, argument 2 a u32 CTA counter."""
    declarations, loads = [], []
    for slot, param in enumerate(params):
        symbol = f"{name}_param_{slot}"
        if isinstance(param, TensorMapParam):
            declarations.append(f".param .align 64 .b8 {symbol}[128]")
            register = f"%rd{1 + param.descriptor_index}"
            loads += [f"mov.b64 {register}, {symbol};", f"cvta.param.u64 {register}, {register};"]
        elif isinstance(param, DescriptorScratchParam):
            declarations.append(f".param .u64 {symbol}")
            loads.append(f"ld.param.u64 %rd4, [{symbol}];")
            # A map in global memory is used through its generic address, as is.
            covered = {p.descriptor_index for p in params if isinstance(p, TensorMapParam)}
            for descriptor, offset in enumerate(param.slot_offsets):
                if descriptor not in covered:
                    loads.append(f"add.s64 %rd{1 + descriptor}, %rd4, {offset};")
        else:
            declarations.append(f".param .u64 {symbol}")
            loads += [f"ld.param.u64 %rd3, [{symbol}];", "cvta.to.global.u64 %rd3, %rd3;"]
    tile_bytes = box_rows * box_cols * 4
    body = "\n    ".join(loads)
    return f"""
.version 8.0
.target sm_90a
.address_size 64

.extern .shared .align 1024 .b8 dsmem[];

.visible .entry {name}(
    {(","+chr(10)+"    ").join(declarations)}
)
.reqntid 128, 1, 1
{{
    .reg .pred  %p<4>;
    .reg .b32   %r<24>;
    .reg .f32   %f<4>;
    .reg .b64   %rd<8>;
    .shared .align 8 .b64 tma_bar;

    {body}
    mov.u32         %r3, {tile_bytes};
    mov.u32         %r4, %tid.x;
    mov.u32         %r5, %ctaid.x;
    mul.lo.u32      %r6, %r5, {box_cols};
    mov.u32         %r7, %ctaid.y;
    mul.lo.u32      %r8, %r7, {box_rows};
    mov.u32         %r9, dsmem;
    add.u32         %r9, %r9, 1023;
    and.b32         %r9, %r9, -1024;
    add.u32         %r9, %r9, {tile_offset};
    mov.u32         %r10, tma_bar;
    setp.eq.u32     %p1, %r4, 0;

    @!%p1 bra       $L_init_done;
    prefetch.tensormap [%rd1];
    mbarrier.init.shared::cta.b64 [%r10], 1;
    fence.mbarrier_init.release.cluster;
$L_init_done:
    bar.sync        0;

    @!%p1 bra       $L_issued;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r10], %r3;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes \
[%r9], [%rd1, {{%r6, %r8}}], [%r10];
$L_issued:
    mov.u32         %r11, 0;
$L_wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r10], %r11;
    @!%p2 bra       $L_wait;

    shr.u32         %r12, %r3, 2;
    mov.u32         %r13, %r4;
$L_loop:
    setp.ge.u32     %p3, %r13, %r12;
    @%p3 bra        $L_loop_done;
    shl.b32         %r14, %r13, 2;
    add.s32         %r15, %r9, %r14;
    ld.shared.f32   %f1, [%r15];
    fma.rn.f32      %f2, %f1, 0f40000000, 0f3F800000;
    st.shared.f32   [%r15], %f2;
    add.s32         %r13, %r13, 128;
    bra             $L_loop;
$L_loop_done:

    fence.proxy.async.shared::cta;
    bar.sync        0;
    @!%p1 bra       $L_end;
    cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd2, {{%r6, %r8}}], [%r9];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group.read 0;
    red.global.add.u32 [%rd3], 1;
$L_end:
    ret;
}}
"""


BY_VALUE = (TensorMapParam(0), TensorMapParam(1), PointerParam(COUNTER))
SCRATCH = (DescriptorScratchParam((0, 128)), PointerParam(COUNTER))
MIXED = (DescriptorScratchParam((0, 128)), TensorMapParam(1), PointerParam(COUNTER))


def copy_binary(params: tuple = BY_VALUE, *, name: str = "copy_tile", rows: int = ROWS, cols: int = COLS,
                box_rows: int = BOX_ROWS, box_cols: int = BOX_COLS, swizzle: int = 128, tile_offset: int = 0,
                cluster: tuple = (1, 1, 1), dynamic_smem_bytes: int | None = None) -> KernelBinary:
    def spec(arg: int) -> TiledTensorMapSpec:
        return TiledTensorMapSpec(arg_index=arg, dtype_code=dtypes.TMA_FLOAT32, element_bytes=4,
                                  global_dims=(rows, cols), global_strides=(cols * 4, 4),
                                  box_dims=(box_rows, box_cols), swizzle_bytes=swizzle)

    tile_bytes = box_rows * box_cols * 4
    return KernelBinary(
        name=name,
        ptx=copy_tile_ptx(name, params, box_rows, box_cols, tile_offset),
        params=params,
        descriptors=(spec(SRC), spec(DST)),
        block=(128, 1, 1),
        cluster=cluster,
        dynamic_smem_bytes=(dynamic_smem_bytes if dynamic_smem_bytes is not None
                            else 1024 + tile_offset + tile_bytes),
        arg_names=("src", "dst", "counter"),
    )


# -------------------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def fresh_caches(tmp_path, monkeypatch):
    """Each test starts with an empty disk cache and nothing loaded."""
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path / "cache"))
    clear_loaded_kernels()
    yield
    clear_loaded_kernels()
    torch.cuda.synchronize()


@pytest.fixture(params=["auto", "driver", "nvjitlink"])
def compiler(request, monkeypatch):
    """Every PTX-to-cubin path the runtime has (nvJitLink is skipped where its library is absent)."""
    if request.param == "nvjitlink":
        try:
            from cuda.bindings import nvjitlink

            nvjitlink.version()
        except Exception as error:  # noqa: BLE001
            pytest.skip(f"nvJitLink is not available: {error}")
    monkeypatch.setenv("ASYNCDSL_PTX_COMPILER", request.param)
    return request.param


def source_matrix(rows: int = ROWS, cols: int = COLS) -> np.ndarray:
    return (np.arange(rows * cols, dtype=np.float32) % 977).reshape(rows, cols)


def operands(rows: int = ROWS, cols: int = COLS):
    """(host source, src, dst poisoned with NaN, zeroed counter) on cuda:0."""
    host = source_matrix(rows, cols)
    src = torch.from_numpy(host).cuda()
    dst = torch.full((rows, cols), float("nan"), dtype=torch.float32, device="cuda")
    counter = torch.zeros(4, dtype=torch.int32, device="cuda")
    return host, src, dst, counter


def as_args(*tensors, stream=None):
    return [device_array(tensor, name, stream=stream)
            for tensor, name in zip(tensors, ("src", "dst", "counter"))]


def assert_copied(host: np.ndarray, dst, counter, ctas: int) -> None:
    torch.cuda.synchronize()
    got = dst.cpu().numpy()
    expected = 2 * host + 1
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32)), \
        f"{np.count_nonzero(got != expected)} of {got.size} elements differ"
    assert int(counter[0].item()) == ctas


GRID = (COLS // BOX_COLS, ROWS // BOX_ROWS)  # (6, 4)
CTAS = GRID[0] * GRID[1]


# ------------------------------------------------------------------------------------------- tests


def test_device_facts():
    facts = device_facts(0)
    print(f"\n{facts}: {facts.multiprocessor_count} SMs, opt-in shared memory "
          f"{facts.max_shared_memory_per_block_optin} B/block, driver {facts.driver_version}")
    assert facts.max_shared_memory_per_block_optin == 232448  # H100 and H200


@pytest.mark.parametrize("params", [BY_VALUE, SCRATCH, MIXED], ids=["by_value", "scratch", "mixed"])
def test_copy_is_bit_exact(compiler, params):
    kernel = load_kernel(copy_binary(params))
    assert kernel.cubin_source == "compiled"
    host, src, dst, counter = operands()
    kernel.launch(GRID, as_args(src, dst, counter))
    assert_copied(host, dst, counter, CTAS)


def test_second_load_hits_the_disk_cache(compiler):
    binary = copy_binary(SCRATCH)
    first = load_kernel(binary)
    assert load_kernel(binary) is first  # the in-memory cache
    clear_loaded_kernels()  # a fresh process, as far as loading goes
    second = load_kernel(binary)
    assert second is not first and (first.cubin_source, second.cubin_source) == ("compiled", "disk")
    host, src, dst, counter = operands()
    second.launch(GRID, as_args(src, dst, counter))
    assert_copied(host, dst, counter, CTAS)


def test_cluster_launch():
    kernel = load_kernel(copy_binary(BY_VALUE, cluster=(2, 1, 1)))
    host, src, dst, counter = operands()
    kernel.launch(GRID, as_args(src, dst, counter))
    assert_copied(host, dst, counter, CTAS)
    with pytest.raises(ArgumentError, match="not a whole number of clusters"):
        kernel.launch((5, 4), as_args(src, dst, counter))


def test_more_than_48_kib_of_dynamic_shared_memory():
    # A 64 KiB tile placed 136 KiB into a ~201 KiB dynamic allocation.
    binary = copy_binary(BY_VALUE, rows=512, cols=128, box_rows=256, box_cols=64, swizzle=0,
                         tile_offset=136 * 1024)
    assert binary.dynamic_smem_bytes == 1024 + 136 * 1024 + 64 * 1024
    kernel = load_kernel(binary)
    print(f"\nstatic shared memory {kernel.static_shared_bytes} B, {kernel.registers_per_thread} "
          "registers/thread")
    host, src, dst, counter = operands(512, 128)
    kernel.launch((2, 2), as_args(src, dst, counter))
    assert_copied(host, dst, counter, 4)


def test_too_much_shared_memory_is_a_resource_error():
    with pytest.raises(ResourceError,
                       match=r"needs 232448 bytes of dynamic shared memory .* allows at most 232448"):
        load_kernel(copy_binary(BY_VALUE, dynamic_smem_bytes=232448))


def test_warm_launches_encode_and_upload_nothing():
    kernel = load_kernel(copy_binary(MIXED))
    host, src, dst, counter = operands()
    for _ in range(10):
        kernel.launch(GRID, as_args(src, dst, counter))
    assert [cache.encode_count for cache in kernel.tensor_maps] == [1, 1]
    assert kernel.scratches[0].upload_count == 1
    assert_copied(host, dst, counter, 10 * CTAS)
    other = torch.full_like(dst, float("nan"))
    kernel.launch(GRID, as_args(src, other, counter))
    # The new destination's map is the first one with its address replaced, not a new encoding.
    assert [cache.encode_count for cache in kernel.tensor_maps] == [1, 1]
    assert [cache.replace_count for cache in kernel.tensor_maps] == [0, 1]
    assert kernel.scratches[0].upload_count == 2
    assert_copied(host, other, counter, 11 * CTAS)


@pytest.mark.parametrize("spelling", ["torch_stream", "int_handle", "cu_stream", "default"])
def test_streams(spelling):
    from cuda.bindings import driver as cu

    kernel = load_kernel(copy_binary(SCRATCH))
    stream = torch.cuda.Stream()
    host, src, dst, counter = operands()
    torch.cuda.synchronize()  # the operands were written on the default stream
    given = {"torch_stream": stream, "int_handle": stream.cuda_stream,
             "cu_stream": cu.CUstream(stream.cuda_stream), "default": None}[spelling]
    kernel.launch(GRID, as_args(src, dst, counter), stream=given)
    stream.synchronize()
    assert_copied(host, dst, counter, CTAS)


def test_scratch_reused_on_another_stream():
    kernel = load_kernel(copy_binary(SCRATCH))
    first, second = torch.cuda.Stream(), torch.cuda.Stream()
    host, src, dst, counter = operands()
    torch.cuda.synchronize()
    kernel.launch(GRID, as_args(src, dst, counter), stream=first)  # uploads on `first`
    kernel.launch(GRID, as_args(src, dst, counter), stream=second)  # waits for that upload
    assert kernel.scratches[0].upload_count == 1
    first.synchronize()
    second.synchronize()
    assert int(counter[0].item()) == 2 * CTAS


def test_launch_from_a_thread_without_a_current_context():
    kernel = load_kernel(copy_binary(BY_VALUE))
    host, src, dst, counter = operands()
    torch.cuda.synchronize()
    failures = []

    def work():
        try:
            kernel.launch(GRID, as_args(src, dst, counter))
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append(error)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not failures, failures
    assert_copied(host, dst, counter, CTAS)


def test_argument_errors_on_real_tensors():
    kernel = load_kernel(copy_binary(BY_VALUE))
    host, src, dst, counter = operands()
    with pytest.raises(ArgumentError,
                       match=r"argument 'src' is a torch.Tensor on device cpu; pass a GPU array"):
        device_array(torch.from_numpy(host), "src")
    with pytest.raises(ArgumentError, match=r"argument 'src' is not contiguous \(row-major\)"):
        device_array(src.t(), "src")
    with pytest.raises(ArgumentError, match="not 16-byte aligned"):
        device_array(torch.zeros(1024, dtype=torch.float32, device="cuda")[1:], "src")
    with pytest.raises(ArgumentError, match=r"argument 'dst' of kernel 'copy_tile' holds 98304 bytes .* "
                                             r"reaches 196608 bytes"):
        kernel.launch(GRID, as_args(src, dst[:128], counter))
    with pytest.raises(ArgumentError, match=r"takes 3 array\(s\) \(src, dst, counter\), but 2 were given"):
        kernel.launch(GRID, as_args(src, dst))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_wrong_device_on_real_tensors():
    kernel = load_kernel(copy_binary(BY_VALUE))
    host, src, dst, counter = operands()
    with pytest.raises(ArgumentError, match=r"argument 'dst' of kernel 'copy_tile' is on cuda:1, but the "
                                             r"kernel was loaded on cuda:0"):
        kernel.launch(GRID, as_args(src, dst.to("cuda:1"), counter))


class _DLPackOnly:
    def __init__(self, tensor):
        self._tensor = tensor

    def __dlpack__(self, **kwargs):
        return self._tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()


class _CudaArrayInterfaceOnly:
    def __init__(self, tensor):
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


@pytest.mark.parametrize("wrap", [_DLPackOnly, _CudaArrayInterfaceOnly],
                         ids=["dlpack", "cuda_array_interface"])
def test_dlpack_and_cuda_array_interface_intake(wrap):
    kernel = load_kernel(copy_binary(BY_VALUE))
    host, src, dst, counter = operands()
    kernel.launch(GRID, as_args(wrap(src), wrap(dst), wrap(counter)))
    assert_copied(host, dst, counter, CTAS)


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    kernel = load_kernel(copy_binary(SCRATCH))
    host = source_matrix()
    src = cupy.asarray(host)
    dst = cupy.full((ROWS, COLS), cupy.nan, dtype=cupy.float32)
    counter = cupy.zeros(4, dtype=cupy.int32)
    stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.Device().synchronize()
    kernel.launch(GRID, as_args(src, dst, counter, stream=stream), stream=stream)
    stream.synchronize()
    assert np.array_equal(cupy.asnumpy(dst).view(np.uint32), (2 * host + 1).view(np.uint32))
    assert int(counter[0]) == CTAS


_JAX_SCRIPT = """
import os, pickle, sys
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
import numpy as np
import jax
from cuda.bindings import driver as cu
from asyncdsl import dtypes
from asyncdsl.runtime import DeviceArray, device_array, load_kernel

binary, grid, ctas = pickle.loads(sys.stdin.buffer.read())
try:
    gpu = jax.devices("gpu")[0]
except RuntimeError as error:
    print("SKIP", error)
    sys.exit(0)
rows, cols = binary.descriptors[0].global_dims
host = (np.arange(rows * cols, dtype=np.float32) % 977).reshape(rows, cols)
src = jax.device_put(host, gpu)
src.block_until_ready()
kernel = load_kernel(binary)

def device_buffer(nbytes, fill):
    err, pointer = cu.cuMemAlloc(nbytes)
    assert not err, err
    assert not cu.cuMemsetD8(pointer, fill, nbytes)[0]
    return pointer

dst, counter = device_buffer(host.nbytes, 0xFF), device_buffer(16, 0)  # 0xFF bytes: NaN poison
kernel.launch(grid, [device_array(src, "src"), \
DeviceArray(int(dst), host.shape, (cols, 1), dtypes.float32, 0),
                     DeviceArray(int(counter), (4,), (1,), dtypes.int32, 0)])
assert not cu.cuCtxSynchronize()[0]
out, count = np.empty_like(host), np.empty(4, np.int32)
assert not cu.cuMemcpyDtoH(out.ctypes.data, dst, out.nbytes)[0]
assert not cu.cuMemcpyDtoH(count.ctypes.data, counter, count.nbytes)[0]
exact = np.array_equal(out.view(np.uint32), (2 * host + 1).view(np.uint32))
print("OK" if exact and count[0] == ctas else f"MISMATCH exact={exact} ctas={count[0]}")
"""


def test_jax_source_array():
    # In a subprocess: JAX's CUDA plugin and torch's CUDA libraries in one process is a gamble
    # this suite should not take, and JAX should not share the GPU memory pool with torch.
    if importlib.util.find_spec("jax") is None:
        pytest.skip("JAX is not installed")
    payload = pickle.dumps((copy_binary(BY_VALUE), GRID, CTAS))
    result = subprocess.run([sys.executable, "-c", _JAX_SCRIPT], input=payload,
                            capture_output=True, timeout=300)
    output = result.stdout.decode() + result.stderr.decode()
    if result.stdout.startswith(b"SKIP"):
        pytest.skip(f"JAX has no GPU backend here: {output.strip()}")
    assert result.returncode == 0 and result.stdout.strip().endswith(b"OK"), output[-3000:]


def test_broken_ptx_is_reported_with_the_log(compiler):
    binary = copy_binary(BY_VALUE)
    broken = KernelBinary(**{**{f: getattr(binary, f) for f in binary.__dataclass_fields__},
                             "ptx": binary.ptx.replace("fma.rn.f32", "fma.rn.f33")})
    with pytest.raises(PtxAssemblyError, match="rejected the PTX of kernel 'copy_tile'") as caught:
        load_kernel(broken)
    print(f"\n{caught.value.message}")


@pytest.mark.parametrize("params", [BY_VALUE, SCRATCH], ids=["by_value", "scratch"])
def test_host_launch_overhead(params):
    kernel = load_kernel(copy_binary(params))
    host, src, dst, counter = operands()
    args = as_args(src, dst, counter)
    # 1000 launches stay within the driver's launch queue, so the host never waits for the GPU.
    launch_seconds = host_seconds_per_call(lambda: kernel.launch(GRID, args), repeat=1000)
    intake_seconds = host_seconds_per_call(lambda: as_args(src, dst, counter), repeat=1000)
    torch.cuda.synchronize()
    print(f"\nhost launch: {launch_seconds * 1e6:.2f} us per launch; device_array x3 (torch): "
          f"{intake_seconds * 1e6:.2f} us")
    assert [cache.encode_count for cache in kernel.tensor_maps] == [1, 1]
    assert launch_seconds < 20e-6  # the target is 5 us; this bound only catches gross regressions


@pytest.mark.parametrize("example, kernel_name",
                         [("swiglu", "swiglu_kernel"), ("quantize_fp8", "rowwise_fp8_quant_split"),
                          ("softmax", "softmax_halves")])
def test_the_default_compile_is_whole_program(monkeypatch, tmp_path, example, kernel_name):
    """A kernel that divides (ptxas calls a subroutine for the slow path of `div.rn.f32`) gets the
    registers of ptxas's whole-program compile, not nvJitLink's relocatable one (which takes more:
    docs/hardware.md §19)."""
    import re

    import asyncdsl as ad
    from asyncdsl.runtime.ptxas import assemble, find_ptxas

    if find_ptxas() is None:
        pytest.skip("no ptxas to compare with")
    monkeypatch.delenv("ASYNCDSL_PTX_COMPILER", raising=False)
    monkeypatch.setenv("ASYNCDSL_CACHE_DIR", str(tmp_path))
    module = importlib.import_module(f"asyncdsl.kernels.{example}")
    kernel = getattr(module, kernel_name)
    specs, constexprs = {"swiglu_kernel": ((ad.ArraySpec((64, 8192), ad.bfloat16),) * 3, {}),
                         "rowwise_fp8_quant_split": ((ad.ArraySpec((64, 8192), ad.bfloat16),
                                                      ad.ArraySpec((64, 8192), ad.float8_e4m3fn),
                                                      ad.ArraySpec((64,), ad.float32)), {}),
                         "softmax_halves": ((ad.ArraySpec((64, 8192), ad.bfloat16),) * 2, {})}[kernel_name]
    binary = kernel.binary(kernel.signature.bind(specs, constexprs, None).specs(None), constexprs)
    whole = int(re.search(r"Used (\d+) registers", assemble(binary.ptx, verbose=True)[1]).group(1))
    clear_loaded_kernels()
    try:
        assert load_kernel(binary).registers_per_thread == whole
    finally:
        clear_loaded_kernels()
