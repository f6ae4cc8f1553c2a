"""PTX to a loadable image, in process: by default the PTX itself, compiled by the driver's JIT
as it loads (`DriverJitCompiler`: a whole-program compile); with `ASYNCDSL_PTX_COMPILER=nvjitlink`
a cubin from nvJitLink, which compiles the PTX as one unit of a program to be linked and pays for
it (no `setmaxnreg`, and more registers wherever ptxas calls a subroutine: below).

No path honours `.extern .shared .align` (docs/hardware.md §1.1); asyncdsl's PTX aligns its
dynamic shared memory at run time, so all give correct code.  `ASYNCDSL_PTX_COMPILER` is `auto`
(the driver's JIT), `driver` (the same) or `nvjitlink`.

Loading nvJitLink (`cuda.bindings.nvjitlink` and the library finder it imports) costs 20-70 ms, so
the cubin cache is keyed by `installed_compilers()`, which reads what decides the compiler and what
it makes (the knob, the driver version, the libnvJitLink files the loader can find and the
cuda-bindings installation) from the file system alone: a process whose cubins are all on disk
never loads a compiler.
"""

from __future__ import annotations

import glob
import os
import sys
import threading
import warnings
from typing import Protocol

from asyncdsl.config import PTX_COMPILER, knobs
from asyncdsl.errors import ArgumentError, CudaError, PerformanceWarning, PtxAssemblyError, user_location
from asyncdsl.runtime import driver
from asyncdsl.runtime.module_cache import file_identity

_ERROR_LOG_BYTES = 1 << 16


class PtxCompiler(Protocol):
    """Turns the PTX of one kernel into a cubin for `arch` (cached under `installed_compilers`)."""

    def compile(self, ptx: str, arch: str, name: str) -> bytes: ...


class NvJitLinkCompiler:
    """nvJitLink (`cuda.bindings.nvjitlink`): needs no CUDA context."""

    def __init__(self) -> None:
        from cuda.bindings import nvjitlink

        self._nvjitlink = nvjitlink
        self.version = tuple(nvjitlink.version())  # raises when libnvJitLink cannot be loaded

    def compile(self, ptx: str, arch: str, name: str) -> bytes:
        nvjitlink = self._nvjitlink
        data = ptx.encode()
        handle = nvjitlink.create(1, [f"-arch={arch}"])
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), f"{name}.ptx")
            nvjitlink.complete(handle)
            cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
            nvjitlink.get_linked_cubin(handle, cubin)
            info = bytearray(nvjitlink.get_info_log_size(handle))
            nvjitlink.get_info_log(handle, info)
            warn_of_advisories(name, _text(info))
        except nvjitlink.nvJitLinkError as error:
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            raise PtxAssemblyError(
                f"nvJitLink rejected the PTX of kernel {name!r} for {arch} ({error}):\n{_text(log)}",
                user_location(),
            ) from None
        finally:
            nvjitlink.destroy(handle)
        return bytes(cubin)


