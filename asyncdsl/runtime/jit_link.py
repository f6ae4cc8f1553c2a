"""PTX to cubin, in process: nvJitLink when its library is present and matches the driver's major
version, else the driver's own linker (`cuLink*`).

Neither path honours `.extern .shared .align` (docs/hardware.md §1.1); asyncdsl's PTX aligns its
dynamic shared memory at run time, so both give correct cubins.  `ASYNCDSL_PTX_COMPILER` may force
one (`nvjitlink` or `driver`); the default is `auto`.

Loading nvJitLink (`cuda.bindings.nvjitlink` and the library finder it imports) costs 20-70 ms, so
the cubin cache is keyed by `installed_compilers()`, which reads what decides the compiler and what
it makes (the knob, the driver version, the libnvJitLink files the loader can find and the
cuda-bindings installation) from the file system alone: a process whose cubins are all on disk
never loads a compiler.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
from typing import Protocol

from asyncdsl.config import PTX_COMPILER, knobs
from asyncdsl.errors import ArgumentError, CudaError, PtxAssemblyError, user_location
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


class DriverLinkerCompiler:
    """The driver's linker (`cuLinkCreate`/`cuLinkAddData`/`cuLinkComplete`), compiling for the
    device of the current context."""

    def __init__(self, device: int):
        self._device = device

    def compile(self, ptx: str, arch: str, name: str) -> bytes:
        cu = driver.api()
        driver.activate(self._device)
        data = ptx.encode() + b"\0"  # the driver reads PTX as a C string
        state = driver.check(cu.cuLinkCreate(0, [], []), "cuLinkCreate")
        try:
            result = cu.cuLinkAddData(state, cu.CUjitInputType.CU_JIT_INPUT_PTX, data, len(data),
                                      f"{name}.ptx".encode(), 0, [], [])
            if not result[0]:
                result = cu.cuLinkComplete(state)
            if result[0]:
                raise PtxAssemblyError(
                    f"the CUDA driver rejected the PTX of kernel {name!r} for {arch} "
                    f"({driver.cuda_error(result[0], 'cuLink').message}):\n{self._error_log(data)}",
                    user_location(),
                )
            image_address, size = result[1], result[2]
            # The image belongs to the link state: copy it out before destroying the state.
            return ctypes.string_at(int(image_address), size)
        finally:
            driver.check(cu.cuLinkDestroy(state), "cuLinkDestroy")

    def _error_log(self, data: bytes) -> str:
        """The JIT's error log for `data`, from a second, one-shot compile: `cuLinkCreate` would
        write the log size back into an option array that cuda-python frees after the call."""
        cu = driver.api()
        log = bytearray(_ERROR_LOG_BYTES)
        options = [cu.CUjit_option.CU_JIT_ERROR_LOG_BUFFER, cu.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
        result = cu.cuModuleLoadDataEx(data, len(options), options, [log, len(log)])
        if not result[0]:
            driver.check(cu.cuModuleUnload(result[1]), "cuModuleUnload")
        return _text(log)


def _text(log: bytearray) -> str:
    return bytes(log).split(b"\0", 1)[0].decode(errors="replace").strip() or "(the compiler gave no log)"


_compilers: dict[tuple[str, int], PtxCompiler] = {}
_lock = threading.Lock()
_installed: dict[tuple[str, int], str] = {}  # (the knob's choice, driver version) -> name


def installed_compilers(driver_version: int) -> str:
    """Names everything `default_compiler` depends on, without loading a compiler: the knob, the
    driver version, every libnvJitLink the nvidia-* wheels on sys.path, LD_LIBRARY_PATH or a CUDA
    toolkit hold (path, size, modification time) and the cuda-bindings installation.  Two
    processes with equal names make the same compiler; an upgrade of any of them changes it."""
    try:
        choice = knobs.ptx_compiler
    except ArgumentError as error:
        raise error.at(user_location()) from None
    known = _installed.get((choice, driver_version))
    if known is None:
        folders = [os.path.join(entry, "nvidia", "*", "lib") for entry in sys.path if entry]
        folders += knobs.library_paths
        folders += [os.path.join(home, lib) for home in knobs.cuda_homes for lib in ("lib64", "lib")]
        libraries = sorted({path for folder in folders if folder
                            for path in glob.glob(os.path.join(folder, "libnvJitLink.so*"))})
        bindings = getattr(sys.modules.get("cuda.bindings"), "__file__", None)
        files = [*libraries, *([bindings] if bindings else [])]
        stats = [":".join(map(str, identity)) for identity in map(file_identity, files) if identity is not None]
        known = _installed[(choice, driver_version)] = "|".join([choice, str(driver_version), *stats])
    return known


def default_compiler(device: int = 0) -> PtxCompiler:
    """The compiler `ASYNCDSL_PTX_COMPILER` asks for (`auto`, `nvjitlink` or `driver`), made once."""
    try:
        choice = knobs.ptx_compiler
    except ArgumentError as error:
        raise error.at(user_location()) from None
    with _lock:
        compiler = _compilers.get((choice, device))
        if compiler is None:
            compiler = _make_compiler(choice, device)
            _compilers[(choice, device)] = compiler
    return compiler


def _make_compiler(choice: str, device: int) -> PtxCompiler:
    if choice != "driver":
        try:
            nvjitlink = NvJitLinkCompiler()
        except Exception as error:  # noqa: BLE001 - a missing libnvJitLink shows up as several error types
            if choice == "nvjitlink":
                raise CudaError(f"{PTX_COMPILER.variable}=nvjitlink, but nvJitLink cannot be loaded "
                                f"({error})", user_location()) from error
        else:
            # A cubin from a newer major version than the driver's may not load; then use the driver.
            if choice == "nvjitlink" or nvjitlink.version[0] == driver.driver_version() // 1000:
                return nvjitlink
    return DriverLinkerCompiler(device)
