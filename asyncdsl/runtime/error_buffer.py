"""Where a debug-mode kernel reports the first run-time check that failed, and reading it back.

A kernel compiled with ASYNCDSL_DEBUG=1 takes a 16-byte device buffer (`ErrorBufferParam`): the
first failing check of a launch writes its number and its CTA's id there (`passes/to_ptx/assume.py`).
The runtime zeroes the buffer before each launch and reads it after (a synchronisation: debug
mode trades speed for the user's line), raising an AssumptionError that names the check.
"""

from __future__ import annotations

import ctypes

from asyncdsl.errors import AssumptionError, SourceLocation
from asyncdsl.kernel_binary import ErrorBufferParam
from asyncdsl.runtime import driver

BUFFER_BYTES = 16  # check number, then the CTA's x, y, z: four u32


class ErrorBuffer:
    """The error buffer of one loaded debug-mode kernel."""

    def __init__(self, param: ErrorBufferParam, kernel: str, device: int):
        self._checks = param.checks
        self._kernel = kernel
        driver.activate(device)
        self.address = int(driver.check(driver.api().cuMemAlloc(BUFFER_BYTES), "cuMemAlloc"))

    def reset(self, stream: int) -> None:
        driver.check(driver.api().cuMemsetD32Async(self.address, 0, BUFFER_BYTES // 4, stream),
                     "cuMemsetD32Async")

    def raise_if_failed(self, stream: int) -> None:
        """Wait for the launch on `stream` and raise the failure it recorded, if any."""
        cu = driver.api()
        driver.check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
        words = (ctypes.c_uint32 * 4)()
        driver.check(cu.cuMemcpyDtoH(ctypes.addressof(words), self.address, BUFFER_BYTES), "cuMemcpyDtoH")
        number, *cta = words
        if not number:
            return
        check = self._checks[number - 1]
        raise AssumptionError(
            f"kernel {self._kernel}, CTA {tuple(cta)}: {check.message} (checked at run time under "
            "ASYNCDSL_DEBUG=1)",
            SourceLocation(check.file, check.line),
        )

    def __del__(self) -> None:
        try:
            driver.api().cuMemFree(self.address)
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn the driver down
            pass