class DriverJitCompiler:
    """The driver's JIT on the PTX itself (`cuModuleLoadDataEx`), compiling for the device of the
    current context: the compiler of every kernel unless `ASYNCDSL_PTX_COMPILER=nvjitlink`.

    The JIT compiles a PTX module as a whole program; nvJitLink and the driver's linker
    (`cuLink*`) compile each PTX input as one unit of a program to be linked, and in that mode
    ptxas keeps the calling convention at every call (the slow path of an IEEE `div.rn.f32` is
    one) and drops `setmaxnreg` ("(C7504) 'setmaxnreg' ignored to maintain compatibility across
    compilation units").  Measured on the H200 (docs/hardware.md §14.7, §19): the attention's
    wgmma mix in a 384-thread CTA, 515 TFLOP/s through nvJitLink, 886 through the JIT; the row
    kernels that divide take 6-21 registers more through nvJitLink (the fp8 quantisation of rows
    of 8192 by four warpgroups 41 against 32: two CTAs an SM instead of four, 0.81x Triton
    against 1.00x), and none takes fewer.

    The image it returns is the PTX (`cuModuleLoadData` takes PTX as well as cubins): the driver
    keeps the machine code it made in its own disk cache (`CUDA_CACHE_PATH`), so loading the image
    again, here or in another process, does not compile it again (with `CUDA_CACHE_DISABLE=1`
    every load compiles: the GEMM's warm first call then costs a JIT compile, not 8 ms).  The
    load here reads the JIT's logs (errors raise, ptxas's performance advisories warn:
    `PerformanceWarning`) and keeps the module for `load_image`, so the kernel's loader does not
    load it a second time.
    """

    def __init__(self, device: int):
        self._device = device

    def compile(self, ptx: str, arch: str, name: str) -> bytes:
        cu = driver.api()
        driver.activate(self._device)
        image = ptx.encode() + b"\0"  # the driver reads PTX as a C string
        info, errors = bytearray(_ERROR_LOG_BYTES), bytearray(_ERROR_LOG_BYTES)
        option = cu.CUjit_option
        options = [option.CU_JIT_INFO_LOG_BUFFER, option.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                   option.CU_JIT_ERROR_LOG_BUFFER, option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
        result = cu.cuModuleLoadDataEx(image, len(options), options, [info, len(info), errors, len(errors)])
        if result[0]:
            raise PtxAssemblyError(
                f"the CUDA driver rejected the PTX of kernel {name!r} for {arch} "
                f"({driver.cuda_error(result[0], 'cuModuleLoadDataEx').message}):\n{_text(errors)}",
                user_location(),
            )
        with _lock:
            _jit_loaded[(self._device, image)] = result[1]
        warn_of_advisories(name, _text(info))
        return image


_jit_loaded: dict[tuple[int, bytes], object] = {}  # (device, PTX image) -> the module its compile loaded


def load_image(image: bytes, device: int):
    """The module of `image` (a cubin, or PTX for the driver's JIT) in `device`'s context, which
    must be current: the one `DriverJitCompiler` loaded while compiling it, if it did, else newly
    loaded."""
    with _lock:
        module = _jit_loaded.pop((device, image), None)
    if module is not None:
        return module
    return driver.check(driver.api().cuModuleLoadData(image), "cuModuleLoadData")


def warn_of_advisories(name: str, log: str) -> None:
    """A `PerformanceWarning` for each "Potential Performance Loss" line of a compiler's log
    (ptxas's C75xx advisories: wgmma serialised, `setmaxnreg` ignored, ...)."""
    for line in log.splitlines():
        if "Potential Performance Loss" in line:
            warnings.warn(f"kernel {name!r}: {line.split(':', 1)[-1].strip()}",
                          PerformanceWarning, stacklevel=2)


def _text(log: bytearray) -> str:
    return bytes(log).split(b"\0", 1)[0].decode(errors="replace").strip() or "(the compiler gave no log)"


_compilers: dict[tuple[str, int], PtxCompiler] = {}
_lock = threading.Lock()
_installed: dict[tuple[str, int], str] = {}  # (the knob's choice, driver version) -> name


def installed_compilers(driver_version: int) -> str:
    """Names everything `compiler_for` depends on, without loading a compiler: which compiler the
    knob picks and the driver version, and for nvJitLink every libnvJitLink the nvidia-* wheels on
    sys.path, LD_LIBRARY_PATH or a CUDA toolkit hold (path, size, modification time) and the
    cuda-bindings installation.  Two processes with equal names make the same compiler; an
    upgrade of any of them changes it."""
    try:
        choice = "nvjitlink" if knobs.ptx_compiler == "nvjitlink" else "driver"
    except ArgumentError as error:
        raise error.at(user_location()) from None
    known = _installed.get((choice, driver_version))
    if known is None:
        stats = []
        if choice == "nvjitlink":
            folders = [os.path.join(entry, "nvidia", "*", "lib") for entry in sys.path if entry]
            folders += knobs.library_paths
            folders += [os.path.join(home, lib) for home in knobs.cuda_homes for lib in ("lib64", "lib")]
            libraries = sorted({path for folder in folders if folder
                                for path in glob.glob(os.path.join(folder, "libnvJitLink.so*"))})
            bindings = getattr(sys.modules.get("cuda.bindings"), "__file__", None)
            files = [*libraries, *([bindings] if bindings else [])]
            stats = [":".join(map(str, identity)) for identity in map(file_identity, files)
                     if identity is not None]
        known = _installed[(choice, driver_version)] = "|".join([choice, str(driver_version), *stats])
    return known


def compiler_for(device: int = 0) -> PtxCompiler:
    """The compiler `ASYNCDSL_PTX_COMPILER` asks for (`auto` and `driver`: the driver's JIT;
    `nvjitlink`), made once per process."""
    try:
        choice = knobs.ptx_compiler
    except ArgumentError as error:
        raise error.at(user_location()) from None
    choice = "nvjitlink" if choice == "nvjitlink" else "driver"
    with _lock:
        compiler = _compilers.get((choice, device))
        if compiler is None:
            compiler = _make_compiler(choice, device)
            _compilers[(choice, device)] = compiler
    return compiler


def _make_compiler(choice: str, device: int) -> PtxCompiler:
    if choice != "nvjitlink":
        return DriverJitCompiler(device)
    try:
        return NvJitLinkCompiler()
    except Exception as error:  # noqa: BLE001 - a missing libnvJitLink shows up as several error types
        raise CudaError(f"{PTX_COMPILER.variable}=nvjitlink, but nvJitLink cannot be loaded ({error})",
                        user_location()) from error
