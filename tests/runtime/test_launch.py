"""`LoadedKernel` and profiled launches against a fake driver module: loading, configuring,
launching, retries, errors, and the installed-compilers name."""

from __future__ import annotations

import ctypes

import pytest
from fake_driver import RecordingDriver, pointer_binary
from runtime_fakes import TorchLikeStream, tiled_spec

import asyncdsl as ad
from asyncdsl import dtypes
from asyncdsl.errors import (
    ArgumentError,
    CopyError,
    CudaError,
    ResourceError,
)
from asyncdsl.runtime import (
    DeviceArray,
    driver,
    launch,
    tensormap,
)


def test_loaded_kernel_loads_configures_and_launches(fake_driver):
    fake = fake_driver()
    kernel = launch.load_kernel(pointer_binary(dynamic_smem_bytes=205824, cluster=(2, 1, 1)))
    assert kernel.cubin_source == "compiled" and launch.load_kernel(pointer_binary(
        dynamic_smem_bytes=205824, cluster=(2, 1, 1))) is kernel
    assert ("cuFuncSetAttribute", ("CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 205824)) in fake.calls
    assert (kernel.static_shared_bytes, kernel.registers_per_thread) == (16, 40)
    x = DeviceArray(0x7F0000040000, (256,), (1,), dtypes.float32, 0)
    kernel.launch((6, 4), [x])
    kernel.launch((6, 4), [x], stream=TorchLikeStream())
    launches = [args for name, args in fake.calls if name == "cuLaunchKernelEx"]
    assert launches == [((6, 4, 1), 0, 205824, ((2, 1, 1),), x.address),
                        ((6, 4, 1), 0x1234, 205824, ((2, 1, 1),), x.address)]
    with pytest.raises(ArgumentError, match="not a whole number of clusters"):
        kernel.launch((5, 4), [x])
    launch.clear_loaded_kernels()
    assert (launch.load_kernel(pointer_binary(dynamic_smem_bytes=205824, cluster=(2, 1, 1))).cubin_source
            == "disk")


def test_small_kernels_keep_the_default_shared_memory_limit(fake_driver):
    fake = fake_driver()
    kernel = launch.load_kernel(pointer_binary(dynamic_smem_bytes=9216))
    assert not [call for call in fake.calls if call[0] == "cuFuncSetAttribute"]
    kernel.launch(3, [DeviceArray(0x7F0000040000, (4,), (1,), dtypes.float32, 0)])
    # no cluster attribute
    assert [args[3] for name, args in fake.calls if name == "cuLaunchKernelEx"] == [()]


def test_a_kernel_with_local_memory_loads_with_a_performance_warning(fake_driver, recwarn):
    fake_driver(local_bytes=8)
    with pytest.warns(ad.PerformanceWarning, match=r"kernel 'touch' uses 8 bytes of local memory a thread"):
        assert launch.load_kernel(pointer_binary()).local_bytes_per_thread == 8
    launch.clear_loaded_kernels()
    fake_driver()
    launch.load_kernel(pointer_binary())
    assert not [w for w in recwarn if issubclass(w.category, ad.PerformanceWarning)]


def test_big_clusters_are_allowed_explicitly(fake_driver):
    fake = fake_driver()
    launch.load_kernel(pointer_binary(cluster=(16, 1, 1)))
    assert ("cuFuncSetAttribute", ("CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)) in fake.calls


def test_shared_memory_beyond_the_device_limit_is_a_resource_error(fake_driver):
    fake_driver(static_shared=1024)
    with pytest.raises(ResourceError, match=r"needs 232000 bytes of dynamic shared memory .* \+ 1024 static "
                                            r"= 233024 bytes per block, but cuda:0 .* allows at most 232448"):
        launch.load_kernel(pointer_binary(dynamic_smem_bytes=232000))


def test_a_launch_without_a_current_context_is_retried(fake_driver):
    fake = fake_driver(launch_results=[201])  # CUDA_ERROR_INVALID_CONTEXT, then success
    kernel = launch.load_kernel(pointer_binary())
    fake.calls.clear()
    kernel.launch(1, [DeviceArray(0x7F0000040000, (4,), (1,), dtypes.float32, 0)])
    assert [name for name, _ in fake.calls] == ["cuLaunchKernelEx", "cuCtxSetCurrent", "cuLaunchKernelEx"]


def test_a_failed_launch_names_the_kernel(fake_driver):
    fake_driver(launch_results=[700])  # CUDA_ERROR_ILLEGAL_ADDRESS
    kernel = launch.load_kernel(pointer_binary())
    with pytest.raises(CudaError, match=r"cuLaunchKernelEx failed: CUDA_ERROR_ILLEGAL_ADDRESS.* launching "
                                        r"kernel 'touch' on grid \(2, 1, 1\)") as caught:
        kernel.launch(2, [DeviceArray(0x7F0000040000, (4,), (1,), dtypes.float32, 0)])
    assert caught.value.code == 700


def test_the_installed_compilers_are_named_without_loading_one(monkeypatch, tmp_path):
    """The cubin key names nvJitLink's installation from the file system alone (loading it costs
    tens of milliseconds a process); a new libnvJitLink changes the name."""
    from asyncdsl.runtime import jit_link

    library = tmp_path / "nvidia" / "cu13" / "lib" / "libnvJitLink.so.13"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"old")
    monkeypatch.setattr(jit_link.sys, "path", [str(tmp_path)])
    monkeypatch.setattr(jit_link, "_installed", {})
    monkeypatch.setenv("ASYNCDSL_PTX_COMPILER", "nvjitlink")
    monkeypatch.setattr(jit_link, "compiler_for", lambda device=0: pytest.fail("a compiler was loaded"))
    before = jit_link.installed_compilers(13000)
    assert str(library) in before and jit_link.installed_compilers(13000) is before  # once a process
    library.write_bytes(b"upgraded")
    monkeypatch.setattr(jit_link, "_installed", {})
    assert jit_link.installed_compilers(13000) not in (before, jit_link.installed_compilers(12080))


class _ProfilingDriver(RecordingDriver):
    """The recording driver telling a profiled launch's two allocations apart: the gate's 4-byte
    counter (which holds the stream while the events and the launch are enqueued) and the buffer."""

    def allocation_address(self, size):
        return 0x7000 if size == 4 else 0x9000


def test_a_profiled_launch_holds_its_stream_until_the_events_and_the_launch_are_enqueued(
        fake_driver, monkeypatch):
    from asyncdsl.kernel_binary import ProfileBufferParam
    from asyncdsl.runtime import profile

    fake_driver()  # the loader's calls, then the profiling driver for the launches
    profiling = _ProfilingDriver()
    profiling.elapsed = [1.5, 1.5]
    monkeypatch.setattr(driver, "_driver_module", profiling)
    monkeypatch.setattr(profile, "_gates", {})
    kernel = launch.load_kernel(pointer_binary(params=(ProfileBufferParam(("a",), 4),), arg_names=()))
    for number in (1, 2):
        profiling.calls.clear()
        launched = kernel.launch_profiled((1, 1, 1), [], stream=0x33)
        names = [name for name, _ in profiling.calls]
        start = names.index("cuStreamWaitValue32")
        assert (names[start:start + 4]
                == ["cuStreamWaitValue32", "cuEventRecord", "cuLaunchKernelEx", "cuEventRecord"])
        assert names[start + 4:start + 6] == ["cuStreamWriteValue32", "cuEventSynchronize"]
        wait, write = profiling.calls[start][1], profiling.calls[start + 4][1]
        assert wait == (0x33, 0x7000, number) and write == (0x55, 0x7000, number)  # numbers only grow
        assert launched.event_ns == 1.5e6


def test_a_profiled_launch_that_fails_still_opens_its_stream(fake_driver, monkeypatch):
    from asyncdsl.kernel_binary import ProfileBufferParam
    from asyncdsl.runtime import profile

    fake_driver()
    failing = _ProfilingDriver(launch_results=[1])  # CUDA_ERROR_INVALID_VALUE
    monkeypatch.setattr(driver, "_driver_module", failing)
    monkeypatch.setattr(profile, "_gates", {})
    kernel = launch.load_kernel(pointer_binary(params=(ProfileBufferParam(("a",), 4),), arg_names=()))
    with pytest.raises(CudaError):
        kernel.launch_profiled((1, 1, 1), [], stream=0x33)
    names = [name for name, _ in failing.calls]
    assert ("cuStreamWriteValue32" in names
            and names.index("cuStreamWriteValue32") > names.index("cuLaunchKernelEx"))
    assert ("cuMemFree", (0x9000,)) in failing.calls


class _ScratchDriver(RecordingDriver):
    """The recording driver with what scratch uploads add: every allocation at an address of its
    own, and which are still allocated."""

    def __init__(self):
        super().__init__()
        self.live = set()
        self._next = 0x7F0010000000

    def allocation_address(self, size):
        self._next += 0x10000
        self.live.add(self._next)
        return self._next

    def cuMemFree(self, address):
        self.live.discard(int(address))
        return super().cuMemFree(address)

    def cuMemcpyHtoDAsync(self, target, source, nbytes, stream):
        return (self.success,)

    def cuCtxSynchronize(self):
        return (self.success,)


def test_a_full_scratch_cache_frees_only_its_own_buffers(fake_driver, monkeypatch):
    from asyncdsl.kernel_binary import DescriptorScratchParam, KernelBinary

    fake_driver()
    scratch_driver = _ScratchDriver()
    replace = REPLACE_ADDRESS(lambda image, address: 0)
    scratch_driver.entry_points["cuTensorMapReplaceAddress"] = replace
    monkeypatch.setattr(driver, "_driver_module", scratch_driver)
    binary = KernelBinary(name="s", ptx=pointer_binary().ptx, block=(128, 1, 1), arg_names=("x",),
                          descriptors=(tiled_spec(arg_index=0),), params=(DescriptorScratchParam((0,)),))
    kernel = launch.load_kernel(binary)
    x = DeviceArray(0x7F0000100000, (256, 192), (192, 1), dtypes.float32, 0)
    kernel.launch(1, [x])  # the kernel's own parameter block uploads a scratch for x
    prepared = kernel.prepare(1)  # a warm layout's block, whose scratch cache fills up and starts over
    monkeypatch.setattr(prepared._params.scratches[0], "capacity", 1)
    for address in (0x7F0000200000, 0x7F0000300000):
        prepared.launch((address,), 0)
    kernel.launch(1, [x])  # x's scratch again: it must still be allocated
    scratches = [args[4] for name, args in scratch_driver.calls if name == "cuLaunchKernelEx"]
    assert scratches[-1] == scratches[0] and scratches[-1] in scratch_driver.live
    del replace


def test_the_compiler_the_knob_picks_is_part_of_the_installed_compilers_name(monkeypatch):
    from asyncdsl.runtime import jit_link

    monkeypatch.setattr(jit_link, "_installed", {})
    names = {}
    for choice in ("auto", "nvjitlink", "driver"):
        monkeypatch.setenv("ASYNCDSL_PTX_COMPILER", choice)
        names[choice] = jit_link.installed_compilers(13000)
    assert names["auto"] == names["driver"] != names["nvjitlink"]  # auto is the driver's JIT
    assert jit_link.installed_compilers(13010) != names["nvjitlink"]


class _FakeNvJitLink:
    version = (13, 0)


@pytest.mark.parametrize("choice, expected",
                         [("auto", "driver"), ("driver", "driver"), ("nvjitlink", "nvjitlink")])
def test_every_kernel_goes_to_the_drivers_jit_unless_nvjitlink_is_asked_for(monkeypatch, choice, expected):
    """A whole-program compile: nvJitLink's relocatable one drops setmaxnreg and takes more
    registers wherever ptxas calls a subroutine (docs/hardware.md §19)."""
    from asyncdsl.runtime import jit_link

    monkeypatch.setattr(jit_link, "_compilers", {})
    monkeypatch.setattr(jit_link, "NvJitLinkCompiler", _FakeNvJitLink)
    monkeypatch.setenv("ASYNCDSL_PTX_COMPILER", choice)
    compiler = jit_link.compiler_for(device=0)
    assert isinstance(compiler, _FakeNvJitLink if expected == "nvjitlink" else jit_link.DriverJitCompiler)


def test_a_kernel_compiled_by_the_drivers_jit_is_loaded_once(fake_driver, monkeypatch):
    """The JIT loads the module as it compiles: the kernel takes that module instead of loading
    the PTX again; from the disk cache, in a new process, the PTX is loaded once."""
    from asyncdsl.runtime import jit_link

    fake = fake_driver()
    monkeypatch.setattr(launch, "compiler_for", lambda device: jit_link.DriverJitCompiler(device))
    kernel = launch.load_kernel(pointer_binary())
    loads = [(name, args[0]) for name, args in fake.calls if name.startswith("cuModuleLoad")]
    assert kernel.cubin_source == "compiled" and [name for name, _ in loads] == ["cuModuleLoadDataEx"]
    assert loads[0][1] == pointer_binary().ptx.encode() + b"\0"  # the image is the PTX, a C string
    assert not jit_link._jit_loaded  # handed over, nothing kept
    launch.clear_loaded_kernels()
    fake.calls.clear()
    assert launch.load_kernel(pointer_binary()).cubin_source == "disk"
    assert [name for name, _ in fake.calls if name.startswith("cuModuleLoad")] == ["cuModuleLoadData"]


def test_a_compilers_performance_advisories_are_warnings():
    from asyncdsl.runtime.jit_link import warn_of_advisories

    log = ("ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain "
           "compatibility across compilation units.\nptxas info    : Used 168 registers")
    with pytest.warns(ad.PerformanceWarning, match=r"kernel 'mix'.*'setmaxnreg' ignored") as caught:
        warn_of_advisories("mix", log)
    assert len(caught) == 1
    warn_of_advisories("mix", "ptxas info    : Used 168 registers")  # nothing to say: no warning


# ------------------------------------------------------------------------- driver entry points

REPLACE_ADDRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def test_a_tensor_map_is_pointed_at_a_new_address_through_the_drivers_own_entry_point(fake_driver):
    fake = fake_driver()
    results, seen = [201, 0, 0], []  # CUDA_ERROR_INVALID_CONTEXT first: no current context yet

    def replace(image, address):
        seen.append((image, address))
        return results.pop(0)

    fake.entry_points["cuTensorMapReplaceAddress"] = function = REPLACE_ADDRESS(replace)
    encoder = tensormap.TensorMapEncoder(tiled_spec())
    encoder.replace_address(0x7000, 0x7F0000010000)
    assert seen == [(0x7000, 0x7F0000010000)] * 2  # again, once the context is current
    assert ("cuCtxSetCurrent", (fake.CUcontext(0x300),)) in fake.calls
    encoder.replace_address(0x7080, 0x7F0000020000)
    assert seen[-1] == (0x7080, 0x7F0000020000)
    lookups = [args for name, args in fake.calls if name == "cuGetProcAddress"]
    assert lookups == [("cuTensorMapReplaceAddress", 12000,
                        fake.CUdriverProcAddress_flags.CU_GET_PROC_ADDRESS_DEFAULT)]
    del function


def test_a_failed_or_missing_entry_point_is_a_cuda_error(fake_driver):
    fake = fake_driver()
    encoder = tensormap.TensorMapEncoder(tiled_spec())
    with pytest.raises(CudaError, match="the CUDA driver has no cuTensorMapReplaceAddress"):
        encoder.replace_address(0x7000, 0x7F0000010000)
    driver._entry_points.clear()
    fake.entry_points["cuTensorMapReplaceAddress"] = function = REPLACE_ADDRESS(lambda image, address: 1)
    with pytest.raises(CudaError, match=r"cuTensorMapReplaceAddress failed: CUDA_ERROR_INVALID_VALUE.* "
                                        r"at 0x7f0000010000"):
        encoder.replace_address(0x7000, 0x7F0000010000)
    with pytest.raises(CopyError, match="not 16-byte aligned"):
        encoder.replace_address(0x7000, 0x7F0000010008)
    del function
